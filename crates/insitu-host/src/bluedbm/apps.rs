//! What BlueDBM's applications (§7) share: who runs them ([`Placement`]), what a run cost
//! ([`AppCost`]), and the pieces of their pricing on the appliance's profile.

use insitu_device::protocol::IspJob;
use insitu_device::work::{self, Ledger};
use insitu_device::Profile;
use serde::Serialize;

use crate::bluedbm::fs::{Access, FsFile, GlobalPage, ViaReport};
use crate::bluedbm::power::{self, Busy, Modeled};
use crate::error::{HostError, Result};

/// Who runs an application (§7's configurations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// The nodes' in-store processors, on the flash of their own node; only results reach the host.
    #[default]
    Isp,
    /// Software on a node's host, reading every page through its device (H-F).
    Host,
    /// Software on a node's host asking each page's host for it, which reads it from its flash and sends
    /// it back over the storage network (H-RH-F: a distributed SSD without the integrated network).
    RemoteHost,
    /// Software on a node's host with the data in DRAM (H-DRAM): a search's or comparison's file in its
    /// own memory; a traversal's pages in the memory of the hosts of the nodes that hold them, asked
    /// for over the network (§7.2's H-DRAM).
    HostDram,
}

impl Placement {
    pub const ALL: [Placement; 4] =
        [Placement::Isp, Placement::Host, Placement::RemoteHost, Placement::HostDram];

    pub fn name(self) -> &'static str {
        match self {
            Placement::Isp => "isp",
            Placement::Host => "host",
            Placement::RemoteHost => "remote-host",
            Placement::HostDram => "host-dram",
        }
    }

    /// The placement named `text` (as [`Placement::name`] gives).
    pub fn parse(text: &str) -> Result<Placement> {
        Placement::ALL.into_iter().find(|p| p.name() == text).ok_or_else(|| {
            let names: Vec<&str> = Placement::ALL.iter().map(|p| p.name()).collect();
            HostError::InvalidArgument(format!("placement {text:?}: expected one of {}", names.join(", ")))
        })
    }

    /// How the placement reads a page of another node (§6.4's paths).
    pub fn access(self) -> Access {
        match self {
            Placement::Isp => Access::IspFlash,
            Placement::Host => Access::HostFlash,
            Placement::RemoteHost => Access::HostRemoteHost,
            Placement::HostDram => Access::HostRemoteDram,
        }
    }
}

/// What a run of an application cost: measured here, and modeled on the appliance's profile.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AppCost {
    pub placement: Placement,
    /// Bytes of the file, and pages read from flash (a page read twice counts twice).
    pub bytes: u64,
    pub pages: u64,
    /// Modeled on the profile: the whole run, and parts of it (the engines' or the host's work, time in
    /// the accelerator's queue, the host's CPU).
    pub modeled_s: f64,
    pub modeled_queue_s: f64,
    pub modeled_host_cpu_s: f64,
    /// What bound the modeled time.
    pub bound: String,
    /// In-store processor jobs, and engines each ran with.
    pub jobs: u64,
    pub engines: u32,
    /// Host threads of a host placement.
    pub threads: u32,
    /// Bytes over the storage network and over the hosts' PCIe links.
    pub network_bytes: u64,
    pub pcie_bytes: u64,
    /// Measured here: wall time, and CPU time: the host's (this process's, less what devices in it spent)
    /// and the devices'.
    pub wall_s: f64,
    pub host_cpu_s: f64,
    pub device_cpu_s: f64,
    /// Modeled: what kept each node busy, and the run's time and energy on the profile, every node of
    /// the appliance drawing power while it lasts.
    pub busy: Busy,
    pub modeled: Modeled,
}

impl AppCost {
    /// Counts a read of pages by a host or a node (`r`, from `Fs::read_pages_via`): its bytes over the
    /// network and the PCIe links, its pages, and what it kept each node busy with.
    pub(crate) fn add_read(&mut self, r: &ViaReport, profile: &Profile, page_size: usize) {
        self.network_bytes += r.network_bytes;
        self.pcie_bytes += r.pcie_up_bytes + r.pcie_down_bytes;
        self.pages += r.pages;
        self.busy.add(&r.busy(profile, page_size));
    }

    /// Models the run's energy on the `nodes` nodes of `profile` from what kept them busy.
    pub(crate) fn finish(&mut self, profile: &Profile, nodes: u32) {
        self.modeled = power::modeled(profile, nodes, self.modeled_s, &self.busy);
    }
}

/// Seconds of `n` of `item` on the host's CPU, one thread.
pub(crate) fn host_cpu_s(profile: &Profile, item: &str, n: u64) -> Result<f64> {
    let mut l = Ledger::new();
    work::add(&mut l, item, n);
    let p = profile.host.cpu.price(&l);
    if !p.unpriced.is_empty() {
        return Err(HostError::InvalidArgument(format!(
            "host profile {} has no price for {item}",
            profile.host.name
        )));
    }
    Ok(p.seconds())
}

/// A pass of in-store processor jobs, a job a node, all at once: its modeled time is the slowest node's
/// queueing, service and PCIe transfers.
#[derive(Debug, Default)]
pub(crate) struct Pass {
    slowest_s: f64,
    queue_s: f64,
}

impl Pass {
    /// Adds node `node`'s finished `job`, which took `down` bytes to the device and `up` back, to `cost`.
    pub(crate) fn add(
        &mut self,
        cost: &mut AppCost,
        profile: &Profile,
        (node, job): (u32, &IspJob),
        down: u64,
        up: u64,
    ) {
        let t = (job.queue_ps + job.service_ps) as f64 * 1e-12 + link_s(profile, down, up);
        cost.busy.device(node, job.service_ps as f64 * 1e-12);
        self.slowest_s = self.slowest_s.max(t);
        self.queue_s = self.queue_s.max(job.queue_ps as f64 * 1e-12);
        cost.jobs += 1;
        cost.engines = cost.engines.max(job.engines);
        cost.pages += job.pages;
        cost.pcie_bytes += down + up;
    }

    /// Adds the pass's modeled time to `cost`.
    pub(crate) fn finish(self, cost: &mut AppCost) {
        cost.modeled_s += self.slowest_s;
        cost.modeled_queue_s += self.queue_s;
    }
}

pub(crate) use super::power::storage_cpu_s;

/// Seconds of the busiest other node's host serving pages `idx` of `f` to node `origin`'s (H-RH-F): a
/// request through its storage stack a page.
pub(crate) fn remote_hosts_s(
    profile: &Profile,
    f: &FsFile,
    idx: &[usize],
    origin: u32,
    page_size: usize,
) -> f64 {
    let mut per_node: std::collections::BTreeMap<u32, u64> = Default::default();
    for i in idx {
        let node = f.pages[*i].node;
        if node != origin {
            *per_node.entry(node).or_default() += 1;
        }
    }
    let most = per_node.values().copied().max().unwrap_or(0);
    storage_cpu_s(profile, most, most * page_size as u64)
}

/// Most host threads an application runs with (the CLI's `--threads`, Python's `threads=`).
pub const MAX_THREADS: u32 = 1024;

/// Refuses a thread count of 0 or past [`MAX_THREADS`] (Python's `threads=0` ran on one thread and said
/// so only in its result).
pub(crate) fn check_threads(threads: u32) -> Result<()> {
    if !(1..=MAX_THREADS).contains(&threads) {
        return Err(HostError::InvalidArgument(format!(
            "--threads must be 1 to {MAX_THREADS}, not {threads}"
        )));
    }
    Ok(())
}

/// Host threads the model runs: as many as asked, up to the host's cores.
pub(crate) fn model_threads(profile: &Profile, threads: u32) -> u32 {
    threads.clamp(1, profile.host.cores.max(1))
}

/// Seconds for the host's memory to move the traffic of `n` of `item` (its `[memory_bytes]`).
pub(crate) fn host_memory_s(profile: &Profile, item: &str, n: u64) -> f64 {
    let per = profile.host.memory_bytes.get(item).copied().unwrap_or(0.0);
    per * n as f64 / profile.host.memory_bw
}

/// Seconds over one node's PCIe link for a job's `down` bytes (host to device) and `up` bytes.
pub(crate) fn link_s(profile: &Profile, down: u64, up: u64) -> f64 {
    let l = &profile.host_link;
    down as f64 / l.write_bw + up as f64 / l.read_bw + 2.0 * l.latency_us * 1e-6
}

/// Bytes of page `i` of `f` that hold the file.
pub(crate) fn page_len(f: &FsFile, i: usize, page_size: usize) -> u32 {
    let start = (i * page_size) as u64;
    f.size.saturating_sub(start).min(page_size as u64) as u32
}

/// The name of the bound of a modeled time made of `parts`: the largest ("no work" when every part is
/// none, as for an empty file).
pub(crate) fn bound(parts: &[(&str, f64)]) -> (f64, String) {
    let (name, s) = parts.iter().fold(("no work", 0.0f64), |a, (n, s)| if *s > a.1 { (n, *s) } else { a });
    (s, name.to_string())
}

/// The name of the part of a host job's time its page reads take: the host's PCIe link when the `pcie_up`
/// bytes it carried up take (nearly) all of `read_s`, else the flash (and network) behind it.
pub(crate) fn reads_name(profile: &insitu_device::Profile, pcie_up: u64, read_s: f64) -> &'static str {
    if read_s > 0.0 && pcie_up as f64 / profile.host_link.read_bw >= 0.95 * read_s {
        "page reads, at the pace of the host's PCIe link"
    } else {
        "flash reads"
    }
}

/// What bounds an in-store job: its engines, reading flash at the pace `limits` throttles it to, if any.
pub(crate) fn isp_bound(limits: super::IspLimits) -> String {
    match limits.throttle_bw {
        Some(bw) => {
            format!("in-store engines, flash reads throttled to {}/s", crate::units::human_bytes(bw as u64))
        }
        None => "in-store engines".into(),
    }
}

/// A page's address as the device protocol names it.
pub(crate) fn addr(p: &GlobalPage) -> insitu_device::rawflash::FlashAddr {
    p.addr
}
