//! `put-table`: load a Parquet or CSV file, spread its rows over the devices, store each part in the hybrid
//! layout, a batch at a time. Nothing is visible until every row is in: a bad file stores nothing.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use serde_json::json;

use crate::array::{validate_table_name, Array};
use crate::catalog::{EntryKind, ObjectEntry};
use crate::error::{HostError, Result};
use crate::report::{Measure, Report};
use crate::table::info::{KeyEncoding, PartInfo, Partitioning, TableInfo};
use crate::table::layout::{encode_part, encode_rows_of, normalize};
use crate::table::schema::{KeyKind, TableSchema};
use crate::table::store::PartWriter;

/// Rows at a time through the loader: batches read from a file, and slices of a caller's batch.
const BATCH_ROWS: usize = 64 << 10;

/// A Parquet or CSV file (by extension; CSV needs a header line) opened for reading batch by batch.
pub struct TableFile {
    pub schema: SchemaRef,
    pub batches: Box<dyn Iterator<Item = Result<RecordBatch>> + Send>,
}

impl std::fmt::Debug for TableFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFile").field("schema", &self.schema).finish_non_exhaustive()
    }
}

impl TableFile {
    pub fn open(path: &Path) -> Result<TableFile> {
        let file = File::open(path).map_err(|e| HostError::io(path, e))?;
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        let shown = path.display().to_string();
        // What Arrow or Parquet refused in the file is a format error (Python's FormatError), named by path.
        let pq = |what: &String| HostError::parquet(what.clone());
        let ar = |what: &String| HostError::arrow(what.clone());
        let bad = |e: String| HostError::InvalidArgument(format!("{}: {e}", path.display()));
        let (schema, batches): (SchemaRef, Box<dyn Iterator<Item = Result<RecordBatch>> + Send>) = match ext
            .as_str()
        {
            "parquet" | "pq" => {
                use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
                let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq(&shown))?;
                // View-typed strings (as tpchgen-cli writes them) are read straight into the plain
                // offsets-and-bytes arrays the table stores, instead of into views cast afterwards.
                let plain = |t: &DataType| match t {
                    DataType::Utf8View => Some(DataType::Utf8),
                    DataType::BinaryView => Some(DataType::Binary),
                    _ => None,
                };
                let found = builder.schema().clone();
                let builder = if found.fields().iter().any(|f| plain(f.data_type()).is_some()) {
                    let fields: Vec<Field> = found
                        .fields()
                        .iter()
                        .map(|f| match plain(f.data_type()) {
                            Some(t) => f.as_ref().clone().with_data_type(t),
                            None => f.as_ref().clone(),
                        })
                        .collect();
                    let wanted = Arc::new(Schema::new_with_metadata(fields, found.metadata().clone()));
                    let file = File::open(path).map_err(|e| HostError::io(path, e))?;
                    ParquetRecordBatchReaderBuilder::try_new_with_options(
                        file,
                        ArrowReaderOptions::new().with_schema(wanted),
                    )
                    .map_err(pq(&shown))?
                } else {
                    builder
                };
                // The builder's schema, not the reader's: the reader's drops the schema's metadata.
                let schema = builder.schema().clone();
                let r = builder.with_batch_size(BATCH_ROWS).build().map_err(pq(&shown))?;
                let shown = shown.clone();
                (schema, Box::new(r.map(move |b| b.map_err(ar(&shown)))))
            }
            "csv" => {
                let fmt = arrow::csv::reader::Format::default().with_header(true);
                let (schema, _) = fmt.infer_schema(&file, Some(10_000)).map_err(ar(&shown))?;
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
                    .with_batch_size(BATCH_ROWS)
                    .build(file)
                    .map_err(ar(&shown))?;
                let shown = shown.clone();
                (schema, Box::new(r.map(move |b| b.map_err(ar(&shown)))))
            }
            _ => return Err(bad("unknown format: give a .parquet or .csv file".into())),
        };
        Ok(TableFile { schema, batches })
    }
}

/// Reads a whole Parquet or CSV file into one batch.
pub fn read_table_file(path: &Path) -> Result<RecordBatch> {
    let f = TableFile::open(path)?;
    let batches = f.batches.collect::<Result<Vec<_>>>()?;
    concat_batches(&f.schema, &batches).map_err(HostError::arrow("joining the batches of a table file"))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// Row indices of `batch` for each device; `first` is the batch's first row in the table (round-robin
/// deals rows by their place in the table).
fn partition(
    batch: &RecordBatch,
    schema: &TableSchema,
    how: &Partitioning,
    n: usize,
    first: u64,
) -> Result<Vec<Vec<u32>>> {
    let mut parts = vec![Vec::new(); n];
    match how {
        Partitioning::RoundRobin => {
            for i in 0..batch.num_rows() {
                parts[((first + i as u64) % n as u64) as usize].push(i as u32);
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

/// Stores the table in `path` as `opts.name`, reading it a batch at a time.
pub fn put_table(array: &mut Array, path: &Path, opts: &PutTable) -> Result<Report> {
    validate_table_name(&opts.name)?;
    array.check_free(&opts.name)?;
    let file = TableFile::open(path)?;
    load(array, &file.schema, file.batches, opts)
}

/// Stores the rows of `raw` (an Arrow batch handed over by a caller, such as the Python front) as
/// `opts.name`, like [`put_table`] stores a file's.
pub fn put_table_batch(array: &mut Array, raw: RecordBatch, opts: &PutTable) -> Result<Report> {
    validate_table_name(&opts.name)?;
    array.check_free(&opts.name)?;
    let schema = raw.schema();
    load(array, &schema, std::iter::once(Ok(raw)), opts)
}

/// Joins a thread when dropped (the reader of a load that stopped early stops at its next batch: its
/// channel is closed).
struct JoinOnDrop(Option<std::thread::JoinHandle<()>>);

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

/// Streams `batches` into the devices: each slice of rows is checked, spread over the devices, encoded
/// and appended to the parts being written, so memory holds a slice and a few chunks a device, never
/// the table. The parts are committed once every row is in, then the catalog entry: a bad value, a full
/// device or an interrupted load leaves nothing of the table behind (the open parts are abandoned).
fn load(
    array: &mut Array,
    arrow_schema: &SchemaRef,
    batches: impl Iterator<Item = Result<RecordBatch>> + Send + 'static,
    opts: &PutTable,
) -> Result<Report> {
    let schema = TableSchema::from_arrow(arrow_schema)?;
    let key = match &opts.key {
        Some(k) => schema.index_of(k)?,
        None => 0,
    };
    let key_kind = schema.columns[key].ty.key_kind(&schema.columns[key].name)?;
    if let Some(d) = &opts.dict {
        if *d != schema.columns[key].name {
            return Err(HostError::InvalidArgument(format!(
                "--dict {d:?}: dictionary encoding applies to the key column ({:?})",
                schema.columns[key].name
            )));
        }
    }
    if let Partitioning::Hash { column } = &opts.partition {
        schema.index_of(column)?;
    }
    let key_encoding = match key_kind {
        KeyKind::Bytes => KeyEncoding::Bytes { max_key: 0 },
        KeyKind::Fixed(key_type) if opts.dict.is_some() => KeyEncoding::Dict { key_type, code_bits: 0 },
        KeyKind::Fixed(key_type) => KeyEncoding::Plain { key_type },
    };
    let var_rows =
        schema.columns.iter().enumerate().any(|(c, col)| c != key && col.ty.fixed_width().is_none());
    let n = array.device_count();
    let measure = Measure::start("put-table", array)?;
    let (parts, size, rows, dict_fallback) = {
        let a: &Array = array;
        // Each part says what table it belongs to (for `fsck --repair`, should the catalog lose it).
        let head = crate::catalog::EntryKind::Table(TableInfo {
            schema: schema.clone(),
            key,
            partition: opts.partition.clone(),
            parts: Vec::new(),
            sorted: false,
            sorted_by: None,
        });
        let devices: Vec<u32> = (0..n as u32).collect();
        let mut writers = (0..n as u32)
            .map(|dev| {
                let attrs = crate::catalog::part_attrs(&head, dev as usize, &devices, a.catalog().generation);
                PartWriter::begin(a, dev, &opts.name, var_rows, key_encoding, attrs)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut rows = 0u64;
        let mut fixed_row_size = None;
        // The next batches are read (decompressed, decoded) on their own thread while these are encoded.
        let (tx, rx) = std::sync::mpsc::sync_channel(2);
        let reader = std::thread::spawn(move || {
            for b in batches {
                if tx.send(b).is_err() {
                    break;
                }
            }
        });
        let mut joined = JoinOnDrop(Some(reader));
        a.progress().stage("load", None, "rows");
        for batch in rx {
            let batch = batch?;
            let mut at = 0;
            while at < batch.num_rows() {
                let len = BATCH_ROWS.min(batch.num_rows() - at);
                let slice = normalize(&batch.slice(at, len), &schema)?;
                if let Some(i) = slice.column(key).nulls().and_then(|b| (0..len).find(|i| b.is_null(*i))) {
                    return Err(HostError::InvalidArgument(format!(
                        "key column {:?} has a null at row {}",
                        schema.columns[key].name,
                        rows + i as u64
                    )));
                }
                for (dev, idx) in
                    partition(&slice, &schema, &opts.partition, n, rows)?.into_iter().enumerate()
                {
                    if idx.is_empty() {
                        continue;
                    }
                    let (enc, _) = encode_rows_of(&slice, &idx, &schema, key, false)?;
                    fixed_row_size = enc.row_size;
                    writers[dev].append(&enc)?;
                }
                rows += len as u64;
                at += len;
                a.progress().add(len as u64);
            }
            a.faults.hit("put-table-batch");
        }
        // The channel closes when the reader is done, or if it panicked: only a clean end is the end.
        if joined.0.take().is_some_and(|h| h.join().is_err()) {
            return Err(HostError::InvalidArgument(
                "reading the table file failed half-way (its reader panicked); nothing was stored".into(),
            ));
        }
        // With no row to say it, a fixed row's size comes from the schema (as encoding an empty part does).
        if fixed_row_size.is_none() && !var_rows {
            let empty = normalize(&RecordBatch::new_empty(Arc::new(schema.to_arrow())), &schema)?;
            fixed_row_size = encode_part(&empty, &schema, key, false)?.0.row_size;
        }
        let size: u64 = writers.iter().map(|w| w.row_bytes()).sum();
        let mut parts: Vec<PartInfo> = Vec::with_capacity(n);
        let mut dict_fallback = false;
        let mut writers = writers.into_iter();
        while let Some(w) = writers.next() {
            match w.finish(fixed_row_size) {
                Ok((info, used)) => {
                    dict_fallback |= opts.dict.is_some() && !used;
                    parts.push(info);
                    a.faults.hit("put-table-part");
                }
                Err(e) => {
                    drop(writers);
                    for (d, info) in parts.iter().enumerate() {
                        crate::table::store::delete_quietly(a, d as u32, info.objects(&opts.name));
                    }
                    return Err(e);
                }
            }
        }
        (parts, size, rows, dict_fallback)
    };
    let key_encodings: Vec<&str> = parts.iter().map(|p| p.key.name()).collect();
    let rows_per_device: Vec<u64> = parts.iter().map(|p| p.rows).collect();
    let mut result = json!({
        "name": opts.name,
        "rows": rows,
        "columns": schema.columns.len(),
        "key": schema.columns[key].name,
        "rows_per_device": rows_per_device,
        "key_encoding": key_encodings,
    });
    let mut headline = format!(
        "put-table {}: {} rows, {} columns, key {} ({}), rows per device {}",
        opts.name,
        rows,
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
            sorted_by: None,
        }),
        commits: Vec::new(),
    };
    array.commit_entry(entry)?;
    array.faults.hit("put-table-catalog");
    measure.finish(array, headline, result)
}
