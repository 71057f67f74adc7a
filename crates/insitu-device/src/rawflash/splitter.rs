//! The flash interface splitter with tag renaming (BlueDBM §3.1.2, Fig. 3): one device's controller
//! shared by the host, the local in-store processor and remote in-store processors.
//!
//! Each user names its commands with its own tags. The splitter gives each command a free tag of its
//! card (a free-tag queue of `tags_per_card`, as the authors' `FlashSplitter`), records (source, original
//! tag) under the renamed tag, and hands events back under the original tag to the source that sent the
//! command. When a card's tags are all in flight, commands wait in arrival order and go out as tags come
//! back: back-pressure, never a refusal.

use std::collections::{HashMap, HashSet, VecDeque};

use insitu_flash::raw::RawFlash;
use serde::{Deserialize, Serialize};

use super::command::{Completion, Event, FlashCommand, FlashOp, RawFlashError, Tag};
use super::controller::FlashController;
use crate::network::Ps;

/// Who sends a command through the splitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Source {
    /// The node's host, over PCIe.
    Host,
    /// The node's own in-store processor.
    Isp,
    /// The in-store processor of another node, over the storage network.
    Remote(u32),
}

#[derive(Debug)]
struct Card {
    free: VecDeque<Tag>,
    /// Renamed tag -> (source, original tag).
    table: Vec<Option<(Source, Tag)>>,
    /// (source, original tag) -> renamed tag, for write data.
    renamed: HashMap<(Source, Tag), Tag>,
    waiting: VecDeque<(Source, FlashCommand)>,
}

/// A controller shared among sources (see the [module](self) documentation).
#[derive(Debug)]
pub struct Splitter<M> {
    ctrl: FlashController<M>,
    cards: Vec<Card>,
    /// Tags each source has in flight or waiting, per card.
    busy: HashSet<(Source, u32, Tag)>,
    /// Commands that failed when they left the waiting queue, for their sources.
    failed: VecDeque<(Source, Completion)>,
}

impl<M: RawFlash> Splitter<M> {
    pub fn new(ctrl: FlashController<M>) -> Self {
        let cfg = ctrl.config();
        let cards = (0..cfg.cards)
            .map(|_| Card {
                free: (0..cfg.tags_per_card).collect(),
                table: vec![None; cfg.tags_per_card as usize],
                renamed: HashMap::new(),
                waiting: VecDeque::new(),
            })
            .collect();
        Splitter { ctrl, cards, busy: HashSet::new(), failed: VecDeque::new() }
    }

    /// Sends `cmd` for `source`, or queues it until its card has a free tag. Refused at once for an
    /// address past the geometry, a tag the source has in flight on that card, or (when it goes out at
    /// once) anything the controller refuses.
    pub fn issue(&mut self, source: Source, cmd: FlashCommand) -> Result<(), RawFlashError> {
        let mut addr = cmd.addr;
        if cmd.op == FlashOp::Erase {
            addr.page = 0;
        }
        self.ctrl.ppn_of(&addr)?;
        let card = cmd.addr.card;
        if self.busy.contains(&(source, card, cmd.tag)) {
            return Err(RawFlashError::TagInUse { card, tag: cmd.tag });
        }
        let c = &mut self.cards[card as usize];
        if !c.waiting.is_empty() || c.free.is_empty() {
            c.waiting.push_back((source, cmd));
            self.busy.insert((source, card, cmd.tag));
            return Ok(());
        }
        self.send(source, cmd)?;
        self.busy.insert((source, card, cmd.tag));
        Ok(())
    }

    fn send(&mut self, source: Source, cmd: FlashCommand) -> Result<(), RawFlashError> {
        let card = cmd.addr.card;
        let c = &mut self.cards[card as usize];
        let tag = c.free.pop_front().expect("a free tag was checked");
        if let Err(e) = self.ctrl.issue(FlashCommand { tag, ..cmd }) {
            self.cards[card as usize].free.push_front(tag);
            return Err(e);
        }
        let c = &mut self.cards[card as usize];
        c.table[tag as usize] = Some((source, cmd.tag));
        c.renamed.insert((source, cmd.tag), tag);
        Ok(())
    }

    /// Sends the data of `source`'s write `tag` on `card`, after its write-data request.
    pub fn write_data(
        &mut self,
        source: Source,
        card: u32,
        tag: Tag,
        data: &[u8],
    ) -> Result<(), RawFlashError> {
        let renamed = self
            .cards
            .get(card as usize)
            .and_then(|c| c.renamed.get(&(source, tag)))
            .copied()
            .ok_or(RawFlashError::NoWriteRequest { card, tag })?;
        self.ctrl.write_data(card, renamed, data)
    }

    /// The next event for any source, advancing simulated time to it; `None` when nothing is in flight.
    pub fn poll(&mut self) -> Option<(Source, Completion)> {
        self.poll_until(Ps::MAX)
    }

    /// The next event at or before `limit` (see [`FlashController::poll_until`]).
    pub fn poll_until(&mut self, limit: Ps) -> Option<(Source, Completion)> {
        if let Some(f) = self.failed.pop_front() {
            self.busy.remove(&(f.0, f.1.card, f.1.tag));
            return Some(f);
        }
        let mut c = self.ctrl.poll_until(limit)?;
        let card = &mut self.cards[c.card as usize];
        let (source, orig) = card.table[c.tag as usize].expect("the controller answers renamed tags");
        if c.event.is_done() {
            card.table[c.tag as usize] = None;
            card.renamed.remove(&(source, orig));
            card.free.push_back(c.tag);
            self.busy.remove(&(source, c.card, orig));
            self.drain_waiting(c.card);
        }
        c.tag = orig;
        Some((source, c))
    }

    fn drain_waiting(&mut self, card: u32) {
        while !self.cards[card as usize].free.is_empty() {
            let Some((source, cmd)) = self.cards[card as usize].waiting.pop_front() else { return };
            if let Err(e) = self.send(source, cmd) {
                let at_ps = self.ctrl.now();
                self.failed
                    .push_back((source, Completion { card, tag: cmd.tag, at_ps, event: Event::Ack(Err(e)) }));
            }
        }
    }

    /// Commands waiting for a free tag, all cards.
    pub fn waiting(&self) -> usize {
        self.cards.iter().map(|c| c.waiting.len()).sum()
    }

    pub fn controller(&self) -> &FlashController<M> {
        &self.ctrl
    }

    pub fn controller_mut(&mut self) -> &mut FlashController<M> {
        &mut self.ctrl
    }

    pub fn now(&self) -> Ps {
        self.ctrl.now()
    }

    /// When something next happens (see [`FlashController::next_time`]).
    pub fn next_time(&self) -> Option<Ps> {
        if self.failed.is_empty() {
            self.ctrl.next_time()
        } else {
            Some(self.ctrl.now())
        }
    }

    /// The earliest time a source can next be told anything (see [`FlashController::next_tell_bound`]).
    pub fn next_tell_bound(&self) -> Option<Ps> {
        if self.failed.is_empty() {
            self.ctrl.next_tell_bound()
        } else {
            Some(self.ctrl.now())
        }
    }
}
