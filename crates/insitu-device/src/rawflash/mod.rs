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
//! let mut page = Vec::new();
//! while let Some(c) = ctrl.poll() {
//!     if let Event::ReadData(slice) = &c.event { page.extend_from_slice(slice.bytes()); }
//! }
//! assert_eq!(page, vec![5u8; 8192]);
//! assert!(ctrl.now() > 75_000_000);                        // tR alone is 75 us on this profile
//! ```

pub mod controller;
pub mod media;
pub mod partition;
pub mod server;
pub mod splitter;

use std::ops::Range;
use std::sync::Arc;

use insitu_flash::FlashError;
use serde::{Deserialize, Serialize};

pub use controller::{FlashController, RawStats};
pub use media::TaggedMedia;
pub use partition::{RawInfo, RawPartition};
pub use server::{AddressTranslation, FileHandle, FlashServer};
pub use splitter::{Source, Splitter};

use crate::error::DeviceError;
pub use crate::network::Ps;
use crate::profile::Profile;

/// A command's tag: names it among the commands in flight on its card.
pub type Tag = u32;

/// A physical page, as the raw interface names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FlashAddr {
    pub card: u32,
    pub bus: u32,
    pub chip: u32,
    /// The erase block, counted within its chip.
    pub block: u64,
    pub page: u32,
}

impl std::fmt::Display for FlashAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "card {} bus {} chip {} block {} page {}",
            self.card, self.bus, self.chip, self.block, self.page
        )
    }
}

/// What a command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlashOp {
    Read,
    Write,
    Erase,
}

/// One command of the raw interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashCommand {
    pub op: FlashOp,
    /// For an erase, the page is ignored: the whole block is erased.
    pub addr: FlashAddr,
    pub tag: Tag,
    /// What a write records in the page's spare area (whoever manages the flash decides: the FTL puts
    /// the logical page there, a file system its own back-pointer).
    pub spare: u64,
}

impl FlashCommand {
    pub fn read(addr: FlashAddr, tag: Tag) -> Self {
        FlashCommand { op: FlashOp::Read, addr, tag, spare: 0 }
    }

    pub fn write(addr: FlashAddr, tag: Tag, spare: u64) -> Self {
        FlashCommand { op: FlashOp::Write, addr, tag, spare }
    }

    pub fn erase(addr: FlashAddr, tag: Tag) -> Self {
        FlashCommand { op: FlashOp::Erase, addr, tag, spare: 0 }
    }
}

/// A slice of a page a read returns: the page is read once and shared by its slices, which move as
/// ranges of it, never copied.
#[derive(Debug, Clone)]
pub struct PageSlice {
    page: Arc<Vec<u8>>,
    range: Range<usize>,
    /// The page's spare-area record.
    pub spare: u64,
    /// Whether this is the page's last slice (its tag is free again).
    pub last: bool,
}

impl PageSlice {
    pub fn bytes(&self) -> &[u8] {
        &self.page[self.range.clone()]
    }

    /// Where in the page the slice starts.
    pub fn offset(&self) -> usize {
        self.range.start
    }
}

/// What the controller tells a command's user.
#[derive(Debug)]
pub enum Event {
    /// A slice of a read page.
    ReadData(PageSlice),
    /// The controller is ready for a write's data: send it with `write_data`.
    WriteDataRequest,
    /// A write or an erase is done, or a command failed (a read of an erased page, a media error).
    Ack(Result<FlashOp, RawFlashError>),
}

impl Event {
    /// Whether this event ends its command (its tag is free again).
    pub fn is_done(&self) -> bool {
        match self {
            Event::ReadData(s) => s.last,
            Event::WriteDataRequest => false,
            Event::Ack(_) => true,
        }
    }
}

/// An event for the command `tag` of `card`, at simulated time `at_ps`.
#[derive(Debug)]
pub struct Completion {
    pub card: u32,
    pub tag: Tag,
    pub at_ps: Ps,
    pub event: Event,
}

/// What the raw interface refuses. Plain data (serde), so it crosses the device protocol as it is.
#[derive(Debug, thiserror::Error, Serialize, Deserialize)]
pub enum RawFlashError {
    #[error("flash address {addr} is past the geometry ({cards} cards x {buses} buses x {chips} chips x {blocks} blocks x {pages} pages)")]
    PastGeometry { addr: FlashAddr, cards: u32, buses: u32, chips: u32, blocks: u64, pages: u32 },
    #[error("tag {tag} is past the {tags} tags of card {card}")]
    TagOutOfRange { card: u32, tag: Tag, tags: u32 },
    #[error("tag {tag} of card {card} is already in flight")]
    TagInUse { card: u32, tag: Tag },
    #[error("program of {addr} out of order: the block's next erased page is {next} (erase before write, pages of a block in order)")]
    OutOfOrder { addr: FlashAddr, next: u32 },
    #[error("read of erased page {addr}")]
    ErasedPage { addr: FlashAddr },
    #[error("no write-data request is pending for tag {tag} of card {card}")]
    NoWriteRequest { card: u32, tag: Tag },
    #[error("write data for tag {tag} of card {card} is {got} bytes; a page is {page}")]
    WrongLength { card: u32, tag: Tag, got: usize, page: usize },
    #[error("unknown file handle {0} (the host has not mapped it)")]
    UnknownHandle(u64),
    #[error("bytes {offset}..{end} are past the end of file handle {handle} ({size} bytes)")]
    PastFileEnd { handle: u64, offset: u64, end: u64, size: u64 },
    #[error("the controller went idle with {pending} requests outstanding")]
    Lost { pending: usize },
    #[error(transparent)]
    Flash(#[from] FlashError),
}

/// The figures the controller runs on (from a profile's `[nand]` and `[nand.interface]`).
#[derive(Debug, Clone, PartialEq)]
pub struct RawConfig {
    pub cards: u32,
    pub tags_per_card: u32,
    pub read_ps: Ps,
    pub program_ps: Ps,
    pub erase_ps: Ps,
    /// Time one page occupies its bus.
    pub bus_page_ps: Ps,
    /// Bytes a returned slice holds: a whole number of bursts, a sixteenth of a page when it can be.
    pub slice_bytes: u32,
    /// Time a card takes to move one slice to or from its user (the card's bandwidth).
    pub slice_ps: Ps,
    /// Time a command or a slice takes between a card and its user.
    pub latency_ps: Ps,
}

/// A page comes back in this many slices (fewer when a page holds fewer bursts).
pub const SLICES_PER_PAGE: u32 = 16;

impl RawConfig {
    /// The raw interface of `profile`'s devices.
    pub fn from_profile(profile: &Profile) -> Result<RawConfig, DeviceError> {
        let raw = profile.nand.interface.as_ref().ok_or_else(|| DeviceError::InvalidProfile {
            profile: profile.name.clone(),
            detail: "it has no raw flash interface ([nand.interface]); BlueDBM's `bluedbm` profile has one"
                .into(),
        })?;
        let page = profile.nand.page_size;
        let bursts = page / raw.burst_bytes;
        let slice_bytes = raw.burst_bytes * bursts.div_ceil(SLICES_PER_PAGE).max(1);
        let ps = |us: f64| (us * 1e6).round() as Ps;
        Ok(RawConfig {
            cards: raw.cards,
            tags_per_card: raw.tags_per_card,
            read_ps: ps(profile.nand.read_latency_us),
            program_ps: ps(profile.nand.program_latency_us),
            erase_ps: ps(profile.nand.erase_latency_us),
            bus_page_ps: ps(raw.bus_page_us),
            slice_bytes,
            slice_ps: (slice_bytes as f64 / raw.card_bw * 1e12).round() as Ps,
            latency_ps: ps(raw.card_latency_us),
        })
    }
}
