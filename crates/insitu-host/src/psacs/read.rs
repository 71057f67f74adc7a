//! `shuffle-read`: partition p of a shuffle output, gathered from every device (its index entry, then its
//! chunks), turned back into rows of the source table.

use std::path::Path;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::compute::concat_batches;
use arrow::record_batch::RecordBatch;
use insitu_kernels::columnar::{columns_to_records, RecordFormat};
use insitu_kernels::le;
use insitu_kernels::shuffle::{record_format, ChunkLayout};
use serde_json::json;

use crate::array::Array;
use crate::catalog::EntryKind;
use crate::error::{HostError, Result};
use crate::psacs::info::ShuffleInfo;
use crate::report::{Measure, Report};
use crate::table::export::ParquetFile;
use crate::table::info::{KeyEncoding, PartInfo};
use crate::table::layout::{decode_part, key_from_bits, key_from_bytes};
use crate::table::store::read_range;

/// Reads partition `p` of shuffle output `name` from every device, as one batch.
pub fn read_partition(array: &Array, name: &str, p: u32) -> Result<RecordBatch> {
    let entry = array.entry(name)?;
    let EntryKind::Shuffle(info) = &entry.kind else {
        return Err(HostError::InvalidArgument(format!("{name:?} is not a shuffle output")));
    };
    if p >= info.partitions {
        return Err(HostError::InvalidArgument(format!(
            "{name:?} has partitions 0 to {}, not {p}",
            info.partitions.saturating_sub(1)
        )));
    }
    let damaged = |detail: String| HostError::Damaged { name: name.into(), detail };
    let mut batches = Vec::new();
    for (i, dev) in entry.devices.iter().enumerate() {
        let part = &info.parts[i];
        let fmt = record_format(&info.record_format, field_kind(part));
        let chunks = match info.layout {
            ChunkLayout::Column => fmt.columns(),
            ChunkLayout::Row => 1,
        };
        let entry_bytes = 8 * (2 + chunks) as u64;
        let e = le::decode_u64s(&read_range(
            array,
            *dev,
            &format!("{name}#index"),
            p as u64 * entry_bytes,
            entry_bytes,
        )?);
        let (rows, mut at) = (e[0] as usize, e[1]);
        let mut cols = Vec::new();
        for len in &e[2..] {
            let chunk = read_range(array, *dev, &format!("{name}#data"), at, *len)?;
            cols.push(info.codec.decode(chunk).map_err(|x| damaged(x.to_string()))?);
            at += len;
        }
        let (records, offsets) = match info.layout {
            ChunkLayout::Column => {
                columns_to_records(&cols, rows, &fmt).map_err(|x| damaged(x.to_string()))?
            }
            ChunkLayout::Row => {
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
        batches.push(records_to_batch(info, part, &fmt, &records, &offsets)?);
    }
    let schema = Arc::new(info.schema.to_arrow());
    concat_batches(&schema, &batches).map_err(HostError::arrow("joining the partition's parts"))
}

fn field_kind(p: &PartInfo) -> insitu_kernels::columnar::FieldKind {
    match p.key {
        KeyEncoding::Bytes { .. } => insitu_kernels::columnar::FieldKind::Var,
        _ => insitu_kernels::columnar::FieldKind::Fixed(p.key_width()),
    }
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
    let bytes_key = matches!(part.key, KeyEncoding::Bytes { .. });
    let mut rows = Vec::with_capacity(records.len());
    let mut row_offs = vec![0u64];
    let mut key_bits = Vec::new();
    let (mut kdata, mut koffs) = (Vec::new(), vec![0u64]);
    for w in offsets.windows(2) {
        let rec = &records[w[0] as usize..w[1] as usize];
        let ranges = fmt.field_ranges(rec).map_err(|e| damaged(e.to_string()))?;
        let k = &rec[ranges[0].clone()];
        if bytes_key {
            kdata.extend_from_slice(k);
            koffs.push(kdata.len() as u64);
        } else {
            let mut b = [0u8; 8];
            b[..k.len()].copy_from_slice(k);
            key_bits.push(u64::from_le_bytes(b));
        }
        // The row is the record without its key field (and the key's length prefix when variable).
        let key_start = if bytes_key { ranges[0].start - 4 } else { ranges[0].start };
        rows.extend_from_slice(&rec[..key_start]);
        rows.extend_from_slice(&rec[ranges[0].end..]);
        row_offs.push(rows.len() as u64);
    }
    let ty = &info.schema.columns[info.key].ty;
    let key_col: ArrayRef =
        if bytes_key { key_from_bytes(&kdata, &koffs, ty)? } else { key_from_bits(&key_bits, ty)? };
    decode_part(&info.schema, info.key, key_col, &rows, &row_offs)
}

/// Partition `p` from every device, as one Arrow batch, with the report of reading it.
pub fn shuffle_read_batch(array: &Array, name: &str, p: u32) -> Result<(RecordBatch, Report)> {
    let measure = Measure::start("shuffle-read", array)?;
    let batch = read_partition(array, name, p)?;
    let rows = batch.num_rows();
    let headline = format!("shuffle-read {name} partition {p}: {rows} rows");
    let report = measure.finish(array, headline, json!({ "name": name, "partition": p, "rows": rows }))?;
    Ok((batch, report))
}

/// `shuffle-read`: partition `p` from every device, written as Parquet.
pub fn shuffle_read(array: &Array, name: &str, p: u32, out: &Path) -> Result<Report> {
    let measure = Measure::start("shuffle-read", array)?;
    let batch = read_partition(array, name, p)?;
    let mut file = ParquetFile::create(out, batch.schema())?;
    file.write(&batch)?;
    file.finish()?;
    let rows = batch.num_rows();
    let headline = format!("shuffle-read {name} partition {p}: {rows} rows to {}", out.display());
    measure.finish(array, headline, json!({ "name": name, "partition": p, "rows": rows, "output": out }))
}
