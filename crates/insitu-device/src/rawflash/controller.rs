//! The flash controller of one device, simulated command by command (BlueDBM §3.1).
//!
//! Resources and their order:
//! - a **chip** runs one command at a time, in arrival order (the per-chip command queues of the
//!   authors' bus model): a read holds it for tR and then its page's bus transfer; a write from the
//!   write-data request until tPROG ends; an erase for tBERS;
//! - a **bus** moves one page at a time (`bus_page_ps`), first come first served among its chips;
//! - a **card** moves slices to and from its user at its bandwidth, first come first served by the time
//!   a slice is ready: slices of reads on different buses interleave there, as the bursts of §3.1 do.
//!
//! The NAND image is touched when a chip starts a command (a read takes its page, an erase clears the
//! block) or when a write's page has crossed the bus (the program), so commands on one chip see each
//! other in order. Time only moves in `poll`: nothing happens between calls, and a command issued at
//! [`FlashController::now`] arrives one card latency later.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

use insitu_flash::geometry::{BlockId, Geometry, PhysicalPage, Ppn};
use insitu_flash::raw::RawFlash;
use insitu_flash::FlashError;
use serde::{Deserialize, Serialize};

use super::command::{
    Completion, Delivery, Event, FlashAddr, FlashCommand, FlashOp, PageSlice, RawFlashError, Tag,
};
use crate::error::DeviceError;
use crate::network::Ps;
use crate::profile::Profile;

/// What the controller did since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawStats {
    pub reads: u64,
    pub writes: u64,
    pub erases: u64,
    /// Commands that ended with a failure status.
    pub failed: u64,
    pub bytes_out: u64,
    pub bytes_in: u64,
    /// Most commands in flight on one card at once.
    pub max_in_flight: u32,
}

/// The cells' side of the controller: what it reads, programs and erases. Implemented by every
/// [`RawFlash`]; [`super::TaggedMedia`] also runs the controller over a shared borrow for reads.
pub(crate) trait Cells {
    fn write_ptr(&self, block: BlockId) -> u32;
    /// Reads one page into a buffer of its own, with its spare-area record.
    fn read_page(&self, ppn: Ppn) -> Result<(Vec<u8>, u64), FlashError>;
    fn program(&mut self, ppn: Ppn, spare: u64, data: &[u8]) -> Result<(), FlashError>;
    fn erase(&mut self, block: BlockId) -> Result<(), FlashError>;
}

impl<M: RawFlash> Cells for M {
    fn write_ptr(&self, block: BlockId) -> u32 {
        self.block(block).write_ptr
    }

    fn read_page(&self, ppn: Ppn) -> Result<(Vec<u8>, u64), FlashError> {
        read_page(self, ppn)
    }

    fn program(&mut self, ppn: Ppn, spare: u64, data: &[u8]) -> Result<(), FlashError> {
        RawFlash::program(self, ppn, &[spare], data)
    }

    fn erase(&mut self, block: BlockId) -> Result<(), FlashError> {
        RawFlash::erase(self, block)
    }
}

/// Page `ppn` of `media` in a buffer of its own, checked against its checksum whatever its spare area
/// says, and that spare-area record (as [`RawFlash::read_tagged`]). The buffer holds the page's head
/// ([`RawFlash::read_head`]): a slice past it is zeros.
pub(crate) fn read_page<M: RawFlash>(media: &M, ppn: Ppn) -> Result<(Vec<u8>, u64), FlashError> {
    let spare = media.read_oob(ppn).map_or(u64::MAX, |o| o.lpn);
    Ok((media.read_head(ppn, spare)?, spare))
}

#[derive(Debug)]
struct Slot {
    cmd: FlashCommand,
    ppn: Ppn,
    chip: usize,
    bus: usize,
    page: Option<Arc<Vec<u8>>>,
    spare: u64,
    data: Option<Vec<u8>>,
    awaiting_data: bool,
    result: Option<Result<(), RawFlashError>>,
    /// A read's page: when its bus transfer began, and its first slice's order number.
    bus_start: Ps,
    first_order: u64,
    /// When the read's first slice reaches the user.
    first_at: Ps,
}

#[derive(Debug, Default)]
struct Card {
    slots: Vec<Option<Slot>>,
    in_flight: u32,
    /// When the card's path to its user is next free, each way.
    out_free: Ps,
    in_free: Ps,
    /// Read slices waiting for the card's path: (ready at, order, tag, slice).
    slices: BinaryHeap<Reverse<(Ps, u64, Tag, u32)>>,
    /// Read slices on their way to the user, in the order they left the card (which is the order of
    /// (time, order) too: the path is first come first served and the order numbers grow). Kept apart from
    /// [`Sim::user`] because a congested path can have thousands in flight, a heap's worth of work each.
    told: VecDeque<Told>,
}

#[derive(Debug, Default)]
struct Unit {
    busy: bool,
    queue: VecDeque<(u32, Tag)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Arrive,
    CellDone,
    BusDone,
    DataIn,
    OpDone,
}

/// An event for the user, due at a time; ordered by (time, order of telling).
#[derive(Debug)]
struct Told {
    at: Ps,
    order: u64,
    completion: Completion,
}

impl PartialEq for Told {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}

impl Eq for Told {}

impl PartialOrd for Told {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Told {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

/// A step of a command due at a time: (when, order, step, card, tag).
type Due = Reverse<(Ps, u64, Step, u32, Tag)>;

/// The simulation, apart from the cells it works on.
#[derive(Debug)]
pub(crate) struct Sim {
    cfg: RawConfig,
    geo: Geometry,
    buses_per_card: u32,
    now: Ps,
    order: u64,
    cards: Vec<Card>,
    chips: Vec<Unit>,
    buses: Vec<Unit>,
    steps: BinaryHeap<Due>,
    user: BinaryHeap<Reverse<Told>>,
    /// Per block with writes or erases in flight: (next page to program, commands in flight).
    expect: HashMap<BlockId, (u32, u32)>,
    stats: RawStats,
}

impl Sim {
    pub(crate) fn new(geo: Geometry, cfg: RawConfig) -> Result<Sim, RawFlashError> {
        if cfg.cards == 0 || !geo.channels.is_multiple_of(cfg.cards) {
            return Err(FlashError::InvalidGeometry(format!(
                "{} buses do not split evenly over {} flash cards",
                geo.channels, cfg.cards
            ))
            .into());
        }
        let cards = (0..cfg.cards)
            .map(|_| Card { slots: (0..cfg.tags_per_card).map(|_| None).collect(), ..Card::default() })
            .collect();
        Ok(Sim {
            buses_per_card: geo.channels / cfg.cards,
            cards,
            chips: (0..geo.chips()).map(|_| Unit::default()).collect(),
            buses: (0..geo.channels).map(|_| Unit::default()).collect(),
            cfg,
            geo,
            now: 0,
            order: 0,
            steps: BinaryHeap::new(),
            user: BinaryHeap::new(),
            expect: HashMap::new(),
            stats: RawStats::default(),
        })
    }

    pub(crate) fn config(&self) -> &RawConfig {
        &self.cfg
    }

    pub(crate) fn now(&self) -> Ps {
        self.now
    }

    pub(crate) fn stats(&self) -> RawStats {
        self.stats
    }

    /// When something next happens inside, if anything is in flight.
    pub(crate) fn next_time(&self) -> Option<Ps> {
        let step = self.steps.peek().map(|r| r.0 .0);
        let slice = self.cards.iter().filter_map(|c| c.slices.peek().map(|r| r.0 .0)).min();
        let told = self.next_told().map(|(at, _, _)| at);
        [step, slice, told].into_iter().flatten().min()
    }

    /// The earliest time the user can next be told anything: an event already waiting for it, or one
    /// card latency after the next step inside (everything told reaches the user at least a card latency
    /// after what caused it). A co-simulation that only reacts to what it is told need not poll before
    /// then: polling later runs the same steps in the same order.
    pub(crate) fn next_tell_bound(&self) -> Option<Ps> {
        let step = self.steps.peek().map(|r| r.0 .0);
        let slice = self.cards.iter().filter_map(|c| c.slices.peek().map(|r| r.0 .0)).min();
        let inside = step.into_iter().chain(slice).min().map(|t| t.saturating_add(self.cfg.latency_ps));
        let told = self.next_told().map(|(at, _, _)| at);
        inside.into_iter().chain(told).min()
    }

    /// The next event due for the user: (time, order, the card whose read slice it is, or `None` for
    /// [`Sim::user`]'s). Merges the cards' queues with the heap by (time, order), as one heap would.
    fn next_told(&self) -> Option<(Ps, u64, Option<usize>)> {
        let mut next = self.user.peek().map(|r| (r.0.at, r.0.order, None));
        for (i, c) in self.cards.iter().enumerate() {
            if let Some(t) = c.told.front() {
                if next.is_none_or(|(at, order, _)| (t.at, t.order) < (at, order)) {
                    next = Some((t.at, t.order, Some(i)));
                }
            }
        }
        next
    }

    pub(crate) fn in_flight(&self, card: u32) -> u32 {
        self.cards.get(card as usize).map_or(0, |c| c.in_flight)
    }

    pub(crate) fn ppn_of(&self, a: &FlashAddr) -> Result<Ppn, RawFlashError> {
        let past = || RawFlashError::PastGeometry {
            addr: *a,
            cards: self.cfg.cards,
            buses: self.buses_per_card,
            chips: self.geo.chips_per_channel,
            blocks: self.geo.blocks_per_chip,
            pages: self.geo.pages_per_block,
        };
        if a.card >= self.cfg.cards || a.bus >= self.buses_per_card {
            return Err(past());
        }
        let channel = a.card * self.buses_per_card + a.bus;
        self.geo
            .ppn_of(&PhysicalPage { channel, chip: a.chip, block: a.block, page: a.page })
            .ok_or_else(past)
    }

    pub(crate) fn addr_of(&self, ppn: Ppn) -> FlashAddr {
        let p = self.geo.physical(ppn);
        FlashAddr {
            card: p.channel / self.buses_per_card,
            bus: p.channel % self.buses_per_card,
            chip: p.chip,
            block: p.block,
            page: p.page,
        }
    }

    fn next_order(&mut self) -> u64 {
        self.order += 1;
        self.order
    }

    fn step(&mut self, at: Ps, step: Step, card: u32, tag: Tag) {
        let o = self.next_order();
        self.steps.push(Reverse((at, o, step, card, tag)));
    }

    fn tell(&mut self, at: Ps, card: u32, tag: Tag, event: Event) {
        let o = self.next_order();
        self.user.push(Reverse(Told {
            at,
            order: o,
            completion: Completion { card, tag, at_ps: at, event },
        }));
    }

    fn slot(&mut self, card: u32, tag: Tag) -> &mut Slot {
        self.cards[card as usize].slots[tag as usize].as_mut().expect("a step names a command in flight")
    }

    pub(crate) fn issue(&mut self, cells: &impl Cells, cmd: FlashCommand) -> Result<(), RawFlashError> {
        let mut addr = cmd.addr;
        if cmd.op == FlashOp::Erase {
            addr.page = 0;
        }
        let ppn = self.ppn_of(&addr)?;
        let (card, tag) = (cmd.addr.card, cmd.tag);
        let tags = self.cfg.tags_per_card;
        match self.cards[card as usize].slots.get(tag as usize) {
            None => return Err(RawFlashError::TagOutOfRange { card, tag, tags }),
            Some(Some(_)) => return Err(RawFlashError::TagInUse { card, tag }),
            Some(None) => {}
        }
        let block = self.geo.block_of(ppn);
        match cmd.op {
            FlashOp::Write => {
                let next = self.expect.get(&block).map_or_else(|| cells.write_ptr(block), |e| e.0);
                if addr.page != next {
                    return Err(RawFlashError::OutOfOrder { addr, next });
                }
                let e = self.expect.entry(block).or_insert((next, 0));
                *e = (next + 1, e.1 + 1);
            }
            FlashOp::Erase => {
                let e = self.expect.entry(block).or_insert((0, 0));
                *e = (0, e.1 + 1);
            }
            FlashOp::Read => {}
        }
        let phys = self.geo.physical(ppn);
        let slot = Slot {
            cmd,
            ppn,
            chip: (phys.channel * self.geo.chips_per_channel + phys.chip) as usize,
            bus: phys.channel as usize,
            page: None,
            spare: 0,
            data: None,
            awaiting_data: false,
            result: None,
            bus_start: 0,
            first_order: 0,
            first_at: 0,
        };
        let c = &mut self.cards[card as usize];
        c.slots[tag as usize] = Some(slot);
        c.in_flight += 1;
        self.stats.max_in_flight = self.stats.max_in_flight.max(c.in_flight);
        self.step(self.now + self.cfg.latency_ps, Step::Arrive, card, tag);
        Ok(())
    }

    pub(crate) fn write_data(&mut self, card: u32, tag: Tag, data: &[u8]) -> Result<(), RawFlashError> {
        let page = self.geo.page_size as usize;
        let slot = self
            .cards
            .get_mut(card as usize)
            .and_then(|c| c.slots.get_mut(tag as usize))
            .and_then(|s| s.as_mut())
            .filter(|s| s.awaiting_data)
            .ok_or(RawFlashError::NoWriteRequest { card, tag })?;
        if data.len() != page {
            return Err(RawFlashError::WrongLength { card, tag, got: data.len(), page });
        }
        slot.awaiting_data = false;
        slot.data = Some(data.to_vec());
        let slices = self.slices_per_page() as Ps;
        let c = &mut self.cards[card as usize];
        let start = self.now.max(c.in_free);
        c.in_free = start + slices * self.cfg.slice_ps;
        let arrives = c.in_free + self.cfg.latency_ps;
        self.stats.bytes_in += page as u64;
        self.step(arrives, Step::DataIn, card, tag);
        Ok(())
    }

    fn slices_per_page(&self) -> u32 {
        self.geo.page_size.div_ceil(self.cfg.slice_bytes)
    }

    /// The next event for a user, at or before `limit`, advancing simulated time to it; `None` when
    /// nothing happens until `limit` (time is then `limit`) or nothing is in flight.
    pub(crate) fn poll_until(&mut self, cells: &mut impl Cells, limit: Ps) -> Option<Completion> {
        loop {
            let step = self.steps.peek().map_or(Ps::MAX, |r| r.0 .0);
            let (slice, card) = self
                .cards
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.slices.peek().map(|r| (r.0 .0, i)))
                .min()
                .unwrap_or((Ps::MAX, 0));
            let next_told = self.next_told();
            let told = next_told.map_or(Ps::MAX, |(at, _, _)| at);
            let t = step.min(slice).min(told);
            if t == Ps::MAX || t > limit {
                if limit != Ps::MAX {
                    self.now = self.now.max(limit);
                }
                return None;
            }
            if slice == t {
                self.send_slice(card);
            } else if step == t {
                let Reverse((at, _, step, card, tag)) = self.steps.pop().expect("peeked");
                self.run_step(cells, at, step, card, tag);
            } else {
                let c = match next_told.and_then(|(_, _, card)| card) {
                    Some(card) => self.cards[card].told.pop_front().expect("peeked").completion,
                    None => self.user.pop().expect("peeked").0.completion,
                };
                self.now = c.at_ps;
                if c.event.is_done() {
                    self.retire(c.card, c.tag);
                }
                return Some(c);
            }
        }
    }

    fn retire(&mut self, card: u32, tag: Tag) {
        let c = &mut self.cards[card as usize];
        let slot = c.slots[tag as usize].take().expect("a finished command was in flight");
        c.in_flight -= 1;
        if slot.cmd.op != FlashOp::Read {
            let block = self.geo.block_of(slot.ppn);
            if let Some(e) = self.expect.get_mut(&block) {
                e.1 -= 1;
                if e.1 == 0 {
                    self.expect.remove(&block);
                }
            }
        }
    }

    /// Queues slice `k` of the page that `tag` of `card` moves over its bus.
    fn queue_slice(&mut self, card: u32, tag: Tag, k: u32) {
        let (n, bus_page_ps) = (self.slices_per_page() as Ps, self.cfg.bus_page_ps);
        let s = self.slot(card, tag);
        let ready = s.bus_start + (k as Ps + 1) * bus_page_ps / n;
        let order = s.first_order + k as u64;
        self.cards[card as usize].slices.push(Reverse((ready, order, tag, k)));
    }

    fn send_slice(&mut self, card: usize) {
        let Reverse((ready, _, tag, k)) = self.cards[card].slices.pop().expect("peeked");
        let n = self.slices_per_page();
        if k + 1 < n {
            self.queue_slice(card as u32, tag, k + 1);
        }
        let sb = self.cfg.slice_bytes as usize;
        let page_size = self.geo.page_size as usize;
        let range = k as usize * sb..((k as usize + 1) * sb).min(page_size);
        let ps = self.cfg.slice_ps * range.len() as Ps / sb as Ps;
        let c = &mut self.cards[card];
        let start = ready.max(c.out_free);
        c.out_free = start + ps;
        let at = c.out_free + self.cfg.latency_ps;
        self.stats.bytes_out += range.len() as u64;
        let order = self.next_order();
        let last = k + 1 == n;
        let slot = self.slot(card as u32, tag);
        if k == 0 {
            slot.first_at = at;
        }
        let range = match slot.cmd.delivery {
            Delivery::Slices => range,
            Delivery::Page if last => 0..page_size,
            // The user hears of the page at its last slice; this one's order number is spent all the
            // same, so that ties among other events break as they do for a read told slice by slice.
            Delivery::Page => return,
        };
        let slice = PageSlice {
            page: Arc::clone(slot.page.as_ref().expect("a read on the bus has its page")),
            range,
            spare: slot.spare,
            last,
            first_at_ps: slot.first_at,
        };
        let completion = Completion { card: card as u32, tag, at_ps: at, event: Event::ReadData(slice) };
        let told = &mut self.cards[card].told;
        debug_assert!(told.back().is_none_or(|t| (t.at, t.order) < (at, order)), "a card's slices in order");
        told.push_back(Told { at, order, completion });
    }

    fn run_step(&mut self, cells: &mut impl Cells, t: Ps, step: Step, card: u32, tag: Tag) {
        let (chip, bus, op) = {
            let s = self.slot(card, tag);
            (s.chip, s.bus, s.cmd.op)
        };
        match step {
            Step::Arrive => {
                self.chips[chip].queue.push_back((card, tag));
                self.start_chip(cells, chip, t);
            }
            Step::CellDone => {
                if let Some(Err(_)) = &self.slot(card, tag).result {
                    self.finish(cells, chip, t, card, tag);
                } else {
                    self.buses[bus].queue.push_back((card, tag));
                    self.start_bus(bus, t);
                }
            }
            Step::DataIn => {
                self.buses[bus].queue.push_back((card, tag));
                self.start_bus(bus, t);
            }
            Step::BusDone => {
                self.buses[bus].busy = false;
                self.start_bus(bus, t);
                if op == FlashOp::Read {
                    self.chips[chip].busy = false;
                    self.start_chip(cells, chip, t);
                } else {
                    let s = self.slot(card, tag);
                    let (ppn, spare, data) =
                        (s.ppn, s.cmd.spare, s.data.take().expect("data crossed the bus"));
                    let result = cells.program(ppn, spare, &data).map_err(RawFlashError::from);
                    self.slot(card, tag).result = Some(result);
                    self.step(t + self.cfg.program_ps, Step::OpDone, card, tag);
                }
            }
            Step::OpDone => self.finish(cells, chip, t, card, tag),
        }
    }

    /// A write, an erase or a failed read is over: its chip is free, its user gets the status.
    fn finish(&mut self, cells: &mut impl Cells, chip: usize, t: Ps, card: u32, tag: Tag) {
        self.chips[chip].busy = false;
        self.start_chip(cells, chip, t);
        let s = self.slot(card, tag);
        let op = s.cmd.op;
        let status = s.result.take().unwrap_or(Ok(())).map(|()| op);
        match (&status, op) {
            (Err(_), _) => self.stats.failed += 1,
            (Ok(_), FlashOp::Write) => self.stats.writes += 1,
            (Ok(_), FlashOp::Erase) => self.stats.erases += 1,
            (Ok(_), FlashOp::Read) => {}
        }
        self.tell(t + self.cfg.latency_ps, card, tag, Event::Ack(status));
    }

    fn start_chip(&mut self, cells: &mut impl Cells, chip: usize, t: Ps) {
        if self.chips[chip].busy {
            return;
        }
        let Some((card, tag)) = self.chips[chip].queue.pop_front() else { return };
        self.chips[chip].busy = true;
        let s = self.slot(card, tag);
        let (op, ppn, addr) = (s.cmd.op, s.ppn, s.cmd.addr);
        let block = self.geo.block_of(ppn);
        match op {
            FlashOp::Read => {
                if addr.page >= cells.write_ptr(block) {
                    self.slot(card, tag).result = Some(Err(RawFlashError::ErasedPage { addr }));
                } else {
                    match cells.read_page(ppn) {
                        Ok((page, spare)) => {
                            let s = self.slot(card, tag);
                            s.page = Some(Arc::new(page));
                            s.spare = spare;
                            self.stats.reads += 1;
                        }
                        Err(e) => self.slot(card, tag).result = Some(Err(e.into())),
                    }
                }
                self.step(t + self.cfg.read_ps, Step::CellDone, card, tag);
            }
            FlashOp::Write => {
                self.slot(card, tag).awaiting_data = true;
                self.tell(t + self.cfg.latency_ps, card, tag, Event::WriteDataRequest);
            }
            FlashOp::Erase => {
                let result = cells.erase(block).map_err(RawFlashError::from);
                self.slot(card, tag).result = Some(result);
                self.step(t + self.cfg.erase_ps, Step::OpDone, card, tag);
            }
        }
    }

    fn start_bus(&mut self, bus: usize, t: Ps) {
        if self.buses[bus].busy {
            return;
        }
        let Some((card, tag)) = self.buses[bus].queue.pop_front() else { return };
        self.buses[bus].busy = true;
        let done = t + self.cfg.bus_page_ps;
        if self.slot(card, tag).cmd.op == FlashOp::Read {
            // The page's slices are ready one after another as the bus moves it; each waits for the
            // card's path in the order of its readiness, ties by the order numbers taken here. Only
            // the next slice of a page is queued: the one after it is queued as it leaves.
            let n = self.slices_per_page();
            let first = self.order + 1;
            self.order += n as u64;
            self.slot(card, tag).bus_start = t;
            self.slot(card, tag).first_order = first;
            self.queue_slice(card, tag, 0);
        }
        self.step(done, Step::BusDone, card, tag);
    }
}

/// One device's flash controller over its NAND image `M` (see the [module](super) documentation).
#[derive(Debug)]
pub struct FlashController<M> {
    media: M,
    sim: Sim,
}

impl<M: RawFlash> FlashController<M> {
    /// A controller over `media`, whose buses (the geometry's channels) split evenly over the cards.
    pub fn new(media: M, cfg: RawConfig) -> Result<Self, RawFlashError> {
        let sim = Sim::new(*media.geometry(), cfg)?;
        Ok(FlashController { media, sim })
    }

    /// Sends a command at the current time. Refused at once (nothing changes) for an address past the
    /// geometry, a tag past the card's or in flight, a program out of order within its block.
    pub fn issue(&mut self, cmd: FlashCommand) -> Result<(), RawFlashError> {
        self.sim.issue(&self.media, cmd)
    }

    /// Sends the data of a write whose write-data request came.
    pub fn write_data(&mut self, card: u32, tag: Tag, data: &[u8]) -> Result<(), RawFlashError> {
        self.sim.write_data(card, tag, data)
    }

    /// The next event, advancing simulated time to it; `None` when nothing is in flight.
    pub fn poll(&mut self) -> Option<Completion> {
        self.sim.poll_until(&mut self.media, Ps::MAX)
    }

    /// The next event at or before `limit`; if none, time advances to `limit` and `None` comes back.
    pub fn poll_until(&mut self, limit: Ps) -> Option<Completion> {
        self.sim.poll_until(&mut self.media, limit)
    }

    /// Simulated time: when the last event handed out happened.
    pub fn now(&self) -> Ps {
        self.sim.now()
    }

    /// When something next happens inside the controller (`None`: nothing is in flight). Co-simulations
    /// advance the component whose next time is earliest.
    pub fn next_time(&self) -> Option<Ps> {
        self.sim.next_time()
    }

    /// The earliest time this controller can next tell its user anything (`None`: nothing is in flight).
    /// A co-simulation that acts only on what it is told may poll then rather than at
    /// [`FlashController::next_time`]: the steps inside run the same either way.
    pub fn next_tell_bound(&self) -> Option<Ps> {
        self.sim.next_tell_bound()
    }

    pub fn config(&self) -> &RawConfig {
        self.sim.config()
    }

    pub fn geometry(&self) -> &Geometry {
        self.media.geometry()
    }

    /// Commands in flight on `card`.
    pub fn in_flight(&self, card: u32) -> u32 {
        self.sim.in_flight(card)
    }

    pub fn stats(&self) -> RawStats {
        self.sim.stats()
    }

    /// The flash layer's page number of an address, or why it has none.
    pub fn ppn_of(&self, addr: &FlashAddr) -> Result<Ppn, RawFlashError> {
        self.sim.ppn_of(addr)
    }

    /// The address of a flash layer's page number.
    pub fn addr_of(&self, ppn: Ppn) -> FlashAddr {
        self.sim.addr_of(ppn)
    }

    pub fn media(&self) -> &M {
        &self.media
    }

    /// The media, for what is not a flash command (no time passes): giving a host's disk space back.
    pub fn media_mut(&mut self) -> &mut M {
        &mut self.media
    }
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
    /// Bytes a returned slice holds: a whole number of bursts, a tenth of a page when it can be.
    pub slice_bytes: u32,
    /// Time a card takes to move one slice to or from its user (the card's bandwidth).
    pub slice_ps: Ps,
    /// Time a command or a slice takes between a card and its user.
    pub latency_ps: Ps,
}

/// A page comes back in this many slices (fewer when a page holds fewer bursts): the grain at which the
/// simulation moves a page out of its card (the hardware moves 128-bit bursts). Ten slices of an 8 KB page
/// are 832 bytes each, which with a data message's 13-byte header make 64 flits of 106 payload bits: the
/// most one credit grant of BlueDBM's storage network moves (§3.2.2), so a page forwarded to a remote
/// reader crosses as 10 network units. Sixteen slices (512 bytes) needed 16 units of 40 flits, and 60%
/// more events for the same bytes. Between the two, the modeled latency of a remote flash read moves by under
/// 0.5%, of a remote DRAM read by 1.8%, and the bandwidths of Fig. 13 by under 1% (`insitu repro bluedbm-net`).
pub const SLICES_PER_PAGE: u32 = 10;

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
