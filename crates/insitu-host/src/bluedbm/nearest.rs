//! Nearest-neighbour search over items stored a flash page each (BlueDBM §7.1): the Hamming distance
//! of a query item to items of the file, and the `k` closest (ties: lowest index). By the nodes'
//! in-store processors on their own node's items, or by host software reading the items through its
//! device (H-F), through their nodes' hosts (H-RH-F) or from its DRAM (H-DRAM); every placement compares with the same kernel
//! ([`insitu_kernels::hamming`]) and merges nodes' answers the same way, so all give the same answer.
//!
//! **Which items.** Every item (exhaustive), or, with locality-sensitive hashing, the items that share a
//! hash bucket with the query in at least one band (§7.1: "only the data in the matching buckets are
//! actually compared"). The hash is bit sampling, the LSH family for Hamming distance: each of `bands`
//! bands reads `bits` bit positions drawn with a fixed seed, and an item's bucket in a band is those
//! bits. The host builds the buckets once per file (reading every item) and keeps them in the file
//! system's metadata folder, named by the file's id, so a file put again under the same name gets new
//! ones.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use insitu_device::protocol::{IspLimits, IspNearest, IspNearestReply};
use insitu_device::work;
use insitu_device::{checked_body, with_checksum};
use insitu_kernels::hamming::{distance, Nearest};
use serde::Serialize;

use crate::bluedbm::apps::{self, AppCost, Placement};
use crate::bluedbm::fs::{spare, Access, Fs, FsFile};
use crate::error::{HostError, Result};
use crate::outfile::OutFile;
use crate::report::CpuClock;

/// Locality-sensitive hashing by bit sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Lsh {
    pub bands: u32,
    /// Bits sampled per band, 1 to 64.
    pub bits: u32,
}

/// How to search.
#[derive(Debug, Clone, Copy)]
pub struct NearestOptions {
    pub placement: Placement,
    pub k: u32,
    pub lsh: Option<Lsh>,
    /// The node whose host searches (host placements).
    pub node: u32,
    /// Host threads (host placements).
    pub threads: u32,
    /// Engines and a flash throttle for the in-store processors.
    pub limits: IspLimits,
    /// H-DRAM with items missing from DRAM (§7.1's "DRAM + 10% flash", "DRAM + 5% disk").
    pub misses: Misses,
}

/// Shares of the items a host-DRAM search does not find in DRAM (0 to 1 each, together at most 1), chosen
/// by a fixed hash of the item's index: those on flash are read when they are compared, a synchronous
/// page read through the device (as the paper's software did); those on the host's disk
/// (`[host.disk]`) wait for its head, their bytes served from the resident copy (the disk is modeled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Misses {
    pub flash: f64,
    pub disk: f64,
}

impl Misses {
    fn is_none(&self) -> bool {
        self.flash == 0.0 && self.disk == 0.0
    }

    /// Where item `i` is: 0 DRAM, 1 flash, 2 disk.
    fn place(&self, i: u32) -> u8 {
        let mut z = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let u = (z ^ (z >> 31)) as f64 / u64::MAX as f64;
        if u < self.flash {
            1
        } else if u < self.flash + self.disk {
            2
        } else {
            0
        }
    }
}

/// The nearest items of each query, and what finding them cost.
#[derive(Debug, Clone, Serialize)]
pub struct NearestResult {
    /// Per query, (item, distance), closest first.
    pub nearest: Vec<Vec<(u32, u32)>>,
    /// Items compared, summed over queries.
    pub compared: u64,
    /// Items in the file.
    pub items: u64,
    /// Whether this run built the file's LSH buckets (once per file and hashing), and the seconds it took.
    pub lsh_built: bool,
    pub lsh_build_s: f64,
    pub cost: AppCost,
}

/// Finds the `k` nearest items of file `name` to each query of `queries` (page-sized items one after
/// another) as `opts` says.
pub fn nearest(fs: &Fs, name: &str, queries: &[u8], opts: NearestOptions) -> Result<NearestResult> {
    fs.check_node(opts.node)?;
    apps::check_threads(opts.threads)?;
    let f = fs.file(name)?;
    let ps = fs.page_size();
    if f.size == 0 || f.size % ps as u64 != 0 {
        return Err(HostError::InvalidArgument(format!(
            "{name} is {} bytes, not a whole number of {ps}-byte items: nearest-neighbour items are a flash \
             page each (§7.1), so the file is refused rather than padded",
            f.size
        )));
    }
    if queries.is_empty() || !queries.len().is_multiple_of(ps) {
        return Err(HostError::InvalidArgument(format!(
            "the queries are {} bytes; a query is one {ps}-byte item (several may follow one another)",
            queries.len()
        )));
    }
    if opts.k == 0 {
        return Err(HostError::InvalidArgument("k must be at least 1".into()));
    }
    let m = opts.misses;
    if !m.is_none() {
        let ok = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        if !(ok(m.flash) && ok(m.disk) && m.flash + m.disk <= 1.0) {
            return Err(HostError::InvalidArgument(format!(
                "the shares of items on flash ({}) and on disk ({}) must be 0 to 1, together at most 1",
                m.flash, m.disk
            )));
        }
        if opts.placement != Placement::HostDram {
            return Err(HostError::InvalidArgument(
                "items on flash or disk are a host-DRAM search's misses: use the host-dram placement".into(),
            ));
        }
        if m.disk > 0.0 && fs.array().profile().host.disk.is_none() {
            return Err(HostError::InvalidArgument(format!(
                "host profile {} has no disk ([disk])",
                fs.array().profile().host.name
            )));
        }
    }
    let items = f.pages.len();
    let nq = queries.len() / ps;
    // The items each query is compared with: all, or its LSH candidates.
    let (candidates, lsh_built, lsh_build_s) = match opts.lsh {
        None => (vec![(0..items as u32).collect::<Vec<u32>>()], false, 0.0),
        Some(lsh) => {
            let t = Instant::now();
            let (keys, built) = lsh_keys(fs, f, lsh)?;
            let build_s = if built { t.elapsed().as_secs_f64() } else { 0.0 };
            let per_query =
                queries.chunks(ps).map(|q| lsh_candidates(&keys, &sample_keys(q, lsh), lsh)).collect();
            (per_query, built, build_s)
        }
    };
    // H-DRAM: the items are in the host's memory before the search starts (read outside the timing).
    let resident = match opts.placement {
        Placement::HostDram => {
            let mut data = Vec::with_capacity(f.size as usize);
            fs.get(&f.name, &mut data)?;
            Some(data)
        }
        _ => None,
    };
    let (t0, cpu) = (Instant::now(), CpuClock::start(fs.array())?);
    let mut cost = AppCost { placement: opts.placement, bytes: f.size, ..Default::default() };
    // One pass per distinct candidate set: all queries at once when exhaustive, a query at a time with LSH.
    let passes: Vec<(Vec<usize>, &[u32])> = match opts.lsh {
        None => vec![((0..nq).collect(), &candidates[0])],
        Some(_) => (0..nq).map(|q| (vec![q], candidates[q].as_slice())).collect(),
    };
    let mut nearest = vec![Vec::new(); nq];
    let mut compared = 0u64;
    for (qs, cand) in passes {
        let qbytes: Vec<u8> = qs.iter().flat_map(|q| queries[q * ps..(q + 1) * ps].iter().copied()).collect();
        compared += (cand.len() * qs.len()) as u64;
        let found = match (opts.placement, &resident) {
            (Placement::Isp, _) => in_store(fs, f, &qbytes, cand, opts, &mut cost)?,
            (_, r) => on_host(fs, f, &qbytes, cand, opts, r.as_deref(), &mut cost)?,
        };
        for (q, n) in qs.into_iter().zip(found) {
            nearest[q] = n;
        }
    }
    cost.wall_s = t0.elapsed().as_secs_f64();
    (cost.host_cpu_s, cost.device_cpu_s) = cpu.read(fs.array())?;
    cost.finish(fs.array().profile(), fs.node_count());
    Ok(NearestResult { nearest, compared, items: items as u64, lsh_built, lsh_build_s, cost })
}

/// The queries against items `cand` on the in-store processors of their nodes, a job a node, all at
/// once; the nodes' answers merged. Adds the slowest node's time to `cost`.
fn in_store(
    fs: &Fs,
    f: &FsFile,
    queries: &[u8],
    cand: &[u32],
    opts: NearestOptions,
    cost: &mut AppCost,
) -> Result<Vec<Vec<(u32, u32)>>> {
    let k = opts.k;
    let array = fs.array();
    let profile = array.profile();
    let nq = queries.len() / fs.page_size();
    let mut nodes: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for &i in cand {
        nodes.entry(f.pages[i as usize].node).or_default().push(i);
    }
    let mut pending = Vec::new();
    for (node, idx) in &nodes {
        let job = IspNearest {
            queries: queries.to_vec(),
            pages: idx.iter().map(|i| apps::addr(&f.pages[*i as usize])).collect(),
            spares: idx.iter().map(|i| spare(f.id, *i as u64)).collect(),
            items: idx.clone(),
            k,
            limits: opts.limits,
        };
        let dev = array.device(*node)?;
        pending.push((*node, idx.len(), dev.submit(job).map_err(HostError::device(*node))?));
    }
    let mut merged: Vec<Nearest> = (0..nq).map(|_| Nearest::new(k as usize)).collect();
    let mut pass = apps::Pass::default();
    for (node, pages, p) in pending {
        let r: IspNearestReply = p.wait().map_err(HostError::device(node))?;
        // Down: the queries and the page list (address, spare record, item number); up: k results a query.
        let down = (queries.len() + pages * 20) as u64;
        let up = (nq * (k as usize).min(pages) * 8) as u64;
        pass.add(cost, profile, (node, &r.job), down, up);
        for (m, found) in merged.iter_mut().zip(&r.nearest) {
            m.merge(found);
        }
    }
    pass.finish(cost);
    cost.bound = apps::isp_bound(opts.limits);
    Ok(merged.into_iter().map(Nearest::into_sorted).collect())
}

/// The queries against items `cand` by host software: the items through node `opts.node`'s device
/// (H-F), through their nodes' hosts (H-RH-F) or from DRAM (`resident`, H-DRAM), compared by
/// `opts.threads` threads.
fn on_host(
    fs: &Fs,
    f: &FsFile,
    queries: &[u8],
    cand: &[u32],
    opts: NearestOptions,
    resident: Option<&[u8]>,
    cost: &mut AppCost,
) -> Result<Vec<Vec<(u32, u32)>>> {
    let ps = fs.page_size();
    let profile = fs.array().profile();
    let threads = opts.threads.max(1) as usize;
    cost.threads = threads as u32;
    let nq = queries.len() / ps;
    let mut merged: Vec<Nearest> = (0..nq).map(|_| Nearest::new(opts.k as usize)).collect();
    let (mut read_s, mut remote_s, mut read_up) = (0.0, 0.0, 0u64);
    // Misses of a host-DRAM search: each flash miss a synchronous page read, each disk miss a wait.
    let (mut flash_wait_s, mut flash_misses, mut disk_misses) = (0.0, 0u64, 0u64);
    let mut missed: std::collections::HashMap<u32, Vec<u8>> = Default::default();
    const CHUNK: usize = 4096;
    for chunk in cand.chunks(CHUNK) {
        if resident.is_some() && !opts.misses.is_none() {
            missed.clear();
            for &i in chunk {
                match opts.misses.place(i) {
                    1 => {
                        let (page, r) =
                            fs.read_pages_via(&f.name, &[i as usize], opts.node, Access::HostFlash)?;
                        flash_wait_s += r.modeled_s + apps::storage_cpu_s(profile, 1, ps as u64);
                        cost.add_read(&r, profile, ps);
                        flash_misses += 1;
                        missed.insert(i, page);
                    }
                    2 => disk_misses += 1,
                    _ => {}
                }
            }
        }
        let missed = &missed;
        let fetched;
        let data: &[u8] = match resident {
            Some(d) => d,
            None => {
                let idx: Vec<usize> = chunk.iter().map(|i| *i as usize).collect();
                let (data, r) = fs.read_pages_via(&f.name, &idx, opts.node, opts.placement.access())?;
                read_s += r.modeled_s;
                read_up += r.pcie_up_bytes;
                if opts.placement == Placement::RemoteHost {
                    remote_s += apps::remote_hosts_s(profile, f, &idx, opts.node, ps);
                }
                cost.add_read(&r, profile, ps);
                fetched = data;
                &fetched
            }
        };
        // Item `chunk[j]` is at slot `j` of fetched data, at its own index in resident data.
        let slot = |j: usize| if resident.is_some() { chunk[j] as usize } else { j };
        let per = chunk.len().div_ceil(threads).max(1);
        let parts: Vec<Vec<Nearest>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..chunk.len())
                .step_by(per)
                .map(|a| {
                    s.spawn(move || {
                        let mut best: Vec<Nearest> = (0..nq).map(|_| Nearest::new(opts.k as usize)).collect();
                        for j in a..(a + per).min(chunk.len()) {
                            let item = match missed.get(&chunk[j]) {
                                Some(page) => page.as_slice(),
                                None => &data[slot(j) * ps..(slot(j) + 1) * ps],
                            };
                            for (q, b) in best.iter_mut().enumerate() {
                                b.push(chunk[j], distance(&queries[q * ps..(q + 1) * ps], item));
                            }
                        }
                        best
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a comparing thread panicked")).collect()
        });
        for part in parts {
            for (m, p) in merged.iter_mut().zip(part) {
                m.merge(&p.into_sorted());
            }
        }
    }
    let bytes = (cand.len() * ps) as u64;
    let mut cpu_s = apps::host_cpu_s(profile, work::HAMMING_BYTES, bytes * nq as u64)?;
    if resident.is_none() {
        cpu_s += apps::storage_cpu_s(profile, cand.len() as u64, bytes);
    }
    let t = apps::model_threads(profile, threads as u32) as f64;
    // A thread that misses waits for the page (flash) or the head (disk); the one disk serves one miss at
    // a time; the misses' pages share the PCIe link.
    let disk_s = profile.host.disk.as_ref().map_or(0.0, |d| d.access_us * 1e-6 + ps as f64 / d.bw)
        * disk_misses as f64;
    let miss_s = flash_wait_s + disk_s;
    let cpu_s = cpu_s / t;
    // Each item crosses the memory bus once, whatever the number of queries compared with it.
    let mut mem_s = bytes as f64 / profile.host.memory_bw;
    if resident.is_none() {
        mem_s += apps::host_memory_s(profile, "storage.bytes", bytes);
    }
    let pcie_s = (flash_misses * ps as u64) as f64 / profile.host_link.read_bw;
    let (s, b) = apps::bound(&[
        (apps::reads_name(profile, read_up, read_s), read_s),
        ("host cpu", cpu_s),
        ("host memory", mem_s),
        ("host cpu and misses", cpu_s + miss_s / t),
        ("the disk", disk_s),
        ("PCIe", pcie_s),
        ("the remote hosts' cpu", remote_s),
    ]);
    cost.modeled_s += s;
    cost.bound = b;
    cost.modeled_host_cpu_s += cpu_s;
    // The host is busy while its cores compare or its memory moves the items, whichever is longer, and
    // in its storage stack for each flash miss.
    let miss_cpu_s = apps::storage_cpu_s(profile, flash_misses, flash_misses * ps as u64) / t;
    cost.busy.host(opts.node, cpu_s.max(mem_s) + miss_cpu_s);
    Ok(merged.into_iter().map(Nearest::into_sorted).collect())
}

/// The sampled bit positions of band `b` of `lsh` over items of `item_bits` bits (a fixed seed, so an
/// index and its queries agree).
fn band_positions(lsh: Lsh, b: u32, item_bits: u64) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ ((b as u64) << 32 | lsh.bits as u64);
    (0..lsh.bits)
        .map(|_| {
            // SplitMix64.
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % item_bits
        })
        .collect()
}

/// An item's bucket in each band of `lsh`.
fn sample_keys(item: &[u8], lsh: Lsh) -> Vec<u64> {
    let bits = item.len() as u64 * 8;
    (0..lsh.bands)
        .map(|b| {
            band_positions(lsh, b, bits)
                .iter()
                .enumerate()
                .fold(0u64, |k, (j, p)| k | (((item[(p / 8) as usize] >> (p % 8)) & 1) as u64) << j)
        })
        .collect()
}

/// Items sharing a bucket with `q` (the query's keys) in at least one band, in index order.
fn lsh_candidates(keys: &[u64], q: &[u64], lsh: Lsh) -> Vec<u32> {
    let bands = lsh.bands as usize;
    keys.chunks(bands)
        .enumerate()
        .filter(|(_, k)| k.iter().zip(q).any(|(a, b)| a == b))
        .map(|(i, _)| i as u32)
        .collect()
}

/// The first line of a kept file of LSH buckets, before its checksum.
const LSH_HEADER: &str = "insitu lsh v1 crc32=";

/// Where the buckets of file `f` under `lsh` are kept.
fn lsh_path(fs: &Fs, f: &FsFile, lsh: Lsh) -> PathBuf {
    fs.meta_dir().join("lsh").join(format!("{}-{}x{}.bin", f.id, lsh.bands, lsh.bits))
}

/// The most LSH bands a search takes: each band keeps a key an item (8 bytes) on the host, and far fewer
/// bands already have a query compare with about every item.
pub const MAX_LSH_BANDS: u32 = 1024;

/// Every item's bucket in every band (`bands` keys an item), from the metadata folder or built now by
/// reading every item (and kept); says whether it was built.
fn lsh_keys(fs: &Fs, f: &FsFile, lsh: Lsh) -> Result<(Vec<u64>, bool)> {
    if !(1..=MAX_LSH_BANDS).contains(&lsh.bands) || !(1..=64).contains(&lsh.bits) {
        return Err(HostError::InvalidArgument(format!(
            "LSH takes 1 to {MAX_LSH_BANDS} bands of 1 to 64 bits, not {} bands of {} bits (with more bands \
             a query is compared with about every item: leave LSH out to compare with all of them)",
            lsh.bands, lsh.bits
        )));
    }
    let path = lsh_path(fs, f, lsh);
    let want = f.pages.len() * lsh.bands as usize;
    // Kept with a checksum: a file changed since (a flipped bit, a cut-off copy) is built again, never
    // trusted for its length alone (a wrong bucket would silently change the answers).
    if let Ok(bytes) = std::fs::read(&path) {
        let body =
            bytes.strip_prefix(LSH_HEADER.as_bytes()).and_then(|_| checked_body(LSH_HEADER, &bytes).ok());
        if let Some(body) = body.filter(|b| b.len() == want * 8) {
            return Ok((insitu_kernels::le::decode_u64s(body), false));
        }
    }
    let mut data = Vec::with_capacity(f.size as usize);
    fs.get(&f.name, &mut data)?;
    let keys: Vec<u64> = data.chunks(fs.page_size()).flat_map(|item| sample_keys(item, lsh)).collect();
    let dir = path.parent().expect("a folder");
    std::fs::create_dir_all(dir).map_err(|e| HostError::io(dir, e))?;
    let mut out = OutFile::create_in_array(&path)?;
    let bytes = with_checksum(LSH_HEADER, &insitu_kernels::le::encode_u64s(&keys));
    std::io::Write::write_all(&mut out, &bytes).map_err(|e| HostError::io(&path, e))?;
    out.commit()?;
    Ok((keys, true))
}
