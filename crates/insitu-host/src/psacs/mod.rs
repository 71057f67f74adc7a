//! PSACS (ICCD '21): the map side of a distributed shuffle, inside every device, and the host baselines.
//!
//! `insitu shuffle T --key COL[,COL] --partitions P [--placement device|host-sort|host-bucket]
//! [--threads N] [--hash zigzag-fold|xxh3] [--layout column|row] [--out S]` writes, on every device, the
//! device's rows grouped into P partitions (`S#data` + `S#index`); `insitu shuffle-read S --partition p`
//! gathers partition p from every device. Placements:
//! - `device`: the `psacs-shuffle` program on every device at once; only commands cross the host link.
//! - `host-sort` / `host-bucket`: the software baselines of §V (Spark's SortShuffleWriter and
//!   BypassMergeSortShuffleWriter): every part crosses the host link, N host threads partition it by
//!   sorting (PID, RowID) pairs or by appending records to P buckets, and the partitions cross back.
//!
//! All placements produce the same multiset of rows in every partition; the pure steps are the device
//! crate's (`insitu_device::programs::psacs`), so the bytes are computed by the same code.

use std::path::Path;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::compute::concat_batches;
use arrow::record_batch::RecordBatch;
use insitu_device::cputime::process_cpu_ns;
use insitu_device::programs::psacs::{
    compose_records, encode_partition, group_records, index_entry, record_format, record_key, Layout,
    ShuffleSpec, StoredKey,
};
use insitu_device::{Args, Command, Response, Value};
use insitu_kernels::columnar::{columns_to_records, decompress, FieldKind, RecordFormat};
use insitu_kernels::dict::Codes;
use insitu_kernels::partition::{partition_of, PartitionHash};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::array::{validate_user_name, Array};
use crate::catalog::ObjectEntry;
use crate::error::{HostError, Result};
use crate::model::HostWork;
use crate::report::{Measure, Report};
use crate::table::layout::{decode_part, key_from_bits, key_from_bytes};
use crate::table::schema::TableSchema;
use crate::table::store::{read_object, write_object};
use crate::table::{PartInfo, TableInfo};

/// Where the shuffle runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShufflePlacement {
    Device,
    HostSort,
    HostBucket,
}

/// Options of `shuffle`.
#[derive(Debug, Clone)]
pub struct ShuffleOptions {
    pub keys: Vec<String>,
    pub partitions: u32,
    pub placement: ShufflePlacement,
    pub threads: usize,
    pub hash: PartitionHash,
    pub layout: Layout,
    pub out: Option<String>,
    pub memory_budget: Option<u64>,
}

/// A shuffle output's description in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleInfo {
    pub source: String,
    pub schema: TableSchema,
    pub key: usize,
    /// Per device part: how its key column is stored (for rebuilding rows).
    pub parts: Vec<PartInfo>,
    pub record_format: String,
    pub partitions: u32,
    pub layout: String,
    pub hash: String,
    pub keys: Vec<String>,
}

/// The row format of a table part, as `b?,f?,v,...` (see `insitu_kernels::columnar`).
pub fn row_format(schema: &TableSchema, key: usize) -> RecordFormat {
    let cols: Vec<usize> = (0..schema.columns.len()).filter(|c| *c != key).collect();
    let bitmap = if cols.iter().any(|c| schema.columns[*c].nullable) { cols.len().div_ceil(8) } else { 0 };
    RecordFormat {
        bitmap,
        fields: cols
            .iter()
            .map(|c| schema.columns[*c].ty.fixed_width().map_or(FieldKind::Var, FieldKind::Fixed))
            .collect(),
    }
}

fn key_kind(p: &PartInfo) -> FieldKind {
    match p.key_encoding.as_str() {
        "bytes" => FieldKind::Var,
        _ => FieldKind::Fixed(key_width(p)),
    }
}

fn key_width(p: &PartInfo) -> usize {
    match p.key_type.as_deref() {
        Some("u32" | "i32" | "f32") => 4,
        _ => 8,
    }
}

/// Record fields of the shuffle key columns: the table's key column is field 0, the others follow in
/// schema order.
fn key_fields(schema: &TableSchema, key: usize, names: &[String]) -> Result<Vec<usize>> {
    names
        .iter()
        .map(|n| {
            let c = schema.index_of(n)?;
            Ok(if c == key {
                0
            } else {
                1 + (0..schema.columns.len()).filter(|x| *x != key && *x < c).count()
            })
        })
        .collect()
}

/// Shuffles table `name`.
pub fn shuffle_table(array: &mut Array, name: &str, opts: &ShuffleOptions) -> Result<Report> {
    let entry = array.table_entry(name)?.clone();
    let info = entry.table.clone().expect("table entry");
    if opts.partitions == 0 || opts.partitions > 1 << 24 {
        return Err(HostError::InvalidArgument(format!(
            "--partitions must be 1..=2^24 (16,777,216), not {}",
            opts.partitions
        )));
    }
    if opts.keys.is_empty() {
        return Err(HostError::InvalidArgument("--key needs at least one column".into()));
    }
    let fields = key_fields(&info.schema, info.key, &opts.keys)?;
    let out = opts.out.clone().unwrap_or_else(|| format!("{name}.shuffled"));
    validate_user_name(&out)?;
    if array.catalog().objects.contains_key(&out) {
        return Err(HostError::AlreadyExists(out));
    }
    let rf = row_format(&info.schema, info.key);
    let threads = opts.threads.clamp(1, 256);
    let op = match opts.placement {
        ShufflePlacement::Device => "shuffle (device)",
        ShufflePlacement::HostSort => "shuffle (host-sort)",
        ShufflePlacement::HostBucket => "shuffle (host-bucket)",
    };
    let mut measure = Measure::start(op, array);
    let job = Job { table: name, out: &out, entry: &entry, info: &info, rf: &rf, fields: &fields, opts };
    let result = match opts.placement {
        ShufflePlacement::Device => shuffle_on_devices(array, &job),
        _ => shuffle_on_host(array, &job, threads, &mut measure),
    };
    let (stored, raw) = match result {
        Ok(x) => x,
        Err(e) => {
            for d in &entry.devices {
                for s in ["data", "index"] {
                    let _ = array.device(*d)?.call(Command::Delete { name: format!("{out}#{s}") });
                }
            }
            return Err(e);
        }
    };
    array.faults.hit("shuffle-before-catalog");
    let sinfo = ShuffleInfo {
        source: name.into(),
        schema: info.schema.clone(),
        key: info.key,
        parts: info.parts.clone(),
        record_format: rf.describe(),
        partitions: opts.partitions,
        layout: match opts.layout {
            Layout::Column => "column".into(),
            Layout::Row => "row".into(),
        },
        hash: opts.hash.name().into(),
        keys: opts.keys.clone(),
    };
    array.commit_entry(ObjectEntry {
        name: out.clone(),
        kind: "shuffle".into(),
        size: stored,
        stripe_unit: 0,
        devices: entry.devices.clone(),
        table: None,
        shuffle: Some(sinfo),
        list: None,
    })?;
    let rows: u64 = info.parts.iter().map(|p| p.rows).sum();
    let result = json!({
        "table": name, "out": out, "keys": opts.keys, "partitions": opts.partitions, "placement": opts.placement,
        "threads": threads, "hash": opts.hash.name(), "rows": rows, "stored_bytes": stored, "raw_bytes": raw,
        "compression_ratio": raw as f64 / stored.max(1) as f64,
    });
    Ok(measure.finish(array, result))
}

/// What every placement of one shuffle works from.
#[derive(Clone, Copy)]
struct Job<'a> {
    table: &'a str,
    out: &'a str,
    entry: &'a ObjectEntry,
    info: &'a TableInfo,
    rf: &'a RecordFormat,
    fields: &'a [usize],
    opts: &'a ShuffleOptions,
}

fn shuffle_on_devices(array: &Array, job: &Job<'_>) -> Result<(u64, u64)> {
    let Job { table, out, entry, info, rf, fields, opts } = *job;
    let mut ids = Vec::new();
    for (i, dev) in entry.devices.iter().enumerate() {
        let p = &info.parts[i];
        let mut args = Args::new()
            .with("table", Value::Str(table.into()))
            .with("out", Value::Str(out.into()))
            .with("key_encoding", Value::Str(p.key_encoding.clone()))
            .with("key_width", Value::U64(key_width(p) as u64))
            .with("code_bits", Value::U64(p.code_bits.unwrap_or(16) as u64))
            .with("row_format", Value::Str(rf.describe()))
            .with("key_fields", Value::U64List(fields.iter().map(|f| *f as u64).collect()))
            .with("partitions", Value::U64(opts.partitions as u64))
            .with("hash", Value::Str(opts.hash.name().into()))
            .with("layout", Value::Str(if opts.layout == Layout::Row { "row" } else { "column" }.into()));
        if let Some(rs) = p.row_size {
            args.set("row_size", Value::U64(rs));
        }
        if let Some(b) = opts.memory_budget {
            args.set("memory_budget", Value::U64(b));
        }
        let id = array
            .device(*dev)?
            .submit(Command::Execute { program: "psacs-shuffle".into(), args, buffers: vec![] })
            .map_err(HostError::device(*dev))?;
        ids.push((*dev, id));
    }
    let (mut stored, mut raw) = (0, 0);
    let mut first_err = None;
    for (dev, id) in ids {
        match array.device(dev)?.wait(id).result.map_err(HostError::device(dev)) {
            Ok(Response::Output(o)) => {
                stored += o.u64("stored_bytes").unwrap_or(0);
                raw += o.u64("raw_bytes").unwrap_or(0);
            }
            Ok(_) => unreachable!("Execute answers with output"),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok((stored, raw)),
    }
}

fn le_u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

/// Reads a part's objects over the host link and composes its records (the Reader, on the host).
fn read_records(
    array: &Array,
    dev: u32,
    table: &str,
    p: &PartInfo,
    bitmap: usize,
) -> Result<(Vec<u8>, Vec<u64>)> {
    let obj = |s: &str| read_object(array, dev, &format!("{table}#{s}"));
    let rows = obj("rows")?;
    let offs = match p.row_size {
        Some(rs) => (0..=p.rows).map(|i| i * rs).collect(),
        None => le_u64s(&obj("rowoff")?),
    };
    let key = match p.key_encoding.as_str() {
        "dict" => StoredKey::Dict {
            dictionary: le_u64s(&obj("dict")?),
            codes: Codes::from_bytes(p.code_bits.unwrap_or(16), &obj("codes")?)
                .ok_or_else(|| HostError::Damaged { name: table.into(), detail: "bad data page".into() })?,
            width: key_width(p),
        },
        "bytes" => StoredKey::Bytes { data: obj("key")?, offsets: le_u64s(&obj("keyoff")?) },
        _ => StoredKey::Plain { data: obj("key")?, width: key_width(p) },
    };
    compose_records(&rows, &offs, bitmap, &key).map_err(|e| HostError::Device { device: dev, error: e })
}

/// Runs `f(0..threads)` on scoped threads and collects the results in thread order.
fn on_threads<T: Send>(threads: usize, f: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..threads).map(|t| s.spawn(move || f(t))).collect();
        handles.into_iter().map(|h| h.join().expect("shuffle thread panicked")).collect()
    })
}

/// A failure of a shared shuffle step run on the host (a record that does not match its format).
fn host_step(e: insitu_device::DeviceError) -> HostError {
    HostError::Damaged { name: "shuffle".into(), detail: e.to_string() }
}

/// One thread's share of a part, grouped: records in partition order, offsets, and extents per partition.
type Grouped = (Vec<u8>, Vec<u64>, Vec<u64>);

/// An encoded partition: its rows, its compressed chunks, its bytes before compression.
type EncodedPartition = (u64, Vec<Vec<u8>>, u64);

/// Bucket-based grouping: one growing buffer per partition (memory grows with P).
fn bucket_group(records: &[u8], offsets: &[u64], spec: &ShuffleSpec) -> Result<Grouped> {
    let mut buckets: Vec<(Vec<u8>, Vec<u64>)> = vec![(Vec::new(), Vec::new()); spec.partitions as usize];
    let (mut key, mut ranges) = (Vec::new(), Vec::new());
    for w in offsets.windows(2) {
        let rec = &records[w[0] as usize..w[1] as usize];
        record_key(rec, spec, &mut key, &mut ranges).map_err(host_step)?;
        let b = &mut buckets[partition_of(spec.hash, &key, spec.partitions) as usize];
        b.0.extend_from_slice(rec);
        b.1.push(b.0.len() as u64);
    }
    let mut data = Vec::with_capacity(records.len());
    let mut offs = vec![0u64];
    let mut extents = vec![0u64];
    for (d, o) in buckets {
        let base = data.len() as u64;
        data.extend_from_slice(&d);
        offs.extend(o.iter().map(|x| x + base));
        extents.push(offs.len() as u64 - 1);
    }
    Ok((data, offs, extents))
}

fn shuffle_on_host(
    array: &Array,
    job: &Job<'_>,
    threads: usize,
    measure: &mut Measure,
) -> Result<(u64, u64)> {
    let Job { table, out, entry, info, rf, fields, opts } = *job;
    let (mut stored, mut raw) = (0u64, 0u64);
    let mut cpu = 0u64;
    for (i, dev) in entry.devices.iter().enumerate() {
        let p = &info.parts[i];
        let spec = ShuffleSpec {
            partitions: opts.partitions,
            hash: opts.hash,
            layout: opts.layout,
            format: record_format(rf, key_kind(p)),
            key_fields: fields.to_vec(),
        };
        let (records, offsets) = read_records(array, *dev, table, p, rf.bitmap)?;
        let c0 = process_cpu_ns();
        let n = offsets.len() - 1;
        let per = n.div_ceil(threads).max(1);
        // Each thread groups its share of the records.
        let grouped: Vec<Grouped> = on_threads(threads, |t| {
            let (lo, hi) = ((t * per).min(n), ((t + 1) * per).min(n));
            let base = offsets[lo];
            let o: Vec<u64> = offsets[lo..=hi].iter().map(|x| x - base).collect();
            let r = &records[base as usize..offsets[hi] as usize];
            match opts.placement {
                ShufflePlacement::HostBucket => bucket_group(r, &o, &spec),
                _ => group_records(r, &o, &spec).map_err(host_step),
            }
        })?;
        // Each thread then encodes a range of partitions, concatenating every thread's share of them.
        let parts_per = (opts.partitions as usize).div_ceil(threads).max(1);
        let encoded: Vec<Vec<EncodedPartition>> = on_threads(threads, |t| {
            let lo = (t * parts_per).min(spec.partitions as usize);
            let hi = ((t + 1) * parts_per).min(spec.partitions as usize);
            (lo..hi)
                .map(|p| {
                    let mut recs = Vec::new();
                    let mut offs = vec![0u64];
                    for g in &grouped {
                        let (a, b) = (g.2[p] as usize, g.2[p + 1] as usize);
                        let o = &g.1[a..=b];
                        let base = recs.len() as u64;
                        recs.extend_from_slice(&g.0[o[0] as usize..o[b - a] as usize]);
                        offs.extend(o[1..].iter().map(|x| x - o[0] + base));
                    }
                    let chunks = encode_partition(&recs, &offs, &spec).map_err(host_step)?;
                    Ok((offs.len() as u64 - 1, chunks, recs.len() as u64))
                })
                .collect()
        })?;
        let mut data = Vec::new();
        let mut index = Vec::new();
        for (rows, chunks, r) in encoded.into_iter().flatten() {
            index_entry(&mut index, rows, data.len() as u64, &chunks);
            for c in &chunks {
                data.extend_from_slice(c);
            }
            raw += r;
        }
        cpu += process_cpu_ns().saturating_sub(c0);
        stored += data.len() as u64;
        write_object(array, *dev, &format!("{out}#data"), "shuffle-data", &data)?;
        write_object(array, *dev, &format!("{out}#index"), "shuffle-index", &index)?;
    }
    let mut work = HostWork::single("shuffle", cpu);
    work.threads = threads as u32;
    measure.phase("shuffle", array, work);
    Ok((stored, raw))
}

/// Reads partition `p` of shuffle output `name` from every device, as one batch.
pub fn read_partition(array: &Array, name: &str, p: u32) -> Result<RecordBatch> {
    let entry = array.entry(name)?.clone();
    let info = entry
        .shuffle
        .clone()
        .ok_or_else(|| HostError::InvalidArgument(format!("{name:?} is not a shuffle output")))?;
    if p >= info.partitions {
        return Err(HostError::InvalidArgument(format!(
            "{name:?} has partitions 0..{}, not {p}",
            info.partitions
        )));
    }
    let rf = RecordFormat::parse(&info.record_format)
        .map_err(|e| HostError::Damaged { name: name.into(), detail: e.to_string() })?;
    let layout = if info.layout == "row" { Layout::Row } else { Layout::Column };
    let mut batches = Vec::new();
    for (i, dev) in entry.devices.iter().enumerate() {
        let part = &info.parts[i];
        let fmt = record_format(&rf, key_kind(part));
        let chunks = match layout {
            Layout::Column => fmt.columns(),
            Layout::Row => 1,
        };
        let entry_bytes = 8 * (2 + chunks) as u64;
        let d = array.device(*dev)?;
        let read = |obj: &str, offset: u64, len: u64| -> Result<Vec<u8>> {
            match d
                .call(Command::Read { name: format!("{name}#{obj}"), offset, len, buf: Vec::new() })
                .map_err(HostError::device(*dev))?
            {
                Response::Data(v) => Ok(v),
                _ => unreachable!(),
            }
        };
        let e = le_u64s(&read("index", p as u64 * entry_bytes, entry_bytes)?);
        let (rows, mut at) = (e[0] as usize, e[1]);
        let damaged = |detail: String| HostError::Damaged { name: name.into(), detail };
        let mut cols = Vec::new();
        for len in &e[2..] {
            cols.push(decompress(&read("data", at, *len)?).map_err(|x| damaged(x.to_string()))?);
            at += len;
        }
        let (records, offsets) = match layout {
            Layout::Column => columns_to_records(&cols, rows, &fmt).map_err(|x| damaged(x.to_string()))?,
            Layout::Row => {
                let data = cols.pop().unwrap_or_default();
                let mut offs = vec![0u64];
                let mut pos = 0usize;
                for _ in 0..rows {
                    let r = fmt.field_ranges(&data[pos..]).map_err(|x| damaged(x.to_string()))?;
                    pos += r.last().map_or(fmt.bitmap, |x| x.end);
                    offs.push(pos as u64);
                }
                (data, offs)
            }
        };
        batches.push(records_to_batch(&info, part, &fmt, &records, &offsets)?);
    }
    let schema = Arc::new(info.schema.to_arrow());
    concat_batches(&schema, &batches).map_err(|e| HostError::InvalidArgument(e.to_string()))
}

/// Splits records back into the key column and the row-wise bytes, and decodes them.
fn records_to_batch(
    info: &ShuffleInfo,
    part: &PartInfo,
    fmt: &RecordFormat,
    records: &[u8],
    offsets: &[u64],
) -> Result<RecordBatch> {
    let damaged = |d: String| HostError::Damaged { name: "shuffle partition".into(), detail: d };
    let mut rows = Vec::with_capacity(records.len());
    let mut row_offs = vec![0u64];
    let mut key_bits = Vec::new();
    let (mut kdata, mut koffs) = (Vec::new(), vec![0u64]);
    for w in offsets.windows(2) {
        let rec = &records[w[0] as usize..w[1] as usize];
        let ranges = fmt.field_ranges(rec).map_err(|e| damaged(e.to_string()))?;
        let k = &rec[ranges[0].clone()];
        match part.key_encoding.as_str() {
            "bytes" => {
                kdata.extend_from_slice(k);
                koffs.push(kdata.len() as u64);
            }
            _ => {
                let mut b = [0u8; 8];
                b[..k.len()].copy_from_slice(k);
                key_bits.push(u64::from_le_bytes(b));
            }
        }
        // The row is the record without its key field (and the key's length prefix when variable).
        let key_start = if part.key_encoding == "bytes" { ranges[0].start - 4 } else { ranges[0].start };
        rows.extend_from_slice(&rec[..key_start]);
        rows.extend_from_slice(&rec[ranges[0].end..]);
        row_offs.push(rows.len() as u64);
    }
    let ty = &info.schema.columns[info.key].ty;
    let key_col: ArrayRef = if part.key_encoding == "bytes" {
        key_from_bytes(&kdata, &koffs, ty)?
    } else {
        key_from_bits(&key_bits, ty)?
    };
    decode_part(&info.schema, info.key, key_col, &rows, &row_offs)
}

/// `shuffle-read`: partition `p` from every device, written as Parquet.
pub fn shuffle_read(array: &Array, name: &str, p: u32, out: &Path) -> Result<Report> {
    let measure = Measure::start("shuffle-read", array);
    let batch = read_partition(array, name, p)?;
    let tmp = out.with_extension("parquet.tmp");
    let f = std::fs::File::create(&tmp).map_err(|e| HostError::io(&tmp, e))?;
    let mut w = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), None)
        .map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    w.write(&batch).map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    w.close().map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    std::fs::rename(&tmp, out).map_err(|e| HostError::io(out, e))?;
    Ok(measure
        .finish(array, json!({ "name": name, "partition": p, "rows": batch.num_rows(), "output": out })))
}
pub mod repro;
