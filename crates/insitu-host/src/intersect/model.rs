//! The paper's analytical model (§4) of intersecting two lists on a regular SSD (the host reads both lists
//! and intersects them) and on a Smart SSD (the device loads them into its DRAM through the core memory,
//! intersects with its ARM core, and sends the result).
//!
//! Stages (ms): (1) load: `D/b` on the host, `D/b'` on the device; (2) copy from the core memory to device
//! DRAM, device only: `D/s * tau`; (3) intersect: `N_m (t + 3/(c f))`, with `N_m = 2(|L1| + |L2|)` for a
//! linear merge and `2 |L1| log2 |L2|` for binary search, the cheaper of the two as in §5; (4) send results,
//! device only: `|L1| r s' / b`. `tau` and `t + 3/(c f)` are the engines' prices of the work a run counts
//! (`intersect.entries`, `intersect.accesses`; `smartssd-2016` and its host `i7-2016` hold Table 1's figures
//! as cycles). Energy is time x power (`E = T P`, `E' = T' P'`). Sizes are decimal (MB =
//! 10^6 bytes) as in the paper.

use insitu_device::Profile;
use serde::Serialize;

use crate::error::{HostError, Result};

/// The workload: total size `D`, entry size `s`, size ratio `theta = |L2| / |L1|`, intersection ratio `r`
/// (of |L1|) and result entry size `s'`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Workload {
    pub total_bytes: f64,
    pub entry_size: f64,
    pub theta: f64,
    pub r: f64,
    pub result_entry_size: f64,
}

impl Workload {
    /// From the two list sizes in bytes.
    pub fn from_sizes(
        size1: f64,
        size2: f64,
        entry_size: f64,
        r: f64,
        result_entry_size: f64,
    ) -> Result<Workload> {
        if !(entry_size >= 4.0 && entry_size % 4.0 == 0.0) {
            return Err(HostError::InvalidArgument(format!(
                "entry size must be a multiple of 4, at least 4, not {entry_size}"
            )));
        }
        if let Some(small) = [size1, size2].into_iter().find(|s| s.is_nan() || *s < entry_size) {
            return Err(HostError::InvalidArgument(format!(
                "each list holds at least one {entry_size}-byte entry: a list of {small} bytes holds none"
            )));
        }
        if !(result_entry_size >= 1.0 && result_entry_size <= entry_size) {
            return Err(HostError::InvalidArgument(format!(
                "a result entry is 1 to {entry_size} bytes (an ID of 4, up to the whole entry), not {result_entry_size}"
            )));
        }
        if !(0.0..=1.0).contains(&r) {
            return Err(HostError::InvalidArgument(format!(
                "the intersection ratio must be from 0 to 1, not {r}"
            )));
        }
        let (small, large) = if size1 <= size2 { (size1, size2) } else { (size2, size1) };
        Ok(Workload { total_bytes: small + large, entry_size, theta: large / small, r, result_entry_size })
    }

    pub fn l1(&self) -> f64 {
        self.total_bytes / (self.entry_size * (1.0 + self.theta))
    }

    pub fn l2(&self) -> f64 {
        self.total_bytes * self.theta / (self.entry_size * (1.0 + self.theta))
    }
}

/// One stage's cost on each side (ms); `None` where a stage does not apply.
#[derive(Debug, Clone, Serialize)]
pub struct Stage {
    pub name: &'static str,
    pub host_ms: Option<f64>,
    pub device_ms: Option<f64>,
}

/// The model's prediction.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    pub workload: Workload,
    pub l1: f64,
    pub l2: f64,
    /// `linear` or `binary`: the cheaper membership check.
    pub method: &'static str,
    pub memory_accesses: f64,
    pub stages: Vec<Stage>,
    pub host_ms: f64,
    pub device_ms: f64,
    pub host_j: f64,
    pub device_j: f64,
    /// `device` if offloading is faster, else `host`.
    pub faster: &'static str,
}

/// Predicts host and device cost on `profile`: the loads from its links, the copy and intersection stages
/// from the prices its engines give the work a run counts (`intersect.entries`, `intersect.accesses`:
/// `tau` and `t + 3/(c f)` in cycles), so the prediction and a run's modeled time price the same work alike.
pub fn predict(profile: &Profile, w: &Workload) -> Result<Prediction> {
    use insitu_device::work::{INTERSECT_ACCESSES, INTERSECT_ENTRIES};
    let price = |e: &insitu_device::engines::Engine, item: &str, side: &str| -> Result<f64> {
        e.cycles.get(item).map(|c| c / e.clock_hz).ok_or_else(|| {
            HostError::InvalidArgument(format!(
                "profile {} prices no {item} on its {side}, which the intersection model needs; smartssd-2016 does",
                profile.name
            ))
        })
    };
    let access_s = price(&profile.host.cpu, INTERSECT_ACCESSES, &format!("host ({})", profile.host.name))?;
    let access_d = price(&profile.kernels, INTERSECT_ACCESSES, "kernels")?;
    let copy_d = price(&profile.kernels, INTERSECT_ENTRIES, "kernels")?;
    let (l1, l2) = (w.l1(), w.l2());
    let linear = 2.0 * (l1 + l2);
    let binary = 2.0 * l1 * l2.max(2.0).log2();
    let (method, n_m) = if linear <= binary { ("linear", linear) } else { ("binary", binary) };
    let ms = 1e3;
    let t1 = w.total_bytes / profile.host_link.read_bw * ms;
    let t1d = w.total_bytes / profile.device.internal_read_bw * ms;
    let t2d = w.total_bytes / w.entry_size * copy_d * ms;
    let t3 = n_m * access_s * ms;
    let t3d = n_m * access_d * ms;
    let t4d = l1 * w.r * w.result_entry_size / profile.host_link.read_bw * ms;
    let host_ms = t1 + t3;
    let device_ms = t1d + t2d + t3d + t4d;
    Ok(Prediction {
        workload: *w,
        l1,
        l2,
        method,
        memory_accesses: n_m,
        stages: vec![
            Stage { name: "load", host_ms: Some(t1), device_ms: Some(t1d) },
            Stage { name: "copy", host_ms: None, device_ms: Some(t2d) },
            Stage { name: "intersect", host_ms: Some(t3), device_ms: Some(t3d) },
            Stage { name: "send results", host_ms: None, device_ms: Some(t4d) },
        ],
        host_ms,
        device_ms,
        host_j: host_ms * 1e-3 * profile.host.active_w,
        device_j: device_ms * 1e-3 * profile.power.device_active_w,
        faster: if device_ms < host_ms { "device" } else { "host" },
    })
}

/// One list as `auto` sees it before running: the device that holds it and its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListShape {
    pub device: u32,
    pub entries: u64,
}

/// What `--placement auto` weighs: each placement's modeled cost, from the work a run of it would count
/// (the pages it reads, the bytes it moves, the entries it copies and the memory accesses of its SvS
/// steps), priced by the same model as a run's report ([`crate::model::model`]). The paper's analytical
/// model ([`predict`]) leaves out what the profile prices beyond §4 (the host's storage stack, its
/// requests' flash latency, device DRAM, the passes over lists larger than the device's memory), so on
/// some profiles it chose the placement its own run then reported slower.
#[derive(Debug, Clone, Serialize)]
pub struct PlacementCosts {
    pub host: crate::model::Modeled,
    /// `None` when no one device can intersect the lists (they are on different devices, or its memory
    /// is too small).
    pub device: Option<crate::model::Modeled>,
    /// The match ratio assumed (of the shortest list), as the paper's model assumes one.
    pub r: f64,
}

impl PlacementCosts {
    /// The placement with the smaller modeled time (the host on a tie: nothing is offloaded for nothing).
    pub fn faster(&self) -> &'static str {
        match &self.device {
            Some(d) if d.time_s < self.host.time_s => "device",
            _ => "host",
        }
    }
}

/// How the device placement would go: its passes over the lists (0 when their ends show nothing in
/// common), the entries of each list it expects in the ID span it splits (all of them in one pass over
/// the whole ID space), and whether it reads each list's first and last entry to find that span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevicePlan {
    pub passes: u64,
    pub in_span: Vec<u64>,
    pub ends_read: bool,
}

/// Bytes a common entry takes back to the host: the whole entry (`entry_size`), its ID, or nothing for a
/// count.
pub fn result_width(output: insitu_device::protocol::Returned, entry_size: u32) -> u64 {
    use insitu_device::protocol::Returned;
    match output {
        Returned::Entries => entry_size as u64,
        Returned::Ids => 4,
        Returned::Count => 0,
    }
}

/// Each placement's modeled cost on an array of `devices` devices of `profile` (see [`PlacementCosts`]),
/// for `lists` of `entry_size`-byte entries returning `output`, with `r` of the shortest list in common,
/// and the device placement as `device` plans it (`None`: no device can).
pub fn placement_costs(
    profile: &Profile,
    devices: usize,
    lists: &[ListShape],
    entry_size: u32,
    output: insitu_device::protocol::Returned,
    r: f64,
    device: Option<&DevicePlan>,
) -> PlacementCosts {
    use crate::model::{model, HostWork, PhaseUsage};
    use insitu_device::protocol::Returned;
    use insitu_device::work::{self, Ledger, INTERSECT_ACCESSES, INTERSECT_ENTRIES, INTERSECT_SKIPPED};
    use insitu_device::DeviceCounters;
    let s = entry_size as u64;
    let page = (profile.nand.page_size as u64).max(1);
    let n_dev = devices.max(1);
    let width = result_width(output, entry_size);
    // SvS from the shortest list: each step's running result, then r of the shortest from the first on.
    let svs = |lens: &[u64]| {
        let mut lens = lens.to_vec();
        lens.sort_unstable();
        let common = lens.first().map_or(0, |&n| (n as f64 * r).ceil() as u64);
        let (mut accesses, mut acc) = (0, lens.first().copied().unwrap_or(0));
        for &l in lens.iter().skip(1) {
            if acc == 0 {
                break;
            }
            accesses += work::intersect_accesses(acc, l);
            acc = common;
        }
        (accesses, common)
    };
    let lens: Vec<u64> = lists.iter().map(|l| l.entries).collect();
    let total: u64 = lens.iter().sum();
    // Every list's pages are read (and pass into device memory) once per pass: its device's counters.
    let read = |passes: u64, to_host: bool| {
        let mut per = vec![DeviceCounters::default(); n_dev];
        for l in lists {
            let c = &mut per[(l.device as usize).min(n_dev - 1)];
            let bytes = l.entries * s;
            c.flash_read_pages += bytes.div_ceil(page) * passes;
            c.flash_read_bytes += bytes.div_ceil(page) * page * passes;
            c.flash_to_device_mem += bytes * passes;
            c.commands += 1;
            if to_host {
                c.device_to_host += bytes;
            }
        }
        per
    };
    let (accesses, _) = svs(&lens);
    let mut host_work = Ledger::new();
    work::add(&mut host_work, INTERSECT_ENTRIES, total);
    work::add(&mut host_work, INTERSECT_ACCESSES, accesses);
    let host = model(
        profile,
        &[PhaseUsage {
            name: "intersect".into(),
            devices: read(1, true),
            host: HostWork::counted(host_work),
        }],
    );
    let device = device.map(|plan| {
        let dev = lists.first().map_or(0, |l| l.device);
        let mut per = read(plan.passes, false);
        let c = &mut per[(dev as usize).min(n_dev - 1)];
        if plan.passes > 0 {
            // Each pass keeps the IDs of its range and passes over the others; the steps run on the span's.
            let kept: u64 = plan.in_span.iter().sum();
            let (accesses, common) = svs(&plan.in_span);
            let mut w = Ledger::new();
            work::add(&mut w, INTERSECT_ENTRIES, kept);
            if total * plan.passes > kept {
                work::add(&mut w, INTERSECT_SKIPPED, total * plan.passes - kept);
            }
            work::add(&mut w, INTERSECT_ACCESSES, accesses);
            c.work = w;
            c.device_to_host = common * width;
            c.commands += 3 * plan.passes;
            if output == Returned::Entries {
                // Whole entries go back: each common one is read again from the first list, a page a read.
                c.flash_read_pages += common;
                c.flash_read_bytes += common * page;
                c.flash_to_device_mem += common * s;
            }
        }
        if plan.ends_read {
            // The first and last entry of each list, read to find the span (4 bytes each to the host).
            let k = lists.len() as u64;
            c.flash_read_pages += 2 * k;
            c.flash_read_bytes += 2 * k * page;
            c.device_to_host += 8 * k;
            c.commands += 2 * k;
        }
        model(
            profile,
            &[PhaseUsage { name: "intersect (device)".into(), devices: per, host: HostWork::default() }],
        )
    });
    PlacementCosts { host, device, r }
}

/// The prediction as a readable table, stage by stage (what `insitu model intersect` prints).
pub fn render(profile: &Profile, m: &Prediction) -> String {
    let w = &m.workload;
    let mut text = format!(
        "list intersection on {}: |L1| = {:.0}, |L2| = {:.0} entries of {} B, theta = {:.1}, r = {}, {} search ({:.3e} memory accesses)\n",
        profile.name, m.l1, m.l2, w.entry_size, w.theta, w.r, m.method, m.memory_accesses
    );
    text.push_str(&format!("{:<14}{:>14}{:>14}\n", "stage", "host (ms)", "device (ms)"));
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.4}"));
    for st in &m.stages {
        text.push_str(&format!("{:<14}{:>14}{:>14}\n", st.name, cell(st.host_ms), cell(st.device_ms)));
    }
    text.push_str(&format!("{:<14}{:>14.4}{:>14.4}\n", "total", m.host_ms, m.device_ms));
    text.push_str(&format!("{:<14}{:>14.4}{:>14.4}\n", "energy (J)", m.host_j, m.device_j));
    text.push_str(&format!(
        "faster: {} ({:.2}x)\n",
        m.faster,
        (m.host_ms / m.device_ms).max(m.device_ms / m.host_ms)
    ));
    text.push_str(
        "(the paper's four stages, §4; a run's report also prices the host's storage stack, device DRAM and \
         passes over lists larger than device memory, and `intersect --placement auto` weighs those)",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> Profile {
        Profile::load("smartssd-2016").unwrap()
    }

    fn w(s: f64, theta: f64) -> Workload {
        Workload { total_bytes: 100e6, entry_size: s, theta, r: 0.01, result_entry_size: 4.0 }
    }

    fn close(got: f64, want: f64, tol: f64) -> bool {
        (got - want).abs() <= tol * want.abs()
    }

    #[test]
    fn table_2_of_the_paper_comes_out() {
        // (s, theta, N_m, T3 ms, T3' ms, method) from Table 2.
        for (s, theta, n_m, t3, t3d, method) in [
            (4.0, 1.0, 5e7, 261.0, 1087.0, "linear"),
            (256.0, 1.0, 7.8e5, 4.07, 16.96, "linear"),
            (4.0, 1000.0, 1.2e6, 6.41, 26.72, "binary"),
            (256.0, 1000.0, 14_512.0, 0.075, 0.31, "binary"),
        ] {
            let m = predict(&p(), &w(s, theta)).unwrap();
            assert_eq!(m.method, method, "s={s} theta={theta}");
            assert!(close(m.memory_accesses, n_m, 0.03), "s={s} theta={theta}: N_m {}", m.memory_accesses);
            assert!(close(m.stages[2].host_ms.unwrap(), t3, 0.03), "T3 {}", m.stages[2].host_ms.unwrap());
            assert!(
                close(m.stages[2].device_ms.unwrap(), t3d, 0.03),
                "T3' {}",
                m.stages[2].device_ms.unwrap()
            );
        }
    }

    #[test]
    fn load_copy_and_send_follow_section_4() {
        let m = predict(&p(), &w(256.0, 1000.0)).unwrap();
        assert!(close(m.stages[0].host_ms.unwrap(), 182.0, 0.01)); // 100 MB / 550 MB/s
        assert!(close(m.stages[0].device_ms.unwrap(), 66.7, 0.01)); // 100 MB / 1500 MB/s
        assert!(close(m.stages[1].device_ms.unwrap(), 58.6, 0.01)); // 100 MB / 256 B x 150 ns
        assert!(close(m.stages[3].device_ms.unwrap(), 2.8e-5, 0.05)); // §4.4
        assert_eq!(m.faster, "device", "at s = 256 and theta = 1000 offloading pays");
        let small = predict(&p(), &w(4.0, 1.0)).unwrap();
        assert_eq!(small.faster, "host", "at s = 4 the copy stage alone costs 3750 ms");
        assert!(close(small.stages[1].device_ms.unwrap(), 3750.0, 0.01));
    }

    #[test]
    fn bad_workloads_and_profiles_are_refused() {
        assert!(Workload::from_sizes(12.0, 24.0, 6.0, 0.1, 4.0).is_err());
        assert!(Workload::from_sizes(8.0, 16.0, 8.0, 1.5, 4.0).is_err());
        // A list smaller than one entry holds none (it gave |L1| = 0 and a verdict).
        let err = Workload::from_sizes(1.0, 1.0, 4.0, 0.1, 4.0).unwrap_err().to_string();
        assert!(err.contains("at least one 4-byte entry"), "{err}");
        assert!(Workload::from_sizes(4.0, 4.0, 4.0, 0.1, 4.0).is_ok());
        let w = Workload::from_sizes(50e6, 50e6, 256.0, 0.01, 4.0).unwrap();
        assert_eq!(w.theta, 1.0);
        let mut p = p();
        p.kernels.cycles.remove(insitu_device::work::INTERSECT_ACCESSES);
        let err = predict(&p, &w).unwrap_err().to_string();
        assert!(err.contains("prices no intersect.accesses on its kernels"), "{err}");
    }
}
