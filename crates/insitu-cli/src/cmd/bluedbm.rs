//! `bluedbm`: BlueDBM's applications (ISCA '15 §7) on an appliance's file system: string search by the
//! in-store processors' Morris-Pratt engines or host software (`search`, §7.3); nearest-neighbour search
//! by Hamming distance over items a flash page each, exhaustive or through LSH buckets (`knn`, §7.1); graphs stored a vertex a
//! page (`put-graph`) and their breadth-first traversal by an in-store processor or a host (`bfs`, §7.2).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use insitu_host::bluedbm::apps::{AppCost, Placement as AppPlacement};
use insitu_host::bluedbm::fs::Fs;
use insitu_host::bluedbm::graph::{bfs, read_edges, walk, Adjacency, EdgeFormat, Reader, WalkSpec};
use insitu_host::bluedbm::nearest::{nearest, Lsh, Misses, NearestOptions};
use insitu_host::bluedbm::ops;
use insitu_host::bluedbm::power::Modeled;
use insitu_host::bluedbm::search::{search, SearchOptions};
use insitu_host::bluedbm::IspLimits;
use insitu_host::units::{count, human_bytes};
use serde_json::json;

use crate::cmd::Ctx;

/// Who runs an application, and how its pages reach it (§6.4's paths).
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum AppWhere {
    /// In-store processors, no host on the path: a search or comparison on the nodes that hold the file,
    /// each on its own flash, only results reaching the host; a traversal on the node's ISP, every
    /// node's flash over the storage network (ISP-F).
    Isp,
    /// Software on a node's host, reading every page through its device over the storage network (H-F).
    Host,
    /// Software on a node's host, asking each page's host, which reads it from its flash and sends it
    /// back (H-RH-F: a distributed SSD without the integrated network).
    RemoteHost,
    /// Software on a node's host with the data in DRAM: a search's or comparison's file in its own memory;
    /// a traversal's pages in the memory of their nodes' hosts, asked for over the network (H-DRAM).
    HostDram,
}

impl From<AppWhere> for AppPlacement {
    fn from(p: AppWhere) -> Self {
        match p {
            AppWhere::Isp => AppPlacement::Isp,
            AppWhere::Host => AppPlacement::Host,
            AppWhere::RemoteHost => AppPlacement::RemoteHost,
            AppWhere::HostDram => AppPlacement::HostDram,
        }
    }
}

/// Who traverses, for the text of `bfs` and `walk`.
fn who(p: AppPlacement) -> &'static str {
    match p {
        AppPlacement::Isp => "in-store processor",
        AppPlacement::Host => "host",
        AppPlacement::RemoteHost => "host, through the pages' hosts",
        AppPlacement::HostDram => "host, from the pages' hosts' memory",
    }
}

/// Who runs an application and with what: the arguments `search` and `knn` share.
#[derive(clap::Args, Debug)]
pub struct AppArgs {
    /// Who runs it.
    #[arg(long, value_enum, default_value = "isp")]
    placement: AppWhere,
    /// The node whose host runs it (host placements).
    #[arg(long, default_value_t = 0)]
    node: u32,
    /// Host threads (host placements), 1 to 1024.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// In-store processor engines per flash bus (search) or per card (knn), instead of the profile's.
    #[arg(long)]
    engines: Option<u32>,
    /// Throttle each node's in-store processor's flash reads to this many bytes a second (e.g. 600MB,
    /// as §7.1's "throttled BlueDBM").
    #[arg(long)]
    throttle: Option<String>,
}

impl AppArgs {
    /// The in-store processors' limits. An option the placement does not use is said on stderr, not
    /// refused: a script may run every placement with the same options.
    fn limits(&self) -> Result<IspLimits> {
        let isp = matches!(self.placement, AppWhere::Isp);
        let mut unused = Vec::new();
        if isp {
            unused.extend((self.threads != 1).then_some("--threads"));
            unused.extend((self.node != 0).then_some("--node"));
        } else {
            unused.extend(self.engines.is_some().then_some("--engines"));
            unused.extend(self.throttle.is_some().then_some("--throttle"));
        }
        if !unused.is_empty() {
            let (whose, runs) = if isp {
                (
                    "the host placements' (host, remote-host, host-dram)",
                    "the in-store processors run on the nodes that hold the file",
                )
            } else {
                ("the in-store processors' (--placement isp)", "host software runs on --node with --threads")
            };
            eprintln!(
                "note: {} {} {whose}, unused here: {runs}",
                unused.join(" and "),
                if unused.len() > 1 { "are" } else { "is" }
            );
        }
        isp_limits(self.engines, self.throttle.as_deref())
    }
}

/// Who traverses a graph and how its pages reach them: the arguments `bfs` and `walk` share.
#[derive(clap::Args, Debug)]
pub struct TraverseArgs {
    /// Who traverses.
    #[arg(long, value_enum, default_value = "isp")]
    placement: AppWhere,
    /// With host-dram: the share of accesses the pages' hosts serve from their flash instead of their
    /// memory (Fig. 20's "DRAM + 30% F": 0.3).
    #[arg(long, default_value_t = 0.0)]
    flash_share: f64,
    /// The node whose in-store processor or host traverses.
    #[arg(long, default_value_t = 0)]
    node: u32,
}

impl TraverseArgs {
    fn reader(&self) -> Reader {
        Reader { origin: self.node, placement: self.placement.into(), flash_share: self.flash_share }
    }
}

#[derive(Subcommand, Debug)]
pub enum BluedbmCmd {
    /// Search a file of the appliance's file system for a string (§7.3): count its occurrences and the
    /// lines they start in. An occurrence is every position the string starts at, overlapping ones too, as
    /// Morris-Pratt engines report them (`aa` occurs 3 times in `aaaa`, where `grep -o` and `rg -o` count 2);
    /// the lines are those `grep -c` and `rg -c` count.
    Search {
        /// The file (stored by `insitu fs put`).
        file: String,
        /// The string, 1 to 1024 bytes (any bytes: it need not be UTF-8).
        needle: std::ffi::OsString,
        /// Also give every occurrence's byte offset.
        #[arg(long)]
        offsets: bool,
        #[command(flatten)]
        run: AppArgs,
    },
    /// The items of a file closest to a query by Hamming distance (§7.1): items are a flash page each
    /// (8 KiB on bluedbm); the result is their indices and distances, closest first (ties: lowest index).
    Knn {
        /// The items (stored by `insitu fs put`), one page-sized item after another.
        items: String,
        /// The query: one page-sized item, or several one after another (each answered).
        queryfile: PathBuf,
        /// How many nearest items to give (at least 1).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        k: u32,
        /// Compare only items sharing an LSH bucket with the query in one of this many bands (bit
        /// sampling; the buckets are built on first use and kept). Default: every item.
        #[arg(long)]
        lsh: Option<u32>,
        /// Bits sampled per LSH band.
        #[arg(long, default_value_t = 16)]
        lsh_bits: u32,
        /// With host-dram: the share of items not in DRAM but on flash, each read through the device
        /// when compared (§7.1's "DRAM + 10% flash": 0.1).
        #[arg(long, default_value_t = 0.0)]
        flash_share: f64,
        /// With host-dram: the share of items on the host's disk (§7.1's "DRAM + 5% disk": 0.05).
        #[arg(long, default_value_t = 0.0)]
        disk_share: f64,
        #[command(flatten)]
        run: AppArgs,
    },
    /// Store a graph from an edge list, one vertex a flash page (its neighbours inside, spill pages for
    /// the rest), striped over the nodes (§7.2).
    PutGraph {
        /// The edge list: two vertex ids a line, or little-endian u32 pairs (.bin, .u32).
        edges: PathBuf,
        /// Name of the graph in the file system.
        #[arg(long)]
        name: String,
        /// Keep each edge one way only (default: undirected, as Graph500's graphs are).
        #[arg(long)]
        directed: bool,
        /// Vertices of the graph (default: one more than the largest id); ids past it are refused.
        #[arg(long)]
        vertices: Option<u64>,
        /// text or u32le (default: from the extension).
        #[arg(long)]
        format: Option<String>,
        /// Keep the graph on this node (default: striped over every node).
        #[arg(long)]
        node: Option<u32>,
    },
    /// Breadth-first search of a stored graph from a vertex, by dependent page reads across the nodes.
    Bfs {
        /// The graph (stored by `put-graph`).
        graph: String,
        /// The start vertex.
        #[arg(long)]
        from: u32,
        /// Also give every reached vertex's level.
        #[arg(long)]
        levels: bool,
        #[command(flatten)]
        by: TraverseArgs,
    },
    /// Random walks on a stored graph from a vertex: each step reads the walk's vertex page and takes a
    /// neighbour chosen by the seed, the next read depending on it (§7.2).
    Walk {
        /// The graph (stored by `put-graph`).
        graph: String,
        /// The start vertex.
        #[arg(long, default_value_t = 0)]
        from: u32,
        /// Walks, all from the start vertex, their steps read together.
        #[arg(long, default_value_t = 1)]
        walks: u32,
        /// Steps a walk.
        #[arg(long, default_value_t = 16)]
        length: u32,
        /// Seed of the choices (the same walks whoever walks).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        by: TraverseArgs,
    },
}

impl BluedbmCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        match self {
            BluedbmCmd::Search { file, needle, offsets, run } => {
                let array = ctx.open()?;
                let fs = Fs::open(&array)?;
                let (placement, node, threads) = (run.placement.into(), run.node, run.threads);
                let opts = SearchOptions { placement, offsets, node, threads, limits: run.limits()? };
                use std::os::unix::ffi::OsStrExt;
                let r = crate::output::busy("searching", || search(&fs, &file, needle.as_bytes(), opts))?;
                let needle = String::from_utf8_lossy(needle.as_bytes());
                let mut out = json!({ "file": file, "count": r.count, "lines": r.lines, "cost": r.cost,
                                      "modeled": r.cost.modeled });
                if let Some(o) = &r.offsets {
                    out["offsets"] = json!(o);
                }
                let mut text = format!(
                    "{} occurrences of {:?} in {file} ({}), {}\n{}",
                    r.count,
                    needle,
                    human_bytes(r.cost.bytes),
                    match r.lines {
                        Some(l) => format!("on {l} lines"),
                        None => "(lines not counted: the needle holds a newline)".into(),
                    },
                    cost_text(&r.cost)
                );
                if let Some(o) = &r.offsets {
                    for x in o {
                        text.push_str(&format!("\n{x}"));
                    }
                }
                ctx.out.costed("bluedbm search", out, &text);
            }
            BluedbmCmd::Knn { items, queryfile, k, flash_share, disk_share, lsh, lsh_bits, run } => {
                let queries = std::fs::read(&queryfile).map_err(|e| {
                    anyhow::anyhow!("cannot read the query file {}: {e}", queryfile.display())
                })?;
                let array = ctx.open()?;
                let fs = Fs::open(&array)?;
                let lsh = lsh.map(|bands| Lsh { bands, bits: lsh_bits });
                let misses = Misses { flash: flash_share, disk: disk_share };
                let (placement, node, threads, limits) =
                    (run.placement.into(), run.node, run.threads, run.limits()?);
                let opts = NearestOptions { placement, k, lsh, node, threads, limits, misses };
                let r = crate::output::busy("comparing", || nearest(&fs, &items, &queries, opts))?;
                let per_query: Vec<serde_json::Value> = r
                    .nearest
                    .iter()
                    .map(|n| {
                        json!({ "indices": n.iter().map(|x| x.0).collect::<Vec<_>>(),
                                "distances": n.iter().map(|x| x.1).collect::<Vec<_>>() })
                    })
                    .collect();
                let mut out = json!({ "items": items, "item_count": r.items, "compared": r.compared,
                                      "lsh": lsh, "lsh_built": r.lsh_built, "lsh_build_s": r.lsh_build_s,
                                      "cost": r.cost, "modeled": r.cost.modeled });
                // One query: its lists at the top; several: a list a query (as Python's arrays are shaped).
                for key in ["indices", "distances"] {
                    out[key] = match per_query.as_slice() {
                        [one] => one[key].clone(),
                        all => all.iter().map(|q| q[key].clone()).collect(),
                    };
                }
                out["queries"] = json!(per_query);
                let mut text = format!(
                    "{} quer{} against {} items of {items}: {} comparisons{}\n{}",
                    r.nearest.len(),
                    if r.nearest.len() == 1 { "y" } else { "ies" },
                    r.items,
                    r.compared,
                    if r.lsh_built {
                        format!(" (LSH buckets built in {:.3} s)", r.lsh_build_s)
                    } else {
                        String::new()
                    },
                    cost_text(&r.cost)
                );
                // A query answered with fewer than k items, though there were more to compare: its LSH
                // buckets held no more candidates.
                let short = |got: usize| (got as u64) < u64::from(k) && (got as u64) < r.items;
                for (q, n) in r.nearest.iter().enumerate() {
                    let list: Vec<String> = n.iter().map(|(i, d)| format!("{i} ({d})")).collect();
                    let list = if list.is_empty() {
                        "none (no item shares an LSH bucket with it)".to_string()
                    } else if short(list.len()) {
                        format!(
                            "{} (only {} of the --k {k}: no more items share an LSH bucket with it; fewer \
                             --lsh bands, or none, compare more)",
                            list.join(", "),
                            list.len()
                        )
                    } else {
                        list.join(", ")
                    };
                    text.push_str(&format!("\nquery {q}: {list}"));
                }
                // Said in JSON too.
                let short: Vec<usize> =
                    r.nearest.iter().enumerate().filter(|(_, n)| short(n.len())).map(|(q, _)| q).collect();
                if !short.is_empty() {
                    out["warning"] = json!(format!(
                        "quer{} {short:?} got fewer than --k {k} items: no more share an LSH bucket with {}",
                        if short.len() == 1 { "y" } else { "ies" },
                        if short.len() == 1 { "it" } else { "them" }
                    ));
                }
                ctx.out.costed("bluedbm knn", out, &text);
            }
            BluedbmCmd::PutGraph { edges, name, directed, vertices, format, node } => {
                let fmt = match format {
                    Some(f) => EdgeFormat::parse(&f)?,
                    None => EdgeFormat::of(&edges),
                };
                let list = read_edges(&edges, fmt)?;
                let adj = Adjacency::build(&list, vertices, directed)?;
                let array = ctx.open()?;
                let mut fs = Fs::open(&array)?;
                let report = crate::output::busy("storing the graph", || {
                    ops::store_graph(&array, &mut fs, &adj, (list.len(), directed), &name, node)
                })?;
                ctx.out.report(&report);
            }
            BluedbmCmd::Bfs { graph, from, levels, by } => {
                let array = ctx.open()?;
                let fs = Fs::open(&array)?;
                let by = by.reader();
                let (placement, flash_share, node) = (by.placement, by.flash_share, by.origin);
                let b = crate::output::busy("traversing", || bfs(&fs, &graph, from, by))?;
                let c = &b.cost;
                let r = &c.read;
                let mut out = json!({
                    "graph": graph, "from": from, "reached": b.reached, "depth": b.depth, "rounds": b.rounds,
                    "placement": placement.name(), "flash_share": flash_share, "node": node, "pages": r.pages,
                    "local_pages": r.local_pages, "network_bytes": r.network_bytes, "hops": r.hops,
                    "pcie_bytes": r.pcie_up_bytes + r.pcie_down_bytes,
                    "modeled_s": c.modeled_s, "modeled_reads_s": r.modeled_s, "modeled_software_s": c.software_s,
                    "busy": c.busy, "modeled": c.modeled, "wall_s": r.wall_s, "host_cpu_s": c.host_cpu_s,
                    "device_cpu_s": c.device_cpu_s,
                });
                if levels {
                    out["levels"] = json!(b
                        .levels
                        .iter()
                        .map(|(v, l)| (v.to_string(), json!(*l)))
                        .collect::<serde_json::Map<_, _>>());
                }
                let mut text = format!(
                    "bfs {graph} from {from}: {} reached, {} deep, {} in {} of dependent \
                     reads by node {node}'s {}\n  modeled {:.4} s, {} on {} ({:.4} s of reads, {:.4} s of host \
                     software), measured {:.3} s wall, host cpu {:.3} s, device cpu {:.3} s",
                    count(b.reached, "vertex/vertices"),
                    count(b.depth as u64, "level"),
                    count(r.pages, "page"),
                    count(b.rounds, "round"),
                    who(placement),
                    c.modeled_s,
                    joules(&c.modeled),
                    c.modeled.profile,
                    r.modeled_s,
                    c.software_s,
                    r.wall_s,
                    c.host_cpu_s,
                    c.device_cpu_s
                );
                if levels {
                    for (v, l) in &b.levels {
                        text.push_str(&format!("\n{v} {l}"));
                    }
                }
                ctx.out.costed("bluedbm bfs", out, &text);
            }
            BluedbmCmd::Walk { graph, from, walks, length, seed, by } => {
                let array = ctx.open()?;
                let fs = Fs::open(&array)?;
                let spec = WalkSpec { from, walks, length, seed };
                let by = by.reader();
                let (placement, flash_share, node) = (by.placement, by.flash_share, by.origin);
                let w = crate::output::busy("walking", || walk(&fs, &graph, spec, by))?;
                let c = &w.cost;
                let r = &c.read;
                let out = json!({
                    "graph": graph, "from": from, "walks": w.walks, "steps": w.steps, "rounds": w.rounds,
                    "placement": placement.name(), "flash_share": flash_share, "node": node, "pages": r.pages,
                    "network_bytes": r.network_bytes, "pcie_bytes": r.pcie_up_bytes + r.pcie_down_bytes,
                    "modeled_s": c.modeled_s, "modeled_reads_s": r.modeled_s, "modeled_software_s": c.software_s,
                    "busy": c.busy, "modeled": c.modeled, "wall_s": r.wall_s, "host_cpu_s": c.host_cpu_s,
                    "device_cpu_s": c.device_cpu_s,
                });
                let per_step = match w.steps {
                    0 => "no step: the start vertex has no neighbour".to_string(),
                    n => format!("{:.1} us a step", c.modeled_s / n as f64 * 1e6),
                };
                let mut text = format!(
                    "{} on {graph} from {from}: {}, {} in {} of dependent reads by node \
                     {node}'s {}\n  modeled {:.4} s ({per_step}), {} on {}, measured {:.3} s wall, host cpu \
                     {:.3} s, device cpu {:.3} s",
                    count(w.walks.len() as u64, "walk"),
                    count(w.steps, "step"),
                    count(r.pages, "page"),
                    count(w.rounds, "round"),
                    who(placement),
                    c.modeled_s,
                    joules(&c.modeled),
                    c.modeled.profile,
                    r.wall_s,
                    c.host_cpu_s,
                    c.device_cpu_s
                );
                for p in &w.walks {
                    let v: Vec<String> = p.iter().map(|x| x.to_string()).collect();
                    text.push_str(&format!("\n{}", v.join(" ")));
                }
                ctx.out.costed("bluedbm walk", out, &text);
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// A run's modeled energy, for people: the joules and what drew them.
fn joules(m: &Modeled) -> String {
    format!(
        "{:.3} J ({} node(s): hosts {:.3} J, devices {:.3} J)",
        m.energy_j, m.nodes, m.host_energy_j, m.device_energy_j
    )
}

/// Two lines on what an application's run cost: modeled on the profile and measured here.
fn cost_text(c: &AppCost) -> String {
    let who = match c.placement {
        AppPlacement::Isp => format!("{} in-store processor job(s), {} engines each", c.jobs, c.engines),
        AppPlacement::Host => format!("host software, {} thread(s), pages through the device", c.threads),
        AppPlacement::RemoteHost => {
            format!("host software, {} thread(s), pages through their nodes' hosts", c.threads)
        }
        AppPlacement::HostDram => format!("host software, {} thread(s), the file in DRAM", c.threads),
    };
    format!(
        "  modeled {:.4} s, {} on {} ({}; bound: {}; queued {:.4} s; host cpu {:.4} s), {} pages read, {} over \
         PCIe, {} over the storage network\n  measured {:.3} s wall, host cpu {:.3} s, device cpu {:.3} s",
        c.modeled_s,
        joules(&c.modeled),
        c.modeled.profile,
        who,
        c.bound,
        c.modeled_queue_s,
        c.modeled_host_cpu_s,
        c.pages,
        human_bytes(c.pcie_bytes),
        human_bytes(c.network_bytes),
        c.wall_s,
        c.host_cpu_s,
        c.device_cpu_s
    )
}

/// The in-store processors' limits from `--engines` and `--throttle`.
fn isp_limits(engines: Option<u32>, throttle: Option<&str>) -> Result<IspLimits> {
    if engines == Some(0) {
        anyhow::bail!("--engines must be at least 1");
    }
    let throttle_bw = match throttle {
        Some(t) => {
            let bw = insitu_host::units::parse_size(t.trim_end_matches("/s"))?;
            // The smallest page a profile has: the device refuses less than its own page a second.
            if bw < 4096 {
                anyhow::bail!(
                    "--throttle {t} reads as {bw} B a second; a flash throttle must be at least a page a \
                     second: give a rate with its unit (such as 600MB, §7.1's throttled BlueDBM)"
                );
            }
            Some(bw as f64)
        }
        None => None,
    };
    Ok(IspLimits { engines, throttle_bw })
}
