//! `insitu`: the command-line front of the insitu computational-storage runtime. `main` parses and
//! dispatches; each command family lives in its own module under `cmd/`.

mod cmd;
mod output;
mod sys;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use insitu_host::DeviceTransport;

use crate::cmd::{
    array, blob, bluedbm, demo, fs, gen, intersect, lba, net, repro, selfsort, shuffle, table, Ctx,
};

#[derive(Parser, Debug)]
#[command(
    name = "insitu",
    version,
    about = "Computational storage runtime and emulator: run operators inside (emulated) smart SSDs"
)]
struct Cli {
    /// The array's data directory.
    #[arg(long, global = true, env = "INSITU_DATA", default_value = "./insitu-data")]
    data: PathBuf,
    /// Print one JSON object (result, measured cost, modeled cost) instead of a summary.
    #[arg(long, global = true)]
    json: bool,
    /// How to reach the devices: in this process, or each in its own `insitu serve-device` process.
    #[arg(long, global = true, value_enum, env = "INSITU_TRANSPORT", default_value = "in-process")]
    transport: Transport,
    /// Seconds to wait while another insitu process uses the array, before giving up (0: fail at once).
    #[arg(long, global = true, env = "INSITU_WAIT", default_value_t = 5.0)]
    wait: f64,
    /// Model host work on this host (a built-in host profile, see `insitu profiles`, or a TOML file)
    /// instead of the one the device profile names.
    #[arg(long, global = true, env = "INSITU_HOST_PROFILE")]
    host_profile: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Transport {
    InProcess,
    Process,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create an array of emulated computational storage devices.
    Init(array::Init),
    /// Store a file as an object (striped over all devices unless --device is given).
    Put(blob::Put),
    /// Read an object back (to stdout unless -o is given; the report then goes to stderr).
    Get(blob::Get),
    /// List objects.
    Ls,
    /// Remove an object.
    Rm(blob::Rm),
    /// Count (and locate) a literal byte string in an object.
    Search(blob::Search),
    /// Load a Parquet or CSV table, spreading its rows over the devices in NASCENT's hybrid layout.
    PutTable(table::PutTable),
    /// Write a table back as Parquet (parts in device order).
    GetTable(table::GetTable),
    /// Sort a table by its key column on every device at once (NASCENT), or on the host. Each device's
    /// part comes out sorted; `--merge -o FILE` (or `get-table OUT --merged`) gives one globally sorted file.
    Sort(table::Sort),
    /// Shuffle write (PSACS): hash-partition every device's part of a table into P partitions, in storage.
    Shuffle(shuffle::Shuffle),
    /// Shuffle read: gather partition p of a shuffle output from every device, as Parquet.
    ShuffleRead(shuffle::ShuffleRead),
    /// Store a sorted list of u32 IDs (binary little-endian or text) as entries of ENTRY_SIZE bytes.
    PutList(intersect::PutList),
    /// Build an inverted index of a text corpus: a posting list NAME.TERM per frequent term.
    IndexText(intersect::IndexText),
    /// Intersect lists (SvS) in the device that holds them, on the host, or where the cost model says.
    Intersect(intersect::Intersect),
    /// Block I/O on one device: write a file at an LBA, read, trim.
    #[command(subcommand)]
    Lba(lba::LbaCmd),
    /// Self-Sorting SSD: records sorted by the drive as they are written or on command, read in key order.
    #[command(subcommand)]
    Selfsort(selfsort::SelfSortCmd),
    /// BlueDBM's storage network: check a topology, print its routing tables.
    #[command(subcommand)]
    Net(net::NetCmd),
    /// BlueDBM's file system on the nodes' raw flash: files as physical pages.
    #[command(subcommand)]
    Fs(fs::FsCmd),
    /// BlueDBM's applications on an appliance (§7): graphs stored a vertex a page.
    #[command(subcommand)]
    Bluedbm(bluedbm::BluedbmCmd),
    /// Space, wear, write amplification and counters of every device.
    Stats,
    /// Check the array: FTL invariants, namespace, checksums of every page, catalog vs devices.
    Fsck {
        /// Repair what can be repaired, with the losses that implies, before checking: cut a device
        /// journal damaged inside at the damage (the records after it are dropped; the whole journal is
        /// kept beside it), put back objects whose parts in quarantine describe them whole, and remove
        /// the other parts kept in quarantine (parts no object lists, found at open).
        #[arg(long)]
        repair: bool,
    },
    /// List the built-in hardware profiles.
    Profiles,
    /// Analytical models: predict host vs device cost before running anything.
    #[command(subcommand)]
    Model(intersect::ModelCmd),
    /// Reproduce a seed paper's headline experiment.
    #[command(subcommand)]
    Repro(repro::ReproCmd),
    /// Generate data sets (deterministic, seeded).
    #[command(subcommand)]
    Gen(gen::GenCmd),
    /// Build a demo array, store a text corpus, search it in the devices and on the host, compare.
    Demo(demo::Demo),
    /// Serve one device directory to a host in another process (what `--transport process` starts).
    ServeDevice(array::ServeDevice),
}

/// Every allocation of the process goes through mimalloc: see Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    sys::default_sigpipe();
    let cli = Cli::parse();
    let json = cli.json;
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let msg = format!("{e:#}");
            if json {
                println!("{}", serde_json::json!({ "error": msg }));
            }
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    let transport = match cli.transport {
        Transport::InProcess => DeviceTransport::InProcess,
        Transport::Process => DeviceTransport::process(std::env::current_exe()?),
    };
    if !(0.0..=86_400.0).contains(&cli.wait) {
        anyhow::bail!("--wait takes 0 to 86400 seconds, not {}", cli.wait);
    }
    let ctx = Ctx {
        data: cli.data,
        out: output::Output { json: cli.json },
        transport,
        quiet: cli.json,
        wait_s: cli.wait,
        host: cli.host_profile.as_deref().map(insitu_host::profile::HostProfile::load).transpose()?,
    };
    match cli.cmd {
        Cmd::Init(c) => c.run(&ctx),
        Cmd::Put(c) => c.run(&ctx),
        Cmd::Get(c) => c.run(&ctx),
        Cmd::Ls => blob::ls(&ctx),
        Cmd::Rm(c) => c.run(&ctx),
        Cmd::Search(c) => c.run(&ctx),
        Cmd::PutTable(c) => c.run(&ctx),
        Cmd::GetTable(c) => c.run(&ctx),
        Cmd::Sort(c) => c.run(&ctx),
        Cmd::Shuffle(c) => c.run(&ctx),
        Cmd::ShuffleRead(c) => c.run(&ctx),
        Cmd::PutList(c) => c.run(&ctx),
        Cmd::IndexText(c) => c.run(&ctx),
        Cmd::Intersect(c) => c.run(&ctx),
        Cmd::Lba(c) => c.run(&ctx),
        Cmd::Selfsort(c) => c.run(&ctx),
        Cmd::Net(c) => c.run(&ctx),
        Cmd::Fs(c) => c.run(&ctx),
        Cmd::Bluedbm(c) => c.run(&ctx),
        Cmd::Stats => array::stats(&ctx),
        Cmd::Fsck { repair } => array::fsck(&ctx, repair),
        Cmd::Profiles => array::profiles(&ctx),
        Cmd::Model(c) => c.run(&ctx),
        Cmd::Repro(c) => c.run(&ctx),
        Cmd::Gen(c) => c.run(&ctx),
        Cmd::Demo(c) => c.run(&ctx),
        Cmd::ServeDevice(c) => c.run(),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every argument of every command says what it is in `--help`.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if a.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "insitu", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
