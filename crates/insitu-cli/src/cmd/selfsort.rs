//! `selfsort`: the Self-Sorting SSD. Configure an index on a device, write records through the block
//! interface, generate on command, read them back in key order, query, flush, see its state; or sort a
//! file of records end to end with one of the paper's four methods.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use insitu_host::selfsort::{self, ops, Interface, Method, Query, RecordFormat, SortJob};
use insitu_host::{Array, Report};

use crate::cmd::Ctx;
use crate::output;

/// Which device and index a command is about.
#[derive(Args, Debug, Clone, Copy)]
pub struct Target {
    /// The device.
    #[arg(long, default_value_t = 0)]
    device: u32,
    /// The index (1-based, as in the paper's command block).
    #[arg(long, default_value_t = 1)]
    index: u32,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Via {
    /// The paper's way: a command block written to the command LBA, the status read back (§III-E).
    Block,
    /// The typed vendor commands of the device protocol.
    Vendor,
}

impl From<Via> for Interface {
    fn from(v: Via) -> Interface {
        match v {
            Via::Block => Interface::CommandBlock,
            Via::Vendor => Interface::Vendor,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum MethodArg {
    SelfSortWrite,
    SelfSortCommand,
    MergeSort,
    ActiveSort,
}

impl From<MethodArg> for Method {
    fn from(m: MethodArg) -> Method {
        match m {
            MethodArg::SelfSortWrite => Method::SelfSortWrite,
            MethodArg::SelfSortCommand => Method::SelfSortCommand,
            MethodArg::MergeSort => Method::MergeSort,
            MethodArg::ActiveSort => Method::ActiveSort,
        }
    }
}

/// A key on the command line: hex, or text with `--text`.
#[derive(Args, Debug, Clone, Copy)]
pub struct KeyText {
    /// Keys are text, not hex.
    #[arg(long)]
    text: bool,
}

#[derive(Subcommand, Debug)]
pub enum SelfSortCmd {
    /// Configure (or replace) an index over fixed-size records packed from an LBA.
    Config {
        #[command(flatten)]
        target: Target,
        /// Bytes per record.
        #[arg(long)]
        record_size: u32,
        /// Key length in bytes.
        #[arg(long)]
        key_size: u32,
        /// Where the key starts in a record (bytes).
        #[arg(long, default_value_t = 0)]
        key_offset: u32,
        /// Insert every record as it is written (otherwise: `generate` on command).
        #[arg(long)]
        sort_on_write: bool,
        /// First LBA of the records.
        #[arg(long, default_value_t = 0)]
        base_lba: u64,
        /// Records in the range (default: set by `selfsort write`).
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        records: u64,
        /// Reads of the range return the records as stored, not in key order (a secondary index).
        #[arg(long)]
        no_active_read: bool,
        /// B+tree fanout (the paper: 128).
        #[arg(long, default_value_t = 128)]
        fanout: u32,
        /// How the command reaches the firmware: the command block at the last LBA, or vendor commands.
        #[arg(long, value_enum, default_value = "block")]
        via: Via,
    },
    /// Write a file of records into the index's range through the block interface.
    Write {
        /// The records to write.
        file: PathBuf,
        #[command(flatten)]
        target: Target,
        /// Record of the range the file's first record goes to.
        #[arg(long, default_value_t = 0)]
        at_record: u64,
        /// How the command reaches the firmware: the command block at the last LBA, or vendor commands.
        #[arg(long, value_enum, default_value = "block")]
        via: Via,
    },
    /// Sort-on-command: have the device index the stored records, a chunk per command.
    Generate {
        #[command(flatten)]
        target: Target,
        /// Records per generate command (default: the firmware's).
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        chunk: u64,
        /// How the command reaches the firmware: the command block at the last LBA, or vendor commands.
        #[arg(long, value_enum, default_value = "block")]
        via: Via,
    },
    /// Read the whole range in key order (active reads) to a file.
    Read {
        #[command(flatten)]
        target: Target,
        /// Where to write the records in key order.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// The records with the smallest key.
    Min {
        #[command(flatten)]
        target: Target,
        /// Write the records here (default: only count and report them).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// The records with the largest key.
    Max {
        #[command(flatten)]
        target: Target,
        /// Write the records here (default: only count and report them).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// The records whose key lies between LO and HI, both inclusive (a shorter bound is a prefix).
    Range {
        #[command(flatten)]
        target: Target,
        /// The lowest key (hex, or text with --text).
        #[arg(long)]
        lo: String,
        /// The highest key (hex, or text with --text).
        #[arg(long)]
        hi: String,
        #[command(flatten)]
        key: KeyText,
        /// Only count them (not with -o, which writes them).
        #[arg(long, conflicts_with = "output")]
        count: bool,
        /// Write the records here (default: only count and report them).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// The records with key KEY (or starting with it).
    Select {
        #[command(flatten)]
        target: Target,
        /// The key (hex, or text with --text).
        #[arg(long)]
        key: String,
        #[command(flatten)]
        text: KeyText,
        /// Only count them (not with -o, which writes them).
        #[arg(long, conflicts_with = "output")]
        count: bool,
        /// Write the records here (default: only count and report them).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Save the device's indexes to its flash now (also done when the array closes).
    Flush {
        /// The device.
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// How the command reaches the firmware: the command block at the last LBA, or vendor commands.
        #[arg(long, value_enum, default_value = "block")]
        via: Via,
    },
    /// Forget an index (its records stay).
    Drop {
        #[command(flatten)]
        target: Target,
        /// How the command reaches the firmware: the command block at the last LBA, or vendor commands.
        #[arg(long, value_enum, default_value = "block")]
        via: Via,
    },
    /// The firmware's state: command LBA, memory, every index.
    Stats {
        /// The device.
        #[arg(long, default_value_t = 0)]
        device: u32,
    },
    /// Sort a file of records end to end on a device with one of the paper's four methods.
    ///
    /// The sort replaces index --index of the device and writes its records (and runs) from --base-lba on;
    /// it refuses to start where another index keeps its records.
    Sort {
        /// The records to sort.
        file: PathBuf,
        /// Where to write them in key order.
        #[arg(short, long)]
        output: PathBuf,
        /// The device.
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// The index the sort uses and replaces (by default the last id, not the one `config` makes by
        /// default).
        #[arg(long, default_value_t = selfsort::SORT_INDEX)]
        index: u32,
        /// The paper's method (§4): sort on write, sort on command, host merge sort, or active sort.
        #[arg(long, value_enum, default_value = "self-sort-write")]
        method: MethodArg,
        /// Record format: gensort (100 bytes, 10-byte keys), paper (16 KB, 10-byte keys), or fixed.
        #[arg(long, default_value = "gensort")]
        format: String,
        /// fixed: bytes per record.
        #[arg(long, default_value_t = 0)]
        record_size: u32,
        /// fixed: key length in bytes.
        #[arg(long, default_value_t = 0)]
        key_size: u32,
        /// fixed: where the key starts in a record (bytes).
        #[arg(long, default_value_t = 0)]
        key_offset: u32,
        /// First LBA of the records on the device.
        #[arg(long, default_value_t = 0)]
        base_lba: u64,
        /// Runs of merge-sort and active-sort (the host sorts records/runs at a time): 1 to 256.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
        runs: u32,
    },
}

/// Opens the array, runs `f`, and closes the array whether `f` succeeded or not (so the indexes are
/// saved, not rebuilt at the next open; see [`crate::cmd::close`]).
fn on_array(ctx: &Ctx, f: impl FnOnce(&Array) -> insitu_host::Result<Report>) -> Result<Report> {
    let array = ctx.open()?;
    let r = f(&array);
    crate::cmd::close(array);
    Ok(r?)
}

/// Where records go: a file, written whole or not at all, or standard output (`-`).
enum Sink {
    File(insitu_host::outfile::OutFile),
    Stdout(std::io::Stdout),
}

impl Sink {
    /// Says `out` whether the records go to standard output, before any work that can fail.
    fn create(path: &std::path::Path, out: &crate::output::Output) -> Result<Sink> {
        out.data_to_stdout(path.as_os_str() == "-");
        Ok(match path.as_os_str() == "-" {
            true => Sink::Stdout(std::io::stdout()),
            false => Sink::File(insitu_host::outfile::OutFile::create(path)?),
        })
    }

    /// The file in place, or standard output flushed; whether the records went to standard output.
    fn commit(self) -> Result<bool> {
        match self {
            Sink::File(f) => f.commit().map(|_| false).map_err(Into::into),
            Sink::Stdout(mut s) => s.flush().map(|_| true).map_err(Into::into),
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Stdout(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Stdout(s) => s.flush(),
        }
    }
}

/// Runs a query, writing the records to `output` if given (no partial file on failure); whether they
/// went to standard output.
fn query(
    ctx: &Ctx,
    t: Target,
    q: Query,
    count_only: bool,
    output: Option<PathBuf>,
) -> Result<(Report, bool)> {
    match output.filter(|_| !count_only) {
        Some(p) => {
            let mut w = Sink::create(&p, &ctx.out)?;
            let r = on_array(ctx, |array| ops::query(array, t.device, t.index, &q, false, Some(&mut w)))?;
            Ok((r, w.commit()?))
        }
        None => {
            Ok((on_array(ctx, |array| ops::query(array, t.device, t.index, &q, count_only, None))?, false))
        }
    }
}

impl SelfSortCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        // Records written to standard output own it: the report goes to standard error then, and so does
        // an error with --json, from the first check on (said here, before any of them).
        let to_stdout = |o: Option<&PathBuf>| o.is_some_and(|p| p.as_os_str() == "-");
        ctx.out.data_to_stdout(match &self {
            SelfSortCmd::Read { output, .. } | SelfSortCmd::Sort { output, .. } => to_stdout(Some(output)),
            SelfSortCmd::Min { output, .. } | SelfSortCmd::Max { output, .. } => to_stdout(output.as_ref()),
            SelfSortCmd::Range { output, .. } | SelfSortCmd::Select { output, .. } => {
                to_stdout(output.as_ref())
            }
            _ => false,
        });
        let mut on_stdout = false;
        let report = match self {
            SelfSortCmd::Config {
                target,
                record_size,
                key_size,
                key_offset,
                sort_on_write,
                base_lba,
                records,
                no_active_read,
                fanout,
                via,
            } => {
                let config = ops::tree_config(
                    target.index,
                    base_lba,
                    records,
                    record_size,
                    key_offset,
                    key_size,
                    sort_on_write,
                    !no_active_read,
                    fanout,
                );
                on_array(ctx, |a| ops::configure(a, target.device, config, via.into()))?
            }
            SelfSortCmd::Write { file, target, at_record, via } => {
                let size = std::fs::metadata(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?
                    .len();
                let bar = output::progress(size, "selfsort write");
                let r = on_array(ctx, |a| {
                    ops::write_records(
                        a,
                        target.device,
                        target.index,
                        insitu_host::input::Input::File(&file),
                        at_record,
                        via.into(),
                        &|d, _| {
                            bar.set_position(d);
                            Ok(())
                        },
                    )
                });
                bar.finish_and_clear();
                r?
            }
            SelfSortCmd::Generate { target, chunk, via } => {
                let bar = output::count_progress("generate");
                let r = on_array(ctx, |a| {
                    ops::generate(a, target.device, target.index, chunk, via.into(), &|d, t| {
                        bar.set_length(t);
                        bar.set_position(d);
                        Ok(())
                    })
                });
                bar.finish_and_clear();
                r?
            }
            SelfSortCmd::Read { target, output: out } => {
                let mut w = Sink::create(&out, &ctx.out)?;
                let bar = output::dynamic("selfsort read");
                let r = on_array(ctx, |a| {
                    ops::read_sorted(a, target.device, target.index, &mut w, &|d, t| {
                        bar.set_length(t);
                        bar.set_position(d);
                        Ok(())
                    })
                });
                bar.finish_and_clear();
                let r = r?;
                on_stdout = w.commit()?;
                r
            }
            SelfSortCmd::Min { target, output } => {
                let (r, out) = query(ctx, target, Query::Min, false, output)?;
                on_stdout = out;
                r
            }
            SelfSortCmd::Max { target, output } => {
                let (r, out) = query(ctx, target, Query::Max, false, output)?;
                on_stdout = out;
                r
            }
            SelfSortCmd::Range { target, lo, hi, key, count, output } => {
                let q =
                    Query::Range { lo: ops::parse_key(&lo, key.text)?, hi: ops::parse_key(&hi, key.text)? };
                let (r, out) = query(ctx, target, q, count, output)?;
                on_stdout = out;
                r
            }
            SelfSortCmd::Select { target, key, text, count, output } => {
                let q = Query::Select { key: ops::parse_key(&key, text.text)? };
                let (r, out) = query(ctx, target, q, count, output)?;
                on_stdout = out;
                r
            }
            SelfSortCmd::Flush { device, via } => on_array(ctx, |a| ops::flush(a, device, via.into()))?,
            SelfSortCmd::Drop { target, via } => {
                on_array(ctx, |a| ops::drop_index(a, target.device, target.index, via.into()))?
            }
            SelfSortCmd::Stats { device } => {
                let r = on_array(ctx, |a| ops::stats(a, device))?;
                ctx.out.listing(&r);
                return Ok(ExitCode::SUCCESS);
            }
            SelfSortCmd::Sort {
                file,
                output: out,
                device,
                index,
                method,
                format,
                record_size,
                key_size,
                key_offset,
                base_lba,
                runs,
            } => {
                let fmt = RecordFormat::named(&format, record_size, key_offset, key_size)?;
                let mut job = SortJob::new(fmt);
                (job.device, job.index, job.base_lba, job.runs) = (device, index, base_lba, runs);
                let mut w = Sink::create(&out, &ctx.out)?;
                let progress = ctx.progress();
                let r = on_array(ctx, |a| {
                    selfsort::sort(
                        a,
                        &job,
                        method.into(),
                        insitu_host::input::Input::File(&file),
                        &mut w,
                        &|m| progress(m),
                    )
                    .map(|run| run.report)
                })?;
                on_stdout = w.commit()?;
                r
            }
        };
        match on_stdout {
            true => ctx.out.report_to_stderr(&report),
            false => ctx.out.report(&report),
        }
        Ok(ExitCode::SUCCESS)
    }
}
