//! The NAND array of one device, kept in a sparse image file.
//!
//! Page-granular read / program / erase with the rules of real NAND enforced: a page is programmed only
//! once between erases, and pages of a block are programmed in order (so "erase before write" holds
//! without a per-page bitmap). Each page has an out-of-band (OOB) spare area, kept in a second sparse file,
//! holding the logical page it stores and a CRC-32 of its data (of its head, the bytes up to its last
//! nonzero 64: see [`Oob::head`]): reads check it, as the ECC of a real controller would, and `fsck` uses
//! it to cross-check the FTL map.
//!
//! Reads go through a read-only memory map of the image, so in-device programs can scan pages in place
//! (zero-copy, like a flash engine streaming pages past its logic) and a copy, when wanted, is one memcpy.
//! Programs and erases use the file descriptor.
//!
//! State is sparse: only blocks that were ever programmed have an entry, and blocks at or past
//! `frontier` are fresh (erased, never used). Memory therefore grows with the data written, not with the
//! declared capacity.
//!
//! The image is sparse too: a block takes disk space when first programmed and keeps it. An erase clears
//! the block's spare area and leaves its data bytes, unreadable past the write pointer, for the next
//! program to overwrite (punching a hole per erase made the host's disk discard and refill the same
//! space, waiting for the disk under the flash lock).
//!
//! Programs start their pages' write-back a few MiB at a time, and a thread syncs the image every `FLUSH_BYTES`
//! programmed, so the host's disk writes while the device goes on and a commit's sync finds little left
//! (the commit's own sync is still what makes data durable).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::Mmap;

use crate::error::{FlashError, Result};
use crate::geometry::{BlockId, Geometry, Lpn, Ppn};
pub use crate::raw::{BlockState, NandStats};
use crate::raw::{InPlace, Oob, RawFlash, OOB_BYTES};
use crate::sys;

/// Operation counters of the NAND array (monotonic since open).
#[derive(Debug, Default)]
pub struct NandCounters {
    pub pages_read: AtomicU64,
    pub pages_programmed: AtomicU64,
    pub blocks_erased: AtomicU64,
}

/// The NAND array: image + OOB files and block states.
#[derive(Debug)]
pub struct Nand {
    geo: Geometry,
    image: File,
    oob: File,
    image_path: PathBuf,
    image_map: Mmap,
    oob_map: Mmap,
    blocks: HashMap<BlockId, BlockState>,
    /// Blocks `>= frontier` have never been programmed.
    frontier: BlockId,
    counters: NandCounters,
    /// Programs or erases since the last sync.
    unsynced: std::sync::atomic::AtomicBool,
    /// Syncs the image in the background every `FLUSH_BYTES` programmed (see [`sys::Flusher`]).
    flusher: sys::Flusher,
    since_flush: u64,
    /// Programmed bytes whose write-back has not been started yet, and the span of the image they lie in.
    writeback: Writeback,
    /// Pages whose data matched its checksum since they were last programmed (see [`Verified`]).
    verified: Verified,
    /// Discards of pages or blocks since open (a part of [`InPlace::epoch`]).
    discards: u64,
}

/// Pages whose data was checked against its checksum since they were programmed, so that a page read again
/// is not checksummed again: a gather from flash reads each 4 KB page once per row it holds, and the same
/// CRC-32 over and over was 45% of an out-of-core sort. Page `p` is remembered in slot `p % VERIFIED_SLOTS`
/// (as `p + 1`; 0 is none), so an object written in one run of pages up to 4 GiB (of 4 KB pages) is
/// remembered whole. An erase, a program or a discard forgets its pages; a move (garbage collection, or
/// the raw partition's `RawRead` with `recheck`, as cleaning reads) forgets the pages it moves, so a page
/// changed since its last check is not programmed again under a fresh checksum; `fsck` forgets everything,
/// so it checks every byte. Nothing else should write the image while the array's lock is held.
#[derive(Debug, Default)]
struct Verified(std::sync::Mutex<Vec<u64>>);

/// Runs of at least this many bytes are read from the image file, not its map (see `Nand::read_into`).
const PREAD_BYTES: usize = 32 << 10;
/// Heads of at most this many bytes are read from the image file, not its map (see `Nand::read_head`).
const PREAD_HEAD_BYTES: usize = 2 << 10;

/// Slots of [`Verified`] (8 MiB, zeroed by the OS when first touched).
const VERIFIED_SLOTS: u64 = 1 << 20;

impl Verified {
    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets pages `ppns`.
    fn forget(&mut self, ppns: impl Iterator<Item = Ppn>) {
        Self::forget_in(self.0.get_mut().unwrap_or_else(|p| p.into_inner()), ppns);
    }

    /// [`Verified::forget`] by a reader (the lock taken).
    fn forget_shared(&self, ppns: impl Iterator<Item = Ppn>) {
        Self::forget_in(&mut self.slots(), ppns);
    }

    fn forget_in(slots: &mut [u64], ppns: impl Iterator<Item = Ppn>) {
        if slots.is_empty() {
            return;
        }
        let n = slots.len() as u64;
        for p in ppns {
            let s = &mut slots[(p % n) as usize];
            if *s == p + 1 {
                *s = 0;
            }
        }
    }

    fn clear(&self) {
        *self.slots() = Vec::new();
    }
}

/// Programmed bytes waiting for [`sys::start_writeback`]: started a few MiB at a time, over the span they
/// lie in (the kernel submits only the dirty pages of a span), rather than page by page: on a virtual disk
/// each start is a request and an exit to the hypervisor, and a page-by-page program (the raw interface
/// of BlueDBM) would pay it for every 8 KB.
#[derive(Debug, Default)]
struct Writeback {
    lo: u64,
    hi: u64,
    bytes: u64,
}

/// Bytes programmed between starts of their write-back.
const WRITEBACK_BYTES: u64 = 4 << 20;

impl Writeback {
    /// Notes `len` bytes programmed at `offset` of `image`; starts the write-back of those noted once they
    /// are [`WRITEBACK_BYTES`].
    fn note(&mut self, image: &File, offset: u64, len: u64) {
        if self.bytes == 0 {
            (self.lo, self.hi) = (offset, offset + len);
        } else {
            (self.lo, self.hi) = (self.lo.min(offset), self.hi.max(offset + len));
        }
        self.bytes += len;
        if self.bytes >= WRITEBACK_BYTES {
            sys::start_writeback(image, self.lo, self.hi - self.lo);
            *self = Writeback::default();
        }
    }
}

/// Bytes programmed between background syncs of the image: large enough that a sync is worth its
/// round trip, small enough that a commit finds little left to write.
const FLUSH_BYTES: u64 = 64 << 20;

impl Nand {
    /// A new, empty image and OOB under `dir` (a format): the files a format killed before its superblock
    /// left there are discarded first, whatever their size (a device's images are otherwise never cut).
    pub fn create(dir: &Path, geo: Geometry) -> Result<Nand> {
        for name in ["nand.img", "nand.oob"] {
            let path = dir.join(name);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(FlashError::io(&path, e)),
                _ => {}
            }
        }
        Nand::open(dir, geo)
    }

    /// Opens (creating if needed) the image and OOB files under `dir`. The state starts empty; the FTL
    /// restores it from its checkpoint and journal through [`Nand::restore`].
    pub fn open(dir: &Path, geo: Geometry) -> Result<Nand> {
        geo.validate()?;
        let image_path = dir.join("nand.img");
        let oob_path = dir.join("nand.oob");
        let open = |p: &Path| OpenOptions::new().read(true).write(true).create(true).truncate(false).open(p);
        let image = open(&image_path).map_err(|e| FlashError::io(&image_path, e))?;
        let oob = open(&oob_path).map_err(|e| FlashError::io(&oob_path, e))?;
        // Sparse: set_len allocates nothing. It only ever grows a file: an image longer than its geometry
        // says holds pages that geometry does not know (a damaged geometry, or another device's), and
        // cutting it would lose them.
        let image_len = geo.total_pages() * geo.page_size as u64;
        let oob_len = geo.total_pages() * OOB_BYTES as u64;
        for (f, path, len) in [(&image, &image_path, image_len), (&oob, &oob_path, oob_len)] {
            let found = f.metadata().map_err(|e| FlashError::io(path, e))?.len();
            if found > len {
                return Err(FlashError::Corrupt {
                    what: "NAND image or spare area".into(),
                    path: path.clone(),
                    detail: format!(
                        "it holds {found} bytes, more than the {len} of its geometry ({geo:?}): the geometry \
                         does not match it, and the image is left as it is"
                    ),
                });
            }
            f.set_len(len).map_err(|e| FlashError::io(path, e))?;
        }
        let image_map = sys::map_readonly(&image).map_err(|e| FlashError::io(&image_path, e))?;
        let oob_map = sys::map_readonly(&oob).map_err(|e| FlashError::io(&oob_path, e))?;
        let flusher = sys::Flusher::new(&image_path);
        Ok(Nand {
            geo,
            image,
            oob,
            image_path,
            image_map,
            oob_map,
            blocks: HashMap::new(),
            frontier: 0,
            counters: NandCounters::default(),
            unsynced: std::sync::atomic::AtomicBool::new(false),
            flusher,
            since_flush: 0,
            writeback: Writeback::default(),
            verified: Verified::default(),
            discards: 0,
        })
    }

    /// Every block's write pointer as the spare areas on disk say (the pages from the block's first on
    /// that hold a record), for media whose owner keeps no checkpoint of them (the raw partition). Reads
    /// only the spans of the spare-area file that hold data, with `pread`: no page of the map is touched,
    /// so a hole costs nothing (on tmpfs, a read through the map would allocate it).
    pub fn scan_write_pointers(&self) -> Result<HashMap<BlockId, BlockState>> {
        let ppb = self.geo.pages_per_block as u64;
        let block_bytes = ppb * OOB_BYTES as u64;
        let len = self.geo.total_pages() * OOB_BYTES as u64;
        let mut blocks = HashMap::new();
        let mut buf = vec![0u8; block_bytes as usize];
        let mut next = 0;
        for (start, end) in sys::data_spans(&self.oob, len) {
            for b in (start / block_bytes).max(next)..end.div_ceil(block_bytes) {
                self.oob
                    .read_exact_at(&mut buf, b * block_bytes)
                    .map_err(|e| FlashError::io(&self.image_path, e))?;
                let wp = buf.chunks_exact(OOB_BYTES).take_while(|o| Oob::decode(o).is_some()).count() as u32;
                if wp > 0 {
                    blocks.insert(b, BlockState { erase_count: 0, write_ptr: wp });
                }
                next = b + 1;
            }
        }
        Ok(blocks)
    }

    /// Gives the host's disk space of programmed pages `ppns` back (holes punched in the image): pages
    /// whose owner will not read them again (a removed file's, in a block still in use). Nothing changes
    /// on the flash: the pages stay programmed, with their spare areas, until their block is erased; their
    /// data reads as zeros, so a read of one fails its checksum. Where the host's file system cannot punch
    /// holes, nothing changes. Refused for a page that is not programmed.
    pub fn discard_pages(&mut self, ppns: &[Ppn]) -> Result<()> {
        let mut sorted = ppns.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        for &p in &sorted {
            if p >= self.geo.total_pages()
                || self.geo.page_in_block(p) >= self.block(self.geo.block_of(p)).write_ptr
            {
                return Err(FlashError::NandViolation(format!(
                    "discard of page {p}, which is not programmed"
                )));
            }
        }
        self.verified.forget(sorted.iter().copied());
        self.discards += 1;
        let ps = self.geo.page_size as u64;
        let mut runs = sorted.chunk_by(|a, b| b == &(a + 1));
        runs.try_for_each(|run| match sys::punch_hole(&self.image, run[0] * ps, run.len() as u64 * ps) {
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
            r => r.map_err(|e| FlashError::io(&self.image_path, e)),
        })
    }

    pub fn image_path(&self) -> &Path {
        &self.image_path
    }
}

impl Nand {
    /// The end of the `count` pages from `ppn`, once each is known to be programmed (not past its
    /// block's write pointer, nor past the array).
    fn programmed(&self, ppn: Ppn, count: usize) -> Result<Ppn> {
        let end =
            ppn.checked_add(count as u64).filter(|e| *e <= self.geo.total_pages()).ok_or_else(|| {
                FlashError::NandViolation(format!("read of pages {ppn}+{count} past the array"))
            })?;
        for p in ppn..end {
            let st = self.block(self.geo.block_of(p));
            if self.geo.page_in_block(p) >= st.write_ptr {
                return Err(FlashError::NandViolation(format!("read of erased page {p}")));
            }
        }
        Ok(end)
    }

    /// Checks the bytes `data` of the programmed pages from `ppn` against their spare areas: each names
    /// the logical page of `lpns` expected, and its checksum matches (or matched since the page was
    /// programmed).
    fn check(&self, ppn: Ppn, lpns: &[Lpn], data: &[u8]) -> Result<()> {
        let ps = self.geo.page_size as usize;
        self.check_pages(ppn, lpns, |at| &data[at * ps..(at + 1) * ps])
    }

    /// [`Nand::check`] with page `ppn + i`'s bytes given by `page(i)`: all of it, or its head alone
    /// (see [`Oob::head`]). A page given whole that matches is noted as checked; a head alone is not,
    /// since its tail went unseen.
    fn check_pages<'d>(&self, ppn: Ppn, lpns: &[Lpn], page: impl Fn(usize) -> &'d [u8]) -> Result<()> {
        let ps = self.geo.page_size as usize;
        // 64 pages at a time, a bit each: which were checked before is looked up, and the newly checked
        // noted, under the lock; the checksums are computed outside it, so threads reading at once do not
        // wait on them (and a read of one page, a gather's row, allocates nothing).
        for (c, chunk) in lpns.chunks(64).enumerate() {
            let first = ppn + 64 * c as u64;
            let known: u64 = {
                let mut verified = self.verified.slots();
                if verified.is_empty() {
                    *verified = vec![0; self.geo.total_pages().min(VERIFIED_SLOTS) as usize];
                }
                let slots = verified.len() as u64;
                (0..chunk.len() as u64)
                    .filter(|i| verified[((first + i) % slots) as usize] == first + i + 1)
                    .fold(0, |m, i| m | 1 << i)
            };
            for (i, want_lpn) in chunk.iter().enumerate() {
                let p = first + i as u64;
                let at = (p - ppn) as usize;
                let rec = Oob::decode(&self.oob_map[p as usize * OOB_BYTES..(p as usize + 1) * OOB_BYTES]);
                let detail = match rec {
                    None => Some("spare area unreadable".to_string()),
                    Some(r) if r.lpn != *want_lpn => {
                        Some(format!("spare area names logical page {}, map says {want_lpn}", r.lpn))
                    }
                    Some(_) if known >> i & 1 == 1 => None,
                    Some(r) if !r.matches(page(at), ps) => {
                        Some("data does not match its checksum".to_string())
                    }
                    Some(_) => None,
                };
                if let Some(detail) = detail {
                    return Err(FlashError::CorruptPage {
                        ppn: p,
                        addr: self.geo.physical(p).to_string(),
                        detail,
                    });
                }
            }
            let all = if chunk.len() == 64 { u64::MAX } else { (1 << chunk.len()) - 1 };
            if known != all {
                let mut verified = self.verified.slots();
                let slots = verified.len() as u64;
                // An `fsck` in between emptied the slots: nothing to note then.
                if slots > 0 {
                    let whole = |i: &u64| page((first + i - ppn) as usize).len() == ps;
                    for i in (0..chunk.len() as u64).filter(|i| known >> i & 1 == 0).filter(whole) {
                        verified[((first + i) % slots) as usize] = first + i + 1;
                    }
                }
            }
        }
        Ok(())
    }
}

impl RawFlash for Nand {
    fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Replaces the block states (recovery).
    fn restore(&mut self, blocks: HashMap<BlockId, BlockState>) {
        self.frontier = blocks.keys().map(|b| b + 1).max().unwrap_or(0);
        self.blocks = blocks;
    }

    /// State of `block` (fresh blocks read as default).
    fn block(&self, block: BlockId) -> BlockState {
        self.blocks.get(&block).copied().unwrap_or_default()
    }

    /// Touched blocks.
    fn blocks(&self) -> &HashMap<BlockId, BlockState> {
        &self.blocks
    }

    /// First never-used block.
    fn frontier(&self) -> BlockId {
        self.frontier
    }

    /// Programs `data.len() / page_size` consecutive pages starting at `ppn`, all in one block, with their
    /// logical page numbers `lpns`. Enforces erase-before-write and in-order programming.
    fn program(&mut self, ppn: Ppn, lpns: &[Lpn], data: &[u8]) -> Result<()> {
        let ps = self.geo.page_size as usize;
        let count = lpns.len();
        debug_assert_eq!(data.len(), count * ps);
        let block = self.geo.block_of(ppn);
        let page = self.geo.page_in_block(ppn);
        if block >= self.geo.total_blocks() {
            return Err(FlashError::NandViolation(format!("program of block {block} past the array")));
        }
        if page as usize + count > self.geo.pages_per_block as usize {
            return Err(FlashError::NandViolation(format!(
                "program of {count} pages at page {page} crosses the end of block {block}"
            )));
        }
        self.verified.forget(ppn..ppn + count as u64);
        let state = self.blocks.entry(block).or_default();
        if state.write_ptr != page {
            return Err(FlashError::NandViolation(format!(
                "program of block {block} page {page}, but the next erased page is {} (erase before write, \
                 in-order programming)",
                state.write_ptr
            )));
        }
        let mut oob = vec![0u8; count * OOB_BYTES];
        for (i, lpn) in lpns.iter().enumerate() {
            Oob::of(*lpn, &data[i * ps..(i + 1) * ps]).encode(&mut oob[i * OOB_BYTES..(i + 1) * OOB_BYTES]);
        }
        self.image.write_all_at(data, ppn * ps as u64).map_err(|e| FlashError::io(&self.image_path, e))?;
        self.writeback.note(&self.image, ppn * ps as u64, data.len() as u64);
        self.since_flush += data.len() as u64;
        if self.since_flush >= FLUSH_BYTES {
            self.since_flush = 0;
            self.flusher.kick();
        }
        self.oob
            .write_all_at(&oob, ppn * OOB_BYTES as u64)
            .map_err(|e| FlashError::io(&self.image_path, e))?;
        state.write_ptr += count as u32;
        self.frontier = self.frontier.max(block + 1);
        self.counters.pages_programmed.fetch_add(count as u64, Ordering::Relaxed);
        self.unsynced.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Checks `lpns.len()` physically consecutive pages from `ppn` (programmed, spare area naming the
    /// expected logical pages, checksums matching) and hands their bytes to `f` in place, without a copy.
    fn with_pages<R>(&self, ppn: Ppn, lpns: &[Lpn], f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let ps = self.geo.page_size as usize;
        let end = self.programmed(ppn, lpns.len())?;
        let data = &self.image_map[ppn as usize * ps..end as usize * ps];
        self.check(ppn, lpns, data)?;
        self.counters.pages_read.fetch_add(lpns.len() as u64, Ordering::Relaxed);
        Ok(f(data))
    }

    /// A run of `PREAD_BYTES` (32 KiB) or more is read from the image file straight into `buf` (and checked
    /// there), not copied out of the image's map: a long sequential read (an object streamed to a
    /// program or to the host) then maps no page of the image, so it takes no page faults nor their
    /// unmapping at close (2 ms of a 40 MB list's 13 ms intersection, on the closing thread). Shorter
    /// runs (a gather's rows, the raw interface's pages) come from the map, where a page read again costs
    /// a copy and no system call.
    fn read_into(&self, ppn: Ppn, lpns: &[Lpn], buf: &mut [u8]) -> Result<()> {
        let ps = self.geo.page_size as usize;
        if buf.len() < PREAD_BYTES {
            return self.with_pages(ppn, lpns, |data| insitu_kernels::arch::copy(buf, data));
        }
        self.programmed(ppn, lpns.len())?;
        let buf = &mut buf[..lpns.len() * ps];
        self.image.read_exact_at(buf, ppn * ps as u64).map_err(|e| FlashError::io(&self.image_path, e))?;
        self.check(ppn, lpns, buf)?;
        self.counters.pages_read.fetch_add(lpns.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Copies and checks the page's head alone when its spare area records one: the rest of the page
    /// was programmed as zeros, and is neither read nor copied. A short head (a graph's vertex page) is
    /// read from the image file: pages read here and there through the map would each fault in the
    /// map's pages around them and unmap them all at close (a BFS of 2^21 vertices mapped 17 GB of the
    /// image that way, and spent a fifth of its time on it).
    fn read_head(&self, ppn: Ppn, tag: Lpn) -> Result<Vec<u8>> {
        let ps = self.geo.page_size as usize;
        self.programmed(ppn, 1)?;
        let head = self.read_oob(ppn).map_or(ps, |r| r.head_len(ps));
        if head <= PREAD_HEAD_BYTES {
            let mut bytes = vec![0u8; head];
            self.image
                .read_exact_at(&mut bytes, ppn * ps as u64)
                .map_err(|e| FlashError::io(&self.image_path, e))?;
            self.check_pages(ppn, &[tag], |_| &bytes)?;
            self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
            return Ok(bytes);
        }
        let bytes = &self.image_map[ppn as usize * ps..][..head];
        self.check_pages(ppn, &[tag], |_| bytes)?;
        self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
        Ok(insitu_kernels::arch::to_vec(bytes))
    }

    /// Reads the OOB record of one page without reading its data (fsck). Pages past their block's write
    /// pointer hold none, and their spare area is not touched: on tmpfs a read through the map of a hole
    /// allocates memory for it, and on a full tmpfs kills the process (SIGBUS).
    fn read_oob(&self, ppn: Ppn) -> Option<Oob> {
        if ppn >= self.geo.total_pages()
            || self.geo.page_in_block(ppn) >= self.block(self.geo.block_of(ppn)).write_ptr
        {
            return None;
        }
        let at = ppn as usize * OOB_BYTES;
        self.oob_map.get(at..at + OOB_BYTES).and_then(Oob::decode)
    }

    /// Asks for the page's bytes and its spare-area record through the maps (a hint: a page not mapped
    /// yet is not faulted in, and nothing past the image is touched).
    fn prefetch(&self, ppn: Ppn, at: usize, len: usize) {
        let (ps, p) = (self.geo.page_size as usize, ppn as usize);
        let at = at.min(ps);
        insitu_kernels::arch::prefetch(
            &self.image_map[..],
            p.saturating_mul(ps).saturating_add(at),
            len.min(ps - at),
        );
        insitu_kernels::arch::prefetch(&self.oob_map[..], p.saturating_mul(OOB_BYTES), OOB_BYTES);
    }

    /// Erases `block`: all its pages become programmable again; its erase count grows by one.
    fn erase(&mut self, block: BlockId) -> Result<()> {
        if block >= self.geo.total_blocks() {
            return Err(FlashError::NandViolation(format!("erase of block {block} past the array")));
        }
        // The spare area is cleared (it is what says a page was programmed: the raw partition finds its
        // write pointers there). The data pages keep their old bytes, unreadable (the FTL maps nothing
        // there, and a read past the write pointer is refused) until they are programmed again, which
        // then overwrites pages the host's file already has: no hole punched and filled again, and no
        // discard sent to the host's disk (on a filesystem mounted with `discard` that waits for the
        // disk, under the flash lock) for every erase.
        let ppb = self.geo.pages_per_block as u64;
        let clear = vec![0u8; ppb as usize * OOB_BYTES];
        self.oob
            .write_all_at(&clear, block * ppb * OOB_BYTES as u64)
            .map_err(|e| FlashError::io(&self.image_path, e))?;
        self.verified.forget(block * ppb..(block + 1) * ppb);
        let st = self.blocks.entry(block).or_default();
        st.erase_count += 1;
        st.write_ptr = 0;
        self.frontier = self.frontier.max(block + 1);
        self.counters.blocks_erased.fetch_add(1, Ordering::Relaxed);
        self.unsynced.store(true, Ordering::Relaxed);
        Ok(())
    }

    fn forget_verified(&self) {
        self.verified.clear();
    }

    fn forget_verified_pages(&self, ppns: &[Ppn]) {
        self.verified.forget_shared(ppns.iter().copied());
    }

    /// Bytes the host's file system holding the image can still take, if it says.
    fn host_free_bytes(&self) -> Option<u64> {
        self.image_path.parent().and_then(sys::free_bytes)
    }

    /// Gives the disk space of an erased block's data pages back to the host's file system (see the module
    /// documentation for why an erase alone keeps it). Only where the host's disk is short of space: the
    /// next program of the block takes the space again.
    fn discard(&mut self, block: BlockId) -> Result<()> {
        let st = self.block(block);
        if st.write_ptr != 0 {
            return Err(FlashError::NandViolation(format!("discard of block {block}, which is not erased")));
        }
        let bytes = self.geo.pages_per_block as u64 * self.geo.page_size as u64;
        self.discards += 1;
        sys::punch_hole(&self.image, block * bytes, bytes).map_err(|e| FlashError::io(&self.image_path, e))
    }

    /// Replays an erase from the journal: state only (the spare area may or may not have been cleared).
    fn replay_erase(&mut self, block: BlockId) {
        let st = self.blocks.entry(block).or_default();
        st.erase_count += 1;
        st.write_ptr = 0;
        self.frontier = self.frontier.max(block + 1);
    }

    /// Replays a program from the journal: advances the write pointer.
    fn replay_program(&mut self, ppn: Ppn, count: u32) {
        let block = self.geo.block_of(ppn);
        let end = self.geo.page_in_block(ppn) + count;
        let st = self.blocks.entry(block).or_default();
        st.write_ptr = st.write_ptr.max(end);
        self.frontier = self.frontier.max(block + 1);
    }

    /// Forces written data to stable storage.
    fn sync(&self) -> Result<()> {
        // Cleared first: a program racing the sync (it cannot, under `&mut self`) would set it again.
        self.unsynced.store(false, Ordering::Relaxed);
        let done = self.image.sync_data().and_then(|_| self.oob.sync_data());
        if done.is_err() {
            self.unsynced.store(true, Ordering::Relaxed);
        }
        done.map_err(|e| FlashError::io(&self.image_path, e))
    }

    fn unsynced(&self) -> bool {
        self.unsynced.load(Ordering::Relaxed)
    }

    /// The image as mapped. Nothing but this array's own programs, erases and discards writes the image
    /// while the array's lock is held, and each of those changes the epoch.
    fn in_place(&self) -> Option<InPlace<'_>> {
        let epoch = self.counters.pages_programmed.load(Ordering::Relaxed)
            + self.counters.blocks_erased.load(Ordering::Relaxed)
            + self.discards;
        Some(InPlace { pages: &self.image_map[..], epoch })
    }

    fn stats(&self) -> NandStats {
        NandStats {
            pages_read: self.counters.pages_read.load(Ordering::Relaxed),
            pages_programmed: self.counters.pages_programmed.load(Ordering::Relaxed),
            blocks_erased: self.counters.blocks_erased.load(Ordering::Relaxed),
        }
    }

    fn read_tagged(&self, ppn: Ppn, buf: &mut [u8]) -> Result<Vec<Lpn>> {
        let ps = self.geo.page_size as usize;
        let count = buf.len() / ps;
        let tags: Vec<Lpn> =
            (0..count as u64).map(|i| self.read_oob(ppn + i).map_or(u64::MAX, |o| o.lpn)).collect();
        self.with_pages(ppn, &tags, |data| insitu_kernels::arch::copy(&mut buf[..count * ps], data))?;
        Ok(tags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nand(dir: &Path) -> Nand {
        let geo = Geometry {
            channels: 2,
            chips_per_channel: 1,
            blocks_per_chip: 4,
            pages_per_block: 4,
            page_size: 512,
        };
        Nand::open(dir, geo).unwrap()
    }

    #[test]
    fn program_read_erase_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = nand(dir.path());
        let data: Vec<u8> = (0..1024).map(|i| i as u8).collect();
        n.program(4, &[7, 8], &data).unwrap();
        let mut buf = vec![0u8; 1024];
        n.read(4, &[7, 8], &mut buf).unwrap();
        assert_eq!(buf, data);
        // The raw interface's read gives the same bytes, and the pages' tags.
        let mut copy = vec![0u8; 1024];
        assert_eq!(n.read_tagged(4, &mut copy).unwrap(), vec![7, 8]);
        assert_eq!(copy, data);
        n.erase(1).unwrap();
        assert_eq!(n.block(1), BlockState { erase_count: 1, write_ptr: 0 });
        assert!(n.read(4, &[7], &mut buf[..512]).is_err());
        let err = n.read_tagged(4, &mut copy).unwrap_err().to_string();
        assert!(err.contains("erased page"), "{err}");
    }

    #[test]
    fn erase_before_write_and_in_order_programming_are_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = nand(dir.path());
        let page = vec![1u8; 512];
        n.program(0, &[0], &page).unwrap();
        let again = n.program(0, &[0], &page).unwrap_err().to_string();
        assert!(again.contains("erase before write"), "{again}");
        assert!(n.program(2, &[0], &page).is_err(), "skipping page 1 must fail");
        assert!(n.program(3, &[0, 1], &[0u8; 1024]).is_err(), "crossing the block end must fail");
    }

    #[test]
    fn corrupted_data_is_detected_by_the_spare_area_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = nand(dir.path());
        n.program(0, &[3], &[9u8; 512]).unwrap();
        n.image.write_all_at(&[0u8], 100).unwrap();
        let mut buf = vec![0u8; 512];
        let err = n.read(0, &[3], &mut buf).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
        let err = n.read(0, &[4], &mut buf).unwrap_err().to_string();
        assert!(err.contains("logical page"), "{err}");
        let err = n.read_tagged(0, &mut buf).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
    }

    #[test]
    fn a_page_mostly_zeros_is_read_by_its_head_and_checked_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = nand(dir.path());
        let mut page = vec![0u8; 512];
        page[..70].fill(5);
        n.program(0, &[3], &page).unwrap();
        assert_eq!(n.read_oob(0).unwrap().head, Some(128), "the unit holding byte 69 ends the head");
        // A read into a buffer of its own copies the head; the page is that, then zeros.
        let head = n.read_head(0, 3).unwrap();
        assert_eq!(head, page[..128]);
        // A byte changed after the head: the page read whole fails its check; a read of its head
        // still gives the bytes programmed.
        n.image.write_all_at(&[1u8], 300).unwrap();
        let mut buf = vec![0u8; 512];
        let err = n.read(0, &[3], &mut buf).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
        assert_eq!(n.read_head(0, 3).unwrap(), page[..128]);
        // One in the head: both fail, and so does a read naming another tag.
        n.image.write_all_at(&[9u8], 10).unwrap();
        let err = n.read_head(0, 3).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
        let err = n.read_head(0, 4).unwrap_err().to_string();
        assert!(err.contains("logical page"), "{err}");
        assert!(n.read_head(1, 3).unwrap_err().to_string().contains("erased page"));
        // A page of zeros has an empty head.
        n.program(1, &[4], &[0u8; 512]).unwrap();
        assert_eq!(n.read_head(1, 4).unwrap(), Vec::<u8>::new());
        n.read(1, &[4], &mut buf).unwrap();
        assert_eq!(buf, vec![0u8; 512]);
    }

    #[test]
    fn a_page_recorded_whole_by_an_older_version_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = nand(dir.path());
        let mut page = vec![0u8; 512];
        page[..10].fill(8);
        n.program(0, &[6], &page).unwrap();
        // The record as the first format wrote it: a checksum of the whole page.
        let mut area = [0u8; OOB_BYTES];
        Oob { lpn: 6, crc: crc32fast::hash(&page), head: None }.encode(&mut area);
        n.oob.write_all_at(&area, 0).unwrap();
        assert_eq!(n.read_head(0, 6).unwrap(), page);
        // Checked whole, so noted as checked: forgotten, as `fsck` does, for the change to be seen.
        n.image.write_all_at(&[1u8], 400).unwrap();
        n.forget_verified();
        let err = n.read_head(0, 6).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
    }

    #[test]
    fn discarded_pages_give_their_disk_space_back_and_stay_programmed() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let geo = Geometry {
            channels: 1,
            chips_per_channel: 1,
            blocks_per_chip: 4,
            pages_per_block: 4,
            page_size: 8192,
        };
        let mut n = Nand::open(dir.path(), geo).unwrap();
        let pages: Vec<Vec<u8>> = (0..4).map(|i| vec![i as u8 + 1; 8192]).collect();
        n.program(0, &[0, 1, 2, 3], &pages.concat()).unwrap();
        let used = |n: &Nand| n.image.metadata().unwrap().blocks() * 512;
        let before = used(&n);
        n.discard_pages(&[2, 1]).unwrap();
        // Two pages' worth went back, where the host's file system punches holes (ext4, tmpfs, xfs...).
        let probe = std::fs::File::create(dir.path().join("probe")).unwrap();
        probe.write_all_at(&[1u8; 8192], 0).unwrap();
        if sys::punch_hole(&probe, 0, 8192).is_ok() {
            assert!(used(&n) <= before - 2 * 8192, "{} -> {}", before, used(&n));
        }
        assert_eq!(n.block(0).write_ptr, 4, "the pages stay programmed");
        let mut buf = vec![0u8; 8192];
        for p in [0, 3] {
            n.read(p, &[p], &mut buf).unwrap();
            assert_eq!(buf, pages[p as usize], "page {p} untouched");
        }
        let err = n.read(1, &[1], &mut buf).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
        let err = n.discard_pages(&[4]).unwrap_err().to_string();
        assert!(err.contains("not programmed"), "{err}");
        let err = n.discard_pages(&[99]).unwrap_err().to_string();
        assert!(err.contains("not programmed"), "{err}");
    }

    #[test]
    fn write_pointers_scanned_from_the_spare_areas_match_the_blocks_programmed() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = nand(dir.path());
        n.program(0, &[0, 1, 2, 3], &[1u8; 2048]).unwrap();
        n.program(4, &[4, 5], &[2u8; 1024]).unwrap();
        n.erase(1).unwrap();
        n.program(12, &[9, 10, 11], &[3u8; 1536]).unwrap();
        let scanned = nand(dir.path()).scan_write_pointers().unwrap();
        let mut got: Vec<(BlockId, u32)> = scanned.iter().map(|(b, s)| (*b, s.write_ptr)).collect();
        got.sort();
        assert_eq!(got, vec![(0, 4), (3, 3)]);
        // A fresh state knows no page, so it reads no spare area (none past a write pointer is touched).
        assert_eq!(nand(dir.path()).read_oob(0), None);
        assert_eq!(n.read_oob(0).map(|o| o.lpn), Some(0));
        assert_eq!(n.read_oob(4), None, "erased");
    }

    #[test]
    fn a_page_is_checksummed_once_until_it_changes_and_forgetting_checks_it_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut n = nand(dir.path());
        let mut buf = vec![0u8; 512];
        n.program(0, &[3], &[9u8; 512]).unwrap();
        n.read(0, &[3], &mut buf).unwrap();
        // Bytes changed behind the array's lock after a read are not seen by the next read...
        n.image.write_all_at(&[0u8], 100).unwrap();
        n.read(0, &[3], &mut buf).unwrap();
        assert_eq!(buf[100], 0);
        // ...but by any read once the checks of that page are forgotten (what a move does first)...
        n.forget_verified_pages(&[1, 0]);
        let err = n.read(0, &[3], &mut buf).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
        // ...or all of them (what fsck does first).
        n.image.write_all_at(&[9u8], 100).unwrap();
        n.read(0, &[3], &mut buf).unwrap();
        n.image.write_all_at(&[0u8], 100).unwrap();
        n.forget_verified();
        let err = n.read(0, &[3], &mut buf).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
        // A page programmed again is checked again: erase and program forget it.
        n.erase(0).unwrap();
        n.program(0, &[3], &[7u8; 512]).unwrap();
        n.read(0, &[3], &mut buf).unwrap();
        n.erase(0).unwrap();
        n.program(0, &[3], &[8u8; 512]).unwrap();
        n.image.write_all_at(&[0u8], 100).unwrap();
        let err = n.read(0, &[3], &mut buf).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
        // So is a discarded page.
        n.program(1, &[4], &[6u8; 512]).unwrap();
        n.read(1, &[4], &mut buf).unwrap();
        n.discard_pages(&[1]).unwrap();
        assert!(n.read(1, &[4], &mut buf).is_err());
    }
}
