//! `net`: BlueDBM's storage network (§3.2): topologies and their routing tables.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use serde_json::json;

use crate::cmd::Ctx;

#[derive(Subcommand, Debug)]
pub enum NetCmd {
    /// Check a topology and print the routes every endpoint takes between every pair of nodes.
    Routes {
        /// ring, line, mesh, full, or a topology file (.toml: `nodes = N` and `[[link]]` tables with
        /// `a`, `b`, optional `a_port`, `b_port`, `lanes`).
        #[arg(long, default_value = "ring")]
        topology: String,
        /// Nodes (for a shape; a file says how many it has).
        #[arg(long)]
        nodes: Option<u32>,
        /// Cables between neighbours (for a shape).
        #[arg(long, default_value_t = 1)]
        lanes: u32,
        #[arg(long, default_value = "bluedbm")]
        profile: String,
    },
}

impl NetCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        match self {
            NetCmd::Routes { topology, nodes, lanes, profile } => {
                use insitu_host::bluedbm::routes;
                let profile = insitu_host::Profile::load(&profile)?;
                let nodes = if topology.ends_with(".toml") { nodes } else { Some(nodes.unwrap_or(4)) };
                let r = routes::routes(&topology, nodes, lanes, &profile)?;
                ctx.out.plain("net routes", json!(r), routes::render(&r).trim_end());
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
