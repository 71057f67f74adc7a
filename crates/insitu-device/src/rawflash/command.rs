//! The raw interface's vocabulary (BlueDBM §3.1): addresses, commands, the events a user gets back,
//! and what the interface refuses.

use std::ops::Range;
use std::sync::Arc;

use insitu_flash::FlashError;
use serde::{Deserialize, Serialize};

use crate::network::Ps;

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

/// How a read's page comes back to its user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Delivery {
    /// Slice by slice, each as it crosses the card (§3.1's bursts, interleaved across tags): for a user
    /// that acts on each, such as a node forwarding a remote read's slices onto the network.
    Slices,
    /// Once, when the last slice has crossed the card: one [`Event::ReadData`] of the whole page at that
    /// time, with when its first slice came ([`PageSlice::first_at_ps`]). The slices move on the card
    /// exactly as with [`Delivery::Slices`] (same times for every command); only the user is not told of
    /// each, as an in-store processor's page buffer signals a whole page.
    Page,
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
    /// How a read's page comes back (ignored by writes and erases).
    pub delivery: Delivery,
}

impl FlashCommand {
    /// A read whose page comes back slice by slice.
    pub fn read(addr: FlashAddr, tag: Tag) -> Self {
        FlashCommand { op: FlashOp::Read, addr, tag, spare: 0, delivery: Delivery::Slices }
    }

    /// A read whose page comes back in one event, once all of it has crossed the card.
    pub fn read_page(addr: FlashAddr, tag: Tag) -> Self {
        FlashCommand { delivery: Delivery::Page, ..Self::read(addr, tag) }
    }

    pub fn write(addr: FlashAddr, tag: Tag, spare: u64) -> Self {
        FlashCommand { op: FlashOp::Write, addr, tag, spare, delivery: Delivery::Slices }
    }

    pub fn erase(addr: FlashAddr, tag: Tag) -> Self {
        FlashCommand { op: FlashOp::Erase, addr, tag, spare: 0, delivery: Delivery::Slices }
    }
}

/// A slice of a page a read returns: the page is read once and shared by its slices, which move as
/// ranges of it, never copied.
#[derive(Debug, Clone)]
pub struct PageSlice {
    pub(crate) page: Arc<Vec<u8>>,
    pub(crate) range: Range<usize>,
    /// The page's spare-area record.
    pub spare: u64,
    /// Whether this is the page's last slice (its tag is free again).
    pub last: bool,
    /// When the page's first slice reached the user (for a [`Delivery::Page`] read, whose one event
    /// comes at its last slice's time).
    pub first_at_ps: Ps,
}

impl PageSlice {
    /// The slice's bytes the page's buffer holds: all of them, or fewer (maybe none) where the slice
    /// reaches past the page's head, whose bytes are zeros (see [`RawFlash::read_head`]).
    ///
    /// [`RawFlash::read_head`]: insitu_flash::raw::RawFlash::read_head
    pub fn bytes(&self) -> &[u8] {
        let end = self.range.end.min(self.page.len());
        &self.page[self.range.start.min(end)..end]
    }

    /// Bytes of the page the slice spans.
    pub fn span(&self) -> usize {
        self.range.len()
    }

    /// Puts the slice's bytes into `dst` (as long as its span): the ones held, then zeros.
    pub fn copy_to(&self, dst: &mut [u8]) {
        let held = self.bytes();
        dst[..held.len()].copy_from_slice(held);
        dst[held.len()..].fill(0);
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
