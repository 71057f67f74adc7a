//! BlueDBM's file system and applications (ISCA '15 §4, §7) for the Python front: what the CLI's `fs` and
//! `bluedbm` commands do, on an open appliance, with results as JSON for the Python layer to unpack.

use insitu_host::bluedbm::apps::Placement;
use insitu_host::bluedbm::fs::Fs;
use insitu_host::bluedbm::graph::{bfs, walk, Adjacency, Reader, WalkSpec};
use insitu_host::bluedbm::nearest::{nearest, Lsh, Misses, NearestOptions};
use insitu_host::bluedbm::ops;
use insitu_host::bluedbm::search::{search, SearchOptions};
use insitu_host::bluedbm::IspLimits;
use insitu_host::input::Input;
use insitu_host::report::Report;
use insitu_host::{Array, HostError, Result};
use serde_json::json;
use std::path::PathBuf;

fn bad(detail: String) -> HostError {
    HostError::InvalidArgument(detail)
}

/// An application's placement by name.
pub fn placement(text: &str) -> Result<Placement> {
    Placement::parse(text)
}

/// Stores file `name`: what was stored, as JSON, and the run's report (measured and modeled, as the CLI's).
pub fn fs_put(a: &Array, name: &str, data: Input<'_>, node: Option<u32>) -> Result<(String, Report)> {
    let mut fs = Fs::open(a)?;
    let mut reader = data.reader()?;
    let report = ops::put(a, &mut fs, name, &mut reader, Some(data.size()?), node)?;
    Ok((report.result.to_string(), report))
}

/// File `name`, into memory (returned) or into the file `out`, and the read's report.
pub fn fs_get(a: &Array, name: &str, out: Option<&PathBuf>) -> Result<(Option<Vec<u8>>, Report)> {
    let fs = Fs::open(a)?;
    let to = out.map(|p| p.display().to_string());
    crate::to_bytes_or_file(out, |w| ops::get(a, &fs, name, w, to.as_deref()))
}

/// File `name` read by node `node`'s in-store processor (`isp`) or host (`host`) over the storage network
/// (§3, §6.4), into memory or the file `out`; the read's cost as JSON.
pub fn fs_get_via(
    a: &Array,
    name: &str,
    via: &str,
    node: u32,
    out: Option<&PathBuf>,
) -> Result<(Option<Vec<u8>>, String)> {
    use insitu_host::bluedbm::fs::Access;
    let access = match via {
        "isp" => Access::IspFlash,
        "host" => Access::HostFlash,
        other => return Err(bad(format!("via {other:?}: expected isp or host"))),
    };
    let fs = Fs::open(a)?;
    let (data, r) = crate::to_bytes_or_file(out, |w| fs.get_via(name, node, access, w))?;
    let mut v = json!(r);
    v["modeled"] = json!(r.modeled(a.profile(), fs.node_count(), fs.page_size()));
    Ok((data, v.to_string()))
}

/// File `name`'s physical pages, six numbers each (node card bus chip block page), one after another.
pub fn fs_pages(a: &Array, name: &str) -> Result<Vec<u64>> {
    let fs = Fs::open(a)?;
    let f = fs.file(name)?;
    Ok(f.pages.iter().flat_map(|p| p.numbers()).collect())
}

/// Erases every block whose pages are all dead, cleans the closed blocks at least half dead, and gives
/// back the disk space of the other dead pages: what it did and the file system's figures, as JSON.
pub fn fs_gc(a: &Array) -> Result<(String, Report)> {
    let mut fs = Fs::open(a)?;
    let report = ops::gc(a, &mut fs)?;
    Ok((report.result.to_string(), report))
}

/// The files, from the host's index and journal alone while a node is offline (as `insitu fs ls`):
/// `{"files": [...], "stats", "offline"}`.
pub fn fs_ls(a: &Array) -> Result<String> {
    let (result, _) = match a.offline().next() {
        Some(_) => ops::listing(a, None)?,
        None => ops::listing(a, Some(&Fs::open(a)?))?,
    };
    Ok(result.to_string())
}

pub fn fs_rm(a: &Array, name: &str) -> Result<()> {
    Fs::open(a)?.remove(name)
}

pub struct SearchArgs<'a> {
    pub name: &'a str,
    pub needle: &'a [u8],
    pub placement: &'a str,
    pub offsets: bool,
    pub node: u32,
    pub threads: u32,
}

pub fn search_file(a: &Array, s: SearchArgs<'_>) -> Result<String> {
    let fs = Fs::open(a)?;
    let opts = SearchOptions {
        placement: placement(s.placement)?,
        offsets: s.offsets,
        node: s.node,
        threads: s.threads,
        limits: IspLimits::default(),
    };
    Ok(with_modeled(json!(search(&fs, s.name, s.needle, opts)?)))
}

/// An application's result with its modeled time and energy at the top, as the CLI's `--json` has it.
fn with_modeled(mut v: serde_json::Value) -> String {
    v["modeled"] = v["cost"]["modeled"].clone();
    v.to_string()
}

pub struct KnnArgs<'a> {
    pub items: &'a str,
    pub queries: &'a [u8],
    pub k: u32,
    pub lsh: Option<u32>,
    pub lsh_bits: u32,
    pub placement: &'a str,
    pub node: u32,
    pub threads: u32,
    pub misses: (f64, f64),
}

pub fn knn(a: &Array, k: KnnArgs<'_>) -> Result<String> {
    let fs = Fs::open(a)?;
    let opts = NearestOptions {
        placement: placement(k.placement)?,
        k: k.k,
        lsh: k.lsh.map(|bands| Lsh { bands, bits: k.lsh_bits }),
        node: k.node,
        threads: k.threads,
        limits: IspLimits::default(),
        misses: Misses { flash: k.misses.0, disk: k.misses.1 },
    };
    Ok(with_modeled(json!(nearest(&fs, k.items, k.queries, opts)?)))
}

/// Stores a graph from its edges, little-endian u32 pairs one after another.
pub fn put_graph_edges(
    a: &Array,
    edges: &[u8],
    name: &str,
    directed: bool,
    vertices: Option<u64>,
    node: Option<u32>,
) -> Result<(String, Report)> {
    let list =
        insitu_host::bluedbm::graph::edges_from_le(edges).map_err(|e| bad(format!("the edges: {e}")))?;
    store_graph(a, &list, name, directed, vertices, node)
}

/// The graph of the edge file at `path`, as `insitu bluedbm put-graph` reads it: `format` (`text` or
/// `u32le`), or the one its extension implies.
pub fn put_graph_file(
    a: &Array,
    path: &std::path::Path,
    format: Option<&str>,
    name: &str,
    directed: bool,
    vertices: Option<u64>,
    node: Option<u32>,
) -> Result<(String, Report)> {
    use insitu_host::bluedbm::graph::{read_edges, EdgeFormat};
    let fmt = match format {
        Some(f) => EdgeFormat::parse(f)?,
        None => EdgeFormat::of(path),
    };
    store_graph(a, &read_edges(path, fmt)?, name, directed, vertices, node)
}

fn store_graph(
    a: &Array,
    edges: &[(u32, u32)],
    name: &str,
    directed: bool,
    vertices: Option<u64>,
    node: Option<u32>,
) -> Result<(String, Report)> {
    let adj = Adjacency::build(edges, vertices, directed)?;
    let mut fs = Fs::open(a)?;
    let report = ops::store_graph(a, &mut fs, &adj, (edges.len(), directed), name, node)?;
    Ok((report.result.to_string(), report))
}

/// Who traverses: node `node`, placed by name, `flash_share` of a host-DRAM traversal's accesses to flash.
pub fn reader(placement: &str, node: u32, flash_share: f64) -> Result<Reader> {
    Ok(Reader { origin: node, placement: Placement::parse(placement)?, flash_share })
}

pub fn bfs_graph(a: &Array, graph: &str, start: u32, by: Reader) -> Result<String> {
    let fs = Fs::open(a)?;
    Ok(json!(bfs(&fs, graph, start, by)?).to_string())
}

pub fn walk_graph(a: &Array, graph: &str, spec: WalkSpec, by: Reader) -> Result<String> {
    let fs = Fs::open(a)?;
    Ok(json!(walk(&fs, graph, spec, by)?).to_string())
}
