//! The storage network as a discrete-event simulation (BlueDBM §3.2): real messages cross it, and the
//! time they take comes from the links, not from the wall clock.
//!
//! A message is cut into flits ([`NetConfig::flit_payload_bits`] each) and moved in groups of up to
//! [`NetConfig::unit_flits`] flits (a *unit*: the simulation's grain, not a hardware packet). Each
//! direction of a cable is a channel: it sends one unit at a time, for the unit's flits times the flit
//! time; a unit may start only when the port at the far end has buffer credits for all its flits
//! (token flow control, §3.2.2: nothing is ever dropped, a full buffer stops the sender). Forwarding is
//! cut-through: a unit's head reaches the next node one hop latency after it starts, and the next
//! channel may start it then; the buffer's credits go back to the sender one hop latency after the
//! unit's head leaves the node (it streams out as it streams in; a unit that waits holds them).
//!
//! Shortest routes on a ring or a mesh can close a cycle of full buffers and deadlock the network.
//! The paper does not say how BlueDBM avoids it; here each port's buffer has one class per hop of the
//! longest route (a unit on its h-th hop uses class h), so that a unit only ever waits for a class
//! further along than its own and no cycle can form. Among classes, the oldest unit that fits goes
//! first; the units of one (endpoint, destination) are all in one class at a channel, so they stay
//! in order. At the destination a unit enters the endpoint's receive queue; a paused endpoint
//! stops draining it, and once full, units wait in the link buffers and back-pressure spreads upstream.
//! Endpoints with end-to-end flow control send only what the destination has reserved room for.
//!
//! Everything is deterministic: time is integer picoseconds, ties are broken by event order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::routes::{ChannelId, Routes};
use super::topology::{NodeId, Topology};
use crate::profile::Profile;

/// Simulated time, picoseconds.
pub type Ps = u64;

/// A logical endpoint's index on its node.
pub type EndpointId = u32;

/// The figures the simulation runs on (from a profile's `[network.storage]`, see [`NetConfig::from_profile`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NetConfig {
    pub endpoints: u32,
    pub flit_payload_bits: u32,
    /// Time one flit occupies a link.
    pub flit_ps: f64,
    pub hop_latency_ps: Ps,
    /// Credits a channel starts with: flits the far port buffers.
    pub link_buffer_flits: u32,
    /// Flits an endpoint's receive queue holds.
    pub endpoint_queue_flits: u32,
    /// Flits an endpoint's send queue holds before `send` reports back-pressure.
    pub send_queue_flits: u32,
    /// The simulation's grain: flits moved as one unit (at most half a link buffer).
    pub unit_flits: u32,
    /// Endpoints that use end-to-end flow control (bit `e` for endpoint `e`).
    pub end_to_end: u64,
}

impl NetConfig {
    /// The storage network of `profile`, or `None` if its devices have none.
    pub fn from_profile(profile: &Profile) -> Option<NetConfig> {
        let s = profile.network.storage.as_ref()?;
        Some(NetConfig {
            endpoints: s.endpoints,
            flit_payload_bits: s.flit_payload_bits,
            flit_ps: s.flit_ps(),
            hop_latency_ps: (profile.network.hop_latency_us * 1e6).round() as Ps,
            link_buffer_flits: s.link_buffer_flits,
            endpoint_queue_flits: s.endpoint_queue_flits,
            send_queue_flits: s.endpoint_queue_flits,
            unit_flits: (s.link_buffer_flits / 2).min(64),
            end_to_end: 0,
        })
    }

    /// Flits a message of `bytes` needs (at least one: an empty message still crosses as a packet).
    pub fn flits(&self, bytes: usize) -> u64 {
        ((bytes as u64 * 8).div_ceil(self.flit_payload_bits as u64)).max(1)
    }

    fn unit_ps(&self, flits: u32) -> Ps {
        (flits as f64 * self.flit_ps).round() as Ps
    }
}

/// Why a message was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    #[error("node {0} is not in the network")]
    UnknownNode(NodeId),
    #[error("endpoint {0} does not exist (endpoints 0 to {last})", last = .1.saturating_sub(1))]
    UnknownEndpoint(EndpointId, u32),
    /// Back-pressure: the endpoint's send queue is full; send again after the network has moved on.
    #[error("endpoint {ep} of node {node} is full (back-pressure): try again later")]
    Full { node: NodeId, ep: EndpointId },
    #[error("a message of {flits} flits can never fit endpoint {ep}'s queues of {limit} flits")]
    TooLarge { ep: EndpointId, flits: u64, limit: u64 },
}

/// What a message carries. The network moves it whole, without looking inside, and prices it by its
/// length on the wire: a caller whose bytes already sit in a buffer of their own (a page read from
/// flash) sends a reference to them rather than a copy.
pub trait Payload {
    /// Bytes the message takes on the wire, headers included: its flits are counted from them.
    fn wire_len(&self) -> usize;
}

impl Payload for Vec<u8> {
    fn wire_len(&self) -> usize {
        self.len()
    }
}

/// A message as the destination receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery<P = Vec<u8>> {
    pub src: NodeId,
    pub dst: NodeId,
    pub ep: EndpointId,
    pub data: P,
    pub sent_ps: Ps,
    /// When its last flit reached the destination's endpoint.
    pub delivered_ps: Ps,
    pub hops: u32,
    /// The message's number in the order messages were sent, network-wide.
    pub seq: u64,
}

type UnitId = u32;
type MsgId = u32;

#[derive(Debug)]
struct Unit {
    msg: MsgId,
    flits: u32,
    /// The channel and buffer class whose far buffer holds this unit (`None` while it is still in its
    /// send queue).
    held: Option<(ChannelId, u32)>,
    /// Channels crossed so far: the buffer class it takes on the next one.
    hop: u32,
    /// When its head reached the node it is at.
    head_ps: Ps,
}

#[derive(Debug)]
struct Msg<P> {
    src: NodeId,
    dst: NodeId,
    ep: EndpointId,
    data: P,
    units_left: u32,
    sent_ps: Ps,
    seq: u64,
}

#[derive(Debug, Default)]
struct ChannelState {
    busy_until: Ps,
    /// Credits per buffer class of the far port.
    credits: Vec<u32>,
    /// Units at the channel's node waiting to cross it, per buffer class, with their arrival number.
    waiting: Vec<VecDeque<(u64, UnitId)>>,
}

#[derive(Debug)]
struct EndpointState<P> {
    /// Units not yet handed to their first channel (they wait for end-to-end credits).
    pending: VecDeque<UnitId>,
    /// Flits in the send queue (pending or waiting for the first channel).
    send_flits: u64,
    /// Flits in the receive queue, not yet drained by the endpoint's user.
    recv_flits: u64,
    /// Units arrived while the receive queue was full, held in their link buffers.
    parked: VecDeque<UnitId>,
    /// Units in the receive queue.
    queued: VecDeque<UnitId>,
    paused: bool,
    ready: VecDeque<Delivery<P>>,
    /// [`Network::room_freed`] when this endpoint's send queue last got room back.
    room_freed_at: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A channel finished sending a unit.
    ChannelFree(ChannelId),
    /// Credits reach a channel's sender.
    Credit(ChannelId, u32, u32),
    /// A unit's head reaches a node.
    Arrive(UnitId),
    /// A unit's tail reaches its destination's receive queue.
    Land(UnitId),
    /// End-to-end credits reach endpoint `ep` of `src` for destination `dst`.
    EndToEnd { src: NodeId, dst: NodeId, ep: EndpointId, flits: u64 },
}

impl<P> Default for EndpointState<P> {
    fn default() -> Self {
        EndpointState {
            pending: VecDeque::new(),
            send_flits: 0,
            recv_flits: 0,
            parked: VecDeque::new(),
            queued: VecDeque::new(),
            paused: false,
            ready: VecDeque::new(),
            room_freed_at: 0,
        }
    }
}

/// A storage network in simulation: nodes, channels, endpoints, and the events still to happen. The
/// messages carry `P` (bytes by default, see [`Payload`]).
#[derive(Debug)]
pub struct Network<P = Vec<u8>> {
    cfg: NetConfig,
    /// [`NetConfig::unit_ps`] of every unit size up to [`NetConfig::unit_flits`] (a lookup, not a rounding,
    /// on each unit's crossing).
    unit_ps: Vec<Ps>,
    routes: Routes,
    now: Ps,
    events: BinaryHeap<Reverse<(Ps, u64, Event)>>,
    /// Events due one hop latency after they were scheduled (a unit's head reaching the next node,
    /// credits going back): most of them. Time never goes back, so this queue is in (time, order) order
    /// and merging it with the heap gives the heap's order, without a heap's work for each.
    hop_events: VecDeque<(Ps, u64, Event)>,
    event_seq: u64,
    channels: Vec<ChannelState>,
    endpoints: Vec<EndpointState<P>>,
    /// Current position of every unit in flight (the node it is at).
    at: Vec<NodeId>,
    units: Vec<Option<Unit>>,
    free_units: Vec<UnitId>,
    msgs: Vec<Option<Msg<P>>>,
    free_msgs: Vec<MsgId>,
    msg_seq: u64,
    /// Units queued at channels so far (their arrival numbers).
    arrivals: u64,
    /// End-to-end credits, `[src][dst][ep]`, in flits.
    e2e: Vec<u64>,
    /// Deliveries in completion order, as (node, endpoint) of the endpoint that holds them.
    completed: VecDeque<(NodeId, EndpointId, u64)>,
    /// Deliveries not yet received.
    ready_total: usize,
    /// Times a send queue got room back (see [`Network::room_freed`]).
    room_freed: u64,
}

impl<P: Payload> Network<P> {
    pub fn new(topology: &Topology, cfg: NetConfig) -> Network<P> {
        let routes = Routes::build(topology, cfg.endpoints);
        let n = topology.nodes() as usize;
        let classes = (0..n as NodeId)
            .flat_map(|a| (0..n as NodeId).map(move |b| (a, b)))
            .map(|(a, b)| routes.hops(a, b))
            .max()
            .unwrap_or(1)
            .max(1);
        let channels = (0..routes.channels().len())
            .map(|_| ChannelState {
                credits: vec![cfg.link_buffer_flits; classes as usize],
                waiting: vec![VecDeque::new(); classes as usize],
                ..Default::default()
            })
            .collect();
        let endpoints = (0..n * cfg.endpoints as usize).map(|_| EndpointState::default()).collect();
        let share = e2e_share(&cfg, n as u32);
        Network {
            e2e: vec![share; n * n * cfg.endpoints as usize],
            unit_ps: (0..=cfg.unit_flits).map(|f| cfg.unit_ps(f)).collect(),
            cfg,
            routes,
            now: 0,
            events: BinaryHeap::new(),
            hop_events: VecDeque::new(),
            event_seq: 0,
            channels,
            endpoints,
            at: Vec::new(),
            units: Vec::new(),
            free_units: Vec::new(),
            msgs: Vec::new(),
            free_msgs: Vec::new(),
            msg_seq: 0,
            arrivals: 0,
            completed: VecDeque::new(),
            ready_total: 0,
            room_freed: 0,
        }
    }

    pub fn config(&self) -> &NetConfig {
        &self.cfg
    }

    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// The simulated time now.
    pub fn now(&self) -> Ps {
        self.now
    }

    /// Sends `data` from endpoint `ep` of `src` to the same endpoint of `dst`, now. Refused with
    /// [`NetError::Full`] when the endpoint's send queue has no room (back-pressure: nothing is lost,
    /// the caller keeps the data and tries again once the network has moved on).
    pub fn send(&mut self, src: NodeId, ep: EndpointId, dst: NodeId, data: P) -> Result<(), NetError> {
        for node in [src, dst] {
            if node >= self.routes.nodes() {
                return Err(NetError::UnknownNode(node));
            }
        }
        if ep >= self.cfg.endpoints {
            return Err(NetError::UnknownEndpoint(ep, self.cfg.endpoints));
        }
        let flits = self.cfg.flits(data.wire_len());
        let limit = if self.e2e_on(ep) { self.e2e_share() } else { self.cfg.send_queue_flits as u64 };
        if flits > limit {
            return Err(NetError::TooLarge { ep, flits, limit });
        }
        let e = self.ep_index(src, ep);
        if self.endpoints[e].send_flits + flits > self.cfg.send_queue_flits as u64 {
            return Err(NetError::Full { node: src, ep });
        }
        let units = flits.div_ceil(self.cfg.unit_flits as u64) as u32;
        let msg = self.alloc_msg(Msg {
            src,
            dst,
            ep,
            data,
            units_left: units,
            sent_ps: self.now,
            seq: self.msg_seq,
        });
        self.msg_seq += 1;
        self.endpoints[e].send_flits += flits;
        let mut left = flits;
        for _ in 0..units {
            let f = left.min(self.cfg.unit_flits as u64) as u32;
            left -= f as u64;
            let u = self.alloc_unit(Unit { msg, flits: f, held: None, hop: 0, head_ps: 0 }, src);
            self.endpoints[e].pending.push_back(u);
        }
        self.pump_source(src, ep);
        Ok(())
    }

    /// How many times a send queue has got room back so far: while it stays the same, no send that
    /// [`Network::can_send`] refused would be taken.
    pub fn room_freed(&self) -> u64 {
        self.room_freed
    }

    /// [`Network::room_freed`] when endpoint `ep` of `src` last got room back in its send queue (0: never).
    /// A send it refused since then is refused again.
    pub fn room_freed_at(&self, src: NodeId, ep: EndpointId) -> u64 {
        if src >= self.routes.nodes() || ep >= self.cfg.endpoints {
            return 0;
        }
        self.endpoints[self.ep_index(src, ep)].room_freed_at
    }

    /// Whether `send` would take a message of `bytes` from endpoint `ep` of `src` now (its send queue has
    /// room), so a caller can keep the message rather than hand it over and get it refused.
    pub fn can_send(&self, src: NodeId, ep: EndpointId, bytes: usize) -> bool {
        if src >= self.routes.nodes() || ep >= self.cfg.endpoints {
            return false;
        }
        let e = self.ep_index(src, ep);
        self.endpoints[e].send_flits + self.cfg.flits(bytes) <= self.cfg.send_queue_flits as u64
    }

    /// Stops (`true`) or resumes draining endpoint `ep` of `node`: a stopped endpoint's receive queue
    /// fills, then its links' buffers, then theirs (§3.2.2's back-pressure).
    pub fn pause(&mut self, node: NodeId, ep: EndpointId, paused: bool) {
        let e = self.ep_index(node, ep);
        self.endpoints[e].paused = paused;
        if !paused {
            self.drain(node, ep);
        }
    }

    /// The next message delivered to endpoint `ep` of `node`, in delivery order.
    pub fn receive(&mut self, node: NodeId, ep: EndpointId) -> Option<Delivery<P>> {
        let e = self.ep_index(node, ep);
        let d = self.endpoints[e].ready.pop_front()?;
        // Its marker in the completion order is now stale; drop stale markers once they dominate.
        self.ready_total -= 1;
        if self.completed.len() > 1024 && self.completed.len() > 2 * self.ready_total {
            let live: std::collections::HashSet<u64> =
                self.endpoints.iter().flat_map(|q| q.ready.iter().map(|d| d.seq)).collect();
            self.completed.retain(|(_, _, seq)| live.contains(seq));
        }
        Some(d)
    }

    /// The next message delivered anywhere, in delivery order.
    pub fn receive_any(&mut self) -> Option<Delivery<P>> {
        while let Some((node, ep, seq)) = self.completed.pop_front() {
            let e = self.ep_index(node, ep);
            // A delivery taken by `receive` leaves a stale marker behind.
            if let Some(d) = self.endpoints[e].ready.front() {
                if d.seq == seq {
                    self.ready_total -= 1;
                    return self.endpoints[e].ready.pop_front();
                }
            }
        }
        None
    }

    /// When the next event happens (`None`: the network is idle).
    pub fn next_event(&self) -> Option<Ps> {
        self.next().map(|(t, _, _)| t)
    }

    /// Runs every event up to and including time `t`, then sets the clock to `t` (never backwards).
    pub fn run_until(&mut self, t: Ps) {
        while let Some((when, _, from_hops)) = self.next() {
            if when > t {
                break;
            }
            let event = self.pop(from_hops);
            self.now = when;
            self.handle(event);
        }
        self.now = self.now.max(t);
    }

    /// Runs until nothing is left to happen; returns the time then.
    pub fn run(&mut self) -> Ps {
        while let Some((when, _, from_hops)) = self.next() {
            let event = self.pop(from_hops);
            self.now = when;
            self.handle(event);
        }
        self.now
    }

    /// The next event's (time, order, whether it is in `hop_events`).
    fn next(&self) -> Option<(Ps, u64, bool)> {
        let heap = self.events.peek().map(|Reverse((t, o, _))| (*t, *o, false));
        let hops = self.hop_events.front().map(|(t, o, _)| (*t, *o, true));
        match (heap, hops) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn pop(&mut self, from_hops: bool) -> Event {
        if from_hops {
            self.hop_events.pop_front().expect("peeked").2
        } else {
            self.events.pop().expect("peeked").0 .2
        }
    }

    /// Units waiting at some channel (none once the network has run to idle: it cannot deadlock).
    pub fn units_waiting(&self) -> usize {
        self.channels.iter().flat_map(|c| c.waiting.iter()).map(VecDeque::len).sum()
    }

    /// Messages still inside the network (sent, not yet delivered whole).
    pub fn in_flight(&self) -> usize {
        self.msgs.iter().filter(|m| m.is_some()).count()
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::ChannelFree(c) => self.try_start(c),
            Event::Credit(c, class, flits) => {
                self.channels[c as usize].credits[class as usize] += flits;
                self.try_start(c);
            }
            Event::Arrive(u) => self.arrive(u),
            Event::Land(u) => {
                let (msg, _) = self.unit_parts(u);
                let (node, ep) = (self.msg(msg).dst, self.msg(msg).ep);
                let e = self.ep_index(node, ep);
                self.endpoints[e].queued.push_back(u);
                if !self.endpoints[e].paused {
                    self.drain(node, ep);
                }
            }
            Event::EndToEnd { src, dst, ep, flits } => {
                let i = self.e2e_index(src, dst, ep);
                self.e2e[i] += flits;
                self.pump_source(src, ep);
            }
        }
    }

    /// Moves units of an endpoint's send queue to their first channel, as end-to-end credits allow.
    fn pump_source(&mut self, node: NodeId, ep: EndpointId) {
        let e = self.ep_index(node, ep);
        while let Some(&u) = self.endpoints[e].pending.front() {
            let (msg, flits) = self.unit_parts(u);
            let dst = self.msg(msg).dst;
            if self.e2e_on(ep) {
                let i = self.e2e_index(node, dst, ep);
                if self.e2e[i] < flits as u64 {
                    return;
                }
                self.e2e[i] -= flits as u64;
            }
            self.endpoints[e].pending.pop_front();
            match self.routes.next(node, dst, ep) {
                Some(c) => self.enqueue(c, u),
                None => {
                    // A message to its own node goes through the internal switch only.
                    self.endpoints[e].send_flits -= flits as u64;
                    self.room_freed += 1;
                    self.endpoints[e].room_freed_at = self.room_freed;
                    if let Some(unit) = self.units[u as usize].as_mut() {
                        unit.head_ps = self.now;
                    }
                    self.arrive(u);
                }
            }
        }
    }

    /// Starts the next waiting unit on channel `c` if the channel is idle and the far port has room.
    fn try_start(&mut self, c: ChannelId) {
        let ch = &self.channels[c as usize];
        if ch.busy_until > self.now {
            return;
        }
        // The oldest unit among the classes whose far buffer has room for it.
        let mut best: Option<(u64, usize)> = None;
        for (class, q) in ch.waiting.iter().enumerate() {
            if let Some(&(arrival, u)) = q.front() {
                let fits = self.unit_parts(u).1 <= ch.credits[class];
                if fits && best.is_none_or(|(a, _)| arrival < a) {
                    best = Some((arrival, class));
                }
            }
        }
        let Some((_, class)) = best else { return };
        let ch = &mut self.channels[c as usize];
        let (_, u) = ch.waiting[class].pop_front().expect("the chosen class has a unit");
        let unit = self.units[u as usize].as_ref().expect("a waiting unit exists");
        let (flits, held, msg) = (unit.flits, unit.held, unit.msg);
        ch.credits[class] -= flits;
        let ser = self.unit_ps[flits as usize];
        ch.busy_until = self.now + ser;
        let m = self.msg(msg);
        let (src, ep) = (m.src, m.ep);
        let lat = self.cfg.hop_latency_ps;
        self.schedule(self.now + ser, Event::ChannelFree(c));
        match held {
            // It streams out of this node's buffer as it streams in: the buffer's credits go back one
            // hop latency after its head leaves (a unit stuck here holds them until it moves).
            Some((h, hc)) => self.schedule(self.now + lat, Event::Credit(h, hc, flits)),
            None => {
                let e = self.ep_index(src, ep);
                self.endpoints[e].send_flits -= flits as u64;
                self.room_freed += 1;
                self.endpoints[e].room_freed_at = self.room_freed;
                self.pump_source(src, ep);
            }
        }
        let next = self.routes.channels()[c as usize].to.node;
        if let Some(unit) = self.units[u as usize].as_mut() {
            unit.held = Some((c, class as u32));
            unit.hop += 1;
            unit.head_ps = self.now + lat;
        }
        self.at[u as usize] = next;
        // Cut-through: the next node may forward the unit as soon as its head arrives.
        self.schedule(self.now + lat, Event::Arrive(u));
    }

    fn arrive(&mut self, u: UnitId) {
        let node = self.at[u as usize];
        let (msg, _) = self.unit_parts(u);
        let (dst, ep) = {
            let m = self.msg(msg);
            (m.dst, m.ep)
        };
        if node != dst {
            let c = self.routes.next(node, dst, ep).expect("a relay has a route onward");
            self.enqueue(c, u);
            return;
        }
        let e = self.ep_index(node, ep);
        self.endpoints[e].parked.push_back(u);
        self.admit(node, ep);
    }

    /// Moves parked units into the receive queue while it has room, releasing their link buffers; each
    /// lands (is whole in the queue) once its tail is in.
    fn admit(&mut self, node: NodeId, ep: EndpointId) {
        let e = self.ep_index(node, ep);
        let cap = self.cfg.endpoint_queue_flits as u64;
        while let Some(&u) = self.endpoints[e].parked.front() {
            let unit = self.units[u as usize].as_ref().expect("a parked unit exists");
            let (flits, held, head_ps) = (unit.flits, unit.held, unit.head_ps);
            let q = &mut self.endpoints[e];
            if q.recv_flits + flits as u64 > cap && q.recv_flits > 0 {
                break;
            }
            q.parked.pop_front();
            q.recv_flits += flits as u64;
            if let Some((h, class)) = held {
                self.schedule(self.now + self.cfg.hop_latency_ps, Event::Credit(h, class, flits));
            }
            let tail = if held.is_some() { head_ps + self.unit_ps[flits as usize] } else { head_ps };
            self.schedule(tail.max(self.now), Event::Land(u));
        }
    }

    /// The endpoint's user takes every queued unit: whole messages become deliveries.
    fn drain(&mut self, node: NodeId, ep: EndpointId) {
        let e = self.ep_index(node, ep);
        while let Some(u) = self.endpoints[e].queued.pop_front() {
            let unit = self.units[u as usize].take().expect("a queued unit exists");
            self.free_units.push(u);
            self.endpoints[e].recv_flits -= unit.flits as u64;
            let m = self.msgs[unit.msg as usize].as_mut().expect("its message exists");
            m.units_left -= 1;
            let (src, done) = (m.src, m.units_left == 0);
            if self.e2e_on(ep) && src != node {
                let back = self.now + self.routes.hops(node, src) as Ps * self.cfg.hop_latency_ps;
                let flits = unit.flits as u64;
                self.schedule(back, Event::EndToEnd { src, dst: node, ep, flits });
            }
            if done {
                let m = self.msgs[unit.msg as usize].take().expect("its message exists");
                self.free_msgs.push(unit.msg);
                let hops = self.routes.hops(m.src, m.dst);
                self.completed.push_back((node, ep, m.seq));
                self.ready_total += 1;
                self.endpoints[e].ready.push_back(Delivery {
                    src: m.src,
                    dst: m.dst,
                    ep,
                    data: m.data,
                    sent_ps: m.sent_ps,
                    delivered_ps: self.now,
                    hops,
                    seq: m.seq,
                });
            }
        }
        if !self.endpoints[e].parked.is_empty() {
            self.admit(node, ep);
        }
    }

    /// Queues a unit for channel `c` in the buffer class of its hop.
    fn enqueue(&mut self, c: ChannelId, u: UnitId) {
        let hop = self.units[u as usize].as_ref().expect("a live unit").hop;
        self.channels[c as usize].waiting[hop as usize].push_back((self.arrivals, u));
        self.arrivals += 1;
        self.try_start(c);
    }

    fn schedule(&mut self, t: Ps, event: Event) {
        if t == self.now + self.cfg.hop_latency_ps {
            debug_assert!(self.hop_events.back().is_none_or(|b| b.0 <= t), "time never goes back");
            self.hop_events.push_back((t, self.event_seq, event));
        } else {
            self.events.push(Reverse((t, self.event_seq, event)));
        }
        self.event_seq += 1;
    }

    fn e2e_on(&self, ep: EndpointId) -> bool {
        ep < 64 && self.cfg.end_to_end >> ep & 1 == 1
    }

    fn e2e_share(&self) -> u64 {
        e2e_share(&self.cfg, self.routes.nodes())
    }

    fn e2e_index(&self, src: NodeId, dst: NodeId, ep: EndpointId) -> usize {
        let n = self.routes.nodes() as usize;
        (src as usize * n + dst as usize) * self.cfg.endpoints as usize + ep as usize
    }

    fn ep_index(&self, node: NodeId, ep: EndpointId) -> usize {
        node as usize * self.cfg.endpoints as usize + ep as usize
    }

    fn msg(&self, m: MsgId) -> &Msg<P> {
        self.msgs[m as usize].as_ref().expect("a live message")
    }

    fn unit_parts(&self, u: UnitId) -> (MsgId, u32) {
        let unit = self.units[u as usize].as_ref().expect("a live unit");
        (unit.msg, unit.flits)
    }

    fn alloc_unit(&mut self, unit: Unit, at: NodeId) -> UnitId {
        match self.free_units.pop() {
            Some(u) => {
                self.units[u as usize] = Some(unit);
                self.at[u as usize] = at;
                u
            }
            None => {
                self.units.push(Some(unit));
                self.at.push(at);
                (self.units.len() - 1) as UnitId
            }
        }
    }

    fn alloc_msg(&mut self, msg: Msg<P>) -> MsgId {
        match self.free_msgs.pop() {
            Some(m) => {
                self.msgs[m as usize] = Some(msg);
                m
            }
            None => {
                self.msgs.push(Some(msg));
                (self.msgs.len() - 1) as MsgId
            }
        }
    }
}

/// Flits of an endpoint's receive queue reserved for each source node under end-to-end flow control.
fn e2e_share(cfg: &NetConfig, nodes: u32) -> u64 {
    (cfg.endpoint_queue_flits as u64 / nodes as u64).max(1)
}
