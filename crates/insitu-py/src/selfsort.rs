//! The Self-Sorting SSD (Cavazos Quero, Lee, Kim, §III) for the Python front: what the CLI's `selfsort`
//! commands do, on an open array, with the same host operations; records in and out as bytes in memory
//! or as files (written beside the destination and renamed into place when complete).

use std::io::Write;

use insitu_host::blob::Progress;
use insitu_host::input::Input;
use insitu_host::selfsort::{self, ops, IndexConfig, Interface, Method, Query, RecordFormat, SortJob};
use insitu_host::{Array, HostError, Report, Result};

fn bad(detail: String) -> HostError {
    HostError::InvalidArgument(detail)
}

/// How a command reaches the firmware, by the CLI's name.
pub fn via(text: &str) -> Result<Interface> {
    match text {
        "block" => Ok(Interface::CommandBlock),
        "vendor" => Ok(Interface::Vendor),
        other => Err(bad(format!("via {other:?}: expected block (the command block) or vendor"))),
    }
}

/// The index `config` describes, as `insitu selfsort config` makes it.
pub struct Config {
    pub index: u32,
    pub record_size: u32,
    pub key_size: u32,
    pub key_offset: u32,
    pub sort_on_write: bool,
    pub base_lba: u64,
    pub records: u64,
    pub active_read: bool,
    pub fanout: u32,
}

pub fn configure(a: &Array, device: u32, c: Config, by: Interface) -> Result<Report> {
    let config = IndexConfig {
        records: c.records,
        sort_on_write: c.sort_on_write,
        active_read: c.active_read,
        fanout: c.fanout,
        ..IndexConfig::tree(c.index, c.base_lba, c.record_size, c.key_offset, c.key_size)
    };
    ops::configure(a, device, config, by)
}

/// A query by name: `min`, `max`, `range` (`lo`..=`hi`), `select` (`lo` is the key).
pub fn query(kind: &str, lo: Option<Vec<u8>>, hi: Option<Vec<u8>>) -> Result<Query> {
    let need = |k: Option<Vec<u8>>, what: &str| k.ok_or_else(|| bad(format!("a {kind} query needs {what}")));
    Ok(match kind {
        "min" => Query::Min,
        "max" => Query::Max,
        "range" => Query::Range { lo: need(lo, "a low key")?, hi: need(hi, "a high key")? },
        "select" => Query::Select { key: need(lo, "a key")? },
        other => return Err(bad(format!("query {other:?}: expected min, max, range or select"))),
    })
}

/// What `insitu selfsort sort` runs: the layout by name and the job's placement.
pub struct Sort {
    pub method: Method,
    pub format: RecordFormat,
    pub device: u32,
    pub index: u32,
    pub base_lba: u64,
    pub runs: u32,
}

pub fn sort(a: &Array, s: &Sort, records: Input<'_>, out: &mut dyn Write) -> Result<Report> {
    let mut job = SortJob::new(s.format);
    (job.device, job.index, job.base_lba, job.runs) = (s.device, s.index, s.base_lba, s.runs);
    selfsort::sort(a, &job, s.method, records, out, &|_| {}).map(|run| run.report)
}

/// Writes records into an index's range (see [`ops::write_records`]).
pub fn write(
    a: &Array,
    (device, index): (u32, u32),
    records: Input<'_>,
    at_record: u64,
    by: Interface,
    progress: Progress<'_>,
) -> Result<Report> {
    ops::write_records(a, device, index, records, at_record, by, progress)
}
