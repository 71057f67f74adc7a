//! Pages a firmware extension holds in device memory: the device reads them from flash once (checked and
//! counted like any read) and serves them from its memory afterwards. Where the media can hand its pages
//! in place (a NAND image the host maps), the emulator leaves them where they lie and remembers where
//! that is, instead of copying them into memory of its own: a gigabyte of memory the process never
//! touched before takes about a second to fault in and clear on the machines this runs on, and the bytes
//! on the flash are the same. Nothing in the model changes: the device memory is reserved by the owner,
//! the load is counted as a read of every page, and a read from the held pages counts nothing.
//!
//! The owner drops what it holds when the host writes or trims those pages. The FTL may still move them
//! (garbage collection copies a block's valid pages, checked, to another block and erases it): the media's
//! epoch then changes, and the pages are looked up again before the next read.

use insitu_flash::Ppn;
use insitu_kernels::arch::prefetch;

use crate::error::Result;
use crate::firmware::FirmwareContext;

/// Physical page of an unmapped logical page (it reads as zeros).
const UNMAPPED: Ppn = Ppn::MAX;
/// Bytes read at once when loading (the flash stays locked for one piece, not the range).
const LOAD_PIECE_BYTES: u64 = 4 << 20;
/// Pieces a gather looks ahead to prefetch.
const AHEAD: usize = 8;

/// Logical pages `lba..lba + pages`, held in device memory.
#[derive(Debug)]
pub struct Resident {
    lba: u64,
    page_size: u64,
    held: Held,
}

#[derive(Debug)]
enum Held {
    /// A copy of the pages (media that cannot hand pages in place).
    Copy(Vec<u8>),
    /// The physical page of each logical page ([`UNMAPPED`]: zeros), as they were at media `epoch`.
    InPlace { ppns: Vec<Ppn>, epoch: u64 },
}

impl Resident {
    /// Reads logical pages `lba..lba + pages` through the FTL (checked and counted, as
    /// [`FirmwareContext::read_lba`] does) and holds them.
    pub fn load(fw: &FirmwareContext<'_>, lba: u64, pages: u64) -> Result<Resident> {
        let (ps, in_place) = {
            let flash = fw.media.read();
            (flash.page_size() as u64, flash.in_place().is_some())
        };
        // In pieces, the flash locked for one at a time (writers wait for a piece, not for the range).
        let piece = (LOAD_PIECE_BYTES / ps).max(1);
        let mut data = if in_place { Vec::new() } else { vec![0u8; (pages * ps) as usize] };
        for at in (0..pages).step_by(piece as usize) {
            let n = piece.min(pages - at);
            if in_place {
                fw.read_lba_with(lba + at, n, |_| ())?;
            } else {
                fw.read_lba(lba + at, &mut data[(at * ps) as usize..((at + n) * ps) as usize])?;
            }
        }
        let held = if in_place {
            // Where the pages lie now: any that garbage collection moved meanwhile were checked as it
            // copied them.
            let flash = fw.media.read();
            let epoch = flash.in_place().expect("media that hands its pages in place").epoch;
            let ppns = flash.lba_locations(lba, pages)?.into_iter().map(|p| p.unwrap_or(UNMAPPED)).collect();
            Held::InPlace { ppns, epoch }
        } else {
            Held::Copy(data)
        };
        Ok(Resident { lba, page_size: ps, held })
    }

    /// Number of pages held.
    pub fn pages(&self) -> u64 {
        match &self.held {
            Held::Copy(data) => data.len() as u64 / self.page_size,
            Held::InPlace { ppns, .. } => ppns.len() as u64,
        }
    }

    /// Copies `len` bytes from each of `offsets` (byte offsets from the first held page's first byte, each
    /// piece inside the held pages) into `out`, one piece after another. Pieces at random places are
    /// prefetched a few ahead, so that several cache misses are in flight rather than one at a time.
    ///
    /// # Panics
    /// If `out` is not `offsets.len() * len` bytes or a piece reaches past the held pages.
    pub fn gather(
        &mut self,
        fw: &FirmwareContext<'_>,
        offsets: &[u64],
        len: usize,
        out: &mut [u8],
    ) -> Result<()> {
        assert_eq!(out.len(), offsets.len() * len, "gather into a buffer of the wrong size");
        let end = self.pages() * self.page_size;
        assert!(offsets.iter().all(|&o| o + len as u64 <= end), "gather past the held pages");
        match &mut self.held {
            Held::Copy(data) => {
                for (i, &o) in offsets.iter().enumerate() {
                    if let Some(&next) = offsets.get(i + AHEAD) {
                        prefetch(data, next as usize, len);
                    }
                    out[i * len..(i + 1) * len].copy_from_slice(&data[o as usize..o as usize + len]);
                }
            }
            Held::InPlace { ppns, epoch } => {
                let flash = fw.media.read();
                let view = flash.in_place().expect("media that handed its pages in place hands them still");
                if view.epoch != *epoch {
                    // Pages moved (garbage collection): where they are now.
                    let now = flash.lba_locations(self.lba, ppns.len() as u64)?;
                    *ppns = now.into_iter().map(|p| p.unwrap_or(UNMAPPED)).collect();
                    *epoch = view.epoch;
                }
                let ps = self.page_size;
                // Byte address in the media of held byte `o`, or none for an unmapped page.
                let at = |o: u64| {
                    let ppn = ppns[(o / ps) as usize];
                    (ppn != UNMAPPED).then(|| (ppn * ps + o % ps) as usize)
                };
                for (i, &o) in offsets.iter().enumerate() {
                    if let Some(a) = offsets.get(i + AHEAD).and_then(|&next| at(next)) {
                        prefetch(view.pages, a, len);
                    }
                    let piece = &mut out[i * len..(i + 1) * len];
                    // A piece may lie across pages, which need not lie together on the media.
                    let mut done = 0usize;
                    while done < len {
                        let o = o + done as u64;
                        let n = ((ps - o % ps) as usize).min(len - done);
                        match at(o) {
                            Some(a) => piece[done..done + n].copy_from_slice(&view.pages[a..a + n]),
                            None => piece[done..done + n].fill(0),
                        }
                        done += n;
                    }
                }
            }
        }
        Ok(())
    }
}
