//! `insitu repro nascent`: NASCENT's Fig. 13 experiment. For 1 to 12 SmartSSDs, one 1024-row table of
//! 4 KB rows (1024 4-byte columns) per device, key column stored 16-bit dictionary-encoded, sorted in the
//! devices, on the host CPU, and on one accelerator beside the host. Reports measured and modeled times and
//! the modeled speed-ups next to the paper's (7.6x over the FPGA baseline and 147x over the CPU at 12
//! devices, §4.3).

use std::path::Path;

use insitu_device::Profile;
use serde::Serialize;

use insitu_kernels::keys::SortAlgo;

use crate::array::{Array, OpenOptions};
use crate::error::{HostError, Result};
use crate::figure::{explain, Figure, PaperFigures, Plot, Row, Series, Source};
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

/// One line of the experiment.
#[derive(Debug, Clone, Serialize)]
pub struct ReproRow {
    pub devices: u32,
    pub measured_s: [f64; 3],
    pub modeled_s: [f64; 3],
    pub modeled_energy_j: [f64; 3],
    pub speedup_vs_accel: f64,
    pub speedup_vs_cpu: f64,
    /// Each placement's modeled time in words: the bound that took most of it (see [`explain`]).
    pub explained: [String; 3],
}

/// Runs the experiment for each device count in `counts`, under `work` (arrays are made and removed).
pub fn repro_nascent(
    work: &Path,
    counts: &[u32],
    profile: &Profile,
    algo: SortAlgo,
    progress: &dyn Fn(&str),
) -> Result<Vec<ReproRow>> {
    std::fs::create_dir_all(work).map_err(|e| HostError::io(work, e))?;
    let mut rows = Vec::new();
    for &n in counts {
        progress(&format!("{n} device(s): generating and loading {n} x 1024 rows of 4 KB ..."));
        let dir = work.join(format!("nascent-{n}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| HostError::io(&dir, e))?;
        }
        let table = work.join(format!("nascent-{n}.parquet"));
        synthetic(&table, 1024 * n as u64, 1024, 65_536, n as u64)?;
        Array::init(&dir, n, profile.clone(), Some(256 << 20), None)?.close()?;
        let mut array = Array::open(&dir, OpenOptions::default())?;
        let opts = PutTable {
            name: "t".into(),
            key: Some("c0".into()),
            partition: Partitioning::RoundRobin,
            dict: Some("c0".into()),
        };
        put_table(&mut array, &table, &opts)?;
        let mut measured = [0.0; 3];
        let mut modeled = [0.0; 3];
        let mut energy = [0.0; 3];
        let mut explained: [String; 3] = Default::default();
        for (i, placement) in
            [SortPlacement::Device, SortPlacement::Host, SortPlacement::HostAccel].into_iter().enumerate()
        {
            progress(&format!("{n} device(s): sort ({placement:?})"));
            let o = SortOptions {
                key: "c0".into(),
                placement,
                algo,
                out: Some(format!("s{i}")),
                merge: None,
                memory_budget: None,
            };
            let r = sort_table(&mut array, "t", &o)?;
            measured[i] = r.wall_s;
            modeled[i] = r.modeled.time_s;
            energy[i] = r.modeled.energy_j;
            explained[i] = explain(&r.modeled);
        }
        array.close()?;
        std::fs::remove_dir_all(&dir).map_err(|e| HostError::io(&dir, e))?;
        std::fs::remove_file(&table).map_err(|e| HostError::io(&table, e))?;
        rows.push(ReproRow {
            devices: n,
            measured_s: measured,
            modeled_s: modeled,
            modeled_energy_j: energy,
            speedup_vs_accel: modeled[2] / modeled[0],
            speedup_vs_cpu: modeled[1] / modeled[0],
            explained,
        });
    }
    Ok(rows)
}

/// The experiment as a Markdown table.
pub fn render(rows: &[ReproRow], profile: &str) -> String {
    let mut s = format!(
        "NASCENT Fig. 13 on `{profile}`: one 1024-row table of 4 KB rows per device, key 16-bit dictionary-encoded\n\n\
         | devices | measured s (device / host / host-accel) | modeled s (device / host / host-accel) | modeled J (device / host / host-accel) | speed-up vs host-accel | speed-up vs host CPU |\n\
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
pub fn figures(rows: &[ReproRow], profile: &Profile) -> PaperFigures {
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
                .note(why(r, 2)),
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
            .note(why(r, 2)),
        );
        out.push(
            Row::new(
                format!("{n} device(s): energy saving vs CPU"),
                "x",
                r.modeled_energy_j[1] / r.modeled_energy_j[0],
            )
            .paper_opt(at12(r, PAPER_ENERGY_VS_CPU_AT_12))
            .note(why(r, 1)),
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
    PaperFigures {
        paper: "nascent".into(),
        cites: "NASCENT (FPGA '21)".into(),
        setup: format!(
            "profile `{}`, host `{}` with its accelerator; one 1024-row table of 4 KB rows per device, key \
             16-bit dictionary-encoded; {} device count(s)",
            profile.name,
            profile.host.name,
            rows.len()
        ),
        figures: vec![Figure::new(
            "fig13",
            "Sort speed-up and energy saving over the FPGA baseline and the CPU, 1-12 SmartSSDs (§4.3)",
            out,
            Some(plot),
        )],
        detail: render(rows, &profile.name),
    }
}
