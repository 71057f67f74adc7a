//! BlueDBM's raw flash interface (ISCA '15 §3.1) and what shares it (§3.1.2, Fig. 3).
//!
//! Below the FTL, a device's flash is flash cards of buses of chips, driven by tagged commands:
//! `(operation, card, bus, chip, block, page, tag)`. [`FlashController`] simulates one device's cards
//! command by command in integer picoseconds, on real pages kept by the flash layer's NAND image:
//! - each chip runs one operation at a time, in the order its commands arrived (cell read tR, program
//!   tPROG, erase tBERS); each bus moves one page at a time between a chip and the controller;
//! - reads come back as slices of the page (groups of the 128-bit bursts of §3.1, timed at the card's
//!   bandwidth), **out of order** with respect to issue and **interleaved** with other reads;
//! - a write waits for a *write-data request* before its data is sent; writes and erases end with an
//!   acknowledgement carrying a status;
//! - up to `tags_per_card` commands are in flight per card; a tag is free again after the last slice of
//!   its read or its acknowledgement;
//! - the NAND rules hold as in the flash layer: erase before program, pages of a block in order, no read
//!   of an erased page.
//!
//! Above it: [`Splitter`] shares one device's controller among its users (the host, the local in-store
//! processor, remote in-store processors) by renaming their tags; [`FlashServer`] turns the out-of-order
//! interface into an in-order page stream through page buffers; [`AddressTranslation`] maps
//! (file handle, offset, length) to the physical pages the host handed over. [`TaggedMedia`] makes the
//! controller a [`insitu_flash::raw::RawFlash`], so the flash layer's FTL runs on it unchanged (§4: "a
//! full-fledged FTL" as one user of the raw interface).
//!
//! ```
//! use insitu_device::rawflash::{Event, FlashAddr, FlashCommand, FlashController, RawConfig};
//! use insitu_device::Profile;
//! use insitu_flash::{nand::Nand, Geometry};
//! let dir = tempfile::tempdir().unwrap();
//! let profile = Profile::load("bluedbm").unwrap();
//! let geo = Geometry { blocks_per_chip: 4, ..profile.base_geometry() };
//! let mut ctrl = FlashController::new(Nand::open(dir.path(), geo).unwrap(), RawConfig::from_profile(&profile).unwrap()).unwrap();
//! let addr = FlashAddr { card: 1, bus: 3, chip: 2, block: 0, page: 0 };
//! ctrl.issue(FlashCommand::write(addr, 7, 42)).unwrap();
//! let req = ctrl.poll().unwrap();                          // the controller asks for the data
//! assert!(matches!(req.event, Event::WriteDataRequest));
//! ctrl.write_data(1, 7, &vec![5u8; 8192]).unwrap();
//! assert!(ctrl.poll().unwrap().event.is_done());           // acknowledged after tPROG
//! ctrl.issue(FlashCommand::read(addr, 9)).unwrap();
//! let mut page = vec![0u8; 8192];
//! while let Some(c) = ctrl.poll() {                         // the slices: their bytes, zeros past the head
//!     if let Event::ReadData(s) = &c.event { s.copy_to(&mut page[s.offset()..][..s.span()]); }
//! }
//! assert_eq!(page, vec![5u8; 8192]);
//! assert!(ctrl.now() > 75_000_000);                        // tR alone is 75 us on this profile
//! ```

pub mod command;
pub mod controller;
pub mod media;
pub mod partition;
pub mod server;
pub mod splitter;

pub use command::{
    Completion, Delivery, Event, FlashAddr, FlashCommand, FlashOp, PageSlice, RawFlashError, Tag,
};
pub use controller::{FlashController, RawConfig, RawStats, SLICES_PER_PAGE};
pub use media::{FtlMedia, TaggedMedia};
pub use partition::{RawInfo, RawPartition, TimedPages};
pub use server::{AddressTranslation, FileHandle, FlashServer};
pub use splitter::{Source, Splitter};

pub use crate::network::Ps;
