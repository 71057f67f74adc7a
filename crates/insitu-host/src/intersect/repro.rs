//! `insitu repro intersect`: the paper's three sweeps (§5) on the `smartssd-2016` profile: entry size
//! 4..4096 with |L2| = 100 MB, |L1| = 0.1 MB, r = 1%; size ratio 1..1000 with 100 MB in all, s = 256,
//! r = 1%; intersection ratio 0..100% with equal sizes, s = 256. Each point is measured here (device and
//! host placements), modeled from the run's counters, and predicted by the analytical model (§4), with the
//! paper's figures where the text gives them. `scale` shrinks every list (1.0 = the paper's sizes).

use std::path::Path;

use insitu_device::Profile;
use serde::Serialize;

use crate::array::{Array, OpenOptions};
use crate::error::{HostError, Result};
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
    for (i, placement) in [IntersectPlacement::Device, IntersectPlacement::Host].into_iter().enumerate() {
        let (rep, ans) = intersect(a, &names, placement, Output::Ids)?;
        if ans.count != common {
            return Err(HostError::Damaged {
                name: sweep.into(),
                detail: format!("{placement:?} found {} of {common}", ans.count),
            });
        }
        measured[i] = rep.wall_s * 1e3;
        modeled[i] = rep.modeled.time_s * 1e3;
    }
    crate::blob::rm(a, &na)?;
    crate::blob::rm(a, &nb)?;
    let w = Workload::from_sizes(
        (n1 * s as u64) as f64,
        (n2 * s as u64) as f64,
        s as f64,
        common as f64 / n1.min(n2).max(1) as f64,
        4.0,
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
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| HostError::io(&dir, e))?;
    }
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
    s.push_str("\npaper (§4.1): loading 100 MB takes 65 ms on the Smart SSD vs 198 ms on the regular SSD (model: 67 vs 182 ms)\n");
    s
}
