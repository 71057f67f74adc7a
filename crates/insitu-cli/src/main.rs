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
    Init(Lazy<array::Init>),
    /// Store a file as an object (striped over all devices unless --device is given).
    Put(Lazy<blob::Put>),
    /// Read an object back (to stdout unless -o is given; the report then goes to stderr).
    Get(Lazy<blob::Get>),
    /// List objects.
    Ls,
    /// Remove an object.
    Rm(Lazy<blob::Rm>),
    /// Count (and locate) a literal byte string in an object: every position it starts at, overlapping
    /// ones too (`aa` occurs 3 times in `aaaa`, where `grep -o` and `rg -o` count 2).
    Search(Lazy<blob::Search>),
    /// Load a Parquet or CSV table, spreading its rows over the devices in NASCENT's hybrid layout.
    PutTable(Lazy<table::PutTable>),
    /// Write a table back as Parquet (parts in device order).
    GetTable(Lazy<table::GetTable>),
    /// Sort a table by its key column on every device at once (NASCENT), or on the host. Each device's
    /// part comes out sorted; `--merge -o FILE` (or `get-table OUT --merged -o FILE`) gives one globally sorted file.
    Sort(Lazy<table::Sort>),
    /// Shuffle write (PSACS): hash-partition every device's part of a table into P partitions, in storage.
    Shuffle(Lazy<shuffle::Shuffle>),
    /// Shuffle read: gather partition p of a shuffle output from every device, as Parquet.
    ShuffleRead(Lazy<shuffle::ShuffleRead>),
    /// Store a sorted list of u32 IDs (binary little-endian or text) as entries of ENTRY_SIZE bytes.
    PutList(Lazy<intersect::PutList>),
    /// Build an inverted index of a text corpus: a posting list NAME.TERM per frequent term.
    IndexText(Lazy<intersect::IndexText>),
    /// Intersect lists (SvS) in the device that holds them, on the host, or where it is modeled faster.
    Intersect(Lazy<intersect::Intersect>),
    /// Block I/O on one device: write a file at an LBA, read, trim.
    #[command(subcommand)]
    Lba(Lazy<lba::LbaCmd>),
    /// Self-Sorting SSD: records sorted by the drive as they are written or on command, read in key order.
    #[command(subcommand)]
    Selfsort(Lazy<selfsort::SelfSortCmd>),
    /// BlueDBM's storage network: check a topology, print its routing tables.
    #[command(subcommand)]
    Net(Lazy<net::NetCmd>),
    /// BlueDBM's file system on the nodes' raw flash: files as physical pages.
    #[command(subcommand)]
    Fs(Lazy<fs::FsCmd>),
    /// BlueDBM's applications on an appliance (§7): string search, nearest neighbours, graphs stored a vertex a page (BFS, random walks).
    #[command(subcommand)]
    Bluedbm(Lazy<bluedbm::BluedbmCmd>),
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
    Model(Lazy<intersect::ModelCmd>),
    /// Reproduce a seed paper's headline experiment.
    #[command(subcommand)]
    Repro(Lazy<repro::ReproCmd>),
    /// Generate data sets (deterministic, seeded).
    #[command(subcommand)]
    Gen(Lazy<gen::GenCmd>),
    /// Build a demo array, store a text corpus, search it in the devices and on the host, compare.
    Demo(Lazy<demo::Demo>),
    /// Serve one device directory to a host in another process (what `--transport process` starts).
    ServeDevice(Lazy<array::ServeDevice>),
}

/// A command's arguments (or subcommands), built only when it is the command given. Building every
/// command's arguments at each start took about 0.7 ms, most of clap's share of a short call's start;
/// help that lists them (`insitu CMD --help`) builds them then.
#[derive(Debug)]
struct Lazy<T>(T);

impl<T: clap::FromArgMatches> clap::FromArgMatches for Lazy<T> {
    fn from_arg_matches(m: &clap::ArgMatches) -> std::result::Result<Self, clap::Error> {
        T::from_arg_matches(m).map(Lazy)
    }

    fn from_arg_matches_mut(m: &mut clap::ArgMatches) -> std::result::Result<Self, clap::Error> {
        T::from_arg_matches_mut(m).map(Lazy)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> std::result::Result<(), clap::Error> {
        self.0.update_from_arg_matches(m)
    }

    fn update_from_arg_matches_mut(
        &mut self,
        m: &mut clap::ArgMatches,
    ) -> std::result::Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(m)
    }
}

impl<T: clap::Args> clap::Args for Lazy<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_args)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_args_for_update)
    }

    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
}

impl<T: Subcommand> Subcommand for Lazy<T> {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_subcommands)
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        cmd.defer(T::augment_subcommands_for_update)
    }

    fn has_subcommand(name: &str) -> bool {
        T::has_subcommand(name)
    }
}

/// Every allocation of the process goes through mimalloc: see Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    sys::default_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let out = output::Output::new(cli.json);
    match run(cli, out.clone()) {
        Ok(code) => code,
        Err(e) => {
            out.error(&e);
            output::exit_code(&e)
        }
    }
}

/// A command line clap refused: its message on standard error and exit status 2, as clap gives them, and
/// with `--json` (before any `--`) also `{"error": ..., "kind": "usage"}` on standard output, as every
/// other error is.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    let json = std::env::args_os().skip(1).take_while(|a| a != "--").any(|a| a == "--json");
    if json {
        // Clap's message up to its usage line, on one line: `the following required arguments were not
        // provided: <NAME>`.
        let msg = match e.kind() {
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                "a subcommand is needed (see --help)".into()
            }
            _ => {
                let text = e.render().to_string();
                let lines: Vec<&str> = text
                    .lines()
                    .map(str::trim)
                    .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
                    .collect();
                let msg = lines.join(" ");
                msg.strip_prefix("error: ").unwrap_or(&msg).to_string()
            }
        };
        println!("{}", serde_json::json!({ "error": msg, "kind": "usage" }));
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        e.exit();
    }
    let _ = e.print();
    ExitCode::from(2)
}

fn run(cli: Cli, out: output::Output) -> Result<ExitCode> {
    let transport = match cli.transport {
        Transport::InProcess => DeviceTransport::InProcess,
        Transport::Process => DeviceTransport::process(std::env::current_exe()?),
    };
    if !(0.0..=86_400.0).contains(&cli.wait) {
        anyhow::bail!("--wait takes 0 to 86400 seconds, not {}", cli.wait);
    }
    let ctx = Ctx {
        data: cli.data,
        out,
        transport,
        quiet: cli.json,
        wait_s: cli.wait,
        host: cli.host_profile.as_deref().map(insitu_host::profile::HostProfile::load).transpose()?,
    };
    match cli.cmd {
        Cmd::Init(Lazy(c)) => c.run(&ctx),
        Cmd::Put(Lazy(c)) => c.run(&ctx),
        Cmd::Get(Lazy(c)) => c.run(&ctx),
        Cmd::Ls => blob::ls(&ctx),
        Cmd::Rm(Lazy(c)) => c.run(&ctx),
        Cmd::Search(Lazy(c)) => c.run(&ctx),
        Cmd::PutTable(Lazy(c)) => c.run(&ctx),
        Cmd::GetTable(Lazy(c)) => c.run(&ctx),
        Cmd::Sort(Lazy(c)) => c.run(&ctx),
        Cmd::Shuffle(Lazy(c)) => c.run(&ctx),
        Cmd::ShuffleRead(Lazy(c)) => c.run(&ctx),
        Cmd::PutList(Lazy(c)) => c.run(&ctx),
        Cmd::IndexText(Lazy(c)) => c.run(&ctx),
        Cmd::Intersect(Lazy(c)) => c.run(&ctx),
        Cmd::Lba(Lazy(c)) => c.run(&ctx),
        Cmd::Selfsort(Lazy(c)) => c.run(&ctx),
        Cmd::Net(Lazy(c)) => c.run(&ctx),
        Cmd::Fs(Lazy(c)) => c.run(&ctx),
        Cmd::Bluedbm(Lazy(c)) => c.run(&ctx),
        Cmd::Stats => array::stats(&ctx),
        Cmd::Fsck { repair } => array::fsck(&ctx, repair),
        Cmd::Profiles => array::profiles(&ctx),
        Cmd::Model(Lazy(c)) => c.run(&ctx),
        Cmd::Repro(Lazy(c)) => c.run(&ctx),
        Cmd::Gen(Lazy(c)) => c.run(&ctx),
        Cmd::Demo(Lazy(c)) => c.run(&ctx),
        Cmd::ServeDevice(Lazy(c)) => c.run(ctx.wait_s),
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
        // Commands' arguments are built when asked for (`Lazy`): build them all first.
        let mut cli = super::Cli::command();
        cli.build();
        let intersect = cli.find_subcommand("intersect").expect("an intersect command");
        assert!(intersect.get_arguments().any(|a| a.get_id() == "placement"), "deferred arguments built");
        walk(&cli, "insitu", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
