//! `insitu repro psacs`: PSACS's experiments (§V) on TPC-H tables made by `tpchgen-cli`, one SmartSSD as in
//! the paper. For each shuffle-heavy workload: the device shuffle and the host baselines (sort-based and
//! bucket-based) with 1 to 32 threads, all without compression as the paper's PSACS (§V-F), host CPU time,
//! and the compression of the output row-major (Spark's UnsafeRow records) and column-major (Parquet), each
//! with LZ4 (Fig. 15, [`crate::psacs::formats`]); measured here and modeled on the profile.
//!
//! Workloads (the shuffle keys of the TPC-H queries the paper names, as Spark plans them): Q05 lineitem on
//! `l_orderkey`, Q11 partsupp on `ps_partkey`, Q03 orders on `o_orderkey`, Q10 customer on `c_custkey`.

use std::collections::BTreeMap;
use std::path::Path;

use insitu_device::Profile;
use insitu_kernels::partition::PartitionHash;
use insitu_kernels::shuffle::ChunkLayout;
use serde::Serialize;

use crate::array::{Array, OpenOptions};
use crate::error::{HostError, Result};
use crate::figure::{explain, fmt_value, Figure, PaperFigures, Plot, Row, Series, Source};
use crate::psacs::formats::{FormatMeter, FormatSizes};
use crate::psacs::options::{ShuffleOptions, ShufflePlacement};
use crate::psacs::read::read_partition;
use crate::psacs::shuffle::shuffle_table;
use crate::report::Report;
use crate::table::import::{put_table, PutTable};
use crate::table::info::Partitioning;
use insitu_kernels::shuffle::Codec;

/// The host of the paper's experiments (§V-A: a 44-core Skylake-SP server), which its repro models host
/// work on unless told otherwise.
pub const PAPER_HOST: &str = "skylake-sp-44";

/// (query, table file stem, shuffle key).
pub const WORKLOADS: &[(&str, &str, &str)] = &[
    ("Q05", "lineitem", "l_orderkey"),
    ("Q11", "partsupp", "ps_partkey"),
    ("Q03", "orders", "o_orderkey"),
    ("Q10", "customer", "c_custkey"),
];

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub placement: String,
    pub threads: usize,
    pub wall_s: f64,
    pub host_cpu_s: f64,
    pub modeled_s: f64,
    pub mb_per_s: f64,
    pub modeled_mb_per_s: f64,
    /// Modeled seconds of the shuffle kernel alone (Fig. 9: partition, sort, gather and merge, without
    /// reading the input, storing the output, or LZ4, which PSACS does not have): on the device's kernels,
    /// or on the host's cores over the threads used.
    pub kernel_s: f64,
    /// The kernel's modeled seconds by stage (the work item priced).
    pub kernel_stages: BTreeMap<String, f64>,
    /// Host cores kept busy on average (Fig. 13): modeled (host core-seconds over the modeled time) and
    /// measured (host CPU seconds over wall seconds).
    pub modeled_host_cores: f64,
    pub host_cores: f64,
    /// The modeled time in words: the bound that took most of it.
    pub explained: String,
    /// The modeled stages beside their counters.
    pub stages: Vec<crate::model::StageLine>,
}

/// One workload's results.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    pub query: String,
    pub table: String,
    pub key: String,
    pub rows: u64,
    pub bytes: u64,
    pub runs: Vec<Run>,
    /// insitu's own layouts, each chunk LZ4 compressed: bytes stored column-major and row-major.
    pub column_stored: u64,
    pub row_stored: u64,
    /// Fig. 15 as the paper measured it: the device's partitions as Spark's UnsafeRow records and as
    /// Parquet, each with LZ4.
    pub formats: FormatSizes,
    /// Fig. 9: the device kernel's speed over single-thread sort-based and bucket-based software kernels.
    pub kernel_speedup: [f64; 2],
}

/// The shuffle kernel's modeled seconds in a run by stage (see [`Run::kernel_s`]).
fn kernel_stages(r: &Report, profile: &Profile) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let mut add = |stages: &BTreeMap<String, f64>, div: f64| {
        for (k, s) in stages.iter().filter(|(k, _)| k.as_str() != insitu_device::work::ENCODE_BYTES) {
            *out.entry(k.clone()).or_insert(0.0) += s / div;
        }
    };
    for ph in &r.phases {
        for c in &ph.devices {
            add(&crate::model::device_busy(profile, c).compute_stages, 1.0);
        }
        add(
            &profile.host.cpu.price(&ph.host.work).stages,
            ph.host.threads.clamp(1, profile.host.cores) as f64,
        );
    }
    out
}

/// Host core-seconds the model keeps busy in a run: each phase's host time on the threads it ran on.
fn modeled_host_core_s(r: &Report, profile: &Profile) -> f64 {
    r.phases
        .iter()
        .zip(&r.modeled.phases)
        .filter(|(u, _)| !u.host.accelerator)
        .map(|(u, m)| m.host_s * u.host.threads.clamp(1, profile.host.cores) as f64)
        .sum()
}

fn run_of(r: &Report, profile: &Profile, placement: &str, threads: usize, bytes: u64) -> Run {
    let mb = bytes as f64 / 1e6;
    let stages = kernel_stages(r, profile);
    Run {
        placement: placement.into(),
        threads,
        wall_s: r.wall_s,
        host_cpu_s: r.host_cpu_s,
        modeled_s: r.modeled.time_s,
        mb_per_s: mb / r.wall_s.max(1e-9),
        modeled_mb_per_s: mb / r.modeled.time_s.max(1e-9),
        kernel_s: stages.values().sum(),
        kernel_stages: stages,
        modeled_host_cores: modeled_host_core_s(r, profile) / r.modeled.time_s.max(f64::MIN_POSITIVE),
        host_cores: r.host_cpu_s / r.wall_s.max(1e-9),
        explained: explain(&r.modeled),
        stages: crate::model::stage_lines(profile, &r.phases, &r.modeled),
    }
}

/// Runs the workloads found in `tpch` (files `TABLE.parquet`).
pub fn repro_psacs(
    tpch: &Path,
    work: &Path,
    partitions: u32,
    threads: &[usize],
    profile: &Profile,
    progress: &dyn Fn(&str),
) -> Result<Vec<Workload>> {
    // Every input is checked before any work starts.
    let missing: Vec<String> = WORKLOADS
        .iter()
        .map(|(_, table, _)| tpch.join(format!("{table}.parquet")))
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        return Err(HostError::InvalidArgument(format!(
            "missing {}: make the TPC-H tables with `pip install tpchgen-cli && tpchgen-cli parquet -s 1 \
             --tables=lineitem,partsupp,orders,customer --output-dir={}`",
            missing.join(", "),
            tpch.display()
        )));
    }
    let mut out = Vec::new();
    for (query, table, key) in WORKLOADS {
        let src = tpch.join(format!("{table}.parquet"));
        progress(&format!("{query} {table} on {key}: loading"));
        let dir = work.join(format!("psacs-{table}"));
        crate::array::clear_array_dir(&dir)?;
        Array::init(&dir, 1, profile.clone(), Some(4 << 30), None)?.close()?;
        let mut a = Array::open(&dir, OpenOptions::default())?;
        let loaded = put_table(
            &mut a,
            &src,
            &PutTable {
                name: "t".into(),
                key: Some(key.to_string()),
                partition: Partitioning::RoundRobin,
                dict: None,
            },
        )?;
        let rows = loaded.result["rows"].as_u64().unwrap_or(0);
        let bytes = loaded.bytes.host_to_device;
        let opts = |placement, threads, layout, codec, out: String| ShuffleOptions {
            keys: vec![key.to_string()],
            partitions,
            placement,
            threads,
            hash: PartitionHash::ZigzagFold,
            layout,
            codec,
            out: Some(out),
            memory_budget: None,
        };
        let mut runs = Vec::new();
        // Figs. 9-13: PSACS as evaluated, without compression (§V-F), and so the host baselines.
        progress(&format!("{query}: device"));
        let dev = shuffle_table(
            &mut a,
            "t",
            &opts(ShufflePlacement::Device, 1, ChunkLayout::Column, Codec::None, "dev".into()),
        )?;
        runs.push(run_of(&dev, profile, "device", 1, bytes));
        progress(&format!("{query}: partitions as UnsafeRow and Parquet"));
        let mut meter = FormatMeter::new();
        for p in 0..partitions {
            meter.add(&read_partition(&a, "dev", p)?)?;
        }
        let formats = meter.finish()?;
        // Fig. 15: the same output column-major and row-major, each chunk LZ4 compressed.
        progress(&format!("{query}: LZ4, column-major and row-major"));
        let stored = |a: &mut Array, layout, out: &str| -> Result<u64> {
            let r =
                shuffle_table(a, "t", &opts(ShufflePlacement::Device, 1, layout, Codec::Lz4, out.into()))?;
            Ok(r.result["stored_bytes"].as_u64().unwrap_or(0))
        };
        let column_stored = stored(&mut a, ChunkLayout::Column, "column-lz4")?;
        let row_stored = stored(&mut a, ChunkLayout::Row, "row-lz4")?;
        for &t in threads {
            for (placement, name) in
                [(ShufflePlacement::HostSort, "host-sort"), (ShufflePlacement::HostBucket, "host-bucket")]
            {
                progress(&format!("{query}: {name} x{t}"));
                let out = format!("{name}-{t}");
                let r = shuffle_table(
                    &mut a,
                    "t",
                    &opts(placement, t, ChunkLayout::Column, Codec::None, out.clone()),
                )?;
                runs.push(run_of(&r, profile, name, t, bytes));
                crate::blob::rm(&mut a, &out)?;
            }
        }
        a.close()?;
        std::fs::remove_dir_all(&dir).map_err(|e| HostError::io(&dir, e))?;
        let one = |p: &str| {
            runs.iter().find(|r| r.placement == p && r.threads == 1).map_or(f64::NAN, |r| r.kernel_s)
        };
        let kernel_speedup = [one("host-sort") / runs[0].kernel_s, one("host-bucket") / runs[0].kernel_s];
        out.push(Workload {
            kernel_speedup,
            query: query.to_string(),
            table: table.to_string(),
            key: key.to_string(),
            rows,
            bytes,
            runs,
            column_stored,
            row_stored,
            formats,
        });
    }
    Ok(out)
}

/// The results as Markdown.
pub fn render(ws: &[Workload], partitions: u32, profile: &str) -> String {
    let mut s = format!("PSACS on `{profile}` (1 device), {partitions} partitions, zigzag-fold hash\n\n");
    s.push_str("| workload | rows | MB | device MB/s (measured / modeled) | best host-sort MB/s (threads) | best host-bucket MB/s (threads) | device vs best host (measured / modeled) | host CPU s: device / host-sort x1 | column vs row LZ4 |\n");
    s.push_str("|---|---:|---:|---|---|---|---|---|---:|\n");
    for w in ws {
        let dev = &w.runs[0];
        let best = |p: &str, modeled: bool| {
            w.runs
                .iter()
                .filter(|r| r.placement == p)
                .max_by(|a, b| {
                    let (x, y) = if modeled {
                        (a.modeled_mb_per_s, b.modeled_mb_per_s)
                    } else {
                        (a.mb_per_s, b.mb_per_s)
                    };
                    x.total_cmp(&y)
                })
                .cloned()
        };
        let (bs, bb) = (best("host-sort", false), best("host-bucket", false));
        let (ms, mb) = (best("host-sort", true), best("host-bucket", true));
        let best_host = bs.iter().chain(bb.iter()).map(|r| r.mb_per_s).fold(0.0, f64::max);
        let best_host_m = ms.iter().chain(mb.iter()).map(|r| r.modeled_mb_per_s).fold(0.0, f64::max);
        let sort1 = w.runs.iter().find(|r| r.placement == "host-sort" && r.threads == 1);
        s.push_str(&format!(
            "| {} {} on {} | {} | {:.0} | {:.0} / {:.0} | {} | {} | {:.2}x / {:.2}x | {:.3} / {} | {:.2}x |\n",
            w.query,
            w.table,
            w.key,
            w.rows,
            w.bytes as f64 / 1e6,
            dev.mb_per_s,
            dev.modeled_mb_per_s,
            bs.as_ref().map_or("-".into(), |r| format!("{:.0} (x{})", r.mb_per_s, r.threads)),
            bb.as_ref().map_or("-".into(), |r| format!("{:.0} (x{})", r.mb_per_s, r.threads)),
            dev.mb_per_s / best_host.max(1e-9),
            dev.modeled_mb_per_s / best_host_m.max(1e-9),
            dev.host_cpu_s,
            sort1.map_or("-".into(), |r| format!("{:.3}", r.host_cpu_s)),
            w.row_stored as f64 / w.column_stored.max(1) as f64,
        ));
    }
    s.push_str(
        "\nFig. 9, the shuffle kernel alone (modeled: partition, sort, gather, merge; no input, output or LZ4):\n\n\
         | workload | device kernel ms | host-sort x1 kernel ms | host-bucket x1 kernel ms | speed-up vs sort / bucket |\n\
         |---|---:|---:|---:|---|\n",
    );
    for w in ws {
        let k = |p: &str| {
            w.runs
                .iter()
                .find(|r| r.placement == p && r.threads == 1)
                .map_or("-".into(), |r| format!("{:.1}", r.kernel_s * 1e3))
        };
        s.push_str(&format!(
            "| {} {} | {:.1} | {} | {} | {:.2}x / {:.2}x |\n",
            w.query,
            w.table,
            w.runs[0].kernel_s * 1e3,
            k("host-sort"),
            k("host-bucket"),
            w.kernel_speedup[0],
            w.kernel_speedup[1]
        ));
    }
    if let Some(w) = ws.first() {
        s.push_str(&format!("\nThread scaling on {} {} (MB/s, measured / modeled):\n\n| threads | host-sort | host-bucket |\n|---:|---|---|\n", w.query, w.table));
        let mut ts: Vec<usize> =
            w.runs.iter().filter(|r| r.placement != "device").map(|r| r.threads).collect();
        ts.dedup();
        for t in ts {
            let f = |p: &str| {
                w.runs
                    .iter()
                    .find(|r| r.placement == p && r.threads == t)
                    .map_or("-".into(), |r| format!("{:.0} / {:.0}", r.mb_per_s, r.modeled_mb_per_s))
            };
            s.push_str(&format!("| {t} | {} | {} |\n", f("host-sort"), f("host-bucket")));
        }
        s.push_str(&format!(
            "| device | {:.0} / {:.0} | |\n",
            w.runs[0].mb_per_s, w.runs[0].modeled_mb_per_s
        ));
    }
    s.push_str("\npaper: kernel 4.6x-5.7x over single-thread software, 10%-31% faster than up to 32 threads overall, over 20x less host CPU, column-major LZ4 1.5x better than row-major\n");
    s
}

/// The paper's values (§V-C, §V-D, Figs. 9, 12, 13, 15).
mod paper {
    /// Fig. 9: the kernel over single-thread software, over the workloads.
    pub const KERNEL: (f64, f64) = (4.6, 5.7);
    /// Fig. 12: overall, over software with up to 32 threads: "10% - 31%".
    pub const OVERALL: (f64, f64) = (1.10, 1.31);
    /// Fig. 13: "more than 20 times lower CPU core utilization" (software at 16 threads, footnote 1).
    pub const HOST_CORES: f64 = 20.0;
    pub const HOST_CORES_THREADS: usize = 16;
    /// Fig. 14: end-to-end TPC-H query latency, "averaging at 23%" faster.
    pub const END_TO_END: f64 = 23.0;
    /// Fig. 1 (§I): "Shuffle tasks can take up to 40 percent CPU time of the entire query execution".
    pub const SHUFFLE_SHARE: f64 = 0.40;
    /// Fig. 15: column-major LZ4 "on average 1.5x better" than row-major.
    pub const COLUMN_VS_ROW: f64 = 1.5;
}

/// The largest stage of a breakdown and its share: `shuffle.sort.b32.n20.keys 41%`.
fn top_stage(stages: &BTreeMap<String, f64>) -> String {
    let total: f64 = stages.values().sum();
    stages
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or("no work".into(), |(k, v)| format!("{k} {:.0}%", 100.0 * v / total.max(f64::MIN_POSITIVE)))
}

/// The device Merger's share of a kernel's stages, when it had partitions to concatenate (across tiles
/// of the scratchpad, §IV-B, Fig. 8, or batches on flash): `, the Merger 12%`.
fn merger_share(stages: &BTreeMap<String, f64>) -> String {
    let total: f64 = stages.values().sum();
    match stages.get(insitu_device::work::SHUFFLE_MERGE_BYTES) {
        Some(m) if total > 0.0 => format!(", the Merger {:.0}%", 100.0 * m / total),
        _ => String::new(),
    }
}

/// Figs. 9-13 and 15 as figures.
pub fn figures(ws: &[Workload], partitions: u32, profile: &Profile) -> PaperFigures {
    let find =
        |w: &Workload, p: &str, t: usize| w.runs.iter().find(|r| r.placement == p && r.threads == t).cloned();
    let cats: Vec<String> = ws.iter().map(|w| format!("{} {}", w.query, w.table)).collect();
    let mut figures = Vec::new();

    // Fig. 9: the kernel alone, one thread.
    let mut rows = Vec::new();
    for w in ws {
        let dev = &w.runs[0];
        for (i, base) in ["host-sort", "host-bucket"].iter().enumerate() {
            let Some(b) = find(w, base, 1) else { continue };
            rows.push(
                Row::new(format!("{} {}: kernel vs {base} x1", w.query, w.table), "x", w.kernel_speedup[i])
                    .paper_range(paper::KERNEL.0, paper::KERNEL.1)
                    .note(format!(
                        "device kernel {} s, largest stage {}{}; {base} x1 {} s, largest stage {}",
                        fmt_value(dev.kernel_s),
                        top_stage(&dev.kernel_stages),
                        merger_share(&dev.kernel_stages),
                        fmt_value(b.kernel_s),
                        top_stage(&b.kernel_stages)
                    )),
            );
        }
    }
    let bars = |f: &dyn Fn(&Workload) -> f64| -> Vec<[f64; 2]> {
        ws.iter().enumerate().map(|(i, w)| [i as f64, f(w)]).collect()
    };
    let plot = Plot::bars("workload", "kernel speed-up over single-thread software (x)", cats.clone(), false)
        .with(Series::new("vs host-sort x1, modeled", Source::Modeled, bars(&|w| w.kernel_speedup[0])))
        .with(Series::new("vs host-bucket x1, modeled", Source::Modeled, bars(&|w| w.kernel_speedup[1])))
        .with(Series::new(
            "paper (4.6-5.7, middle)",
            Source::Paper,
            bars(&|_| (paper::KERNEL.0 * paper::KERNEL.1).sqrt()),
        ));
    figures.push(Figure::new(
        "fig9",
        "Shuffle kernel performance, single thread, no I/O (§V-C)",
        rows,
        Some(plot),
    ));

    // Figs. 10 and 11: thread scaling on Q05 lineitem and Q11 partsupp.
    for (id, query) in [("fig10", "Q05"), ("fig11", "Q11")] {
        let Some(w) = ws.iter().find(|w| w.query == query) else { continue };
        let mut threads: Vec<usize> =
            w.runs.iter().filter(|r| r.placement != "device").map(|r| r.threads).collect();
        threads.dedup();
        let mut rows = Vec::new();
        let mut plot = Plot::lines("threads", "shuffle throughput (MB/s)", true, false);
        for p in ["host-sort", "host-bucket", "device"] {
            let runs: Vec<Run> = if p == "device" {
                threads.iter().map(|_| w.runs[0].clone()).collect()
            } else {
                threads.iter().filter_map(|&t| find(w, p, t)).collect()
            };
            for (r, t) in runs.iter().zip(&threads) {
                if p != "device" || *t == threads[0] {
                    let label =
                        if p == "device" { "device (one kernel)".to_string() } else { format!("{p} x{t}") };
                    rows.push(
                        Row::new(label, "MB/s", r.modeled_mb_per_s)
                            .measured(r.mb_per_s)
                            .note(r.explained.clone()),
                    );
                }
            }
            let pts = |f: &dyn Fn(&Run) -> f64| {
                runs.iter().zip(&threads).map(|(r, t)| [*t as f64, f(r)]).collect::<Vec<_>>()
            };
            plot = plot
                .with(Series::new(format!("{p}, modeled"), Source::Modeled, pts(&|r| r.modeled_mb_per_s)))
                .with(Series::new(format!("{p}, measured"), Source::Measured, pts(&|r| r.mb_per_s)));
        }
        let title = format!("Multithreading scaling of shuffle throughput on {} {} (§V-D)", w.query, w.table);
        figures.push(Figure::new(id, title, rows, Some(plot)));
    }

    // Fig. 12: overall, the device against the best host run of up to 32 threads.
    let best = |w: &Workload, modeled: bool| -> Option<Run> {
        w.runs
            .iter()
            .filter(|r| r.placement != "device" && r.threads <= 32)
            .max_by(|a, b| {
                if modeled {
                    a.modeled_mb_per_s.total_cmp(&b.modeled_mb_per_s)
                } else {
                    a.mb_per_s.total_cmp(&b.mb_per_s)
                }
            })
            .cloned()
    };
    let overall = |w: &Workload, modeled: bool| -> f64 {
        let dev = &w.runs[0];
        match best(w, modeled) {
            Some(b) if modeled => dev.modeled_mb_per_s / b.modeled_mb_per_s,
            Some(b) => dev.mb_per_s / b.mb_per_s,
            None => f64::NAN,
        }
    };
    let mut rows = Vec::new();
    for w in ws {
        let Some(b) = best(w, true) else { continue };
        rows.push(
            Row::new(format!("{} {}: device vs best host", w.query, w.table), "x", overall(w, true))
                .paper_range(paper::OVERALL.0, paper::OVERALL.1)
                .measured(overall(w, false))
                .note(format!(
                    "device {}; best host ({} x{}) {}",
                    w.runs[0].explained, b.placement, b.threads, b.explained
                )),
        );
    }
    let plot = Plot::bars(
        "workload",
        "overall shuffle speed-up over the best software run (x)",
        cats.clone(),
        false,
    )
    .with(Series::new("modeled", Source::Modeled, bars(&|w| overall(w, true))))
    .with(Series::new("measured here", Source::Measured, bars(&|w| overall(w, false))))
    .with(Series::new(
        "paper (1.10-1.31, middle)",
        Source::Paper,
        bars(&|_| (paper::OVERALL.0 * paper::OVERALL.1).sqrt()),
    ));
    figures.push(Figure::new(
        "fig12",
        "Overall shuffle performance, software with up to 32 threads (§V-D)",
        rows,
        Some(plot),
    ));

    // Fig. 13: host cores busy, software at 16 threads against the device.
    let t = paper::HOST_CORES_THREADS;
    let mut rows = Vec::new();
    for w in ws {
        let dev = &w.runs[0];
        for base in ["host-sort", "host-bucket"] {
            let Some(b) = find(w, base, t) else { continue };
            // Shown, not checked against the paper's bound: the model charges the device run only the host
            // CPU of its commands, while the paper's PSACS keeps up to 4 host threads preparing data and
            // storing results (§V-D), work insitu's device run does inside the device, so the modeled
            // ratio is far past any bound and says nothing about the paper's.
            let ratio = b.modeled_host_cores / dev.modeled_host_cores;
            rows.push(
                Row::new(format!("{} {}: host cores, {base} x{t} / device", w.query, w.table), "x", ratio)
                    .measured(b.host_cores / dev.host_cores.max(1e-9))
                    .note(format!(
                        "paper: more than {}x; not checked: the device run's modeled host work is only its \
                         commands (PSACS's up to 4 pipeline threads, §V-D, are not modeled); modeled host cores \
                         busy: {base} x{t} {}, device {}; the device run: {}",
                        paper::HOST_CORES,
                        fmt_value(b.modeled_host_cores),
                        fmt_value(dev.modeled_host_cores),
                        dev.explained
                    )),
            );
        }
    }
    let cores = |p: &'static str, modeled: bool| {
        move |w: &Workload| {
            let r = if p == "device" { Some(w.runs[0].clone()) } else { find(w, p, t) };
            r.map_or(f64::NAN, |r| if modeled { r.modeled_host_cores } else { r.host_cores })
        }
    };
    let plot = Plot::bars("workload", "host cores busy", cats.clone(), true)
        .with(Series::new(
            format!("host-sort x{t}, modeled"),
            Source::Modeled,
            bars(&cores("host-sort", true)),
        ))
        .with(Series::new(
            format!("host-bucket x{t}, modeled"),
            Source::Modeled,
            bars(&cores("host-bucket", true)),
        ))
        .with(Series::new("device, modeled", Source::Modeled, bars(&cores("device", true))))
        .with(Series::new(
            format!("host-sort x{t}, measured"),
            Source::Measured,
            bars(&cores("host-sort", false)),
        ))
        .with(Series::new(
            format!("host-bucket x{t}, measured"),
            Source::Measured,
            bars(&cores("host-bucket", false)),
        ))
        .with(Series::new("device, measured", Source::Measured, bars(&cores("device", false))));
    figures.push(
        Figure::new("fig13", "Host CPU core utilisation for shuffle (§V-D)", rows, Some(plot)).not_checked(
            "the paper's PSACS keeps up to 4 host threads preparing data and storing results (§V-D); the model \
             charges insitu's device run only the host CPU of its commands, so its ratio (far past 20x) says \
             nothing about the paper's",
        ),
    );

    // Fig. 14: end to end. The paper extrapolates from Spark's event traces of the whole queries (§V-E),
    // which insitu does not have: what the modeled shuffle speed-up alone gives a query whose shuffle
    // takes Fig. 1's largest share (Amdahl), an upper bound for shuffle acceleration alone.
    let speedups: Vec<f64> =
        ws.iter().map(|w| overall(w, true)).filter(|s| s.is_finite() && *s > 0.0).collect();
    if !speedups.is_empty() {
        let s = (speedups.iter().map(|x| x.ln()).sum::<f64>() / speedups.len() as f64).exp();
        let f = paper::SHUFFLE_SHARE;
        let end_to_end = 100.0 * (1.0 / ((1.0 - f) + f / s) - 1.0);
        // Not checked against the paper's 23%: a different quantity (theirs is extrapolated from Spark's
        // event traces and counts more than the shuffle's own speed-up).
        let rows = vec![Row::new("average query speed-up from the shuffle alone", "%", end_to_end).note(format!(
            "paper: {}% on average, not checked: extrapolated from Spark's event traces, it also counts map tasks \
             started early on the host cores the shuffle frees (§V-E), which insitu does not model; here Amdahl's \
             bound for a query whose shuffle takes Fig. 1's largest share ({:.0}%), sped up by the modeled \
             Fig. 12 speed-up ({s:.2}x, geometric mean)",
            paper::END_TO_END,
            100.0 * f
        ))];
        figures.push(Figure::new("fig14", "End-to-end TPC-H query latency (§V-E)", rows, None).not_checked(
            "the paper's 23% is extrapolated from Spark's event traces and counts tasks started early on freed \
             host cores; the row is Amdahl's bound for the shuffle's own speed-up",
        ));
    }

    // Fig. 15: column-major vs row-major output under LZ4, in the paper's formats (Spark's UnsafeRow rows,
    // Parquet columns) and in insitu's own chunks.
    let ratio = |w: &Workload| w.formats.unsafe_rows_lz4 as f64 / w.formats.parquet_lz4.max(1) as f64;
    let own = |w: &Workload| w.row_stored as f64 / w.column_stored.max(1) as f64;
    let mut rows = Vec::new();
    for w in ws {
        let f = &w.formats;
        rows.push(
            Row::new(format!("{} {}: Parquet vs UnsafeRow, LZ4", w.query, w.table), "x", ratio(w))
                .measured(ratio(w))
                .note(format!(
                    "{} bytes of UnsafeRow records ({:.2}x with LZ4) vs {} in Parquet ({:.2}x); {:.0} rows a \
                     partition, each a row group (Parquet's metadata a column chunk weighs on small ones)",
                    f.unsafe_rows,
                    f.unsafe_rows as f64 / f.unsafe_rows_lz4.max(1) as f64,
                    f.parquet_lz4,
                    f.unsafe_rows as f64 / f.parquet_lz4.max(1) as f64,
                    w.rows as f64 / partitions.max(1) as f64
                )),
        );
    }
    if !ws.is_empty() {
        let mean = ws.iter().map(ratio).sum::<f64>() / ws.len() as f64;
        rows.push(
            Row::new("average", "x", mean)
                .paper(paper::COLUMN_VS_ROW)
                .measured(mean)
                .note("the device's partitions as Spark's shuffle records (a length, then an UnsafeRow) through Spark's 32 KiB LZ4 blocks, a stream a partition, and as one Parquet file with a row group a partition (dictionary and RLE encodings, LZ4 pages)"),
        );
    }
    for w in ws {
        rows.push(
            Row::new(format!("{} {}: insitu's column vs row chunks, LZ4", w.query, w.table), "x", own(w))
                .measured(own(w))
                .note(format!(
                    "{} vs {} bytes stored: the table's fixed-width rows against plain column values",
                    w.row_stored, w.column_stored
                )),
        );
    }
    let plot = Plot::bars("workload", "LZ4 size, row-major over column-major (x)", cats, false)
        .with(Series::new("Parquet vs UnsafeRow", Source::Measured, bars(&ratio)))
        .with(Series::new("insitu's chunks", Source::Measured, bars(&own)))
        .with(Series::new("paper (average)", Source::Paper, bars(&|_| paper::COLUMN_VS_ROW)));
    figures.push(Figure::new(
        "fig15",
        "Compression ratio, row-major vs column-major (§V-F)",
        rows,
        Some(plot),
    ));

    let rows_in: u64 = ws.iter().map(|w| w.rows).sum();
    PaperFigures {
        paper: "psacs".into(),
        cites: "PSACS (ICCD '21)".into(),
        setup: format!(
            "profile `{}` (1 device), host `{}`; {partitions} partitions, zigzag-fold hash; {} TPC-H workload(s), \
             {rows_in} rows in all",
            profile.name,
            profile.host.name,
            ws.len()
        ),
        figures,
        detail: detail(ws, partitions, profile),
    }
}

/// The run's tables, and the first workload's device run and single-thread host runs stage by stage.
fn detail(ws: &[Workload], partitions: u32, profile: &Profile) -> String {
    let mut s = render(ws, partitions, &format!("{}, host {}", profile.name, profile.host.name));
    if let Some(w) = ws.first() {
        for r in w.runs.iter().filter(|r| r.threads == 1) {
            s.push_str(&format!(
                "\n{} {}, {} x{}: modeled stages and the counters they come from\n\n",
                w.query, w.table, r.placement, r.threads
            ));
            s.push_str(&crate::model::stage_table(&r.stages));
        }
    }
    s
}
