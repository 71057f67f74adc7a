//! The file system's and the graphs' commands as both fronts run them (the CLI's `fs` and `bluedbm
//! put-graph`, Python's `Array.fs_*` and `put_graph`): the work, measured and modeled, with one headline and
//! one JSON result, so that the fronts cannot drift apart (they had: Python's headlines gave sizes in bytes,
//! and its gc, ls and put-graph results lacked fields the CLI's had).

use std::collections::BTreeSet;
use std::io::Read;

use serde_json::{json, Value};

use crate::array::Array;
use crate::bluedbm::fs::{Fs, FsFile};
use crate::bluedbm::graph::{put_graph, Adjacency};
use crate::error::Result;
use crate::report::{Measure, Report};
use crate::units::{count, human_bytes};

/// Stores what `reader` gives as file `name` (on node `node`, or striped over every node). A `size` known
/// beforehand (a regular file's) is checked against the free space first, so that a file that cannot fit
/// is refused before a page is written.
pub fn put(
    array: &Array,
    fs: &mut Fs<'_>,
    name: &str,
    reader: &mut dyn Read,
    size: Option<u64>,
    node: Option<u32>,
) -> Result<Report> {
    if let Some(size) = size {
        fs.check_put(name, size, node)?;
    }
    let measure = Measure::start("fs put", array)?;
    let stored = fs.put(name, reader, node)?;
    let nodes = nodes_of(&stored);
    let headline = format!(
        "stored {} ({}) in {} on node(s) {nodes:?}",
        stored.name,
        human_bytes(stored.size),
        count(stored.pages.len() as u64, "page"),
    );
    let result =
        json!({"name": stored.name, "size": stored.size, "pages": stored.pages.len(), "nodes": nodes});
    measure.finish(array, headline, result)
}

/// Reads file `name` into `out` through the host, measured and modeled; `to` says where it went, for the
/// headline and the result (`"-"`: standard output; a path; `None`: the caller's memory).
pub fn get(
    array: &Array,
    fs: &Fs<'_>,
    name: &str,
    out: &mut dyn std::io::Write,
    to: Option<&str>,
) -> Result<Report> {
    let measure = Measure::start("fs get", array)?;
    let n = fs.get(name, out)?;
    let headline = match to {
        Some("-") => format!("read {name} ({}) to standard output", human_bytes(n)),
        Some(path) => format!("wrote {name} ({}) to {path}", human_bytes(n)),
        None => format!("read {name} ({})", human_bytes(n)),
    };
    measure.finish(array, headline, json!({"name": name, "size": n, "output": to}))
}

/// Erases the blocks all dead, cleans the closed blocks at least half dead, and gives back the disk space
/// of the other dead pages; what the host's disk got back is measured, not inferred (a removed file's
/// pages were given back when it was removed).
pub fn gc(array: &Array, fs: &mut Fs<'_>) -> Result<Report> {
    let measure = Measure::start("fs gc", array)?;
    let (before, _) = crate::stats::disk_use(array.dir());
    let g = fs.collect_garbage()?;
    let (after, _) = crate::stats::disk_use(array.dir());
    let s = fs.stats();
    let headline = format!(
        "erased {} block(s) of dead pages; cleaned {} block(s) at least half dead (moved {} live page(s)); {} \
         erased block(s) free; the appliance's files take {} of the host's disk ({} before)",
        g.erased_blocks,
        g.cleaned_blocks,
        g.moved_pages,
        s.free_blocks,
        human_bytes(after),
        human_bytes(before)
    );
    let result = json!({"erased_blocks": g.erased_blocks, "cleaned_blocks": g.cleaned_blocks,
                        "moved_pages": g.moved_pages, "discarded_pages": g.discarded_pages,
                        "disk_bytes_before": before, "disk_bytes_after": after, "stats": s});
    measure.finish(array, headline, result)
}

/// The files as JSON (`{"files": [{name, size, pages, nodes}], "stats", "offline"}`) and as lines for
/// people, those with pages on an offline node marked. Without the file system open (`fs` None: a node is
/// offline) the listing is the host's index alone ([`crate::bluedbm::fs::catalog`]) and the space is not
/// known (`stats` is null).
pub fn listing(array: &Array, fs: Option<&Fs<'_>>) -> Result<(Value, String)> {
    let offline: Vec<u32> = array.offline().map(|(n, _)| n).collect();
    let (files, stats) = match fs {
        Some(fs) => (fs.files().cloned().collect::<Vec<FsFile>>(), Some(fs.stats())),
        None => (crate::bluedbm::fs::catalog(array)?, None),
    };
    let (mut entries, mut text) = (Vec::new(), String::new());
    for f in &files {
        let nodes = nodes_of(f);
        entries.push(json!({"name": f.name, "size": f.size, "pages": f.pages.len(), "nodes": nodes}));
        let down: Vec<String> = nodes.iter().filter(|n| offline.contains(n)).map(|n| n.to_string()).collect();
        let mark = match down.as_slice() {
            [] => String::new(),
            d => format!("  (pages on offline node {})", d.join(", ")),
        };
        text += &format!("{:>10}  {:>8} pages  {}{mark}\n", human_bytes(f.size), f.pages.len(), f.name);
    }
    match &stats {
        Some(s) => {
            text += &format!(
                "{} file(s), {}; pages: {} live, {} dead; {} erased block(s) free",
                s.files,
                human_bytes(s.bytes),
                s.live_pages,
                s.dead_pages,
                s.free_blocks
            )
        }
        None => text += &format!("{} file(s); offline node(s): {offline:?}", files.len()),
    }
    Ok((json!({"files": entries, "stats": stats, "offline": offline}), text))
}

/// Stores `adj` (built from `edges` edges, `directed` or not) as graph `name`, a vertex a page (§7.2), on
/// node `node` or striped over every node.
pub fn store_graph(
    array: &Array,
    fs: &mut Fs<'_>,
    adj: &Adjacency,
    (edges, directed): (usize, bool),
    name: &str,
    node: Option<u32>,
) -> Result<Report> {
    let measure = Measure::start("bluedbm put-graph", array)?;
    let g = put_graph(fs, name, adj, node)?;
    let headline = format!(
        "stored graph {} ({}, {} neighbour entries, largest degree {}) in {} ({} spill), {}",
        g.name,
        count(g.vertices, "vertex/vertices"),
        g.arcs,
        g.max_degree,
        count(g.pages, "page"),
        g.spill_pages,
        human_bytes(g.bytes)
    );
    let result = json!({ "name": g.name, "vertices": g.vertices, "edges": edges, "arcs": g.arcs,
                         "pages": g.pages, "spill_pages": g.spill_pages, "bytes": g.bytes,
                         "max_degree": g.max_degree, "directed": directed });
    measure.finish(array, headline, result)
}

fn nodes_of(f: &FsFile) -> BTreeSet<u32> {
    f.pages.iter().map(|p| p.node).collect()
}
