//! The NASCENT sort operator: `insitu sort T --key COL [--placement device|host] [--algo fast|bitonic]`.
//!
//! - `device`: every device sorts its own part at once (SSD-level parallelism, §3.2): the `sort` program
//!   turns the key column into sorted indices (out of core through flash when device memory is short),
//!   then `gather` programs, several at a time on the compute units (§3.5), shuffle the rows and the key
//!   column into the output part; only commands and a few offsets cross the host link.
//! - `host`: the conventional system: every part crosses the host link, the host CPU sorts and shuffles
//!   it, and the sorted part crosses back.
//!
//! Both write the output table `--out` (default `T.sorted`) part by part; the two give identical tables.
//! With `--merge`, the sorted parts are k-way merged at the host into one globally sorted Parquet file.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::Arc;

use arrow::compute::interleave_record_batch;
use arrow::record_batch::RecordBatch;
use insitu_device::cputime::thread_cpu_ns;
use insitu_device::programs::nascent::{sort_key_bytes, Algo, KeyType};
use insitu_device::{Args, Command, Response, Value};
use insitu_kernels::dict::{self, Codes, Decoded};
use insitu_kernels::gather::{gather_fixed, gather_var};
use insitu_kernels::sort::argsort_strings;
use serde::Serialize;
use serde_json::json;

use crate::array::{validate_user_name, Array, DeviceBuffer};
use crate::catalog::ObjectEntry;
use crate::error::{HostError, Result};
use crate::model::HostWork;
use crate::report::{Measure, Report};
use crate::table::store::{begin_object, read_object, read_part, write_object};
use crate::table::{PartInfo, TableInfo};

/// Where the sort runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SortPlacement {
    Device,
    Host,
    /// One accelerator beside the host (NASCENT's FPGA baseline): each device's part crosses the shared
    /// bus to it and back, one device at a time. The work is measured here and priced as the accelerator.
    HostAccel,
}

/// Options of `sort`.
#[derive(Debug, Clone)]
pub struct SortOptions {
    pub key: String,
    pub placement: SortPlacement,
    /// `fast` or `bitonic`.
    pub algo: String,
    pub out: Option<String>,
    /// Write the globally merged table here.
    pub merge: Option<std::path::PathBuf>,
    /// Cap on the device memory the sort program may use (to exercise out-of-core sorting).
    pub memory_budget: Option<u64>,
}

/// Gather programs run at once per device (NASCENT instantiates several shuffle kernels).
const SHUFFLE_WORKERS: usize = 4;

/// Sorts table `name`.
pub fn sort_table(array: &mut Array, name: &str, opts: &SortOptions) -> Result<Report> {
    let entry = array.table_entry(name)?.clone();
    let info = entry.table.clone().expect("table entry");
    let key_name = &info.schema.columns[info.key].name;
    if *key_name != opts.key {
        info.schema.index_of(&opts.key)?;
        return Err(HostError::InvalidArgument(format!(
            "table {name:?} is stored with key column {key_name:?} (column-wise, NASCENT's layout); put it again \
             with --key {} to sort by that column",
            opts.key
        )));
    }
    if opts.algo != "fast" && opts.algo != "bitonic" {
        return Err(HostError::InvalidArgument(format!("--algo {:?}: use fast or bitonic", opts.algo)));
    }
    let out = opts.out.clone().unwrap_or_else(|| format!("{name}.sorted"));
    validate_user_name(&out)?;
    if array.catalog().objects.contains_key(&out) {
        return Err(HostError::AlreadyExists(out));
    }
    let op = match opts.placement {
        SortPlacement::Device => "sort (device)",
        SortPlacement::Host => "sort (host)",
        SortPlacement::HostAccel => "sort (host-accel)",
    };
    let mut measure = Measure::start(op, array);
    let parts = match opts.placement {
        SortPlacement::Device => {
            let r = sort_on_devices(array, name, &out, &entry, &info, opts, &mut measure);
            if r.is_err() {
                cleanup(array, &entry, &out);
            }
            r?
        }
        SortPlacement::Host | SortPlacement::HostAccel => {
            let accel = opts.placement == SortPlacement::HostAccel;
            let r = sort_on_host(array, name, &out, &entry, &info, accel, &mut measure);
            if r.is_err() {
                cleanup(array, &entry, &out);
            }
            r?
        }
    };
    let rows: u64 = parts.iter().map(|p| p.rows).sum();
    let out_entry = ObjectEntry {
        name: out.clone(),
        kind: "table".into(),
        size: entry.size,
        stripe_unit: 0,
        devices: entry.devices.clone(),
        table: Some(TableInfo { parts, sorted: true, ..info.clone() }),
        shuffle: None,
        list: None,
    };
    array.commit_entry(out_entry)?;
    let mut result = json!({
        "table": name, "out": out, "key": opts.key, "placement": opts.placement, "algo": opts.algo, "rows": rows,
    });
    if let Some(path) = &opts.merge {
        let c0 = thread_cpu_ns();
        let merged = merge_to_parquet(array, &out, path)?;
        measure.phase("merge", array, HostWork::single("merge", thread_cpu_ns() - c0));
        result["merged"] = json!({ "output": path, "rows": merged });
    }
    Ok(measure.finish(array, result))
}

/// Removes whatever a failed sort left of its output.
fn cleanup(array: &Array, entry: &ObjectEntry, out: &str) {
    for dev in &entry.devices {
        if let Ok(d) = array.device(*dev) {
            if let Ok(Response::Objects(objs)) = d.call(Command::List) {
                for o in objs.into_iter().filter(|o| o.name.starts_with(&format!("{out}#"))) {
                    let _ = d.call(Command::Delete { name: o.name });
                }
            }
        }
    }
}

fn key_args(table: &str, p: &PartInfo) -> Args {
    let a = Args::new();
    match p.key_encoding.as_str() {
        "dict" => a
            .with("encoding", Value::Str("dict".into()))
            .with("dict", Value::Str(format!("{table}#dict")))
            .with("codes", Value::Str(format!("{table}#codes")))
            .with("code_bits", Value::U64(p.code_bits.unwrap_or(16) as u64))
            .with("key_type", Value::Str(p.key_type.clone().unwrap_or_default())),
        "bytes" => a
            .with("key_type", Value::Str("bytes".into()))
            .with("key", Value::Str(format!("{table}#key")))
            .with("keyoff", Value::Str(format!("{table}#keyoff"))),
        _ => a
            .with("key", Value::Str(format!("{table}#key")))
            .with("key_type", Value::Str(p.key_type.clone().unwrap_or_default())),
    }
}

fn output(r: std::result::Result<Response, insitu_device::DeviceError>, dev: u32) -> Result<Args> {
    match r.map_err(HostError::device(dev))? {
        Response::Output(o) => Ok(o),
        _ => unreachable!("Execute answers with output"),
    }
}

fn sort_on_devices(
    array: &Array,
    table: &str,
    out: &str,
    entry: &ObjectEntry,
    info: &TableInfo,
    opts: &SortOptions,
    measure: &mut Measure,
) -> Result<Vec<PartInfo>> {
    // Phase 1: every device sorts its key column, all at once.
    let mut ids = Vec::new();
    for (i, dev) in entry.devices.iter().enumerate() {
        let mut args = key_args(table, &info.parts[i])
            .with("algo", Value::Str(opts.algo.clone()))
            .with("out", Value::Str(format!("{out}#order")));
        if let Some(b) = opts.memory_budget {
            args.set("memory_budget", Value::U64(b));
        }
        let id = array
            .device(*dev)?
            .submit(Command::Execute { program: "sort".into(), args, buffers: vec![] })
            .map_err(HostError::device(*dev))?;
        ids.push((*dev, id));
    }
    let mut first_err = None;
    for (dev, id) in ids {
        if let Err(e) = output(array.device(dev)?.wait(id).result, dev) {
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    measure.phase("sort", array, HostWork::default());
    // Phase 2: shuffle rows and key column on every device (devices one after another from the host's
    // point of view, but each device's gathers run on its compute units in parallel).
    let parts = std::thread::scope(|s| {
        let handles: Vec<_> = entry
            .devices
            .iter()
            .enumerate()
            .map(|(i, dev)| {
                let p = &info.parts[i];
                s.spawn(move || shuffle_part(array, *dev, table, out, p))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("shuffle thread panicked")).collect::<Result<Vec<_>>>()
    })?;
    for dev in &entry.devices {
        array
            .device(*dev)?
            .call(Command::Delete { name: format!("{out}#order") })
            .map_err(HostError::device(*dev))?;
    }
    measure.phase("shuffle", array, HostWork::default());
    Ok(parts)
}

/// Gathers one column (or the rows) of a part in sorted order into a new object, in rounds of
/// `SHUFFLE_WORKERS` gathers; returns the gathered offsets for variable-size sources.
/// What one gather pass moves: items of `src` (fixed `width`, or located by the `offsets` object, at most
/// `max_item` bytes each) into `dst`, in the order of the sorted-indices object `order`.
struct GatherJob<'a> {
    src: &'a str,
    width: Option<u64>,
    offsets: Option<&'a str>,
    max_item: u64,
    rows: u64,
    order: &'a str,
    dst: &'a str,
}

fn gather_into(array: &Array, dev: u32, job: &GatherJob<'_>) -> Result<Option<Vec<u64>>> {
    let d = array.device(dev)?;
    let GatherJob { src, width: fixed, offsets: offsets_obj, max_item, rows, order, dst } = *job;
    let total_bytes = match fixed {
        Some(w) => w * rows,
        None => match d.call(Command::Stat { name: src.to_string() }).map_err(HostError::device(dev))? {
            Response::Object(o) => o.size,
            _ => unreachable!(),
        },
    };
    let txn = begin_object(array, dev, dst, "table-part", total_bytes)?;
    let result = (|| {
        let item = max_item.max(1);
        let mut budget = match d.call(Command::Identify).map_err(HostError::device(dev))? {
            Response::Properties(p) => p.memory_available / 2,
            _ => unreachable!(),
        };
        // When the source (and its offsets) fit half the free device memory, load them once over the
        // internal path and gather from DRAM; otherwise gather straight from flash.
        let off_size = match offsets_obj {
            Some(o) => object_size(array, dev, o)?,
            None => 0,
        };
        let mut loaded: Vec<DeviceBuffer<'_>> = Vec::new();
        if total_bytes + off_size <= budget {
            for (obj, size) in std::iter::once((src, total_bytes)).chain(offsets_obj.map(|o| (o, off_size))) {
                let b = DeviceBuffer::alloc(array, dev, size.max(1))?;
                d.call(Command::LoadObject {
                    name: obj.into(),
                    offset: 0,
                    len: size,
                    dst: b.handle,
                    dst_offset: 0,
                })
                .map_err(HostError::device(dev))?;
                loaded.push(b);
            }
            budget -= total_bytes + off_size;
        }
        let per_worker = (budget / SHUFFLE_WORKERS as u64 / item).clamp(1, rows.max(1));
        let mut offsets = offsets_obj.map(|_| vec![0u64]);
        let mut start = 0u64;
        while start < rows {
            let mut jobs = Vec::new();
            for _ in 0..SHUFFLE_WORKERS {
                if start >= rows {
                    break;
                }
                let count = per_worker.min(rows - start);
                let buf = DeviceBuffer::alloc(array, dev, count * item)?;
                let mut args = Args::new()
                    .with("rows", Value::Str(src.into()))
                    .with("order", Value::Str(order.into()))
                    .with("start", Value::U64(start))
                    .with("count", Value::U64(count));
                args = match (fixed, offsets_obj) {
                    (Some(w), _) => args.with("row_size", Value::U64(w)),
                    (None, Some(o)) => args.with("rowoff", Value::Str(o.into())),
                    (None, None) => unreachable!("variable items need offsets"),
                };
                let buffers = std::iter::once(buf.handle).chain(loaded.iter().map(|b| b.handle)).collect();
                let id = d
                    .submit(Command::Execute { program: "gather".into(), args, buffers })
                    .map_err(HostError::device(dev))?;
                jobs.push((buf, id));
                start += count;
            }
            for (buf, id) in jobs {
                let o = output(d.wait(id).result, dev)?;
                let bytes = o.u64("bytes").unwrap_or(0);
                if let (Some(all), Some(offs)) = (offsets.as_mut(), o.u64_list("offsets")) {
                    let base = *all.last().expect("starts with 0");
                    all.extend(offs[1..].iter().map(|x| base + x));
                }
                d.call(Command::StoreToObject { src: buf.handle, offset: 0, len: bytes, txn })
                    .map_err(HostError::device(dev))?;
            }
        }
        Ok(offsets)
    })();
    match result {
        Ok(offs) => {
            d.call(Command::Commit { txn }).map_err(HostError::device(dev))?;
            Ok(offs)
        }
        Err(e) => {
            let _ = d.call(Command::Abort { txn });
            Err(e)
        }
    }
}

fn u64s_le(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn shuffle_part(array: &Array, dev: u32, table: &str, out: &str, p: &PartInfo) -> Result<PartInfo> {
    let order = format!("{out}#order");
    let rows = p.rows;
    // Rows.
    let rowoff = format!("{table}#rowoff");
    let (src, dst) = (format!("{table}#rows"), format!("{out}#rows"));
    let job = GatherJob {
        src: &src,
        width: p.row_size,
        offsets: p.row_size.is_none().then_some(rowoff.as_str()),
        max_item: p.max_row,
        rows,
        order: &order,
        dst: &dst,
    };
    let offs = gather_into(array, dev, &job)?;
    if let Some(o) = offs {
        write_object(array, dev, &format!("{out}#rowoff"), "table-part", &u64s_le(&o))?;
    }
    // Key column.
    match p.key_encoding.as_str() {
        "dict" => {
            let cw = p.code_bits.unwrap_or(16) as u64 / 8;
            gather_into(
                array,
                dev,
                &GatherJob {
                    src: &format!("{table}#codes"),
                    width: Some(cw),
                    offsets: None,
                    max_item: cw,
                    rows,
                    order: &order,
                    dst: &format!("{out}#codes"),
                },
            )?;
            copy_inside(array, dev, &format!("{table}#dict"), &format!("{out}#dict"))?;
        }
        "bytes" => {
            let keyoff = format!("{table}#keyoff");
            let offs = gather_into(
                array,
                dev,
                &GatherJob {
                    src: &format!("{table}#key"),
                    width: None,
                    offsets: Some(&keyoff),
                    max_item: p.max_key,
                    rows,
                    order: &order,
                    dst: &format!("{out}#key"),
                },
            )?;
            write_object(
                array,
                dev,
                &format!("{out}#keyoff"),
                "table-part",
                &u64s_le(&offs.unwrap_or_default()),
            )?;
        }
        _ => {
            let w = match p.key_type.as_deref() {
                Some("u32" | "i32" | "f32") => 4,
                _ => 8,
            };
            gather_into(
                array,
                dev,
                &GatherJob {
                    src: &format!("{table}#key"),
                    width: Some(w),
                    offsets: None,
                    max_item: w,
                    rows,
                    order: &order,
                    dst: &format!("{out}#key"),
                },
            )?;
        }
    }
    Ok(p.clone())
}

/// Size of an object on a device.
fn object_size(array: &Array, dev: u32, name: &str) -> Result<u64> {
    match array.device(dev)?.call(Command::Stat { name: name.into() }).map_err(HostError::device(dev))? {
        Response::Object(o) => Ok(o.size),
        _ => unreachable!(),
    }
}

/// Copies an object inside the device: flash -> device memory -> flash.
fn copy_inside(array: &Array, dev: u32, src: &str, dst: &str) -> Result<()> {
    let d = array.device(dev)?;
    let size = object_size(array, dev, src)?;
    let buf = DeviceBuffer::alloc(array, dev, size.max(1))?;
    d.call(Command::LoadObject { name: src.into(), offset: 0, len: size, dst: buf.handle, dst_offset: 0 })
        .map_err(HostError::device(dev))?;
    let txn = begin_object(array, dev, dst, "table-part", size)?;
    d.call(Command::StoreToObject { src: buf.handle, offset: 0, len: size, txn })
        .map_err(HostError::device(dev))?;
    d.call(Command::Commit { txn }).map_err(HostError::device(dev))?;
    Ok(())
}

/// Host (or accelerator) placement: the conventional system. Each part's objects cross the host link, the
/// host runs the same kernels as the devices (sort of the key column, gather of rows and keys), and the
/// sorted objects cross back. The CPU placement reads every part at once (one phase); the accelerator
/// serves one device after another (a phase per device).
fn sort_on_host(
    array: &Array,
    table: &str,
    out: &str,
    entry: &ObjectEntry,
    info: &TableInfo,
    accel: bool,
    measure: &mut Measure,
) -> Result<Vec<PartInfo>> {
    let mut cpu = 0u64;
    for (i, dev) in entry.devices.iter().enumerate() {
        let p = &info.parts[i];
        let dev = *dev;
        let obj = |s: &str| read_object(array, dev, &format!("{table}#{s}"));
        let rows = obj("rows")?;
        let rowoff = if p.row_size.is_none() { Some(le_u64s(&obj("rowoff")?)) } else { None };
        let key = match p.key_encoding.as_str() {
            "dict" => HostKey::Dict(obj("dict")?, obj("codes")?),
            "bytes" => HostKey::Bytes(obj("key")?, le_u64s(&obj("keyoff")?)),
            _ => HostKey::Plain(obj("key")?),
        };
        let c0 = thread_cpu_ns();
        let kt = p.key_type.as_deref().and_then(KeyType::parse);
        let order: Vec<u32> = match (&key, kt) {
            (HostKey::Plain(k), Some(kt)) => sort_key_bytes(k, kt, 0, Algo::Fast).rows(),
            (HostKey::Dict(d, c), Some(kt)) => {
                let codes = Codes::from_bytes(p.code_bits.unwrap_or(16), c).ok_or_else(|| {
                    HostError::Damaged { name: table.into(), detail: "bad data page".into() }
                })?;
                let decoded = dict::decode(&le_u64s(d), &codes, kt.width() as u32 * 8)
                    .map_err(|e| HostError::Damaged { name: table.into(), detail: e.to_string() })?;
                let bytes: Vec<u8> = match decoded {
                    Decoded::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    Decoded::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    Decoded::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                };
                sort_key_bytes(&bytes, kt, 0, Algo::Fast).rows()
            }
            (HostKey::Bytes(k, o), _) => {
                let keys: Vec<&[u8]> = o.windows(2).map(|w| &k[w[0] as usize..w[1] as usize]).collect();
                argsort_strings(&keys, 0)
            }
            _ => {
                return Err(HostError::Damaged {
                    name: table.into(),
                    detail: "part without a key type".into(),
                })
            }
        };
        let mut objects: Vec<(String, Vec<u8>)> = Vec::new();
        match (&rowoff, p.row_size) {
            (Some(off), _) => {
                let (d, o) = gather_var(&rows, off, &order);
                objects.push((format!("{out}#rows"), d));
                objects.push((format!("{out}#rowoff"), u64s_le(&o)));
            }
            (None, Some(rs)) => {
                objects.push((format!("{out}#rows"), gather_fixed(&rows, rs as usize, &order)))
            }
            (None, None) => unreachable!("a part has a row size or offsets"),
        }
        match &key {
            HostKey::Plain(k) => {
                let w = kt.map_or(8, |k| k.width());
                objects.push((format!("{out}#key"), gather_fixed(k, w, &order)));
            }
            HostKey::Dict(d, c) => {
                let cw = p.code_bits.unwrap_or(16) as usize / 8;
                objects.push((format!("{out}#dict"), d.clone()));
                objects.push((format!("{out}#codes"), gather_fixed(c, cw, &order)));
            }
            HostKey::Bytes(k, o) => {
                let (d, offs) = gather_var(k, o, &order);
                objects.push((format!("{out}#key"), d));
                objects.push((format!("{out}#keyoff"), u64s_le(&offs)));
            }
        }
        let part_cpu = thread_cpu_ns() - c0;
        cpu += part_cpu;
        let moved: u64 = objects.iter().map(|(_, d)| d.len() as u64).sum::<u64>() * 2;
        for (name, data) in &objects {
            write_object(array, dev, name, "table-part", data)?;
        }
        if accel {
            measure.phase(
                &format!("dev{dev}"),
                array,
                HostWork::single("sort", part_cpu).on_accelerator(moved),
            );
        }
    }
    if !accel {
        measure.phase("sort", array, HostWork::single("sort", cpu));
    }
    Ok(info.parts.clone())
}

/// A part's key column as read by the host.
enum HostKey {
    Plain(Vec<u8>),
    Dict(Vec<u8>, Vec<u8>),
    Bytes(Vec<u8>, Vec<u64>),
}

fn le_u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

/// K-way merges the sorted parts of `table` into one Parquet file; returns the rows written.
fn merge_to_parquet(array: &Array, table: &str, path: &Path) -> Result<u64> {
    let entry = array.table_entry(table)?.clone();
    let info = entry.table.as_ref().expect("table");
    let batches: Vec<RecordBatch> = entry
        .devices
        .iter()
        .enumerate()
        .map(|(i, dev)| read_part(array, *dev, table, &info.schema, info.key, &info.parts[i]))
        .collect::<Result<_>>()?;
    let key_type = batches
        .first()
        .map(|b| b.column(info.key).data_type().clone())
        .unwrap_or(arrow::datatypes::DataType::Null);
    let conv = arrow::row::RowConverter::new(vec![arrow::row::SortField::new(key_type)])
        .map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    let rows: Vec<arrow::row::Rows> = batches
        .iter()
        .map(|b| {
            conv.convert_columns(&[b.column(info.key).clone()])
                .map_err(|e| HostError::InvalidArgument(e.to_string()))
        })
        .collect::<Result<_>>()?;
    // Ties between parts go to the lower device, then row order: the merge is deterministic.
    let mut heap = BinaryHeap::new();
    for (p, r) in rows.iter().enumerate() {
        if r.num_rows() > 0 {
            heap.push(Reverse((r.row(0), p, 0usize)));
        }
    }
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(batches.iter().map(|b| b.num_rows()).sum());
    while let Some(Reverse((_, p, j))) = heap.pop() {
        order.push((p, j));
        if j + 1 < rows[p].num_rows() {
            heap.push(Reverse((rows[p].row(j + 1), p, j + 1)));
        }
    }
    let refs: Vec<&RecordBatch> = batches.iter().collect();
    let schema = Arc::new(info.schema.to_arrow());
    let tmp = path.with_extension("parquet.tmp");
    let file = std::fs::File::create(&tmp).map_err(|e| HostError::io(&tmp, e))?;
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, None)
        .map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    for chunk in order.chunks(64 << 10) {
        let b =
            interleave_record_batch(&refs, chunk).map_err(|e| HostError::InvalidArgument(e.to_string()))?;
        w.write(&b).map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    }
    w.close().map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    std::fs::rename(&tmp, path).map_err(|e| HostError::io(path, e))?;
    Ok(order.len() as u64)
}
