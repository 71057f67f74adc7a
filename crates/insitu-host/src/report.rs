//! Reports: every operation returns its result, what it cost here (wall time, host CPU vs device CPU, bytes
//! on every path) and what it would cost on the profile (the [`crate::model`]).

use std::time::Instant;

use insitu_device::sys::process_cpu_ns;
use insitu_device::DeviceCounters;
use serde::Serialize;

use crate::array::Array;
use crate::error::Result;
use crate::model::{model, HostWork, Modeled, PhaseUsage};
use crate::units::human_bytes;

/// Bytes moved on each path, summed over devices.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PathBytes {
    pub flash_read: u64,
    pub flash_program: u64,
    pub flash_to_device_mem: u64,
    pub device_mem_to_flash: u64,
    pub host_to_device: u64,
    pub device_to_host: u64,
    pub device_to_device: u64,
}

/// Operation counts, summed over devices.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PathOps {
    pub flash_read_pages: u64,
    pub flash_program_pages: u64,
    pub flash_erase_blocks: u64,
    pub commands: u64,
}

/// The full account of one operation.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub op: String,
    /// One line saying what the operation did, written by the operator.
    pub headline: String,
    pub result: serde_json::Value,
    pub wall_s: f64,
    pub host_cpu_s: f64,
    pub device_cpu_s: f64,
    pub bytes: PathBytes,
    pub ops: PathOps,
    pub modeled: Modeled,
    /// The wall time of each phase here, as measured (in the order of `modeled.phases`; where the time of
    /// this machine goes, beside where the profile's goes).
    pub measured_phases: Vec<MeasuredPhase>,
    /// The measured usage behind `modeled`, kept so the same run can be priced on other profiles.
    #[serde(skip)]
    pub phases: Vec<PhaseUsage>,
    /// What the caller should know and the result does not say: an option the operation did not use (a
    /// memory budget past a device's memory, threads of the host baselines on the device), a choice that
    /// costs more than it should (partitions far more than rows), or what the figures leave out (a device
    /// that stopped answering after the work was done, its counters since its last phase missing). The
    /// CLI prints them on standard error; `--json` has them here (sort and shuffle also in
    /// `result.warning`, joined).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Report {
    /// The readable summary: the operator's headline, then what it cost here and on the profile (what
    /// the CLI prints, and a Python `Report`'s `str`).
    pub fn summary(&self) -> String {
        let (r, b) = (self, &self.bytes);
        let m = &r.modeled;
        // The phases' bottlenecks, each once, with its share of the modeled time when there are several.
        let mut bounds: Vec<(&str, f64)> = Vec::new();
        for p in &m.phases {
            match bounds.iter_mut().find(|(b, _)| *b == p.bottleneck) {
                Some(b) => b.1 += p.time_s,
                None => bounds.push((&p.bottleneck, p.time_s)),
            }
        }
        bounds.sort_by(|a, b| b.1.total_cmp(&a.1));
        let bottleneck = match bounds.as_slice() {
            [(b, _)] => b.to_string(),
            bs => bs
                .iter()
                .map(|(b, t)| format!("{b} {:.0}%", 100.0 * t / m.time_s.max(f64::MIN_POSITIVE)))
                .collect::<Vec<_>>()
                .join(", "),
        };
        // Where the wall time went, when there was more than one phase: phases of one name (a sort's runs)
        // together, with their count.
        let mut walls: Vec<(&str, f64, usize)> = Vec::new();
        for p in &r.measured_phases {
            match walls.iter_mut().find(|(n, _, _)| *n == p.name) {
                Some(w) => (w.1, w.2) = (w.1 + p.wall_s, w.2 + 1),
                None => walls.push((&p.name, p.wall_s, 1)),
            }
        }
        let walls = match r.measured_phases.as_slice() {
            [] | [_] => String::new(),
            _ => format!(
                " ({})",
                walls
                    .iter()
                    .map(|(n, t, k)| match k {
                        1 => format!("{n} {t:.3} s"),
                        k => format!("{n} {t:.3} s in {k}"),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        format!(
            "{}\n  measured  wall {:.3} s{walls}   host cpu {:.3} s   device cpu {:.3} s\n  bytes     flash read {}   flash program {}   flash->dev mem {}   dev->host {}   host->dev {}   dev<->dev {}\n  modeled   {} x{} (host {}): {:.4} s, {:.3} J (bottleneck: {})",
            r.headline,
            r.wall_s,
            r.host_cpu_s,
            r.device_cpu_s,
            human_bytes(b.flash_read),
            human_bytes(b.flash_program),
            human_bytes(b.flash_to_device_mem),
            human_bytes(b.device_to_host),
            human_bytes(b.host_to_device),
            human_bytes(b.device_to_device),
            m.profile,
            m.devices,
            m.host,
            m.time_s,
            m.energy_j,
            if bottleneck.is_empty() { "-" } else { &bottleneck },
        )
    }

    /// What this same run (same bytes, same CPU work) would take on another profile.
    pub fn remodel(&self, profile: &insitu_device::Profile) -> Modeled {
        model(profile, &self.phases)
    }
}

impl PathBytes {
    pub fn sum(devices: &[DeviceCounters]) -> PathBytes {
        let mut b = PathBytes::default();
        for c in devices {
            b.flash_read += c.flash_read_bytes;
            b.flash_program += c.flash_program_bytes;
            b.flash_to_device_mem += c.flash_to_device_mem;
            b.device_mem_to_flash += c.device_mem_to_flash;
            b.host_to_device += c.host_to_device;
            b.device_to_host += c.device_to_host;
            b.device_to_device += c.device_to_device_out;
        }
        b
    }
}

/// One phase's wall time, measured here.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MeasuredPhase {
    pub name: String,
    pub wall_s: f64,
}

/// The host's and the devices' CPU seconds of work whose device activity is `total` and that started at
/// this process's CPU time `cpu0`: devices in this process spend this process's CPU, so the host's share is
/// the rest.
fn cpu_split(array: &Array, total: &[DeviceCounters], cpu0: u64) -> (f64, f64) {
    let device_ns: u64 = total.iter().map(|c| c.device_cpu_ns).sum();
    let here_ns: u64 = total
        .iter()
        .enumerate()
        .filter(|(i, _)| array.device(*i as u32).is_ok_and(|d| d.in_process()))
        .map(|(_, c)| c.device_cpu_ns)
        .sum();
    let process_ns = process_cpu_ns().saturating_sub(cpu0);
    (process_ns.saturating_sub(here_ns) as f64 * 1e-9, device_ns as f64 * 1e-9)
}

/// Measured CPU since a start, the host's apart from the devices' (for work that reports its cost its
/// own way, as BlueDBM's applications do).
#[derive(Debug)]
pub struct CpuClock {
    cpu0: u64,
    start: Vec<DeviceCounters>,
}

impl CpuClock {
    pub fn start(array: &Array) -> Result<CpuClock> {
        let start = array.counters()?;
        Ok(CpuClock { cpu0: process_cpu_ns(), start })
    }

    /// (host, devices) CPU seconds since the start.
    pub fn read(&self, array: &Array) -> Result<(f64, f64)> {
        let now = array.counters()?;
        let total: Vec<DeviceCounters> = now.iter().zip(&self.start).map(|(n, s)| n.since(s)).collect();
        Ok(cpu_split(array, &total, self.cpu0))
    }
}

/// Measures an operation: start it before, add phases as they end, finish with the result.
#[derive(Debug)]
pub struct Measure {
    op: String,
    t0: Instant,
    cpu0: u64,
    start: Vec<DeviceCounters>,
    phase_start: Vec<DeviceCounters>,
    phases: Vec<PhaseUsage>,
    phase_t0: Instant,
    walls: Vec<MeasuredPhase>,
    /// Devices that did not report their counters (see [`Measure::now`]).
    warnings: Vec<String>,
}

impl Measure {
    pub fn start(op: &str, array: &Array) -> Result<Measure> {
        // A new command: what the last one counted is no progress of this one.
        array.progress().clear();
        let start = array.counters()?;
        let t0 = Instant::now();
        Ok(Measure {
            op: op.to_string(),
            t0,
            phase_t0: t0,
            walls: Vec::new(),
            cpu0: process_cpu_ns(),
            phase_start: start.clone(),
            start,
            phases: Vec::new(),
            warnings: Vec::new(),
        })
    }

    /// Every device's counters now. A device that no longer answers keeps its counts of the last phase,
    /// named in a warning: once an operation's work is done (a write committed), a device lost costs the
    /// report those counts, not the operation its success.
    fn now(&mut self, array: &Array) -> Vec<DeviceCounters> {
        let warnings = &mut self.warnings;
        array
            .counters_each()
            .into_iter()
            .zip(&self.phase_start)
            .enumerate()
            .map(|(i, (c, last))| {
                c.unwrap_or_else(|e| {
                    let w = format!(
                        "device {i} did not report its counters after the work ({e}): the figures leave out \
                         what it did since the last phase"
                    );
                    if !warnings.contains(&w) {
                        warnings.push(w);
                    }
                    last.clone()
                })
            })
            .collect()
    }

    /// Closes the current phase: device activity since the previous phase, plus the host work given.
    pub fn phase(&mut self, name: &str, array: &Array, host: HostWork) -> Result<()> {
        let now = self.now(array);
        let devices = now.iter().zip(&self.phase_start).map(|(n, s)| n.since(s)).collect();
        self.phases.push(PhaseUsage { name: name.to_string(), devices, host });
        self.phase_start = now;
        self.close_wall(name);
        Ok(())
    }

    /// Ends the measurement; device activity after the last phase forms a final phase named like the op.
    pub fn finish(mut self, array: &Array, headline: String, result: serde_json::Value) -> Result<Report> {
        let now = self.now(array);
        let tail: Vec<DeviceCounters> = now.iter().zip(&self.phase_start).map(|(n, s)| n.since(s)).collect();
        if self.phases.is_empty() || tail.iter().any(|c| c.commands > 0) {
            let name = self.op.clone();
            self.phases.push(PhaseUsage { name: name.clone(), devices: tail, host: HostWork::default() });
            self.close_wall(&name);
        }
        let total: Vec<DeviceCounters> = now.iter().zip(&self.start).map(|(n, s)| n.since(s)).collect();
        let (host_cpu_s, device_cpu_s) = cpu_split(array, &total, self.cpu0);
        let mut ops = PathOps::default();
        for c in &total {
            ops.flash_read_pages += c.flash_read_pages;
            ops.flash_program_pages += c.flash_program_pages;
            ops.flash_erase_blocks += c.flash_erase_blocks;
            ops.commands += c.commands;
        }
        Ok(Report {
            op: self.op,
            headline,
            result,
            wall_s: self.t0.elapsed().as_secs_f64(),
            host_cpu_s,
            device_cpu_s,
            bytes: PathBytes::sum(&total),
            ops,
            modeled: model(array.profile(), &self.phases),
            measured_phases: self.walls,
            phases: self.phases,
            warnings: self.warnings,
        })
    }

    fn close_wall(&mut self, name: &str) {
        let now = Instant::now();
        self.walls
            .push(MeasuredPhase { name: name.to_string(), wall_s: (now - self.phase_t0).as_secs_f64() });
        self.phase_t0 = now;
    }
}
