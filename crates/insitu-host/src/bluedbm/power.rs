//! The modeled energy of a run on a BlueDBM appliance (§6.2, Table 3: a node is its device, 40 W, and
//! its host, 200 W). Every node of the appliance draws power for the whole modeled time, as the single
//! device model prices a phase ([`crate::model::model`]): its device's and its host's active figure while
//! they are busy, their idle figure otherwise. What keeps a node busy is counted work priced by the
//! profile: pages its flash reads, its in-store engines' jobs, its host's CPU.

use std::collections::BTreeMap;

use insitu_device::Profile;
use serde::Serialize;

/// Modeled seconds each node's device and host were busy in a run (node numbers as the appliance's).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Busy {
    /// The device: its flash reading pages, its in-store processor's jobs.
    pub devices: BTreeMap<u32, f64>,
    /// The host: its CPU, over the threads it ran.
    pub hosts: BTreeMap<u32, f64>,
}

impl Busy {
    pub fn device(&mut self, node: u32, s: f64) {
        *self.devices.entry(node).or_default() += s;
    }

    pub fn host(&mut self, node: u32, s: f64) {
        *self.hosts.entry(node).or_default() += s;
    }

    pub fn add(&mut self, other: &Busy) {
        for (n, s) in &other.devices {
            self.device(*n, *s);
        }
        for (n, s) in &other.hosts {
            self.host(*n, *s);
        }
    }
}

/// A run's modeled time and energy on a profile, the appliance's nodes together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Modeled {
    pub profile: String,
    pub nodes: u32,
    pub time_s: f64,
    pub energy_j: f64,
    pub host_energy_j: f64,
    pub device_energy_j: f64,
}

/// The energy of `nodes` nodes over `time_s` modeled seconds, each busy as `busy` says (a busy time
/// longer than the run counts as the whole run).
pub fn modeled(profile: &Profile, nodes: u32, time_s: f64, busy: &Busy) -> Modeled {
    let joules = |busy: &BTreeMap<u32, f64>, active_w: f64, idle_w: f64| -> f64 {
        (0..nodes)
            .map(|n| {
                let b = busy.get(&n).copied().unwrap_or(0.0).min(time_s).max(0.0);
                active_w * b + idle_w * (time_s - b)
            })
            .sum()
    };
    let device_energy_j = joules(&busy.devices, profile.power.device_active_w, profile.power.device_idle_w);
    let host_energy_j = joules(&busy.hosts, profile.host.active_w, profile.host.idle_w);
    Modeled {
        profile: profile.name.clone(),
        nodes,
        time_s,
        energy_j: device_energy_j + host_energy_j,
        host_energy_j,
        device_energy_j,
    }
}

/// Seconds a device's flash is busy reading `pages` pages of `page_size` bytes, at its internal read
/// bandwidth (both cards).
pub fn flash_s(profile: &Profile, pages: u64, page_size: usize) -> f64 {
    (pages * page_size as u64) as f64 / profile.device.internal_read_bw
}

/// Seconds of one host core in its storage stack for `pages` page requests of `bytes` in all (the
/// profile's `[storage]` request and byte cycles).
pub(crate) fn storage_cpu_s(profile: &Profile, pages: u64, bytes: u64) -> f64 {
    let h = &profile.host;
    (pages as f64 * h.storage.request_cycles + bytes as f64 * h.storage.byte_cycles) / h.cpu.clock_hz
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_draws_idle_power_and_busy_ones_active_power() {
        let p = Profile::load("bluedbm").unwrap();
        let (dev_a, dev_i) = (p.power.device_active_w, p.power.device_idle_w);
        let (host_a, host_i) = (p.host.active_w, p.host.idle_w);
        // Nothing busy: 3 nodes at idle for 2 s.
        let idle = modeled(&p, 3, 2.0, &Busy::default());
        assert_eq!(idle.energy_j, 3.0 * 2.0 * (dev_i + host_i));
        let mut b = Busy::default();
        b.device(1, 0.5);
        b.device(1, 0.25);
        b.host(0, 1.5);
        b.host(2, 9.0); // longer than the run: the whole run
        let m = modeled(&p, 3, 2.0, &b);
        let want_dev = dev_a * 0.75 + dev_i * 1.25 + 2.0 * 2.0 * dev_i;
        let want_host = host_a * 1.5 + host_i * 0.5 + host_a * 2.0 + host_i * 2.0;
        assert!((m.device_energy_j - want_dev).abs() < 1e-9, "{} vs {want_dev}", m.device_energy_j);
        assert!((m.host_energy_j - want_host).abs() < 1e-9, "{} vs {want_host}", m.host_energy_j);
        assert_eq!(m.energy_j, m.device_energy_j + m.host_energy_j);
        assert_eq!((m.profile.as_str(), m.nodes, m.time_s), ("bluedbm", 3, 2.0));
        // §6.2 Table 3: a busy node draws 240 W.
        let mut all = Busy::default();
        all.device(0, 1.0);
        all.host(0, 1.0);
        assert_eq!(modeled(&p, 1, 1.0, &all).energy_j, 240.0);
    }
}
