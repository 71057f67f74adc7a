//! `get-table`: read a table's parts back over the host link and write them as one Parquet file, parts in
//! device order.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::arrow::ArrowWriter;
use serde_json::json;

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::report::{Measure, Report};
use crate::table::store::read_part;

/// Writes table `name` to `out` as Parquet.
pub fn get_table(array: &Array, name: &str, out: &Path) -> Result<Report> {
    let entry = array.table_entry(name)?.clone();
    let info = entry.table.as_ref().expect("table entries have table info");
    let measure = Measure::start("get-table", array);
    let schema = Arc::new(info.schema.to_arrow());
    let tmp = out.with_extension("parquet.tmp");
    let file = File::create(&tmp).map_err(|e| HostError::io(&tmp, e))?;
    let mut w =
        ArrowWriter::try_new(file, schema, None).map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    let mut rows = 0u64;
    for (i, dev) in entry.devices.iter().enumerate() {
        let b = read_part(array, *dev, name, &info.schema, info.key, &info.parts[i])?;
        rows += b.num_rows() as u64;
        w.write(&b).map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    }
    w.close().map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    std::fs::rename(&tmp, out).map_err(|e| HostError::io(out, e))?;
    Ok(measure.finish(array, json!({ "name": name, "rows": rows, "output": out })))
}
