//! Figs. 12 and 13 of BlueDBM (§6.4-6.5): reading 8 KB pages from local and remote flash, by the in-store
//! processor and by the host, on the simulated nodes of [`insitu_device::cluster`].
//!
//! Fig. 12 splits the latency of one remote read into the paper's four parts (§6.4): *software* (the
//! reader's host reaching its device), *storage* (until the first byte leaves the serving node: flash
//! or its host's memory), *transfer* (until the last byte reaches the reader) and *network* (hop
//! latencies, request and answer). Fig. 13 streams random page reads and reports the bandwidth while
//! every stream is running (§6.5).

use std::time::Instant;

use insitu_device::cluster::{Access, Cluster, Read};
use insitu_device::network::{NodeId, Topology};
use insitu_device::rawflash::FlashAddr;
use insitu_device::Profile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::Row;
use super::{raw_err, topo_err};
use crate::devices::ScratchDir;
use crate::error::{HostError, Result};

/// The paper's values. Fig. 12 is a plot whose numbers the paper does not print: these are the
/// authors' plot data (sangwoojun/bluedbm, Nov 2014 draft), us: (software, storage, transfer, network).
mod paper {
    pub const ISP_F: [f64; 4] = [0.0, 72.8, 44.5, 2.0];
    pub const H_F: [f64; 4] = [25.3, 73.2, 44.5, 2.0];
    pub const H_RH_F: [f64; 4] = [25.0, 198.0, 44.0, 2.0];
    pub const H_D: [f64; 4] = [15.9, 12.6, 27.7, 2.0];
    /// §6.5, GB/s.
    pub const HOST_LOCAL: f64 = 1.6;
    pub const ISP_LOCAL: f64 = 2.4;
    pub const ISP_2NODES: f64 = 3.4;
    pub const ISP_3NODES: f64 = 6.5;
}

/// Pages written on each chip of each node before reading.
const PAGES_PER_CHIP: u32 = 2;

/// A cluster of `topology` with [`PAGES_PER_CHIP`] pages written on every chip of every node, and the
/// addresses written.
fn setup(profile: &Profile, topology: &Topology, dir: &ScratchDir) -> Result<(Cluster, Vec<FlashAddr>)> {
    let mut c = Cluster::create(profile, topology, dir.path(), 2)?;
    let (cards, buses, chips) = {
        let raw = &c.config().raw;
        let geo = profile.base_geometry();
        (raw.cards, geo.channels / raw.cards, geo.chips_per_channel)
    };
    let mut addrs = Vec::new();
    for card in 0..cards {
        for bus in 0..buses {
            for chip in 0..chips {
                for page in 0..PAGES_PER_CHIP {
                    addrs.push(FlashAddr { card, bus, chip, block: 0, page });
                }
            }
        }
    }
    let ps = c.page_size();
    for node in 0..topology.nodes() {
        for (i, a) in addrs.iter().enumerate() {
            let data: Vec<u8> = (0..ps).map(|b| (b ^ i ^ node as usize) as u8).collect();
            c.write(node, *a, i as u64, &data).map_err(raw_err)?;
            if node == 1 && i == 0 {
                c.put_dram(node, *a, data);
            }
        }
    }
    Ok((c, addrs))
}

/// Fig. 12: the latency of one 8 KB read from the next node, by path, split into its parts.
pub fn fig12(profile: &Profile, progress: &dyn Fn(&str)) -> Result<Vec<Row>> {
    let ports = super::storage_network(profile)?.0.ports;
    let topo = Topology::line(2, 1, ports).map_err(topo_err)?;
    let dir = ScratchDir::new()?;
    let (mut c, addrs) = setup(profile, &topo, &dir)?;
    let hop_ps = c.config().net.hop_latency_ps;
    let mut rows = Vec::new();
    const HOST_SOFTWARE: &str =
        "the request crossing the reader's PCIe (host_link.latency_us); the paper's 16-25 us is host software \
         (Connectal's RPC and interrupts), which the profile does not price";
    const NETWORK: &str = "one hop each way at 0.48 us (§6.3); the paper's 2 us is not broken down further";
    let paths = [
        (
            "ISP-F",
            Access::IspFlash,
            paper::ISP_F,
            [
                "no software: the ISP asks the network directly",
                "request across, card latency, tR (75 us), the first tenth of the page's bus transfer",
                "the rest of the page streams out at its bus's pace (bus_page_us) and across as it comes",
                NETWORK,
            ],
            "flash and network overlap: no host on the path",
        ),
        (
            "H-F",
            Access::HostFlash,
            paper::H_F,
            [
                HOST_SOFTWARE,
                "as ISP-F: the remote splitter serves the request like an ISP's",
                "as ISP-F, and the last slice crossing the reader's PCIe",
                NETWORK,
            ],
            "as ISP-F, entered and left through the reader's PCIe",
        ),
        (
            "H-RH-F",
            Access::HostRemoteHost,
            paper::H_RH_F,
            [
                HOST_SOFTWARE,
                "the remote host is interrupted, asks its flash over PCIe and takes the whole page into memory \
                 before sending (no overlap); the paper's also holds the remote host's software",
                "the page down the remote PCIe (1.0 GB/s), across the link and up the reader's PCIe",
                NETWORK,
            ],
            "the remote host reads the page into its memory, then sends it",
        ),
        (
            "H-D",
            Access::HostRemoteDram,
            paper::H_D,
            [
                HOST_SOFTWARE,
                "the remote host is interrupted; the page is already in its memory",
                "the page down the remote PCIe (1.0 GB/s), across the link and up the reader's PCIe",
                NETWORK,
            ],
            "the remote host sends the page from its memory: no flash",
        ),
    ];
    for (name, access, want, notes, why) in paths {
        progress(&format!("fig12: {name}"));
        let rounds = 16;
        let mut sum = [0f64; 4];
        let started = Instant::now();
        for r in 0..rounds {
            // H-D reads the page its host holds; the others read different chips each round.
            let addr =
                if access == Access::HostRemoteDram { addrs[0] } else { addrs[(r * 37) % addrs.len()] };
            c.submit(Read { origin: 0, access, node: 1, addr }).map_err(raw_err)?;
            let d =
                c.next_done().ok_or_else(|| HostError::InvalidArgument("fig12: a read was lost".into()))?;
            let half = d.hops as u64 / 2 * hop_ps;
            let parts = [
                d.at_device_ps - d.issued_ps,
                d.first_out_ps - d.at_device_ps - half,
                d.done_ps - d.first_out_ps - half,
                2 * half,
            ];
            for (s, p) in sum.iter_mut().zip(parts) {
                *s += p as f64 * 1e-6 / rounds as f64;
            }
        }
        let wall_us = started.elapsed().as_secs_f64() * 1e6 / rounds as f64;
        for (k, part) in ["software", "storage", "transfer", "network"].iter().enumerate() {
            rows.push(
                Row::new(format!("{name}: {part}"), "us", sum[k])
                    .paper(want[k])
                    .measured_opt(None)
                    .note(notes[k]),
            );
        }
        rows.push(
            Row::new(format!("{name}: total"), "us", sum.iter().sum())
                .paper(want.iter().sum())
                .measured_opt(Some(wall_us))
                .note(format!("{why}; measured = wall time to emulate one read here")),
        );
    }
    Ok(rows)
}

/// One stream of reads: `window` in flight, from `origin` by `access` to random pages of `node`.
struct Stream {
    origin: NodeId,
    access: Access,
    node: NodeId,
    window: usize,
}

/// Runs `streams` together; returns (modeled bytes/s over all streams while all run, page bytes moved
/// per wall second here).
fn bandwidth(c: &mut Cluster, addrs: &[FlashAddr], streams: &[Stream], seed: u64) -> Result<(f64, f64)> {
    const WARMUP_PS: u64 = 2_000_000_000; // 2 ms
    const WINDOW_PS: u64 = 10_000_000_000; // 10 ms
    let mut rng = SmallRng::seed_from_u64(seed);
    let start = c.now();
    let started = Instant::now();
    let mut owner = std::collections::HashMap::new();
    let mut in_flight = vec![0usize; streams.len()];
    let (from, to) = (start + WARMUP_PS, start + WARMUP_PS + WINDOW_PS);
    let (mut bytes, mut all_bytes) = (0u64, 0u64);
    loop {
        if c.now() < to {
            for (i, s) in streams.iter().enumerate() {
                while in_flight[i] < s.window {
                    let addr = addrs[rng.gen_range(0..addrs.len())];
                    let id = c
                        .submit(Read { origin: s.origin, access: s.access, node: s.node, addr })
                        .map_err(raw_err)?;
                    owner.insert(id, i);
                    in_flight[i] += 1;
                }
            }
        }
        let Some(d) = c.next_done() else { break };
        in_flight[owner.remove(&d.id).expect("a read of ours")] -= 1;
        all_bytes += d.data.len() as u64;
        if (from..to).contains(&d.done_ps) {
            bytes += d.data.len() as u64;
        }
    }
    Ok((bytes as f64 / (WINDOW_PS as f64 * 1e-12), all_bytes as f64 / started.elapsed().as_secs_f64()))
}

/// A case of Fig. 13: its name and paper value, the cables between node 0 and the others, how node 0
/// reads and from which nodes (one stream each), and why the answer is what it is.
struct Case {
    name: &'static str,
    want: f64,
    cables: &'static [(NodeId, NodeId)],
    access: Access,
    from: &'static [NodeId],
    why: &'static str,
}

/// Fig. 13: random 8 KB read bandwidth, local and remote.
pub fn fig13(profile: &Profile, progress: &dyn Fn(&str)) -> Result<Vec<Row>> {
    let ports = super::storage_network(profile)?.0.ports;
    let iface = profile.nand.interface.as_ref().map_or(1, |i| i.host_page_buffers) as usize;
    let tags = profile.nand.interface.as_ref().map_or(1, |i| i.tags_per_card * i.cards) as usize;
    let mut rows = Vec::new();
    let cases = [
        Case {
            name: "Host-Local",
            want: paper::HOST_LOCAL,
            cables: &[],
            access: Access::HostFlash,
            from: &[0],
            why: "PCIe to the host (host_link.read_bw), with the host's 128 read buffers in flight",
        },
        Case {
            name: "ISP-Local",
            want: paper::ISP_LOCAL,
            cables: &[],
            access: Access::IspFlash,
            from: &[0],
            why: "both cards at their bandwidth (2 x card_bw); 8 buses of a card could move more",
        },
        Case {
            name: "ISP-2Nodes",
            want: paper::ISP_2NODES,
            cables: &[(0, 1)],
            access: Access::IspFlash,
            from: &[0, 1],
            why:
                "local cards + one link's payload rate (8.03 Gb/s); each controller's requests flow on their \
                  own (one request stream split 50/50 would be held to twice the link)",
        },
        Case {
            name: "ISP-3Nodes",
            want: paper::ISP_3NODES,
            cables: &[(0, 1), (0, 1), (0, 2), (0, 2)],
            access: Access::IspFlash,
            from: &[0, 1, 2],
            why: "local cards + 4 links (4 x 8.03 Gb/s = 4.0 GB/s; the paper counts 4 x 8.2 = 4.1)",
        },
    ];
    for (i, Case { name, want, cables, access, from, why }) in cases.iter().enumerate() {
        progress(&format!("fig13: {name}"));
        let window = if *access == Access::HostFlash { iface } else { tags };
        let streams: Vec<Stream> =
            from.iter().map(|&node| Stream { origin: 0, access: *access, node, window }).collect();
        let topo = Topology::from_pairs(from.len() as u32, ports, cables).map_err(topo_err)?;
        let dir = ScratchDir::new()?;
        let (mut c, addrs) = setup(profile, &topo, &dir)?;
        let (modeled, measured) = bandwidth(&mut c, &addrs, &streams, i as u64)?;
        rows.push(
            Row::new(*name, "GB/s", modeled * 1e-9)
                .paper(*want)
                .measured_opt(Some(measured * 1e-9))
                .note(format!("{why}; measured = pages emulated per wall second here")),
        );
    }
    Ok(rows)
}
