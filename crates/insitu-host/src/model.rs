//! The virtual-time model: turns the counters of a run into modeled time and energy on a profile.
//!
//! A run is a sequence of phases (they follow one another). Within a phase, work streams: each resource
//! is busy for `bytes / bandwidth` or `CPU time x factor`, and the phase lasts as long as its busiest
//! resource (a bottleneck model, as the papers reason: "the kernel keeps up with the flash").
//!
//! Per device (devices work in parallel): flash (reads at the internal read bandwidth, plus the time pages
//! read together lost to sharing a channel; programs at the internal write bandwidth, erases at the erase
//! latency spread over all chips), device DRAM (every byte moved in or out of device memory), compute
//! (programs: measured CPU time of each kernel class x the profile's factor, spread over the compute units
//! that ran programs; resident firmware: its counted work x the profile's `[firmware]` cycles), its host
//! link (per-device bandwidth each
//! way), and its network port (device to device, plus each hop's latency). Shared by all devices: the host's uplink
//! (`host_link.shared_bw`). The host: its CPU time x `host_factor`, over the threads it used.
//!
//! Energy: each device and the host draw active power while busy and idle power for the rest of the phase.

use std::collections::BTreeMap;

use insitu_device::{DeviceCounters, Profile};
use serde::Serialize;

/// Work the host side did in a phase: on the host CPU, or on an accelerator beside the host (NASCENT's
/// "FPGA baseline": one accelerator on the host's bus, serving the devices one at a time).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostWork {
    pub cpu_ns_by_class: BTreeMap<String, u64>,
    /// Threads the host work was spread over (at least 1).
    pub threads: u32,
    /// The work ran on the accelerator: priced with the profile's device factors and device power.
    pub accelerator: bool,
    /// Bytes moved between host memory and the accelerator, over the shared host bus.
    pub accel_bytes: u64,
}

impl HostWork {
    pub fn single(class: &str, cpu_ns: u64) -> HostWork {
        let mut m = BTreeMap::new();
        if cpu_ns > 0 {
            m.insert(class.to_string(), cpu_ns);
        }
        HostWork { cpu_ns_by_class: m, threads: 1, ..Default::default() }
    }

    /// The same work, done by the accelerator beside the host, which also received and returned
    /// `accel_bytes` over the shared bus.
    pub fn on_accelerator(mut self, accel_bytes: u64) -> HostWork {
        self.accelerator = true;
        self.accel_bytes = accel_bytes;
        self
    }
}

/// The measured usage of one phase.
#[derive(Debug, Clone, Default)]
pub struct PhaseUsage {
    pub name: String,
    /// One entry per device of the array (zeros for idle devices).
    pub devices: Vec<DeviceCounters>,
    pub host: HostWork,
}

/// How long each resource of one device was busy in a phase, in seconds.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DeviceBusy {
    pub flash_s: f64,
    pub dram_s: f64,
    pub compute_s: f64,
    pub host_link_s: f64,
    pub network_s: f64,
    pub latency_s: f64,
    pub busy_s: f64,
}

/// The modeled cost of one phase.
#[derive(Debug, Clone, Serialize)]
pub struct ModeledPhase {
    pub name: String,
    pub time_s: f64,
    pub bottleneck: String,
    pub host_s: f64,
    pub shared_link_s: f64,
    pub devices: Vec<DeviceBusy>,
    pub energy_j: f64,
}

/// The modeled cost of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Modeled {
    pub profile: String,
    pub devices: usize,
    pub time_s: f64,
    pub energy_j: f64,
    pub host_energy_j: f64,
    pub device_energy_j: f64,
    pub phases: Vec<ModeledPhase>,
}

/// Models one device's phase.
pub fn device_busy(p: &Profile, c: &DeviceCounters) -> DeviceBusy {
    let chips = (p.nand.channels * p.nand.chips_per_channel).max(1) as f64;
    let flash_s = (c.flash_read_bytes + c.flash_read_conflict_bytes) as f64 / p.device.internal_read_bw
        + c.flash_program_bytes as f64 / p.device.internal_write_bw
        + c.flash_erase_blocks as f64 * p.nand.erase_latency_us * 1e-6 / chips;
    let dram_bytes = c.flash_to_device_mem
        + c.device_mem_to_flash
        + c.host_to_device
        + c.device_to_host
        + c.device_to_device_in
        + c.device_to_device_out;
    let dram_s = dram_bytes as f64 / p.device.memory_bw;
    let runs: u64 = c.programs.values().map(|s| s.runs).sum();
    let parallel = (p.device.compute_units as u64).min(runs.max(1)) as f64;
    let programs_s =
        c.cpu_ns_by_class.iter().map(|(class, ns)| *ns as f64 * 1e-9 * p.device_factor(class)).sum::<f64>()
            / parallel;
    // Resident firmware: counted work at the firmware processor's cycles (the same on any machine).
    let firmware_s: f64 = c.work.iter().map(|(w, n)| p.firmware.seconds(w, *n)).sum();
    let compute_s = programs_s + firmware_s;
    let host_link_s =
        c.device_to_host as f64 / p.host_link.read_bw + c.host_to_device as f64 / p.host_link.write_bw;
    let network_s = c.device_to_device_out.max(c.device_to_device_in) as f64 / p.network.link_bw;
    let mut latency_s = 0.0;
    if c.device_to_host + c.host_to_device > 0 {
        latency_s += p.host_link.latency_us * 1e-6;
    }
    // Every transfer pays each hop's latency: those this device sent, or those it waited to receive.
    let hops = c.device_to_device_hops_out.max(c.device_to_device_hops_in);
    latency_s += hops as f64 * p.network.hop_latency_us * 1e-6;
    if c.flash_read_bytes > 0 {
        latency_s += p.nand.read_latency_us * 1e-6;
    }
    let busy_s = flash_s.max(dram_s).max(compute_s).max(host_link_s).max(network_s);
    DeviceBusy { flash_s, dram_s, compute_s, host_link_s, network_s, latency_s, busy_s }
}

/// Models a whole run.
pub fn model(p: &Profile, phases: &[PhaseUsage]) -> Modeled {
    let mut out = Modeled {
        profile: p.name.clone(),
        devices: phases.iter().map(|ph| ph.devices.len()).max().unwrap_or(0),
        time_s: 0.0,
        energy_j: 0.0,
        host_energy_j: 0.0,
        device_energy_j: 0.0,
        phases: Vec::new(),
    };
    for ph in phases {
        let devices: Vec<DeviceBusy> = ph.devices.iter().map(|c| device_busy(p, c)).collect();
        let host_bytes: u64 =
            ph.devices.iter().map(|c| c.device_to_host + c.host_to_device).sum::<u64>() + ph.host.accel_bytes;
        let shared_link_s = host_bytes as f64 / p.host_link.shared_bw;
        let (mut host_s, mut accel_s) = (0.0, 0.0);
        if ph.host.accelerator {
            accel_s = ph
                .host
                .cpu_ns_by_class
                .iter()
                .map(|(c, ns)| *ns as f64 * 1e-9 * p.device_factor(c))
                .sum::<f64>()
                / ph.host.threads.max(1) as f64;
        } else {
            let cpu_s: f64 = ph.host.cpu_ns_by_class.values().map(|ns| *ns as f64 * 1e-9).sum();
            host_s = cpu_s * p.compute.host_factor / ph.host.threads.max(1) as f64;
        }

        let mut time_s = 0.0;
        let mut bottleneck = String::from("idle");
        for (d, b) in devices.iter().enumerate() {
            let t = b.busy_s + b.latency_s;
            if t > time_s {
                time_s = t;
                bottleneck = format!("device {d} {}", busiest(b));
            }
        }
        if shared_link_s > time_s {
            time_s = shared_link_s;
            bottleneck = "shared host link".into();
        }
        if host_s > time_s {
            time_s = host_s;
            bottleneck = "host cpu".into();
        }
        if accel_s > time_s {
            time_s = accel_s;
            bottleneck = "accelerator".into();
        }
        let dev_energy: f64 = devices
            .iter()
            .map(|b| {
                p.power.device_active_w * b.busy_s + p.power.device_idle_w * (time_s - b.busy_s).max(0.0)
            })
            .sum();
        let mut host_energy =
            p.power.host_active_w * host_s + p.power.host_idle_w * (time_s - host_s).max(0.0);
        if ph.host.accelerator {
            host_energy +=
                p.power.device_active_w * accel_s + p.power.device_idle_w * (time_s - accel_s).max(0.0);
        }
        out.time_s += time_s;
        out.device_energy_j += dev_energy;
        out.host_energy_j += host_energy;
        out.energy_j += dev_energy + host_energy;
        out.phases.push(ModeledPhase {
            name: ph.name.clone(),
            time_s,
            bottleneck,
            host_s: host_s + accel_s,
            shared_link_s,
            devices,
            energy_j: dev_energy + host_energy,
        });
    }
    out
}

fn busiest(b: &DeviceBusy) -> &'static str {
    let all = [
        (b.flash_s, "flash"),
        (b.dram_s, "dram"),
        (b.compute_s, "compute"),
        (b.host_link_s, "host link"),
        (b.network_s, "network"),
    ];
    all.iter().fold((0.0, "latency"), |acc, x| if x.0 > acc.0 { *x } else { acc }).1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Profile {
        Profile::load("tiny").unwrap()
    }

    fn approx(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn in_device_scan_is_flash_bound_by_hand() {
        // tiny: internal read 1 GB/s, search factor = default 4.0, read latency 50 us, 2 compute units.
        let mut c = DeviceCounters { flash_read_bytes: 1_000_000_000, ..Default::default() };
        c.flash_to_device_mem = 1_000_000_000;
        c.cpu_ns_by_class.insert("search".into(), 100_000_000); // 0.1 s here -> 0.4 s on the device
        c.programs.insert("search".into(), insitu_device::ProgramStats { runs: 1, ..Default::default() });
        let m = model(
            &tiny(),
            &[PhaseUsage { name: "scan".into(), devices: vec![c], host: HostWork::default() }],
        );
        let b = &m.phases[0].devices[0];
        assert!(approx(b.flash_s, 1.0));
        assert!(approx(b.compute_s, 0.4));
        assert!(approx(b.dram_s, 0.1)); // 1 GB over 10 GB/s
        assert!(approx(m.time_s, 1.0 + 50e-6));
        assert_eq!(m.phases[0].bottleneck, "device 0 flash");
        // energy: device 5 W x 1 s busy + 1 W x 50 us idle; host idle 10 W x (1 s + 50 us).
        assert!(approx(m.energy_j, 5.0 + 1.0 * 50e-6 + 10.0 * (1.0 + 50e-6)));
    }

    #[test]
    fn devices_in_parallel_share_the_host_uplink_by_hand() {
        // Two devices each send 0.4 GB to the host: 0.8 s each on their own 0.5 GB/s links, but
        // 0.8 GB over the 0.8 GB/s shared uplink takes 1.0 s.
        let c = DeviceCounters { device_to_host: 400_000_000, ..Default::default() };
        let host = HostWork::single("search", 500_000_000); // 0.5 s of host CPU
        let m = model(&tiny(), &[PhaseUsage { name: "read".into(), devices: vec![c.clone(), c], host }]);
        assert!(approx(m.phases[0].devices[0].host_link_s, 0.8));
        assert!(approx(m.phases[0].shared_link_s, 1.0));
        assert!(approx(m.time_s, 1.0));
        assert_eq!(m.phases[0].bottleneck, "shared host link");
        // host: 50 W x 0.5 s + 10 W x 0.5 s; devices: 2 x (5 W x 0.8 s + 1 W x 0.2 s).
        assert!(approx(m.host_energy_j, 30.0));
        assert!(approx(m.device_energy_j, 2.0 * (4.0 + 0.2)));
    }

    #[test]
    fn an_accelerator_beside_the_host_is_priced_as_a_device_by_hand() {
        // tiny: default device factor 4.0, device 5 W active / 1 W idle, shared bus 0.8 GB/s.
        // 0.1 s of CPU here -> 0.4 s on the accelerator; 0.4 GB to and from it -> 0.5 s on the bus.
        let c = DeviceCounters { device_to_host: 200_000_000, ..Default::default() };
        let host = HostWork::single("sort", 100_000_000).on_accelerator(200_000_000);
        let m = model(&tiny(), &[PhaseUsage { name: "dev0".into(), devices: vec![c], host }]);
        assert!(approx(m.phases[0].shared_link_s, 0.5));
        assert!(approx(m.phases[0].host_s, 0.4));
        assert!(approx(m.time_s, 0.5));
        assert_eq!(m.phases[0].bottleneck, "shared host link");
        // host idle 10 W x 0.5 s; accelerator 5 W x 0.4 s + 1 W x 0.1 s; device 5 W x 0.4 s + 1 W x 0.1 s.
        assert!(approx(m.energy_j, 5.0 + 2.1 + 2.1), "{}", m.energy_j);
    }

    #[test]
    fn device_to_device_transfers_pay_bandwidth_and_each_hop_by_hand() {
        let p = tiny();
        // 0.5 GB out over one link, in three transfers of one hop each (or one transfer of three hops).
        let c = DeviceCounters {
            device_to_device_out: 500_000_000,
            device_to_device_hops_out: 3,
            ..Default::default()
        };
        let m = model(&p, &[PhaseUsage { name: "copy".into(), devices: vec![c], host: HostWork::default() }]);
        let b = &m.phases[0].devices[0];
        assert!(approx(b.network_s, 500_000_000.0 / p.network.link_bw));
        assert!(approx(b.latency_s, 3.0 * p.network.hop_latency_us * 1e-6));
        // The receiver waits for the hops its transfers crossed.
        let r =
            DeviceCounters { device_to_device_in: 1000, device_to_device_hops_in: 2, ..Default::default() };
        assert!(approx(device_busy(&p, &r).latency_s, 2.0 * p.network.hop_latency_us * 1e-6));
    }

    #[test]
    fn phases_add_up_and_the_host_can_be_the_bottleneck() {
        let host = HostWork::single("search", 2_000_000_000);
        let ph = PhaseUsage { name: "host".into(), devices: vec![DeviceCounters::default()], host };
        let m = model(&tiny(), &[ph.clone(), ph]);
        assert!(approx(m.time_s, 4.0));
        assert_eq!(m.phases[1].bottleneck, "host cpu");
    }
}
