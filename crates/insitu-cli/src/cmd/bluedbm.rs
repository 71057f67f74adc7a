//! `bluedbm`: BlueDBM's applications (ISCA '15 §7) on an appliance's file system. So far: graphs stored a
//! vertex a page (`put-graph`), for the traversal of §7.2.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use insitu_host::bluedbm::fs::Fs;
use insitu_host::bluedbm::graph::{put_graph, read_edges, Adjacency, EdgeFormat};
use insitu_host::units::human_bytes;
use serde_json::json;

use crate::cmd::Ctx;

#[derive(Subcommand, Debug)]
pub enum BluedbmCmd {
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
    },
}

impl BluedbmCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        match self {
            BluedbmCmd::PutGraph { edges, name, directed, vertices, format } => {
                let fmt = match format {
                    Some(f) => EdgeFormat::parse(&f)?,
                    None => EdgeFormat::of(&edges),
                };
                let list = read_edges(&edges, fmt)?;
                let adj = Adjacency::build(&list, vertices, directed)?;
                let array = ctx.open()?;
                let mut fs = Fs::open(&array)?;
                let g = crate::output::busy("storing the graph", || put_graph(&mut fs, &name, &adj))?;
                ctx.out.plain(
                    "bluedbm put-graph",
                    json!({ "name": g.name, "vertices": g.vertices, "edges": list.len(), "arcs": g.arcs,
                            "pages": g.pages, "spill_pages": g.spill_pages, "bytes": g.bytes,
                            "max_degree": g.max_degree, "directed": directed }),
                    &format!(
                        "stored graph {} ({} vertices, {} neighbour entries, largest degree {}) in {} pages \
                         ({} spill), {}",
                        g.name,
                        g.vertices,
                        g.arcs,
                        g.max_degree,
                        g.pages,
                        g.spill_pages,
                        human_bytes(g.bytes)
                    ),
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
