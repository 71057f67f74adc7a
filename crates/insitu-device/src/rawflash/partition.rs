//! A device's raw flash partition: a NAND image of its own (under `raw/` in the device directory) that
//! only the raw interface touches, for software that manages flash itself (BlueDBM's file system, §4).
//! The device's FTL keeps the rest of its flash, so objects, tables and the block interface work beside it
//! as they do on any device: BlueDBM's file system and its block driver with a full FTL, on one device.
//!
//! Each command batch runs through a [`FlashController`] with as many commands in flight as the cards
//! have tags; the controller's clock adds up the simulated time of every batch.
//!
//! Beside the pages, only erase counts are persisted (`raw/wear.json`, written at each sync): on open,
//! each block's write pointer is found again from the spare areas (a page is programmed when its
//! spare-area record is there), so a program cut off by a crash leaves its page unprogrammed, and
//! in-order programming resumes after the last whole page. Erases after the last sync are not counted
//! after a crash.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use insitu_flash::geometry::{BlockId, Geometry};
use insitu_flash::nand::Nand;
use insitu_flash::raw::{BlockState, RawFlash};
use serde::{Deserialize, Serialize};

use super::command::{Completion, Event, FlashAddr, FlashCommand, PageSlice, RawFlashError, Tag};
use super::controller::{FlashController, RawConfig, RawStats};
use super::splitter::{Source, Splitter};
use crate::error::{DeviceError, Result};
use crate::network::Ps;
use crate::profile::Profile;

/// The partition's folder in the device directory.
pub(crate) const DIR: &str = "raw";
const GEOMETRY_FILE: &str = "geometry.json";
/// The line before the geometry's JSON, with its checksum (a flipped digit would open the image on
/// another geometry).
const GEOMETRY_HEADER: &str = "insitu geometry.json crc32=";
const WEAR_FILE: &str = "wear.json";

/// The shape and state of a raw partition, as the host's file system sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawInfo {
    pub cards: u32,
    pub buses_per_card: u32,
    pub chips_per_bus: u32,
    pub blocks_per_chip: u64,
    pub pages_per_block: u32,
    pub page_size: u32,
    pub tags_per_card: u32,
    /// Blocks holding programmed pages: (the block's address, page 0; pages programmed).
    pub written: Vec<(FlashAddr, u32)>,
    /// Erases of all blocks over the partition's life (as of its last sync before a crash).
    pub erases: u64,
    /// Simulated time of every command so far.
    pub modeled_ps: Ps,
    pub stats: RawStats,
}

/// One device's raw partition (see the [module](self) documentation).
#[derive(Debug)]
pub struct RawPartition {
    /// The controller behind the splitter that shares it among the host and in-store processors.
    sp: Splitter<Nand>,
    /// `raw/` of the device directory.
    dir: PathBuf,
    /// The controller's erase count when the erase counts were last saved (nothing to save if unchanged).
    saved_erases: u64,
}

/// Pages read by [`RawPartition::read_at`], and when each slice of each came out of the cards.
#[derive(Debug, Clone, Default)]
pub struct TimedPages {
    /// The pages, in the order asked, each in the buffer its flash read filled (no copy was made): the
    /// page's bytes up to its head, the rest being zeros (see [`crate::rawflash::PageSlice::bytes`]).
    pub pages: Vec<Vec<u8>>,
    /// Each page's spare-area value.
    pub spares: Vec<u64>,
    /// (page index, offset in the page, length, time out of the card relative to the batch's start), in
    /// the order the slices came out. For the local in-store processor, which needs only when each page
    /// is whole, one entry a page: all of it, at its last slice's time.
    pub slices: Vec<(u32, u32, u32, Ps)>,
}

/// Which engine's which page each read of [`RawPartition::stream`] in flight is for, by tag: tags are
/// given out in order, so a window from the oldest one in flight (a map hashed every tag was 3% of a
/// search).
#[derive(Default)]
struct Reading {
    /// The tag of `slots[0]`.
    first: Tag,
    slots: VecDeque<Option<(usize, usize)>>,
}

impl Reading {
    /// Notes a read of page `i` of engine `e`; returns its tag.
    fn insert(&mut self, read: (usize, usize)) -> Tag {
        self.slots.push_back(Some(read));
        self.first.wrapping_add(self.slots.len() as Tag - 1)
    }

    /// The read of `tag`, if it is in flight; it no longer is.
    fn remove(&mut self, tag: Tag) -> Option<(usize, usize)> {
        let read = self.slots.get_mut(tag.wrapping_sub(self.first) as usize)?.take();
        while self.slots.front().is_some_and(Option::is_none) {
            self.slots.pop_front();
            self.first = self.first.wrapping_add(1);
        }
        read
    }
}

impl RawPartition {
    /// Whether `dir` (a device directory) has a raw partition.
    pub fn exists(dir: &Path) -> bool {
        dir.join(DIR).join(GEOMETRY_FILE).exists()
    }

    /// Makes the raw partition of `capacity_bytes` in device directory `dir`.
    pub fn create(dir: &Path, profile: &Profile, capacity_bytes: u64) -> Result<RawPartition> {
        let cfg = RawConfig::from_profile(profile)?;
        let geo = raw_geometry(profile, capacity_bytes);
        geo.validate()?;
        let raw = dir.join(DIR);
        std::fs::create_dir_all(&raw).map_err(|e| DeviceError::io(&raw, e))?;
        let body = serde_json::to_vec_pretty(&geo).map_err(|e| DeviceError::Protocol(e.to_string()))?;
        let nand = Nand::create(&raw, geo)?;
        insitu_flash::persist::write_atomic(
            &raw.join(GEOMETRY_FILE),
            &insitu_flash::persist::with_checksum(GEOMETRY_HEADER, &body),
        )?;
        Ok(RawPartition { sp: Splitter::new(FlashController::new(nand, cfg)?), dir: raw, saved_erases: 0 })
    }

    /// Opens the raw partition of device directory `dir` (formatted for `capacity_bytes`, as the device's
    /// FTL was), finding each block's write pointer again.
    pub fn open(dir: &Path, profile: &Profile, capacity_bytes: u64) -> Result<RawPartition> {
        let cfg = RawConfig::from_profile(profile)?;
        let raw = dir.join(DIR);
        let path = raw.join(GEOMETRY_FILE);
        let geo: Geometry = load_json(&path, "raw partition geometry", GEOMETRY_HEADER)?;
        geo.validate()?;
        // The geometry `create` made of the profile and the capacity: a device.json or a geometry.json
        // that disagree would read every page at another address, or clean blocks past the image's.
        let base = raw_geometry(profile, capacity_bytes);
        if geo != base {
            return Err(DeviceError::Flash(insitu_flash::FlashError::Corrupt {
                what: "raw partition geometry".into(),
                path,
                detail: format!("{geo:?} is not the geometry of the device's profile, {base:?}"),
            }));
        }
        let mut nand = Nand::open(&raw, geo)?;
        let mut blocks = nand.scan_write_pointers()?;
        let wear = raw.join(WEAR_FILE);
        if wear.exists() {
            let counts: Vec<(BlockId, u32)> = load_json(&wear, "raw partition erase counts", "")?;
            for (b, n) in counts.into_iter().filter(|(b, _)| *b < geo.total_blocks()) {
                blocks.entry(b).or_insert(BlockState { erase_count: 0, write_ptr: 0 }).erase_count = n;
            }
        }
        nand.restore(blocks);
        Ok(RawPartition { sp: Splitter::new(FlashController::new(nand, cfg)?), dir: raw, saved_erases: 0 })
    }

    fn ctrl(&self) -> &FlashController<Nand> {
        self.sp.controller()
    }

    /// Bytes of a page.
    pub fn page_size(&self) -> usize {
        self.ctrl().geometry().page_size as usize
    }

    /// Pages its cells read and programmed and blocks they erased since the device opened.
    pub fn nand_stats(&self) -> insitu_flash::raw::NandStats {
        self.ctrl().media().stats()
    }

    pub fn info(&self) -> RawInfo {
        let geo = *self.ctrl().geometry();
        let cards = self.ctrl().config().cards;
        let mut written: Vec<(FlashAddr, u32)> = self
            .ctrl()
            .media()
            .blocks()
            .iter()
            .filter(|(_, s)| s.write_ptr > 0)
            .map(|(b, s)| (self.ctrl().addr_of(geo.first_ppn(*b)), s.write_ptr))
            .collect();
        written.sort();
        RawInfo {
            cards,
            buses_per_card: geo.channels / cards,
            chips_per_bus: geo.chips_per_channel,
            blocks_per_chip: geo.blocks_per_chip,
            pages_per_block: geo.pages_per_block,
            page_size: geo.page_size,
            tags_per_card: self.ctrl().config().tags_per_card,
            written,
            erases: self.ctrl().media().blocks().values().map(|s| s.erase_count as u64).sum(),
            modeled_ps: self.ctrl().now(),
            stats: self.ctrl().stats(),
        }
    }

    /// Programs `pages` (address, spare-area value) with `data`, one page after another in `data`; pages
    /// of one block must come in order. All pages are checked before any is programmed; a page the
    /// controller then fails stops the batch with its error (pages before it stay programmed).
    pub fn write(
        &mut self,
        pages: &[(FlashAddr, u64)],
        data: &[u8],
    ) -> std::result::Result<(), RawFlashError> {
        let ps = self.ctrl().geometry().page_size as usize;
        if data.len() != pages.len() * ps {
            let (card, tag) = pages.first().map_or((0, 0), |p| (p.0.card, 0));
            return Err(RawFlashError::WrongLength { card, tag, got: data.len(), page: pages.len() * ps });
        }
        for (a, _) in pages {
            self.ctrl().ppn_of(a)?;
        }
        let cmds: Vec<FlashCommand> =
            pages.iter().map(|(a, spare)| FlashCommand::write(*a, 0, *spare)).collect();
        self.run(&cmds, |_, _| {}, |i| &data[i * ps..(i + 1) * ps])
    }

    /// Reads `addrs`; returns the pages one after another, then each page's spare-area value (8 bytes,
    /// little endian).
    pub fn read(&mut self, addrs: &[FlashAddr]) -> std::result::Result<Vec<u8>, RawFlashError> {
        let ps = self.ctrl().geometry().page_size as usize;
        for a in addrs {
            self.ctrl().ppn_of(a)?;
        }
        let mut out = vec![0u8; addrs.len() * (ps + 8)];
        let cmds: Vec<FlashCommand> = addrs.iter().map(|a| FlashCommand::read_page(*a, 0)).collect();
        let (data, spares) = out.split_at_mut(addrs.len() * ps);
        self.run(
            &cmds,
            |i, slice| {
                let at = i * ps + slice.offset();
                slice.copy_to(&mut data[at..at + slice.span()]);
                spares[i * 8..i * 8 + 8].copy_from_slice(&slice.spare.to_le_bytes());
            },
            |_| &[],
        )?;
        Ok(out)
    }

    /// Forgets that the pages at `addrs` were checked against their checksums, so that their next read
    /// checks every byte (see [`crate::protocol::RawRead::recheck`]).
    pub fn forget_checks(&self, addrs: &[FlashAddr]) -> std::result::Result<(), RawFlashError> {
        let ppns = addrs.iter().map(|a| self.ctrl().ppn_of(a)).collect::<std::result::Result<Vec<_>, _>>()?;
        self.ctrl().media().forget_verified_pages(&ppns);
        Ok(())
    }

    /// Erases the blocks of `addrs` (their pages are ignored).
    pub fn erase(&mut self, addrs: &[FlashAddr]) -> std::result::Result<(), RawFlashError> {
        for a in addrs {
            self.ctrl().ppn_of(&FlashAddr { page: 0, ..*a })?;
        }
        let cmds: Vec<FlashCommand> = addrs.iter().map(|a| FlashCommand::erase(*a, 0)).collect();
        self.run(&cmds, |_, _| {}, |_| &[])
    }

    /// Forgets which pages were checked against their checksums, so that every later read checks its
    /// pages again (what `fsck` wants).
    pub fn forget_verified(&self) {
        self.sp.controller().media().forget_verified();
    }

    /// Gives back the host's disk space of the programmed pages at `addrs` (see [`Nand::discard_pages`]):
    /// not a flash command, so nothing is modeled and the pages stay programmed until their block is erased.
    pub fn discard(&mut self, addrs: &[FlashAddr]) -> std::result::Result<(), RawFlashError> {
        let ppns = addrs.iter().map(|a| self.ctrl().ppn_of(a)).collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(self.sp.controller_mut().media_mut().discard_pages(&ppns)?)
    }

    /// Runs `cmds` with up to a card's tags in flight per card; hands read slices to `on_slice` with the
    /// command's index, and a write's data from `data_of`. The first failure is returned once every
    /// command in flight has ended.
    fn run<'d>(
        &mut self,
        cmds: &[FlashCommand],
        mut on_slice: impl FnMut(usize, &PageSlice),
        data_of: impl Fn(usize) -> &'d [u8],
    ) -> std::result::Result<(), RawFlashError> {
        let cards = self.ctrl().config().cards as usize;
        let tags = self.ctrl().config().tags_per_card;
        let mut free: Vec<Vec<Tag>> = (0..cards).map(|_| (0..tags).rev().collect()).collect();
        // Which command each (card, tag) runs.
        let mut running: HashMap<(u32, Tag), usize> = HashMap::new();
        let mut next = 0;
        let mut first_error = None;
        loop {
            while next < cmds.len() && first_error.is_none() {
                let card = cmds[next].addr.card;
                let Some(tag) = free[card as usize].pop() else { break };
                match self.sp.issue(Source::Host, FlashCommand { tag, ..cmds[next] }) {
                    Ok(()) => {
                        running.insert((card, tag), next);
                        next += 1;
                    }
                    Err(e) => {
                        free[card as usize].push(tag);
                        first_error = Some(e);
                    }
                }
            }
            let Some((_, c)) = self.sp.poll() else { break };
            let i = running[&(c.card, c.tag)];
            match &c.event {
                Event::ReadData(slice) => on_slice(i, slice),
                Event::WriteDataRequest => self.sp.write_data(Source::Host, c.card, c.tag, data_of(i))?,
                Event::Ack(_) => {}
            }
            if c.event.is_done() {
                running.remove(&(c.card, c.tag));
                free[c.card as usize].push(c.tag);
                if let Event::Ack(Err(e)) = c.event {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Reads `reads` (address, arrival) for `source` through the splitter: each command arrives at the
    /// splitter `arrival` after the batch starts and waits there for a free tag if its
    /// card has none. Used for reads that come from elsewhere at known times: an in-store processor's,
    /// a remote node's over the storage network. The first failed read is returned once all have ended.
    pub fn read_at(
        &mut self,
        source: Source,
        reads: &[(FlashAddr, Ps)],
    ) -> std::result::Result<TimedPages, RawFlashError> {
        for (a, _) in reads {
            self.ctrl().ppn_of(a)?;
        }
        let mut order: Vec<usize> = (0..reads.len()).collect();
        order.sort_by_key(|&i| reads[i].1);
        let base = self.sp.now();
        // Every slice of a read is a range of the one buffer its page was read into: that buffer is kept.
        let mut pages: Vec<Option<Arc<Vec<u8>>>> = vec![None; reads.len()];
        let mut out = TimedPages { pages: Vec::new(), spares: vec![0; reads.len()], slices: Vec::new() };
        let mut first_error = None;
        let mut on = |(_, c): (Source, Completion), out: &mut TimedPages| match c.event {
            Event::ReadData(slice) => {
                let (i, off, len) = (c.tag as usize, slice.offset(), slice.range.len());
                out.spares[i] = slice.spare;
                out.slices.push((c.tag, off as u32, len as u32, c.at_ps - base));
                pages[i].get_or_insert(slice.page);
                None
            }
            Event::Ack(Err(e)) => Some(e),
            _ => None,
        };
        for i in order {
            let (addr, at) = reads[i];
            while let Some(c) = self.sp.poll_until(base + at) {
                if let Some(e) = on(c, &mut out) {
                    first_error.get_or_insert(e);
                }
            }
            // The local in-store processor takes each page whole; a host's slices cross its PCIe and
            // a remote node's the network one by one, so they come slice by slice.
            let cmd = match source {
                Source::Isp => FlashCommand::read_page(addr, i as Tag),
                Source::Host | Source::Remote(_) => FlashCommand::read(addr, i as Tag),
            };
            // A refused read is reported after the ones in flight have ended (none is left behind).
            if let Err(e) = self.sp.issue(source, cmd) {
                first_error.get_or_insert(e);
            }
        }
        while let Some(c) = self.sp.poll() {
            if let Some(e) = on(c, &mut out) {
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let missing = pages.iter().filter(|p| p.is_none()).count();
        if missing > 0 {
            return Err(RawFlashError::Lost { pending: missing });
        }
        // The controller lets go of a page when its read ends: the buffer is taken over, not copied.
        out.pages = pages
            .into_iter()
            .flatten()
            .map(|p| Arc::try_unwrap(p).unwrap_or_else(|p| (*p).clone()))
            .collect();
        Ok(out)
    }

    /// Streams pages to engines of the in-store processor, as a closed loop (BlueDBM §7): engine `e` reads
    /// `engines[e]` in order with up to `depth` reads in flight, and works `work(e, i)` on its page `i`
    /// once the page has arrived and the engine is free; as it starts on a page it asks for another (that page's
    /// buffer is free again). Reads go out at least `gap_ps` apart, all engines together (a throttle;
    /// 0 for none). `on_page(e, i, page, spare)` gets page `i` of engine `e` as it arrives. Returns when
    /// the last engine finished, after the start. The first failed read is returned once every read in
    /// flight has ended.
    pub fn stream(
        &mut self,
        engines: &[Vec<FlashAddr>],
        depth: u32,
        work: &dyn Fn(usize, usize) -> Ps,
        gap_ps: Ps,
        mut on_page: impl FnMut(usize, usize, &[u8], u64),
    ) -> std::result::Result<Ps, RawFlashError> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        for a in engines.iter().flatten() {
            self.ctrl().ppn_of(a)?;
        }
        let base = self.sp.now();
        let ps = self.ctrl().geometry().page_size as usize;
        // A page read by its head is handed over whole, its zeros after the head put back here.
        let mut whole = Vec::new();
        // When each engine asks for its next page.
        let mut asks: BinaryHeap<Reverse<(Ps, usize)>> = BinaryHeap::new();
        for (e, pages) in engines.iter().enumerate() {
            for _ in 0..(depth.max(1) as usize).min(pages.len()) {
                asks.push(Reverse((0, e)));
            }
        }
        let mut next = vec![0usize; engines.len()];
        let mut free_at = vec![0 as Ps; engines.len()];
        // Which engine's which page each tag reads.
        let mut reading = Reading::default();
        let mut first_error = None;
        // When the throttle lets the next read go.
        let mut next_slot: Ps = 0;
        loop {
            let limit = asks.peek().map(|Reverse((t, _))| base.saturating_add(*t));
            let event = match limit {
                Some(l) => self.sp.poll_until(l),
                None => self.sp.poll(),
            };
            match event {
                Some((_, c)) => match c.event {
                    Event::ReadData(slice) => {
                        let Some((e, i)) = reading.remove(c.tag) else { continue };
                        let page = slice.bytes();
                        let page = if page.len() < ps {
                            whole.resize(ps, 0);
                            slice.copy_to(&mut whole);
                            &whole[..]
                        } else {
                            page
                        };
                        on_page(e, i, page, slice.spare);
                        let start = (c.at_ps - base).max(free_at[e]);
                        free_at[e] = start.saturating_add(work(e, i));
                        asks.push(Reverse((start, e)));
                    }
                    Event::Ack(Err(err)) => {
                        reading.remove(c.tag);
                        first_error.get_or_insert(err);
                    }
                    _ => {}
                },
                None if limit.is_none() => break,
                None => {
                    let Reverse((t, e)) = asks.pop().expect("peeked");
                    let i = next[e];
                    if i >= engines[e].len() || first_error.is_some() {
                        continue;
                    }
                    let at = (self.sp.now() - base).max(t);
                    if at < next_slot {
                        asks.push(Reverse((next_slot, e)));
                        continue;
                    }
                    next_slot = at.saturating_add(gap_ps);
                    next[e] += 1;
                    let tag = reading.insert((e, i));
                    if let Err(err) = self.sp.issue(Source::Isp, FlashCommand::read_page(engines[e][i], tag))
                    {
                        reading.remove(tag);
                        first_error.get_or_insert(err);
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(free_at.into_iter().max().unwrap_or(0)),
        }
    }

    /// [`RawPartition::sync`] when anything changed since the last (for a close: nothing to do after a read).
    pub fn sync_if_changed(&mut self) -> Result<()> {
        if self.ctrl().media().unsynced() || self.ctrl().stats().erases != self.saved_erases {
            return self.sync();
        }
        Ok(())
    }

    /// Makes programmed pages durable, and the erase counts when blocks were erased since they were saved.
    pub fn sync(&mut self) -> Result<()> {
        self.ctrl().media().sync()?;
        let erases = self.ctrl().stats().erases;
        if erases == self.saved_erases {
            return Ok(());
        }
        let mut counts: Vec<(BlockId, u32)> = self
            .ctrl()
            .media()
            .blocks()
            .iter()
            .filter(|(_, s)| s.erase_count > 0)
            .map(|(b, s)| (*b, s.erase_count))
            .collect();
        counts.sort_unstable();
        let body = serde_json::to_vec(&counts).map_err(|e| DeviceError::Protocol(e.to_string()))?;
        insitu_flash::persist::write_atomic(&self.dir.join(WEAR_FILE), &body)?;
        self.saved_erases = erases;
        Ok(())
    }
}

/// A JSON file of the raw partition, or the error naming it as `what` when it does not parse.
/// The raw partition of a device of `profile` holding `capacity_bytes`: the profile's geometry, with
/// enough blocks a chip for the capacity (as large as the FTL's partition).
fn raw_geometry(profile: &Profile, capacity_bytes: u64) -> Geometry {
    let base = profile.base_geometry();
    let blocks = capacity_bytes.div_ceil(base.block_bytes()).div_ceil(base.chips()).max(1);
    Geometry { blocks_per_chip: blocks, ..base }
}

/// Reads a JSON file, after its checksum line `header` if it has one (`""`: none is written).
fn load_json<T: serde::de::DeserializeOwned>(path: &Path, what: &'static str, header: &str) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| DeviceError::io(path, e))?;
    let corrupt = |detail: String| {
        DeviceError::Flash(insitu_flash::FlashError::Corrupt {
            what: what.into(),
            path: path.to_path_buf(),
            detail,
        })
    };
    let json = if header.is_empty() {
        &bytes[..]
    } else {
        insitu_flash::persist::checked_body(header, &bytes).map_err(corrupt)?
    };
    serde_json::from_slice(json).map_err(|e| corrupt(e.to_string()))
}
