//! `insitu repro bluedbm-net`: the storage network's measurements of BlueDBM §6.3 (Fig. 11), modeled by
//! simulating the profile's links packet by packet, and the remote and local page reads of §6.4-6.5
//! (Figs. 12 and 13, [`super::access`]) on simulated nodes; measured here as the emulator's own speed.
//!
//! Each row has the paper's value, the modeled value (simulated time on the profile: the same on any
//! machine) and the measured one: how fast this machine emulated the same traffic (for a latency, the
//! wall time per message; for a bandwidth, real payload bytes moved per wall second).

use std::time::Instant;

use insitu_device::network::{NetError, Network, NodeId, Topology};
use insitu_device::Profile;
use serde::Serialize;

use super::topo_err;
use super::Row;
use crate::error::{HostError, Result};
use crate::figure::{Figure, PaperFigures, Plot, Series, Source};

/// The figures, by name.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub profile: String,
    pub fig11: Vec<Row>,
    pub fig12: Vec<Row>,
    pub fig13: Vec<Row>,
}

/// The paper's values (§6.3).
mod paper {
    pub const HOP_US: f64 = 0.48;
    pub const STREAM_GBPS: f64 = 8.2;
    /// "8.2 GB/s" aggregate over 8 ports, each way.
    pub const PORTS8_GBYTES: f64 = 8.2;
    /// A 20-node ring with 4 lanes to each neighbour: "5 hops, or 2.5 us" on average, "32.8 Gbps".
    pub const RING_HOPS: f64 = 5.0;
    pub const RING_US: f64 = 2.5;
    pub const RING_GBPS: f64 = 32.8;
}

/// Runs Figs. 11-13 on `profile` (which must describe a storage network, as `bluedbm` does).
pub fn run(profile: &Profile, progress: &dyn Fn(&str)) -> Result<Figures> {
    let (net, cfg) = super::storage_network(profile)?;
    let ports = net.ports;
    let mut fig11 = Vec::new();
    progress("fig11: latency by hops");
    for hops in 1..=8u32 {
        let topo = line(hops + 1, ports)?;
        let started = Instant::now();
        let rounds = 200u32;
        let mut modeled_ps = 0;
        for _ in 0..rounds {
            let mut net = Network::new(&topo, cfg.clone());
            net.send(0, 0, hops, vec![0x5a; 16]).map_err(net_err)?;
            net.run();
            let d = net.receive(hops, 0).ok_or_else(|| lost("a 128-bit packet"))?;
            modeled_ps = d.delivered_ps - d.sent_ps;
        }
        fig11.push(
            Row::new(
                format!("latency of one 128-bit packet, {hops} hop{}", if hops == 1 { "" } else { "s" }),
                "us",
                modeled_ps as f64 * 1e-6,
            )
            .paper(paper::HOP_US * hops as f64)
            .measured_opt(Some(started.elapsed().as_secs_f64() * 1e6 / rounds as f64))
            .note("hops x the hop latency, plus the packet's own 2 flits on the last link"),
        );
    }
    progress("fig11: one stream over 1 to 8 hops");
    for hops in [1u32, 2, 4, 8] {
        let topo = line(hops + 1, ports)?;
        let mut net = Network::new(&topo, cfg.clone());
        let flows = [(0, 0, hops)];
        let (modeled, measured) = stream(&mut net, &flows, 16 << 20, 8192)?;
        fig11.push(
            Row::new(
                format!("one stream, {hops} hop{}", if hops == 1 { "" } else { "s" }),
                "Gb/s",
                modeled * 8e-9,
            )
            .paper(paper::STREAM_GBPS)
            .measured_opt(Some(measured * 8e-9))
            .note("10 Gb/s less 64b/66b, less 22 bits of header and framing per 128-bit flit"),
        );
    }
    progress("fig11: 8 ports at once");
    let star: Vec<(NodeId, NodeId)> = (1..=8).map(|n| (0, n)).collect();
    let topo = Topology::from_pairs(9, ports, &star).map_err(topo_err)?;
    let mut net = Network::new(&topo, cfg.clone());
    let flows: Vec<(NodeId, u32, NodeId)> = (1..=8).flat_map(|n| [(0, n - 1, n), (n, n - 1, 0)]).collect();
    let (modeled, measured) = stream(&mut net, &flows, 4 << 20, 8192)?;
    fig11.push(
        Row::new("8 ports, full duplex, each way", "GB/s", modeled / 2.0 * 1e-9)
            .paper(paper::PORTS8_GBYTES)
            .measured_opt(Some(measured / 2.0 * 1e-9))
            .note("8 links' payload rate each way"),
    );
    progress("fig11: a 20-node ring with 4 lanes to each neighbour");
    let ring = Topology::ring(20, 4, ports).map_err(topo_err)?;
    let net: Network = Network::new(&ring, cfg.clone());
    let hops: u32 = (1..20).map(|d| net.routes().hops(0, d)).sum();
    let mean = hops as f64 / 19.0;
    fig11.push(
        Row::new("20-node ring: mean hops to a remote node", "hops", mean)
            .paper(paper::RING_HOPS)
            .measured_opt(None)
            .note("shortest routes: 100 hops over 19 nodes"),
    );
    fig11.push(
        Row::new(
            "20-node ring: mean latency to a remote node",
            "us",
            mean * cfg.hop_latency_ps as f64 * 1e-6,
        )
        .paper(paper::RING_US)
        .measured_opt(None)
        .note("mean hops x the hop latency (the paper rounds a hop to 0.5 us here)"),
    );
    let mut net = Network::new(&ring, cfg);
    let flows: Vec<(NodeId, u32, NodeId)> = (0..4).map(|ep| (0, ep, 1)).collect();
    let (modeled, measured) = stream(&mut net, &flows, 8 << 20, 8192)?;
    fig11.push(
        Row::new("20-node ring: throughput to a neighbour (4 lanes)", "Gb/s", modeled * 8e-9)
            .paper(paper::RING_GBPS)
            .measured_opt(Some(measured * 8e-9))
            .note("4 endpoints take the 4 lanes (routes differ per endpoint)"),
    );
    let fig12 = super::access::fig12(profile, progress)?;
    let fig13 = super::access::fig13(profile, progress)?;
    Ok(Figures { profile: profile.name.clone(), fig11, fig12, fig13 })
}

/// Streams `bytes` in messages of `message` bytes on each flow (src, endpoint, dst) at once; returns
/// (modeled payload bytes/s, payload bytes/s of wall time here), both over all flows.
fn stream(
    net: &mut Network,
    flows: &[(NodeId, u32, NodeId)],
    bytes: usize,
    message: usize,
) -> Result<(f64, f64)> {
    let started = Instant::now();
    let per_flow = bytes / message;
    let mut sent = vec![0usize; flows.len()];
    let payload = vec![0xa5u8; message];
    while sent.iter().any(|s| *s < per_flow) {
        let mut progressed = false;
        for (i, &(src, ep, dst)) in flows.iter().enumerate() {
            while sent[i] < per_flow {
                match net.send(src, ep, dst, payload.clone()) {
                    Ok(()) => {
                        sent[i] += 1;
                        progressed = true;
                    }
                    Err(NetError::Full { .. }) => break,
                    Err(e) => return Err(net_err(e)),
                }
            }
        }
        if !progressed {
            let t = net.next_event().ok_or_else(|| lost("a stream"))?;
            net.run_until(t);
        }
        while net.receive_any().is_some() {}
    }
    let end = net.run();
    let mut received = 0;
    while let Some(d) = net.receive_any() {
        received += d.data.len();
    }
    let wall = started.elapsed().as_secs_f64();
    let total = per_flow * message * flows.len();
    if received > total {
        return Err(lost("a stream (more received than sent)"));
    }
    Ok((total as f64 / (end as f64 * 1e-12), total as f64 / wall))
}

fn line(nodes: u32, ports: u32) -> Result<Topology> {
    Topology::line(nodes, 1, ports).map_err(topo_err)
}

fn net_err(e: NetError) -> HostError {
    HostError::InvalidArgument(format!("storage network: {e}"))
}

fn lost(what: &str) -> HostError {
    HostError::InvalidArgument(format!("storage network: {what} was not delivered"))
}

/// The figures as text, beside the paper.
pub fn render(f: &Figures) -> String {
    let mut out = format!(
        "BlueDBM (ISCA '15 §6.3-6.5) on profile {}: modeled = simulated links, flash cards and PCIe; \
         measured = this machine emulating them\n",
        f.profile
    );
    out += &super::rows_text(&[
        ("fig11", "storage network (§6.3)", &f.fig11),
        ("fig12", "latency of one remote 8 KB read (§6.4)", &f.fig12),
        ("fig13", "random 8 KB read bandwidth (§6.5)", &f.fig13),
    ]);
    out
}

/// Figs. 11-13 as figures: the rows as they are, plotted like the paper's (latency by hops; the read
/// latency by path; the read bandwidth by configuration).
pub fn figures(f: &Figures) -> PaperFigures {
    let latency: Vec<&Row> = f.fig11.iter().filter(|r| r.label.starts_with("latency")).collect();
    let by_hops = |pick: &dyn Fn(&Row) -> Option<f64>| -> Vec<[f64; 2]> {
        latency.iter().enumerate().filter_map(|(i, r)| pick(r).map(|v| [(i + 1) as f64, v])).collect()
    };
    let fig11 = Plot::lines("hops", "latency of one 128-bit packet (us)", false, false)
        .with(Series::new("paper", Source::Paper, by_hops(&|r| r.paper)))
        .with(Series::new("modeled", Source::Modeled, by_hops(&|r| Some(r.modeled))));
    let totals: Vec<&Row> = f.fig12.iter().filter(|r| r.label.ends_with(": total")).collect();
    let paths: Vec<String> = totals.iter().map(|r| r.label.trim_end_matches(": total").to_string()).collect();
    let bars = |rows: &[&Row], pick: &dyn Fn(&Row) -> Option<f64>| -> Vec<[f64; 2]> {
        rows.iter().enumerate().filter_map(|(i, r)| pick(r).map(|v| [i as f64, v])).collect()
    };
    let fig12 = Plot::bars("access path", "latency of one remote 8 KB read (us)", paths, false)
        .with(Series::new("paper", Source::Paper, bars(&totals, &|r| r.paper)))
        .with(Series::new("modeled", Source::Modeled, bars(&totals, &|r| Some(r.modeled))));
    let bw: Vec<&Row> = f.fig13.iter().collect();
    let fig13 = Plot::bars(
        "configuration",
        "random 8 KB read bandwidth (GB/s)",
        bw.iter().map(|r| r.label.clone()).collect(),
        false,
    )
    .with(Series::new("paper", Source::Paper, bars(&bw, &|r| r.paper)))
    .with(Series::new("modeled", Source::Modeled, bars(&bw, &|r| Some(r.modeled))))
    .with(Series::new("measured here", Source::Measured, bars(&bw, &|r| r.measured)));
    PaperFigures {
        paper: "bluedbm-net".into(),
        cites: "BlueDBM (ISCA '15)".into(),
        setup: format!(
            "profile `{}`; modeled = the profile's links, flash cards and PCIe simulated; measured = this machine \
             emulating the same traffic (wall time per message, payload per wall second)",
            f.profile
        ),
        figures: vec![
            Figure::new("fig11", "Storage network: latency by hops, bandwidth of streams and ports (§6.3)", f.fig11.clone(), Some(fig11)),
            Figure::new("fig12", "Latency of one remote 8 KB read by path (§6.4)", f.fig12.clone(), Some(fig12)),
            Figure::new("fig13", "Random 8 KB read bandwidth, local and remote (§6.5)", f.fig13.clone(), Some(fig13)),
        ],
        detail: render(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figs_11_to_13_follow_from_the_profile_and_are_deterministic() {
        let p = Profile::load("bluedbm").unwrap();
        let a = run(&p, &|_| {}).unwrap();
        let b = run(&p, &|_| {}).unwrap();
        let modeled_of = |rows: &[Row]| rows.iter().map(|r| r.modeled).collect::<Vec<_>>();
        assert_eq!(modeled_of(&a.fig11), modeled_of(&b.fig11));
        let bw = p.network.storage.as_ref().unwrap().payload_bw() * 8e-9;
        for r in &a.fig11 {
            if r.label.starts_with("one stream") {
                assert!((r.modeled / bw - 1.0).abs() < 0.01, "{r:?}");
            }
            if r.label.starts_with("latency") {
                let hops: f64 =
                    r.label.split(", ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
                assert!((r.modeled - 0.48 * hops).abs() < 0.03, "{r:?}");
            }
        }
        let ring = a.fig11.iter().find(|r| r.label.contains("throughput")).unwrap();
        assert!((ring.modeled / (4.0 * bw) - 1.0).abs() < 0.01, "{ring:?}");
        assert!(run(&Profile::load("tiny").unwrap(), &|_| {}).is_err());

        // Fig. 12: every path's parts add up to its total; the ISP's path is the fastest flash path.
        assert_eq!(a.fig12.len(), 20);
        let total =
            |name: &str| a.fig12.iter().find(|r| r.label == format!("{name}: total")).unwrap().modeled;
        for chunk in a.fig12.chunks(5) {
            let parts: f64 = chunk[..4].iter().map(|r| r.modeled).sum();
            assert!((parts - chunk[4].modeled).abs() < 1e-6, "{chunk:?}");
        }
        assert!(
            total("ISP-F") < total("H-F") && total("H-F") < total("H-RH-F") && total("H-D") < total("H-F")
        );
        assert_eq!(modeled_of(&a.fig12), modeled_of(&b.fig12));
        assert_eq!(modeled_of(&a.fig13), modeled_of(&b.fig13));

        // Fig. 13 follows from the profile's figures: PCIe, the cards, the links.
        let raw = p.nand.interface.as_ref().unwrap();
        let cards = raw.cards as f64 * raw.card_bw * 1e-9;
        let link = p.network.storage.as_ref().unwrap().payload_bw() * 1e-9;
        let want = [p.host_link.read_bw * 1e-9, cards, cards + link, cards + 4.0 * link];
        for (r, w) in a.fig13.iter().zip(want) {
            assert!((r.modeled / w - 1.0).abs() < 0.03, "{}: {} vs {w}", r.label, r.modeled);
        }
    }
}
