//! `insitu repro bluedbm-apps`: BlueDBM's applications (ISCA '15 §7, Figs. 16-21) on a two-node appliance
//! made in a work folder: nearest-neighbour search (Figs. 16-19), graph traversal (Fig. 20) and string
//! search (Fig. 21), each run for real on data stored in the appliance's file system, by the in-store
//! processors and by host software; every answer is checked to agree across placements.
//!
//! Modeled values are simulated time on the profile (the same on any machine): the engines' closed loop
//! on the flash simulation, the storage network, PCIe, and the host's CPU and memory priced by its
//! profile; the disk of Fig. 17's misses is modeled only (its bytes come from memory). Measured values
//! are this machine's speed at the same runs.

use std::path::Path;

use insitu_device::Profile;
use insitu_kernels::hamming::naive_nearest;
use serde::Serialize;

use super::apps::Placement;
use super::fs::Fs;
use super::graph::{kronecker, put_graph, walk, Adjacency, Reader, WalkSpec};
use super::nearest::{nearest, Misses, NearestOptions};
use super::search::{search, SearchOptions};
use super::{IspLimits, Row};
use crate::error::{HostError, Result};
use crate::figure::{Figure, PaperFigures, Plot, Series, Source};

/// The paper's values (§7 and the authors' plot data, `../shared/notes/bluedbm.md`).
mod paper {
    /// Fig. 16: thousands of Hamming comparisons a second.
    pub const ISP_1: f64 = 313.92;
    pub const ISP_2: f64 = 627.84;
    pub const DRAM: [f64; 4] = [52.8, 104.8, 226.0, 354.2];
    /// Fig. 17, at 1, 2, 4 and 8 threads.
    pub const FLASH_10: [f64; 4] = [25.9, 50.0, 59.8, 74.0];
    pub const DISK_5: [f64; 4] = [3.39, 4.41, 6.24, 8.26];
    /// Fig. 19: "the accelerator advantage is at least 20%".
    pub const ACCEL_ADVANTAGE: f64 = 1.2;
    /// "Had we not throttled BlueDBM, the advantage would have been 30% or more."
    pub const ACCEL_ADVANTAGE_UNTHROTTLED: f64 = 1.3;
    /// Fig. 20 (the plot's units are not labelled: read as accesses a second).
    pub const TRAVERSAL: [(&str, f64); 6] = [
        ("ISP-F", 7692.0),
        ("H-F", 6303.0),
        ("H-RH-F", 2688.0),
        ("DRAM + 50% F", 5586.0),
        ("DRAM + 30% F", 7570.0),
        ("H-DRAM", 16209.0),
    ];
    /// Fig. 21: MB/s of string search with 8, 16 and 32 engines on one card; "1.1 GB/s".
    pub const SEARCH: [f64; 3] = [508.0, 770.0, 1060.0];
    /// "CPU utilization increases significantly to 65%" (grep on an SSD).
    pub const GREP_SSD_CPU: f64 = 65.0;
}

/// Threads of the host placements (Figs. 16-17).
const THREADS: [u32; 4] = [1, 2, 4, 8];
/// §7.1's throttled BlueDBM.
const THROTTLE_BW: f64 = 600e6;

#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub profile: String,
    pub items: u64,
    pub corpus_bytes: u64,
    pub graph_vertices: u64,
    pub fig16: Vec<Row>,
    pub fig17: Vec<Row>,
    pub fig18: Vec<Row>,
    pub fig19: Vec<Row>,
    pub fig20: Vec<Row>,
    pub fig21: Vec<Row>,
}

/// Deterministic bytes.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A text of words with `needle` at about one byte in ten thousand (§7.3: "0.01%").
fn corpus(bytes: usize, needle: &str) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "flash", "page", "store", "network", "node", "host", "query", "graph", "search", "engine", "card",
        "bus", "latency", "data", "index", "buffer",
    ];
    let r = noise(bytes / 2, 5);
    let mut out = Vec::with_capacity(bytes + 64);
    let mut i = 0;
    while out.len() < bytes {
        let w = r[i % r.len()] as usize;
        i += 1;
        if out.len() % 70_000 < 8 && !out.is_empty() {
            out.extend_from_slice(needle.as_bytes());
        } else {
            out.extend_from_slice(WORDS[w % WORDS.len()].as_bytes());
        }
        out.push(if w.is_multiple_of(11) { b'\n' } else { b' ' });
    }
    out.truncate(bytes);
    out
}

fn check(ok: bool, what: &str) -> Result<()> {
    match ok {
        true => Ok(()),
        false => Err(HostError::InvalidArgument(format!("bluedbm-apps: the placements disagree on {what}"))),
    }
}

/// Runs §7's applications on a two-node appliance of `profile` made in `work`.
pub fn run(profile: &Profile, work: &Path, quick: bool, progress: &dyn Fn(&str)) -> Result<Figures> {
    let dir = work.join("bluedbm-apps");
    crate::array::clear_array_dir(&dir)?;
    std::fs::create_dir_all(work).map_err(|e| HostError::io(work, e))?;
    // The appliance goes with the run (hundreds of MB of NAND images), whatever its end.
    let figures = run_in(profile, &dir, quick, progress);
    let _ = std::fs::remove_dir_all(&dir);
    figures
}

/// [`run`] on an appliance made in `dir`.
fn run_in(profile: &Profile, dir: &Path, quick: bool, progress: &dyn Fn(&str)) -> Result<Figures> {
    let ps = profile.nand.page_size as usize;
    let items = if quick { 1024 } else { 8192 };
    let corpus_bytes = if quick { 8 << 20 } else { 64 << 20 };
    let scale = if quick { 10 } else { 13 };
    let capacity =
        2 * (items * ps) as u64 + corpus_bytes as u64 + ((1u64 << scale) * 3 * ps as u64) + (256 << 20);
    let topo = super::topology("line", Some(2), 1, profile)?;
    let mut array = crate::Array::init(dir, 2, profile.clone(), Some(capacity), None)?;
    array.set_topology(topo)?;
    let mut fs = Fs::open(&array)?;

    progress("storing items, a corpus and a graph");
    let data = noise(items * ps, 9);
    fs.put("items1", &mut data.as_slice(), Some(0))?;
    let data2 = noise(2 * items * ps, 10);
    fs.put("items2", &mut data2.as_slice(), None)?;
    let needle = "bluedbm-isp";
    let text = corpus(corpus_bytes, needle);
    fs.put("corpus", &mut text.as_slice(), Some(0))?;
    let edges = kronecker(scale, 16, 3, true)?;
    let adj = Adjacency::build(&edges, None, false)?;
    let start = (0..adj.vertices() as u32).find(|v| !adj.neighbours(*v).is_empty()).unwrap_or(0);
    put_graph(&mut fs, "graph", &adj, Some(1))?;

    let query = data[7 * ps..8 * ps].to_vec();
    let want = naive_nearest(&query, &data, 4);

    // Figs. 16-19: comparisons a second, one query against every item.
    progress("figs 16-19: nearest neighbours");
    let knn_missing = |name: &str,
                       placement: Placement,
                       threads: u32,
                       limits: IspLimits,
                       misses: Misses|
     -> Result<(f64, f64, super::apps::AppCost)> {
        let opts = NearestOptions { placement, k: 4, lsh: None, node: 0, threads, limits, misses };
        let r = nearest(&fs, name, &query, opts)?;
        if name == "items1" {
            check(r.nearest[0] == want, "the nearest items")?;
        }
        let n = r.compared as f64;
        Ok((n / r.cost.modeled_s * 1e-3, n / r.cost.wall_s.max(1e-9) * 1e-3, r.cost))
    };
    let knn = |name: &str, placement: Placement, threads: u32, limits: IspLimits| {
        knn_missing(name, placement, threads, limits, Misses::default())
    };
    let none = IspLimits::default();
    let throttled = IspLimits { engines: None, throttle_bw: Some(THROTTLE_BW) };
    let mut fig16 = Vec::new();
    let (isp1, m1, _) = knn("items1", Placement::Isp, 1, none)?;
    fig16.push(Row::new("Baseline (ISP), 1 node", "K/s", isp1).paper(paper::ISP_1).measured(m1).note(
        "flash bound: two cards of 1.2e9 B/s through one Hamming engine a card is 293K pages/s at most; \
         the paper's 313.92K pages/s (320K in its text) is 2.57e9 B/s, more than its cards' 2.4 GB/s read \
         as 10^9 (as this profile and Fig. 13 read it): it is 2.4 GiB/s",
    ));
    let (isp2, m2, _) = knn("items2", Placement::Isp, 1, none)?;
    fig16.push(
        Row::new("Baseline (ISP), 2 nodes", "K/s", isp2)
            .paper(paper::ISP_2)
            .measured(m2)
            .note("each node's engines on its own items, at once"),
    );
    let (isp_t, mt, _) = knn("items1", Placement::Isp, 1, throttled)?;
    fig16.push(
        Row::new("Baseline-T (ISP, flash throttled to 600 MB/s)", "K/s", isp_t)
            .paper(paper::ISP_1 / 4.0)
            .measured(mt)
            .note(
                "reads at most 600 MB/s: a quarter of the cards (the paper: throttled to a quarter, \
                   'the performance drops accordingly')",
            ),
    );
    let mut dram4 = 0.0;
    for (i, t) in THREADS.iter().enumerate() {
        let (v, m, c) = knn("items1", Placement::HostDram, *t, none)?;
        if *t == 4 {
            dram4 = v;
        }
        fig16.push(
            Row::new(format!("H-DRAM, {t} thread(s)"), "K/s", v).paper(paper::DRAM[i]).measured(m).note(
                format!(
                "bound: {}; the profile's Hamming costs 0.25 cycles a byte (64-bit XOR and popcount); the \
                     paper's software ran at 52.8K a thread, about 6 cycles a byte",
                c.bound
            ),
            ),
        );
    }
    // §7.1's first conclusion, checked as such: the in-store engines keep up with host DRAM for up to 4
    // threads.
    fig16
        .push(Row::new("Baseline (ISP) over H-DRAM, 4 threads", "x", isp1 / dram4).paper_at_least(1.0).note(
        "the paper: BlueDBM 'can keep up with DRAM-resident data for up to 4 threads'; here one host thread \
             outruns it (0.25 cycles a byte against the paper's software's 6)",
    ));

    // Fig. 17: DRAM with a share of the items on flash or on disk, run: a thread that misses waits for a
    // synchronous page read through the device, or for the one disk's head.
    let mut fig17 = Vec::new();
    const FLASH: &str =
        "a flash miss is a synchronous read of a local page through the device (tR, bus, PCIe \
                         and 1 us of request software: about 0.1 ms); the paper's were an M.2 SSD's";
    const DISK: &str = "a disk miss waits for the one 7200 rpm disk's head (12.7 ms); measured here without \
                        that wait: the disk is modeled, its bytes served from memory";
    let mut runs = vec![("DRAM + 10% flash", Misses { flash: 0.10, disk: 0.0 }, paper::FLASH_10, FLASH)];
    if profile.host.disk.is_some() {
        runs.push(("DRAM + 5% disk", Misses { flash: 0.0, disk: 0.05 }, paper::DISK_5, DISK));
    }
    for (label, misses, paper, why) in runs {
        for (i, t) in THREADS.iter().enumerate() {
            let (v, m, c) = knn_missing("items1", Placement::HostDram, *t, none, misses)?;
            fig17.push(
                Row::new(format!("{label}, {t} thread(s)"), "K/s", v)
                    .paper(paper[i])
                    .measured(m)
                    .note(format!("bound: {}; {why}", c.bound)),
            );
        }
    }

    // Fig. 18: host software over flash read as an off-the-shelf SSD is: every item a synchronous random
    // page read (H-RFlash), and the same items read in order, streamed (H-SFlash).
    let (hf, hf_m, hfc) = knn("items1", Placement::Host, 1, none)?;
    let mut fig18 = Vec::new();
    let mut rflash8 = 0.0;
    for t in THREADS {
        let (v, m, c) =
            knn_missing("items1", Placement::HostDram, t, none, Misses { flash: 1.0, disk: 0.0 })?;
        rflash8 = v;
        fig18.push(Row::new(format!("H-RFlash, {t} thread(s)"), "K/s", v).measured(m).note(format!(
            "bound: {}; every item a synchronous random read of a local page through the device, a thread \
             waiting on each (about 0.1 ms); the paper's SSD was an M.2 drive of 600 MB/s at 8 KB",
            c.bound
        )));
    }
    fig18.push(Row::new("H-SFlash (items read in order), 1 thread", "K/s", hf).measured(hf_m).note(format!(
        "bound: {}; the items streamed through the device in order, many reads in flight, as the paper's \
             'artificially arranged' sequential accesses",
        hfc.bound
    )));
    fig18.push(
        Row::new(
            format!("H-RFlash, {} threads, over Baseline-T", THREADS[THREADS.len() - 1]),
            "x",
            rflash8 / isp_t,
        )
        .note("the paper: 'poor as compared to even throttled BlueDBM' (no value given)"),
    );
    fig18.push(Row::new("H-SFlash over Baseline-T", "x", hf / isp_t).note(
        "the paper: sequential reads improved 'dramatically, sometimes matching throttled BlueDBM'; this \
         device streams at PCIe's 1.6 GB/s, where the paper's SSD gave 600 MB/s",
    ));

    // Fig. 19: the accelerator against host software on the same throttled flash.
    let hf_t = hf.min(THROTTLE_BW / ps as f64 * 1e-3);
    let fig19 = vec![
        Row::new("Baseline-T (ISP, throttled)", "K/s", isp_t).measured(mt),
        Row::new("H-F throttled, 1 thread", "K/s", hf_t).note(format!(
            "host software reading through the device ({:.0} K/s unthrottled, bound: {}), capped at 600 MB/s",
            hf, hfc.bound
        )),
        Row::new("Baseline-T over H-F throttled", "x", isp_t / hf_t).paper_at_least(paper::ACCEL_ADVANTAGE).note(
            "both read at the throttle's pace: the host's popcount keeps up with 600 MB/s on one thread, so the \
             software loses nothing; the paper's software (about 6 cycles a byte) did not",
        ),
        Row::new("Baseline over H-F (unthrottled)", "x", isp1 / hf).paper_at_least(paper::ACCEL_ADVANTAGE_UNTHROTTLED).note("the ISP reads both cards (2.4 GB/s); the host is held to PCIe's 1.6 GB/s"),
    ];

    // Fig. 20: dependent page reads, a walk by node 0 over a graph on node 1 (every access remote).
    progress("fig 20: graph traversal");
    let steps = if quick { 64 } else { 400 };
    let spec = WalkSpec { from: start, walks: 1, length: steps, seed: 1 };
    let run = |placement, flash_share| walk(&fs, "graph", spec, Reader { origin: 0, placement, flash_share });
    let rh_sw = 2.0 * profile.host.storage.request_cycles / profile.host.cpu.clock_hz * 1e6;
    let runs = [
        (run(Placement::Isp, 0.0)?, "a walk by node 0's ISP: each step one remote page over the network (ISP-F)".to_string()),
        (
            run(Placement::Host, 0.0)?,
            "the same walk by node 0's host: its PCIe and 1 us of request software added (the paper's Fig. 12: 25 us \
             of host software)"
                .into(),
        ),
        (run(Placement::RemoteHost, 0.0)?, format!(
            "node 0's host asks node 1's, which reads the page through its device and sends it back: two more PCIe \
             crossings and {rh_sw:.0} us of both hosts' request software (the paper's Fig. 12: 269 us, of which \
             198 us the remote host's software and flash)"
        )),
        (run(Placement::HostDram, 0.5)?, "node 1's host sends the page from its memory, or, for half the accesses, \
             reads it from its flash first".into()),
        (run(Placement::HostDram, 0.3)?, "the same with 30% of accesses to flash".into()),
        (run(Placement::HostDram, 0.0)?, "node 1's host sends every page from its memory (H-D; the paper's Fig. 12: \
             58 us, 16 us of it host software)".into()),
    ];
    for (w, _) in &runs[1..] {
        check(w.walks == runs[0].0.walks, "the walk")?;
    }
    let fig20_vals = runs.map(|(w, note)| {
        (w.steps as f64 / w.cost.modeled_s, Some(w.steps as f64 / w.cost.read.wall_s.max(1e-9)), note)
    });
    let mut fig20: Vec<Row> = paper::TRAVERSAL
        .iter()
        .zip(fig20_vals)
        .map(|((label, p), (v, m, note))| {
            Row::new(*label, "accesses/s", v).paper(*p).measured_opt(m).note(note)
        })
        .collect();
    // §7.2's conclusions, checked as such: ISP-F "almost a factor of 3" over the generic distributed SSD
    // (H-RH-F), and "still much higher" than half the accesses served from DRAM.
    let (isp_f, rh_f, dram50) = (fig20[0].modeled, fig20[2].modeled, fig20[3].modeled);
    fig20.push(
        Row::new("ISP-F over H-RH-F", "x", isp_f / rh_f)
            .paper(paper::TRAVERSAL[0].1 / paper::TRAVERSAL[2].1)
            .note("the paper: 'almost a factor of 3'; here the remote host's software is 1 us a request (its Fig. 12: 198 us with its flash)"),
    );
    fig20.push(
        Row::new("ISP-F over DRAM + 50% F", "x", isp_f / dram50)
            .paper_at_least(1.0)
            .note("the paper: 'still much higher'; here a DRAM access costs the remote host 1 us of software, so half from DRAM beats the ISP"),
    );

    // Fig. 21: string search on one card with 8, 16 and 32 engines, on both cards, and by host software.
    progress("fig 21: string search");
    let mut fig21 = Vec::new();
    let mut counts = Vec::new();
    // The corpus lies on node 0, dealt evenly over its two cards, which have their own buses, tags and
    // engines: one card's rate is the node's halved.
    let cards = profile.nand.interface.as_ref().map_or(1, |r| r.cards) as f64;
    let buses = profile.nand.channels as f64 / cards;
    for (i, per_bus) in [1u32, 2, 4].iter().enumerate() {
        let limits = IspLimits { engines: Some(*per_bus), throttle_bw: None };
        let opts = SearchOptions { placement: Placement::Isp, offsets: false, node: 0, threads: 1, limits };
        let r = search(&fs, "corpus", needle.as_bytes(), opts)?;
        counts.push(r.count);
        let mbs = r.cost.bytes as f64 / r.cost.modeled_s * 1e-6 / cards;
        fig21.push(
            Row::new(format!("ISP, one card, {} engines", *per_bus as f64 * buses), "MB/s", mbs)
                .paper(paper::SEARCH[i])
                .measured(r.cost.bytes as f64 / r.cost.wall_s.max(1e-9) * 1e-6 / cards)
                .note(
                    "each engine keeps one read in flight (tR, then the page on its bus) while it searches the \
                     page before; the node's two cards searched at once, halved",
                ),
        );
    }
    let all = |placement: Placement| -> Result<super::search::SearchResult> {
        let opts =
            SearchOptions { placement, offsets: false, node: 0, threads: 1, limits: IspLimits::default() };
        search(&fs, "corpus", needle.as_bytes(), opts)
    };
    let (isp, host) = (all(Placement::Isp)?, all(Placement::Host)?);
    check(isp.count == host.count && isp.lines == host.lines, "the string search")?;
    check(counts.iter().all(|c| *c == counts[0]), "the string search on one card")?;
    fig21.push(
        Row::new("ISP, two cards, 64 engines", "MB/s", isp.cost.bytes as f64 / isp.cost.modeled_s * 1e-6)
            .measured(isp.cost.bytes as f64 / isp.cost.wall_s.max(1e-9) * 1e-6)
            .note("both cards of the node"),
    );
    fig21.push(
        Row::new(
            "host software (H-F), 1 thread",
            "MB/s",
            host.cost.bytes as f64 / host.cost.modeled_s * 1e-6,
        )
        .measured(host.cost.bytes as f64 / host.cost.wall_s.max(1e-9) * 1e-6)
        .note(format!("bound: {}", host.cost.bound)),
    );
    fig21.push(
        Row::new("host CPU busy, ISP search", "%", 100.0 * isp.cost.modeled_host_cpu_s / isp.cost.modeled_s)
            .measured(100.0 * isp.cost.host_cpu_s / isp.cost.wall_s.max(1e-9))
            .note(
            "the host only sends page addresses and takes match positions (work the model leaves unpriced): \
                 the paper's 'almost no CPU'; measured: this process's CPU less the emulated devices', over \
                 the wall time",
        ),
    );
    fig21.push(
        Row::new(
            "host CPU busy, software search",
            "%",
            100.0 * host.cost.modeled_host_cpu_s / host.cost.modeled_s,
        )
        .paper(paper::GREP_SSD_CPU)
        .measured(100.0 * host.cost.host_cpu_s / host.cost.wall_s.max(1e-9))
        .note(
            "a core's share while the search waits on flash: the profile's 0.25 cycles a byte (memchr's \
                 SIMD) and its storage stack's 1 us a page; the paper's is grep on an SSD behind the kernel's I/O \
                 stack",
        ),
    );
    Ok(Figures {
        profile: profile.name.clone(),
        items: items as u64,
        corpus_bytes: corpus_bytes as u64,
        graph_vertices: adj.vertices(),
        fig16,
        fig17,
        fig18,
        fig19,
        fig20,
        fig21,
    })
}

/// Bars of `rows` by label: the paper's, the modeled and the measured values.
fn bars(rows: &[&Row], x: &str, y: &str, log: bool) -> Plot {
    let pick = |f: &dyn Fn(&Row) -> Option<f64>| -> Vec<[f64; 2]> {
        rows.iter().enumerate().filter_map(|(i, r)| f(r).map(|v| [i as f64, v])).collect()
    };
    Plot::bars(x, y, rows.iter().map(|r| r.label.clone()).collect(), log)
        .with(Series::new("paper", Source::Paper, pick(&|r| r.paper)))
        .with(Series::new("modeled", Source::Modeled, pick(&|r| Some(r.modeled))))
        .with(Series::new("measured here", Source::Measured, pick(&|r| r.measured)))
}

/// The figures as text, beside the paper.
pub fn render(f: &Figures) -> String {
    let mut out = format!(
        "BlueDBM (ISCA '15 §7) on profile {}: {} items of a page, a corpus of {} bytes, a Graph500 graph of {} \
         vertices on a two-node appliance; modeled = simulated on the profile, measured = this machine\n",
        f.profile, f.items, f.corpus_bytes, f.graph_vertices
    );
    out += &super::rows_text(&[
        ("fig16", "nearest neighbour: ISP vs DRAM", &f.fig16),
        ("fig17", "nearest neighbour: mostly DRAM", &f.fig17),
        ("fig18", "nearest neighbour: off-the-shelf SSD", &f.fig18),
        ("fig19", "nearest neighbour: accelerator vs software", &f.fig19),
        ("fig20", "graph traversal by path", &f.fig20),
        ("fig21", "string search", &f.fig21),
    ]);
    out
}

/// The rows of a figure in `unit` (its plot's; ratio rows stay in the table).
fn of_unit<'a>(rows: &'a [Row], unit: &str) -> Vec<&'a Row> {
    rows.iter().filter(|r| r.unit == unit).collect()
}

/// Figs. 16-21 as figures.
pub fn figures(f: &Figures) -> PaperFigures {
    let fig16 = bars(&of_unit(&f.fig16, "K/s"), "configuration", "Hamming comparisons a second (K)", true);
    let line = |prefix: &str, pick: &dyn Fn(&Row) -> Option<f64>| -> Vec<[f64; 2]> {
        f.fig17
            .iter()
            .filter(|r| r.label.starts_with(prefix))
            .zip(THREADS)
            .filter_map(|(r, t)| pick(r).map(|v| [t as f64, v]))
            .collect()
    };
    let mut fig17 = Plot::lines("host threads", "Hamming comparisons a second (K)", true, true);
    for prefix in ["DRAM + 10% flash", "DRAM + 5% disk"] {
        fig17 = fig17
            .with(Series::new(format!("{prefix} (paper)"), Source::Paper, line(prefix, &|r| r.paper)))
            .with(Series::new(
                format!("{prefix} (modeled)"),
                Source::Modeled,
                line(prefix, &|r| Some(r.modeled)),
            ));
    }
    let fig18 = bars(&of_unit(&f.fig18, "K/s"), "configuration", "Hamming comparisons a second (K)", false);
    let fig19 = bars(&of_unit(&f.fig19, "K/s"), "configuration", "Hamming comparisons a second (K)", false);
    let fig20 = bars(&of_unit(&f.fig20, "accesses/s"), "access path", "dependent accesses a second", false);
    let fig21 = bars(&of_unit(&f.fig21, "MB/s"), "configuration", "search bandwidth (MB/s)", true);
    PaperFigures {
        paper: "bluedbm-apps".into(),
        cites: "BlueDBM (ISCA '15)".into(),
        setup: format!(
            "profile `{}`; a two-node appliance in the work folder: {} items of 8 KiB a node, a {}-byte text \
             corpus, a Graph500 graph of {} vertices; modeled = the profile's flash, engines, network, PCIe and \
             host simulated; measured = this machine running the same jobs; paper = §7's text, and for \
             Figs. 16, 17, 20 and 21 the values of the authors' plot data (a draft of November 2014 in their \
             repository, `notes/bluedbm.md`), which the published text rounds (Fig. 16's 313.92K is its 320K)",
            f.profile, f.items, f.corpus_bytes, f.graph_vertices
        ),
        figures: vec![
            Figure::new("fig16", "Nearest neighbour: in-store vs host DRAM by threads (§7.1)", f.fig16.clone(), Some(fig16)),
            Figure::new("fig17", "Nearest neighbour: DRAM with 10% flash or 5% disk (§7.1)", f.fig17.clone(), Some(fig17)),
            Figure::new("fig18", "Nearest neighbour: host software over flash read as an off-the-shelf SSD (§7.1)", f.fig18.clone(), Some(fig18)),
            Figure::new("fig19", "Nearest neighbour: accelerator vs software on throttled flash (§7.1)", f.fig19.clone(), Some(fig19)),
            Figure::new("fig20", "Graph traversal by access path (§7.2)", f.fig20.clone(), Some(fig20)),
            Figure::new("fig21", "String search bandwidth and host CPU (§7.3)", f.fig21.clone(), Some(fig21)),
        ],
        detail: render(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures follow from the profile: the same modeled values on every run, the ISP's rates set by
    /// its flash, and the paths of Fig. 20 in the paper's order.
    #[test]
    fn figs_16_to_21_are_deterministic_and_follow_the_profile() {
        let p = Profile::load("bluedbm").unwrap();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let x = run(&p, a.path(), true, &|_| {}).unwrap();
        let y = run(&p, b.path(), true, &|_| {}).unwrap();
        let modeled = |f: &Figures| {
            [&f.fig16, &f.fig17, &f.fig18, &f.fig19, &f.fig20, &f.fig21]
                .iter()
                .flat_map(|rows| rows.iter().map(|r| r.modeled))
                .collect::<Vec<_>>()
        };
        assert_eq!(modeled(&x), modeled(&y));
        let get = |rows: &[Row], label: &str| rows.iter().find(|r| r.label == label).unwrap().modeled;
        // Two nodes compare twice as fast as one; throttled flash (600 MB/s of 2.4 GB/s) about a quarter.
        let one = get(&x.fig16, "Baseline (ISP), 1 node");
        assert!((get(&x.fig16, "Baseline (ISP), 2 nodes") / one - 2.0).abs() < 0.1, "{:?}", x.fig16);
        let t = get(&x.fig16, "Baseline-T (ISP, flash throttled to 600 MB/s)");
        assert!((t / (600e6 / 8192.0 * 1e-3) - 1.0).abs() < 0.05, "{t}");
        // The ISP's rate is its cards' bandwidth in pages, within the pipeline's fill and drain.
        let cards = 2.4e9 / 8192.0 * 1e-3;
        assert!(one < cards && one > 0.8 * cards, "{one} vs {cards}");
        // Fig. 18: random synchronous reads scale with threads, and stay below the in-order stream.
        let r: Vec<f64> = x.fig18.iter().take(4).map(|r| r.modeled).collect();
        let seq = get(&x.fig18, "H-SFlash (items read in order), 1 thread");
        assert!(r.windows(2).all(|w| w[0] < w[1]) && r[3] < seq, "{r:?} {seq}");
        // Its ratios to Baseline-T are those of its rows (8 threads' random reads, and the stream).
        let base_t = get(&x.fig16, "Baseline-T (ISP, flash throttled to 600 MB/s)");
        let ratio8 = get(&x.fig18, "H-RFlash, 8 threads, over Baseline-T");
        assert!((ratio8 - r[3] / base_t).abs() < 1e-9, "{ratio8} vs {} / {base_t}", r[3]);
        assert!((get(&x.fig18, "H-SFlash over Baseline-T") - seq / base_t).abs() < 1e-9);
        // Fig. 21: more engines search faster, up to the card's bandwidth.
        let s: Vec<f64> = x.fig21.iter().take(3).map(|r| r.modeled).collect();
        assert!(s[0] < s[1] && s[1] < s[2] && s[2] <= 1200.0, "{s:?}");
        // Fig. 20: ISP-F faster than H-F, faster than H-RH-F; DRAM the fastest.
        let f20: Vec<f64> = x.fig20.iter().map(|r| r.modeled).collect();
        assert!(f20[0] > f20[1] && f20[1] > f20[2] && f20[5] > f20[0], "{f20:?}");
        assert!(f20[2] < f20[3] && f20[3] < f20[4] && f20[4] < f20[5], "{f20:?}");
    }
}
