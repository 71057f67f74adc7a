//! `insitu repro nascent`: NASCENT's experiments. Figs. 8 and 9 (§4.2): the sort kernel against the CPU's
//! quicksort on 1K to 8M keys, with the data in DRAM (`data.fig8`'s `modeled_s`) and in storage (its
//! `storage_s`). Fig. 13 (§4.3): for 1 to 12 SmartSSDs, one 1024-row table of 4 KB rows (1024 4-byte
//! columns) per device, key column stored 16-bit dictionary-encoded, sorted in the devices, on the host CPU,
//! and on one accelerator beside the host; measured and modeled times and the modeled speed-ups next to the
//! paper's (7.6x over the FPGA baseline and 147x over the CPU at 12 devices). Fig. 14: TPC-C ORDER-LINE on
//! 12 devices.

use std::path::Path;

use insitu_device::Profile;
use serde::Serialize;

use insitu_kernels::keys::SortAlgo;

use crate::array::{Array, OpenOptions};
use crate::error::{HostError, Result};
use crate::figure::{explain, fmt_value, Figure, PaperFigures, Plot, Row, Series, Source};
use crate::model::StageLine;
use crate::nascent::data::synthetic;
use crate::nascent::sort::{sort_table, SortOptions, SortPlacement};
use crate::table::import::{put_table, PutTable};
use crate::table::info::Partitioning;

/// The paper's figures at 12 devices (§4.3, Fig. 13): speed-up and energy saving over the FPGA baseline
/// and over the CPU.
pub const PAPER_SPEEDUP_VS_ACCEL_AT_12: f64 = 7.6;
pub const PAPER_SPEEDUP_VS_CPU_AT_12: f64 = 147.2;
pub const PAPER_ENERGY_VS_ACCEL_AT_12: f64 = 5.6;
pub const PAPER_ENERGY_VS_CPU_AT_12: f64 = 131.4;

/// Fig. 8 (§4.2): the sort kernel against the CPU's quicksort, data in DRAM: 7.5x at 128K elements, 2.4x at
/// 256K, about 1.8x past 1M; energy 61.3x at 1K, about 13.6x past 1M.
pub const PAPER_FIG8_SPEEDUP: [(u64, f64); 5] =
    [(128 << 10, 7.5), (256 << 10, 2.4), (2 << 20, 1.8), (4 << 20, 1.8), (8 << 20, 1.8)];
pub const PAPER_FIG8_ENERGY: [(u64, f64); 4] =
    [(1 << 10, 61.3), (2 << 20, 13.6), (4 << 20, 13.6), (8 << 20, 13.6)];

/// Fig. 9 (§4.2): the same, data in storage: 6.6x at 1K, saturating at ~8.25x at 8M; energy (without the
/// SSD's) 49.7x to 61.6x.
pub const PAPER_FIG9_SPEEDUP: [(u64, f64); 2] = [(1 << 10, 6.6), (8 << 20, 8.25)];
pub const PAPER_FIG9_ENERGY: [(u64, f64); 2] = [(1 << 10, 49.7), (8 << 20, 61.6)];

/// One input size of Figs. 8 and 9.
#[derive(Debug, Clone, Serialize)]
pub struct KernelPoint {
    pub elements: u64,
    /// Modeled seconds and joules: NASCENT's sort kernel (the profile's `[kernels]`), the CPU's quicksort
    /// (the host's `[cpu]` engine).
    pub modeled_s: [f64; 2],
    pub modeled_j: [f64; 2],
    /// Fig. 9, data in storage: NASCENT loads the keys from its SSD into the FPGA's DRAM peer to peer, then
    /// sorts; the CPU reads them through the host's storage stack, then sorts. Modeled seconds and joules
    /// (the FPGA's and the CPU's, not the SSD's), and each side's time in words.
    pub storage_s: [f64; 2],
    pub storage_j: [f64; 2],
    pub storage_explained: [String; 2],
    /// Measured here: the bitonic network emulated in software, and a quicksort (`sort_unstable`) of the
    /// same keys, each reading the input and writing the sorted output (up to the size asked for).
    pub measured_s: Option<[f64; 2]>,
}

/// Fig. 8: sorts of 1K to 8M random 32-bit keys in memory, priced on the device's kernels and the host's
/// core from the same counted work, and run here up to `measure_up_to` keys.
pub fn repro_kernel(
    profile: &Profile,
    measure_up_to: u64,
    progress: &dyn Fn(&str),
) -> Result<Vec<KernelPoint>> {
    use insitu_device::work::{self, SortClass};
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(8);
    let mut out = Vec::new();
    for k in 10..=23u32 {
        let n = 1u64 << k;
        progress(&format!("fig8: {n} keys"));
        let mut ledger = work::Ledger::new();
        SortClass::count(&mut ledger, work::SORT, 32, n);
        let t = [profile.kernels.price(&ledger).seconds(), profile.host.cpu.price(&ledger).seconds()];
        let (storage_s, storage_j, storage_explained) = from_storage(profile, &ledger, n, t[0]);
        let point = KernelPoint {
            elements: n,
            modeled_s: t,
            modeled_j: [t[0] * profile.power.device_active_w, t[1] * profile.host.active_w],
            storage_s,
            storage_j,
            storage_explained,
            measured_s: None,
        };
        if n > measure_up_to {
            out.push(point);
            continue;
        }
        let keys: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let started = std::time::Instant::now();
        let sorted =
            insitu_kernels::sort::argsort_bitonic(&keys, 0, insitu_kernels::sort::BitonicConfig::default());
        let network_s = started.elapsed().as_secs_f64();
        let started = std::time::Instant::now();
        let mut copy = keys.clone();
        copy.sort_unstable();
        let quick_s = started.elapsed().as_secs_f64();
        // Both orders agree: the network's indices pick the keys in the quicksort's order.
        if sorted.len() != copy.len() || (0..copy.len()).any(|i| keys[sorted.row(i) as usize] != copy[i]) {
            return Err(HostError::Damaged {
                name: "fig8".into(),
                detail: format!("the two sorts of {n} keys disagree"),
            });
        }
        out.push(KernelPoint { measured_s: Some([network_s, quick_s]), ..point });
    }
    Ok(out)
}

/// Fig. 9's two sides for `n` 32-bit keys whose sort is counted in `ledger` (the kernel's alone takes
/// `kernel_s`): modeled seconds, joules without the SSD's, and each in words.
fn from_storage(
    profile: &Profile,
    ledger: &insitu_device::work::Ledger,
    n: u64,
    kernel_s: f64,
) -> ([f64; 2], [f64; 2], [String; 2]) {
    use crate::model::{model, HostWork, PhaseUsage};
    use insitu_device::DeviceCounters;
    let bytes = 4 * n;
    let load = DeviceCounters {
        flash_read_bytes: bytes,
        flash_to_device_mem: bytes,
        commands: 1,
        ..Default::default()
    };
    let phase = |name: &str, c: DeviceCounters, host: HostWork| PhaseUsage {
        name: name.into(),
        devices: vec![c],
        host,
    };
    // NASCENT: the SSD streams the keys into the FPGA's DRAM, then the kernel sorts them (Fig. 8's time).
    let dev = model(profile, &[phase("load", load.clone(), HostWork::default())]);
    // The CPU: the host reads the keys through its storage stack, then quicksorts them.
    let host_read = DeviceCounters { device_to_host: bytes, ..load };
    let cpu = model(
        profile,
        &[
            phase("read", host_read, HostWork::default()),
            phase("sort", DeviceCounters::default(), HostWork::counted(ledger.clone())),
        ],
    );
    let dev_s = dev.time_s + kernel_s;
    (
        [dev_s, cpu.time_s],
        [dev.device_energy_j + kernel_s * profile.power.device_active_w, cpu.host_energy_j],
        [
            format!(
                "NASCENT: load {} + sort {}",
                crate::figure::fmt_seconds(dev.time_s),
                crate::figure::fmt_seconds(kernel_s)
            ),
            format!("CPU: {}", explain(&cpu)),
        ],
    )
}

/// One line of the experiment.
#[derive(Debug, Clone, Serialize)]
pub struct ReproRow {
    pub devices: u32,
    pub measured_s: [f64; 3],
    pub modeled_s: [f64; 3],
    /// As the paper counts it (see [`SortRun::modeled_j`]); the whole system's in `system_energy_j`.
    pub modeled_energy_j: [f64; 3],
    pub system_energy_j: [f64; 3],
    pub speedup_vs_accel: f64,
    pub speedup_vs_cpu: f64,
    /// Each placement's modeled time in words: the bound that took most of it (see [`explain`]).
    pub explained: [String; 3],
    /// Each placement's modeled stages beside their counters.
    pub stages: [Vec<StageLine>; 3],
}

/// Runs the experiment for each device count in `counts`, under `work` (arrays are made and removed).
pub fn repro_nascent(
    work: &Path,
    counts: &[u32],
    profile: &Profile,
    algo: SortAlgo,
    progress: &dyn Fn(&str),
) -> Result<Vec<ReproRow>> {
    let mut rows = Vec::new();
    for &n in counts {
        progress(&format!("{n} device(s): generating and loading {n} x 1024 rows of 4 KB ..."));
        let table = work.join(format!("nascent-{n}.parquet"));
        std::fs::create_dir_all(work).map_err(|e| HostError::io(work, e))?;
        synthetic(&table, 1024 * n as u64, 1024, 65_536, n as u64)?;
        let runs = sort_runs(
            work,
            &table,
            n,
            ("c0", true),
            &[SortPlacement::Device, SortPlacement::Host, SortPlacement::HostAccel],
            algo,
            profile,
            &|m: &str| progress(&format!("{n} device(s): {m}")),
        )?;
        let (modeled, energy) = (runs.each_ref().map(|r| r.modeled_s), runs.each_ref().map(|r| r.modeled_j));
        rows.push(ReproRow {
            devices: n,
            measured_s: runs.each_ref().map(|r| r.measured_s),
            modeled_s: modeled,
            modeled_energy_j: energy,
            system_energy_j: runs.each_ref().map(|r| r.system_j),
            speedup_vs_accel: modeled[2] / modeled[0],
            speedup_vs_cpu: modeled[1] / modeled[0],
            stages: runs.each_ref().map(|r| r.stages.clone()),
            explained: runs.map(|r| r.explained),
        });
    }
    Ok(rows)
}

/// One sort of a repro: measured and modeled.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SortRun {
    pub measured_s: f64,
    pub modeled_s: f64,
    /// Energy as the paper counts it (§4.1): the power of the processor that sorts (the SmartSSDs' FPGAs
    /// with their DRAM, the CPU, or the FPGA card) over the run, without the SSDs' ("we use the same SSD
    /// for all the deployments") or the rest of the system's.
    pub modeled_j: f64,
    /// The whole system's modeled energy: every device's and the host's, busy or idle.
    pub system_j: f64,
    /// The modeled time in words (see [`explain`]).
    pub explained: String,
    /// The modeled stages beside their counters.
    pub stages: Vec<StageLine>,
}

/// Loads `table` (removed afterwards) round-robin onto a fresh array of `devices` devices under `work`,
/// its key `key.0` (dictionary-encoded if `key.1`), sorts it in each of `placements`, and removes the array.
#[allow(clippy::too_many_arguments)]
fn sort_runs<const N: usize>(
    work: &Path,
    table: &Path,
    devices: u32,
    key: (&str, bool),
    placements: &[SortPlacement; N],
    algo: SortAlgo,
    profile: &Profile,
    progress: &dyn Fn(&str),
) -> Result<[SortRun; N]> {
    let dir = work.join(format!("nascent-{devices}"));
    crate::array::clear_array_dir(&dir)?;
    let bytes = std::fs::metadata(table).map_err(|e| HostError::io(table, e))?.len();
    // Room for the table, its sorted outputs and their indices on each device, with slack.
    let capacity = (256u64 << 20).max((bytes / devices as u64) * (N as u64 + 3) * 2).next_power_of_two();
    Array::init(&dir, devices, profile.clone(), Some(capacity), None)?.close()?;
    let mut array = Array::open(&dir, OpenOptions::default())?;
    let opts = PutTable {
        name: "t".into(),
        key: Some(key.0.into()),
        partition: Partitioning::RoundRobin,
        dict: key.1.then(|| key.0.into()),
    };
    put_table(&mut array, table, &opts)?;
    let mut out: [SortRun; N] = std::array::from_fn(|_| SortRun::default());
    for (i, placement) in placements.iter().enumerate() {
        progress(&format!("sort ({placement:?})"));
        let o = SortOptions {
            key: key.0.into(),
            placement: *placement,
            algo,
            out: Some(format!("s{i}")),
            merge: None,
            memory_budget: None,
        };
        let r = sort_table(&mut array, "t", &o)?;
        let watts = match placement {
            SortPlacement::Device => devices as f64 * profile.power.device_active_w,
            SortPlacement::Host => profile.host.active_w,
            SortPlacement::HostAccel => {
                profile.host.accelerator.as_ref().map_or(profile.host.active_w, |a| a.active_w)
            }
        };
        out[i] = SortRun {
            measured_s: r.wall_s,
            modeled_s: r.modeled.time_s,
            modeled_j: watts * r.modeled.time_s,
            system_j: r.modeled.energy_j,
            explained: explain(&r.modeled),
            stages: crate::model::stage_lines(profile, &r.phases, &r.modeled),
        };
    }
    array.close()?;
    std::fs::remove_dir_all(&dir).map_err(|e| HostError::io(&dir, e))?;
    std::fs::remove_file(table).map_err(|e| HostError::io(table, e))?;
    Ok(out)
}

/// Fig. 14 (§4.3): TPC-C ORDER-LINE at scale factors 1, 2, 5, 10 and 20 in each of 12 SmartSSDs, NASCENT
/// against the FPGA baseline: 9.2x faster and 6.8x less energy on average.
pub const PAPER_FIG14: (f64, f64) = (9.2, 6.8);

/// How the energy rows of Figs. 13 and 14 count, as the paper does (§4.1).
const ENERGY_AS_THE_PAPER: &str = "energy as the paper counts it: the sorting processors' power (the \
    SmartSSDs' FPGAs, the CPU, the FPGA card) over the run, without the SSDs' or the rest of the system's";

/// One scale factor of Fig. 14.
#[derive(Debug, Clone, Serialize)]
pub struct TpccRow {
    /// Warehouses per device.
    pub scale: u32,
    pub rows_per_device: u64,
    /// The device sort and the FPGA baseline (host-accel).
    pub runs: [SortRun; 2],
}

/// Fig. 14: ORDER-LINE of `scale` warehouses per device on `devices` devices, sorted by `ol_i_id` in the
/// devices and on the accelerator beside the host.
pub fn repro_tpcc(
    work: &Path,
    scales: &[u32],
    devices: u32,
    profile: &Profile,
    algo: SortAlgo,
    progress: &dyn Fn(&str),
) -> Result<Vec<TpccRow>> {
    let mut out = Vec::new();
    for &sf in scales {
        progress(&format!("fig14: TPC-C ORDER-LINE, {sf} warehouse(s) a device on {devices} devices"));
        std::fs::create_dir_all(work).map_err(|e| HostError::io(work, e))?;
        let table = work.join(format!("orderline-{sf}.parquet"));
        let warehouses = sf.checked_mul(devices).ok_or_else(|| {
            HostError::InvalidArgument(format!("--tpcc {sf} on {devices} devices is too many warehouses"))
        })?;
        let rows = crate::nascent::data::tpcc_orderline(&table, warehouses, sf as u64)?;
        let runs = sort_runs(
            work,
            &table,
            devices,
            ("ol_i_id", false),
            &[SortPlacement::Device, SortPlacement::HostAccel],
            algo,
            profile,
            &|m: &str| progress(&format!("fig14: SF {sf}: {m}")),
        )?;
        out.push(TpccRow { scale: sf, rows_per_device: rows / devices as u64, runs });
    }
    Ok(out)
}

/// Fig. 14 as a figure.
fn fig14(rows: &[TpccRow]) -> Figure {
    let ratio = |r: &TpccRow, f: &dyn Fn(&SortRun) -> f64| f(&r.runs[1]) / f(&r.runs[0]);
    let mut out = Vec::new();
    for r in rows {
        let why = format!("device sort {}; the FPGA baseline {}", r.runs[0].explained, r.runs[1].explained);
        out.push(
            Row::new(format!("SF {}: speed-up vs FPGA baseline", r.scale), "x", ratio(r, &|x| x.modeled_s))
                .measured(ratio(r, &|x| x.measured_s))
                .note(why.clone()),
        );
        out.push(
            Row::new(
                format!("SF {}: energy saving vs FPGA baseline", r.scale),
                "x",
                ratio(r, &|x| x.modeled_j),
            )
            .note(why),
        );
    }
    if !rows.is_empty() {
        let n = rows.len() as f64;
        let mean = |f: &dyn Fn(&SortRun) -> f64| rows.iter().map(|r| ratio(r, f)).sum::<f64>() / n;
        let scales: Vec<String> = rows.iter().map(|r| r.scale.to_string()).collect();
        let over = format!("over SF {} (the paper's: 1, 2, 5, 10, 20)", scales.join(", "));
        let last = rows.last().map_or(String::new(), |r| {
            format!(
                "at SF {}: device sort {}; the FPGA baseline {}",
                r.scale, r.runs[0].explained, r.runs[1].explained
            )
        });
        out.push(
            Row::new("average speed-up vs FPGA baseline", "x", mean(&|x| x.modeled_s))
                .paper(PAPER_FIG14.0)
                .measured(mean(&|x| x.measured_s))
                .note(format!("{over}; {last}")),
        );
        out.push(
            Row::new("average energy saving vs FPGA baseline", "x", mean(&|x| x.modeled_j))
                .paper(PAPER_FIG14.1)
                .note(format!("{ENERGY_AS_THE_PAPER}; {over}; {last}")),
        );
    }
    let pts = |f: &dyn Fn(&TpccRow) -> f64| -> Vec<[f64; 2]> {
        rows.iter().map(|r| [r.scale as f64, f(r)]).collect()
    };
    let paper = |v: f64| -> Vec<[f64; 2]> { rows.iter().map(|r| [r.scale as f64, v]).collect() };
    let plot =
        Plot::lines("TPC-C scale factor (warehouses a device)", "over the FPGA baseline (x)", true, false)
            .with(Series::new("speed-up, modeled", Source::Modeled, pts(&|r| ratio(r, &|x| x.modeled_s))))
            .with(Series::new(
                "energy saving, modeled",
                Source::Modeled,
                pts(&|r| ratio(r, &|x| x.modeled_j)),
            ))
            .with(Series::new("speed-up, measured", Source::Measured, pts(&|r| ratio(r, &|x| x.measured_s))))
            .with(Series::new("speed-up, paper", Source::Paper, paper(PAPER_FIG14.0)))
            .with(Series::new("energy saving, paper", Source::Paper, paper(PAPER_FIG14.1)));
    Figure::new(
        "fig14",
        "Sorting TPC-C ORDER-LINE on 12 SmartSSDs vs the FPGA baseline (§4.3)",
        out,
        Some(plot),
    )
}

/// The experiment as a Markdown table.
pub fn render(rows: &[ReproRow], profile: &str) -> String {
    let mut s = format!(
        "NASCENT Fig. 13 on `{profile}`: one 1024-row table of 4 KB rows per device, key 16-bit dictionary-encoded\n\n\
         | devices | measured s (device / host / host-accel) | modeled s (device / host / host-accel) | modeled J of the sorting processors (device / host / host-accel) | speed-up vs host-accel | speed-up vs host CPU |\n\
         |---:|---|---|---|---:|---:|\n"
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.3} / {:.3} / {:.3} | {:.4} / {:.4} / {:.4} | {:.3} / {:.3} / {:.3} | {:.1}x | {:.1}x |\n",
            r.devices,
            r.measured_s[0],
            r.measured_s[1],
            r.measured_s[2],
            r.modeled_s[0],
            r.modeled_s[1],
            r.modeled_s[2],
            r.modeled_energy_j[0],
            r.modeled_energy_j[1],
            r.modeled_energy_j[2],
            r.speedup_vs_accel,
            r.speedup_vs_cpu
        ));
    }
    s.push_str(&format!(
        "\npaper at 12 devices: {PAPER_SPEEDUP_VS_ACCEL_AT_12}x over the FPGA baseline, {PAPER_SPEEDUP_VS_CPU_AT_12}x over the CPU\n"
    ));
    s
}

/// Fig. 13 as a figure: speed-up and energy saving over both baselines by device count, the paper's values
/// at 12 devices.
pub fn figures(
    rows: &[ReproRow],
    kernel: &[KernelPoint],
    tpcc: &[TpccRow],
    profile: &Profile,
) -> PaperFigures {
    let mut figures = vec![fig8(kernel, profile), fig9(kernel, profile)];
    let mut out = Vec::new();
    let at12 = |r: &ReproRow, v: f64| (r.devices == 12).then_some(v);
    let why = |r: &ReproRow, base: usize| {
        format!(
            "device sort {}; the {} baseline {}",
            r.explained[0],
            ["", "CPU", "FPGA"][base],
            r.explained[base]
        )
    };
    for r in rows {
        let n = r.devices;
        out.push(
            Row::new(format!("{n} device(s): speed-up vs FPGA baseline"), "x", r.speedup_vs_accel)
                .paper_opt(at12(r, PAPER_SPEEDUP_VS_ACCEL_AT_12))
                .measured(r.measured_s[2] / r.measured_s[0])
                .note(if n == 1 {
                    format!(
                        "{}; the paper has the FPGA baseline slightly better at one device (§4.3), the model \
                         not: its baseline does NASCENT's flash reads and writes and moves the table to its \
                         card and back besides",
                        why(r, 2)
                    )
                } else {
                    why(r, 2)
                }),
        );
        out.push(
            Row::new(format!("{n} device(s): speed-up vs CPU"), "x", r.speedup_vs_cpu)
                .paper_opt(at12(r, PAPER_SPEEDUP_VS_CPU_AT_12))
                .measured(r.measured_s[1] / r.measured_s[0])
                .note(why(r, 1)),
        );
        out.push(
            Row::new(
                format!("{n} device(s): energy saving vs FPGA baseline"),
                "x",
                r.modeled_energy_j[2] / r.modeled_energy_j[0],
            )
            .paper_opt(at12(r, PAPER_ENERGY_VS_ACCEL_AT_12))
            .note(format!("{ENERGY_AS_THE_PAPER}; {}", why(r, 2))),
        );
        out.push(
            Row::new(
                format!("{n} device(s): energy saving vs CPU"),
                "x",
                r.modeled_energy_j[1] / r.modeled_energy_j[0],
            )
            .paper_opt(at12(r, PAPER_ENERGY_VS_CPU_AT_12))
            .note(format!("{ENERGY_AS_THE_PAPER}; {}", why(r, 1))),
        );
    }
    let pts = |f: &dyn Fn(&ReproRow) -> f64| -> Vec<[f64; 2]> {
        rows.iter().map(|r| [r.devices as f64, f(r)]).collect()
    };
    let paper = |v: f64| -> Vec<[f64; 2]> {
        if rows.iter().any(|r| r.devices == 12) {
            vec![[12.0, v]]
        } else {
            Vec::new()
        }
    };
    let plot = Plot::lines("number of SmartSSDs", "speed-up / energy saving (x)", false, true)
        .with(Series::new("time vs FPGA baseline, modeled", Source::Modeled, pts(&|r| r.speedup_vs_accel)))
        .with(Series::new("time vs CPU, modeled", Source::Modeled, pts(&|r| r.speedup_vs_cpu)))
        .with(Series::new(
            "energy vs FPGA baseline, modeled",
            Source::Modeled,
            pts(&|r| r.modeled_energy_j[2] / r.modeled_energy_j[0]),
        ))
        .with(Series::new(
            "energy vs CPU, modeled",
            Source::Modeled,
            pts(&|r| r.modeled_energy_j[1] / r.modeled_energy_j[0]),
        ))
        .with(Series::new(
            "time vs FPGA baseline, measured",
            Source::Measured,
            pts(&|r| r.measured_s[2] / r.measured_s[0]),
        ))
        .with(Series::new(
            "time vs CPU, measured",
            Source::Measured,
            pts(&|r| r.measured_s[1] / r.measured_s[0]),
        ))
        .with(Series::new("time vs FPGA baseline, paper", Source::Paper, paper(PAPER_SPEEDUP_VS_ACCEL_AT_12)))
        .with(Series::new("time vs CPU, paper", Source::Paper, paper(PAPER_SPEEDUP_VS_CPU_AT_12)))
        .with(Series::new(
            "energy vs FPGA baseline, paper",
            Source::Paper,
            paper(PAPER_ENERGY_VS_ACCEL_AT_12),
        ))
        .with(Series::new("energy vs CPU, paper", Source::Paper, paper(PAPER_ENERGY_VS_CPU_AT_12)));
    figures.push(Figure::new(
        "fig13",
        "Sort speed-up and energy saving over the FPGA baseline and the CPU, 1-12 SmartSSDs (§4.3)",
        out,
        Some(plot),
    ));
    if !tpcc.is_empty() {
        figures.push(fig14(tpcc));
    }
    PaperFigures {
        paper: "nascent".into(),
        cites: "NASCENT (FPGA '21)".into(),
        setup: format!(
            "profile `{}`, host `{}` with its accelerator; one 1024-row table of 4 KB rows per device, key \
             16-bit dictionary-encoded; {} device count(s); Fig. 8 on 1K to 8M random 32-bit keys",
            profile.name,
            profile.host.name,
            rows.len()
        ),
        figures,
        detail: detail(rows, &profile.name),
    }
}

/// Fig. 8 as a figure: the kernel's and the quicksort's times, speed-up and energy saving by input size.
fn fig8(points: &[KernelPoint], profile: &Profile) -> Figure {
    use insitu_device::engines::Sorter;
    let on_chip_keys = match &profile.kernels.sort {
        Sorter::Bitonic { on_chip_bytes, .. } => on_chip_bytes / 4,
        Sorter::Compare { .. } => u64::MAX,
    };
    let cache_keys = match &profile.host.cpu.sort {
        Sorter::Compare { cache_bytes, index_bytes, .. } => cache_bytes / (4 + *index_bytes as u64),
        Sorter::Bitonic { .. } => u64::MAX,
    };
    let why = |n: u64| {
        format!(
            "network: {}; quicksort: {} x log2 n key-levels{}",
            if n <= on_chip_keys {
                "one pass on chip".to_string()
            } else {
                format!("{}K-key chunks on chip, merged in passes over DRAM", on_chip_keys >> 10)
            },
            size(n),
            if n > cache_keys { ", the levels past the L3 bound by memory" } else { "" }
        )
    };
    let mut rows = Vec::new();
    for p in points {
        let n = p.elements;
        rows.push(
            Row::new(format!("{}: NASCENT sort kernel", size(n)), "ms", p.modeled_s[0] * 1e3)
                .measured_opt(p.measured_s.map(|m| m[0] * 1e3))
                .note("measured = the network emulated in software here"),
        );
        rows.push(
            Row::new(format!("{}: CPU quicksort", size(n)), "ms", p.modeled_s[1] * 1e3)
                .measured_opt(p.measured_s.map(|m| m[1] * 1e3))
                .note("measured = sort_unstable here"),
        );
        rows.push(
            Row::new(format!("{}: speed-up", size(n)), "x", p.modeled_s[1] / p.modeled_s[0])
                .paper_opt(paper(&PAPER_FIG8_SPEEDUP, n))
                .note(why(n)),
        );
        rows.push(
            Row::new(format!("{}: energy saving", size(n)), "x", p.modeled_j[1] / p.modeled_j[0])
                .paper_opt(paper(&PAPER_FIG8_ENERGY, n))
                .note(format!(
                    "the speed-up x {} W / {} W; {}",
                    fmt_value(profile.host.active_w),
                    fmt_value(profile.power.device_active_w),
                    why(n)
                )),
        );
    }
    let plot = kernel_plot(points, |p| (p.modeled_s, p.modeled_j), &PAPER_FIG8_SPEEDUP, &PAPER_FIG8_ENERGY);
    Figure::new("fig8", "Sort kernel vs the CPU's quicksort, data in DRAM (§4.2)", rows, Some(plot))
}

/// `1K`, `256K`, `8M`: an input size as the paper's axes write it.
fn size(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{}M", n >> 20)
    } else {
        format!("{}K", n >> 10)
    }
}

/// The paper's value at input size `n`, if it states one.
fn paper(table: &[(u64, f64)], n: u64) -> Option<f64> {
    table.iter().find(|(m, _)| *m == n).map(|(_, v)| *v)
}

/// Figs. 8 and 9's plot: the speed-up and energy saving over the CPU by input size, from each point's
/// `(seconds, joules)` pair ([kernel, CPU]), beside the paper's.
fn kernel_plot(
    points: &[KernelPoint],
    of: impl Fn(&KernelPoint) -> ([f64; 2], [f64; 2]),
    speedup: &[(u64, f64)],
    energy: &[(u64, f64)],
) -> Plot {
    let pts = |f: &dyn Fn(([f64; 2], [f64; 2])) -> f64| -> Vec<[f64; 2]> {
        points.iter().map(|p| [p.elements as f64, f(of(p))]).collect()
    };
    let paper_pts = |t: &[(u64, f64)]| -> Vec<[f64; 2]> { t.iter().map(|(n, v)| [*n as f64, *v]).collect() };
    Plot::lines("input elements", "speed-up / energy saving over the CPU (x)", true, true)
        .with(Series::new("speed-up, modeled", Source::Modeled, pts(&|(t, _)| t[1] / t[0])))
        .with(Series::new("energy saving, modeled", Source::Modeled, pts(&|(_, j)| j[1] / j[0])))
        .with(Series::new("speed-up, paper", Source::Paper, paper_pts(speedup)))
        .with(Series::new("energy saving, paper", Source::Paper, paper_pts(energy)))
}

/// Fig. 9 as a figure: the kernel and the CPU reading their keys from storage.
fn fig9(points: &[KernelPoint], profile: &Profile) -> Figure {
    let mut rows = Vec::new();
    for p in points {
        let n = p.elements;
        let why = format!("{}; {}", p.storage_explained[0], p.storage_explained[1]);
        rows.push(
            Row::new(format!("{}: speed-up", size(n)), "x", p.storage_s[1] / p.storage_s[0])
                .paper_opt(paper(&PAPER_FIG9_SPEEDUP, n))
                .note(why.clone()),
        );
        rows.push(
            Row::new(format!("{}: energy saving", size(n)), "x", p.storage_j[1] / p.storage_j[0])
                .paper_opt(paper(&PAPER_FIG9_ENERGY, n))
                .note(format!(
                    "the FPGA's {} W against the CPU's {} W busy, {} W waiting; {why}",
                    fmt_value(profile.power.device_active_w),
                    fmt_value(profile.host.active_w),
                    fmt_value(profile.host.idle_w)
                )),
        );
    }
    let plot = kernel_plot(points, |p| (p.storage_s, p.storage_j), &PAPER_FIG9_SPEEDUP, &PAPER_FIG9_ENERGY);
    Figure::new("fig9", "Sort kernel vs the CPU, data in storage (§4.2)", rows, Some(plot))
}

/// The run's tables, and the stages of the largest device count's sorts beside their counters.
fn detail(rows: &[ReproRow], profile: &str) -> String {
    let mut s = render(rows, profile);
    if let Some(r) = rows.last() {
        for (i, name) in ["device (NASCENT)", "host CPU", "FPGA baseline (host-accel)"].iter().enumerate() {
            s.push_str(&format!(
                "\n{} device(s), {name}: modeled stages and the counters they come from\n\n",
                r.devices
            ));
            s.push_str(&crate::model::stage_table(&r.stages[i]));
        }
    }
    s
}
