//! `insitu repro psacs`: PSACS's experiments (§V) on TPC-H tables made by `tpchgen-cli`, one SmartSSD as in
//! the paper. For each shuffle-heavy workload: the device shuffle, the host baselines (sort-based and
//! bucket-based) with 1 to 32 threads, host CPU time, and the compression of column-major vs row-major
//! partitions with LZ4; measured here and modeled on the profile.
//!
//! Workloads (the shuffle keys of the TPC-H queries the paper names, as Spark plans them): Q05 lineitem on
//! `l_orderkey`, Q11 partsupp on `ps_partkey`, Q03 orders on `o_orderkey`, Q10 customer on `c_custkey`.

use std::path::Path;

use insitu_device::Profile;
use insitu_kernels::partition::PartitionHash;
use insitu_kernels::shuffle::ChunkLayout;
use serde::Serialize;

use crate::array::{Array, OpenOptions};
use crate::error::{HostError, Result};
use crate::psacs::options::{ShuffleOptions, ShufflePlacement};
use crate::psacs::shuffle::shuffle_table;
use crate::report::Report;
use crate::table::import::{put_table, PutTable};
use crate::table::info::Partitioning;

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
    pub column_stored: u64,
    pub row_stored: u64,
    /// Fig. 9: the device kernel's speed over single-thread sort-based and bucket-based software kernels.
    pub kernel_speedup: [f64; 2],
}

/// The shuffle kernel's modeled seconds in a run (see [`Run::kernel_s`]).
fn kernel_s(r: &Report, profile: &Profile) -> f64 {
    let kernel = |stages: &std::collections::BTreeMap<String, f64>| -> f64 {
        stages.iter().filter(|(k, _)| k.as_str() != insitu_device::work::ENCODE_BYTES).map(|(_, s)| s).sum()
    };
    r.phases
        .iter()
        .map(|ph| {
            let device: f64 = ph
                .devices
                .iter()
                .map(|c| kernel(&crate::model::device_busy(profile, c).compute_stages))
                .sum();
            let host = kernel(&profile.host.cpu.price(&ph.host.work).stages)
                / ph.host.threads.clamp(1, profile.host.cores) as f64;
            device + host
        })
        .sum()
}

fn run_of(r: &Report, profile: &Profile, placement: &str, threads: usize, bytes: u64) -> Run {
    let mb = bytes as f64 / 1e6;
    Run {
        placement: placement.into(),
        threads,
        wall_s: r.wall_s,
        host_cpu_s: r.host_cpu_s,
        modeled_s: r.modeled.time_s,
        mb_per_s: mb / r.wall_s.max(1e-9),
        modeled_mb_per_s: mb / r.modeled.time_s.max(1e-9),
        kernel_s: kernel_s(r, profile),
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
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| HostError::io(&dir, e))?;
        }
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
        let opts = |placement, threads, layout, out: String| ShuffleOptions {
            keys: vec![key.to_string()],
            partitions,
            placement,
            threads,
            hash: PartitionHash::ZigzagFold,
            layout,
            out: Some(out),
            memory_budget: None,
        };
        let mut runs = Vec::new();
        progress(&format!("{query}: device"));
        let dev = shuffle_table(
            &mut a,
            "t",
            &opts(ShufflePlacement::Device, 1, ChunkLayout::Column, "dev".into()),
        )?;
        let column_stored = dev.result["stored_bytes"].as_u64().unwrap_or(0);
        runs.push(run_of(&dev, profile, "device", 1, bytes));
        let row =
            shuffle_table(&mut a, "t", &opts(ShufflePlacement::Device, 1, ChunkLayout::Row, "row".into()))?;
        let row_stored = row.result["stored_bytes"].as_u64().unwrap_or(0);
        for &t in threads {
            for (placement, name) in
                [(ShufflePlacement::HostSort, "host-sort"), (ShufflePlacement::HostBucket, "host-bucket")]
            {
                progress(&format!("{query}: {name} x{t}"));
                let out = format!("{name}-{t}");
                let r = shuffle_table(&mut a, "t", &opts(placement, t, ChunkLayout::Column, out.clone()))?;
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
