//! The raw-page interface below the FTL: physical pages read, programmed and erased with the NAND rules
//! enforced (erase before program, pages of a block in order), each page carrying a spare-area tag (the
//! logical page it holds) and a checksum. This is BlueDBM's raw flash interface (§3.1) in its simplest
//! form; the FTL ([`crate::Ftl`]) is written against it and is its first user, and anything that
//! manages flash itself (BlueDBM's file system, a splitter sharing the media) uses it the same way.
//!
//! ```
//! use insitu_flash::raw::RawFlash;
//! use insitu_flash::{nand::Nand, Geometry};
//! let dir = tempfile::tempdir().unwrap();
//! let geo = Geometry { channels: 2, chips_per_channel: 1, blocks_per_chip: 2, pages_per_block: 4, page_size: 512 };
//! let mut media = Nand::open(dir.path(), geo).unwrap();
//! media.program(0, &[42], &[7u8; 512]).unwrap();           // page 0 of block 0, tagged 42
//! let mut page = vec![0u8; 512];
//! assert_eq!(media.read_tagged(0, &mut page).unwrap(), vec![42]);
//! assert!(media.program(0, &[43], &[8u8; 512]).is_err());  // no overwrite without an erase
//! ```

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::geometry::{BlockId, Geometry, Lpn, Ppn};

/// Bytes of OOB metadata per page.
pub const OOB_BYTES: usize = 16;
/// A record whose checksum covers the whole page (written before 2026-11-28, and still read).
const OOB_MAGIC: u32 = 0x4F4F_4231; // "OOB1"
/// A record whose checksum covers the page's head (see [`Oob::head`]): its last two bytes, after the head's
/// length in [`HEAD_UNIT`]s in the two before them.
const OOB2_MAGIC: u16 = 0x3242; // "B2"
/// A page's head is a whole number of these bytes (a cache line).
pub const HEAD_UNIT: usize = 64;

/// The spare-area record of one programmed page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oob {
    pub lpn: Lpn,
    pub crc: u32,
    /// The page's head: its bytes up to the [`HEAD_UNIT`] holding its last nonzero byte. The page was
    /// programmed with zeros after it, and the checksum covers the head alone, so a read that wants the
    /// page's bytes copies and checks the head and knows the rest (a vertex of a graph fills a tenth of
    /// its page). `None`: the checksum covers the whole page.
    pub head: Option<u32>,
}

impl Oob {
    /// The record of a page programmed with `page`.
    pub(crate) fn of(lpn: Lpn, page: &[u8]) -> Oob {
        let head = head_len(page);
        Oob { lpn, crc: crc32fast::hash(&page[..head]), head: Some(head as u32) }
    }

    /// Bytes of a page of `page_size` its checksum covers: its head, or all of it.
    pub fn head_len(&self, page_size: usize) -> usize {
        self.head.map_or(page_size, |h| (h as usize).min(page_size))
    }

    /// Whether the bytes `page` of the page (all of it, or its head alone) are the ones it was
    /// programmed with: the checksum over the head, and zeros after it.
    pub fn matches(&self, page: &[u8], page_size: usize) -> bool {
        let head = self.head_len(page_size);
        page.len() >= head && self.crc == crc32fast::hash(&page[..head]) && is_zero(&page[head..])
    }

    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.lpn.to_le_bytes());
        out[8..12].copy_from_slice(&self.crc.to_le_bytes());
        match self.head {
            Some(h) => {
                let units = (h as usize).div_ceil(HEAD_UNIT);
                let units = u16::try_from(units).expect("a page's head fits 16 bits of units (4 MiB)");
                out[12..14].copy_from_slice(&units.to_le_bytes());
                out[14..16].copy_from_slice(&OOB2_MAGIC.to_le_bytes());
            }
            None => out[12..16].copy_from_slice(&OOB_MAGIC.to_le_bytes()),
        }
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Oob> {
        let head = if u32::from_le_bytes(b[12..16].try_into().ok()?) == OOB_MAGIC {
            None
        } else if u16::from_le_bytes(b[14..16].try_into().ok()?) == OOB2_MAGIC {
            Some(u32::from(u16::from_le_bytes(b[12..14].try_into().ok()?)) * HEAD_UNIT as u32)
        } else {
            return None;
        };
        Some(Oob {
            lpn: u64::from_le_bytes(b[0..8].try_into().ok()?),
            crc: u32::from_le_bytes(b[8..12].try_into().ok()?),
            head,
        })
    }
}

/// The length of `page`'s head: up to the [`HEAD_UNIT`] holding its last nonzero byte (the whole page when
/// its length is not a number of units and its last partial unit holds one).
pub fn head_len(page: &[u8]) -> usize {
    let whole = page.len() / HEAD_UNIT * HEAD_UNIT;
    if !is_zero(&page[whole..]) {
        return page.len();
    }
    page[..whole].chunks_exact(HEAD_UNIT).rposition(|u| !is_zero(u)).map_or(0, |u| (u + 1) * HEAD_UNIT)
}

/// Whether every byte of `b` is zero, 8 bytes a step.
fn is_zero(b: &[u8]) -> bool {
    let words = b.chunks_exact(8);
    let rest = words.remainder();
    words.fold(0, |acc, w| acc | u64::from_le_bytes(w.try_into().expect("8 bytes"))) == 0
        && rest.iter().all(|&x| x == 0)
}

/// Program/erase state of one touched block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockState {
    pub erase_count: u32,
    /// Pages programmed since the last erase; the next program must target this page.
    pub write_ptr: u32,
}

/// Operation counts of the media (monotonic since open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NandStats {
    pub pages_read: u64,
    pub pages_programmed: u64,
    pub blocks_erased: u64,
}

/// A media's pages where they lie (see [`RawFlash::in_place`]).
#[derive(Debug, Clone, Copy)]
pub struct InPlace<'a> {
    /// Every page's bytes, page `ppn` at `ppn * page_size`. Read only pages known to be programmed: the
    /// others are holes of the image, which a full tmpfs cannot even map in (the process dies of SIGBUS).
    pub pages: &'a [u8],
    /// Changes whenever a page is programmed or discarded or a block erased, so the bytes of a page stay
    /// that page's bytes for as long as it does not.
    pub epoch: u64,
}

/// Page-addressed flash media.
pub trait RawFlash {
    fn geometry(&self) -> &Geometry;

    /// Program/erase state of `block` (never-touched blocks read as erased with no wear).
    fn block(&self, block: BlockId) -> BlockState;

    /// Every block touched so far.
    fn blocks(&self) -> &HashMap<BlockId, BlockState>;

    /// First block never programmed nor erased; all blocks from here on are fresh.
    fn frontier(&self) -> BlockId;

    /// Programs `tags.len()` consecutive pages from `ppn`, all in one block, tagging page `i` with
    /// `tags[i]`.
    fn program(&mut self, ppn: Ppn, tags: &[Lpn], data: &[u8]) -> Result<()>;

    /// Checks `tags.len()` consecutive pages from `ppn` (programmed, tagged as expected, checksums
    /// matching) and hands their bytes to `f` in place.
    fn with_pages<R>(&self, ppn: Ppn, tags: &[Lpn], f: impl FnOnce(&[u8]) -> R) -> Result<R>;

    /// Reads consecutive pages from `ppn` into `buf` (whole pages), checking each against its checksum
    /// whatever its tag; returns the tags.
    fn read_tagged(&self, ppn: Ppn, buf: &mut [u8]) -> Result<Vec<Lpn>>;

    /// [`RawFlash::with_pages`] into `buf` (whole pages, as many as `tags`): the same checks, the bytes
    /// copied. Media whose pages a read can copy straight from their store do so (see `Nand`).
    fn read_into(&self, ppn: Ppn, tags: &[Lpn], buf: &mut [u8]) -> Result<()> {
        self.with_pages(ppn, tags, |data| insitu_kernels::arch::copy(buf, data))
    }

    /// Page `ppn` (tagged `tag`) in a buffer of its own, with [`RawFlash::with_pages`]'s checks: its
    /// bytes, or only its head where the media knows the rest to be zeros (see [`Oob::head`]). The
    /// page is the buffer's bytes, then zeros up to the page size.
    fn read_head(&self, ppn: Ppn, tag: Lpn) -> Result<Vec<u8>> {
        self.with_pages(ppn, &[tag], insitu_kernels::arch::to_vec)
    }

    /// The spare-area record of one page, if it holds one.
    fn read_oob(&self, ppn: Ppn) -> Option<Oob>;

    /// A hint that bytes `at..at + len` of page `ppn` and its spare area are read soon: media that hold
    /// pages in memory ask for them now, so that a read of many short ranges at random places overlaps
    /// their misses. Changes nothing, counts nothing; by default, nothing is done.
    fn prefetch(&self, _ppn: Ppn, _at: usize, _len: usize) {}

    /// Erases `block`.
    fn erase(&mut self, block: BlockId) -> Result<()>;

    /// Makes programmed pages durable.
    fn sync(&self) -> Result<()>;

    /// Whether pages were programmed (or blocks erased) since the last [`RawFlash::sync`]. Media that
    /// cannot tell say yes.
    fn unsynced(&self) -> bool {
        true
    }

    /// Operation counts since open.
    fn stats(&self) -> NandStats;

    /// The pages in place, unchecked and uncounted, where the media keeps them in memory the host can map
    /// (none where pages come through a controller). For a caller that read pages through
    /// [`RawFlash::with_pages`] (checked and counted then), keeps them as read, and reads those bytes
    /// again while the epoch stays: a device holding a range of pages in its own memory, emulated
    /// without a copy of it.
    fn in_place(&self) -> Option<InPlace<'_>> {
        None
    }

    /// Forgets which pages were found to match their checksums, so that the next reads check every byte
    /// again (`fsck`). Media that remember nothing do nothing.
    fn forget_verified(&self) {}

    /// Forgets that pages `ppns` were found to match their checksums, so that their next read checks
    /// every byte: what a move reads (garbage collection, cleaning), so that a page changed since it was
    /// last checked fails there rather than being written again under a fresh checksum.
    fn forget_verified_pages(&self, ppns: &[Ppn]) {
        let _ = ppns;
    }

    /// Bytes the host's file system holding the media can still take, if it says (media kept in memory,
    /// or that cannot tell, say nothing).
    fn host_free_bytes(&self) -> Option<u64> {
        None
    }

    /// Gives the host's disk space of erased `block` back, where the media takes it (see
    /// [`crate::nand::Nand`]); elsewhere nothing changes.
    fn discard(&mut self, block: BlockId) -> Result<()> {
        let _ = block;
        Ok(())
    }

    /// Recovery: replaces the block states with those of a checkpoint.
    fn restore(&mut self, blocks: HashMap<BlockId, BlockState>);

    /// Recovery: a journaled program of `count` pages at `ppn` (state only).
    fn replay_program(&mut self, ppn: Ppn, count: u32);

    /// Recovery: a journaled erase (state only).
    fn replay_erase(&mut self, block: BlockId);

    /// Reads pages expected to hold `tags` into `buf`.
    fn read(&self, ppn: Ppn, tags: &[Lpn], buf: &mut [u8]) -> Result<()> {
        self.with_pages(ppn, tags, |data| insitu_kernels::arch::copy(buf, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A page's head ends at the unit holding its last nonzero byte (a naive scan says where); its
        /// record matches the page whole and its head alone, and a byte changed anywhere does not match.
        #[test]
        fn the_head_holds_every_nonzero_byte_and_its_record_checks_them(
            len in 0usize..600,
            fill in 0usize..600,
            flip in 0usize..600,
        ) {
            let page: Vec<u8> = (0..len).map(|i| if i < fill { (i * 7 % 5) as u8 } else { 0 }).collect();
            let want = page
                .iter()
                .rposition(|&b| b != 0)
                .map_or(0, |i| ((i / HEAD_UNIT + 1) * HEAD_UNIT).min(len));
            let head = head_len(&page);
            proptest::prop_assert_eq!(head, want);
            let rec = Oob::of(9, &page);
            proptest::prop_assert_eq!(rec.head_len(len), head);
            proptest::prop_assert!(rec.matches(&page, len));
            proptest::prop_assert!(rec.matches(&page[..head], len));
            if len > 0 {
                let mut bad = page.clone();
                bad[flip % len] ^= 0x10;
                proptest::prop_assert!(!rec.matches(&bad, len), "a changed byte at {} matched", flip % len);
            }
            // The record survives its spare area.
            let mut area = [0u8; OOB_BYTES];
            rec.encode(&mut area);
            proptest::prop_assert_eq!(Oob::decode(&area), Some(Oob { head: Some(head.div_ceil(HEAD_UNIT) as u32 * HEAD_UNIT as u32), ..rec }));
        }
    }

    #[test]
    fn records_of_whole_pages_from_before_heads_still_decode() {
        let rec = Oob { lpn: 77, crc: 0xDEAD_BEEF, head: None };
        let mut area = [0u8; OOB_BYTES];
        rec.encode(&mut area);
        assert_eq!(&area[12..16], b"1BOO", "the first format's magic, as it is on disk");
        assert_eq!(Oob::decode(&area), Some(rec));
        assert_eq!(rec.head_len(512), 512);
        assert_eq!(Oob::decode(&[0u8; OOB_BYTES]), None, "an erased spare area holds no record");
    }
}
