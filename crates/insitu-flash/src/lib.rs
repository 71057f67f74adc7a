//! The SSD as media: NAND geometry in a sparse image file, raw page read / program / erase with the NAND
//! rules enforced, a page-level FTL with greedy garbage collection and wear counters, a namespace of named
//! objects made of logical-page extents, a block (LBA) view, and persistence (checkpoint + checksummed
//! journal) with crash recovery.
//!
//! Main types: [`Flash`] (one device's flash), [`Geometry`], [`Ftl`], [`ObjectMeta`], and the raw-page
//! interface below the FTL, [`raw::RawFlash`].
//!
//! ```
//! use insitu_flash::{Flash, Geometry};
//! let dir = tempfile::tempdir().unwrap();
//! let geo = Geometry { channels: 2, chips_per_channel: 1, blocks_per_chip: 1, pages_per_block: 16, page_size: 4096 };
//! let mut flash = Flash::format(dir.path(), geo, 1 << 20).unwrap();
//! let txn = flash.create_object("hello", "blob", Default::default(), None).unwrap();
//! flash.append(txn, b"hello, flash").unwrap();
//! flash.commit(txn).unwrap();
//! let mut buf = vec![0u8; 5];
//! flash.read("hello", 7, &mut buf).unwrap();
//! assert_eq!(&buf, b"flash");
//! ```

pub mod error;
mod flash;
pub mod ftl;
pub mod geometry;
pub mod interval;
pub mod namespace;
pub mod nand;
pub mod pagemap;
pub mod persist;
pub mod raw;
mod sys;

pub use error::{FlashError, Result};
pub use flash::{Flash, FlashStats, FsckReport, RecoveryReport, TxnId};
pub use ftl::{Ftl, FtlStats, WearStats};
pub use geometry::{Geometry, Lpn, PhysicalPage, Ppn};
pub use namespace::{validate_name, Extent, ObjectMeta, MAX_NAME_BYTES};
pub use sys::free_bytes;
