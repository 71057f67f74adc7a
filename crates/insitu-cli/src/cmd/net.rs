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
        /// Hardware profile (its [network.storage] section).
        #[arg(long, default_value = "bluedbm")]
        profile: String,
    },
    /// Random page reads over simulated nodes by every path (ISP and host, local and remote): how fast
    /// this machine emulates them, and their bandwidth on the profile.
    Bench {
        /// Nodes of the appliance.
        #[arg(long, default_value_t = 4)]
        nodes: u32,
        /// ring, line, mesh, full, or a topology file (.toml).
        #[arg(long, default_value = "ring")]
        topology: String,
        /// Cables between neighbouring nodes.
        #[arg(long, default_value_t = 1)]
        lanes: u32,
        /// Bytes written, spread evenly over the nodes.
        #[arg(long, default_value = "4GiB")]
        size: String,
        /// Reads per path.
        #[arg(long, default_value_t = 100_000)]
        reads: u64,
        /// Hardware profile (its [network.storage] section).
        #[arg(long, default_value = "bluedbm")]
        profile: String,
        /// Where the nodes' NAND images go while it runs (default: target/insitu-bench).
        #[arg(long)]
        work: Option<std::path::PathBuf>,
    },
}

impl NetCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        match self {
            NetCmd::Routes { topology, nodes, lanes, profile } => {
                use insitu_host::bluedbm::routes;
                let profile = insitu_host::Profile::load(&profile)?;
                let r = routes::routes(&topology, nodes, lanes, &profile)?;
                ctx.out.plain("net routes", json!(r), routes::render(&r).trim_end());
            }
            NetCmd::Bench { nodes, topology, lanes, size, reads, profile, work } => {
                use insitu_host::bluedbm::bench;
                let profile = insitu_host::Profile::load(&profile)?;
                let opts = bench::BenchOptions {
                    nodes,
                    topology,
                    lanes,
                    bytes: insitu_host::units::parse_size(&size)?,
                    reads,
                    seed: 42,
                };
                // The run removes its scratch images itself; the default folder goes with them.
                let run = |work: &std::path::Path| bench::run(&profile, &opts, work, &ctx.progress());
                let b = match work {
                    Some(w) => run(&w)?,
                    None => crate::cmd::in_default_dir("target/insitu-bench", run)?,
                };
                ctx.out.plain("net bench", json!(b), bench::render(&b).trim_end());
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
