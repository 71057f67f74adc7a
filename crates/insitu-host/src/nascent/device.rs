//! NASCENT's device placement: every device sorts its key column into sorted indices at once (`sort`),
//! then shuffles its rows and key column into the output part with `gather` programs, several at a time on
//! its compute units (§3.5).

use std::collections::{BTreeMap, VecDeque};

use insitu_device::protocol::{
    Abort, Commit, Delete, ExtractKey, ExtractKeyArgs, Gather, GatherArgs, Identify, KeyColumn, LoadObject,
    RowShape, Sort, SortArgs, Stat, StoreToObject,
};
use insitu_device::DeviceClient;
use insitu_kernels::le;

use crate::array::Array;
use crate::buffer::DeviceBuffer;
use crate::error::{HostError, Result};
use crate::model::HostWork;
use crate::nascent::job::SortJob;
use crate::report::Measure;
use crate::table::info::{KeyEncoding, PartInfo};
use crate::table::store::{begin_object, begin_object_with, write_object};

/// Gather programs run at once per device (NASCENT instantiates several shuffle kernels, §3.2).
const SHUFFLE_WORKERS: usize = 4;

/// Bytes a gather writes into its output buffer at most. Tiles keep the flash path busy the whole shuffle
/// (§3.5: the shuffle kernels use the SSD's bandwidth fully): a tile is stored while the next ones are
/// gathered, where one range per worker (a quarter of the free memory: the whole part, for a part that
/// fits) stored nothing until all of it was gathered. 8 MiB is about 3 ms of a SmartSSD's flash writes,
/// against a command's few microseconds; and the emulator reuses the same hot buffers for them, where a
/// part-sized buffer was fresh memory each time.
const SHUFFLE_TILE_BYTES: u64 = 8 << 20;

pub(crate) fn sort_on_devices(
    array: &Array,
    job: &SortJob<'_>,
    memory_budget: Option<u64>,
    measure: &mut Measure,
) -> Result<Vec<PartInfo>> {
    let SortJob { table, out, devices, info, algo, by, .. } = *job;
    // Phase 0, when the sort column is stored row-wise: every device pulls it out of its rows.
    let (sortkey, sortkeyoff) = (format!("{out}#sortkey"), format!("{out}#sortkeyoff"));
    let keys: Vec<KeyColumn> = match by {
        None => info.parts.iter().map(|p| p.key_column(table)).collect(),
        Some(field) => {
            array.progress().stage("extract", Some(devices.len() as u64), "devices");
            let mut running = Vec::new();
            for (i, dev) in devices.iter().enumerate() {
                let args = ExtractKeyArgs {
                    rows: format!("{table}#rows"),
                    shape: info.parts[i].row_shape(table),
                    field: field.clone(),
                    out: sortkey.clone(),
                    out_offsets: sortkeyoff.clone(),
                };
                running.push(array.device(*dev)?.start::<ExtractKey>(args).map_err(HostError::device(*dev))?);
            }
            let keys = array.wait_all(running)?.into_iter().map(|o| o.key).collect();
            measure.phase("extract", array, HostWork::default())?;
            keys
        }
    };
    // Phase 1: every device sorts its key column, all at once.
    array.progress().stage("sort", Some(devices.len() as u64), "devices");
    let order = format!("{out}#order");
    let mut running = Vec::new();
    for (dev, key) in devices.iter().zip(keys) {
        let args = SortArgs { key, algo, out: order.clone(), memory_budget };
        running.push(array.device(*dev)?.start::<Sort>(args).map_err(HostError::device(*dev))?);
    }
    array.wait_all(running)?;
    if by.is_some() {
        for dev in devices {
            let d = array.device(*dev)?;
            for name in [&sortkey, &sortkeyoff] {
                if d.call(Stat { name: name.clone() }).is_ok() {
                    d.call(Delete { name: name.clone() }).map_err(HostError::device(*dev))?;
                }
            }
        }
    }
    measure.phase("sort", array, HostWork::default())?;
    // Phase 2: shuffle rows and key column on every device (each device's gathers run on its compute units
    // in parallel), counted in gather ranges as each device cuts its columns up.
    array.progress().stage("shuffle", None, "ranges");
    let parts = std::thread::scope(|s| {
        let handles: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(i, dev)| {
                let p = &info.parts[i];
                let attrs = crate::catalog::part_attrs(job.out_kind, i, devices, array.catalog().generation);
                s.spawn(move || shuffle_part(array, *dev, table, out, p, attrs))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("shuffle thread panicked")).collect::<Result<Vec<_>>>()
    })?;
    for dev in devices {
        array.device(*dev)?.call(Delete { name: order.clone() }).map_err(HostError::device(*dev))?;
    }
    // A host thread a device moves its part's rows (its requests wait at once, not one after another).
    measure.phase("shuffle", array, HostWork::default().on_threads(devices.len() as u32))?;
    Ok(parts)
}

/// What one gather pass moves: items of `src` (found as `shape` says, at most `max_item` bytes each) into
/// the new object `dst`, in the order of the sorted-indices object `order`.
struct GatherJob<'a> {
    src: &'a str,
    shape: RowShape,
    max_item: u64,
    rows: u64,
    order: &'a str,
    dst: &'a str,
    /// What the new object carries (see `catalog::part_attrs`).
    attrs: BTreeMap<String, String>,
}

fn object_size(d: &DeviceClient, name: &str) -> Result<u64> {
    Ok(d.call(Stat { name: name.into() }).map_err(HostError::device(d.id()))?.size)
}

/// Gathers one column (or the rows) of a part in sorted order into a new object; returns the gathered
/// offsets for variable-size items. The order is cut into ranges whose output fills a tile of
/// [`SHUFFLE_TILE_BYTES`], or a quarter of the device memory left (half the free memory, less the loaded
/// part) when that is less, and up to `SHUFFLE_WORKERS` gathers run at once, each into a buffer of its
/// own; the oldest is stored while the others run, so the ranges reach the object in order.
fn gather_into(array: &Array, dev: u32, job: &GatherJob<'_>) -> Result<Option<Vec<u64>>> {
    let d = array.device(dev)?;
    let GatherJob { src, max_item, rows, order, dst, .. } = *job;
    let total_bytes = match &job.shape {
        RowShape::Fixed { size } => size * rows,
        RowShape::Var { .. } => object_size(d, src)?,
    };
    let txn = begin_object_with(array, dev, dst, "table-part", total_bytes, job.attrs.clone())?;
    let mut running = VecDeque::new();
    let result = (|| {
        let item = max_item.max(1);
        let mut budget = d.call(Identify).map_err(HostError::device(dev))?.memory_available / 2;
        // When the source (and its offsets) fit half the free device memory, load them once over the
        // internal path and gather from DRAM; otherwise gather straight from flash.
        let offsets_obj = match &job.shape {
            RowShape::Var { offsets } => Some(offsets.as_str()),
            RowShape::Fixed { .. } => None,
        };
        let off_size = match offsets_obj {
            Some(o) => object_size(d, o)?,
            None => 0,
        };
        let mut loaded: Vec<DeviceBuffer<'_>> = Vec::new();
        if total_bytes + off_size <= budget {
            for (obj, size) in std::iter::once((src, total_bytes)).chain(offsets_obj.map(|o| (o, off_size))) {
                let b = DeviceBuffer::alloc(array, dev, size.max(1))?;
                d.call(LoadObject { name: obj.into(), offset: 0, len: size, dst: b.handle, dst_offset: 0 })
                    .map_err(HostError::device(dev))?;
                loaded.push(b);
            }
            budget -= total_bytes + off_size;
        }
        let tile = (SHUFFLE_TILE_BYTES / item).max(1);
        let per_worker = (budget / SHUFFLE_WORKERS as u64 / item).min(tile).clamp(1, rows.max(1));
        array.progress().add_total(rows.div_ceil(per_worker));
        let mut offsets = offsets_obj.map(|_| vec![0u64]);
        let mut start = 0u64;
        while start < rows || !running.is_empty() {
            while start < rows && running.len() < SHUFFLE_WORKERS {
                let count = per_worker.min(rows - start);
                let buf = DeviceBuffer::alloc(array, dev, count * item)?;
                let args = GatherArgs {
                    source: src.into(),
                    shape: job.shape.clone(),
                    order: order.into(),
                    start,
                    count: Some(count),
                    out: buf.handle,
                    source_in_memory: loaded.first().map(|b| b.handle),
                    offsets_in_memory: loaded.get(1).map(|b| b.handle),
                };
                let p = d.start::<Gather>(args).map_err(HostError::device(dev))?;
                running.push_back((buf, p));
                start += count;
            }
            let (buf, p) = running.pop_front().expect("a gather is running");
            let o = p.wait().map_err(HostError::device(dev))?;
            if let (Some(all), Some(offs)) = (offsets.as_mut(), o.offsets) {
                let base = *all.last().expect("starts with 0");
                all.extend(offs[1..].iter().map(|x| base + x));
            }
            d.call(StoreToObject { src: buf.handle, offset: 0, len: o.bytes, txn })
                .map_err(HostError::device(dev))?;
            array.progress().add(1);
        }
        Ok(offsets)
    })();
    match result {
        Ok(offs) => {
            d.call(Commit { txn }).map_err(HostError::device(dev))?;
            Ok(offs)
        }
        Err(e) => {
            // The gathers still running finish before their buffers and the object go.
            for (_, p) in running.drain(..) {
                let _ = p.wait();
            }
            let _ = d.call(Abort { txn });
            Err(e)
        }
    }
}

fn shuffle_part(
    array: &Array,
    dev: u32,
    table: &str,
    out: &str,
    p: &PartInfo,
    attrs: BTreeMap<String, String>,
) -> Result<PartInfo> {
    let order = format!("{out}#order");
    let rows = p.rows;
    // Rows.
    let (src, dst) = (format!("{table}#rows"), format!("{out}#rows"));
    let job = GatherJob {
        src: &src,
        shape: p.row_shape(table),
        max_item: p.max_row,
        rows,
        order: &order,
        dst: &dst,
        attrs,
    };
    if let Some(o) = gather_into(array, dev, &job)? {
        write_object(array, dev, &format!("{out}#rowoff"), "table-part", &le::encode_u64s(&o))?;
    }
    // Key column.
    match p.key {
        KeyEncoding::Dict { code_bits, .. } => {
            let cw = code_bits as u64 / 8;
            let (src, dst) = (format!("{table}#codes"), format!("{out}#codes"));
            let shape = RowShape::Fixed { size: cw };
            gather_into(
                array,
                dev,
                &GatherJob {
                    src: &src,
                    shape,
                    max_item: cw,
                    rows,
                    order: &order,
                    dst: &dst,
                    attrs: BTreeMap::new(),
                },
            )?;
            copy_inside(array, dev, &format!("{table}#dict"), &format!("{out}#dict"))?;
        }
        KeyEncoding::Bytes { max_key } => {
            let (src, dst) = (format!("{table}#key"), format!("{out}#key"));
            let shape = RowShape::Var { offsets: format!("{table}#keyoff") };
            let offs = gather_into(
                array,
                dev,
                &GatherJob {
                    src: &src,
                    shape,
                    max_item: max_key,
                    rows,
                    order: &order,
                    dst: &dst,
                    attrs: BTreeMap::new(),
                },
            )?;
            write_object(
                array,
                dev,
                &format!("{out}#keyoff"),
                "table-part",
                &le::encode_u64s(&offs.unwrap_or_default()),
            )?;
        }
        KeyEncoding::Plain { key_type } => {
            let w = key_type.width() as u64;
            let (src, dst) = (format!("{table}#key"), format!("{out}#key"));
            let shape = RowShape::Fixed { size: w };
            gather_into(
                array,
                dev,
                &GatherJob {
                    src: &src,
                    shape,
                    max_item: w,
                    rows,
                    order: &order,
                    dst: &dst,
                    attrs: BTreeMap::new(),
                },
            )?;
        }
    }
    Ok(p.clone())
}

/// Copies an object inside the device: flash -> device memory -> flash.
fn copy_inside(array: &Array, dev: u32, src: &str, dst: &str) -> Result<()> {
    let d = array.device(dev)?;
    let size = object_size(d, src)?;
    let buf = DeviceBuffer::alloc(array, dev, size.max(1))?;
    d.call(LoadObject { name: src.into(), offset: 0, len: size, dst: buf.handle, dst_offset: 0 })
        .map_err(HostError::device(dev))?;
    let txn = begin_object(array, dev, dst, "table-part", size)?;
    d.call(StoreToObject { src: buf.handle, offset: 0, len: size, txn }).map_err(HostError::device(dev))?;
    d.call(Commit { txn }).map_err(HostError::device(dev))?;
    Ok(())
}
