//! The four ways of §IV-C (Fig. 2) to get records at rest on a drive back in key order, each end to end
//! through the block interface, each phase measured and modeled:
//!
//! - **Self-Sort (W)**: write with sort-on-write (the tree is built as records arrive), active read.
//! - **Self-Sort (C)**: write, generate on command (internal reads, no writes), active read.
//! - **MergeSort**: write; partial sort (read a chunk, sort it on the host, write it back as a run);
//!   merge (read the runs, merge, write the output); read the output.
//! - **ActiveSort**: write; partial sort with the runs written to their own LBA regions; active merge
//!   (the drive merges the runs by key as the host reads).
//!
//! Every method returns the same bytes (equal keys in record order), which the tests check.
//!
//! On the device, from the base LBA: the input records, then (MergeSort, ActiveSort) the runs, one after
//! another from page boundaries, then (MergeSort) the output.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;
use std::time::Instant;

use insitu_device::protocol::{Flush, IndexConfig, IndexKind, ReadLba, RunExtent, TrimLba, WriteLba};
use serde::Serialize;
use serde_json::json;

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::lba::{self, Blocks};
use insitu_device::work::{self, Ledger, SortClass};

use crate::input::Input;
use crate::model::HostWork;
use crate::report::{Measure, Report};
use crate::selfsort::ops::{self, Interface};
use crate::selfsort::records::RecordFormat;

/// A method of §IV-C.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Method {
    SelfSortWrite,
    SelfSortCommand,
    MergeSort,
    ActiveSort,
}

impl Method {
    pub const ALL: [Method; 4] =
        [Method::MergeSort, Method::ActiveSort, Method::SelfSortCommand, Method::SelfSortWrite];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Method::SelfSortWrite => "self-sort-write",
            Method::SelfSortCommand => "self-sort-command",
            Method::MergeSort => "merge-sort",
            Method::ActiveSort => "active-sort",
        }
    }

    /// The paper's name.
    pub fn label(self) -> &'static str {
        match self {
            Method::SelfSortWrite => "Self-Sort (W)",
            Method::SelfSortCommand => "Self-Sort (C)",
            Method::MergeSort => "MergeSort",
            Method::ActiveSort => "ActiveSort",
        }
    }
}

impl std::str::FromStr for Method {
    type Err = HostError;

    fn from_str(s: &str) -> Result<Method> {
        Method::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            HostError::InvalidArgument(format!(
                "unknown method {s:?} (self-sort-write, self-sort-command, merge-sort, active-sort)"
            ))
        })
    }
}

/// The index a sort uses (and replaces) unless told another: the last of the device's ids.
pub const SORT_INDEX: u32 = insitu_device::protocol::MAX_INDEXES as u32;

/// Where and how to sort.
#[derive(Debug, Clone)]
pub struct SortJob {
    pub device: u32,
    /// The index the Self-Sort methods (and ActiveSort's merge) use; it is replaced. By default
    /// [`SORT_INDEX`], the last id, so that it is not the index `config` makes by default.
    pub index: u32,
    pub format: RecordFormat,
    pub base_lba: u64,
    /// Runs of MergeSort and ActiveSort: the host sorts `records / runs` records at a time (the paper's
    /// host had 3 GB for 8 GB of records: 8 runs, one merge pass).
    pub runs: u32,
    pub via: Interface,
    /// Records per generate command (0: the firmware's default).
    pub generate_chunk: u64,
    /// Bytes per read request of the final reads (the pages of one request go to the flash together).
    pub read_request_bytes: u64,
}

impl SortJob {
    /// Device 0, index [`SORT_INDEX`] from LBA 0, 8 runs, the command block, 1 MiB reads.
    pub fn new(format: RecordFormat) -> SortJob {
        SortJob {
            device: 0,
            index: SORT_INDEX,
            format,
            base_lba: 0,
            runs: 8,
            via: Interface::CommandBlock,
            generate_chunk: 0,
            read_request_bytes: lba::PIECE_BYTES,
        }
    }
}

/// One phase as run here.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseRun {
    pub name: String,
    pub wall_s: f64,
}

/// A finished sort.
#[derive(Debug)]
pub struct SortRun {
    pub method: Method,
    pub records: u64,
    pub report: Report,
    pub phases: Vec<PhaseRun>,
}

/// Phases, each measured on the wall clock and by the array's counters.
struct Phases<'a> {
    array: &'a Array,
    measure: Measure,
    runs: Vec<PhaseRun>,
    t: Instant,
}

impl<'a> Phases<'a> {
    fn start(array: &'a Array, op: &str) -> Result<Phases<'a>> {
        Ok(Phases { array, measure: Measure::start(op, array)?, runs: Vec::new(), t: Instant::now() })
    }

    fn end(&mut self, name: &str, host: HostWork) -> Result<()> {
        self.measure.phase(name, self.array, host)?;
        self.runs.push(PhaseRun { name: name.to_string(), wall_s: self.t.elapsed().as_secs_f64() });
        self.t = Instant::now();
        Ok(())
    }
}

/// Sorts the records of `input` with `method` and writes them, in key order, to `out`.
pub fn sort(
    array: &Array,
    job: &SortJob,
    method: Method,
    input: Input<'_>,
    out: &mut dyn Write,
    progress: &dyn Fn(&str),
) -> Result<SortRun> {
    let fmt = job.format;
    let most = insitu_device::protocol::MAX_INDEXES as u32;
    if job.index == 0 || job.index > most {
        return Err(HostError::InvalidArgument(format!("index {}: ids are 1 to {most}", job.index)));
    }
    if !(1..=256).contains(&job.runs) {
        return Err(HostError::InvalidArgument(format!("{} runs: 1 to 256", job.runs)));
    }
    let r = fmt.size as u64;
    let n = input.records(r, "")?;
    let size = n * r;
    let blocks = Blocks::of(array, job.device)?;
    let ps = blocks.size as u64;
    let input_pages = blocks.blocks_for(size);
    let runs = job.runs as u64;
    let per_run = n.div_ceil(runs);
    let run_pages = blocks.blocks_for(per_run * r);
    let run_lba = |i: u64| job.base_lba + input_pages + i * run_pages;
    let output_lba = run_lba(runs);
    let needed = match method {
        Method::SelfSortWrite | Method::SelfSortCommand => input_pages,
        Method::ActiveSort => input_pages + runs * run_pages,
        Method::MergeSort => 2 * input_pages + runs * run_pages,
    };
    // The command LBA is the last host LBA.
    if job.base_lba + needed >= blocks.count {
        return Err(HostError::InvalidArgument(format!(
            "{} needs LBAs {}..{} of device {} ({} of {ps}-byte blocks), past its {} data blocks",
            method.label(),
            job.base_lba,
            job.base_lba + needed,
            job.device,
            crate::units::human_bytes(needed * ps),
            blocks.count - 1
        )));
    }
    // Another index's records in the range the job trims are refused by name before anything changes.
    let status = ops::status(array, job.device)?;
    for other in status.indexes.iter().filter(|i| i.config.id != job.index) {
        let c = &other.config;
        let (lo, hi) = (c.base_lba, c.base_lba + c.range_pages(blocks.size).max(1));
        if lo < job.base_lba + needed && job.base_lba < hi {
            return Err(HostError::InvalidArgument(format!(
                "{} needs LBAs {}..{} of device {}, where index {} keeps its records (LBAs {lo}..{hi}): sort \
                 from --base-lba {hi} or past it, or drop index {} first",
                method.label(),
                job.base_lba,
                job.base_lba + needed,
                job.device,
                c.id,
                c.id
            )));
        }
    }
    // The job's index is replaced (a baseline must not have its writes indexed).
    if status.indexes.iter().any(|i| i.config.id == job.index) {
        ops::drop_index(array, job.device, job.index, job.via)?;
    }
    // What an earlier job left in the range is garbage this one overwrites: trimmed first, or configuring
    // sort-on-write would index it (an index indexes every record stored in its range) and every write
    // would then replace an indexed record, reading its old key (2.5x the work of a first run). The flush
    // erases the blocks the trim emptied, for this job's writes to take; both before the clock starts.
    let dev = array.device(job.device)?;
    dev.call(TrimLba { lba: job.base_lba, blocks: needed }).map_err(HostError::device(job.device))?;
    dev.call(Flush).map_err(HostError::device(job.device))?;
    let tree = |on_write: bool| IndexConfig {
        records: n,
        sort_on_write: on_write,
        ..IndexConfig::tree(job.index, job.base_lba, fmt.size, fmt.key_offset, fmt.key_size)
    };
    let quiet = crate::blob::no_progress;
    let mut ph = Phases::start(array, method.name())?;
    let write_input = |ph: &Phases<'_>| -> Result<()> {
        let mut f = input.reader()?;
        lba::write_stream(ph.array, job.device, job.base_lba, &mut f, size, ops::RECORD_WRITE_BYTES, &quiet)
    };
    match method {
        Method::SelfSortWrite => {
            ops::configure(array, job.device, tree(true), job.via)?;
            progress("write (the tree is built as records arrive)");
            write_input(&ph)?;
            ph.end("write + generate tree", HostWork::default())?;
            progress("active read");
            lba::read_stream_in(array, job.device, job.base_lba, size, out, &quiet, job.read_request_bytes)?;
            ph.end("active read", HostWork::default())?;
        }
        Method::SelfSortCommand => {
            ops::configure(array, job.device, tree(false), job.via)?;
            progress("write");
            write_input(&ph)?;
            ph.end("write", HostWork::default())?;
            progress("generate tree");
            ops::generate(array, job.device, job.index, job.generate_chunk, job.via, &quiet)?;
            ph.end("generate tree", HostWork::default())?;
            progress("active read");
            lba::read_stream_in(array, job.device, job.base_lba, size, out, &quiet, job.read_request_bytes)?;
            ph.end("active read", HostWork::default())?;
        }
        Method::MergeSort | Method::ActiveSort => {
            progress("write");
            write_input(&ph)?;
            ph.end("write", HostWork::default())?;
            progress("partial sort");
            let extents = partial_sort(array, job, n, per_run, &run_lba, &mut ph)?;
            if method == Method::MergeSort {
                progress("merge (W)");
                merge_runs(array, job, &extents, output_lba)?;
                // A k-way merge of the runs, every record copied once into the output.
                let mut work = Ledger::new();
                work::count_merge(&mut work, extents.len() as u64, n);
                work::add(&mut work, work::GATHER_BYTES, size);
                ph.end("merge (W)", HostWork::counted(work))?;
                progress("read");
                lba::read_stream_in(
                    array,
                    job.device,
                    output_lba,
                    size,
                    out,
                    &quiet,
                    job.read_request_bytes,
                )?;
                ph.end("read", HostWork::default())?;
            } else {
                let mut c = tree(false);
                c.kind = IndexKind::Runs(extents);
                ops::configure(array, job.device, c, job.via)?;
                progress("active merge");
                lba::read_stream_in(
                    array,
                    job.device,
                    job.base_lba,
                    size,
                    out,
                    &quiet,
                    job.read_request_bytes,
                )?;
                ph.end("active merge", HostWork::default())?;
            }
        }
    }
    out.flush().map_err(|e| HostError::io("output", e))?;
    let headline = format!(
        "{}: {n} records of {r} bytes ({}) back in key order on device {}",
        method.label(),
        crate::units::human_bytes(size),
        job.device
    );
    let phases = ph.runs;
    let result = json!({ "method": method.name(), "count": n, "bytes": size, "phases": phases });
    let report = ph.measure.finish(array, headline, result)?;
    Ok(SortRun { method, records: n, report, phases })
}

/// Phases of the partial sort (one pair per chunk).
pub const PARTIAL_READ: &str = "partial sort (read chunk)";
pub const PARTIAL_WRITE: &str = "partial sort (sort, write run)";

/// Reads `len` bytes from block `lba` (whole blocks, trimmed).
fn read_bytes(array: &Array, device: u32, from_byte: u64, len: u64, ps: u64) -> Result<Vec<u8>> {
    let first = from_byte / ps;
    let blocks = (from_byte + len).div_ceil(ps) - first;
    let data =
        array.device(device)?.call(ReadLba { lba: first, blocks }).map_err(HostError::device(device))?;
    let off = (from_byte - first * ps) as usize;
    Ok(data[off..off + len as usize].to_vec())
}

/// Partial sort (§IV-C 1): each chunk of `per_run` records is read, sorted on the host (stable), and
/// written back as a run from its own page boundary. Returns the runs.
fn partial_sort(
    array: &Array,
    job: &SortJob,
    n: u64,
    per_run: u64,
    run_lba: &dyn Fn(u64) -> u64,
    ph: &mut Phases<'_>,
) -> Result<Vec<RunExtent>> {
    let fmt = job.format;
    let r = fmt.size as u64;
    let ps = Blocks::of(array, job.device)?.size as u64;
    let mut extents = Vec::new();
    let mut i = 0u64;
    while i * per_run < n {
        let (from, to) = (i * per_run, ((i + 1) * per_run).min(n));
        let chunk = read_bytes(array, job.device, job.base_lba * ps + from * r, (to - from) * r, ps)?;
        ph.end(PARTIAL_READ, HostWork::default())?;
        let mut run = crate::selfsort::records::sort_records(&fmt, &chunk);
        run.resize(run.len().div_ceil(ps as usize) * ps as usize, 0);
        let lba = run_lba(i);
        for (j, piece) in run.chunks(lba::PIECE_BYTES as usize).enumerate() {
            let at = lba + (j as u64 * lba::PIECE_BYTES) / ps;
            array
                .device(job.device)?
                .call(WriteLba { lba: at, data: piece.to_vec() })
                .map_err(HostError::device(job.device))?;
        }
        extents.push(RunExtent { lba, records: to - from });
        // A sort of the chunk's keys, then every record gathered into key order.
        let mut work = Ledger::new();
        SortClass::count(&mut work, work::SORT, fmt.key_size * 8, to - from);
        work::add(&mut work, work::GATHER_ROWS, to - from);
        work::add(&mut work, work::GATHER_BYTES, (to - from) * r);
        ph.end(PARTIAL_WRITE, HostWork::counted(work))?;
        i += 1;
    }
    Ok(extents)
}

/// A run being merged: its next records, read a piece at a time.
struct RunReader {
    extent: RunExtent,
    next: u64,
    buf: Vec<u8>,
    at: usize,
}

/// Merge (W) (§IV-C 1): the runs merged by key (equal keys in run order) and written as the output.
fn merge_runs(array: &Array, job: &SortJob, runs: &[RunExtent], output_lba: u64) -> Result<()> {
    let fmt = job.format;
    let r = fmt.size as u64;
    let ps = Blocks::of(array, job.device)?.size as u64;
    let per_piece = (lba::PIECE_BYTES / r).max(1);
    let k = fmt.key_field();
    let refill = |rr: &mut RunReader| -> Result<()> {
        let m = per_piece.min(rr.extent.records - rr.next);
        rr.buf = read_bytes(array, job.device, rr.extent.lba * ps + rr.next * r, m * r, ps)?;
        rr.next += m;
        rr.at = 0;
        Ok(())
    };
    let mut readers: Vec<RunReader> = Vec::new();
    let mut heap = BinaryHeap::new();
    for (i, e) in runs.iter().enumerate() {
        let mut rr = RunReader { extent: *e, next: 0, buf: Vec::new(), at: 0 };
        if e.records > 0 {
            refill(&mut rr)?;
            heap.push(Reverse((rr.buf[k.clone()].to_vec(), i)));
        }
        readers.push(rr);
    }
    let mut out: Vec<u8> = Vec::with_capacity(lba::PIECE_BYTES as usize + r as usize);
    let mut lba_at = output_lba;
    let flush = |out: &mut Vec<u8>, lba_at: &mut u64, last: bool| -> Result<()> {
        let whole = if last {
            out.len().div_ceil(ps as usize) * ps as usize
        } else {
            out.len() / ps as usize * ps as usize
        };
        if whole == 0 {
            return Ok(());
        }
        let rest = if whole > out.len() { Vec::new() } else { out[whole..].to_vec() };
        out.resize(whole, 0);
        let data = std::mem::replace(out, rest);
        let blocks = data.len() as u64 / ps;
        array
            .device(job.device)?
            .call(WriteLba { lba: *lba_at, data })
            .map_err(HostError::device(job.device))?;
        *lba_at += blocks;
        Ok(())
    };
    while let Some(Reverse((_, i))) = heap.pop() {
        let rr = &mut readers[i];
        out.extend_from_slice(&rr.buf[rr.at..rr.at + r as usize]);
        rr.at += r as usize;
        let more = rr.at < rr.buf.len() || rr.next < rr.extent.records;
        if more {
            if rr.at >= rr.buf.len() {
                refill(rr)?;
            }
            heap.push(Reverse((rr.buf[rr.at + k.start..rr.at + k.end].to_vec(), i)));
        }
        if out.len() as u64 >= lba::PIECE_BYTES {
            flush(&mut out, &mut lba_at, false)?;
        }
    }
    flush(&mut out, &mut lba_at, true)?;
    Ok(())
}
