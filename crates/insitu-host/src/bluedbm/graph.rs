//! Graphs for BlueDBM's graph traversal (ISCA '15 §7.2): the Graph500 Kronecker generator and edge-list
//! files.
//!
//! The generator is the Graph500 reference's (its `kronecker_generator`): each of the `edge_factor x 2^scale`
//! edges picks, bit by bit from the top level down, one of the adjacency matrix's four quadrants with the
//! R-MAT probabilities a = 0.57, b = c = 0.19 (d = 0.05), then vertex labels are permuted at random and the
//! edges shuffled, so neither a label nor a position gives the structure away. Seeded: the same seed gives
//! the same graph on any machine.
//!
//! Edge-list files: text (two integers a line, `#` comments and blank lines skipped) or little-endian u32
//! pairs; the format comes from the extension (`.bin`, `.u32`: binary; anything else: text) unless named.
//!
//! A stored graph ([`GraphPages`]) is a file of the appliance's file system with one vertex a flash page
//! (§7.2: "each vertex ... in a page"), so that a traversal reads one page to learn where to go next: page
//! `v` holds vertex `v`'s neighbours; a vertex with more than a page holds continues in spill pages after
//! the `n` vertex pages. Every page, little-endian u32s: the vertex, its degree, the neighbours in this
//! page, the file page of the next spill page (`u32::MAX`: none), then those neighbours; zeros to the end.
//! Neighbours are kept sorted and once each; self-loops are dropped; an undirected graph stores each edge
//! both ways (Graph500's graphs are undirected).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::bluedbm::apps::Placement;
use crate::bluedbm::power::{self, storage_cpu_s, Busy, Modeled};
use crate::error::{HostError, Result};
use crate::outfile::OutFile;
use crate::report::CpuClock;

/// Graph500's R-MAT quadrant probabilities (a, b, c; d = 1 - a - b - c).
pub const RMAT: (f64, f64, f64) = (0.57, 0.19, 0.19);

/// The most edges generated at once (8 bytes each in memory): 2^30, 8 GiB.
pub const MAX_EDGES: u64 = 1 << 30;

/// How an edge list is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeFormat {
    /// `u v` a line.
    Text,
    /// Little-endian u32 pairs.
    U32le,
}

impl EdgeFormat {
    /// The format a file's extension implies.
    pub fn of(path: &Path) -> EdgeFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some("bin" | "u32") => EdgeFormat::U32le,
            _ => EdgeFormat::Text,
        }
    }

    /// `text` or `u32le`.
    pub fn parse(s: &str) -> Result<EdgeFormat> {
        match s {
            "text" => Ok(EdgeFormat::Text),
            "u32le" => Ok(EdgeFormat::U32le),
            other => {
                Err(HostError::InvalidArgument(format!("edge format must be text or u32le, not {other:?}")))
            }
        }
    }
}

/// Most vertices of a stored graph: one a page, and a file has at most 2^24 pages (the file system's limit).
pub const MAX_VERTICES: u64 = crate::bluedbm::fs::MAX_FILE_PAGES;

/// The Graph500 Kronecker graph of `2^scale` vertices and `edge_factor x 2^scale` edges, seeded;
/// `permute` relabels the vertices and shuffles the edges as the reference does (off: the raw R-MAT
/// quadrant structure, for tests).
pub fn kronecker(scale: u32, edge_factor: u32, seed: u64, permute: bool) -> Result<Vec<(u32, u32)>> {
    if !(1..=32).contains(&scale) {
        return Err(HostError::InvalidArgument(format!(
            "--scale must be 1 to 32 (2^scale vertices with u32 ids), not {scale}"
        )));
    }
    if edge_factor == 0 {
        return Err(HostError::InvalidArgument("--edge-factor must be at least 1".into()));
    }
    let edges = u64::from(edge_factor) << scale;
    if edges > MAX_EDGES {
        return Err(HostError::InvalidArgument(format!(
            "{edges} edges (edge factor {edge_factor} x 2^{scale}) is more than the {MAX_EDGES} generated at \
             once: lower --scale or --edge-factor"
        )));
    }
    let (a, b, c) = RMAT;
    let (ab, c_norm, a_norm) = (a + b, c / (1.0 - (a + b)), a / (a + b));
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(edges as usize);
    for _ in 0..edges {
        let (mut u, mut v) = (0u64, 0u64);
        for bit in 0..scale {
            let ii = rng.gen::<f64>() > ab;
            let jj = rng.gen::<f64>() > if ii { c_norm } else { a_norm };
            u |= u64::from(ii) << bit;
            v |= u64::from(jj) << bit;
        }
        out.push((u as u32, v as u32));
    }
    if permute {
        let mut label: Vec<u32> = (0..(1u64 << scale)).map(|x| x as u32).collect();
        label.shuffle(&mut rng);
        for e in &mut out {
            *e = (label[e.0 as usize], label[e.1 as usize]);
        }
        out.shuffle(&mut rng);
    }
    Ok(out)
}

/// Writes `edges` to `path` in `format` (written beside it, then moved into place).
pub fn write_edges(path: &Path, edges: &[(u32, u32)], format: EdgeFormat) -> Result<()> {
    let mut f = OutFile::create(path)?;
    let io = |e| HostError::io(path, e);
    match format {
        EdgeFormat::Text => {
            for (u, v) in edges {
                writeln!(f, "{u} {v}").map_err(io)?;
            }
        }
        EdgeFormat::U32le => {
            for (u, v) in edges {
                f.write_all(&u.to_le_bytes()).map_err(io)?;
                f.write_all(&v.to_le_bytes()).map_err(io)?;
            }
        }
    }
    f.commit()
}

/// Edges as little-endian u32 pairs one after another (a `.u32` file's bytes, or Python's), refused unless
/// whole pairs.
pub fn edges_from_le(bytes: &[u8]) -> std::result::Result<Vec<(u32, u32)>, String> {
    if !bytes.len().is_multiple_of(8) {
        return Err(format!("{} bytes is not a whole number of u32 pairs (8 bytes an edge)", bytes.len()));
    }
    let words = insitu_kernels::le::decode_u32s(bytes);
    Ok(words.chunks_exact(2).map(|e| (e[0], e[1])).collect())
}

/// Reads an edge list; text errors name the line.
pub fn read_edges(path: &Path, format: EdgeFormat) -> Result<Vec<(u32, u32)>> {
    let file = std::fs::File::open(path).map_err(|e| HostError::io(path, e))?;
    let bad = |detail: String| HostError::InvalidArgument(format!("{}: {detail}", path.display()));
    let mut out = Vec::new();
    match format {
        EdgeFormat::U32le => {
            let mut bytes = Vec::new();
            BufReader::new(file).read_to_end(&mut bytes).map_err(|e| HostError::io(path, e))?;
            out = edges_from_le(&bytes).map_err(bad)?;
        }
        EdgeFormat::Text => {
            // A binary edge list read as text is said to be one, not quoted back byte by byte.
            let binary = |n: usize| {
                bad(format!(
                    "line {}: not text (control bytes or invalid UTF-8); a file of little-endian u32 pairs takes \
                     --format u32le",
                    n + 1
                ))
            };
            for (n, line) in BufReader::new(file).lines().enumerate() {
                let line = line.map_err(|e| match e.kind() {
                    std::io::ErrorKind::InvalidData => binary(n),
                    _ => HostError::io(path, e),
                })?;
                if line.bytes().any(|b| b < 0x20 && b != b'\t' && b != b'\r') {
                    return Err(binary(n));
                }
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let mut it = line.split_whitespace();
                let mut id = || -> Result<u32> {
                    let t = it.next().ok_or_else(|| bad(format!("line {}: two vertex ids needed", n + 1)))?;
                    t.parse()
                        .map_err(|_| bad(format!("line {}: {t:?} is not a vertex id (0 to 2^32 - 1)", n + 1)))
                };
                let (u, v) = (id()?, id()?);
                if it.next().is_some() {
                    return Err(bad(format!("line {}: more than two fields", n + 1)));
                }
                out.push((u, v));
            }
        }
    }
    Ok(out)
}

/// Bytes of a stored graph page's header: vertex, degree, neighbours here, next spill page.
pub const PAGE_HEADER: usize = 16;

/// "No next page".
pub const NO_PAGE: u32 = u32::MAX;

/// A graph as adjacency lists (compressed sparse rows), neighbours sorted and unique.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjacency {
    /// `offsets[v]..offsets[v + 1]` indexes `v`'s neighbours.
    pub offsets: Vec<u64>,
    pub neighbours: Vec<u32>,
}

impl Adjacency {
    /// The adjacency of `edges` over `vertices` vertices (`None`: one more than the largest id), both ways
    /// unless `directed`; ids past `vertices` are refused by name.
    pub fn build(edges: &[(u32, u32)], vertices: Option<u64>, directed: bool) -> Result<Adjacency> {
        let n = match vertices {
            Some(n) => n,
            None => edges.iter().map(|(u, v)| u64::from(*u.max(v)) + 1).max().unwrap_or(0),
        };
        // A vertex a page: no more vertices than a file has pages, refused before anything is sized by them.
        if n > MAX_VERTICES {
            return Err(HostError::InvalidArgument(format!(
                "a graph stored a vertex a page has at most {MAX_VERTICES} vertices (a file's most pages), not {n}"
            )));
        }
        if let Some((i, (u, v))) = edges.iter().enumerate().find(|(_, (u, v))| u64::from(*u.max(v)) >= n) {
            return Err(HostError::InvalidArgument(format!(
                "edge {i} ({u}, {v}) names a vertex past the graph's {n} vertices (ids below {n})"
            )));
        }
        let mut deg = vec![0u64; n as usize + 1];
        let arcs = || {
            edges
                .iter()
                .filter(|(u, v)| u != v)
                .flat_map(move |&(u, v)| std::iter::once((u, v)).chain((!directed).then_some((v, u))))
        };
        for (u, _) in arcs() {
            deg[u as usize + 1] += 1;
        }
        for i in 1..deg.len() {
            deg[i] += deg[i - 1];
        }
        let mut fill = deg.clone();
        let mut nb = vec![0u32; *deg.last().unwrap_or(&0) as usize];
        for (u, v) in arcs() {
            nb[fill[u as usize] as usize] = v;
            fill[u as usize] += 1;
        }
        // Sorted, once each.
        let mut offsets = Vec::with_capacity(n as usize + 1);
        let mut neighbours = Vec::with_capacity(nb.len());
        offsets.push(0);
        for w in deg.windows(2) {
            let list = &mut nb[w[0] as usize..w[1] as usize];
            list.sort_unstable();
            let mut last = None;
            for &x in list.iter() {
                if last != Some(x) {
                    neighbours.push(x);
                    last = Some(x);
                }
            }
            offsets.push(neighbours.len() as u64);
        }
        Ok(Adjacency { offsets, neighbours })
    }

    pub fn vertices(&self) -> u64 {
        self.offsets.len() as u64 - 1
    }

    pub fn neighbours(&self, v: u32) -> &[u32] {
        &self.neighbours[self.offsets[v as usize] as usize..self.offsets[v as usize + 1] as usize]
    }
}

/// A graph's pages, made as they are read (a graph of 2^21 vertices is 16 GiB of 8 KB pages).
#[derive(Debug)]
pub struct GraphPages<'a> {
    adj: &'a Adjacency,
    page_size: usize,
    /// Each vertex's first spill page (`NO_PAGE`: none).
    first_spill: Vec<u32>,
    /// The next page to make, and the pages in all.
    next: u64,
    pages: u64,
    /// Spill pages in order: (vertex, page within the vertex's chain, 1-based).
    spills: Vec<(u32, u32)>,
    page: Vec<u8>,
    at: usize,
}

impl<'a> GraphPages<'a> {
    /// The pages of `adj` at `page_size` bytes a page.
    pub fn new(adj: &'a Adjacency, page_size: usize) -> Result<GraphPages<'a>> {
        let cap = Self::capacity(page_size)?;
        let n = adj.vertices();
        let mut first_spill = vec![NO_PAGE; n as usize];
        let mut spills = Vec::new();
        for v in 0..n as u32 {
            let d = adj.neighbours(v).len();
            let extra = d.saturating_sub(cap).div_ceil(cap);
            if extra > 0 {
                first_spill[v as usize] = u32::try_from(n + spills.len() as u64).map_err(|_| too_many())?;
                spills.extend((1..=extra as u32).map(|k| (v, k)));
            }
        }
        let pages = n + spills.len() as u64;
        if pages >= u64::from(NO_PAGE) {
            return Err(too_many());
        }
        Ok(GraphPages { adj, page_size, first_spill, next: 0, pages, spills, page: Vec::new(), at: 0 })
    }

    /// Neighbours a page holds.
    pub fn capacity(page_size: usize) -> Result<usize> {
        if page_size < PAGE_HEADER + 4 || !page_size.is_multiple_of(4) {
            return Err(HostError::InvalidArgument(format!(
                "a page of {page_size} bytes cannot hold a vertex"
            )));
        }
        Ok((page_size - PAGE_HEADER) / 4)
    }

    /// Pages in all, and spill pages among them.
    pub fn pages(&self) -> (u64, u64) {
        (self.pages, self.spills.len() as u64)
    }

    fn make(&mut self, i: u64) {
        let cap = (self.page_size - PAGE_HEADER) / 4;
        let n = self.adj.vertices();
        let (v, k) = if i < n { (i as u32, 0u32) } else { self.spills[(i - n) as usize] };
        let all = self.adj.neighbours(v);
        let here = &all[(k as usize * cap).min(all.len())..((k as usize + 1) * cap).min(all.len())];
        let more = (k as usize + 1) * cap < all.len();
        let next = if !more {
            NO_PAGE
        } else if k == 0 {
            self.first_spill[v as usize]
        } else {
            (i + 1) as u32
        };
        self.page.clear();
        for w in [v, all.len() as u32, here.len() as u32, next] {
            self.page.extend_from_slice(&w.to_le_bytes());
        }
        for x in here {
            self.page.extend_from_slice(&x.to_le_bytes());
        }
        self.page.resize(self.page_size, 0);
        self.at = 0;
    }
}

fn too_many() -> HostError {
    HostError::InvalidArgument("the graph needs more than 2^32 - 1 pages".into())
}

impl Read for GraphPages<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.page.len() {
            if self.next == self.pages {
                return Ok(0);
            }
            self.make(self.next);
            self.next += 1;
        }
        let k = buf.len().min(self.page.len() - self.at);
        buf[..k].copy_from_slice(&self.page[self.at..self.at + k]);
        self.at += k;
        Ok(k)
    }
}

/// What [`put_graph`] stored.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoredGraph {
    pub name: String,
    pub vertices: u64,
    /// Neighbour entries stored (each undirected edge twice).
    pub arcs: u64,
    pub pages: u64,
    pub spill_pages: u64,
    pub bytes: u64,
    pub max_degree: u64,
}

/// Stores `adj` as file `name` of the appliance's file system, a vertex a page, striped over every node.
pub fn put_graph(
    fs: &mut crate::bluedbm::fs::Fs<'_>,
    name: &str,
    adj: &Adjacency,
    node: Option<u32>,
) -> Result<StoredGraph> {
    fs.check_new_name(name)?;
    let mut pages = GraphPages::new(adj, fs.page_size())?;
    let (n, spill) = pages.pages();
    fs.check_put(name, n * fs.page_size() as u64, node)?;
    let f = fs.put(name, &mut pages, node)?;
    let max_degree = (0..adj.vertices() as u32).map(|v| adj.neighbours(v).len() as u64).max().unwrap_or(0);
    Ok(StoredGraph {
        name: f.name,
        vertices: adj.vertices(),
        arcs: adj.neighbours.len() as u64,
        pages: n,
        spill_pages: spill,
        bytes: f.size,
        max_degree,
    })
}

/// A breadth-first traversal of a stored graph and what it cost.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Bfs {
    pub from: u32,
    /// Vertices reached (the start included), and each one's level.
    pub reached: u64,
    pub levels: std::collections::BTreeMap<u32, u32>,
    /// Levels below the start.
    pub depth: u32,
    /// Rounds of dependent reads: each reads the pages the last one pointed to.
    pub rounds: u64,
    #[serde(flatten)]
    pub cost: TraversalCost,
}

/// What a traversal cost: its reads, modeled and measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraversalCost {
    /// The reads: pages, network, modeled time on the appliance's profile, wall time here.
    pub read: crate::bluedbm::fs::ViaReport,
    /// Modeled seconds of the host software that asks for each page (host placements; the in-store
    /// processor's traversal logic is FPGA logic beside its reads), and the whole traversal's.
    pub software_s: f64,
    pub modeled_s: f64,
    /// What kept each node busy, and the traversal's modeled time and energy, the appliance's nodes
    /// together.
    pub busy: Busy,
    pub modeled: Modeled,
    /// Measured here: CPU seconds of the host (this process, less what devices in it spent) and the
    /// devices.
    pub host_cpu_s: f64,
    pub device_cpu_s: f64,
}

/// Who traverses a graph and how its pages reach them (§7.2, Fig. 20).
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    /// The node whose in-store processor or host traverses.
    pub origin: u32,
    /// `Isp` (ISP-F), `Host` (H-F), `RemoteHost` (H-RH-F: each page's host reads it from its flash and
    /// sends it) or `HostDram` (each page's host sends it from its memory).
    pub placement: Placement,
    /// With `HostDram`: the share of accesses the page's host serves from its flash instead (Fig. 20's
    /// "DRAM + x% F"), each access drawn by a fixed hash of its sequence number.
    pub flash_share: f64,
}

impl Reader {
    fn check(&self) -> Result<()> {
        let x = self.flash_share;
        if !(x.is_finite() && (0.0..=1.0).contains(&x)) {
            return Err(HostError::InvalidArgument(format!(
                "the share of accesses to flash must be 0 to 1, not {x}"
            )));
        }
        if x > 0.0 && self.placement != Placement::HostDram {
            return Err(HostError::InvalidArgument(
                "accesses to flash are a host-DRAM traversal's misses: use the host-dram placement".into(),
            ));
        }
        Ok(())
    }

    /// Whether access number `seq` of a traversal misses DRAM and goes to flash.
    fn misses_dram(&self, seq: u64) -> bool {
        let u = (walk_pick(0x5eed_f1a5, (seq >> 32) as u32, seq as u32) >> 11) as f64 / (1u64 << 53) as f64;
        self.flash_share > 0.0 && u < self.flash_share
    }
}

/// Page requests the reader's host makes for the reads of `r`: one a page, none for a page in its own
/// memory (H-D at its own node); an in-store processor's are logic beside the reads.
fn own_requests(placement: Placement, r: &crate::bluedbm::fs::ViaReport) -> u64 {
    match placement {
        Placement::Isp => 0,
        Placement::Host | Placement::RemoteHost => r.pages,
        Placement::HostDram => r.pages - r.local_pages,
    }
}

/// Modeled seconds the software of a traversal spends asking for the pages of `r` one round after
/// another: a request through a host's storage stack a page, on one core (its rounds cannot overlap: each
/// depends on the one before), the reader's ([`own_requests`]) and, when the page's host serves it
/// (H-RH-F, H-D), that host's too.
fn software_s(
    fs: &crate::bluedbm::fs::Fs<'_>,
    placement: Placement,
    r: &crate::bluedbm::fs::ViaReport,
) -> f64 {
    let requests = own_requests(placement, r) + r.served_pages.values().sum::<u64>();
    storage_cpu_s(fs.array().profile(), requests, requests * fs.page_size() as u64)
}

/// A traversal's cost once its reads `r` are done, begun at `started` and `cpu`: the host software's
/// modeled time beside the reads', what kept each node busy (the nodes' flash and serving hosts for the
/// reads, the reader's host for its requests) and the modeled energy, and the measured wall and CPU.
fn traversal_cost(
    fs: &crate::bluedbm::fs::Fs<'_>,
    by: Reader,
    mut r: crate::bluedbm::fs::ViaReport,
    (started, cpu): (std::time::Instant, CpuClock),
) -> Result<TraversalCost> {
    r.wall_s = started.elapsed().as_secs_f64();
    let (host_cpu_s, device_cpu_s) = cpu.read(fs.array())?;
    let software_s = software_s(fs, by.placement, &r);
    let modeled_s = r.modeled_s + software_s;
    let (profile, ps) = (fs.array().profile(), fs.page_size() as u64);
    let mut busy = r.busy(profile, ps as usize);
    let own = own_requests(by.placement, &r);
    if own > 0 {
        busy.host(by.origin, storage_cpu_s(profile, own, own * ps));
    }
    let modeled = power::modeled(profile, fs.node_count(), modeled_s, &busy);
    Ok(TraversalCost { read: r, software_s, modeled_s, busy, modeled, host_cpu_s, device_cpu_s })
}

/// Breadth-first search of graph `name` (stored by [`put_graph`]) from vertex `from`, by `by`: a level's
/// vertex pages are read together, then the spill pages they point to, each round depending on the one
/// before (§7.2). Every page is checked to be the vertex it should be.
pub fn bfs(fs: &crate::bluedbm::fs::Fs<'_>, name: &str, from: u32, by: Reader) -> Result<Bfs> {
    by.check()?;
    fs.check_node(by.origin)?;
    let pages = fs.file(name)?.pages.len();
    if from as usize >= pages {
        return Err(HostError::InvalidArgument(format!(
            "{name} has no vertex {from} (it has {pages} pages)"
        )));
    }
    // Each vertex's level, `UNSEEN` until reached (a page a vertex, so the pages bound the vertex ids).
    const UNSEEN: u32 = u32::MAX;
    let mut level = vec![UNSEEN; pages];
    level[from as usize] = 0;
    let access = by.placement.access();
    let mut report = crate::bluedbm::fs::ViaReport { origin: by.origin, access, ..Default::default() };
    let (started, cpu) = (std::time::Instant::now(), CpuClock::start(fs.array())?);
    let (mut frontier, mut depth, mut rounds) = (vec![from], 0u32, 0u64);
    while !frontier.is_empty() {
        // The next level: vertices not reached before, marked as their pages' neighbours arrive, then in
        // order. An id past the graph's pages goes in too, for the next round's read to refuse as damage.
        let mut found = Vec::new();
        // (page, the vertex it belongs to, whether it is the vertex's own page)
        let mut want: Vec<(usize, u32, bool)> = frontier.iter().map(|v| (*v as usize, *v, true)).collect();
        while !want.is_empty() {
            let start = (depth == 0).then_some(from);
            let mut next = Vec::new();
            read_round(fs, name, &want, by, start, &mut report, |k, _, nb, more| {
                for &v in nb {
                    match level.get_mut(v as usize) {
                        Some(l) if *l == UNSEEN => {
                            *l = depth + 1;
                            found.push(v);
                        }
                        Some(_) => {}
                        None => found.push(v),
                    }
                }
                if more != NO_PAGE {
                    next.push((more as usize, want[k].1, false));
                }
            })?;
            rounds += 1;
            want = next;
        }
        frontier = found;
        frontier.sort_unstable();
        frontier.dedup();
        if !frontier.is_empty() {
            depth += 1;
        }
    }
    let levels: std::collections::BTreeMap<u32, u32> =
        level.iter().enumerate().filter(|(_, l)| **l != UNSEEN).map(|(v, l)| (v as u32, *l)).collect();
    let cost = traversal_cost(fs, by, report, (started, cpu))?;
    Ok(Bfs { from, reached: levels.len() as u64, levels, depth, rounds, cost })
}

/// One round of a traversal's dependent reads: pages `want` (page, the vertex it belongs to, whether it
/// is the vertex's own page) read by `by`, each checked to be that vertex's, the cost added to `report`.
/// On the first round, `start` is the start vertex: its page turning out to be a spill page means the
/// graph has no such vertex. `each(k, degree, neighbours here, next page)` gets page `want[k]`, in order.
fn read_round(
    fs: &crate::bluedbm::fs::Fs<'_>,
    name: &str,
    want: &[(usize, u32, bool)],
    by: Reader,
    start: Option<u32>,
    report: &mut crate::bluedbm::fs::ViaReport,
    mut each: impl FnMut(usize, u32, &[u32], u32),
) -> Result<()> {
    let damaged = |d: String| HostError::FileDamaged { name: name.into(), detail: d };
    let pages = fs.file(name)?.pages.len();
    let idx: Vec<usize> = want.iter().map(|w| w.0).collect();
    if let Some(i) = idx.iter().find(|i| **i >= pages) {
        return Err(damaged(format!("a page points to page {i}, past the graph's {pages}")));
    }
    // DRAM + x% F: the round's misses are read from the pages' flash by their hosts, in the same read.
    let seq = report.pages;
    let miss: Vec<bool> = (0..idx.len()).map(|k| by.misses_dram(seq + k as u64)).collect();
    // Each page is decoded as its batch arrives: a round's memory is a batch, not its pages.
    let r = fs.for_each_page(name, &idx, (by.origin, by.placement.access()), &miss, |k, data| {
        let (page, v, own) = want[k];
        let the_start = own && Some(v) == start;
        let (pv, degree, nb, more) = decode_page(data).map_err(|why| {
            if the_start {
                not_a_graph(name, page, &why)
            } else {
                damaged(format!("page {page} {why}"))
            }
        })?;
        if pv != v {
            if the_start && (pv as usize) < pages {
                return Err(no_vertex(name, v, pv));
            }
            if the_start {
                return Err(not_a_graph(name, page, &format!("names vertex {pv}, past its {pages} pages")));
            }
            let what = if own { "its vertex" } else { "a spill page of" };
            return Err(damaged(format!("page {page} holds vertex {pv}, not {what} {v}")));
        }
        // put-graph writes a vertex's spill pages after its page and after one another: a page pointing
        // back would be followed for ever.
        if more != NO_PAGE && more as usize <= page {
            return Err(damaged(format!(
                "page {page} of vertex {v} points back to page {more} (spill pages only go forward)"
            )));
        }
        each(k, degree, &nb, more);
        Ok(())
    })?;
    report.add(&r);
    Ok(())
}

/// The error for a traversal of a file whose start page is not a vertex page at all (`why`): not a graph.
fn not_a_graph(name: &str, page: usize, why: &str) -> HostError {
    HostError::InvalidArgument(format!(
        "{name} is not a graph stored by `insitu bluedbm put-graph`: its page {page} {why}"
    ))
}

/// The error for a start vertex whose page is a spill page (of vertex `owner`): past the graph's vertices.
fn no_vertex(name: &str, from: u32, owner: u32) -> HostError {
    HostError::InvalidArgument(format!(
        "{name} has no vertex {from} (page {from} holds more neighbours of vertex {owner}, past the graph's vertices)"
    ))
}

/// Random walks on a stored graph and what they cost.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Walks {
    /// Each walk's vertices, the start first; a walk that reaches a vertex without neighbours ends there.
    pub walks: Vec<Vec<u32>>,
    /// Steps taken, all walks together.
    pub steps: u64,
    /// Rounds of dependent reads.
    pub rounds: u64,
    #[serde(flatten)]
    pub cost: TraversalCost,
}

/// The neighbour a walk takes: step `step` of walk `walk` under `seed` picks `pick % degree`, the same
/// choice whoever walks (SplitMix64 of the three).
pub fn walk_pick(seed: u64, walk: u32, step: u32) -> u64 {
    let mut z = seed ^ (walk as u64) << 32 ^ step as u64;
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Most vertices a call's walks may hold (walks x (length + 1)): every path is kept and reported, 64 MiB
/// of them at the most.
pub const MAX_WALK_VERTICES: u64 = 1 << 24;

/// Random walks to take: `walks` of them from vertex `from`, `length` steps each, choices by `seed`.
#[derive(Debug, Clone, Copy)]
pub struct WalkSpec {
    pub from: u32,
    pub walks: u32,
    pub length: u32,
    pub seed: u64,
}

/// `walks` random walks of `length` steps on graph `name` from vertex `from`, by `by` (§7.2): each step reads the page of the walk's vertex, picks a neighbour by
/// [`walk_pick`], and follows spill pages as far as the pick lies; the walks' reads of a step go
/// together, each round depending on the one before. Every page is checked to be the vertex it should be.
pub fn walk(fs: &crate::bluedbm::fs::Fs<'_>, name: &str, spec: WalkSpec, by: Reader) -> Result<Walks> {
    by.check()?;
    fs.check_node(by.origin)?;
    let WalkSpec { from, walks, length, seed } = spec;
    if walks == 0 || length == 0 {
        return Err(HostError::InvalidArgument(format!(
            "a walk takes at least one walk of at least one step, not {walks} walk(s) of {length} step(s)"
        )));
    }
    let held = walks as u64 * (length as u64 + 1);
    if held > MAX_WALK_VERTICES {
        return Err(HostError::InvalidArgument(format!(
            "{walks} walks of {length} steps are {held} vertices of paths to keep and report; at most \
             {MAX_WALK_VERTICES} (fewer walks, or shorter ones)"
        )));
    }
    let pages = fs.file(name)?.pages.len();
    if from as usize >= pages {
        return Err(HostError::InvalidArgument(format!(
            "{name} has no vertex {from} (it has {pages} pages)"
        )));
    }
    let damaged = |d: String| HostError::FileDamaged { name: name.into(), detail: d };
    let mut paths: Vec<Vec<u32>> = (0..walks).map(|_| vec![from]).collect();
    let access = by.placement.access();
    let mut report = crate::bluedbm::fs::ViaReport { origin: by.origin, access, ..Default::default() };
    let (started, cpu) = (std::time::Instant::now(), CpuClock::start(fs.array())?);
    let (mut rounds, mut steps) = (0u64, 0u64);
    let mut live: Vec<u32> = (0..walks).collect();
    for step in 0..length {
        // (walk, page to read, the vertex it belongs to, neighbours to skip before the pick)
        let mut want: Vec<(u32, usize, u32, Option<u64>)> = live
            .iter()
            .map(|w| (*w, *paths[*w as usize].last().expect("a start") as usize, 0, None))
            .collect();
        for w in &mut want {
            w.2 = w.1 as u32;
        }
        let mut ended = Vec::new();
        while !want.is_empty() {
            let pages: Vec<(usize, u32, bool)> = want.iter().map(|w| (w.1, w.2, w.3.is_none())).collect();
            let start = (step == 0).then_some(from);
            let mut got = Vec::with_capacity(pages.len());
            read_round(fs, name, &pages, by, start, &mut report, |_, degree, nb, more| {
                got.push((degree, nb.to_vec(), more))
            })?;
            rounds += 1;
            let mut next = Vec::new();
            for ((w, _, v, skip), (degree, nb, more)) in want.iter().zip(got) {
                let left = match skip {
                    Some(s) => *s,
                    None if degree == 0 => {
                        ended.push(*w);
                        continue;
                    }
                    None => walk_pick(seed, *w, step) % degree as u64,
                };
                if (left as usize) < nb.len() {
                    paths[*w as usize].push(nb[left as usize]);
                    steps += 1;
                } else if more == NO_PAGE {
                    return Err(damaged(format!("vertex {v} has fewer neighbours than its degree says")));
                } else {
                    next.push((*w, more as usize, *v, Some(left - nb.len() as u64)));
                }
            }
            want = next;
        }
        live.retain(|w| !ended.contains(w));
        if live.is_empty() {
            break;
        }
    }
    let cost = traversal_cost(fs, by, report, (started, cpu))?;
    Ok(Walks { walks: paths, steps, rounds, cost })
}

/// One stored page, decoded: (vertex, degree, neighbours here, next page); or why it is not a vertex
/// page (for the caller to name the file and page).
pub fn decode_page(page: &[u8]) -> std::result::Result<(u32, u32, Vec<u32>, u32), String> {
    if page.len() < PAGE_HEADER {
        return Err(format!("is {} bytes, shorter than a vertex page's header", page.len()));
    }
    let w = |i: usize| u32::from_le_bytes(page[4 * i..4 * i + 4].try_into().expect("4 bytes"));
    let here = w(2) as usize;
    if PAGE_HEADER + 4 * here > page.len() {
        return Err(format!("says it holds {here} neighbours, more than a page holds"));
    }
    let nb = (0..here).map(|i| w(4 + i)).collect();
    Ok((w(0), w(1), nb, w(3)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn degrees(edges: &[(u32, u32)], n: usize) -> Vec<u64> {
        let mut d = vec![0u64; n];
        for (u, v) in edges {
            d[*u as usize] += 1;
            d[*v as usize] += 1;
        }
        d
    }

    #[test]
    fn the_generator_follows_rmat_and_the_seed() {
        let (scale, ef) = (12, 16);
        let raw = kronecker(scale, ef, 7, false).unwrap();
        assert_eq!(raw.len(), 16 << 12);
        assert!(raw.iter().all(|(u, v)| *u < 1 << scale && *v < 1 << scale));
        // The top level's quadrants come out in R-MAT's proportions (65,536 edges: +-0.01 is > 5 sigma).
        let top = |i: u32, j: u32| {
            raw.iter().filter(|(u, v)| u >> (scale - 1) == i && v >> (scale - 1) == j).count() as f64
                / raw.len() as f64
        };
        let (a, b, c) = RMAT;
        for (got, want) in [(top(0, 0), a), (top(0, 1), b), (top(1, 0), c), (top(1, 1), 1.0 - a - b - c)] {
            assert!((got - want).abs() < 0.01, "{got} vs {want}");
        }
        // Heavy-tailed: the busiest vertex has far more than the average degree.
        let d = degrees(&raw, 1 << scale);
        let mean = 2.0 * raw.len() as f64 / d.len() as f64;
        assert!(*d.iter().max().unwrap() as f64 > 20.0 * mean);
        // Relabelling and shuffling keep the degrees (as a multiset) and change the labels.
        let perm = kronecker(scale, ef, 7, true).unwrap();
        let (mut d1, mut d2) = (d.clone(), degrees(&perm, 1 << scale));
        assert_ne!(d1, d2);
        d1.sort_unstable();
        d2.sort_unstable();
        assert_eq!(d1, d2);
        assert_eq!(kronecker(scale, ef, 7, true).unwrap(), perm, "the same seed, the same graph");
        assert_ne!(kronecker(scale, ef, 8, true).unwrap(), perm);
    }

    #[test]
    fn a_stored_graph_is_a_page_a_vertex_with_spill_pages_for_the_rest() {
        let edges = [(0, 1), (0, 2), (2, 0), (3, 3), (1, 0)];
        let adj = Adjacency::build(&edges, Some(5), false).unwrap();
        assert_eq!(adj.neighbours(0), [1, 2]);
        assert_eq!(adj.neighbours(3), [] as [u32; 0], "self-loops dropped");
        assert_eq!(adj.neighbours(4), [] as [u32; 0]);
        let directed = Adjacency::build(&edges, None, true).unwrap();
        assert_eq!((directed.vertices(), directed.neighbours(1)), (4, &[0][..]));
        // More vertices than a file has pages, given or implied by an id, is refused before anything is
        // sized by it (u64::MAX + 1 wrapped to an empty table and panicked; 4e9 asked for 32 GB).
        for (edges, vertices) in [(&[(0, 1)][..], Some(u64::MAX)), (&[(1, 4_000_000_000)][..], None)] {
            let err = Adjacency::build(edges, vertices, false).unwrap_err().to_string();
            assert!(err.contains("at most 16777216 vertices"), "{err}");
        }
        assert!(Adjacency::build(&edges, Some(3), false).unwrap_err().to_string().contains("edge 3 (3, 3)"));
        // A hub with more neighbours than a 64-byte page holds (12): three spill pages after the vertices.
        let star: Vec<(u32, u32)> = (1..=40).map(|v| (0, v)).collect();
        let adj = Adjacency::build(&star, None, false).unwrap();
        let mut pages = GraphPages::new(&adj, 64).unwrap();
        assert_eq!(pages.pages(), (41 + 3, 3));
        let mut bytes = Vec::new();
        pages.read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes.len(), 44 * 64);
        let page = |i: u32| decode_page(&bytes[i as usize * 64..(i as usize + 1) * 64]).unwrap();
        // Walking vertex 0's chain gives its 40 neighbours in order.
        let (mut got, mut at) = (Vec::new(), 0u32);
        loop {
            let (v, d, nb, next) = page(at);
            assert_eq!((v, d), (0, 40));
            got.extend(nb);
            if next == NO_PAGE {
                break;
            }
            at = next;
        }
        assert_eq!(got, (1..=40).collect::<Vec<u32>>());
        assert_eq!(page(7), (7, 1, vec![0], NO_PAGE));
        assert!(GraphPages::new(&adj, 10).is_err());
    }

    #[test]
    fn edge_files_round_trip_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let edges = kronecker(6, 4, 1, true).unwrap();
        for (name, fmt) in [("g.txt", EdgeFormat::Text), ("g.bin", EdgeFormat::U32le)] {
            let p = dir.path().join(name);
            assert_eq!(EdgeFormat::of(&p), fmt);
            write_edges(&p, &edges, fmt).unwrap();
            assert_eq!(read_edges(&p, fmt).unwrap(), edges);
        }
        let p = dir.path().join("bad.txt");
        std::fs::write(&p, "# comment\n1 2\n\n3 x\n").unwrap();
        let err = read_edges(&p, EdgeFormat::Text).unwrap_err().to_string();
        assert!(err.contains("line 4") && err.contains("\"x\""), "{err}");
        std::fs::write(&p, "1 2 3\n").unwrap();
        assert!(read_edges(&p, EdgeFormat::Text).unwrap_err().to_string().contains("more than two"));
        std::fs::write(&p, [0u8; 12]).unwrap();
        assert!(read_edges(&p, EdgeFormat::U32le).unwrap_err().to_string().contains("12 bytes"));
        assert!(kronecker(0, 4, 1, true).unwrap_err().to_string().contains("--scale"));
        assert!(kronecker(33, 4, 1, true).is_err());
        assert!(kronecker(4, 0, 1, true).unwrap_err().to_string().contains("--edge-factor"));
        assert!(kronecker(30, 16, 1, true).unwrap_err().to_string().contains("more than"));
    }
}
