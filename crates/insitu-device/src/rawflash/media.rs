//! The raw interface as flash-layer media: [`TaggedMedia`] implements [`RawFlash`] by sending every read,
//! program and erase through the simulated controller, so the flash layer's FTL runs over the raw
//! interface unchanged (BlueDBM §4: the block device with a full FTL is one user of the raw interface),
//! and its operations get the controller's simulated time.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use insitu_flash::geometry::{BlockId, Geometry, Lpn, Ppn};
use insitu_flash::nand::Nand;
use insitu_flash::raw::{BlockState, NandStats, Oob, RawFlash};
use insitu_flash::FlashError;

use super::command::{Event, FlashCommand, RawFlashError, Tag};
use super::controller::{Cells, RawConfig, RawStats, Sim};
use crate::network::Ps;
use crate::profile::Profile;

/// Raw media `M` behind a simulated flash controller (see the [module](self) documentation).
#[derive(Debug)]
pub struct TaggedMedia<M> {
    media: M,
    /// Behind a lock, as reads take `&self` and a device's readers run on several threads at once.
    sim: Mutex<Sim>,
}

/// Reads through a shared borrow of the media (`RawFlash` reads take `&self`).
struct ReadOnly<'a, M>(&'a M);

impl<M: RawFlash> Cells for ReadOnly<'_, M> {
    fn write_ptr(&self, block: BlockId) -> u32 {
        self.0.block(block).write_ptr
    }

    /// The whole page, checked whole: the FTL hands its pages on as they are (and `fsck` scrubs them
    /// this way), where the raw interface's reads take a page's head alone.
    fn read_page(&self, ppn: Ppn) -> Result<(Vec<u8>, u64), FlashError> {
        let spare = self.0.read_oob(ppn).map_or(u64::MAX, |o| o.lpn);
        Ok((self.0.with_pages(ppn, &[spare], insitu_kernels::arch::to_vec)?, spare))
    }

    fn program(&mut self, _: Ppn, _: u64, _: &[u8]) -> Result<(), FlashError> {
        Err(FlashError::NandViolation("a program while only reads were in flight".into()))
    }

    fn erase(&mut self, _: BlockId) -> Result<(), FlashError> {
        Err(FlashError::NandViolation("an erase while only reads were in flight".into()))
    }
}

/// The flash layer's words for what the raw interface refused.
fn to_flash(e: RawFlashError, ppn: Ppn) -> FlashError {
    match e {
        RawFlashError::Flash(e) => e,
        RawFlashError::ErasedPage { .. } => FlashError::NandViolation(format!("read of erased page {ppn}")),
        other => FlashError::NandViolation(other.to_string()),
    }
}

impl<M: RawFlash> TaggedMedia<M> {
    pub fn new(media: M, cfg: RawConfig) -> Result<Self, RawFlashError> {
        let sim = Sim::new(*media.geometry(), cfg)?;
        Ok(TaggedMedia { media, sim: Mutex::new(sim) })
    }

    /// The simulation. A lock a panic poisoned is taken over: commands the panicking operation left in
    /// flight make later ones fail by name (a tag in use), never return wrong pages.
    fn sim(&self) -> MutexGuard<'_, Sim> {
        self.sim.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Simulated time the operations so far took, one after another.
    pub fn now(&self) -> Ps {
        self.sim().now()
    }

    pub fn raw_stats(&self) -> RawStats {
        self.sim().stats()
    }

    pub fn into_inner(self) -> M {
        self.media
    }

    /// Reads `count` pages from `ppn` into `buf`, up to a card's tags at once; returns their spare areas.
    fn read_pages(&self, ppn: Ppn, count: usize, buf: &mut [u8]) -> Result<Vec<u64>, FlashError> {
        let ps = self.media.geometry().page_size as usize;
        let end = ppn.checked_add(count as u64).filter(|e| *e <= self.media.geometry().total_pages());
        if end.is_none() {
            return Err(FlashError::NandViolation(format!("read of pages {ppn}+{count} past the array")));
        }
        let mut sim = self.sim();
        let mut cells = ReadOnly(&self.media);
        let window = sim.config().tags_per_card as usize;
        let mut spares = vec![0u64; count];
        // The failure of the lowest page is reported (as the image alone would), once every command in
        // flight has ended: none is left holding its tag.
        let mut first_error: Option<(usize, FlashError)> = None;
        let fail = |first: &mut Option<(usize, FlashError)>, i: usize, e: RawFlashError| {
            if first.as_ref().is_none_or(|(j, _)| i < *j) {
                *first = Some((i, to_flash(e, ppn + i as u64)));
            }
        };
        for base in (0..count).step_by(window) {
            let n = window.min(count - base);
            for i in 0..n {
                let addr = sim.addr_of(ppn + (base + i) as u64);
                if let Err(e) = sim.issue(&cells, FlashCommand::read_page(addr, i as Tag)) {
                    fail(&mut first_error, base + i, e);
                    break;
                }
            }
            while let Some(c) = sim.poll_until(&mut cells, Ps::MAX) {
                let i = base + c.tag as usize;
                match c.event {
                    Event::ReadData(s) => {
                        let at = i * ps + s.offset();
                        s.copy_to(&mut buf[at..at + s.span()]);
                        spares[i] = s.spare;
                    }
                    Event::Ack(Err(e)) => fail(&mut first_error, i, e),
                    Event::Ack(Ok(_)) | Event::WriteDataRequest => {}
                }
            }
            if first_error.is_some() {
                break;
            }
        }
        if let Some((_, e)) = first_error {
            return Err(e);
        }
        Ok(spares)
    }

    /// Runs one write or erase to its acknowledgement.
    fn run_one(&mut self, cmd: FlashCommand, data: Option<&[u8]>, ppn: Ppn) -> Result<(), FlashError> {
        let sim = self.sim.get_mut().unwrap_or_else(|p| p.into_inner());
        sim.issue(&self.media, cmd).map_err(|e| to_flash(e, ppn))?;
        while let Some(c) = sim.poll_until(&mut self.media, Ps::MAX) {
            match c.event {
                Event::WriteDataRequest => {
                    let data = data.expect("only writes ask for data");
                    sim.write_data(c.card, c.tag, data).map_err(|e| to_flash(e, ppn))?;
                }
                Event::Ack(status) => return status.map(|_| ()).map_err(|e| to_flash(e, ppn)),
                Event::ReadData(_) => {}
            }
        }
        Err(FlashError::NandViolation(format!("the controller lost a {:?} of page {ppn}", cmd.op)))
    }
}

impl<M: RawFlash> RawFlash for TaggedMedia<M> {
    fn geometry(&self) -> &Geometry {
        self.media.geometry()
    }

    fn block(&self, block: BlockId) -> BlockState {
        self.media.block(block)
    }

    fn blocks(&self) -> &HashMap<BlockId, BlockState> {
        self.media.blocks()
    }

    fn frontier(&self) -> BlockId {
        self.media.frontier()
    }

    fn unsynced(&self) -> bool {
        self.media.unsynced()
    }

    fn program(&mut self, ppn: Ppn, tags: &[Lpn], data: &[u8]) -> insitu_flash::Result<()> {
        let ps = self.media.geometry().page_size as usize;
        for (i, tag) in tags.iter().enumerate() {
            let p = ppn + i as u64;
            if p >= self.media.geometry().total_pages() {
                return Err(FlashError::NandViolation(format!("program of page {p} past the array")));
            }
            let addr = self.sim.get_mut().unwrap_or_else(|p| p.into_inner()).addr_of(p);
            self.run_one(FlashCommand::write(addr, 0, *tag), Some(&data[i * ps..(i + 1) * ps]), p)?;
        }
        Ok(())
    }

    fn with_pages<R>(&self, ppn: Ppn, tags: &[Lpn], f: impl FnOnce(&[u8]) -> R) -> insitu_flash::Result<R> {
        let ps = self.media.geometry().page_size as usize;
        let mut buf = vec![0u8; tags.len() * ps];
        let spares = self.read_pages(ppn, tags.len(), &mut buf)?;
        for (i, (want, got)) in tags.iter().zip(&spares).enumerate() {
            if want != got {
                let p = ppn + i as u64;
                return Err(FlashError::CorruptPage {
                    ppn: p,
                    addr: self.media.geometry().physical(p).to_string(),
                    detail: format!("spare area names logical page {got}, map says {want}"),
                });
            }
        }
        Ok(f(&buf))
    }

    fn read_tagged(&self, ppn: Ppn, buf: &mut [u8]) -> insitu_flash::Result<Vec<Lpn>> {
        let ps = self.media.geometry().page_size as usize;
        self.read_pages(ppn, buf.len() / ps, buf)
    }

    fn read_oob(&self, ppn: Ppn) -> Option<Oob> {
        self.media.read_oob(ppn)
    }

    fn erase(&mut self, block: BlockId) -> insitu_flash::Result<()> {
        if block >= self.media.geometry().total_blocks() {
            return Err(FlashError::NandViolation(format!("erase of block {block} past the array")));
        }
        let ppn = self.media.geometry().first_ppn(block);
        let addr = self.sim.get_mut().unwrap_or_else(|p| p.into_inner()).addr_of(ppn);
        self.run_one(FlashCommand::erase(addr, 0), None, ppn)
    }

    fn sync(&self) -> insitu_flash::Result<()> {
        self.media.sync()
    }

    fn host_free_bytes(&self) -> Option<u64> {
        self.media.host_free_bytes()
    }

    fn forget_verified(&self) {
        self.media.forget_verified()
    }

    fn forget_verified_pages(&self, ppns: &[insitu_flash::Ppn]) {
        self.media.forget_verified_pages(ppns)
    }

    /// The image's space only: the block was erased through the controller already.
    fn discard(&mut self, block: BlockId) -> insitu_flash::Result<()> {
        self.media.discard(block)
    }

    fn stats(&self) -> NandStats {
        self.media.stats()
    }

    fn restore(&mut self, blocks: HashMap<BlockId, BlockState>) {
        self.media.restore(blocks)
    }

    fn replay_program(&mut self, ppn: Ppn, count: u32) {
        self.media.replay_program(ppn, count)
    }

    fn replay_erase(&mut self, block: BlockId) {
        self.media.replay_erase(block)
    }
}

/// What a device's FTL runs on: its NAND image, or, on a profile with BlueDBM's raw flash interface, that
/// image behind the simulated flash controller, every FTL read, program and erase a tagged command, so
/// that the FTL is one user of the raw interface (§4: the block device with a full FTL) with the same
/// pages, data and wear as on the image alone.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per device, for its lifetime: a box would only add a pointer chase
pub enum FtlMedia {
    Image(Nand),
    Controller(TaggedMedia<Nand>),
}

impl FtlMedia {
    /// The media for a device of `profile` on its image `nand`.
    pub fn for_profile(nand: Nand, profile: &Profile) -> insitu_flash::Result<FtlMedia> {
        if profile.nand.interface.is_none() {
            return Ok(FtlMedia::Image(nand));
        }
        let cfg = RawConfig::from_profile(profile).map_err(|e| FlashError::InvalidGeometry(e.to_string()))?;
        let tagged = TaggedMedia::new(nand, cfg).map_err(|e| FlashError::InvalidGeometry(e.to_string()))?;
        Ok(FtlMedia::Controller(tagged))
    }

    /// The controller's figures, when the FTL goes through one.
    pub fn controller_stats(&self) -> Option<RawStats> {
        match self {
            FtlMedia::Image(_) => None,
            FtlMedia::Controller(t) => Some(t.raw_stats()),
        }
    }
}

/// `$body` with `$m` bound to the media inside, whichever it is.
macro_rules! on_media {
    ($self:expr, $m:ident => $body:expr) => {
        match $self {
            FtlMedia::Image($m) => $body,
            FtlMedia::Controller($m) => $body,
        }
    };
}

impl RawFlash for FtlMedia {
    fn geometry(&self) -> &Geometry {
        on_media!(self, m => m.geometry())
    }

    fn block(&self, block: BlockId) -> BlockState {
        on_media!(self, m => m.block(block))
    }

    fn blocks(&self) -> &HashMap<BlockId, BlockState> {
        on_media!(self, m => m.blocks())
    }

    fn frontier(&self) -> BlockId {
        on_media!(self, m => m.frontier())
    }

    fn program(&mut self, ppn: Ppn, tags: &[Lpn], data: &[u8]) -> insitu_flash::Result<()> {
        on_media!(self, m => RawFlash::program(m, ppn, tags, data))
    }

    fn with_pages<R>(&self, ppn: Ppn, tags: &[Lpn], f: impl FnOnce(&[u8]) -> R) -> insitu_flash::Result<R> {
        on_media!(self, m => m.with_pages(ppn, tags, f))
    }

    fn read_tagged(&self, ppn: Ppn, buf: &mut [u8]) -> insitu_flash::Result<Vec<Lpn>> {
        on_media!(self, m => m.read_tagged(ppn, buf))
    }

    fn read_into(&self, ppn: Ppn, tags: &[Lpn], buf: &mut [u8]) -> insitu_flash::Result<()> {
        on_media!(self, m => m.read_into(ppn, tags, buf))
    }

    fn read_head(&self, ppn: Ppn, tag: Lpn) -> insitu_flash::Result<Vec<u8>> {
        on_media!(self, m => m.read_head(ppn, tag))
    }

    fn read_oob(&self, ppn: Ppn) -> Option<Oob> {
        on_media!(self, m => m.read_oob(ppn))
    }

    fn prefetch(&self, ppn: Ppn, at: usize, len: usize) {
        on_media!(self, m => m.prefetch(ppn, at, len))
    }

    fn erase(&mut self, block: BlockId) -> insitu_flash::Result<()> {
        on_media!(self, m => RawFlash::erase(m, block))
    }

    fn sync(&self) -> insitu_flash::Result<()> {
        on_media!(self, m => m.sync())
    }

    fn host_free_bytes(&self) -> Option<u64> {
        on_media!(self, m => m.host_free_bytes())
    }

    fn forget_verified(&self) {
        on_media!(self, m => m.forget_verified())
    }

    fn forget_verified_pages(&self, ppns: &[insitu_flash::Ppn]) {
        on_media!(self, m => m.forget_verified_pages(ppns))
    }

    fn in_place(&self) -> Option<insitu_flash::raw::InPlace<'_>> {
        on_media!(self, m => m.in_place())
    }

    fn discard(&mut self, block: BlockId) -> insitu_flash::Result<()> {
        on_media!(self, m => RawFlash::discard(m, block))
    }

    fn unsynced(&self) -> bool {
        on_media!(self, m => m.unsynced())
    }

    fn stats(&self) -> NandStats {
        on_media!(self, m => m.stats())
    }

    fn restore(&mut self, blocks: HashMap<BlockId, BlockState>) {
        on_media!(self, m => m.restore(blocks))
    }

    fn replay_program(&mut self, ppn: Ppn, count: u32) {
        on_media!(self, m => m.replay_program(ppn, count))
    }

    fn replay_erase(&mut self, block: BlockId) {
        on_media!(self, m => m.replay_erase(block))
    }

    fn read(&self, ppn: Ppn, tags: &[Lpn], buf: &mut [u8]) -> insitu_flash::Result<()> {
        on_media!(self, m => m.read(ppn, tags, buf))
    }
}
