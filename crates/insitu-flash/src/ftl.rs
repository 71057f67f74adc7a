//! Page-level flash translation layer.
//!
//! - Out-of-place writes: a logical page is always programmed to a fresh physical page; the old one becomes
//!   invalid. Host writes and GC relocations fill separate active blocks.
//! - Trim unmaps logical pages.
//! - Greedy garbage collection: when free blocks fall below a low watermark, the closed block with the fewest
//!   valid pages is the victim; its valid pages are relocated, the relocations are made durable, and only then
//!   is the victim erased (so a crash never loses the only copy of a page).
//! - Blocks a delete, an abort or a flush leaves without a valid page are erased then (`Ftl::reclaim_emptied`),
//!   not left for GC, and erased blocks are written before fresh ones: the image on the host's disk holds the
//!   blocks the data needs, not every block ever written (a sparse image of a 4 TB device stays as large as
//!   what it stores, and rewriting data overwrites pages the host already caches).
//! - Wear: erase counts per block; the erased block with the lowest count is taken first, fresh (never
//!   written) blocks only when none is erased. Wear is thus levelled over the blocks in use, not over the
//!   whole device as a drive's would be: spreading over never-written blocks would grow the image to the
//!   device's size.
//! - Write amplification = pages programmed (host + GC) / pages written by the host.
//!
//! Every state change is journaled ([`Record`]); `Ftl::apply` replays them after a restart.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::{FlashError, Result};
use crate::geometry::{BlockId, Geometry, Lpn, Ppn};
use crate::nand::Nand;
use crate::pagemap::PageMap;
use crate::persist::{Journal, Record};
use crate::raw::{BlockState, RawFlash};

const INVALID: Lpn = u64::MAX;
/// Below this much free space on the host's file system holding the image, the blocks a trim empties are
/// erased at once and every erased block's image space is given back to it (see `Ftl::trim`).
pub const HOST_SLACK_BYTES: u64 = 64 << 20;
/// Longest run [`Ftl::read_with`] hands out at once: small enough that a checksum pass and the caller's
/// pass over the same bytes both hit the CPU cache.
pub const MAX_RUN_BYTES: u64 = 64 << 10;

/// Reverse map of one touched block.
#[derive(Debug, Clone)]
struct BlockRev {
    /// `lpns[page]` is the logical page stored there if still valid, else `INVALID`.
    lpns: Vec<Lpn>,
    valid: u32,
}

/// FTL counters since format (restored across restarts through the checkpoint of NAND counters is not
/// needed: these are per-open session figures used by meters and the WA benchmark).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FtlStats {
    pub host_pages_written: u64,
    pub gc_pages_written: u64,
    pub pages_trimmed: u64,
    pub gc_runs: u64,
    pub blocks_reclaimed: u64,
    /// Victims garbage collection left where they were: a live page of each does not match its checksum
    /// (it cannot be moved without taking its damage along under a fresh checksum; fsck names it).
    pub blocks_set_aside: u64,
}

impl FtlStats {
    /// Pages programmed per page the host wrote (1.0 when nothing was written).
    pub fn write_amplification(&self) -> f64 {
        if self.host_pages_written == 0 {
            1.0
        } else {
            (self.host_pages_written + self.gc_pages_written) as f64 / self.host_pages_written as f64
        }
    }
}

/// Wear summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WearStats {
    pub min_erase_count: u32,
    pub max_erase_count: u32,
    pub mean_erase_count: f64,
}

/// The FTL over raw media `M` (the NAND image by default).
#[derive(Debug)]
pub struct Ftl<M = Nand> {
    pub(crate) nand: M,
    map: PageMap,
    rev: HashMap<BlockId, BlockRev>,
    free: BinaryHeap<Reverse<(u32, BlockId)>>,
    next_fresh: BlockId,
    /// Blocks whose last valid page went: erased by [`Ftl::reclaim_emptied`] once closed (may hold blocks
    /// written to again since, which it skips).
    emptied: Vec<BlockId>,
    host_active: Option<BlockId>,
    gc_active: Option<BlockId>,
    gc_low: u64,
    gc_high: u64,
    pub(crate) journal: Journal,
    stats: FtlStats,
    /// Blocks garbage collection set aside, with their valid pages then: a live page of each failed its
    /// checksum when read to be moved. Passed over as victims until a page of the block is invalidated
    /// (the damaged one, maybe: overwritten or trimmed).
    set_aside: HashMap<BlockId, u32>,
}

impl<M: RawFlash> Ftl<M> {
    /// Builds the FTL over `nand` whose block states were restored, with the map given as runs.
    pub(crate) fn new(nand: M, journal: Journal) -> Self {
        let total = nand.geometry().total_blocks();
        // GC keeps a handful of erased blocks in hand: enough for the GC block itself and progress.
        let gc_low = (total / 256).clamp(3, 64);
        let gc_high = gc_low + (total / 256).clamp(2, 64);
        let next_fresh = nand.frontier();
        Ftl {
            nand,
            map: PageMap::new(),
            rev: HashMap::new(),
            free: BinaryHeap::new(),
            next_fresh,
            emptied: Vec::new(),
            host_active: None,
            gc_active: None,
            gc_low,
            gc_high,
            journal,
            stats: FtlStats::default(),
            set_aside: HashMap::new(),
        }
    }

    /// An FTL over fresh raw media of any kind, journaling into `dir`: what [`crate::Flash`] builds over
    /// its NAND image, for other media (BlueDBM's block device with a full FTL over the raw flash
    /// interface, §4).
    pub fn on_fresh_media(media: M, dir: &std::path::Path) -> Result<Self> {
        if media.frontier() != 0 {
            return Err(FlashError::NandViolation("an FTL starts on media that was never programmed".into()));
        }
        Ok(Ftl::new(media, Journal::create(dir, 0)?))
    }

    pub fn geometry(&self) -> &Geometry {
        self.nand.geometry()
    }

    pub fn map(&self) -> &PageMap {
        &self.map
    }

    pub fn stats(&self) -> FtlStats {
        self.stats
    }

    /// The raw media below.
    pub fn nand(&self) -> &M {
        &self.nand
    }

    /// Free (erased) blocks: recycled ones plus never-used ones.
    pub fn free_blocks(&self) -> u64 {
        self.free.len() as u64 + self.geometry().total_blocks().saturating_sub(self.next_fresh)
    }

    pub fn wear(&self) -> WearStats {
        let total = self.geometry().total_blocks();
        let touched = self.nand.blocks();
        let sum: u64 = touched.values().map(|b| b.erase_count as u64).sum();
        let max = touched.values().map(|b| b.erase_count).max().unwrap_or(0);
        let min = if (touched.len() as u64) < total {
            0
        } else {
            touched.values().map(|b| b.erase_count).min().unwrap_or(0)
        };
        WearStats { min_erase_count: min, max_erase_count: max, mean_erase_count: sum as f64 / total as f64 }
    }

    // ---------------------------------------------------------------- state changes shared with replay

    fn rev_mut(&mut self, block: BlockId) -> &mut BlockRev {
        let ppb = self.nand.geometry().pages_per_block as usize;
        self.rev.entry(block).or_insert_with(|| BlockRev { lpns: vec![INVALID; ppb], valid: 0 })
    }

    fn invalidate(&mut self, ppn: Ppn) {
        let geo = *self.nand.geometry();
        let rev = self.rev_mut(geo.block_of(ppn));
        let slot = &mut rev.lpns[geo.page_in_block(ppn) as usize];
        if *slot != INVALID {
            *slot = INVALID;
            rev.valid -= 1;
            if rev.valid == 0 {
                self.emptied.push(geo.block_of(ppn));
            }
        }
    }

    fn map_page(&mut self, lpn: Lpn, ppn: Ppn) {
        if let Some(old) = self.map.set(lpn, ppn) {
            self.invalidate(old);
        }
        let geo = *self.nand.geometry();
        let rev = self.rev_mut(geo.block_of(ppn));
        rev.lpns[geo.page_in_block(ppn) as usize] = lpn;
        rev.valid += 1;
    }

    fn unmap_page(&mut self, lpn: Lpn) -> bool {
        match self.map.unset(lpn) {
            Some(old) => {
                self.invalidate(old);
                true
            }
            None => false,
        }
    }

    fn mark_erased(&mut self, block: BlockId) -> Result<()> {
        self.set_aside.remove(&block);
        if let Some(rev) = self.rev.remove(&block) {
            if rev.valid != 0 {
                return Err(FlashError::NandViolation(format!(
                    "erase of block {block} that still holds {} valid pages",
                    rev.valid
                )));
            }
        }
        Ok(())
    }

    /// Applies a journaled FTL record to the in-memory state (restart). Namespace records are ignored here.
    pub(crate) fn apply(&mut self, rec: &Record) -> Result<()> {
        match rec {
            Record::Program { lpn, ppn, count } => {
                self.nand.replay_program(*ppn, *count);
                for i in 0..*count as u64 {
                    self.map_page(lpn + i, ppn + i);
                }
            }
            Record::Relocate { ppn, lpns } => {
                self.nand.replay_program(*ppn, lpns.len() as u32);
                for (i, lpn) in lpns.iter().enumerate() {
                    self.map_page(*lpn, ppn + i as u64);
                }
            }
            Record::Trim { lpn, count } => {
                for l in *lpn..lpn + count {
                    self.unmap_page(l);
                }
            }
            Record::Erase { block } => {
                self.mark_erased(*block)?;
                self.nand.replay_erase(*block);
            }
            _ => {}
        }
        Ok(())
    }

    /// Restores mappings from checkpoint runs (into an empty map), a block segment at a time.
    pub(crate) fn restore_map(&mut self, runs: &[(Lpn, Ppn, u64)]) {
        let geo = *self.nand.geometry();
        let ppb = geo.pages_per_block as u64;
        for (lpn, ppn, n) in runs {
            let mut done = 0;
            while done < *n {
                let p = ppn + done;
                let block = geo.block_of(p);
                let first = geo.page_in_block(p) as usize;
                let seg = (ppb - first as u64).min(n - done);
                let rev = self.rev_mut(block);
                for i in 0..seg as usize {
                    if rev.lpns[first + i] == INVALID {
                        rev.valid += 1;
                    }
                    rev.lpns[first + i] = lpn + done + i as u64;
                }
                self.map.set_run(lpn + done, p, seg);
                done += seg;
            }
        }
    }

    /// After restore/replay: rebuild the free list. Partly written blocks stay closed (GC reclaims them).
    pub(crate) fn finish_recovery(&mut self) {
        self.next_fresh = self.nand.frontier();
        self.free.clear();
        let mut erased: Vec<(u32, BlockId)> = self
            .nand
            .blocks()
            .iter()
            .filter(|(_, s)| s.write_ptr == 0)
            .map(|(b, s)| (s.erase_count, *b))
            .collect();
        erased.sort_unstable();
        self.free.extend(erased.into_iter().map(Reverse));
        self.host_active = None;
        self.gc_active = None;
        // Blocks left without a valid page before the restart: the next reclaim erases them.
        self.emptied = self
            .nand
            .blocks()
            .iter()
            .filter(|(b, s)| s.write_ptr > 0 && self.rev.get(b).is_none_or(|r| r.valid == 0))
            .map(|(b, _)| *b)
            .collect();
    }

    /// Touched blocks as `(id, state)` for a checkpoint.
    pub(crate) fn block_states(&self) -> Vec<(BlockId, BlockState)> {
        let mut v: Vec<_> = self.nand.blocks().iter().map(|(b, s)| (*b, *s)).collect();
        v.sort_unstable_by_key(|(b, _)| *b);
        v
    }

    // ---------------------------------------------------------------- allocation

    /// The erased block worn least, or else the next fresh one (see the module documentation).
    fn alloc_block(&mut self) -> Result<BlockId> {
        if let Some(Reverse((_, b))) = self.free.pop() {
            return Ok(b);
        }
        if self.next_fresh < self.geometry().total_blocks() {
            self.next_fresh += 1;
            return Ok(self.next_fresh - 1);
        }
        Err(FlashError::NandViolation("no erased block left for writing".into()))
    }

    /// The next programmable page of the active block for `gc` or host writes, opening a block if needed;
    /// returns (first ppn, pages left in the block).
    fn active_room(&mut self, gc: bool) -> Result<(Ppn, u32)> {
        let ppb = self.geometry().pages_per_block;
        let current = if gc { self.gc_active } else { self.host_active };
        let block = match current {
            Some(b) if self.nand.block(b).write_ptr < ppb => b,
            _ => {
                if !gc {
                    self.collect_garbage()?;
                }
                let b = self.alloc_block()?;
                if gc {
                    self.gc_active = Some(b);
                } else {
                    self.host_active = Some(b);
                }
                b
            }
        };
        let wp = self.nand.block(block).write_ptr;
        Ok((self.geometry().first_ppn(block) + wp as u64, ppb - wp))
    }

    // ---------------------------------------------------------------- data path

    /// Writes whole pages `data` at consecutive logical pages from `lpn`.
    pub fn write(&mut self, lpn: Lpn, data: &[u8]) -> Result<()> {
        let ps = self.geometry().page_size as usize;
        debug_assert_eq!(data.len() % ps, 0);
        let pages = (data.len() / ps) as u64;
        let mut done = 0u64;
        while done < pages {
            let (ppn, room) = self.active_room(false)?;
            let n = (pages - done).min(room as u64);
            let lpns: Vec<Lpn> = (lpn + done..lpn + done + n).collect();
            self.nand.program(ppn, &lpns, &data[done as usize * ps..(done + n) as usize * ps])?;
            for (i, l) in lpns.iter().enumerate() {
                self.map_page(*l, ppn + i as u64);
            }
            self.journal.append(&Record::Program { lpn: lpn + done, ppn, count: n as u32 })?;
            self.stats.host_pages_written += n;
            done += n;
        }
        Ok(())
    }

    /// Reads `buf.len() / page_size` logical pages from `lpn` into `buf`, a run of physically
    /// consecutive pages at a time (the runs of [`Ftl::read_with`]) by [`RawFlash::read_into`]; unmapped
    /// pages read as zeros.
    pub fn read(&self, lpn: Lpn, buf: &mut [u8]) -> Result<()> {
        let ps = self.geometry().page_size as usize;
        self.for_each_run(lpn, (buf.len() / ps) as u64, |i, ppn, lpns| {
            let dst = &mut buf[i as usize * ps..(i as usize + lpns.len()) * ps];
            match ppn {
                Some(ppn) => self.nand.read_into(ppn, lpns, dst),
                None => {
                    dst.fill(0);
                    Ok(())
                }
            }
        })
    }

    /// Hands the `pages` logical pages from `lpn` to `f` in order, as slices of at most
    /// [`MAX_RUN_BYTES`]: physically consecutive pages go together, in place (no copy); unmapped pages
    /// come as zeros.
    pub fn read_with(&self, lpn: Lpn, pages: u64, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        // Unmapped pages read as zeros: a page of them, made only when one is met (a read of a few bytes
        // is the common call, from a gather a row at a time).
        let mut zeros = Vec::new();
        self.for_each_run(lpn, pages, |_, ppn, lpns| match ppn {
            Some(ppn) => self.nand.with_pages(ppn, lpns, &mut f)?,
            None => {
                zeros.resize(self.geometry().page_size as usize, 0);
                f(&zeros)
            }
        })
    }

    /// Walks the `pages` logical pages from `lpn` in runs, calling `run(first, ppn, lpns)` with the run's
    /// first page (counted from `lpn`) and its logical pages: physically consecutive mapped pages, at most
    /// [`MAX_RUN_BYTES`] of them, from physical page `Some(ppn)`; or one unmapped page, with `None`.
    fn for_each_run(
        &self,
        lpn: Lpn,
        pages: u64,
        mut run: impl FnMut(u64, Option<Ppn>, &[Lpn]) -> Result<()>,
    ) -> Result<()> {
        let max_run = (MAX_RUN_BYTES / self.geometry().page_size as u64).max(1);
        let mut lpns: Vec<Lpn> = Vec::new();
        let mut i = 0u64;
        while i < pages {
            lpns.clear();
            lpns.push(lpn + i);
            let Some(ppn) = self.map.get(lpn + i) else {
                run(i, None, &lpns)?;
                i += 1;
                continue;
            };
            let mut j = i + 1;
            while j < pages && j - i < max_run && self.map.get(lpn + j) == Some(ppn + (j - i)) {
                lpns.push(lpn + j);
                j += 1;
            }
            run(i, Some(ppn), &lpns)?;
            i = j;
        }
        Ok(())
    }

    /// Unmaps `count` logical pages from `lpn`.
    pub fn trim(&mut self, lpn: Lpn, count: u64) -> Result<()> {
        let mut n = 0;
        for l in lpn..lpn + count {
            if self.unmap_page(l) {
                n += 1;
            }
        }
        if n > 0 {
            self.journal.append(&Record::Trim { lpn, count })?;
        }
        self.stats.pages_trimmed += n;
        // On a short host disk the blocks go at once (their image space with them: see `erase_victims`),
        // so that removing data gives a full disk room; otherwise at the commit that follows.
        if n > 0 && self.host_short() {
            self.reclaim_emptied()?;
        }
        Ok(())
    }

    /// Whether the host's file system holding the image has less than [`HOST_SLACK_BYTES`] free.
    pub(crate) fn host_short(&self) -> bool {
        self.nand.host_free_bytes().is_some_and(|free| free < HOST_SLACK_BYTES)
    }

    /// Erases the closed blocks whose last valid page went since the last call (a delete's, an abort's, an
    /// overwrite's), after making durable what emptied them; they become the next blocks written. Called
    /// once a change is committed: a delete, an abort, a flush.
    pub fn reclaim_emptied(&mut self) -> Result<()> {
        if self.emptied.is_empty() {
            return Ok(());
        }
        let mut candidates = std::mem::take(&mut self.emptied);
        candidates.sort_unstable();
        candidates.dedup();
        let mut dead = Vec::new();
        for b in candidates {
            let written = self.nand.blocks().get(&b).is_some_and(|s| s.write_ptr > 0);
            if !written || self.rev.get(&b).is_some_and(|r| r.valid > 0) {
                continue;
            }
            if Some(b) == self.host_active || Some(b) == self.gc_active {
                // Written to again or erased once it is closed.
                self.emptied.push(b);
            } else {
                dead.push(b);
            }
        }
        self.erase_victims(&mut dead, false)
    }

    /// Makes programmed data and journaled records durable.
    pub fn sync(&mut self) -> Result<()> {
        self.nand.sync()?;
        self.journal.sync()
    }

    // ---------------------------------------------------------------- garbage collection

    /// Runs greedy GC if free blocks are below the low watermark, until the high watermark is reached.
    /// Victims are erased in batches, each batch only after its relocations are durable.
    pub fn collect_garbage(&mut self) -> Result<()> {
        if self.free_blocks() >= self.gc_low {
            return Ok(());
        }
        self.stats.gc_runs += 1;
        let mut pending: Vec<BlockId> = Vec::new();
        let mut moved = false;
        while self.free_blocks() < self.gc_high {
            let Some(victim) = self.pick_victim(&pending) else { break };
            match self.relocate(victim) {
                Ok(n) => moved |= n > 0,
                // A live page that does not read back whole stays where it is, damage and all, for reads
                // and fsck to name: the block is passed over (some of its pages may have moved already).
                Err(FlashError::CorruptPage { .. }) => {
                    let valid = self.rev.get(&victim).map_or(0, |r| r.valid);
                    self.set_aside.insert(victim, valid);
                    self.stats.blocks_set_aside += 1;
                    moved = true;
                    continue;
                }
                Err(e) => return Err(e),
            }
            pending.push(victim);
            if self.free_blocks() <= 1 || self.free_blocks() + pending.len() as u64 >= self.gc_high {
                self.erase_victims(&mut pending, std::mem::take(&mut moved))?;
            }
        }
        self.erase_victims(&mut pending, moved)
    }

    /// Erases GC's victims; `moved` says whether live pages were relocated out of them since the last sync.
    fn erase_victims(&mut self, pending: &mut Vec<BlockId>, moved: bool) -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        // Relocations must be durable before the old copies are erased (and then overwritten), and so must
        // the records that emptied the victims (a delete, a trim, an overwrite) together with the pages
        // those records point to (an overwrite's new copy): with nothing relocated and nothing programmed
        // since the last sync, only the journal has to reach the disk.
        if moved || self.nand.unsynced() {
            self.sync()?;
        } else {
            self.journal.sync()?;
        }
        let discard = self.host_short();
        for b in pending.drain(..) {
            self.mark_erased(b)?;
            self.nand.erase(b)?;
            if discard {
                // Best effort: a file system that cannot punch holes keeps the space, as before.
                let _ = self.nand.discard(b);
            }
            self.journal.append(&Record::Erase { block: b })?;
            let ec = self.nand.block(b).erase_count;
            self.free.push(Reverse((ec, b)));
            self.stats.blocks_reclaimed += 1;
        }
        self.journal.flush()
    }

    /// The blocks written and no longer written to (neither active block), with their valid pages.
    fn closed_blocks(&self) -> impl Iterator<Item = (BlockId, u32)> + '_ {
        self.nand
            .blocks()
            .iter()
            .filter(|(b, s)| s.write_ptr > 0 && Some(**b) != self.host_active && Some(**b) != self.gc_active)
            .map(|(b, _)| (*b, self.rev.get(b).map_or(0, |r| r.valid)))
    }

    /// The closed block with the fewest valid pages (and at least one invalid or unwritten page).
    fn pick_victim(&self, exclude: &[BlockId]) -> Option<BlockId> {
        let ppb = self.geometry().pages_per_block;
        self.closed_blocks()
            .filter(|(b, _)| !exclude.contains(b))
            .filter(|(b, valid)| self.set_aside.get(b).is_none_or(|v| v != valid))
            .filter(|(_, valid)| *valid < ppb)
            .min_by_key(|(b, valid)| (*valid, *b))
            .map(|(b, _)| b)
    }

    /// Moves the live pages of `victim` to the GC block; returns how many there were.
    fn relocate(&mut self, victim: BlockId) -> Result<usize> {
        let geo = *self.geometry();
        let ps = geo.page_size as usize;
        let first = geo.first_ppn(victim);
        let live: Vec<(u32, Lpn)> = match self.rev.get(&victim) {
            Some(r) => r
                .lpns
                .iter()
                .enumerate()
                .filter(|(_, l)| **l != INVALID)
                .map(|(p, l)| (p as u32, *l))
                .collect(),
            None => Vec::new(),
        };
        // Every byte a move rewrites is checked now, not taken as checked by an earlier read: a page changed
        // since then would otherwise be programmed again under a fresh checksum.
        let ppns: Vec<u64> = live.iter().map(|(p, _)| first + *p as u64).collect();
        self.nand.forget_verified_pages(&ppns);
        let mut page = vec![0u8; ps];
        let mut k = 0;
        while k < live.len() {
            let (ppn, room) = self.active_room(true)?;
            let n = (live.len() - k).min(room as usize);
            let mut data = vec![0u8; n * ps];
            let mut lpns = Vec::with_capacity(n);
            for (i, (p, lpn)) in live[k..k + n].iter().enumerate() {
                self.nand.read(first + *p as u64, &[*lpn], &mut page)?;
                data[i * ps..(i + 1) * ps].copy_from_slice(&page);
                lpns.push(*lpn);
            }
            self.nand.program(ppn, &lpns, &data)?;
            for (i, l) in lpns.iter().enumerate() {
                self.map_page(*l, ppn + i as u64);
            }
            self.journal.append(&Record::Relocate { ppn, lpns })?;
            self.stats.gc_pages_written += n as u64;
            k += n;
        }
        Ok(live.len())
    }

    /// Checks the FTL invariants: each mapped logical page points to a programmed physical page whose
    /// reverse entry names it back, no physical page is claimed twice, and valid counts match.
    pub fn check_invariants(&self) -> Vec<String> {
        let geo = *self.geometry();
        let mut problems = Vec::new();
        let mut seen: HashMap<Ppn, Lpn> = HashMap::new();
        for (lpn, ppn, n) in self.map.runs() {
            for i in 0..n {
                let (l, p) = (lpn + i, ppn + i);
                if let Some(other) = seen.insert(p, l) {
                    problems.push(format!("physical page {p} mapped by logical pages {other} and {l}"));
                }
                let b = geo.block_of(p);
                let pg = geo.page_in_block(p);
                if pg >= self.nand.block(b).write_ptr {
                    problems.push(format!("logical page {l} maps to unprogrammed physical page {p}"));
                }
                match self.rev.get(&b) {
                    Some(r) if r.lpns[pg as usize] == l => {}
                    _ => problems
                        .push(format!("reverse map of physical page {p} does not name logical page {l}")),
                }
            }
        }
        for (b, r) in &self.rev {
            let counted = r.lpns.iter().filter(|l| **l != INVALID).count() as u32;
            if counted != r.valid {
                problems.push(format!("block {b}: valid count {} but {counted} valid pages", r.valid));
            }
            for (pg, l) in r.lpns.iter().enumerate() {
                if *l != INVALID && self.map.get(*l) != Some(geo.first_ppn(*b) + pg as u64) {
                    problems
                        .push(format!("block {b} page {pg} claims logical page {l}, which maps elsewhere"));
                }
            }
        }
        problems
    }
}
