//! The host's side of a Self-Sorting SSD (§III-E): configure an index, write records through the block
//! interface, generate on command, read the range back in key order, query, flush, and report the
//! firmware's state. Configuration goes the paper's way by default, as a command block written to the
//! command LBA with the status read back from it; the typed vendor commands do the same.

use std::io::{Read, Write};

use insitu_device::protocol::block::{self, BlockCommand};
use insitu_device::protocol::{
    ConfigureIndex, DropIndex, FlushIndexes, GenerateIndex, IndexConfig, IndexInfo, IndexQuery, IndexStatus,
    QueryIndex, ReadLba, ResizeIndex, SelfSortStatus, SetIndexFlags, WriteLba,
};
use serde_json::json;

use crate::array::Array;
use crate::blob::Progress;
use crate::error::{HostError, Result};
use crate::input::Input;
use crate::lba;
use crate::report::{Measure, Report};
use crate::units::{self, count, human_bytes};

/// Bytes per write command of records: large, so that a sort-on-write index takes each command's
/// records as one batch (see the firmware's `insert_batch`).
pub const RECORD_WRITE_BYTES: u64 = 8 << 20;

/// How the host talks to the firmware.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Interface {
    /// The paper's way: a command block written to the command LBA, the status read back from it.
    #[default]
    CommandBlock,
    /// The typed vendor commands of the device protocol.
    Vendor,
}

/// Bytes of records a query returns per command.
const QUERY_PIECE_BYTES: u64 = 4 << 20;

/// The firmware's state on a device.
pub fn status(array: &Array, device: u32) -> Result<SelfSortStatus> {
    array.device(device)?.call(IndexStatus).map_err(HostError::device(device))
}

/// One index's state.
pub fn index_info(array: &Array, device: u32, index: u32) -> Result<IndexInfo> {
    let st = status(array, device)?;
    let known: Vec<String> = st.indexes.iter().map(|i| i.config.id.to_string()).collect();
    st.indexes.into_iter().find(|i| i.config.id == index).ok_or_else(|| {
        HostError::InvalidArgument(format!(
            "device {device} has no self-sort index {index} (configured: {}); create it with `insitu selfsort config`",
            if known.is_empty() { "none".into() } else { known.join(", ") }
        ))
    })
}

/// Sends a command block and reads the status back; fails with the firmware's message.
fn send_block(array: &Array, device: u32, cmd: &BlockCommand) -> Result<block::StatusPage> {
    let st = status(array, device)?;
    let dev = array.device(device)?;
    let page = block::encode(cmd, st.page_size).map_err(HostError::InvalidArgument)?;
    let written = dev.call(WriteLba { lba: st.command_lba, data: page });
    let back = dev.call(ReadLba { lba: st.command_lba, blocks: 1 }).map_err(HostError::device(device))?;
    let status = block::decode_status(&back)
        .map_err(|e| HostError::device(device)(insitu_device::DeviceError::Protocol(e)))?;
    written.map_err(HostError::device(device))?;
    Ok(status)
}

/// The configuration of a B+tree index as `insitu selfsort config` (and Python's `selfsort_config`) give
/// it: records from `base_lba`, the key at `key_offset`, and the options.
#[allow(clippy::too_many_arguments)]
pub fn tree_config(
    id: u32,
    base_lba: u64,
    records: u64,
    record_size: u32,
    key_offset: u32,
    key_size: u32,
    sort_on_write: bool,
    active_read: bool,
    fanout: u32,
) -> IndexConfig {
    IndexConfig {
        records,
        sort_on_write,
        active_read,
        fanout,
        ..IndexConfig::tree(id, base_lba, record_size, key_offset, key_size)
    }
}

/// Creates (or replaces) an index.
pub fn configure(array: &Array, device: u32, config: IndexConfig, via: Interface) -> Result<Report> {
    let measure = Measure::start("selfsort-config", array)?;
    let id = config.id;
    match via {
        Interface::CommandBlock => {
            send_block(array, device, &BlockCommand::Configure(config))?;
        }
        Interface::Vendor => {
            array.device(device)?.call(ConfigureIndex { config }).map_err(HostError::device(device))?;
        }
    }
    let info = index_info(array, device, id)?;
    let c = &info.config;
    let headline = format!(
        "device {device}: index {id} over {}-byte records (key: {} bytes at offset {}) from LBA {}, {}{}",
        c.record_size,
        c.key_size,
        c.key_offset,
        c.base_lba,
        if c.sort_on_write { "sort-on-write" } else { "sort-on-command" },
        if c.active_read { ", reads in key order" } else { "" }
    );
    measure.finish(array, headline, serde_json::to_value(&info).unwrap_or_default())
}

fn resize(array: &Array, device: u32, index: u32, records: u64, via: Interface) -> Result<()> {
    match via {
        Interface::CommandBlock => {
            send_block(array, device, &BlockCommand::Resize { index, records }).map(|_| ())
        }
        Interface::Vendor => array
            .device(device)?
            .call(ResizeIndex { index, records })
            .map(|_| ())
            .map_err(HostError::device(device)),
    }
}

fn set_flags(array: &Array, device: u32, index: u32, sort_on_write: bool, active_read: bool) -> Result<()> {
    array
        .device(device)?
        .call(SetIndexFlags { index, sort_on_write, active_read })
        .map(|_| ())
        .map_err(HostError::device(device))
}

/// Reads block `lba` as stored (with reads in key order turned off for the moment).
fn read_stored_block(array: &Array, device: u32, info: &IndexInfo, lba: u64) -> Result<Vec<u8>> {
    let c = &info.config;
    if c.active_read {
        set_flags(array, device, c.id, c.sort_on_write, false)?;
    }
    let r = array.device(device)?.call(ReadLba { lba, blocks: 1 }).map_err(HostError::device(device));
    if c.active_read {
        set_flags(array, device, c.id, c.sort_on_write, true)?;
    }
    r
}

/// Writes the records of `input` into an index's range through the block interface, from record
/// `at_record` (the range grows to hold them). Records are packed back to back; a block that also
/// holds records outside the input is read first and written back with them.
pub fn write_records(
    array: &Array,
    device: u32,
    index: u32,
    input: Input<'_>,
    at_record: u64,
    via: Interface,
    progress: Progress<'_>,
) -> Result<Report> {
    let info = index_info(array, device, index)?;
    let c = info.config.clone();
    let r = c.record_size as u64;
    let n = input.records(r, &format!(" (index {index})"))?;
    let size = n * r;
    // Past the range's end the records would leave a gap of records never written, which the index would
    // count (as zeros): the range grows from its end.
    if at_record > c.records {
        return Err(HostError::InvalidArgument(format!(
            "record {at_record} is past the end of index {index}'s range ({} records): write from record {} \
             or before, or configure the range larger (--records)",
            c.records, c.records
        )));
    }
    let blocks = lba::Blocks::of(array, device)?;
    let ps = blocks.size as u64;
    // The byte offsets of the records' start and end on the device; a record number past any device is
    // refused by name before a number wraps.
    let offset = |record: u64| record.checked_mul(r)?.checked_add(c.base_lba.checked_mul(ps)?);
    let (end, from, to) = match at_record.checked_add(n).map(|end| (end, offset(at_record), offset(end))) {
        Some((end, Some(from), Some(to))) => (end, from, to),
        _ => {
            return Err(HostError::InvalidArgument(format!(
                "record {at_record} is past any device: {n} records of {r} bytes from there do not fit in \
                 64-bit byte offsets"
            )))
        }
    };
    let measure = Measure::start("selfsort-write", array)?;
    if end > c.records {
        resize(array, device, index, end, via)?;
    }
    // Neighbours sharing the first and last block: read as stored, written back around the file.
    let (first, last) = (from / ps, (to - 1) / ps);
    let head = if from % ps != 0 {
        read_stored_block(array, device, &info, first)?[..(from % ps) as usize].to_vec()
    } else {
        Vec::new()
    };
    let records_end = (c.base_lba * ps).saturating_add(end.max(c.records).saturating_mul(r));
    let tail = if to % ps != 0 && records_end > to {
        read_stored_block(array, device, &info, last)?[(to % ps) as usize..].to_vec()
    } else {
        Vec::new()
    };
    let mut src =
        std::io::Cursor::new(head.clone()).chain(input.reader()?).chain(std::io::Cursor::new(tail.clone()));
    let total = head.len() as u64 + size + tail.len() as u64;
    lba::write_stream(array, device, first, &mut src, total, RECORD_WRITE_BYTES, progress)?;
    let info = index_info(array, device, index)?;
    let headline = format!(
        "wrote {n} records ({}) into index {index} of device {device} at record {at_record}: {} of {} indexed",
        human_bytes(size),
        info.indexed,
        info.config.records
    );
    measure.finish(
        array,
        headline,
        json!({ "records": n, "bytes": size, "indexed": info.indexed, "range_records": info.config.records }),
    )
}

/// Sort-on-command: repeats generate until every record of the range is indexed (§III-E: chunks, so no
/// command runs long), reporting progress.
pub fn generate(
    array: &Array,
    device: u32,
    index: u32,
    chunk_records: u64,
    via: Interface,
    progress: Progress<'_>,
) -> Result<Report> {
    let measure = Measure::start("selfsort-generate", array)?;
    let mut commands = 0u64;
    let (done, total) = loop {
        let (done, total) = match via {
            Interface::CommandBlock => {
                let st = send_block(array, device, &BlockCommand::Generate { index, chunk_records })?;
                st.last.progress
            }
            Interface::Vendor => {
                let p = array
                    .device(device)?
                    .call(GenerateIndex { index, max_records: chunk_records })
                    .map_err(HostError::device(device))?;
                (p.done, p.total)
            }
        };
        commands += 1;
        progress(done, total)?;
        array.faults.hit("selfsort-generate-chunk");
        if done >= total {
            break (done, total);
        }
    };
    let headline = format!(
        "generated index {index} of device {device}: {done} of {} in {}",
        count(total, "record"),
        count(commands, "command")
    );
    measure.finish(array, headline, json!({ "generated": done, "records": total, "commands": commands }))
}

/// Reads the whole range of an index in key order (active reads) into `out`.
pub fn read_sorted(
    array: &Array,
    device: u32,
    index: u32,
    out: &mut dyn Write,
    progress: Progress<'_>,
) -> Result<Report> {
    let info = index_info(array, device, index)?;
    let c = &info.config;
    if !c.active_read {
        return Err(HostError::InvalidArgument(format!(
            "index {index} of device {device} does not serve reads in key order (its active read is off)"
        )));
    }
    if !info.complete {
        return Err(HostError::InvalidArgument(format!(
            "index {index} of device {device} holds {} of its {} records: {}",
            info.indexed,
            c.records,
            if c.sort_on_write { "write the rest" } else { "run `insitu selfsort generate` first" }
        )));
    }
    let bytes = c.records * c.record_size as u64;
    let measure = Measure::start("selfsort-read", array)?;
    lba::read_stream(array, device, c.base_lba, bytes, out, progress)?;
    out.flush().map_err(|e| HostError::io("output", e))?;
    let headline =
        format!("read {} ({}) of index {index} in key order", count(c.records, "record"), human_bytes(bytes));
    measure.finish(array, headline, json!({ "count": c.records, "bytes": bytes }))
}

/// What to ask an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    Min,
    Max,
    /// Keys between the bounds, both inclusive; a bound shorter than the key is a prefix.
    Range {
        lo: Vec<u8>,
        hi: Vec<u8>,
    },
    /// Records whose key is `key` (or starts with it, if shorter).
    Select {
        key: Vec<u8>,
    },
}

/// Pads a bound to the key size: low bounds with 0x00, high bounds with 0xFF (prefix semantics).
fn pad(key: &[u8], size: usize, fill: u8, what: &str) -> Result<Vec<u8>> {
    if key.len() > size {
        return Err(HostError::InvalidArgument(format!(
            "the {what} key is {} bytes, longer than the index's {size}-byte keys",
            key.len()
        )));
    }
    let mut k = key.to_vec();
    k.resize(size, fill);
    Ok(k)
}

/// Runs a query: the count, and the first keys (or only the count); with `out`, every matching record
/// (in key order).
pub fn query(
    array: &Array,
    device: u32,
    index: u32,
    q: &Query,
    count_only: bool,
    out: Option<&mut dyn Write>,
) -> Result<Report> {
    let info = index_info(array, device, index)?;
    let ks = info.config.key_size as usize;
    let r = info.config.record_size as u64;
    // An empty key is a prefix of every key: a scan, which `range` asks for in words.
    if matches!(&q, Query::Select { key } if key.is_empty()) {
        return Err(HostError::InvalidArgument(
            "an empty key selects every record: give at least one byte (or a range with --lo and --hi)"
                .into(),
        ));
    }
    let iq = match q {
        Query::Min => IndexQuery::Min,
        Query::Max => IndexQuery::Max,
        Query::Range { lo, hi } => {
            let (lo_key, hi_key) = (pad(lo, ks, 0, "low")?, pad(hi, ks, 0xFF, "high")?);
            if lo_key > hi_key {
                return Err(HostError::InvalidArgument(format!(
                    "the range's low key {} is above its high key {}",
                    hex(lo),
                    hex(hi)
                )));
            }
            IndexQuery::Range { lo: lo_key, hi: hi_key }
        }
        Query::Select { key } => {
            IndexQuery::Range { lo: pad(key, ks, 0, "selected")?, hi: pad(key, ks, 0xFF, "selected")? }
        }
    };
    let measure = Measure::start("selfsort-query", array)?;
    let dev = array.device(device)?;
    let limit = (QUERY_PIECE_BYTES / r).max(1);
    let ask = |skip: u64, count_only: bool| {
        dev.call(QueryIndex { index, query: iq.clone(), skip, limit, count_only })
            .map_err(HostError::device(device))
    };
    let first = if out.is_none() {
        dev.call(QueryIndex { index, query: iq.clone(), skip: 0, limit: 10, count_only })
            .map_err(HostError::device(device))?
    } else {
        ask(0, false)?
    };
    let count = first.count;
    let key = info.config.key_field();
    let sample: Vec<String> =
        first.records.chunks(r as usize).take(10).map(|rec| hex(&rec[key.clone()])).collect();
    if let Some(out) = out {
        out.write_all(&first.records).map_err(|e| HostError::io("output", e))?;
        let mut got = first.records.len() as u64 / r;
        while got < count {
            let more = ask(got, false)?;
            if more.records.is_empty() {
                break;
            }
            out.write_all(&more.records).map_err(|e| HostError::io("output", e))?;
            got += more.records.len() as u64 / r;
        }
        out.flush().map_err(|e| HostError::io("output", e))?;
    }
    let what = match q {
        Query::Min => "the smallest key".to_string(),
        Query::Max => "the largest key".to_string(),
        Query::Range { lo, hi } => format!("keys from {} to {}", shown(lo), shown(hi)),
        Query::Select { key } => format!("key {}", shown(key)),
    };
    let headline = format!("index {index} of device {device}: {} with {what}", units::count(count, "record"));
    let result = json!({ "count": count, "first_rank": first.first_rank, "keys": sample });
    measure.finish(array, headline, result)
}

/// Saves every index of a device to its flash now.
pub fn flush(array: &Array, device: u32, via: Interface) -> Result<Report> {
    let measure = Measure::start("selfsort-flush", array)?;
    match via {
        Interface::CommandBlock => {
            send_block(array, device, &BlockCommand::Flush)?;
        }
        Interface::Vendor => array.device(device)?.call(FlushIndexes).map_err(HostError::device(device))?,
    }
    let st = status(array, device)?;
    measure.finish(
        array,
        format!("saved the indexes of device {device} (generation {})", st.generation),
        json!({ "generation": st.generation }),
    )
}

/// Forgets an index (its records stay).
pub fn drop_index(array: &Array, device: u32, index: u32, via: Interface) -> Result<Report> {
    let measure = Measure::start("selfsort-drop", array)?;
    match via {
        Interface::CommandBlock => {
            send_block(array, device, &BlockCommand::Drop { index })?;
        }
        Interface::Vendor => {
            array.device(device)?.call(DropIndex { index }).map_err(HostError::device(device))?
        }
    }
    measure.finish(array, format!("dropped index {index} of device {device}"), json!({ "dropped": index }))
}

/// The firmware's state, readable.
pub fn stats(array: &Array, device: u32) -> Result<Report> {
    let measure = Measure::start("selfsort-stats", array)?;
    let st = status(array, device)?;
    let mut lines = vec![format!(
        "device {device}: command LBA {}, {} host LBAs of {} bytes; firmware area LBAs {}..{}; saved generation {} ({}); \
         device memory {} free of {} ({} for the FTL map and I/O buffers)",
        st.command_lba,
        st.host_lbas,
        st.page_size,
        st.area_lba,
        st.area_lba + st.area_pages,
        st.generation,
        if st.saved_clean { "matches the indexes" } else { "older than the indexes" },
        human_bytes(st.memory_available),
        human_bytes(st.memory_bytes),
        human_bytes(st.firmware_memory_bytes)
    )];
    for i in &st.indexes {
        let c = &i.config;
        lines.push(format!(
            "  index {}: LBA {}, {} records of {} bytes, key {} bytes at {}, {}{}; {} indexed{}, B+tree height {} ({} leaves, {} internal), {}",
            c.id,
            c.base_lba,
            c.records,
            c.record_size,
            c.key_size,
            c.key_offset,
            match &c.kind {
                insitu_device::protocol::IndexKind::Tree if c.sort_on_write => "sort-on-write".to_string(),
                insitu_device::protocol::IndexKind::Tree => format!("sort-on-command ({} generated)", i.generated),
                insitu_device::protocol::IndexKind::Runs(r) => format!("merge of {} runs (ActiveSort)", r.len()),
            },
            if c.active_read { ", reads in key order" } else { "" },
            i.indexed,
            if i.complete { " (complete)" } else { "" },
            i.height,
            i.leaves,
            i.internal_nodes,
            human_bytes(i.memory_bytes),
        ));
        for n in &i.notes {
            lines.push(format!("    {n}"));
        }
    }
    let mut r = measure.finish(array, lines.join("\n"), serde_json::to_value(&st).unwrap_or_default())?;
    r.modeled.phases.clear();
    Ok(r)
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A key for people: its hex, and its text too when every byte is printable ASCII (a key given with
/// `--text`, or one that happens to be text): `41414141 ("AAAA")`.
fn shown(key: &[u8]) -> String {
    match key.iter().all(|b| b.is_ascii_graphic() || *b == b' ') && !key.is_empty() {
        true => format!("{} ({:?})", hex(key), String::from_utf8_lossy(key)),
        false => hex(key),
    }
}

/// Parses hex (`0a1b...`), or takes the bytes as they are with `text`.
pub fn parse_key(s: &str, text: bool) -> Result<Vec<u8>> {
    if text {
        return Ok(s.as_bytes().to_vec());
    }
    let s = s.trim_start_matches("0x");
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HostError::InvalidArgument(format!(
            "{s:?} is not a hex key (two hex digits a byte, e.g. 0a1b; give --text for a text key)"
        )));
    }
    Ok((0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0)).collect())
}
