//! Reads across an appliance's global address space (BlueDBM §3, §6.4-6.5), done by the devices of the
//! appliance themselves: the reader's device reads its own pages, asks each remote node's device for its
//! pages over the fabric ([`PeerRawRead`], served by that device's splitter as for the reader's in-store
//! processor, or through that node's host for H-RH-F and H-D, below), and prices the whole read on the
//! storage network of the topology.
//!
//! The data moves for real (each remote device reads its NAND image and hands the pages over; the reader
//! returns them once the simulated network has delivered every slice of them). The time is simulated, in
//! three steps that need no clock shared between devices:
//! 1. the requests cross the reader's PCIe link (a host's read) and the network to each remote node:
//!    the time each reaches its node's splitter;
//! 2. each node's device reads its pages with those arrival times, relative to the read's start, and
//!    says when each slice left its cards (its own tags, buses and chips decide); the reader's own pages
//!    are read meanwhile on the reader's thread, the remote ones on another (no read waits for another);
//! 3. the slices cross the network back (and the reader's PCIe link for a host): when each byte arrived.
//!
//! Splitting requests (step 1) from answers (step 3) loses nothing: on routes of fewest hops the two never
//! share a directed link (a link from `a` to `b` carrying a request from the reader `r` means
//! `d(r, b) = d(r, a) + 1`; carrying an answer to `r` means `d(a, r) = d(b, r) + 1`; both cannot hold),
//! and they leave from different nodes' send queues. So with one reader the result is the one
//! [`crate::cluster::Cluster`] gets when it runs all nodes in one simulation, which the tests check.
//!
//! The other two paths of §6.4, H-RH-F and H-D, go through the remote node's *host*: its device
//! interrupts it, and it reads the page through the device into its memory and sends it back down
//! (H-RH-F), or sends the copy it holds in memory (H-D). The appliance's hosts are one process here, so
//! the remote host's part is priced at the remote device, as [`crate::cluster`] prices it: its PCIe
//! crossings, and no software (the application adds its hosts' request software). The bytes of a page a
//! host holds in memory are the page's: the device reads them from its flash image and uses none of that
//! read's times (nor meters it as a flash read). At the reader's own node, H-RH-F reads the flash as its
//! host (Host-Local) and H-D has the page at once, as [`crate::cluster`] has them. With many pages, the
//! remote device takes every descriptor over its PCIe link before the pages' slices, where the one
//! simulation takes them in time order: H-RH-F comes within 1% of it at 4096 pages (a test checks),
//! H-D to the picosecond. An H-D read may name pages that miss their host's memory (`misses`: Fig. 20's
//! "DRAM + x% F"); the host reads those from its flash as for H-RH-F, in the same read, within 1% of
//! the one simulation.

use std::collections::BTreeMap;

use crate::cluster::{Access, ClusterConfig, Link, Outbox, DATA_HEADER, DESCRIPTOR_BYTES, REQUEST_BYTES};
use crate::error::{DeviceError, Result};
use crate::network::{Delivery, Network, NodeId, Payload, Ps};
use crate::protocol::{pack_heads, page_heads, GlobalRead, GlobalReadReply, PeerPages, PeerRawRead};
use crate::rawflash::{FlashAddr, Source, TimedPages};

fn refuse(detail: String) -> DeviceError {
    DeviceError::StorageNetwork(detail)
}

/// Carries out `req` at node `origin` on `cfg`'s figures, for pages of `page_size` bytes: `local` reads this node's pages (for `source`,
/// with their arrival times at the splitter), `remote(node, request)` has another node's device read its
/// pages. Returns what was read and its cost.
pub fn read<L, R>(
    origin: NodeId,
    cfg: &ClusterConfig,
    page_size: usize,
    req: &GlobalRead,
    mut local: L,
    remote: R,
) -> Result<GlobalReadReply>
where
    L: FnMut(Source, &[(FlashAddr, Ps)]) -> Result<TimedPages>,
    R: FnMut(NodeId, PeerRawRead) -> Result<PeerPages> + Send,
{
    let host = req.access != Access::IspFlash;
    if !req.misses.is_empty() && req.access != Access::HostRemoteDram {
        return Err(refuse(format!(
            "misses are pages not in their hosts' memory: {:?} reads none from it",
            req.access
        )));
    }
    let missed = flags(&req.misses, req.pages.len())?;
    req.topology.validate().map_err(|e| refuse(e.to_string()))?;
    let nodes = req.topology.nodes();
    if origin >= nodes {
        return Err(refuse(format!("this device is node {origin}; the topology has {nodes} nodes")));
    }
    if let Some(p) = req.pages.iter().find(|p| p.node >= nodes) {
        return Err(refuse(format!("page {} is on node {}; the topology has {nodes} nodes", p.addr, p.node)));
    }
    let n = req.pages.len();
    let ps = page_size;
    let mut reply = GlobalReadReply { pages: n as u64, spares: vec![0; n], ..Default::default() };
    if n == 0 {
        return Ok(reply);
    }

    // This node's own pages in its host's memory (H-D) need no device.
    let in_dram =
        |i: usize| req.access == Access::HostRemoteDram && req.pages[i].node == origin && !missed[i];
    // The requests reach this device: at once from its ISP, one descriptor after another over PCIe from
    // its host.
    let mut down = Link::new(cfg.pcie_down_ps_per_byte, cfg.pcie_latency_ps);
    let at_device: Vec<Ps> = (0..n)
        .map(|i| {
            if host && !in_dram(i) {
                reply.pcie_down_bytes += DESCRIPTOR_BYTES;
                down.cross(0, DESCRIPTOR_BYTES)
            } else {
                0
            }
        })
        .collect();

    let mine: Vec<usize> = (0..n).filter(|&i| req.pages[i].node == origin).collect();
    reply.local_pages = mine.len() as u64;

    // Step 1: the requests over the network to each remote node.
    let mut net = Network::new(&req.topology, cfg.net.clone());
    let routes = net.routes();
    reply.hops = req
        .pages
        .iter()
        .filter(|p| p.node != origin)
        .map(|p| (routes.hops(origin, p.node) + routes.hops(p.node, origin)) as u64)
        .sum();
    let requests: Vec<Message> = (0..n)
        .filter(|&i| req.pages[i].node != origin)
        .map(|i| {
            let msg = Wire { page: i, slice: None };
            Message { at: at_device[i], from: origin, to: req.pages[i].node, msg }
        })
        .collect();
    let mut by_node: BTreeMap<NodeId, (Vec<usize>, Vec<Ps>)> = BTreeMap::new();
    for d in carry(&mut net, requests, &mut reply)? {
        let i = d.data.page;
        let e = by_node.entry(d.dst).or_default();
        e.0.push(i);
        e.1.push(d.delivered_ps);
    }

    // Step 2: each remote node reads its pages as they arrive, while this node reads its own (neither
    // read depends on the other: each device's times start at the read's start): on a thread of their
    // own when there are both, so the nodes' flash is emulated on two cores, as it works at once.
    let remote_reads = !by_node.is_empty();
    let ask = |mut remote: R| -> Result<Vec<(NodeId, Vec<usize>, PeerPages)>> {
        let mut got = Vec::new();
        for (node, (idx, arrivals_ps)) in by_node {
            let addrs = idx.iter().map(|&i| req.pages[i].addr).collect();
            let misses = (0..idx.len()).filter(|&k| missed[idx[k]]).map(|k| k as u32).collect();
            let pages = remote(node, PeerRawRead { origin, addrs, arrivals_ps, access: req.access, misses })?;
            got.push((node, idx, pages));
        }
        Ok(got)
    };
    // When each slice reaches the reader's device: (time, page, offset, length); and this node's pages.
    type Local = (Vec<(Ps, usize, usize, usize)>, Vec<(usize, Vec<u8>)>);
    let mut read_local = || -> Result<Local> {
        let mut arrived: Vec<(Ps, usize, usize, usize)> = Vec::new();
        let mut pages = Vec::with_capacity(mine.len());
        // Pages from this node's flash, then those in its host's memory, read apart: the second's bytes
        // only (they are there at once; none of that read's times is used).
        let (in_mem, from_flash): (Vec<usize>, Vec<usize>) = mine.iter().partition(|&&i| in_dram(i));
        let source = if host { Source::Host } else { Source::Isp };
        for (group, timed) in [(&from_flash, true), (&in_mem, false)] {
            if group.is_empty() {
                continue;
            }
            let reads: Vec<(FlashAddr, Ps)> =
                group.iter().map(|&i| (req.pages[i].addr, at_device[i])).collect();
            let got = local(source, &reads)?;
            arrived.extend(got.slices.iter().map(|&(k, off, len, t)| {
                (if timed { t } else { 0 }, group[k as usize], off as usize, len as usize)
            }));
            for ((&i, spare), page) in group.iter().zip(got.spares).zip(got.pages) {
                reply.spares[i] = spare;
                pages.push((i, page));
            }
        }
        Ok((arrived, pages))
    };
    let ((mut arrived, local_pages), remote_pages) = if !remote_reads || mine.is_empty() {
        (read_local()?, ask(remote)?)
    } else {
        std::thread::scope(|scope| {
            let asked = scope.spawn(move || ask(remote));
            let here = read_local();
            let there = asked.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            Ok::<_, DeviceError>((here?, there?))
        })?
    };
    let mut answers = Vec::new();
    let mut from: Vec<&[u8]> = vec![&[]; n];
    for (node, idx, got) in &remote_pages {
        let node = *node;
        let pages = page_heads(&got.heads, &got.data, ps).map_err(|e| refuse(format!("node {node}: {e}")))?;
        if pages.len() != idx.len() || got.spares.len() != idx.len() {
            return Err(refuse(format!(
                "node {node} answered {} pages and {} spare areas for {} pages",
                pages.len(),
                got.spares.len(),
                idx.len()
            )));
        }
        for (&i, page) in idx.iter().zip(pages) {
            from[i] = page;
        }
        for (k, &i) in idx.iter().enumerate() {
            reply.spares[i] = got.spares[k];
        }
        for &(k, off, len, t) in &got.slices {
            let (k, off, len) = (k as usize, off as usize, len as usize);
            if k >= idx.len() || off + len > ps {
                return Err(refuse(format!("node {node} answered a slice outside its pages")));
            }
            let msg = Wire { page: idx[k], slice: Some(Slice { offset: off, len }) };
            answers.push(Message { at: t, from: node, to: origin, msg });
        }
    }

    // Step 3: the answers over the network, into the reader's device.
    answers.sort_by_key(|m| m.at);
    let mut net = Network::new(&req.topology, cfg.net.clone());
    for d in carry(&mut net, answers, &mut reply)? {
        let (i, s) = (d.data.page, d.data.slice.expect("an answer carries a slice"));
        arrived.push((d.delivered_ps, i, s.offset, s.len));
    }

    // To the reader: the ISP has each byte as it arrives; a host, after its PCIe link, in arrival order.
    arrived.sort_by_key(|a| a.0);
    let mut up = Link::new(cfg.pcie_up_ps_per_byte, cfg.pcie_latency_ps);
    let mut got = vec![0usize; n];
    for (t, i, _, len) in arrived {
        let done = if host && !in_dram(i) {
            reply.pcie_up_bytes += len as u64;
            up.cross(t, len as u64)
        } else {
            t
        };
        got[i] += len;
        reply.modeled_ps = reply.modeled_ps.max(done);
    }
    if let Some(i) = got.iter().position(|&g| g != ps) {
        return Err(refuse(format!(
            "page {i} ({:?}) arrived incomplete: {} of {ps} bytes",
            req.pages[i], got[i]
        )));
    }
    // Every slice has come: the pages, in the order asked, each copied once from where it was read,
    // without its zero tail.
    for (i, page) in &local_pages {
        if page.len() > ps {
            return Err(refuse(format!(
                "a page read came back with {} bytes, over a page of {ps}",
                page.len()
            )));
        }
        from[*i] = page;
    }
    (reply.heads, reply.data) = pack_heads(&from);
    Ok(reply)
}

/// A message to send at a time.
struct Message {
    at: Ps,
    from: NodeId,
    to: NodeId,
    msg: Wire,
}

/// What crosses the network: the request for page `page` of the read, or a slice of its answer. On the
/// wire they are as long as [`crate::cluster`]'s messages (a request, or a slice after a data header);
/// a slice's bytes stay in the answer that holds them (the reply takes each page once all have come).
#[derive(Debug)]
struct Wire {
    page: usize,
    slice: Option<Slice>,
}

/// A slice of a page: `len` bytes at `offset`.
#[derive(Debug, Clone, Copy)]
struct Slice {
    offset: usize,
    len: usize,
}

impl Payload for Wire {
    fn wire_len(&self) -> usize {
        self.slice.map_or(REQUEST_BYTES, |s| DATA_HEADER + s.len)
    }
}

/// Sends `msgs` (in time order) through `net`, each at its time (or, when its endpoint's send queue is
/// full, as soon as there is room: back-pressure, nothing dropped), on the endpoint its id picks; returns
/// every delivery, and counts the messages into `reply`.
fn carry(
    net: &mut Network<Wire>,
    msgs: Vec<Message>,
    reply: &mut GlobalReadReply,
) -> Result<Vec<Delivery<Wire>>> {
    let endpoints = net.config().endpoints as u64;
    let total = msgs.len();
    let mut msgs = msgs.into_iter().peekable();
    let mut outbox = Outbox::default();
    let mut out = Vec::with_capacity(total);
    let net_err = |e: crate::network::NetError| refuse(e.to_string());
    while out.len() < total {
        let t = match (msgs.peek().map(|m| m.at), net.next_event()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => {
                return Err(refuse(format!("{} messages never left their queues", total - out.len())))
            }
        };
        net.run_until(t);
        while let Some(d) = net.receive_any() {
            out.push(d);
        }
        // Sends waiting for room go first; then those due now.
        outbox.retry(net).map_err(net_err)?;
        while let Some(m) = msgs.next_if(|m| m.at <= t) {
            let ep = (m.msg.page as u64 % endpoints) as u32;
            outbox.send(net, m.from, ep, m.to, m.msg).map_err(net_err)?;
        }
    }
    reply.network_messages += outbox.messages;
    reply.network_bytes += outbox.bytes;
    Ok(out)
}

/// Serves a [`PeerRawRead`] of pages of `page_size` bytes on a device's raw partition: `read_at` reads
/// for the in-store processor of the asking node, or for this node's host (H-RH-F, H-D, priced on the
/// figures `cfg` gives). The pages go back without their zero tails.
pub fn serve(
    req: &PeerRawRead,
    page_size: usize,
    cfg: impl FnOnce() -> Result<ClusterConfig>,
    mut read_at: impl FnMut(Source, &[(FlashAddr, Ps)]) -> Result<TimedPages>,
) -> Result<PeerPages> {
    if req.addrs.len() != req.arrivals_ps.len() {
        return Err(refuse(format!(
            "{} pages with {} arrival times",
            req.addrs.len(),
            req.arrivals_ps.len()
        )));
    }
    if matches!(req.access, Access::HostRemoteHost | Access::HostRemoteDram) {
        return through_host(req, page_size, &cfg()?, read_at);
    }
    if !req.misses.is_empty() {
        return Err(refuse(format!("{:?} has no host memory to miss", req.access)));
    }
    let reads: Vec<(FlashAddr, Ps)> =
        req.addrs.iter().copied().zip(req.arrivals_ps.iter().copied()).collect();
    let got = read_at(Source::Remote(req.origin), &reads)?;
    let (heads, data) = pack_heads(&got.pages);
    Ok(PeerPages { slices: got.slices, spares: got.spares, heads, data })
}

/// H-RH-F and H-D at the page's node, as [`crate::cluster`] has them: each request interrupts the host (a
/// descriptor up the PCIe link); for H-RH-F the host asks its device for the page (a descriptor down) and
/// reads it into its memory (its slices up), for H-D it has the page already; then it sends the page back
/// down, slice by slice, each slice on to the network as it lands. On each link the descriptors, and the
/// pages the host holds, go in the order of the interrupts, before the slices of pages read from flash
/// (requests arrive within microseconds of each other, a flash read takes tens), where the one simulation
/// takes everything in time order.
fn through_host(
    req: &PeerRawRead,
    ps: usize,
    cfg: &ClusterConfig,
    mut read_at: impl FnMut(Source, &[(FlashAddr, Ps)]) -> Result<TimedPages>,
) -> Result<PeerPages> {
    let n = req.addrs.len();
    let missed = flags(&req.misses, n)?;
    let in_memory = |k: usize| req.access == Access::HostRemoteDram && !missed[k];
    let mut up = Link::new(cfg.pcie_up_ps_per_byte, cfg.pcie_latency_ps);
    let mut down = Link::new(cfg.pcie_down_ps_per_byte, cfg.pcie_latency_ps);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| req.arrivals_ps[i]);
    let mut at_host = vec![0; n];
    for &i in &order {
        at_host[i] = up.cross(req.arrivals_ps[i], DESCRIPTOR_BYTES);
    }
    // The pages the host reads from its flash, asked for as their interrupts reach it; those in its
    // memory read from the image apart (their bytes only: none of that read's times is used).
    let (in_mem, from_flash): (Vec<usize>, Vec<usize>) = (0..n).partition(|&k| in_memory(k));
    let mut pages = vec![Vec::new(); n];
    let mut spares = vec![0; n];
    type Slices = Vec<(u32, u32, u32, Ps)>;
    let mut read = |group: &[usize],
                    at: &[Ps],
                    pages: &mut [Vec<u8>],
                    spares: &mut [u64]|
     -> Result<Slices> {
        if group.is_empty() {
            return Ok(Vec::new());
        }
        let reads: Vec<(FlashAddr, Ps)> = group.iter().map(|&k| (req.addrs[k], at[k])).collect();
        let got = read_at(Source::Host, &reads)?;
        for ((&k, page), spare) in group.iter().zip(got.pages).zip(got.spares) {
            pages[k] = page;
            spares[k] = spare;
        }
        Ok(got.slices.into_iter().map(|(j, off, len, t)| (group[j as usize] as u32, off, len, t)).collect())
    };
    read(&in_mem, &vec![0; n], &mut pages, &mut spares)?;
    let slice = (cfg.raw.slice_bytes as usize).max(1);
    // The down link in the order the host gets its interrupts: a page it holds goes down at once, slice
    // by slice; a page it must read sends its request down.
    let mut at_device = vec![0; n];
    let mut slices = Vec::new();
    let send = |k: usize, at: Ps, ps: usize, down: &mut Link, slices: &mut Slices| {
        for off in (0..ps).step_by(slice) {
            let len = slice.min(ps - off);
            slices.push((k as u32, off as u32, len as u32, down.cross(at, len as u64)));
        }
    };
    for &k in &order {
        if in_memory(k) {
            send(k, at_host[k], ps, &mut down, &mut slices);
        } else {
            at_device[k] = down.cross(at_host[k], DESCRIPTOR_BYTES);
        }
    }
    // The pages read from flash, each ready once its last slice is up in the host's memory, then down.
    let mut up_slices = read(&from_flash, &at_device, &mut pages, &mut spares)?;
    up_slices.sort_by_key(|s| s.3);
    let mut ready = vec![0; n];
    for (k, _, len, t) in up_slices {
        ready[k as usize] = ready[k as usize].max(up.cross(t, len as u64));
    }
    let mut flash_order = from_flash;
    flash_order.sort_by_key(|&k| (ready[k], k));
    for k in flash_order {
        send(k, ready[k], ps, &mut down, &mut slices);
    }
    let (heads, data) = pack_heads(&pages);
    Ok(PeerPages { slices, spares, heads, data })
}

/// `n` flags, set at `indices` (pages of a read that miss their host's memory); an index past the read
/// is refused.
fn flags(indices: &[u32], n: usize) -> Result<Vec<bool>> {
    let mut f = vec![false; n];
    for &i in indices {
        *f.get_mut(i as usize)
            .ok_or_else(|| refuse(format!("miss {i} names no page of this read of {n} pages")))? = true;
    }
    Ok(f)
}
