//! Meters: bytes and operations on every path, device CPU time by kernel class, per-program statistics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Run statistics of one program.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramStats {
    pub kernel_class: String,
    pub runs: u64,
    /// Pieces the runs' work can spread over compute units, summed over the runs: a data-parallel run (a
    /// search, whose scan splits a page at least a unit) counts its pieces, any other run one. The model
    /// keeps as many units busy, at most the profile's. 0 in counters saved before it was counted; see
    /// [`ProgramStats::pieces`].
    #[serde(default)]
    pub pieces: u64,
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub bytes_in: u64,
}

impl ProgramStats {
    /// Pieces the runs' work spreads over ([`ProgramStats::pieces`]), at least one a run.
    pub fn pieces(&self) -> u64 {
        self.pieces.max(self.runs)
    }
}

/// A snapshot of a device's counters. Subtract two with [`DeviceCounters::since`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceCounters {
    pub flash_read_bytes: u64,
    pub flash_read_pages: u64,
    pub flash_program_bytes: u64,
    pub flash_program_pages: u64,
    pub flash_erase_blocks: u64,
    /// Extra read time, in bytes of a fully striped read, that pages read together lost to landing on
    /// the same channel (a batch of pages takes as long as its busiest channel): redirected reads of
    /// records in key order touch pages all over the flash (Self-Sorting SSD §IV-D).
    #[serde(default)]
    pub flash_read_conflict_bytes: u64,
    pub flash_to_device_mem: u64,
    pub device_mem_to_flash: u64,
    pub host_to_device: u64,
    pub device_to_host: u64,
    pub device_to_device_out: u64,
    pub device_to_device_in: u64,
    /// Fabric hops crossed by transfers this device sent, and by those it received (one per transfer
    /// across a switch; more across a multi-hop storage network).
    #[serde(default)]
    pub device_to_device_hops_out: u64,
    #[serde(default)]
    pub device_to_device_hops_in: u64,
    pub commands: u64,
    /// CPU time of all device threads.
    pub device_cpu_ns: u64,
    /// CPU time by kernel class (`transfer` for data movement), as measured here: reported beside the
    /// modeled time, never used to model it.
    pub cpu_ns_by_class: BTreeMap<String, u64>,
    pub programs: BTreeMap<String, ProgramStats>,
    /// Work done, counted: by programs (keys sorted, bytes scanned... see [`crate::work`]), priced by
    /// the profile's `[kernels]`, and by resident firmware (tree nodes visited, keys compared...),
    /// priced by its `[firmware]` cycles.
    #[serde(default)]
    pub work: BTreeMap<String, u64>,
}

impl DeviceCounters {
    /// The activity between `before` and `self`.
    pub fn since(&self, before: &DeviceCounters) -> DeviceCounters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let mut cpu = BTreeMap::new();
        for (k, v) in &self.cpu_ns_by_class {
            let x = d(*v, before.cpu_ns_by_class.get(k).copied().unwrap_or(0));
            if x > 0 {
                cpu.insert(k.clone(), x);
            }
        }
        let work = crate::work::since(&self.work, &before.work);
        let mut programs = BTreeMap::new();
        for (k, v) in &self.programs {
            let b = before.programs.get(k).cloned().unwrap_or_default();
            if v.runs > b.runs {
                programs.insert(
                    k.clone(),
                    ProgramStats {
                        kernel_class: v.kernel_class.clone(),
                        runs: v.runs - b.runs,
                        pieces: d(v.pieces, b.pieces),
                        cpu_ns: d(v.cpu_ns, b.cpu_ns),
                        wall_ns: d(v.wall_ns, b.wall_ns),
                        bytes_in: d(v.bytes_in, b.bytes_in),
                    },
                );
            }
        }
        DeviceCounters {
            flash_read_bytes: d(self.flash_read_bytes, before.flash_read_bytes),
            flash_read_pages: d(self.flash_read_pages, before.flash_read_pages),
            flash_program_bytes: d(self.flash_program_bytes, before.flash_program_bytes),
            flash_program_pages: d(self.flash_program_pages, before.flash_program_pages),
            flash_erase_blocks: d(self.flash_erase_blocks, before.flash_erase_blocks),
            flash_read_conflict_bytes: d(self.flash_read_conflict_bytes, before.flash_read_conflict_bytes),
            flash_to_device_mem: d(self.flash_to_device_mem, before.flash_to_device_mem),
            device_mem_to_flash: d(self.device_mem_to_flash, before.device_mem_to_flash),
            host_to_device: d(self.host_to_device, before.host_to_device),
            device_to_host: d(self.device_to_host, before.device_to_host),
            device_to_device_out: d(self.device_to_device_out, before.device_to_device_out),
            device_to_device_in: d(self.device_to_device_in, before.device_to_device_in),
            device_to_device_hops_out: d(self.device_to_device_hops_out, before.device_to_device_hops_out),
            device_to_device_hops_in: d(self.device_to_device_hops_in, before.device_to_device_hops_in),
            commands: d(self.commands, before.commands),
            device_cpu_ns: d(self.device_cpu_ns, before.device_cpu_ns),
            cpu_ns_by_class: cpu,
            programs,
            work,
        }
    }
}

/// Live counters of one device (the flash counters come from the FTL and are merged into snapshots).
#[derive(Debug, Default)]
pub struct Meters {
    pub flash_read_conflict_bytes: AtomicU64,
    pub flash_to_device_mem: AtomicU64,
    pub device_mem_to_flash: AtomicU64,
    pub host_to_device: AtomicU64,
    pub device_to_host: AtomicU64,
    pub device_to_device_out: AtomicU64,
    pub device_to_device_in: AtomicU64,
    pub device_to_device_hops_out: AtomicU64,
    pub device_to_device_hops_in: AtomicU64,
    pub commands: AtomicU64,
    pub device_cpu_ns: AtomicU64,
    classes: Mutex<BTreeMap<String, u64>>,
    programs: Mutex<BTreeMap<String, ProgramStats>>,
    work: Mutex<crate::work::Ledger>,
}

impl Meters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn charge_cpu(&self, class: &str, ns: u64) {
        self.device_cpu_ns.fetch_add(ns, Ordering::Relaxed);
        let mut c = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        *c.entry(class.to_string()).or_default() += ns;
    }

    /// Counts firmware work (names in [`crate::firmware::work`]).
    pub fn add_work(&self, items: &[(&'static str, u64)]) {
        let mut w = self.work.lock().unwrap_or_else(|p| p.into_inner());
        for (name, n) in items {
            crate::work::add(&mut w, name, *n);
        }
    }

    /// Counts a program's work (names in [`crate::work`]).
    pub fn add_ledger(&self, ledger: &crate::work::Ledger) {
        crate::work::add_all(&mut self.work.lock().unwrap_or_else(|p| p.into_inner()), ledger);
    }

    /// Counts one run of program `id` whose work splits into `pieces` for the compute units (at least one).
    pub fn record_program(
        &self,
        id: &str,
        class: &str,
        pieces: u64,
        cpu_ns: u64,
        wall_ns: u64,
        bytes_in: u64,
    ) {
        let mut p = self.programs.lock().unwrap_or_else(|p| p.into_inner());
        let s = p.entry(id.to_string()).or_default();
        s.kernel_class = class.to_string();
        s.runs += 1;
        s.pieces += pieces.max(1);
        s.cpu_ns += cpu_ns;
        s.wall_ns += wall_ns;
        s.bytes_in += bytes_in;
    }

    /// A snapshot (flash fields left at zero for the caller to fill).
    pub fn snapshot(&self) -> DeviceCounters {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DeviceCounters {
            flash_to_device_mem: g(&self.flash_to_device_mem),
            device_mem_to_flash: g(&self.device_mem_to_flash),
            host_to_device: g(&self.host_to_device),
            device_to_host: g(&self.device_to_host),
            device_to_device_out: g(&self.device_to_device_out),
            device_to_device_in: g(&self.device_to_device_in),
            device_to_device_hops_out: g(&self.device_to_device_hops_out),
            device_to_device_hops_in: g(&self.device_to_device_hops_in),
            commands: g(&self.commands),
            device_cpu_ns: g(&self.device_cpu_ns),
            cpu_ns_by_class: self.classes.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            programs: self.programs.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            work: self.work.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            flash_read_conflict_bytes: g(&self.flash_read_conflict_bytes),
            ..Default::default()
        }
    }
}
