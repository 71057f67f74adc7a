//! BlueDBM nodes in one simulation (ISCA '15 §3, §6.4-6.5): each node's device (its flash cards behind a
//! [`Splitter`], its host interface's PCIe DMA) and the storage network between the devices, advanced
//! together in simulated time, with real pages moving through them.
//!
//! A read names who asks (a node's in-store processor or its host), how, and the page: a global address
//! (node, card, bus, chip, block, page). The four remote paths of §6.4:
//! - **ISP-F** ([`Access::IspFlash`] at another node): the ISP's request crosses the network to the
//!   remote splitter, and the page streams back slice by slice as it leaves the flash, touching no host;
//! - **H-F** ([`Access::HostFlash`] at another node): the same, entered and left through the local PCIe;
//! - **H-RH-F** ([`Access::HostRemoteHost`]): the remote device interrupts its host, which reads the page
//!   from its flash into its memory and sends it back through its device;
//! - **H-D** ([`Access::HostRemoteDram`]): the remote host answers from a page it holds in memory.
//!
//! At the reader's own node, `IspFlash` is the ISP-Local case of §6.5 and `HostFlash` the Host-Local one.
//!
//! The host interface (§3.3) is priced by the profile's PCIe figures: requests and pages cross it one
//! after another each way at `host_link.write_bw` (to the device) and `host_link.read_bw` (to the host),
//! plus `host_link.latency_us`. The paper's host interface has 128 page buffers each way, four DMA
//! engines each way and, on the read path, a FIFO per request that holds a page's slices until a DMA
//! burst's worth has come (§3.3, Fig. 7; §5: the engines are there "to more easily make maximum use of
//! the PCIe bandwidth"). Here a slice (512 bytes on `bluedbm`) is taken to be at least a burst (an
//! assumption: the paper does not give the burst size; PCIe Gen1 payloads are commonly 128-256 bytes),
//! so no slice waits in its FIFO; and the four engines of a direction share one link whose bandwidth is
//! the limit, so they are priced as that link taking slices in the order they are ready. The 128 read
//! buffers bound a host's reads in flight ([`ClusterConfig::host_page_buffers`]: the benchmark's window).
//!
//! Host software is priced at nothing beyond those crossings: the profile has no figure for it (the
//! paper's 16-25 us of software per request is Connectal's RPC and interrupt path, which is not
//! modeled).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

use insitu_flash::nand::Nand;

use crate::error::DeviceError;
use crate::network::{NetConfig, NetError, Network, NodeId, Payload, Ps, Topology};
use crate::profile::Profile;
use crate::rawflash::{
    Event, FlashAddr, FlashCommand, FlashController, RawConfig, RawFlashError, Source, Splitter,
};

/// How a read reaches its page (named in reports and on the wire as `isp-flash`, `host-flash`,
/// `host-remote-host` and `host-remote-dram`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// The reader's in-store processor reads the page's flash: ISP-Local, or ISP-F when remote.
    #[default]
    IspFlash,
    /// The reader's host reads the page's flash through its device: Host-Local, or H-F when remote.
    HostFlash,
    /// The reader's host asks the page's host, which reads its flash and sends the page (H-RH-F).
    HostRemoteHost,
    /// The reader's host asks the page's host, which sends it from its memory (H-D).
    HostRemoteDram,
}

/// One page read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    /// The node whose ISP or host asks.
    pub origin: NodeId,
    pub access: Access,
    /// The node that holds the page.
    pub node: NodeId,
    pub addr: FlashAddr,
}

/// A finished read: the page and when each part of its way happened.
#[derive(Debug, Clone)]
pub struct ReadDone {
    pub id: u64,
    pub read: Read,
    pub data: Vec<u8>,
    /// When the reader asked.
    pub issued_ps: Ps,
    /// When the request was at the reader's device (after the host's PCIe, for a host).
    pub at_device_ps: Ps,
    /// When the first byte of the page left the node that serves it (its flash, or its host's memory).
    pub first_out_ps: Ps,
    /// When the last byte reached the reader.
    pub done_ps: Ps,
    /// Network hops, request and answer together.
    pub hops: u32,
}

/// What crossed the network and the PCIe links so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterStats {
    pub reads: u64,
    pub network_messages: u64,
    pub network_bytes: u64,
    pub pcie_up_bytes: u64,
    pub pcie_down_bytes: u64,
}

/// The figures the cluster runs on.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub raw: RawConfig,
    pub net: NetConfig,
    /// Device -> host, host -> device: picoseconds per byte.
    pub pcie_up_ps_per_byte: f64,
    pub pcie_down_ps_per_byte: f64,
    pub pcie_latency_ps: Ps,
    pub host_page_buffers: u32,
}

impl ClusterConfig {
    pub fn from_profile(profile: &Profile) -> Result<ClusterConfig, DeviceError> {
        let raw = RawConfig::from_profile(profile)?;
        let net = NetConfig::from_profile(profile).ok_or_else(|| DeviceError::InvalidProfile {
            profile: profile.name.clone(),
            detail: "it has no storage network ([network.storage]); BlueDBM's `bluedbm` profile has one"
                .into(),
        })?;
        let buffers = profile.nand.interface.as_ref().map_or(1, |i| i.host_page_buffers);
        Ok(ClusterConfig {
            raw,
            net,
            pcie_up_ps_per_byte: 1e12 / profile.host_link.read_bw,
            pcie_down_ps_per_byte: 1e12 / profile.host_link.write_bw,
            pcie_latency_ps: (profile.host_link.latency_us * 1e6).round() as Ps,
            host_page_buffers: buffers,
        })
    }
}

/// Bytes of a request message: kind, request id, and the page's address.
pub(crate) const REQUEST_BYTES: usize = 32;
/// Bytes of a request crossing PCIe (an RPC or an interrupt's descriptor).
pub(crate) const DESCRIPTOR_BYTES: u64 = 64;

#[derive(Debug)]
enum Act {
    /// Issue the read of request `id` at `node`'s splitter for `source`.
    Issue { node: NodeId, source: Source, id: u64 },
    /// Send a message on the network.
    Send { from: NodeId, to: NodeId, msg: Message },
    /// Bytes of the page reach the reader.
    Deliver { id: u64, bytes: Bytes },
    /// The page's host has the request (H-RH-F, H-D).
    HostServe { id: u64 },
    /// The page's host has the whole page in memory: send it back through its device.
    HostSend { id: u64 },
}

#[derive(Debug)]
struct Pending {
    read: Read,
    issued: Ps,
    at_device: Ps,
    first_out: Option<Ps>,
    /// The buffer the page came in (every piece of a read is a range of it: see [`Bytes`]), and how
    /// many of its bytes have arrived.
    page: Option<Arc<Vec<u8>>>,
    got: usize,
    /// H-RH-F: bytes of the page in the remote host's memory so far, and the page once whole there.
    staged: usize,
    host_copy: Option<Arc<Vec<u8>>>,
}

impl Pending {
    /// Takes `bytes` of the page.
    fn take(&mut self, bytes: Bytes) {
        debug_assert!(
            self.page.as_ref().is_none_or(|p| Arc::ptr_eq(p, &bytes.page)),
            "the pieces of a read are ranges of one buffer"
        );
        self.got += bytes.range.len();
        self.page.get_or_insert(bytes.page);
    }

    /// The whole page of `page_size` bytes, once every byte has come: its buffer, taken over once
    /// nothing else holds it, with the zeros after its head (see [`crate::rawflash::PageSlice::bytes`]).
    fn into_data(self, page_size: usize) -> Vec<u8> {
        let mut page =
            self.page.map(|p| Arc::try_unwrap(p).unwrap_or_else(|p| (*p).clone())).unwrap_or_default();
        page.resize(page_size, 0);
        page
    }
}

/// The reads in flight, by id: ids are given out in order, so a window from the oldest one in flight.
#[derive(Debug, Default)]
struct InFlight {
    /// The id of `reads[0]`.
    first: u64,
    reads: VecDeque<Option<Pending>>,
    live: usize,
}

impl InFlight {
    /// Adds read `id`, the next id after the last one added.
    fn push(&mut self, id: u64, p: Pending) {
        if self.live == 0 {
            self.first = id;
            self.reads.clear();
        }
        debug_assert_eq!(id, self.first + self.reads.len() as u64, "ids in order");
        self.reads.push_back(Some(p));
        self.live += 1;
    }

    fn get(&self, id: u64) -> &Pending {
        self.reads[(id - self.first) as usize].as_ref().expect("a read in flight")
    }

    fn get_mut(&mut self, id: u64) -> &mut Pending {
        self.reads[(id - self.first) as usize].as_mut().expect("a read in flight")
    }

    fn remove(&mut self, id: u64) -> Pending {
        let p = self.reads[(id - self.first) as usize].take().expect("a read in flight");
        self.live -= 1;
        while self.reads.front().is_some_and(Option::is_none) {
            self.reads.pop_front();
            self.first += 1;
        }
        p
    }

    fn len(&self) -> usize {
        self.live
    }

    fn is_empty(&self) -> bool {
        self.live == 0
    }
}

/// Bytes of a page on their way to a reader, held where they already are rather than copied out: `range`
/// of `page`, the whole page as a flash read (or a host's memory) holds it. All the pieces of one read are
/// ranges of one such buffer, so the reader's page is that buffer once every range has come.
#[derive(Debug)]
struct Bytes {
    page: Arc<Vec<u8>>,
    range: std::ops::Range<usize>,
}

/// A message between the nodes' devices: a read's request, or bytes of its page. On the wire a request
/// is 32 bytes, and data is the page's bytes after 13 of header (kind, request id, offset); the network
/// prices a message by that length and carries the bytes by reference.
#[derive(Debug)]
pub struct Message {
    id: u64,
    /// `None` for a request; the bytes for data.
    data: Option<Bytes>,
}

impl Payload for Message {
    fn wire_len(&self) -> usize {
        match &self.data {
            None => REQUEST_BYTES,
            Some(bytes) => DATA_HEADER + bytes.range.len(),
        }
    }
}

/// A message waiting to be sent: (destination, message).
type Outgoing<P> = (NodeId, P);

/// Sends into a [`Network`] that never refuse one for want of room: a message whose endpoint's send
/// queue is full waits here, in order per (node, endpoint), until the network has moved on. Counts what
/// went out.
#[derive(Debug)]
pub(crate) struct Outbox<P> {
    blocked: BTreeMap<(NodeId, u32), VecDeque<Outgoing<P>>>,
    /// The network's [`Network::room_freed`] at the last retry.
    room_seen: u64,
    pub messages: u64,
    pub bytes: u64,
}

impl<P> Default for Outbox<P> {
    fn default() -> Self {
        Outbox { blocked: BTreeMap::new(), room_seen: 0, messages: 0, bytes: 0 }
    }
}

impl<P: Payload> Outbox<P> {
    /// Sends `msg` from endpoint `ep` of `from` to `to` now, or after the messages of that endpoint
    /// already waiting.
    pub(crate) fn send(
        &mut self,
        net: &mut Network<P>,
        from: NodeId,
        ep: u32,
        to: NodeId,
        msg: P,
    ) -> Result<(), NetError> {
        if self.blocked.contains_key(&(from, ep)) || !net.can_send(from, ep, msg.wire_len()) {
            self.blocked.entry((from, ep)).or_default().push_back((to, msg));
            return Ok(());
        }
        self.out(net, from, ep, to, msg)
    }

    /// Sends the waiting messages that fit now, each endpoint's in order.
    pub(crate) fn retry(&mut self, net: &mut Network<P>) -> Result<(), NetError> {
        // Nothing refused can go while no send queue has had room freed since the last look; and of the
        // endpoints waiting, only one whose queue got room back since then (here or during this pass, as
        // sends free room on others) can send: each one's first message did not fit when last tried.
        if self.blocked.is_empty() || net.room_freed() == self.room_seen {
            return Ok(());
        }
        let seen = self.room_seen;
        self.room_seen = net.room_freed();
        let mut blocked = std::mem::take(&mut self.blocked);
        let mut emptied = false;
        for (&(from, ep), queue) in blocked.iter_mut() {
            if net.room_freed_at(from, ep) <= seen {
                continue;
            }
            while queue.front().is_some_and(|(_, msg)| net.can_send(from, ep, msg.wire_len())) {
                let (to, msg) = queue.pop_front().expect("a front");
                self.out(net, from, ep, to, msg)?;
            }
            emptied |= queue.is_empty();
        }
        if emptied {
            blocked.retain(|_, q| !q.is_empty());
        }
        self.blocked = blocked;
        Ok(())
    }

    fn out(
        &mut self,
        net: &mut Network<P>,
        from: NodeId,
        ep: u32,
        to: NodeId,
        msg: P,
    ) -> Result<(), NetError> {
        self.messages += 1;
        self.bytes += msg.wire_len() as u64;
        net.send(from, ep, to, msg)
    }
}

/// One direction of a node's PCIe: transfers one after another, then the link's latency.
#[derive(Debug)]
pub(crate) struct Link {
    free: Ps,
    ps_per_byte: f64,
    latency_ps: Ps,
    /// The last transfer's size and time on the link: most are slices of one size.
    last: (u64, Ps),
}

impl Link {
    pub(crate) fn new(ps_per_byte: f64, latency_ps: Ps) -> Link {
        Link { free: 0, ps_per_byte, latency_ps, last: (0, 0) }
    }

    /// When `bytes` handed over at `t` have crossed.
    pub(crate) fn cross(&mut self, t: Ps, bytes: u64) -> Ps {
        if self.last.0 != bytes {
            self.last = (bytes, (bytes as f64 * self.ps_per_byte).round() as Ps);
        }
        self.free = t.max(self.free) + self.last.1;
        self.free + self.latency_ps
    }
}

#[derive(Debug)]
struct Pcie {
    up: Link,
    down: Link,
}

/// Nodes, their devices and the network, in one simulation (see the [module](self) documentation).
#[derive(Debug)]
pub struct Cluster {
    cfg: ClusterConfig,
    page_size: usize,
    nodes: Vec<Splitter<Nand>>,
    /// The earliest time each node's device can next tell the cluster anything, as of the last time
    /// the cluster touched it (the device runs its own steps up to that time when polled).
    node_next: Vec<Option<Ps>>,
    pcie: Vec<Pcie>,
    /// Pages each node's host holds in memory (H-D).
    dram: Vec<HashMap<FlashAddr, Arc<Vec<u8>>>>,
    net: Network<Message>,
    acts: BinaryHeap<Reverse<(Ps, u64, usize)>>,
    /// Acts due when bytes have crossed a PCIe link (index [`Cluster::up`] or [`Cluster::down`]), in the
    /// order made. A link's times never go back, so each queue is in (time, order) order and merging
    /// the queues with the heap hands out acts as the heap alone would, without a heap's work for each
    /// of the thousands a congested link can have waiting.
    link_acts: Vec<VecDeque<(Ps, u64, Act)>>,
    /// Acts due at the time they were made, in the order made. They come after the heap's acts of the
    /// same time, which were all made earlier (time never goes back): the heap's order, without it.
    acts_now: VecDeque<(Ps, Act)>,
    act_slots: Vec<Option<Act>>,
    free_acts: Vec<usize>,
    order: u64,
    outbox: Outbox<Message>,
    pending: InFlight,
    done: VecDeque<ReadDone>,
    next_id: u64,
    now: Ps,
    stats: ClusterStats,
}

impl Cluster {
    /// A cluster of `topology.nodes()` nodes, node `i` on `media[i]`.
    pub fn new(cfg: ClusterConfig, topology: &Topology, media: Vec<Nand>) -> Result<Cluster, RawFlashError> {
        assert_eq!(media.len(), topology.nodes() as usize, "one NAND image per node");
        let page_size =
            media.first().map_or(0, |m| insitu_flash::raw::RawFlash::geometry(m).page_size as usize);
        let nodes = media
            .into_iter()
            .map(|m| Ok(Splitter::new(FlashController::new(m, cfg.raw.clone())?)))
            .collect::<Result<Vec<_>, RawFlashError>>()?;
        let n = nodes.len();
        let link = |ps_per_byte| Link::new(ps_per_byte, cfg.pcie_latency_ps);
        let pcie = (0..n)
            .map(|_| Pcie { up: link(cfg.pcie_up_ps_per_byte), down: link(cfg.pcie_down_ps_per_byte) })
            .collect();
        Ok(Cluster {
            net: Network::new(topology, cfg.net.clone()),
            cfg,
            page_size,
            node_next: vec![None; n],
            nodes,
            pcie,
            dram: vec![HashMap::new(); n],
            acts: BinaryHeap::new(),
            link_acts: (0..2 * n).map(|_| VecDeque::new()).collect(),
            acts_now: VecDeque::new(),
            act_slots: Vec::new(),
            free_acts: Vec::new(),
            order: 0,
            outbox: Outbox::default(),
            pending: InFlight::default(),
            done: VecDeque::new(),
            next_id: 0,
            now: 0,
            stats: ClusterStats::default(),
        })
    }

    /// A cluster on `profile`'s devices, each node's NAND image in its own directory under `dir`, with
    /// `blocks_per_chip` blocks on each chip (images are sparse: only written pages take space).
    pub fn create(
        profile: &Profile,
        topology: &Topology,
        dir: &std::path::Path,
        blocks_per_chip: u64,
    ) -> Result<Cluster, DeviceError> {
        let cfg = ClusterConfig::from_profile(profile)?;
        let geo = insitu_flash::Geometry { blocks_per_chip, ..profile.base_geometry() };
        let media = (0..topology.nodes())
            .map(|n| {
                let d = dir.join(format!("node{n}"));
                std::fs::create_dir_all(&d).map_err(|e| DeviceError::io(&d, e))?;
                Ok(Nand::open(&d, geo)?)
            })
            .collect::<Result<Vec<_>, DeviceError>>()?;
        Cluster::new(cfg, topology, media)
            .map_err(|e| DeviceError::InvalidProfile { profile: profile.name.clone(), detail: e.to_string() })
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.cfg
    }

    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn now(&self) -> Ps {
        self.now
    }

    pub fn stats(&self) -> ClusterStats {
        ClusterStats {
            network_messages: self.outbox.messages,
            network_bytes: self.outbox.bytes,
            ..self.stats
        }
    }

    pub fn network(&self) -> &Network<Message> {
        &self.net
    }

    /// Node `node`'s splitter (its controller, its counters).
    pub fn splitter(&self, node: NodeId) -> &Splitter<Nand> {
        &self.nodes[node as usize]
    }

    /// Reads in flight.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Programs a page at `node` through its raw interface, as its host would, before the experiment:
    /// runs that node's controller to the acknowledgement.
    pub fn write(
        &mut self,
        node: NodeId,
        addr: FlashAddr,
        spare: u64,
        data: &[u8],
    ) -> Result<(), RawFlashError> {
        if !self.pending.is_empty() {
            return Err(RawFlashError::Lost { pending: self.pending.len() });
        }
        let sp = &mut self.nodes[node as usize];
        sp.issue(Source::Host, FlashCommand::write(addr, u32::MAX, spare))?;
        while let Some((_, c)) = sp.poll() {
            match c.event {
                Event::WriteDataRequest => sp.write_data(Source::Host, c.card, c.tag, data)?,
                Event::Ack(status) => {
                    status?;
                    break;
                }
                Event::ReadData(_) => {}
            }
        }
        self.now = self.now.max(sp.now());
        self.node_next[node as usize] = sp.next_tell_bound();
        Ok(())
    }

    /// Erases a block at `node` before the experiment.
    pub fn erase(&mut self, node: NodeId, addr: FlashAddr) -> Result<(), RawFlashError> {
        if !self.pending.is_empty() {
            return Err(RawFlashError::Lost { pending: self.pending.len() });
        }
        let sp = &mut self.nodes[node as usize];
        sp.issue(Source::Host, FlashCommand::erase(addr, u32::MAX))?;
        while let Some((_, c)) = sp.poll() {
            if let (Event::Ack(status), u32::MAX) = (c.event, c.tag) {
                status?;
                break;
            }
        }
        self.now = self.now.max(sp.now());
        self.node_next[node as usize] = sp.next_tell_bound();
        Ok(())
    }

    /// Puts a copy of a page in `node`'s host memory (what H-D reads).
    pub fn put_dram(&mut self, node: NodeId, addr: FlashAddr, data: Vec<u8>) {
        self.dram[node as usize].insert(addr, Arc::new(data));
    }

    /// Starts a read now; its [`ReadDone`] comes from [`Cluster::next_done`].
    pub fn submit(&mut self, read: Read) -> Result<u64, RawFlashError> {
        let n = self.nodes.len() as u32;
        if read.origin >= n || read.node >= n {
            return Err(RawFlashError::Flash(insitu_flash::FlashError::NandViolation(format!(
                "node {} is not in this {n}-node cluster",
                read.origin.max(read.node)
            ))));
        }
        self.nodes[read.node as usize].controller().ppn_of(&read.addr)?;
        if read.access == Access::HostRemoteDram && !self.dram[read.node as usize].contains_key(&read.addr) {
            return Err(RawFlashError::ErasedPage { addr: read.addr });
        }
        let id = self.next_id;
        self.next_id += 1;
        let t = self.now;
        let host = read.access != Access::IspFlash;
        // A page in the reader's own host's memory (H-D at its own node) needs no device.
        let own_dram = read.node == read.origin && read.access == Access::HostRemoteDram;
        // The descriptor goes down the reader's PCIe (none for the in-store processor or the host's own
        // memory): then the acts below wait for that link.
        let (at_device, via) = if host && !own_dram {
            (self.pcie_down(read.origin, t, DESCRIPTOR_BYTES), Some(Self::down(read.origin)))
        } else {
            (t, None)
        };
        self.pending.push(
            id,
            Pending {
                read,
                issued: t,
                at_device,
                first_out: None,
                page: None,
                got: 0,
                staged: 0,
                host_copy: None,
            },
        );
        if read.node == read.origin {
            // At its own node a host reads its flash itself (H-RH-F is Host-Local there) or has the page
            // in its memory (H-D: there at once).
            let source = if host { Source::Host } else { Source::Isp };
            if own_dram {
                let page = Arc::clone(&self.dram[read.node as usize][&read.addr]);
                self.pending.get_mut(id).first_out = Some(t);
                let bytes = Bytes { page, range: 0..self.page_size };
                self.act(t, Act::Deliver { id, bytes });
            } else {
                self.act_via(via, at_device, Act::Issue { node: read.node, source, id });
            }
        } else {
            let msg = Message { id, data: None };
            self.act_via(via, at_device, Act::Send { from: read.origin, to: read.node, msg });
        }
        Ok(id)
    }

    /// Runs until a read finishes and returns it; `None` when nothing is in flight.
    pub fn next_done(&mut self) -> Option<ReadDone> {
        self.next_done_until(Ps::MAX)
    }

    /// Runs until a read finishes at or before `limit`; `None` if none does (time is then `limit`, or
    /// nothing is in flight).
    pub fn next_done_until(&mut self, limit: Ps) -> Option<ReadDone> {
        loop {
            if let Some(d) = self.done.pop_front() {
                return Some(d);
            }
            // Ps::MAX stands for "nothing due".
            let next_timed = self.next_timed();
            let t_heap = next_timed.map_or(Ps::MAX, |(at, _, _)| at);
            let t_act = t_heap.min(self.acts_now.front().map_or(Ps::MAX, |a| a.0));
            let t_net = self.net.next_event().unwrap_or(Ps::MAX);
            let (mut t_node, mut node) = (Ps::MAX, 0);
            for (i, t) in self.node_next.iter().enumerate() {
                if let Some(t) = *t {
                    if t < t_node {
                        (t_node, node) = (t, i);
                    }
                }
            }
            let t = t_act.min(t_net).min(t_node);
            if t == Ps::MAX || t > limit {
                if limit != Ps::MAX {
                    self.now = self.now.max(limit);
                }
                return None;
            }
            self.now = self.now.max(t);
            if t_heap == t {
                let act = match next_timed.and_then(|(_, _, link)| link) {
                    Some(link) => self.link_acts[link].pop_front().expect("peeked").2,
                    None => {
                        let Reverse((_, _, slot)) = self.acts.pop().expect("peeked");
                        self.free_acts.push(slot);
                        self.act_slots[slot].take().expect("a due act")
                    }
                };
                self.perform(t, act);
            } else if t_act == t {
                let (_, act) = self.acts_now.pop_front().expect("due now");
                self.perform(t, act);
            } else if t_net == t {
                self.run_network(t);
            } else {
                self.run_node(node, t);
            }
        }
    }

    /// The next act due after the present (not in `acts_now`): (time, order, the link whose queue holds
    /// it, or `None` for the heap).
    fn next_timed(&self) -> Option<(Ps, u64, Option<usize>)> {
        let mut next = self.acts.peek().map(|r| (r.0 .0, r.0 .1, None));
        for (i, q) in self.link_acts.iter().enumerate() {
            if let Some(&(at, order, _)) = q.front() {
                if next.is_none_or(|(t, o, _)| (at, order) < (t, o)) {
                    next = Some((at, order, Some(i)));
                }
            }
        }
        next
    }

    /// The queue of acts that wait for bytes to cross `node`'s PCIe to its host.
    fn up(node: NodeId) -> usize {
        2 * node as usize
    }

    /// The queue of acts that wait for bytes to cross `node`'s PCIe from its host.
    fn down(node: NodeId) -> usize {
        2 * node as usize + 1
    }

    /// Like [`Cluster::act`], for an act whose time `at` a PCIe link gave (`via`, see [`Cluster::up`]).
    fn act_via(&mut self, via: Option<usize>, at: Ps, act: Act) {
        let Some(link) = via else { return self.act(at, act) };
        if at == self.now {
            self.acts_now.push_back((at, act));
            return;
        }
        self.order += 1;
        let q = &mut self.link_acts[link];
        debug_assert!(q.back().is_none_or(|b| b.0 <= at), "a link's times never go back");
        q.push_back((at, self.order, act));
    }

    fn act(&mut self, at: Ps, act: Act) {
        if at == self.now {
            self.acts_now.push_back((at, act));
            return;
        }
        let slot = match self.free_acts.pop() {
            Some(s) => {
                self.act_slots[s] = Some(act);
                s
            }
            None => {
                self.act_slots.push(Some(act));
                self.act_slots.len() - 1
            }
        };
        self.order += 1;
        self.acts.push(Reverse((at, self.order, slot)));
    }

    fn pcie_up(&mut self, node: NodeId, t: Ps, bytes: u64) -> Ps {
        self.stats.pcie_up_bytes += bytes;
        self.pcie[node as usize].up.cross(t, bytes)
    }

    fn pcie_down(&mut self, node: NodeId, t: Ps, bytes: u64) -> Ps {
        self.stats.pcie_down_bytes += bytes;
        self.pcie[node as usize].down.cross(t, bytes)
    }

    fn perform(&mut self, t: Ps, act: Act) {
        match act {
            Act::Issue { node, source, id } => {
                self.run_node(node as usize, t);
                let addr = self.pending.get(id).read.addr;
                // Request ids name commands: unique among a source's commands in flight.
                let tag = id as u32;
                // The local in-store processor takes the page whole (nothing happens per slice but its
                // arrival); the host and remote nodes move each slice on as it comes.
                let cmd = match source {
                    Source::Isp => FlashCommand::read_page(addr, tag),
                    Source::Host | Source::Remote(_) => FlashCommand::read(addr, tag),
                };
                if let Err(e) = self.nodes[node as usize].issue(source, cmd) {
                    panic!("a checked read was refused: {e}");
                }
                self.node_next[node as usize] = self.nodes[node as usize].next_tell_bound();
            }
            Act::Send { from, to, msg } => {
                self.run_network(t);
                self.send(from, to, msg);
            }
            Act::Deliver { id, bytes } => {
                let p = self.pending.get_mut(id);
                p.take(bytes);
                if p.got == self.page_size {
                    let p = self.pending.remove(id);
                    let hops = if p.read.node == p.read.origin {
                        0
                    } else {
                        let r = self.net.routes();
                        r.hops(p.read.origin, p.read.node) + r.hops(p.read.node, p.read.origin)
                    };
                    self.stats.reads += 1;
                    self.done.push_back(ReadDone {
                        id,
                        read: p.read,
                        issued_ps: p.issued,
                        at_device_ps: p.at_device,
                        first_out_ps: p.first_out.unwrap_or(t),
                        done_ps: t,
                        hops,
                        data: p.into_data(self.page_size),
                    });
                }
            }
            Act::HostServe { id } => {
                // The device interrupts its host with the request.
                let read = self.pending.get(id).read;
                let at_host = self.pcie_up(read.node, t, DESCRIPTOR_BYTES);
                match read.access {
                    Access::HostRemoteHost => {
                        let at_dev = self.pcie_down(read.node, at_host, DESCRIPTOR_BYTES);
                        let issue = Act::Issue { node: read.node, source: Source::Host, id };
                        self.act_via(Some(Self::down(read.node)), at_dev, issue);
                    }
                    _ => self.act_via(Some(Self::up(read.node)), at_host, Act::HostSend { id }),
                }
            }
            Act::HostSend { id } => {
                let read = self.pending.get(id).read;
                let page = if read.access == Access::HostRemoteDram {
                    self.pending.get_mut(id).first_out = Some(t);
                    Arc::clone(&self.dram[read.node as usize][&read.addr])
                } else {
                    self.pending.get_mut(id).host_copy.take().expect("the page is whole in its host's memory")
                };
                // The page goes down the host's PCIe slice by slice, each on to the network as it lands.
                let slice = self.cfg.raw.slice_bytes as usize;
                for off in (0..self.page_size).step_by(slice) {
                    let len = slice.min(self.page_size - off);
                    let at = self.pcie_down(read.node, t, len as u64);
                    let bytes = Bytes { page: Arc::clone(&page), range: off..off + len };
                    let act = if read.node == read.origin {
                        Act::Deliver { id, bytes }
                    } else {
                        let msg = Message { id, data: Some(bytes) };
                        Act::Send { from: read.node, to: read.origin, msg }
                    };
                    self.act_via(Some(Self::down(read.node)), at, act);
                }
            }
        }
    }

    fn send(&mut self, from: NodeId, to: NodeId, msg: Message) {
        let ep = (msg.id % self.cfg.net.endpoints as u64) as u32;
        if let Err(e) = self.outbox.send(&mut self.net, from, ep, to, msg) {
            panic!("the network refused a message it had room for: {e}");
        }
    }

    fn run_network(&mut self, t: Ps) {
        self.net.run_until(t);
        while let Some(d) = self.net.receive_any() {
            let id = d.data.id;
            match d.data.data {
                None => {
                    let read = self.pending.get(id).read;
                    match read.access {
                        Access::IspFlash | Access::HostFlash => self.act(
                            d.delivered_ps,
                            Act::Issue { node: read.node, source: Source::Remote(read.origin), id },
                        ),
                        Access::HostRemoteHost | Access::HostRemoteDram => {
                            self.act(d.delivered_ps, Act::HostServe { id })
                        }
                    }
                }
                Some(bytes) => {
                    let len = bytes.range.len() as u64;
                    let origin = self.pending.get(id).read.origin;
                    let act = Act::Deliver { id, bytes };
                    if self.pending.get(id).read.access == Access::IspFlash {
                        self.act(d.delivered_ps, act);
                    } else {
                        let at = self.pcie_up(origin, d.delivered_ps, len);
                        self.act_via(Some(Self::up(origin)), at, act);
                    }
                }
            }
        }
        // Sends waiting for room go out as it frees up, each endpoint's in order.
        if let Err(e) = self.outbox.retry(&mut self.net) {
            panic!("the network refused a message it had room for: {e}");
        }
    }

    /// Hands out node `node`'s flash events up to `t`.
    fn run_node(&mut self, node: usize, t: Ps) {
        while let Some((source, c)) = self.nodes[node].poll_until(t) {
            let id = self.resolve_id(c.tag);
            let Event::ReadData(slice) = c.event else {
                if let Event::Ack(Err(e)) = c.event {
                    panic!("a read failed in the cluster: {e}");
                }
                continue;
            };
            let p = self.pending.get_mut(id);
            let read = p.read;
            match source {
                Source::Isp => {
                    p.first_out.get_or_insert(slice.first_at_ps);
                    let bytes = Bytes { page: slice.page, range: slice.range };
                    self.act(c.at_ps, Act::Deliver { id, bytes });
                }
                Source::Remote(origin) => {
                    p.first_out.get_or_insert(c.at_ps);
                    let msg = Message { id, data: Some(Bytes { page: slice.page, range: slice.range }) };
                    self.act(c.at_ps, Act::Send { from: node as NodeId, to: origin, msg });
                }
                Source::Host
                    if read.node == read.origin
                        && matches!(read.access, Access::HostFlash | Access::HostRemoteHost) =>
                {
                    p.first_out.get_or_insert(c.at_ps);
                    let len = slice.range.len() as u64;
                    let at = self.pcie_up(node as NodeId, c.at_ps, len);
                    let act = Act::Deliver { id, bytes: Bytes { page: slice.page, range: slice.range } };
                    self.act_via(Some(Self::up(node as NodeId)), at, act);
                }
                Source::Host => {
                    // H-RH-F: the page's host reads its flash into its memory, then sends it on. Every
                    // slice is a range of the one buffer the flash read filled: the host's copy is that
                    // buffer, once its last slice is in.
                    let len = slice.range.len();
                    p.staged += len;
                    let whole = p.staged == self.page_size;
                    let at = self.pcie_up(node as NodeId, c.at_ps, len as u64);
                    if whole {
                        let p = self.pending.get_mut(id);
                        p.first_out = Some(at);
                        p.host_copy = Some(slice.page);
                        self.act_via(Some(Self::up(node as NodeId)), at, Act::HostSend { id });
                    }
                }
            }
        }
        self.node_next[node] = self.nodes[node].next_tell_bound();
    }

    /// A command's tag is its request id's low 32 bits: the newest id with those bits (fewer than 2^32
    /// reads are ever in flight).
    fn resolve_id(&self, tag: u32) -> u64 {
        let mut id = (self.next_id & !0xffff_ffff) | tag as u64;
        if id >= self.next_id {
            id = id.wrapping_sub(1 << 32);
        }
        id
    }
}

/// Bytes of a data message before its payload: kind, request id, offset in the page.
pub(crate) const DATA_HEADER: usize = 13;
