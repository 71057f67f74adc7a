//! `repro`: a seed paper's headline experiments, measured here and modeled on its hardware, written as
//! figures (a table and a plot each, beside the paper's values) into an output folder with one REPORT.md.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use insitu_host::figure::PaperFigures;
use serde_json::{json, Value};

use crate::cmd::table::Algo;
use crate::cmd::Ctx;

/// Where the figures go, and how long to spend on them.
#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Folder for the tables, plots and REPORT.md (made if missing; REPORT.md covers every paper in it).
    #[arg(long, default_value = "repro-out")]
    out: PathBuf,
    /// Smaller runs, for a look in a minute: fewer device counts and TPC-C scales for NASCENT, TPC-H SF
    /// 0.1 for PSACS, lists at 0.1 of the paper's size for the intersection, 2 sorted runs for
    /// Self-Sort's MergeSort and ActiveSort, an eighth of the items, corpus and graph for BlueDBM's
    /// applications. NASCENT's and BlueDBM's network figures at the points run are a full run's; the
    /// smaller data changes the others' (pipelines fill and drain in a larger share of a shorter run).
    #[arg(long)]
    quick: bool,
}

#[derive(Subcommand, Debug)]
pub enum ReproCmd {
    /// Every repro below, in turn, into one report (with --quick: about a minute on 2 cores).
    All {
        #[command(flatten)]
        report: ReportArgs,
        /// Directory with the TPC-H tables for PSACS (default: found or made by tpchgen-cli).
        #[arg(long)]
        tpch: Option<PathBuf>,
        /// Working directory for the temporary arrays (default: target/insitu-repro).
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// DaMoN '16 §5: sweeps of entry size, size ratio and intersection ratio on smartssd-2016.
    Intersect {
        #[command(flatten)]
        report: ReportArgs,
        /// Shrink every list by this factor (default 1 = the paper's 100 MB; 0.1 with --quick).
        #[arg(long)]
        scale: Option<f64>,
        /// Working directory for the temporary arrays (default: target/insitu-repro).
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// PSACS §V: shuffle of TPC-H tables in one SmartSSD vs the host baselines with 1..32 threads.
    Psacs {
        #[command(flatten)]
        report: ReportArgs,
        /// Directory with lineitem, partsupp, orders and customer as Parquet (default: the tables of
        /// --scale-factor in the user's cache, made by tpchgen-cli when missing).
        #[arg(long)]
        tpch: Option<PathBuf>,
        /// TPC-H scale factor of the tables made when --tpch is not given (default 1; 0.1 with --quick).
        #[arg(long)]
        scale_factor: Option<f64>,
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
        #[command(flatten)]
        report: ReportArgs,
        /// Data to sort, in the paper's units (8GB = its 524,288 records of 16 KB).
        #[arg(long, default_value = "64MB")]
        size: String,
        /// Skip the presorted (PS) inputs.
        #[arg(long)]
        random_only: bool,
        /// Sorted runs MergeSort and ActiveSort make before their merge (§IV-A; default 8, 2 with --quick).
        #[arg(long)]
        runs: Option<u32>,
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
        #[command(flatten)]
        report: ReportArgs,
        /// Hardware profile to model on.
        #[arg(long, default_value = "bluedbm")]
        profile: String,
    },
    /// BlueDBM §7, Figs. 16-21: nearest-neighbour search (in-store, throttled, host DRAM by threads, DRAM
    /// with 10% flash or 5% disk, host software on flash, read at random or in order), graph traversal by access path, and string
    /// search by engine count, run on a two-node appliance in the work folder.
    BluedbmApps {
        #[command(flatten)]
        report: ReportArgs,
        /// Hardware profile to model on.
        #[arg(long, default_value = "bluedbm")]
        profile: String,
        /// Working directory for the appliance (default: target/insitu-repro).
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// NASCENT Fig. 13: sort on 1 to 12 SmartSSDs vs the host CPU vs one accelerator beside the host.
    Nascent {
        #[command(flatten)]
        report: ReportArgs,
        /// Fig. 14's TPC-C scale factors (warehouses a device, on 12 devices; default 1, 2, 5; 1 with
        /// --quick; the paper's are 1,2,5,10,20; 0 skips Fig. 14).
        #[arg(long, value_delimiter = ',')]
        tpcc: Option<Vec<u32>>,
        /// Device counts to run (default 1 to 12; 1, 2, 4, 8, 12 with --quick).
        #[arg(long, value_delimiter = ',')]
        devices: Option<Vec<u32>>,
        /// Hardware profile to model on.
        #[arg(long, default_value = "smartssd")]
        profile: String,
        /// How this machine sorts: fast (radix) or bitonic (NASCENT's network); the model prices the profile's
        /// sorter either way.
        #[arg(long, value_enum, default_value = "fast")]
        algo: Algo,
        /// Working directory for the temporary arrays (default: target/insitu-repro).
        #[arg(long)]
        work: Option<PathBuf>,
    },
}

/// A repro with the defaults its options have on the command line, run with `report`, in `work`, on the
/// TPC-H tables of `tpch` (what `repro all` takes for them all).
fn with_defaults(
    name: &str,
    report: &ReportArgs,
    work: &Option<PathBuf>,
    tpch: &Option<PathBuf>,
) -> ReproCmd {
    #[derive(clap::Parser)]
    struct One {
        #[command(subcommand)]
        cmd: ReproCmd,
    }
    let mut cmd =
        <One as clap::Parser>::try_parse_from(["repro", name]).expect("every repro runs without options").cmd;
    match &mut cmd {
        ReproCmd::Nascent { report: r, work: w, .. }
        | ReproCmd::Intersect { report: r, work: w, .. }
        | ReproCmd::Selfsort { report: r, work: w, .. }
        | ReproCmd::BluedbmApps { report: r, work: w, .. } => (*r, *w) = (report.clone(), work.clone()),
        ReproCmd::Psacs { report: r, work: w, tpch: t, .. } => {
            (*r, *w, *t) = (report.clone(), work.clone(), tpch.clone())
        }
        ReproCmd::BluedbmNet { report: r, .. } => *r = report.clone(),
        ReproCmd::All { .. } => unreachable!("repro all runs the others"),
    }
    cmd
}

/// Where repros make their temporary arrays unless `--work` says.
const DEFAULT_WORK: &str = "target/insitu-repro";

impl ReproCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        // The default working directory (see `default_work`) goes again if this run made it.
        crate::cmd::in_default_dir(DEFAULT_WORK, |_| self.run_in(ctx))
    }

    fn run_in(self, ctx: &Ctx) -> Result<ExitCode> {
        let progress = ctx.progress();
        if let ReproCmd::All { report, tpch, work } = self {
            let mut papers = serde_json::Map::new();
            let mut text = String::new();
            // Each repro with its own defaults, as `insitu repro NAME` alone would run it, and this call's
            // report, work folder and TPC-H tables.
            let cmds = ["nascent", "psacs", "intersect", "selfsort", "bluedbm-net", "bluedbm-apps"]
                .map(|name| with_defaults(name, &report, &work, &tpch));
            // One repro that cannot run (a tool missing, a folder not writable) does not stop the others:
            // their figures are written, the failure is said at the end, and the exit status is 1.
            let mut failed = serde_json::Map::new();
            for cmd in cmds {
                let name = cmd.name();
                match cmd.figures(ctx, &progress).and_then(|(pf, data)| write(&report.out, pf, data)) {
                    Ok((one, t)) => {
                        papers.insert(one["paper"].as_str().unwrap_or_default().to_string(), one);
                        text.push_str(&t);
                        text.push('\n');
                    }
                    Err(e) => {
                        eprintln!("error: repro {name}: {e:#} (going on with the others)");
                        failed.insert(name.into(), json!(format!("{e:#}")));
                    }
                }
            }
            text.push_str(&format!("report: {}\n", report.out.join("REPORT.md").display()));
            for (name, e) in &failed {
                text.push_str(&format!("not reproduced: {name}: {}\n", e.as_str().unwrap_or_default()));
            }
            let result = json!({ "out": report.out, "papers": papers, "failed": failed });
            ctx.out.plain("repro all", result, text.trim_end());
            return Ok(if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) });
        }
        let out = self.report_args().out.clone();
        let (pf, data) = self.figures(ctx, &progress)?;
        let (result, text) = write(&out, pf, data)?;
        let name = format!("repro {}", result["paper"].as_str().unwrap_or_default());
        ctx.out.plain(&name, result, &format!("{text}report: {}", out.join("REPORT.md").display()));
        Ok(ExitCode::SUCCESS)
    }

    /// The repro's subcommand name.
    fn name(&self) -> &'static str {
        match self {
            ReproCmd::All { .. } => "all",
            ReproCmd::Intersect { .. } => "intersect",
            ReproCmd::Psacs { .. } => "psacs",
            ReproCmd::Selfsort { .. } => "selfsort",
            ReproCmd::BluedbmNet { .. } => "bluedbm-net",
            ReproCmd::BluedbmApps { .. } => "bluedbm-apps",
            ReproCmd::Nascent { .. } => "nascent",
        }
    }

    fn report_args(&self) -> &ReportArgs {
        match self {
            ReproCmd::All { report, .. }
            | ReproCmd::Intersect { report, .. }
            | ReproCmd::Psacs { report, .. }
            | ReproCmd::Selfsort { report, .. }
            | ReproCmd::BluedbmNet { report, .. }
            | ReproCmd::BluedbmApps { report, .. }
            | ReproCmd::Nascent { report, .. } => report,
        }
    }

    /// Runs one repro: its figures, and its run's own data (for `--json`).
    fn figures(self, ctx: &Ctx, progress: &dyn Fn(&str)) -> Result<(PaperFigures, Value)> {
        let default_work = || PathBuf::from(DEFAULT_WORK);
        Ok(match self {
            ReproCmd::All { .. } => bail!("`repro all` runs the others"),
            ReproCmd::Intersect { report, scale, work } => {
                use insitu_host::intersect::repro;
                let scale = scale.unwrap_or(if report.quick { 0.1 } else { 1.0 });
                let work = work.unwrap_or_else(default_work);
                let profile = ctx.profile("smartssd-2016")?;
                let pts = repro::repro_intersect(&work, scale, &profile, progress)?;
                (repro::figures(&pts, scale, &profile)?, json!(pts))
            }
            ReproCmd::Psacs { report, tpch, scale_factor, partitions, threads, profile, work } => {
                use insitu_host::psacs::repro;
                let work = work.unwrap_or_else(default_work);
                let profile = ctx.profile_on(&profile, repro::PAPER_HOST)?;
                let sf = scale_factor.unwrap_or(if report.quick { 0.1 } else { 1.0 });
                let tpch = match tpch {
                    Some(dir) => dir,
                    None => tpch_tables(sf, progress)?,
                };
                let ws = repro::repro_psacs(&tpch, &work, partitions, &threads, &profile, progress)?;
                (repro::figures(&ws, partitions, &profile), json!(ws))
            }
            ReproCmd::Selfsort { report, size, random_only, runs, request, profile, work } => {
                use insitu_host::selfsort::repro;
                let bytes = repro::paper_size(&size)?;
                let opts = repro::ReproOptions {
                    records: bytes / insitu_host::selfsort::records::RecordFormat::PAPER.size as u64,
                    presorted: !random_only,
                    runs: runs.unwrap_or(if report.quick { 2 } else { 8 }),
                    request_bytes: insitu_host::units::parse_size(&request)?,
                    seed: 42,
                    profile: ctx.profile(&profile)?,
                    workdir: work.unwrap_or_else(default_work).join("selfsort"),
                };
                // Its folder goes again if this run made it and left it empty.
                let made = !opts.workdir.exists();
                let r = repro::run(&opts, progress);
                if made {
                    let _ = std::fs::remove_dir(&opts.workdir);
                }
                let r = r?;
                (repro::figures(&r), repro::to_json(&r))
            }
            ReproCmd::BluedbmNet { report: _, profile } => {
                use insitu_host::bluedbm::repro;
                let figures = repro::run(&ctx.profile(&profile)?, progress)?;
                (repro::figures(&figures), json!(figures))
            }
            ReproCmd::BluedbmApps { report, profile, work } => {
                use insitu_host::bluedbm::repro_apps;
                let profile = ctx.profile(&profile)?;
                let run = |w: &std::path::Path| repro_apps::run(&profile, w, report.quick, progress);
                // The run removes its appliance itself; the default folder goes with it when it made it.
                let figures = match work {
                    Some(w) => run(&w)?,
                    None => crate::cmd::in_default_dir(DEFAULT_WORK, run)?,
                };
                (repro_apps::figures(&figures), json!(figures))
            }
            ReproCmd::Nascent { report, tpcc, devices, profile, algo, work } => {
                let quick = vec![1, 2, 4, 8, 12];
                let counts = devices.unwrap_or_else(|| if report.quick { quick } else { (1..=12).collect() });
                if counts.is_empty() || counts.iter().any(|n| *n == 0 || *n > 64) {
                    bail!("--devices takes counts from 1 to 64");
                }
                let work = work.unwrap_or_else(default_work);
                let profile = ctx.profile(&profile)?;
                use insitu_host::nascent::repro;
                let kernel =
                    repro::repro_kernel(&profile, if report.quick { 256 << 10 } else { 8 << 20 }, progress)?;
                let rows = repro::repro_nascent(&work, &counts, &profile, algo.into(), progress)?;
                // Fig. 14 on 12 devices; the paper's SF 10 and 20 (12 x 3M and 6M rows) only with --tpcc.
                let mut scales = tpcc.unwrap_or_else(|| if report.quick { vec![1] } else { vec![1, 2, 5] });
                scales.retain(|sf| *sf > 0);
                let tpcc = repro::repro_tpcc(&work, &scales, 12, &profile, algo.into(), progress)?;
                (
                    repro::figures(&rows, &kernel, &tpcc, &profile),
                    json!({ "fig8": kernel, "fig13": rows, "fig14": tpcc }),
                )
            }
        })
    }
}

/// Writes a paper's figures under `out`; returns its JSON (figures by name, the run's data) and its text
/// (each figure's table and verdict).
fn write(out: &Path, pf: PaperFigures, data: Value) -> Result<(Value, String)> {
    insitu_report::write(out, &pf).with_context(|| format!("writing the report into {}", out.display()))?;
    let figures: serde_json::Map<String, Value> =
        pf.figures.iter().map(|f| (f.id.clone(), json!(f))).collect();
    let text =
        format!("{}\nwritten: {}\n", insitu_report::markdown(&pf, None), out.join(&pf.paper).display());
    Ok((json!({ "paper": pf.paper, "out": out, "figures": figures, "data": data }), text))
}

/// The TPC-H tables PSACS needs at scale factor `sf`: in the user's cache (`$XDG_CACHE_HOME/insitu` or
/// `~/.cache/insitu`), made there by `tpchgen-cli` the first time.
fn tpch_tables(sf: f64, progress: &dyn Fn(&str)) -> Result<PathBuf> {
    if !(sf > 0.0 && sf <= 100.0) {
        bail!("--scale-factor must be in (0, 100], not {sf}");
    }
    let cache = match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(c), _) if !c.is_empty() => PathBuf::from(c),
        (_, Some(h)) => PathBuf::from(h).join(".cache"),
        _ => bail!("no cache folder (neither XDG_CACHE_HOME nor HOME is set): pass --tpch DIR"),
    };
    let dir = cache.join("insitu").join(format!("tpch-sf{sf}"));
    let tables = insitu_host::psacs::repro::WORKLOADS.iter().map(|(_, t, _)| *t).collect::<Vec<_>>();
    if tables.iter().all(|t| dir.join(format!("{t}.parquet")).is_file()) {
        return Ok(dir);
    }
    let Some(gen) = find_tpchgen() else {
        bail!(
            "the TPC-H tables {} are not in {} and tpchgen-cli is not installed: `pip install tpchgen-cli`, \
             or pass --tpch DIR with TABLE.parquet files",
            tables.join(", "),
            dir.display()
        );
    };
    progress(&format!(
        "making TPC-H SF {sf} ({}) in {} with {}",
        tables.join(", "),
        dir.display(),
        gen.display()
    ));
    // Made beside, then renamed: an interrupted run leaves no half-made folder behind to be trusted.
    let part = cache.join("insitu").join(format!("tpch-sf{sf}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&part);
    std::fs::create_dir_all(&part).with_context(|| format!("making {}", part.display()))?;
    let status = std::process::Command::new(&gen)
        .arg("parquet")
        .arg("-s")
        .arg(sf.to_string())
        .arg(format!("--tables={}", tables.join(",")))
        .arg(format!("--output-dir={}", part.display()))
        .status()
        .with_context(|| format!("running {}", gen.display()))?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&part);
        bail!("{} failed ({status}) making TPC-H SF {sf}", gen.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&part, &dir)
        .with_context(|| format!("moving {} to {}", part.display(), dir.display()))?;
    Ok(dir)
}

/// `tpchgen-cli` on the PATH.
fn find_tpchgen() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join("tpchgen-cli")).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `repro all` runs each repro with the defaults of its own options (it spelt them out again, free to
    /// drift), and with the report, work folder and tables it was given.
    #[test]
    fn repro_all_takes_each_repros_own_defaults() {
        let report = ReportArgs { out: "o".into(), quick: true };
        let (work, tpch) = (Some(PathBuf::from("w")), Some(PathBuf::from("t")));
        let names = ["nascent", "psacs", "intersect", "selfsort", "bluedbm-net", "bluedbm-apps"];
        let cmds = names.map(|n| with_defaults(n, &report, &work, &tpch));
        match &cmds[1] {
            ReproCmd::Psacs { partitions, threads, profile, tpch: t, work: w, report: r, .. } => {
                assert_eq!(
                    (*partitions, threads.as_slice(), profile.as_str()),
                    (1024, &[1, 2, 4, 8, 16, 32][..], "smartssd")
                );
                assert_eq!((t, w, r.quick), (&tpch, &work, true));
            }
            other => panic!("{other:?}"),
        }
        match &cmds[3] {
            ReproCmd::Selfsort { size, request, profile, .. } => {
                assert_eq!((size.as_str(), request.as_str(), profile.as_str()), ("64MB", "128KiB", "jasmine"))
            }
            other => panic!("{other:?}"),
        }
    }
}
