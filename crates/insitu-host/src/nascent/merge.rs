//! The global order: a k-way merge at the host of the sorted parts of a table, written as one Parquet
//! file, by the column the parts are sorted by (Arrow's row format compares keys of any type, nulls last as
//! the devices sort them; ties go to the lower device, then row order, so the merge is deterministic).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::Arc;

use arrow::compute::interleave_record_batch;
use arrow::record_batch::RecordBatch;

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::report::{Measure, Report};
use crate::table::export::ParquetFile;
use crate::table::store::each_part;

/// `get-table --merged`: writes a sorted table (a sort's output) as one globally sorted Parquet file.
pub fn get_table_merged(array: &Array, name: &str, out: &Path) -> Result<Report> {
    check_sorted(array, name)?;
    crate::table::export::ParquetFile::check_path(out)?;
    let measure = Measure::start("get-table (merged)", array)?;
    let rows = merge_to_parquet(array, name, out)?;
    let headline = format!("get-table {name}: {rows} rows merged in key order to {}", out.display());
    let result = serde_json::json!({ "name": name, "rows": rows, "output": out, "merged": true });
    measure.finish(array, headline, result)
}

/// A sorted table (a sort's output) read back as Arrow batches in one global key order.
pub fn read_table_merged(array: &Array, name: &str) -> Result<(Vec<RecordBatch>, Report)> {
    check_sorted(array, name)?;
    let measure = Measure::start("get-table (merged)", array)?;
    let mut batches = Vec::new();
    let rows = merge_parts(array, name, &mut |b| {
        batches.push(b);
        Ok(())
    })?;
    let headline = format!("get-table {name}: {rows} rows merged in key order");
    let report =
        measure.finish(array, headline, serde_json::json!({ "name": name, "rows": rows, "merged": true }))?;
    Ok((batches, report))
}

fn check_sorted(array: &Array, name: &str) -> Result<()> {
    let (_, info) = array.table_entry(name)?;
    if info.sort_column().is_none() {
        return Err(HostError::InvalidArgument(format!(
            "table {name:?} is not a sort's output, so its parts are not sorted: sort it first (`insitu sort \
             {name} --key {}`), or export it as stored without --merged",
            info.schema.columns[info.key].name
        )));
    }
    Ok(())
}

/// K-way merges the sorted parts of `table` into one Parquet file; returns the rows written.
pub fn merge_to_parquet(array: &Array, table: &str, path: &Path) -> Result<u64> {
    let (_, info) = array.table_entry(table)?;
    let mut file = ParquetFile::create(path, Arc::new(info.schema.to_arrow()))?;
    let rows = merge_parts(array, table, &mut |b| file.write(&b))?;
    file.finish()?;
    Ok(rows)
}

/// K-way merges the sorted parts of `table`, handing the merged rows to `sink` in batches; returns the
/// rows.
fn merge_parts(array: &Array, table: &str, sink: &mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<u64> {
    let (_, info) = array.table_entry(table)?;
    let mut batches: Vec<RecordBatch> = Vec::new();
    each_part(array, table, &mut |b| {
        batches.push(b);
        Ok(())
    })?;
    // The column the parts are sorted by, in the devices' order: ascending, nulls last.
    let col = info.sort_column().unwrap_or(info.key);
    let key_type = batches
        .first()
        .map(|b| b.column(col).data_type().clone())
        .unwrap_or(arrow::datatypes::DataType::Null);
    let keys = "comparing the sort key";
    let order = arrow::compute::SortOptions { descending: false, nulls_first: false };
    let conv = arrow::row::RowConverter::new(vec![arrow::row::SortField::new_with_options(key_type, order)])
        .map_err(HostError::arrow(keys))?;
    let rows: Vec<arrow::row::Rows> = batches
        .iter()
        .map(|b| conv.convert_columns(&[b.column(col).clone()]).map_err(HostError::arrow(keys)))
        .collect::<Result<_>>()?;
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
    for chunk in order.chunks(64 << 10) {
        sink(interleave_record_batch(&refs, chunk).map_err(HostError::arrow("merging the parts"))?)?;
    }
    Ok(order.len() as u64)
}
