//! `repro`: a seed paper's headline experiment, measured here and modeled on its hardware.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Subcommand;
use serde_json::json;

use crate::cmd::table::Algo;
use crate::cmd::Ctx;

#[derive(Subcommand, Debug)]
pub enum ReproCmd {
    /// DaMoN '16 §5: sweeps of entry size, size ratio and intersection ratio on smartssd-2016.
    Intersect {
        /// Shrink every list by this factor (1 = the paper's 100 MB).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Working directory for the temporary arrays (default: target/insitu-repro).
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// PSACS §V: shuffle of TPC-H tables in one SmartSSD vs the host baselines with 1..32 threads.
    Psacs {
        /// Directory with lineitem, partsupp, orders and customer as Parquet (from tpchgen-cli).
        #[arg(long)]
        tpch: PathBuf,
        /// Shuffle partitions.
        #[arg(long, default_value_t = 1024)]
        partitions: u32,
        /// Host thread counts for the baselines, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
        threads: Vec<usize>,
        /// Hardware profile to model on.
        #[arg(long, default_value = "smartssd")]
        profile: String,
        /// Working directory for the temporary arrays (default: target/insitu-repro).
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// Self-Sorting SSD §IV: Table I and Figs. 3-5, the four sorting methods on emulated Jasmine drives.
    Selfsort {
        /// Data to sort, in the paper's units (8GB = its 524,288 records of 16 KB).
        #[arg(long, default_value = "64MB")]
        size: String,
        /// Skip the presorted (PS) inputs.
        #[arg(long)]
        random_only: bool,
        /// Runs per point (the median is reported).
        #[arg(long, default_value_t = 8)]
        runs: u32,
        /// Bytes per host read request of the final reads.
        #[arg(long, default_value = "128KiB")]
        request: String,
        /// Hardware profile to model on.
        #[arg(long, default_value = "jasmine")]
        profile: String,
        /// Working directory for the temporary arrays (default: target/insitu-repro).
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// BlueDBM §6.3-6.5, Figs. 11-13: the storage network (latency per hop, bandwidth per stream, 8 ports
    /// at once, a 20-node ring), the latency of a remote 8 KB read by path (ISP-F, H-F, H-RH-F, H-D),
    /// and random-read bandwidth local and remote, simulated on the profile's links, cards and PCIe.
    BluedbmNet {
        /// Hardware profile to model on.
        #[arg(long, default_value = "bluedbm")]
        profile: String,
    },
    /// NASCENT Fig. 13: sort on 1 to 12 SmartSSDs vs the host CPU vs one accelerator beside the host.
    Nascent {
        /// Device counts to run (default 1 to 12).
        #[arg(long, value_delimiter = ',')]
        devices: Option<Vec<u32>>,
        /// Hardware profile to model on.
        #[arg(long, default_value = "smartssd")]
        profile: String,
        /// fast (radix) or bitonic (NASCENT's sorting network).
        #[arg(long, value_enum, default_value = "fast")]
        algo: Algo,
        /// Working directory for the temporary arrays (default: target/insitu-repro).
        #[arg(long)]
        work: Option<PathBuf>,
    },
}

impl ReproCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        // The default working directory (and `target/` above it) goes again if this run made it and
        // left it empty, whether the run succeeded or not.
        let made: Vec<PathBuf> =
            ["target", "target/insitu-repro"].iter().map(PathBuf::from).filter(|d| !d.exists()).collect();
        let r = self.run_in(ctx);
        for d in made.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
        r
    }

    fn run_in(self, ctx: &Ctx) -> Result<ExitCode> {
        let default_work = || PathBuf::from("target/insitu-repro");
        let progress = ctx.progress();
        match self {
            ReproCmd::Intersect { scale, work } => {
                let work = work.unwrap_or_else(default_work);
                let profile = ctx.profile("smartssd-2016")?;
                let pts = insitu_host::intersect::repro::repro_intersect(&work, scale, &profile, &progress)?;
                let text = insitu_host::intersect::repro::render(&pts, scale);
                ctx.out.plain("repro intersect", json!(pts), text.trim_end());
            }
            ReproCmd::Psacs { tpch, partitions, threads, profile, work } => {
                let work = work.unwrap_or_else(default_work);
                let profile = ctx.profile_on(&profile, insitu_host::psacs::repro::PAPER_HOST)?;
                let ws = insitu_host::psacs::repro::repro_psacs(
                    &tpch, &work, partitions, &threads, &profile, &progress,
                )?;
                let on = format!("{}, host {}", profile.name, profile.host.name);
                let text = insitu_host::psacs::repro::render(&ws, partitions, &on);
                ctx.out.plain("repro psacs", json!(ws), text.trim_end());
            }
            ReproCmd::Selfsort { size, random_only, runs, request, profile, work } => {
                use insitu_host::selfsort::repro;
                let bytes = repro::paper_size(&size)?;
                let records = crate::cmd::selfsort::check_records(bytes / 16384)?;
                let opts = repro::ReproOptions {
                    records,
                    presorted: !random_only,
                    runs,
                    request_bytes: insitu_host::units::parse_size(&request)?,
                    seed: 42,
                    profile: ctx.profile(&profile)?,
                    workdir: work.unwrap_or_else(default_work).join("selfsort"),
                };
                let r = repro::run(&opts, &progress)?;
                ctx.out.plain("repro selfsort", repro::to_json(&r), r.text.trim_end());
            }
            ReproCmd::BluedbmNet { profile } => {
                use insitu_host::bluedbm::repro;
                let figures = repro::run(&ctx.profile(&profile)?, &progress)?;
                ctx.out.plain("repro bluedbm-net", json!(figures), repro::render(&figures).trim_end());
            }
            ReproCmd::Nascent { devices, profile, algo, work } => {
                let counts = devices.unwrap_or_else(|| (1..=12).collect());
                if counts.is_empty() || counts.iter().any(|n| *n == 0 || *n > 64) {
                    bail!("--devices takes counts from 1 to 64");
                }
                let work = work.unwrap_or_else(default_work);
                let rows = insitu_host::nascent::repro::repro_nascent(
                    &work,
                    &counts,
                    &ctx.profile(&profile)?,
                    algo.into(),
                    &progress,
                )?;
                let text = insitu_host::nascent::repro::render(&rows, &profile);
                ctx.out.plain("repro nascent", json!(rows), text.trim_end());
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
