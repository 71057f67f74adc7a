//! The virtual-time model: turns the counters of a run into modeled time and energy on a profile.
//!
//! A run is a sequence of phases (they follow one another). Within a phase, work streams: each resource
//! is busy for `bytes / bandwidth` or for the time its engine takes for the work counted, and the phase
//! lasts as long as its busiest resource (a bottleneck model, as the papers reason: "the kernel keeps up
//! with the flash"). Nothing measured here enters the model: the same run gives the same modeled time
//! and energy on any machine.
//!
//! Per device (devices work in parallel): flash (reads at the internal read bandwidth, plus the time pages
//! read together lost to sharing a channel; programs at the internal write bandwidth, erases at the erase
//! latency spread over all chips), device DRAM (every byte moved in or out of device memory), compute
//! (programs' counted work priced by the profile's `[kernels]` engine, spread over the compute units that
//! ran programs; resident firmware's counted work at the profile's `[firmware]` cycles), its host link
//! (per-device bandwidth each way), and its network port (device to device, plus each hop's latency).
//! Shared by all devices: the host's uplink (`host_link.shared_bw`). The host: its counted work priced by
//! the host profile's core, spread over the threads it used (at most its cores), or by the accelerator
//! beside the host; and its storage stack (the host profile's `[storage]`): the bytes it moves to and from
//! the devices go in requests, each costing host CPU and each waiting for the device's latency and its
//! transfer, with as many in flight as the host's threads keep (a synchronous reader pays every latency).
//!
//! Energy: each device and the host draw active power while busy and idle power for the rest of the phase.

use std::collections::{BTreeMap, BTreeSet};

use insitu_device::profile::StorageStack;
use insitu_device::work::Ledger;
use insitu_device::{DeviceCounters, Profile};
use serde::Serialize;

/// Work the host side did in a phase: on the host CPU, or on an accelerator beside the host (NASCENT's
/// "FPGA baseline": one accelerator on the host's bus, serving the devices one at a time).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostWork {
    /// The work, counted (see `insitu_device::work`).
    pub work: Ledger,
    /// Threads the host work was spread over (at least 1).
    pub threads: u32,
    /// The work ran on the accelerator beside the host.
    pub accelerator: bool,
    /// Bytes moved between host memory and the accelerator, over the shared host bus.
    pub accel_bytes: u64,
}

/// The `memory_bytes` item for the bytes the host's storage stack moves (into the page cache and copied
/// out of it).
pub const STORAGE_BYTES: &str = "storage.bytes";

/// The storage stack a phase's host I/O goes through: the accelerator's host program's, in a phase of
/// work for the accelerator when it has its own, else the host's.
fn storage_stack<'a>(p: &'a Profile, h: &HostWork) -> &'a StorageStack {
    p.host
        .accelerator
        .as_ref()
        .filter(|_| h.accelerator)
        .and_then(|a| a.storage.as_ref())
        .unwrap_or(&p.host.storage)
}

impl HostWork {
    /// Work counted on one host thread.
    pub fn counted(work: Ledger) -> HostWork {
        HostWork { work, threads: 1, ..Default::default() }
    }

    /// The same work, spread over `threads` threads.
    pub fn on_threads(mut self, threads: u32) -> HostWork {
        self.threads = threads.max(1);
        self
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
    /// Compute seconds by stage (work item, or `firmware`), before spreading over compute units.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub compute_stages: BTreeMap<String, f64>,
    #[serde(skip)]
    pub unpriced: Vec<String>,
}

/// The modeled cost of one phase.
#[derive(Debug, Clone, Serialize)]
pub struct ModeledPhase {
    pub name: String,
    pub time_s: f64,
    pub bottleneck: String,
    pub host_s: f64,
    pub shared_link_s: f64,
    /// The host storage stack's requests in the phase, and the time they took: their waits over the
    /// requests the host's threads keep in flight, then their CPU on those threads.
    pub host_requests: u64,
    pub host_io_s: f64,
    /// The host CPU's seconds (its counted work and its requests' CPU, over its threads), before its
    /// memory traffic's bound; and the accelerator's.
    pub host_cpu_s: f64,
    pub accel_s: f64,
    /// The host's DRAM traffic in the phase, and its time at the host's memory bandwidth (all threads
    /// share it): the host's time is at least this.
    pub host_memory_bytes: f64,
    pub host_memory_s: f64,
    pub devices: Vec<DeviceBusy>,
    pub energy_j: f64,
}

/// The modeled cost of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Modeled {
    pub profile: String,
    /// The host profile its host work is priced on (the device profile's, or `--host-profile`).
    pub host: String,
    pub devices: usize,
    pub time_s: f64,
    pub energy_j: f64,
    pub host_energy_j: f64,
    pub device_energy_j: f64,
    pub phases: Vec<ModeledPhase>,
    /// Work items the profile has no price for (modeled as free): empty for the built-in profiles.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub unpriced: BTreeSet<String>,
}

/// Bytes a phase moved through the device's DRAM: to and from flash, the host and its peers.
fn dram_bytes(c: &DeviceCounters) -> u64 {
    c.flash_to_device_mem
        + c.device_mem_to_flash
        + c.host_to_device
        + c.device_to_host
        + c.device_to_device_in
        + c.device_to_device_out
}

/// Compute units a phase's programs kept busy at once: one a run of a program that computes, or as many
/// as the pieces a data-parallel run splits into (those that only move data, `heads`, take none), at most
/// the device's units.
fn compute_parallelism(p: &Profile, c: &DeviceCounters) -> f64 {
    let pieces: u64 = c.programs.values().filter(|s| s.kernel_class != "transfer").map(|s| s.pieces()).sum();
    (p.device.compute_units as u64).min(pieces.max(1)) as f64
}

/// The host's I/O of one device's phase (see `HostProfile::storage`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct HostIo {
    /// Requests the host issued: the bytes it moved, in requests, and at least one per command.
    requests: u64,
    /// Bytes the host moved itself (to or from its memory).
    bytes: u64,
    /// Seconds the host's own reads and writes wait, one after another (before the queue depth).
    wait_s: f64,
}

fn host_io(p: &Profile, s: &StorageStack, c: &DeviceCounters) -> HostIo {
    let n = |b: u64| b.div_ceil(s.request_bytes.max(1));
    let (reads, writes) = (n(c.device_to_host), n(c.host_to_device));
    // Each request waits for the device's latency; the bytes cross at the link's pace.
    let wait_s = reads as f64 * p.nand.read_latency_us * 1e-6
        + c.device_to_host as f64 / p.host_link.read_bw
        + writes as f64 * p.host_link.latency_us * 1e-6
        + c.host_to_device as f64 / p.host_link.write_bw;
    HostIo { requests: (reads + writes).max(c.commands), bytes: c.device_to_host + c.host_to_device, wait_s }
}

/// Models one device's phase.
pub fn device_busy(p: &Profile, c: &DeviceCounters) -> DeviceBusy {
    let chips = (p.nand.channels * p.nand.chips_per_channel).max(1) as f64;
    let flash_s = (c.flash_read_bytes + c.flash_read_conflict_bytes) as f64 / p.device.internal_read_bw
        + c.flash_program_bytes as f64 / p.device.internal_write_bw
        + c.flash_erase_blocks as f64 * p.nand.erase_latency_us * 1e-6 / chips;
    let dram_bytes = dram_bytes(c);
    let dram_s = dram_bytes as f64 / p.device.memory_bw;
    let parallel = compute_parallelism(p, c);
    // Resident firmware's work at the firmware processor's cycles; programs' work on the kernels.
    let (firmware, programs): (Ledger, Ledger) =
        c.work.iter().map(|(k, v)| (k.clone(), *v)).partition(|(k, _)| p.firmware.cycles.contains_key(k));
    let firmware_s = firmware.iter().map(|(w, n)| p.firmware.seconds(w, *n)).fold(0.0, |a, b| a + b);
    let priced = p.kernels.price(&programs);
    let compute_s = priced.seconds() / parallel + firmware_s;
    let mut compute_stages = priced.stages;
    if firmware_s > 0.0 {
        compute_stages.insert("firmware".into(), firmware_s);
    }
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
    DeviceBusy {
        flash_s,
        dram_s,
        compute_s,
        host_link_s,
        network_s,
        latency_s,
        busy_s,
        compute_stages,
        unpriced: priced.unpriced,
    }
}

/// Models a whole run.
pub fn model(p: &Profile, phases: &[PhaseUsage]) -> Modeled {
    let mut out = Modeled {
        profile: p.name.clone(),
        host: p.host.name.clone(),
        devices: phases.iter().map(|ph| ph.devices.len()).max().unwrap_or(0),
        time_s: 0.0,
        energy_j: 0.0,
        host_energy_j: 0.0,
        device_energy_j: 0.0,
        phases: Vec::new(),
        unpriced: BTreeSet::new(),
    };
    for ph in phases {
        let devices: Vec<DeviceBusy> = ph.devices.iter().map(|c| device_busy(p, c)).collect();
        let host_bytes: u64 =
            ph.devices.iter().map(|c| c.device_to_host + c.host_to_device).sum::<u64>() + ph.host.accel_bytes;
        let shared_link_s = host_bytes as f64 / p.host_link.shared_bw;
        // The host's requests: their CPU on the threads, their waits over the requests the threads keep
        // in flight.
        let threads = ph.host.threads.clamp(1, p.host.cores);
        let stack = storage_stack(p, &ph.host);
        let io: Vec<HostIo> = ph.devices.iter().map(|c| host_io(p, stack, c)).collect();
        let host_requests: u64 = io.iter().map(|x| x.requests).sum();
        let io_cpu_s = (host_requests as f64 * stack.request_cycles
            + io.iter().map(|x| x.bytes).sum::<u64>() as f64 * stack.byte_cycles)
            / p.host.cpu.clock_hz;
        let queue = (u64::from(threads) * u64::from(stack.queue_depth)).max(1) as f64;
        let io_wait_s = io.iter().map(|x| x.wait_s).sum::<f64>() / queue;
        let (mut host_s, mut accel_s) = (io_cpu_s / threads as f64, 0.0);
        let accelerator = p.host.accelerator.as_ref().filter(|_| ph.host.accelerator);
        match accelerator {
            Some(a) => {
                let priced = a.engine.price(&ph.host.work);
                out.unpriced.extend(priced.unpriced.iter().cloned());
                accel_s = priced.seconds();
            }
            None => {
                let priced = p.host.cpu.price(&ph.host.work);
                out.unpriced.extend(priced.unpriced.iter().cloned());
                host_s += priced.seconds() / threads as f64;
            }
        }
        // Host DRAM traffic: the host's own work (not the accelerator's), and the bytes its storage stack
        // moves through host memory either way.
        let traffic = |item: &str, n: f64| p.host.memory_bytes.get(item).map_or(0.0, |b| b * n);
        let work_traffic: f64 = if ph.host.accelerator {
            0.0
        } else {
            ph.host.work.iter().map(|(k, v)| traffic(k, *v as f64)).sum()
        };
        let host_memory_bytes =
            work_traffic + traffic(STORAGE_BYTES, io.iter().map(|x| x.bytes).sum::<u64>() as f64);
        let host_memory_s = host_memory_bytes / p.host.memory_bw;
        let host_cpu_s = host_s;
        let memory_bound = host_memory_s > host_s;
        host_s = host_s.max(host_memory_s);
        for d in &devices {
            out.unpriced.extend(d.unpriced.iter().cloned());
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
        // A request's wait and the host's CPU for it follow one another on a thread.
        let host_io_s = io_wait_s + io_cpu_s / threads as f64;
        if host_io_s > time_s && io_wait_s > 0.0 {
            time_s = host_io_s;
            bottleneck = "host storage stack".into();
        }
        if host_s > time_s {
            time_s = host_s;
            bottleneck = if memory_bound { "host memory" } else { "host cpu" }.into();
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
        let mut host_energy = p.host.active_w * host_s + p.host.idle_w * (time_s - host_s).max(0.0);
        if let Some(a) = accelerator {
            host_energy += a.active_w * accel_s + a.idle_w * (time_s - accel_s).max(0.0);
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
            host_requests,
            host_io_s,
            host_cpu_s,
            accel_s,
            host_memory_bytes,
            host_memory_s,
            devices,
            energy_j: dev_energy + host_energy,
        });
    }
    out
}

/// One modeled stage of a phase beside the counters it was priced from (issue 13: a reader can redo each
/// stage from the run's counters and the profile).
#[derive(Debug, Clone, Serialize)]
pub struct StageLine {
    pub phase: String,
    /// `device 3 flash`, `device 3 compute sort.b32.n17.keys`, `host cpu`, `shared host link`.
    pub stage: String,
    pub seconds: f64,
    /// The counters, and the profile's figures that priced them.
    pub from: String,
}

/// Every phase's stages: for the busiest device (and the host, the shared link, an accelerator), each
/// stage's modeled seconds beside the counters and the profile's rates it comes from.
pub fn stage_lines(p: &Profile, phases: &[PhaseUsage], m: &Modeled) -> Vec<StageLine> {
    let mut out = Vec::new();
    for (u, ph) in phases.iter().zip(&m.phases) {
        let mut line = |stage: String, seconds: f64, from: String| {
            if seconds > 0.0 {
                out.push(StageLine { phase: ph.name.clone(), stage, seconds, from });
            }
        };
        let busiest = ph.devices.iter().enumerate().max_by(|a, b| a.1.busy_s.total_cmp(&b.1.busy_s));
        if let Some((d, b)) = busiest {
            let c = &u.devices[d];
            // As device_busy prices them: programs' work over the compute units in use, firmware's not.
            let parallel = compute_parallelism(p, c);
            line(
                format!("device {d} flash"),
                b.flash_s,
                format!(
                    "{} read + {} conflict bytes / {} B/s, {} programmed / {} B/s, {} erases",
                    c.flash_read_bytes,
                    c.flash_read_conflict_bytes,
                    p.device.internal_read_bw,
                    c.flash_program_bytes,
                    p.device.internal_write_bw,
                    c.flash_erase_blocks
                ),
            );
            let dram = dram_bytes(c);
            line(format!("device {d} dram"), b.dram_s, format!("{dram} bytes / {} B/s", p.device.memory_bw));
            for (item, secs) in &b.compute_stages {
                // A stage is one item of work, or (sorts and merges) the items of its classes:
                // `sort.b32.n10.keys` and the like.
                let counts: Vec<String> = match c.work.get(item) {
                    Some(n) => vec![format!("{item} = {n}")],
                    None => c
                        .work
                        .iter()
                        .filter(|(k, _)| {
                            k.starts_with(&format!("{item}.")) && !b.compute_stages.contains_key(*k)
                        })
                        .map(|(k, n)| format!("{k} = {n}"))
                        .collect(),
                };
                let from = if item == "firmware" {
                    format!("firmware work at {} Hz", p.firmware.clock_hz)
                } else {
                    format!(
                        "{} priced by [kernels] at {} Hz, over the compute units in use",
                        counts.join(", "),
                        p.kernels.clock_hz
                    )
                };
                let secs = if item == "firmware" { *secs } else { secs / parallel };
                line(format!("device {d} compute {item}"), secs, from);
            }
            line(
                format!("device {d} host link"),
                b.host_link_s,
                format!(
                    "{} bytes out / {} B/s, {} in / {} B/s",
                    c.device_to_host, p.host_link.read_bw, c.host_to_device, p.host_link.write_bw
                ),
            );
            line(
                format!("device {d} network"),
                b.network_s,
                format!(
                    "{} bytes / {} B/s",
                    c.device_to_device_out.max(c.device_to_device_in),
                    p.network.link_bw
                ),
            );
            line(
                format!("device {d} latency"),
                b.latency_s,
                "the profile's latencies of the paths used".into(),
            );
        }
        let bytes: u64 =
            u.devices.iter().map(|c| c.device_to_host + c.host_to_device).sum::<u64>() + u.host.accel_bytes;
        line(
            "shared host link".into(),
            ph.shared_link_s,
            format!("{bytes} bytes / {} B/s", p.host_link.shared_bw),
        );
        let st = storage_stack(p, &u.host);
        let threads = u.host.threads.clamp(1, p.host.cores);
        line(
            "host storage stack".into(),
            ph.host_io_s,
            format!(
                "{} requests of at most {} bytes, each waiting for the device's latency ({} us a read, {} us a \
                 write), the bytes at the link's pace, {} in flight ({} thread(s) x queue depth {}); then \
                 {} cycles a request and {} a byte at {} Hz, over the threads",
                ph.host_requests,
                st.request_bytes,
                p.nand.read_latency_us,
                p.host_link.latency_us,
                u64::from(threads) * u64::from(st.queue_depth),
                threads,
                st.queue_depth,
                st.request_cycles,
                st.byte_cycles,
                p.host.cpu.clock_hz,
            ),
        );
        line(
            "host memory".into(),
            ph.host_memory_s,
            format!(
                "{:.0} bytes of DRAM traffic (the host work's items by the host profile's memory_bytes) / {} B/s, \
                 shared by all threads",
                ph.host_memory_bytes, p.host.memory_bw
            ),
        );
        let items = |w: &Ledger| w.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ");
        let on_accel = p.host.accelerator.as_ref().filter(|_| u.host.accelerator);
        let mut cpu = if on_accel.is_some() { String::new() } else { items(&u.host.work) };
        if ph.host_requests > 0 {
            cpu.push_str(&format!(
                "{}{} storage requests at {} cycles and {} cycles a byte moved",
                if cpu.is_empty() { "" } else { ", " },
                ph.host_requests,
                st.request_cycles,
                st.byte_cycles
            ));
        }
        line(
            "host cpu".into(),
            ph.host_cpu_s,
            format!("{cpu} priced at {} Hz, over {threads} thread(s)", p.host.cpu.clock_hz),
        );
        if let Some(a) = on_accel {
            line(
                "accelerator".into(),
                ph.accel_s,
                format!(
                    "{} priced by the accelerator's engine at {} Hz",
                    items(&u.host.work),
                    a.engine.clock_hz
                ),
            );
        }
    }
    out
}

/// The stage lines as a Markdown table.
pub fn stage_table(lines: &[StageLine]) -> String {
    let mut s = String::from("| phase | stage | modeled s | from |\n|---|---|---:|---|\n");
    for l in lines {
        s.push_str(&format!("| {} | {} | {:.6} | {} |\n", l.phase, l.stage, l.seconds, l.from));
    }
    s
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
    use insitu_device::work::{self, SortClass};

    fn tiny() -> Profile {
        Profile::load("tiny").unwrap()
    }

    fn approx(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    fn ledger(items: &[(&str, u64)]) -> Ledger {
        let mut l = Ledger::new();
        for (k, v) in items {
            work::add(&mut l, k, *v);
        }
        l
    }

    #[test]
    fn in_device_scan_is_flash_bound_by_hand() {
        // tiny: internal read 1 GB/s, read latency 50 us, 2 compute units; its kernels scan at 4 cycles
        // a byte at 1 GHz: 100 MB scanned -> 0.4 s, however long it took here.
        let mut c = DeviceCounters { flash_read_bytes: 1_000_000_000, ..Default::default() };
        c.flash_to_device_mem = 1_000_000_000;
        c.cpu_ns_by_class.insert("search".into(), 123_456_789);
        c.work = ledger(&[(work::SEARCH_BYTES, 100_000_000)]);
        c.programs.insert("search".into(), insitu_device::ProgramStats { runs: 1, ..Default::default() });
        let m = model(
            &tiny(),
            &[PhaseUsage { name: "scan".into(), devices: vec![c], host: HostWork::default() }],
        );
        let b = &m.phases[0].devices[0];
        assert!(approx(b.flash_s, 1.0));
        assert!(approx(b.compute_s, 0.4));
        assert!(approx(b.compute_stages["search.bytes"], 0.4));
        assert!(approx(b.dram_s, 0.1)); // 1 GB over 10 GB/s
        assert!(approx(m.time_s, 1.0 + 50e-6));
        assert_eq!(m.phases[0].bottleneck, "device 0 flash");
        assert!(m.unpriced.is_empty());
        // energy: device 5 W x 1 s busy + 1 W x 50 us idle; host idle 10 W x (1 s + 50 us).
        assert!(approx(m.energy_j, 5.0 + 1.0 * 50e-6 + 10.0 * (1.0 + 50e-6)));
    }

    #[test]
    fn a_sort_stage_line_names_the_counts_of_its_classes() {
        // The sort stage prices items by class (`sort.b32.n17.keys`, `...calls`): its line gives them,
        // not a count of an item named `sort` (which no ledger has).
        let mut c = DeviceCounters::default();
        SortClass::count(&mut c.work, work::SORT, 32, 1 << 17);
        let phases = [PhaseUsage { name: "sort".into(), devices: vec![c], host: HostWork::default() }];
        let m = model(&tiny(), &phases);
        let lines = stage_lines(&tiny(), &phases, &m);
        let sort = lines.iter().find(|l| l.stage == "device 0 compute sort").expect("a sort stage line");
        assert!(sort.from.contains("sort.b32.n17.keys = 131072"), "{}", sort.from);
        assert!(!sort.from.contains("sort = 0"), "{}", sort.from);
    }

    #[test]
    fn devices_in_parallel_share_the_host_uplink_by_hand() {
        // Two devices each send 0.4 GB to the host: 0.8 s each on their own 0.5 GB/s links, but
        // 0.8 GB over the 0.8 GB/s shared uplink takes 1.0 s.
        let c = DeviceCounters { device_to_host: 400_000_000, ..Default::default() };
        // tiny-host: a byte scanned is a cycle at 1 GHz: 0.5 s of host work.
        let host = HostWork::counted(ledger(&[(work::SEARCH_BYTES, 500_000_000)]));
        let m = model(&tiny(), &[PhaseUsage { name: "read".into(), devices: vec![c.clone(), c], host }]);
        assert!(approx(m.phases[0].devices[0].host_link_s, 0.8));
        assert!(approx(m.phases[0].shared_link_s, 1.0));
        assert!(approx(m.phases[0].host_s, 0.5));
        assert!(approx(m.time_s, 1.0));
        assert_eq!(m.phases[0].bottleneck, "shared host link");
        // host: 50 W x 0.5 s + 10 W x 0.5 s; devices: 2 x (5 W x 0.8 s + 1 W x 0.2 s).
        assert!(approx(m.host_energy_j, 30.0));
        assert!(approx(m.device_energy_j, 2.0 * (4.0 + 0.2)));
    }

    #[test]
    fn host_work_spreads_over_threads_up_to_the_cores() {
        let w = ledger(&[(work::GATHER_ROWS, 1_000_000_000)]);
        let t = |threads| {
            let host = HostWork::counted(w.clone()).on_threads(threads);
            model(&tiny(), &[PhaseUsage { name: "h".into(), devices: vec![], host }]).time_s
        };
        assert!(approx(t(1), 1.0));
        assert!(approx(t(2), 0.5));
        assert!(approx(t(8), 0.5)); // tiny-host has 2 cores
    }

    #[test]
    fn an_accelerator_beside_the_host_is_priced_by_its_engine_by_hand() {
        // tiny-host's accelerator: 1 GHz, a comparison sort at 1 cycle per key and level, 5 W / 1 W.
        // 2^20 keys of 32 bits: 20 levels -> 20.97 ms; 12 MiB (8-byte elements) > 1 MiB of cache:
        // log2(8) = 3 levels over memory at 1 GB/s, 2 x 8 MiB each -> 50.33 ms. 0.4 GB over the
        // 0.8 GB/s shared bus -> 0.5 s.
        let c = DeviceCounters { device_to_host: 200_000_000, ..Default::default() };
        let mut l = Ledger::new();
        SortClass::count(&mut l, work::SORT, 32, 1 << 20);
        let host = HostWork::counted(l).on_accelerator(200_000_000);
        let m = model(&tiny(), &[PhaseUsage { name: "dev0".into(), devices: vec![c], host }]);
        let sort = (1u64 << 20) as f64 * 20.0 / 1e9 + 3.0 * 2.0 * (8u64 << 20) as f64 / 1e9;
        assert!(approx(m.phases[0].host_s, sort), "{}", m.phases[0].host_s);
        assert!(approx(m.phases[0].shared_link_s, 0.5));
        assert!(approx(m.time_s, 0.5));
        assert_eq!(m.phases[0].bottleneck, "shared host link");
        // host idle 10 W x 0.5 s; accelerator 5 W x sort + 1 W x (0.5 - sort); device 5 W x 0.4 s + 1 W x 0.1 s.
        let want = 5.0 + 5.0 * sort + (0.5 - sort) + 2.1;
        assert!(approx(m.energy_j, want), "{} vs {want}", m.energy_j);
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
        let host = HostWork::counted(ledger(&[(work::SEARCH_BYTES, 2_000_000_000)]));
        let ph = PhaseUsage { name: "host".into(), devices: vec![DeviceCounters::default()], host };
        let m = model(&tiny(), &[ph.clone(), ph]);
        assert!(approx(m.time_s, 4.0));
        assert_eq!(m.phases[1].bottleneck, "host cpu");
    }

    #[test]
    fn a_synchronous_reader_pays_the_devices_latency_request_by_request_by_hand() {
        // 10 MB read by the host in requests of 1 MB: each waits 50 us (tiny's read latency) + 2 ms (1 MB
        // over its 0.5 GB/s link), 20.5 ms in all one after another; the host spends 1,000 cycles a
        // request and half a cycle a byte at 1 GHz: 5.01 ms.
        let mut p = tiny();
        p.host.storage = StorageStack {
            request_bytes: 1_000_000,
            queue_depth: 1,
            request_cycles: 1000.0,
            byte_cycles: 0.5,
        };
        let c = DeviceCounters { device_to_host: 10_000_000, commands: 3, ..Default::default() };
        let run = |p: &Profile, threads: u32| {
            let host = HostWork::default().on_threads(threads);
            model(p, &[PhaseUsage { name: "read".into(), devices: vec![c.clone()], host }])
        };
        let m = run(&p, 1);
        let ph = &m.phases[0];
        assert_eq!(ph.host_requests, 10);
        assert!(approx(ph.host_io_s, 10.0 * (50e-6 + 2e-3) + 5.01e-3), "{}", ph.host_io_s);
        assert!(approx(ph.host_s, 5.01e-3) && approx(ph.host_cpu_s, 5.01e-3), "{}", ph.host_s);
        // The device's own link takes 20 ms + 10 us: the requests' 25.51 ms are the bound.
        assert!(approx(m.time_s, 20.5e-3 + 5.01e-3), "{}", m.time_s);
        assert_eq!(ph.bottleneck, "host storage stack");
        // Two threads keep two requests in flight: 10.25 + 2.505 ms, and the link is the bound again.
        let m = run(&p, 2);
        assert!(approx(m.phases[0].host_io_s, 10.25e-3 + 2.505e-3));
        assert!(approx(m.time_s, 20e-3 + 10e-6), "{}", m.time_s);
        assert_eq!(m.phases[0].bottleneck, "device 0 host link");
        // 10.5 MB: 11 requests, each waiting 50 us, and the bytes at the link's pace (not 11 whole requests').
        let odd = DeviceCounters { device_to_host: 10_500_000, ..c.clone() };
        let host = HostWork::default();
        let m = model(&p, &[PhaseUsage { name: "read".into(), devices: vec![odd.clone()], host }]);
        assert_eq!(m.phases[0].host_requests, 11);
        assert!(approx(m.phases[0].host_io_s, 11.0 * 50e-6 + 21e-3 + (11e3 + 5.25e6) / 1e9));
        // An accelerator's host program with its own stack (4 in flight) serves the accelerator's phases.
        let mut q = p.clone();
        q.host.accelerator.as_mut().unwrap().storage =
            Some(StorageStack { queue_depth: 4, ..p.host.storage });
        let host = HostWork::default().on_accelerator(0);
        let m = model(&q, &[PhaseUsage { name: "read".into(), devices: vec![odd], host }]);
        assert!(approx(m.phases[0].host_io_s, (11.0 * 50e-6 + 21e-3) / 4.0 + (11e3 + 5.25e6) / 1e9));
        // Every command is at least a request.
        let many = DeviceCounters { commands: 50, ..c.clone() };
        let host = HostWork::default();
        let m = model(&p, &[PhaseUsage { name: "read".into(), devices: vec![many], host }]);
        assert_eq!(m.phases[0].host_requests, 50);
        assert!(approx(m.phases[0].host_s, (50.0 * 1000.0 + 5e6) / 1e9));
    }

    #[test]
    fn threads_share_the_hosts_memory_bandwidth_by_hand() {
        // 1e9 rows gathered: 1 s on one of tiny-host's 1 GHz cores, 0.5 s on its two. At 64 bytes of
        // traffic a row over its 10 GB/s, 64 GB take 6.4 s whatever the threads: memory is the bound.
        let mut p = tiny();
        let w = ledger(&[(work::GATHER_ROWS, 1_000_000_000)]);
        let t = |p: &Profile| {
            let host = HostWork::counted(w.clone()).on_threads(2);
            model(p, &[PhaseUsage { name: "h".into(), devices: vec![], host }])
        };
        assert!(approx(t(&p).time_s, 0.5));
        p.host.memory_bytes.insert(work::GATHER_ROWS.into(), 64.0);
        let m = t(&p);
        assert!(approx(m.phases[0].host_memory_bytes, 64e9));
        assert!(approx(m.time_s, 6.4), "{}", m.time_s);
        assert_eq!(m.phases[0].bottleneck, "host memory");
        // At 4 bytes a row, 0.4 s of traffic hides under the cores' 0.5 s.
        p.host.memory_bytes.insert(work::GATHER_ROWS.into(), 4.0);
        assert!(approx(t(&p).time_s, 0.5));
        assert_eq!(t(&p).phases[0].bottleneck, "host cpu");
    }

    #[test]
    fn work_without_a_price_is_named_not_hidden() {
        let host = HostWork::counted(ledger(&[("teleport.bytes", 5)]));
        let m = model(&tiny(), &[PhaseUsage { name: "h".into(), devices: vec![], host }]);
        assert_eq!(m.unpriced.iter().collect::<Vec<_>>(), vec!["teleport.bytes"]);
    }
}
