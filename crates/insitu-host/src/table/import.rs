//! `put-table`: load a Parquet or CSV file, spread its rows over the devices, store each part in the hybrid
//! layout. Everything is read and checked before anything is stored, so a bad file stores nothing.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::array::UInt32Array;
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use serde_json::json;

use crate::array::{validate_user_name, Array};
use crate::catalog::{EntryKind, ObjectEntry};
use crate::error::{HostError, Result};
use crate::report::{Measure, Report};
use crate::table::info::{Partitioning, TableInfo};
use crate::table::layout::{encode_part, normalize};
use crate::table::schema::TableSchema;
use crate::table::store::write_part;

/// Reads a whole Parquet or CSV file (by extension; CSV needs a header line).
pub fn read_table_file(path: &Path) -> Result<RecordBatch> {
    let file = File::open(path).map_err(|e| HostError::io(path, e))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let bad = |e: String| HostError::InvalidArgument(format!("{}: {e}", path.display()));
    let (schema, batches): (SchemaRef, Vec<RecordBatch>) = match ext.as_str() {
        "parquet" | "pq" => {
            let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                .map_err(|e| bad(e.to_string()))?
                .with_batch_size(64 << 10)
                .build()
                .map_err(|e| bad(e.to_string()))?;
            let schema = r.schema();
            (schema, r.collect::<std::result::Result<_, _>>().map_err(|e| bad(e.to_string()))?)
        }
        "csv" => {
            let fmt = arrow::csv::reader::Format::default().with_header(true);
            let (schema, _) = fmt.infer_schema(&file, Some(10_000)).map_err(|e| bad(e.to_string()))?;
            // A column with no values to infer from (a header-only file, or a column always empty) is
            // text: there is nothing to say it is anything else.
            let schema = arrow::datatypes::Schema::new(
                schema
                    .fields()
                    .iter()
                    .map(|f| match f.data_type() {
                        arrow::datatypes::DataType::Null => {
                            arrow::datatypes::Field::new(f.name(), arrow::datatypes::DataType::Utf8, true)
                        }
                        _ => f.as_ref().clone(),
                    })
                    .collect::<Vec<_>>(),
            );
            let file = File::open(path).map_err(|e| HostError::io(path, e))?;
            let schema = Arc::new(schema);
            let r = arrow::csv::ReaderBuilder::new(schema.clone())
                .with_format(fmt)
                .with_batch_size(64 << 10)
                .build(file)
                .map_err(|e| bad(e.to_string()))?;
            (schema, r.collect::<std::result::Result<_, _>>().map_err(|e| bad(e.to_string()))?)
        }
        _ => return Err(bad("unknown format: give a .parquet or .csv file".into())),
    };
    concat_batches(&schema, &batches).map_err(|e| bad(e.to_string()))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// Row indices for each device.
fn partition(
    batch: &RecordBatch,
    schema: &TableSchema,
    how: &Partitioning,
    n: usize,
) -> Result<Vec<Vec<u32>>> {
    let mut parts = vec![Vec::new(); n];
    match how {
        Partitioning::RoundRobin => {
            for i in 0..batch.num_rows() {
                parts[i % n].push(i as u32);
            }
        }
        Partitioning::Hash { column: col } => {
            let c = schema.index_of(col)?;
            let a = batch.column(c);
            let conv = arrow::row::RowConverter::new(vec![arrow::row::SortField::new(a.data_type().clone())])
                .map_err(HostError::arrow("hashing the partition column"))?;
            let rows = conv
                .convert_columns(std::slice::from_ref(a))
                .map_err(HostError::arrow("hashing the partition column"))?;
            for i in 0..batch.num_rows() {
                parts[(fnv1a(rows.row(i).as_ref()) % n as u64) as usize].push(i as u32);
            }
        }
    }
    Ok(parts)
}

/// Options of `put-table`.
#[derive(Debug, Clone)]
pub struct PutTable {
    pub name: String,
    pub key: Option<String>,
    pub partition: Partitioning,
    pub dict: Option<String>,
}

/// Stores the table in `path` as `opts.name`.
pub fn put_table(array: &mut Array, path: &Path, opts: &PutTable) -> Result<Report> {
    validate_user_name(&opts.name)?;
    array.check_free(&opts.name)?;
    put_table_batch(array, read_table_file(path)?, opts)
}

/// Stores the rows of `raw` (an Arrow batch handed over by a caller, such as the Python front) as
/// `opts.name`, like [`put_table`] stores a file's.
pub fn put_table_batch(array: &mut Array, raw: RecordBatch, opts: &PutTable) -> Result<Report> {
    validate_user_name(&opts.name)?;
    array.check_free(&opts.name)?;
    let schema = TableSchema::from_arrow(&raw.schema())?;
    let batch = normalize(&raw, &schema)?;
    drop(raw);
    let key = match &opts.key {
        Some(k) => schema.index_of(k)?,
        None => 0,
    };
    schema.columns[key].ty.key_kind(&schema.columns[key].name)?;
    if let Some(d) = &opts.dict {
        if *d != schema.columns[key].name {
            return Err(HostError::InvalidArgument(format!(
                "--dict {d:?}: dictionary encoding applies to the key column ({:?})",
                schema.columns[key].name
            )));
        }
    }
    let n = array.device_count();
    let rows_per_device = partition(&batch, &schema, &opts.partition, n)?;
    // Encode every part before storing any: a bad value fails the whole load with nothing stored.
    let mut encoded = Vec::with_capacity(n);
    let mut dict_fallback = false;
    for idx in &rows_per_device {
        let part = take_record_batch(&batch, &UInt32Array::from(idx.clone()))
            .map_err(HostError::arrow("splitting the table into parts"))?;
        let (enc, used) = encode_part(&part, &schema, key, opts.dict.is_some())?;
        dict_fallback |= opts.dict.is_some() && !used;
        encoded.push(enc);
    }
    let measure = Measure::start("put-table", array)?;
    let mut parts = Vec::with_capacity(n);
    for (dev, enc) in encoded.iter().enumerate() {
        match write_part(array, dev as u32, &opts.name, enc) {
            Ok(info) => {
                parts.push(info);
                array.faults.hit("put-table-part");
            }
            Err(e) => {
                for (d, info) in parts.iter().enumerate() {
                    crate::table::store::delete_quietly(array, d as u32, info.objects(&opts.name));
                }
                return Err(e);
            }
        }
    }
    let size: u64 = encoded.iter().map(|e| e.row_data.len() as u64).sum();
    let key_encodings: Vec<&str> = parts.iter().map(|p| p.key.name()).collect();
    let rows_per_device: Vec<u64> = parts.iter().map(|p| p.rows).collect();
    let mut result = json!({
        "name": opts.name,
        "rows": batch.num_rows(),
        "columns": schema.columns.len(),
        "key": schema.columns[key].name,
        "rows_per_device": rows_per_device,
        "key_encoding": key_encodings,
    });
    let mut headline = format!(
        "put-table {}: {} rows, {} columns, key {} ({}), rows per device {}",
        opts.name,
        batch.num_rows(),
        schema.columns.len(),
        schema.columns[key].name,
        json!(key_encodings),
        json!(rows_per_device)
    );
    if dict_fallback {
        let note = format!(
            "column {:?} has more than 65,536 distinct values on some device: stored plain there",
            schema.columns[key].name
        );
        headline.push_str(&format!("\nwarning: {note}"));
        result["note"] = json!(note);
    }
    let entry = ObjectEntry {
        name: opts.name.clone(),
        size,
        stripe_unit: 0,
        devices: (0..n as u32).collect(),
        kind: EntryKind::Table(TableInfo {
            schema,
            key,
            partition: opts.partition.clone(),
            parts,
            sorted: false,
        }),
    };
    array.commit_entry(entry)?;
    array.faults.hit("put-table-catalog");
    measure.finish(array, headline, result)
}
