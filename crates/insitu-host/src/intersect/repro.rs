//! `insitu repro intersect`: the paper's three sweeps (§5) on the `smartssd-2016` profile: entry size
//! 4..4096 with |L2| = 100 MB, |L1| = 0.1 MB, r = 1%; size ratio 1..1000 with 100 MB in all, s = 256,
//! r = 1%; intersection ratio 0..100% with equal sizes, s = 256, whole entries returned. Each point is
//! measured here (device and host placements), modeled from the run's counters, and predicted by the
//! analytical model (§4), with the paper's figures where the text gives them. `scale` shrinks every list (1.0 = the paper's sizes).

use std::path::Path;

use insitu_device::Profile;
use serde::Serialize;

use crate::array::{Array, OpenOptions};
use crate::error::{HostError, Result};
use crate::figure::{explain, fmt_value, Figure, PaperFigures, Plot, Row, Series, Source};
use crate::intersect::lists::{gen_lists, put_list, IdFormat};
use crate::intersect::model::{predict, Workload};
use crate::intersect::operator::{intersect, IntersectPlacement, Output};

/// One point of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub sweep: &'static str,
    pub label: String,
    pub l1: u64,
    pub l2: u64,
    pub common: u64,
    pub measured_ms: [f64; 2],
    pub modeled_ms: [f64; 2],
    pub predicted_ms: [f64; 2],
    /// Modeled energy (J), device and host, as §4 defines it: the modeled time at the power of the processor
    /// that runs the intersection (`E' = T' P'` with the device's active power, `E = T P` with the host's).
    pub modeled_j: [f64; 2],
    /// Each placement's modeled time in words: the bound that took most of it.
    pub explained: [String; 2],
    /// Each placement's modeled stages beside their counters.
    pub stages: [Vec<crate::model::StageLine>; 2],
    pub paper: &'static str,
}

#[allow(clippy::too_many_arguments)]
fn point(
    a: &mut Array,
    work: &Path,
    profile: &Profile,
    sweep: &'static str,
    label: String,
    (n1, n2, s, r): (u64, u64, u32, f64),
    output: Output,
    paper: &'static str,
    seq: usize,
) -> Result<Point> {
    let (p1, p2) = (work.join(format!("l1-{seq}.bin")), work.join(format!("l2-{seq}.bin")));
    let (n1, n2, common) = gen_lists(n1.max(1), n2.max(1), r, seq as u64 + 7, &p1, &p2)?;
    let (na, nb) = (format!("a{seq}"), format!("b{seq}"));
    put_list(a, &p1, Some(IdFormat::U32Le), &na, s, 0)?;
    put_list(a, &p2, Some(IdFormat::U32Le), &nb, s, 0)?;
    let _ = std::fs::remove_file(&p1);
    let _ = std::fs::remove_file(&p2);
    let names = vec![na.clone(), nb.clone()];
    let mut measured = [0.0; 2];
    let mut modeled = [0.0; 2];
    let mut modeled_j = [0.0; 2];
    let mut explained: [String; 2] = Default::default();
    let mut stages: [Vec<crate::model::StageLine>; 2] = Default::default();
    for (i, placement) in [IntersectPlacement::Device, IntersectPlacement::Host].into_iter().enumerate() {
        let (rep, ans) = intersect(a, &names, placement, output)?;
        if ans.count != common {
            return Err(HostError::Damaged {
                name: sweep.into(),
                detail: format!("{placement:?} found {} of {common}", ans.count),
            });
        }
        measured[i] = rep.wall_s * 1e3;
        modeled[i] = rep.modeled.time_s * 1e3;
        let watts = match placement {
            IntersectPlacement::Device => profile.power.device_active_w,
            _ => profile.host.active_w,
        };
        modeled_j[i] = rep.modeled.time_s * watts;
        explained[i] = explain(&rep.modeled);
        stages[i] = crate::model::stage_lines(profile, &rep.phases, &rep.modeled);
    }
    crate::blob::rm(a, &na)?;
    crate::blob::rm(a, &nb)?;
    let w = Workload::from_sizes(
        (n1 * s as u64) as f64,
        (n2 * s as u64) as f64,
        s as f64,
        common as f64 / n1.min(n2).max(1) as f64,
        if output == Output::Entries { s as f64 } else { 4.0 },
    )?;
    let m = predict(profile, &w)?;
    Ok(Point {
        sweep,
        label,
        l1: n1,
        l2: n2,
        common,
        measured_ms: measured,
        modeled_ms: modeled,
        predicted_ms: [m.device_ms, m.host_ms],
        modeled_j,
        explained,
        stages,
        paper,
    })
}

/// Runs the three sweeps on `profile` (the paper's is `smartssd-2016`).
pub fn repro_intersect(
    work: &Path,
    scale: f64,
    profile: &Profile,
    progress: &dyn Fn(&str),
) -> Result<Vec<Point>> {
    if !(scale > 0.0 && scale <= 1.0) {
        return Err(HostError::InvalidArgument(format!("--scale must be in (0, 1], not {scale}")));
    }
    std::fs::create_dir_all(work).map_err(|e| HostError::io(work, e))?;
    let dir = work.join("intersect-array");
    crate::array::clear_array_dir(&dir)?;
    Array::init(&dir, 1, profile.clone(), Some(1 << 30), None)?.close()?;
    let mut a = Array::open(&dir, OpenOptions::default())?;
    let mb = |x: f64| (x * 1e6 * scale) as u64;
    let mut pts = Vec::new();
    let mut seq = 0;
    for s in [4u32, 16, 64, 256, 1024, 4096] {
        progress(&format!("entry size {s}"));
        let paper = match s {
            256 => "copy 62.5 ms; crossover near s = 256",
            4 => "device 5.1x slower than host (Fig. 3)",
            _ => "",
        };
        pts.push(point(
            &mut a,
            work,
            profile,
            "entry size",
            format!("s = {s}"),
            (mb(0.1) / s as u64, mb(100.0) / s as u64, s, 0.01),
            Output::Ids,
            paper,
            seq,
        )?);
        seq += 1;
    }
    for theta in [1u64, 10, 100, 1000] {
        progress(&format!("size ratio {theta}"));
        let total = mb(100.0) / 256;
        pts.push(point(
            &mut a,
            work,
            profile,
            "size ratio",
            format!("theta = {theta}"),
            (total / (1 + theta), total * theta / (1 + theta), 256, 0.01),
            Output::Ids,
            "",
            seq,
        )?);
        seq += 1;
    }
    for r in [0.0, 0.25, 0.5, 1.0] {
        progress(&format!("intersection ratio {r}"));
        let half = mb(50.0) / 256;
        pts.push(point(
            &mut a,
            work,
            profile,
            "intersection ratio",
            format!("r = {:.0}%", r * 100.0),
            (half, half, 256, r),
            // §5.2.3: "return the entire entries in the intersection results".
            Output::Entries,
            "",
            seq,
        )?);
        seq += 1;
    }
    a.close()?;
    std::fs::remove_dir_all(&dir).map_err(|e| HostError::io(&dir, e))?;
    Ok(pts)
}

/// The sweeps as Markdown.
pub fn render(pts: &[Point], scale: f64) -> String {
    let mut s = format!(
        "List intersection on `smartssd-2016` (scale {scale}): measured here, modeled from the counters, predicted by §4\n\n\
         | sweep | point | \\|L1\\| | \\|L2\\| | common | measured ms (device / host) | modeled ms (device / host) | predicted ms (device / host) | predicted faster | paper |\n\
         |---|---|---:|---:|---:|---|---|---|---|---|\n"
    );
    for p in pts {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {} | {} |\n",
            p.sweep,
            p.label,
            p.l1,
            p.l2,
            p.common,
            p.measured_ms[0],
            p.measured_ms[1],
            p.modeled_ms[0],
            p.modeled_ms[1],
            p.predicted_ms[0],
            p.predicted_ms[1],
            if p.predicted_ms[0] < p.predicted_ms[1] { "device" } else { "host" },
            p.paper
        ));
    }
    s
}

/// The paper's values (§4, §5).
mod paper {
    /// Table 2: (s, theta, T3 host ms, T'3 device ms).
    pub const TABLE2: [(f64, f64, f64, f64); 4] = [
        (4.0, 1.0, 261.0, 1087.0),
        (256.0, 1.0, 4.07, 16.96),
        (4.0, 1000.0, 6.41, 26.72),
        (256.0, 1000.0, 0.075, 0.31),
    ];
    /// §4.1, Fig. 3a: loading 100 MB, measured: Smart SSD, regular SSD (ms).
    pub const LOAD_MS: (f64, f64) = (65.0, 198.0);
    /// §4.2, Fig. 3a: the copy stage at s = 256, measured (ms).
    pub const COPY_256_MS: f64 = 62.5;
    /// §5.2, Fig. 3: at s = 4 the Smart SSD takes 5.1x the time and 1.3x the energy; at s = 64 it takes
    /// 2.6x less energy; offloading pays from s = 256 (Fig. 3a).
    pub const TIME_AT_4: f64 = 5.1;
    pub const ENERGY_AT_4: f64 = 1.3;
    pub const ENERGY_SAVED_AT_64: f64 = 2.6;
    pub const CROSSOVER: f64 = 256.0;
}

/// Table 2 and Figs. 3-5 as figures.
pub fn figures(pts: &[Point], scale: f64, profile: &Profile) -> Result<PaperFigures> {
    let mut figures = Vec::new();

    // Table 2: the intersection stage alone, from §4.3's count of memory accesses on the profile.
    let mut rows = Vec::new();
    for (s, theta, host, device) in paper::TABLE2 {
        let w = Workload { total_bytes: 100e6, entry_size: s, theta, r: 0.01, result_entry_size: 4.0 };
        let m = predict(profile, &w)?;
        let stage = m.stages.iter().find(|st| st.name == "intersect");
        let why = format!(
            "{} search, N_m = {:.0} memory accesses at the profile's price of one (Table 1's t + 3/(c f)): a \
             check of the profile's inputs and §4's count, not of a run",
            m.method, m.memory_accesses
        );
        for (side, want, got) in [
            ("T3 host", host, stage.and_then(|st| st.host_ms)),
            ("T'3 device", device, stage.and_then(|st| st.device_ms)),
        ] {
            rows.push(
                Row::new(format!("s = {s}, theta = {theta}: {side}"), "ms", got.unwrap_or(f64::NAN))
                    .paper(want)
                    .note(why.clone()),
            );
        }
    }
    figures.push(Figure::new("table2", "Cost of the intersection stage, D = 100 MB (§4.3)", rows, None));

    let sweep = |name: &str| -> Vec<&Point> { pts.iter().filter(|p| p.sweep == name).collect() };
    let x_of = |p: &Point| -> f64 {
        p.label.split(" = ").nth(1).map_or(f64::NAN, |v| v.trim_end_matches('%').parse().unwrap_or(f64::NAN))
    };
    let why = |p: &Point| format!("device {}; host {}", p.explained[0], p.explained[1]);
    let energy_note = format!(
        "energy = modeled time x the active power of the processor that intersects (§4: E' = T' P', E = T P; \
         {} W and {} W)",
        fmt_value(profile.power.device_active_w),
        fmt_value(profile.host.active_w)
    );
    let time_rows = |ps: &[&Point]| -> Vec<Row> {
        let mut rows = Vec::new();
        for p in ps {
            for (i, side) in ["device", "host"].iter().enumerate() {
                rows.push(
                    Row::new(format!("{}: {side}", p.label), "ms", p.modeled_ms[i])
                        .measured(p.measured_ms[i])
                        .note(p.explained[i].clone()),
                );
            }
        }
        rows
    };
    let energy_rows = |ps: &[&Point]| -> Vec<Row> {
        let mut rows = Vec::new();
        for p in ps {
            for (i, side) in ["device", "host"].iter().enumerate() {
                rows.push(
                    Row::new(format!("{}: {side}", p.label), "J", p.modeled_j[i])
                        .note(p.explained[i].clone()),
                );
            }
        }
        rows
    };
    let plot = |ps: &[&Point],
                x: &str,
                log: bool,
                y: &str,
                pick: &dyn Fn(&Point, usize) -> f64,
                measured: bool|
     -> Plot {
        let pts = |i: usize, f: &dyn Fn(&Point, usize) -> f64| {
            ps.iter().map(|p| [x_of(p), f(p, i)]).collect::<Vec<_>>()
        };
        let mut plot = Plot::lines(x, y, log, true)
            .with(Series::new("Smart SSD, modeled", Source::Modeled, pts(0, pick)))
            .with(Series::new("regular SSD, modeled", Source::Modeled, pts(1, pick)));
        if measured {
            plot = plot
                .with(Series::new("Smart SSD, measured", Source::Measured, pts(0, &|p, i| p.measured_ms[i])))
                .with(Series::new(
                    "regular SSD, measured",
                    Source::Measured,
                    pts(1, &|p, i| p.measured_ms[i]),
                ));
        }
        plot
    };

    // Fig. 3: entry size.
    let es = sweep("entry size");
    let at = |s: f64| es.iter().find(|p| x_of(p) == s).copied();
    let mut rows = Vec::new();
    let full =
        Workload { total_bytes: 100e6, entry_size: 256.0, theta: 1000.0, r: 0.01, result_entry_size: 4.0 };
    let m = predict(profile, &full)?;
    let stage = |name: &str, device: bool| {
        m.stages
            .iter()
            .find(|st| st.name == name)
            .and_then(|st| if device { st.device_ms } else { st.host_ms })
            .unwrap_or(f64::NAN)
    };
    rows.push(
        Row::new("load 100 MB: Smart SSD", "ms", stage("load", true))
            .paper(paper::LOAD_MS.0)
            .note("100 MB over the internal bandwidth"),
    );
    rows.push(Row::new("load 100 MB: regular SSD", "ms", stage("load", false)).paper(paper::LOAD_MS.1).note("100 MB over the host interface (SAS 550 MB/s); the paper measured 198 ms against its own estimate of 182"));
    rows.push(
        Row::new("copy at s = 256", "ms", stage("copy", true))
            .paper(paper::COPY_256_MS)
            .note("every entry's ID copied from core memory at tau each"),
    );
    if let Some(p) = at(4.0) {
        rows.push(
            Row::new("s = 4: device time / host time", "x", p.modeled_ms[0] / p.modeled_ms[1])
                .paper(paper::TIME_AT_4)
                .measured(p.measured_ms[0] / p.measured_ms[1])
                .note(why(p)),
        );
    }
    if es.len() > 1 {
        let cross = es.iter().find(|p| p.modeled_ms[0] < p.modeled_ms[1]).map_or(f64::INFINITY, |p| x_of(p));
        rows.push(
            Row::new("smallest entry size where the device is faster", "bytes", cross)
                .paper(paper::CROSSOVER)
                .note("the copy stage shrinks with 1/s until the load saved outweighs it"),
        );
    }
    rows.extend(time_rows(&es));
    figures.push(Figure::new(
        "fig3a",
        "Effect of the entry size: execution time (|L2| = 100 MB, |L1| = 0.1 MB, r = 1%)",
        rows,
        Some(plot(&es, "entry size s (bytes)", true, "execution time (ms)", &|p, i| p.modeled_ms[i], true)),
    ));
    let mut rows = Vec::new();
    if let Some(p) = at(4.0) {
        rows.push(
            Row::new("s = 4: device energy / host energy", "x", p.modeled_j[0] / p.modeled_j[1])
                .paper(paper::ENERGY_AT_4)
                .note(format!("{energy_note}; {}", why(p))),
        );
    }
    if let Some(p) = at(64.0) {
        rows.push(
            Row::new("s = 64: host energy / device energy", "x", p.modeled_j[1] / p.modeled_j[0])
                .paper(paper::ENERGY_SAVED_AT_64)
                .note(format!("{energy_note}; {}", why(p))),
        );
    }
    rows.extend(energy_rows(&es));
    figures.push(Figure::new(
        "fig3b",
        "Effect of the entry size: energy",
        rows,
        Some(plot(&es, "entry size s (bytes)", true, "energy (J)", &|p, i| p.modeled_j[i], false)),
    ));

    for (id, name, x, log, title) in [
        (
            "fig4",
            "size ratio",
            "size ratio theta = |L2| / |L1|",
            true,
            "Effect of the list size ratio (100 MB in all, s = 256, r = 1%)",
        ),
        (
            "fig5",
            "intersection ratio",
            "intersection ratio r (%)",
            false,
            "Effect of the intersection ratio (|L1| = |L2|, s = 256)",
        ),
    ] {
        let ps = sweep(name);
        if ps.is_empty() {
            continue;
        }
        figures.push(Figure::new(
            format!("{id}a"),
            format!("{title}: execution time"),
            time_rows(&ps),
            Some(plot(&ps, x, log, "execution time (ms)", &|p, i| p.modeled_ms[i], true)),
        ));
        figures.push(Figure::new(
            format!("{id}b"),
            format!("{title}: energy"),
            energy_rows(&ps),
            Some(plot(&ps, x, log, "energy (J)", &|p, i| p.modeled_j[i], false)),
        ));
    }
    Ok(PaperFigures {
        paper: "intersect".into(),
        cites: "Smart SSD list intersection (DaMoN '16)".into(),
        setup: format!(
            "profile `{}`, host `{}`; lists at {scale} of the paper's sizes (Table 2 and the load and copy rows at the paper's 100 MB)",
            profile.name, profile.host.name
        ),
        figures,
        detail: {
            let mut d = render(pts, scale);
            if let Some(p) = pts.iter().find(|p| p.label == "s = 256") {
                for (i, side) in ["device", "host"].iter().enumerate() {
                    d.push_str(&format!("\nentry size 256, {side}: modeled stages and the counters they come from\n\n"));
                    d.push_str(&crate::model::stage_table(&p.stages[i]));
                }
            }
            d
        },
    })
}
