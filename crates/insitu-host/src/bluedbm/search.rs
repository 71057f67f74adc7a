//! String search over a file of the appliance (BlueDBM §7.3): by the nodes' in-store processors, each
//! searching its own node's pages of the file with its Morris-Pratt engines, or by host software
//! reading the pages through its device (H-F), through the pages' hosts (H-RH-F) or from its DRAM
//! (H-DRAM). Every placement computes each
//! page's matches and end state with the same kernel ([`MorrisPratt`]) and joins the seams the same way,
//! so all give the same answer.
//!
//! The in-store search runs in two passes. The file's consecutive pages lie on different nodes, so no
//! engine sees two pages in a row: the first pass searches every page apart and returns its matches and
//! its engine state at the end; the host then asks each node to continue, from the state of the page
//! before, over the first `needle - 1` bytes of each page whose predecessor ended inside a partial match
//! (usually few), which finds the matches that straddle pages. Only match positions, states and the
//! position of each page's last newline cross to the host.

use std::collections::BTreeMap;
use std::time::Instant;

use insitu_device::protocol::{IspLimits, IspSearch, IspSearchReply};
use insitu_device::work;
use insitu_kernels::search::{mp_failure, MorrisPratt, PageScan};
use serde::Serialize;

use crate::bluedbm::apps::{self, AppCost, Placement};
use crate::bluedbm::fs::{spare, Fs, FsFile};
use crate::error::{HostError, Result};
use crate::report::CpuClock;

/// How to search.
#[derive(Debug, Clone, Copy)]
pub struct SearchOptions {
    pub placement: Placement,
    /// Also return every match's offset.
    pub offsets: bool,
    /// The node whose host searches (host placements).
    pub node: u32,
    /// Host threads (host placements).
    pub threads: u32,
    /// Engines and a flash throttle for the in-store processors.
    pub limits: IspLimits,
}

/// What a search found and cost.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    /// Occurrences (overlapping ones too: every start position where the needle is).
    pub count: u64,
    /// Lines with at least one occurrence starting in them (as `grep -c` counts); `None` for a needle
    /// holding a newline.
    pub lines: Option<u64>,
    pub offsets: Option<Vec<u64>>,
    pub cost: AppCost,
}

/// Each page's first-pass scan and the matches that straddle into it (bytes before it where each
/// starts): what every placement computes.
struct Found {
    scans: Vec<PageScan>,
    seams: Vec<Vec<u32>>,
}

/// Searches file `name` for `needle` as `opts` says.
pub fn search(fs: &Fs, name: &str, needle: &[u8], opts: SearchOptions) -> Result<SearchResult> {
    fs.check_node(opts.node)?;
    apps::check_threads(opts.threads)?;
    let mp = MorrisPratt::new(needle).map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    let f = fs.file(name)?;
    let ps = fs.page_size();
    // H-DRAM: the file is in the host's memory before the search starts (read outside the timing).
    let resident = match opts.placement {
        Placement::HostDram => {
            let mut data = Vec::with_capacity(f.pages.len() * ps);
            fs.get(&f.name, &mut data)?;
            data.resize(f.pages.len() * ps, 0);
            Some(data)
        }
        _ => None,
    };
    let (t0, cpu) = (Instant::now(), CpuClock::start(fs.array())?);
    let mut cost = AppCost { placement: opts.placement, bytes: f.size, ..Default::default() };
    let found = match opts.placement {
        Placement::Isp => in_store(fs, f, &mp, opts.limits, &mut cost)?,
        _ => on_host(fs, f, &mp, opts, resident.as_deref(), &mut cost)?,
    };
    let (count, lines, offsets) = assemble(f, ps, needle, &found, opts.offsets);
    cost.wall_s = t0.elapsed().as_secs_f64();
    (cost.host_cpu_s, cost.device_cpu_s) = cpu.read(fs.array())?;
    cost.finish(fs.array().profile(), fs.node_count());
    Ok(SearchResult { count, lines, offsets, cost })
}

/// Both passes on the nodes' in-store processors.
fn in_store(fs: &Fs, f: &FsFile, mp: &MorrisPratt, limits: IspLimits, cost: &mut AppCost) -> Result<Found> {
    let n = f.pages.len();
    let mut found = Found { scans: vec![PageScan::default(); n], seams: vec![Vec::new(); n] };
    let all: Vec<usize> = (0..n).collect();
    let first = run_pass(fs, f, mp, &all, None, limits, cost)?;
    for (i, r) in first {
        found.scans[i] = r.0;
    }
    // Pages whose predecessor ended inside a partial match.
    let seams: Vec<usize> = (1..n).filter(|i| found.scans[i - 1].end_state > 0).collect();
    let states: BTreeMap<usize, u32> = seams.iter().map(|i| (*i, found.scans[i - 1].end_state)).collect();
    if !seams.is_empty() {
        for (i, r) in run_pass(fs, f, mp, &seams, Some(&states), limits, cost)? {
            found.seams[i] = r.1;
        }
    }
    cost.bound = apps::isp_bound(limits);
    Ok(found)
}

type PageOut = (PageScan, Vec<u32>);

/// One pass: a job on each node holding some of `pages`, all nodes at once. Adds the pass's modeled
/// time (the slowest node's queueing, service and PCIe transfers) to `cost`.
fn run_pass(
    fs: &Fs,
    f: &FsFile,
    mp: &MorrisPratt,
    pages: &[usize],
    states: Option<&BTreeMap<usize, u32>>,
    limits: IspLimits,
    cost: &mut AppCost,
) -> Result<Vec<(usize, PageOut)>> {
    let array = fs.array();
    let profile = array.profile();
    let ps = fs.page_size();
    let mut nodes: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for &i in pages {
        nodes.entry(f.pages[i].node).or_default().push(i);
    }
    let failure = mp_failure(mp.needle());
    let mut pending = Vec::new();
    for (node, idx) in &nodes {
        let job = IspSearch {
            needle: mp.needle().to_vec(),
            failure: failure.clone(),
            pages: idx.iter().map(|i| apps::addr(&f.pages[*i])).collect(),
            spares: idx.iter().map(|i| spare(f.id, *i as u64)).collect(),
            lens: idx.iter().map(|i| apps::page_len(f, *i, ps)).collect(),
            seams: states.map(|s| idx.iter().map(|i| s[i]).collect()),
            limits,
        };
        let dev = array.device(*node)?;
        pending.push((*node, idx, dev.submit(job).map_err(HostError::device(*node))?));
    }
    let mut out = Vec::with_capacity(pages.len());
    let mut pass = apps::Pass::default();
    for (node, idx, p) in pending {
        let r: IspSearchReply = p.wait().map_err(HostError::device(node))?;
        let matches: usize = r.scans.iter().map(|s| s.starts.len()).sum::<usize>()
            + r.seam_starts.iter().map(Vec::len).sum::<usize>();
        // Down: the needle, its table and the page list (address, spare record, length); up: a state
        // and a newline position a page, and every match.
        let down = (mp.needle().len() + 4 * failure.len() + idx.len() * 24) as u64;
        let up = (idx.len() * 8 + matches * 8) as u64;
        pass.add(cost, profile, (node, &r.job), down, up);
        let mut scans = r.scans.into_iter();
        let mut seams = r.seam_starts.into_iter();
        for &i in idx {
            let out_i = match states {
                None => (scans.next().unwrap_or_default(), Vec::new()),
                Some(_) => (PageScan::default(), seams.next().unwrap_or_default()),
            };
            out.push((i, out_i));
        }
    }
    pass.finish(cost);
    Ok(out)
}

/// Host software: the pages through node `opts.node`'s device (H-F), through their nodes' hosts (H-RH-F)
/// or from DRAM (`resident`, H-DRAM), searched by `opts.threads` threads.
fn on_host(
    fs: &Fs,
    f: &FsFile,
    mp: &MorrisPratt,
    opts: SearchOptions,
    resident: Option<&[u8]>,
    cost: &mut AppCost,
) -> Result<Found> {
    let ps = fs.page_size();
    let profile = fs.array().profile();
    let threads = opts.threads.max(1);
    cost.threads = threads;
    let n = f.pages.len();
    let mut found = Found { scans: Vec::with_capacity(n), seams: vec![Vec::new(); n] };
    let (mut read_s, mut remote_s, mut read_up) = (0.0, 0.0, 0u64);
    let batch = |data: &[u8], first: usize, found: &mut Found| {
        let count = data.len() / ps;
        let scans = scan_pages(mp, f, data, first, count, ps, threads);
        found.scans.extend(scans);
    };
    match resident {
        Some(data) => {
            batch(data, 0, &mut found);
            join_seams(mp, f, data, 0, ps, &mut found);
        }
        None => {
            const CHUNK: usize = 4096;
            for first in (0..n).step_by(CHUNK) {
                let idx: Vec<usize> = (first..(first + CHUNK).min(n)).collect();
                let (data, r) = fs.read_pages_via(&f.name, &idx, opts.node, opts.placement.access())?;
                read_s += r.modeled_s;
                read_up += r.pcie_up_bytes;
                if opts.placement == Placement::RemoteHost {
                    remote_s += apps::remote_hosts_s(profile, f, &idx, opts.node, ps);
                }
                cost.add_read(&r, profile, ps);
                batch(&data, first, &mut found);
                join_seams(mp, f, &data, first, ps, &mut found);
            }
        }
    }
    let mut cpu_s = apps::host_cpu_s(profile, work::SEARCH_BYTES, f.size)?;
    if resident.is_none() {
        cpu_s += apps::storage_cpu_s(profile, n as u64, f.size);
    }
    let cpu_s = cpu_s / apps::model_threads(profile, threads) as f64;
    let mut mem_s = apps::host_memory_s(profile, work::SEARCH_BYTES, f.size);
    if resident.is_none() {
        mem_s += apps::host_memory_s(profile, "storage.bytes", f.size);
    }
    let (s, b) = apps::bound(&[
        (apps::reads_name(profile, read_up, read_s), read_s),
        ("host cpu", cpu_s),
        ("host memory", mem_s),
        ("the remote hosts' cpu", remote_s),
    ]);
    cost.modeled_s = s;
    cost.bound = b;
    cost.modeled_host_cpu_s = cpu_s;
    // The host is busy while its cores work or its memory moves the bytes, whichever is longer.
    cost.busy.host(opts.node, cpu_s.max(mem_s));
    Ok(found)
}

/// First-pass scans of `count` pages of `data` (file pages `first..`), on `threads` threads.
fn scan_pages(
    mp: &MorrisPratt,
    f: &FsFile,
    data: &[u8],
    first: usize,
    count: usize,
    ps: usize,
    threads: u32,
) -> Vec<PageScan> {
    let scan = |k: usize| mp.scan_page(&data[k * ps..k * ps + apps::page_len(f, first + k, ps) as usize]);
    let per = count.div_ceil(threads as usize).max(1);
    if threads <= 1 || count < 2 {
        return (0..count).map(scan).collect();
    }
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..count)
            .step_by(per)
            .map(|a| s.spawn(move || (a..(a + per).min(count)).map(scan).collect::<Vec<_>>()))
            .collect();
        parts.into_iter().flat_map(|h| h.join().expect("a search thread panicked")).collect()
    })
}

/// The seams into pages `first..` whose data is `data`, from the end states already in `found`.
fn join_seams(mp: &MorrisPratt, f: &FsFile, data: &[u8], first: usize, ps: usize, found: &mut Found) {
    for k in 0..data.len() / ps {
        let i = first + k;
        if i == 0 {
            continue;
        }
        let q = found.scans[i - 1].end_state;
        if q > 0 {
            found.seams[i] = mp.seam_starts(q, &data[k * ps..k * ps + apps::page_len(f, i, ps) as usize]);
        }
    }
}

/// The count, the matching lines and the offsets, from each page's scan and seams.
fn assemble(
    f: &FsFile,
    ps: usize,
    needle: &[u8],
    found: &Found,
    want: bool,
) -> (u64, Option<u64>, Option<Vec<u64>>) {
    // Each match as (offset, the line it starts in: the position of the newline before it, or -1).
    let mut last_nl: i64 = -1;
    let mut matches: Vec<(u64, i64)> = Vec::new();
    for i in 0..f.pages.len() {
        let base = (i * ps) as u64;
        let scan = &found.scans[i];
        // Seam matches start in page i - 1, after its last newline (a needle without newlines).
        let before = last_nl;
        if i > 0 {
            for back in &found.seams[i] {
                matches.push((base - *back as u64, before));
            }
        }
        for (s, nl) in scan.starts.iter().zip(&scan.newline_before) {
            let line = nl.map_or(before, |p| (base + p as u64) as i64);
            matches.push((base + *s as u64, line));
        }
        if let Some(p) = scan.last_newline {
            last_nl = (base + p as u64) as i64;
        }
    }
    // Seam matches of page i come before page i's own: offsets are already in order.
    debug_assert!(matches.windows(2).all(|w| w[0].0 < w[1].0));
    let lines = (!needle.contains(&b'\n')).then(|| {
        let mut n = 0u64;
        let mut prev = None;
        for (_, l) in &matches {
            if prev != Some(*l) {
                n += 1;
                prev = Some(*l);
            }
        }
        n
    });
    let count = matches.len() as u64;
    (count, lines, want.then(|| matches.into_iter().map(|m| m.0).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use insitu_kernels::search::naive_offsets;

    fn corpus(n: usize) -> Vec<u8> {
        let mut x = 7u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b"ab\n"[(x % 3) as usize]
            })
            .collect()
    }

    /// Two applications' jobs submitted together to one accelerator: both finish, in the order
    /// submitted, with exact results, and the second says it waited for the first (§4's scheduler).
    #[test]
    fn the_accelerator_runs_jobs_in_order_and_says_how_long_each_waited() {
        let dir = tempfile::tempdir().unwrap();
        let array = crate::bluedbm::small_appliance(dir.path(), 1, 8 << 20);
        let mut fs = Fs::open(&array).unwrap();
        let data = corpus(100_000);
        fs.put("c", &mut data.as_slice(), None).unwrap();
        let f = fs.file("c").unwrap().clone();
        let ps = fs.page_size();
        let job = |needle: &[u8]| IspSearch {
            needle: needle.to_vec(),
            failure: mp_failure(needle),
            pages: f.pages.iter().map(apps::addr).collect(),
            spares: (0..f.pages.len()).map(|i| spare(f.id, i as u64)).collect(),
            lens: (0..f.pages.len()).map(|i| apps::page_len(&f, i, ps)).collect(),
            seams: None,
            limits: Default::default(),
        };
        let dev = array.device(0).unwrap();
        let (a, b) = (dev.submit(job(b"abba")).unwrap(), dev.submit(job(b"b\nb")).unwrap());
        let (a, b): (IspSearchReply, IspSearchReply) = (a.wait().unwrap(), b.wait().unwrap());
        assert_eq!(b.job.seq, a.job.seq + 1);
        assert!(a.job.service_ps > 0);
        // The second job waited for the first, unless the first was done before it was submitted (a loaded
        // machine can run it in between): then it waited for nothing.
        match b.job.ahead {
            1 => assert_eq!(b.job.queue_ps, a.job.queue_ps + a.job.service_ps),
            0 => assert_eq!(b.job.queue_ps, 0),
            n => panic!("{n} jobs ahead of the second of two"),
        }
        for (r, needle) in [(&a, &b"abba"[..]), (&b, &b"b\nb"[..])] {
            let mp = MorrisPratt::new(needle).unwrap();
            for (i, scan) in r.scans.iter().enumerate() {
                let page = &data[i * ps..(i * ps + ps).min(data.len())];
                assert_eq!(scan, &mp.scan_page(page), "page {i}");
            }
        }
        // The whole search, seams joined, against a naive scan of the file.
        for placement in Placement::ALL {
            let opts =
                SearchOptions { placement, offsets: true, node: 0, threads: 2, limits: Default::default() };
            let r = search(&fs, "c", b"abba", opts).unwrap();
            assert_eq!(r.offsets.unwrap(), naive_offsets(&data, b"abba"), "{placement:?}");
        }
        // A stale map (a page's spare record not the file's) is refused, naming the page.
        let mut bad = job(b"ab");
        bad.spares[1] ^= 1;
        let err = dev.call(bad).unwrap_err().to_string();
        assert!(err.contains("spare-area record") && err.contains("does not match"), "{err}");
    }
}
