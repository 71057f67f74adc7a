//! `insitu`: the command-line front of the insitu computational-storage runtime.

mod demo;
mod output;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use insitu_device::Profile;
use insitu_host::blob::{self, Placement};
use insitu_host::search::{self, SearchPlacement};
use insitu_host::units::parse_size;
use insitu_host::{Array, FaultPlan};

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
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create an array of emulated computational storage devices.
    Init {
        #[arg(long, default_value_t = 4)]
        devices: u32,
        /// Built-in profile name (see `insitu profiles`) or path to a TOML profile.
        #[arg(long, default_value = "smartssd")]
        profile: String,
        /// Logical capacity per device (e.g. 64GiB, 4TB); the image is sparse. Default: the profile's.
        #[arg(long)]
        capacity: Option<String>,
        /// Stripe unit for objects spread over all devices (default 4MiB).
        #[arg(long)]
        stripe_unit: Option<String>,
    },
    /// Store a file as an object (striped over all devices unless --device is given).
    Put {
        file: PathBuf,
        #[arg(long)]
        name: Option<String>,
        /// Keep the object whole on this device.
        #[arg(long)]
        device: Option<u32>,
    },
    /// Read an object back (to stdout unless -o is given; the report then goes to stderr).
    Get {
        name: String,
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// List objects.
    Ls,
    /// Remove an object.
    Rm { name: String },
    /// Count (and locate) a literal byte string in an object.
    Search {
        name: String,
        pattern: String,
        #[arg(long, value_enum, default_value = "device")]
        placement: PlacementArg,
        /// Also return the byte offset of every match.
        #[arg(long)]
        offsets: bool,
    },
    /// Load a Parquet or CSV table, spreading its rows over the devices in NASCENT's hybrid layout.
    PutTable {
        file: PathBuf,
        #[arg(long)]
        name: Option<String>,
        /// The column stored column-wise, the one `sort` sorts by (default: the first column).
        #[arg(long)]
        key: Option<String>,
        /// How rows are spread: round-robin or hash:COLUMN.
        #[arg(long, default_value = "round-robin")]
        partition: String,
        /// Dictionary-encode this column (the key column; 8- or 16-bit codes).
        #[arg(long)]
        dict: Option<String>,
    },
    /// Write a table back as Parquet (parts in device order).
    GetTable {
        name: String,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Sort a table by its key column on every device at once (NASCENT), or on the host.
    Sort {
        name: String,
        #[arg(long)]
        key: String,
        #[arg(long, value_enum, default_value = "device")]
        placement: SortPlacementArg,
        /// fast (radix) or bitonic (NASCENT's sorting network).
        #[arg(long, default_value = "fast")]
        algo: String,
        /// Name of the sorted table (default NAME.sorted).
        #[arg(long)]
        out: Option<String>,
        /// Also k-way merge the sorted parts into one globally sorted Parquet file (needs -o).
        #[arg(long, requires = "output")]
        merge: bool,
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Device memory the sort program may use, e.g. 64MiB (default: all that is free).
        #[arg(long)]
        memory_budget: Option<String>,
    },
    /// Shuffle write (PSACS): hash-partition every device's part of a table into P partitions, in storage.
    Shuffle {
        name: String,
        /// Shuffle key column(s), comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        key: Vec<String>,
        #[arg(long, default_value_t = 1024)]
        partitions: u32,
        #[arg(long, value_enum, default_value = "device")]
        placement: ShufflePlacementArg,
        /// Host threads for the host-sort and host-bucket baselines.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// zigzag-fold (the paper's) or xxh3.
        #[arg(long, default_value = "zigzag-fold")]
        hash: String,
        /// column (PSACS, LZ4 per column chunk) or row.
        #[arg(long, default_value = "column")]
        layout: String,
        /// Name of the output (default NAME.shuffled).
        #[arg(long)]
        out: Option<String>,
        /// Device memory a shuffle may use, e.g. 64MiB (default: all that is free).
        #[arg(long)]
        memory_budget: Option<String>,
    },
    /// Shuffle read: gather partition p of a shuffle output from every device, as Parquet.
    ShuffleRead {
        name: String,
        #[arg(long)]
        partition: u32,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Store a sorted list of u32 IDs (binary little-endian or text) as entries of ENTRY_SIZE bytes.
    PutList {
        file: PathBuf,
        #[arg(long)]
        name: Option<String>,
        /// Bytes per entry: a 4-byte ID plus a payload (filled deterministically).
        #[arg(long, default_value_t = 4)]
        entry_size: u32,
        #[arg(long, default_value_t = 0)]
        device: u32,
    },
    /// Build an inverted index of a text corpus: a posting list NAME.TERM per frequent term.
    IndexText {
        path: PathBuf,
        #[arg(long)]
        name: String,
        #[arg(long, default_value_t = 4)]
        entry_size: u32,
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Keep the terms found in the most documents, at most this many.
        #[arg(long, default_value_t = 5000)]
        max_terms: usize,
    },
    /// Intersect lists (SvS) in the device that holds them, on the host, or where the cost model says.
    Intersect {
        #[arg(num_args = 2.., required = true)]
        lists: Vec<String>,
        #[arg(long, value_enum, default_value = "device")]
        placement: IntersectPlacementArg,
        /// Return only the number of common IDs.
        #[arg(long, conflicts_with = "ids_only")]
        count_only: bool,
        /// Return the common IDs (default: whole entries of the first list).
        #[arg(long)]
        ids_only: bool,
    },
    /// Space, wear, write amplification and counters of every device.
    Stats,
    /// Check the array: FTL invariants, namespace, checksums of every page, catalog vs devices.
    Fsck,
    /// List the built-in hardware profiles.
    Profiles,
    /// Analytical models: predict host vs device cost before running anything.
    #[command(subcommand)]
    Model(ModelCmd),
    /// Reproduce a seed paper's headline experiment.
    #[command(subcommand)]
    Repro(ReproCmd),
    /// Generate data sets (deterministic, seeded).
    #[command(subcommand)]
    Gen(GenCmd),
    /// Build a demo array, store a text corpus, search it in the devices and on the host, compare.
    Demo {
        /// Size of the generated corpus.
        #[arg(long, default_value = "256MiB")]
        size: String,
        #[arg(long, default_value_t = 4)]
        devices: u32,
        #[arg(long, default_value = "smartssd")]
        profile: String,
    },
}

#[derive(Subcommand, Debug)]
enum ModelCmd {
    /// The list-intersection model (DaMoN '16 §4): load, copy, intersect, send results, host vs device.
    Intersect {
        /// Size of the first list in bytes (decimal suffixes as in the paper: 50MB).
        #[arg(long)]
        size1: String,
        #[arg(long)]
        size2: String,
        /// Entry size s in bytes (a 4-byte ID plus the payload).
        #[arg(long, default_value_t = 256)]
        entry_size: u32,
        /// Intersection ratio r: the fraction of the shorter list in the result.
        #[arg(long, default_value_t = 0.01)]
        ratio: f64,
        /// Bytes per result entry sent to the host (4: IDs only).
        #[arg(long, default_value_t = 4)]
        result_entry_size: u32,
        #[arg(long, default_value = "smartssd-2016")]
        profile: String,
    },
}

#[derive(Subcommand, Debug)]
enum ReproCmd {
    /// DaMoN '16 §5: sweeps of entry size, size ratio and intersection ratio on smartssd-2016.
    Intersect {
        /// Shrink every list by this factor (1 = the paper's 100 MB).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// PSACS §V: shuffle of TPC-H tables in one SmartSSD vs the host baselines with 1..32 threads.
    Psacs {
        /// Directory with lineitem, partsupp, orders and customer as Parquet (from tpchgen-cli).
        #[arg(long)]
        tpch: PathBuf,
        #[arg(long, default_value_t = 1024)]
        partitions: u32,
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
        threads: Vec<usize>,
        #[arg(long, default_value = "smartssd")]
        profile: String,
        #[arg(long)]
        work: Option<PathBuf>,
    },
    /// NASCENT Fig. 13: sort on 1 to 12 SmartSSDs vs the host CPU vs one accelerator beside the host.
    Nascent {
        /// Device counts to run (default 1 to 12).
        #[arg(long, value_delimiter = ',')]
        devices: Option<Vec<u32>>,
        #[arg(long, default_value = "smartssd")]
        profile: String,
        #[arg(long, default_value = "fast")]
        algo: String,
        /// Working directory for the temporary arrays (default: a folder beside --data).
        #[arg(long)]
        work: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum GenCmd {
    /// English-like text with the phrase "in-storage computing" planted about once per 1000 words.
    Text {
        #[arg(long, default_value = "1GiB")]
        size: String,
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Two sorted ID lists (uniform over [0, 2^32)) with a planted common fraction, as u32 files.
    Lists {
        #[arg(long)]
        size1: u64,
        #[arg(long)]
        size2: u64,
        /// Fraction of the shorter list planted in the longer.
        #[arg(long, default_value_t = 0.01)]
        ratio: f64,
        #[arg(long)]
        out1: PathBuf,
        #[arg(long)]
        out2: PathBuf,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// TPC-C ORDER-LINE (10 districts x 3,000 orders x 5-15 lines per warehouse) as Parquet.
    TpccOrderline {
        #[arg(long, default_value_t = 1)]
        warehouses: u32,
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// NASCENT Fig. 12/13's synthetic table: ROWS x COLUMNS 4-byte values, key column c0.
    Synthetic {
        #[arg(long, default_value_t = 1024)]
        rows: u64,
        #[arg(long, default_value_t = 1024)]
        columns: u32,
        /// Distinct values of the key column (at most 65,536 for 16-bit dictionary codes).
        #[arg(long, default_value_t = 65_536)]
        distinct: u64,
        #[arg(short, long)]
        output: PathBuf,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum SortPlacementArg {
    Device,
    Host,
    HostAccel,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum IntersectPlacementArg {
    Device,
    Host,
    Auto,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ShufflePlacementArg {
    Device,
    HostSort,
    HostBucket,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum PlacementArg {
    Device,
    Host,
}

/// Dies quietly on a closed pipe (`insitu ls | head`), as Unix tools do, instead of panicking in `println!`.
#[allow(unsafe_code)]
fn default_sigpipe() {
    // SAFETY: resetting one signal's disposition to its default at start-up, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    default_sigpipe();
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

fn open(data: &Path) -> Result<Array> {
    let array = Array::open(data, FaultPlan::from_env())?;
    let r = array.open_report();
    if !r.removed_orphans.is_empty() {
        eprintln!(
            "recovered: removed {} part(s) of interrupted writes: {}",
            r.removed_orphans.len(),
            r.removed_orphans.join(", ")
        );
    }
    Ok(array)
}

fn run(cli: Cli) -> Result<ExitCode> {
    let out = output::Output { json: cli.json };
    match cli.cmd {
        Cmd::Init { devices, profile, capacity, stripe_unit } => {
            let profile = Profile::load(&profile)?;
            let capacity = capacity.as_deref().map(parse_size).transpose()?;
            let unit = stripe_unit.as_deref().map(parse_size).transpose()?;
            let array = Array::init(&cli.data, devices, profile, capacity, unit)?;
            let c = array.config().clone();
            array.close()?;
            out.plain(
                "init",
                serde_json::json!({
                    "data": cli.data, "devices": c.devices, "profile": c.profile.name,
                    "capacity_bytes": c.capacity_bytes, "stripe_unit": c.stripe_unit,
                }),
                &format!(
                    "created an array of {} {} device(s) of {} each at {}",
                    c.devices,
                    c.profile.name,
                    insitu_host::units::human_bytes(c.capacity_bytes),
                    cli.data.display()
                ),
            );
        }
        Cmd::Put { file, name, device } => {
            let name = match name {
                Some(n) => n,
                None => file.file_name().and_then(|n| n.to_str()).map(str::to_string).with_context(|| {
                    format!("cannot derive an object name from {}; give --name", file.display())
                })?,
            };
            let mut array = open(&cli.data)?;
            let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            let bar = output::progress(size, "put");
            let placement = device.map_or(Placement::Striped, Placement::Device);
            let report = blob::put(&mut array, &file, &name, placement, &|d, _| bar.set_position(d))?;
            bar.finish_and_clear();
            array.close()?;
            out.report(&report);
        }
        Cmd::Get { name, output: path } => {
            let array = open(&cli.data)?;
            let size = array.entry(&name)?.size;
            let bar = output::progress(size, "get");
            let report = match &path {
                Some(p) if p.as_os_str() != "-" => {
                    let f = File::create(p).with_context(|| format!("cannot create {}", p.display()))?;
                    let mut w = BufWriter::with_capacity(1 << 20, f);
                    let r = blob::get(&array, &name, &mut w, &|d, _| bar.set_position(d))?;
                    w.flush()?;
                    r
                }
                _ => {
                    let stdout = std::io::stdout();
                    let mut lock = stdout.lock();
                    blob::get(&array, &name, &mut lock, &|d, _| bar.set_position(d))?
                }
            };
            bar.finish_and_clear();
            array.close()?;
            if path.as_ref().is_some_and(|p| p.as_os_str() != "-") {
                out.report(&report);
            } else {
                out.report_to_stderr(&report);
            }
        }
        Cmd::Ls => {
            let array = open(&cli.data)?;
            let report = blob::ls(&array)?;
            array.close()?;
            out.listing(&report);
        }
        Cmd::Rm { name } => {
            let mut array = open(&cli.data)?;
            let report = blob::rm(&mut array, &name)?;
            array.close()?;
            out.report(&report);
        }
        Cmd::Search { name, pattern, placement, offsets } => {
            let array = open(&cli.data)?;
            let p = match placement {
                PlacementArg::Device => SearchPlacement::Device,
                PlacementArg::Host => SearchPlacement::Host,
            };
            let report = search::search(&array, &name, pattern.as_bytes(), p, offsets)?;
            array.close()?;
            out.report(&report);
        }
        Cmd::PutTable { file, name, key, partition, dict } => {
            let name = match name {
                Some(n) => n,
                None => file.file_stem().and_then(|n| n.to_str()).map(str::to_string).with_context(|| {
                    format!("cannot derive a table name from {}; give --name", file.display())
                })?,
            };
            let mut array = open(&cli.data)?;
            let opts = insitu_host::table::import::PutTable {
                name,
                key,
                partition: insitu_host::table::import::Partitioning::parse(&partition)?,
                dict,
            };
            let report = insitu_host::table::import::put_table(&mut array, &file, &opts)?;
            array.close()?;
            out.report(&report);
        }
        Cmd::GetTable { name, output: path } => {
            let array = open(&cli.data)?;
            let report = insitu_host::table::export::get_table(&array, &name, &path)?;
            array.close()?;
            out.report(&report);
        }
        Cmd::Sort { name, key, placement, algo, out: out_name, merge, output: path, memory_budget } => {
            let mut array = open(&cli.data)?;
            let opts = insitu_host::table::sort::SortOptions {
                key,
                placement: match placement {
                    SortPlacementArg::Device => insitu_host::table::sort::SortPlacement::Device,
                    SortPlacementArg::Host => insitu_host::table::sort::SortPlacement::Host,
                    SortPlacementArg::HostAccel => insitu_host::table::sort::SortPlacement::HostAccel,
                },
                algo,
                out: out_name,
                merge: if merge { path } else { None },
                memory_budget: memory_budget.as_deref().map(parse_size).transpose()?,
            };
            let report = insitu_host::table::sort::sort_table(&mut array, &name, &opts)?;
            array.close()?;
            out.report(&report);
        }
        Cmd::Shuffle {
            name,
            key,
            partitions,
            placement,
            threads,
            hash,
            layout,
            out: out_name,
            memory_budget,
        } => {
            use insitu_host::psacs::{shuffle_table, ShuffleOptions, ShufflePlacement};
            let mut array = open(&cli.data)?;
            let opts = ShuffleOptions {
                keys: key,
                partitions,
                placement: match placement {
                    ShufflePlacementArg::Device => ShufflePlacement::Device,
                    ShufflePlacementArg::HostSort => ShufflePlacement::HostSort,
                    ShufflePlacementArg::HostBucket => ShufflePlacement::HostBucket,
                },
                threads,
                hash: insitu_kernels::partition::PartitionHash::parse(&hash)
                    .with_context(|| format!("--hash {hash:?}: use zigzag-fold or xxh3"))?,
                layout: match layout.as_str() {
                    "column" => insitu_device::programs::psacs::Layout::Column,
                    "row" => insitu_device::programs::psacs::Layout::Row,
                    other => bail!("--layout {other:?}: use column or row"),
                },
                out: out_name,
                memory_budget: memory_budget.as_deref().map(parse_size).transpose()?,
            };
            let report = shuffle_table(&mut array, &name, &opts)?;
            array.close()?;
            out.report(&report);
        }
        Cmd::ShuffleRead { name, partition, output: path } => {
            let array = open(&cli.data)?;
            let report = insitu_host::psacs::shuffle_read(&array, &name, partition, &path)?;
            array.close()?;
            out.report(&report);
        }
        Cmd::PutList { file, name, entry_size, device } => {
            let name = match name {
                Some(n) => n,
                None => file.file_stem().and_then(|n| n.to_str()).map(str::to_string).with_context(|| {
                    format!("cannot derive a list name from {}; give --name", file.display())
                })?,
            };
            let mut array = open(&cli.data)?;
            let report =
                insitu_host::intersect::lists::put_list(&mut array, &file, &name, entry_size, device)?;
            array.close()?;
            out.report(&report);
        }
        Cmd::IndexText { path, name, entry_size, device, max_terms } => {
            let mut array = open(&cli.data)?;
            let report = insitu_host::intersect::lists::index_text(
                &mut array, &path, &name, entry_size, device, max_terms,
            )?;
            array.close()?;
            out.report(&report);
        }
        Cmd::Intersect { lists, placement, count_only, ids_only } => {
            use insitu_host::intersect::operator::{intersect, IntersectPlacement, Output};
            let array = open(&cli.data)?;
            let placement = match placement {
                IntersectPlacementArg::Device => IntersectPlacement::Device,
                IntersectPlacementArg::Host => IntersectPlacement::Host,
                IntersectPlacementArg::Auto => IntersectPlacement::Auto,
            };
            let output = if count_only {
                Output::Count
            } else if ids_only {
                Output::Ids
            } else {
                Output::Entries
            };
            let (report, _) = intersect(&array, &lists, placement, output)?;
            array.close()?;
            out.report(&report);
        }
        Cmd::Stats => {
            let array = open(&cli.data)?;
            let stats = output::stats(&array)?;
            array.close()?;
            out.plain("stats", stats.0, &stats.1);
        }
        Cmd::Fsck => {
            let problems = Array::fsck_dir(&cli.data)?;
            let ok = problems.is_empty();
            let text = if ok {
                format!("{}: clean", cli.data.display())
            } else {
                format!("{}: {} problem(s)\n  {}", cli.data.display(), problems.len(), problems.join("\n  "))
            };
            out.plain("fsck", serde_json::json!({ "ok": ok, "problems": problems }), &text);
            if !ok {
                return Ok(ExitCode::from(2));
            }
        }
        Cmd::Profiles => {
            let mut list = Vec::new();
            let mut text = String::new();
            for (name, _) in insitu_device::profile::BUILTIN {
                let p = Profile::load(name)?;
                text.push_str(&format!("{:<14} {}\n", p.name, p.description));
                list.push(serde_json::json!({ "name": p.name, "description": p.description }));
            }
            out.plain("profiles", serde_json::json!(list), text.trim_end());
        }
        Cmd::Gen(GenCmd::Text { size, output, seed }) => {
            let size = parse_size(&size)?;
            let crc = demo::generate_corpus(&output, size, seed)?;
            out.plain(
                "gen",
                serde_json::json!({ "output": output, "size": size, "crc32": format!("{crc:08x}") }),
                &format!("wrote {} of text to {}", insitu_host::units::human_bytes(size), output.display()),
            );
        }
        Cmd::Gen(GenCmd::Lists { size1, size2, ratio, out1, out2, seed }) => {
            let (n1, n2, common) =
                insitu_host::intersect::lists::gen_lists(size1, size2, ratio, seed, &out1, &out2)?;
            out.plain(
                "gen",
                serde_json::json!({ "size1": n1, "size2": n2, "common": common }),
                &format!(
                    "wrote lists of {n1} and {n2} IDs with {common} in common to {} and {}",
                    out1.display(),
                    out2.display()
                ),
            );
        }
        Cmd::Gen(GenCmd::TpccOrderline { warehouses, output, seed }) => {
            let rows = insitu_host::table::generate::tpcc_orderline(&output, warehouses, seed)?;
            out.plain(
                "gen",
                serde_json::json!({ "output": output, "rows": rows }),
                &format!("wrote {rows} ORDER-LINE rows ({warehouses} warehouse(s)) to {}", output.display()),
            );
        }
        Cmd::Gen(GenCmd::Synthetic { rows, columns, distinct, output, seed }) => {
            insitu_host::table::generate::synthetic(&output, rows, columns, distinct, seed)?;
            out.plain(
                "gen",
                serde_json::json!({ "output": output, "rows": rows, "columns": columns }),
                &format!("wrote a {rows} x {columns} table of 4-byte values to {}", output.display()),
            );
        }
        Cmd::Model(ModelCmd::Intersect { size1, size2, entry_size, ratio, result_entry_size, profile }) => {
            use insitu_host::intersect::model::{predict, Workload};
            let profile = Profile::load(&profile)?;
            let w = Workload::from_sizes(
                parse_size(&size1)? as f64,
                parse_size(&size2)? as f64,
                entry_size as f64,
                ratio,
                result_entry_size as f64,
            )?;
            let m = predict(&profile, &w)?;
            let mut text = format!(
                "list intersection on {}: |L1| = {:.0}, |L2| = {:.0} entries of {} B, theta = {:.1}, r = {}, {} search ({:.3e} memory accesses)\n",
                profile.name, m.l1, m.l2, entry_size, w.theta, ratio, m.method, m.memory_accesses
            );
            text.push_str(&format!("{:<14}{:>14}{:>14}\n", "stage", "host (ms)", "device (ms)"));
            let cell = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.4}"));
            for st in &m.stages {
                text.push_str(&format!(
                    "{:<14}{:>14}{:>14}\n",
                    st.name,
                    cell(st.host_ms),
                    cell(st.device_ms)
                ));
            }
            text.push_str(&format!("{:<14}{:>14.4}{:>14.4}\n", "total", m.host_ms, m.device_ms));
            text.push_str(&format!("{:<14}{:>14.4}{:>14.4}\n", "energy (J)", m.host_j, m.device_j));
            text.push_str(&format!(
                "faster: {} ({:.2}x)",
                m.faster,
                (m.host_ms / m.device_ms).max(m.device_ms / m.host_ms)
            ));
            out.plain("model intersect", serde_json::json!(m), &text);
        }
        Cmd::Repro(ReproCmd::Intersect { scale, work }) => {
            let work = work.unwrap_or_else(|| PathBuf::from("target/insitu-repro"));
            let quiet = cli.json;
            let pts = insitu_host::intersect::repro::repro_intersect(&work, scale, &|m| {
                if !quiet {
                    eprintln!("{m}");
                }
            })?;
            let text = insitu_host::intersect::repro::render(&pts, scale);
            out.plain("repro intersect", serde_json::json!(pts), text.trim_end());
        }
        Cmd::Repro(ReproCmd::Psacs { tpch, partitions, threads, profile, work }) => {
            let work = work.unwrap_or_else(|| PathBuf::from("target/insitu-repro"));
            let quiet = cli.json;
            let ws =
                insitu_host::psacs::repro::repro_psacs(&tpch, &work, partitions, &threads, &profile, &|m| {
                    if !quiet {
                        eprintln!("{m}");
                    }
                })?;
            let text = insitu_host::psacs::repro::render(&ws, partitions, &profile);
            out.plain("repro psacs", serde_json::json!(ws), text.trim_end());
        }
        Cmd::Repro(ReproCmd::Nascent { devices, profile, algo, work }) => {
            let counts = devices.unwrap_or_else(|| (1..=12).collect());
            if counts.is_empty() || counts.iter().any(|n| *n == 0 || *n > 64) {
                bail!("--devices takes counts from 1 to 64");
            }
            let work = work.unwrap_or_else(|| PathBuf::from("target/insitu-repro"));
            let quiet = cli.json;
            let rows = insitu_host::table::repro::repro_nascent(&work, &counts, &profile, &algo, &|m| {
                if !quiet {
                    eprintln!("{m}");
                }
            })?;
            let text = insitu_host::table::repro::render(&rows, &profile);
            out.plain("repro nascent", serde_json::json!(rows), text.trim_end());
        }
        Cmd::Demo { size, devices, profile } => {
            if cli.data.join("array.json").exists() && !cli.data.join(".insitu-demo").exists() {
                bail!(
                    "{} holds an array that the demo did not create; give the demo another --data",
                    cli.data.display()
                );
            }
            demo::run(&cli.data, parse_size(&size)?, devices, &profile, &out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
