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
const OOB_MAGIC: u32 = 0x4F4F_4231; // "OOB1"

/// The spare-area record of one programmed page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oob {
    pub lpn: Lpn,
    pub crc: u32,
}

impl Oob {
    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.lpn.to_le_bytes());
        out[8..12].copy_from_slice(&self.crc.to_le_bytes());
        out[12..16].copy_from_slice(&OOB_MAGIC.to_le_bytes());
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Oob> {
        let magic = u32::from_le_bytes(b[12..16].try_into().ok()?);
        if magic != OOB_MAGIC {
            return None;
        }
        Some(Oob {
            lpn: u64::from_le_bytes(b[0..8].try_into().ok()?),
            crc: u32::from_le_bytes(b[8..12].try_into().ok()?),
        })
    }
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
