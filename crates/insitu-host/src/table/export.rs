//! Writing tables out as Parquet: [`ParquetFile`] (an [`OutFile`]: written beside its destination, renamed
//! into place when complete, removed if anything fails, so a failed command leaves no partial file) and `get-table`,
//! which reads a table's parts back over the host link and writes them as one file, parts in device order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use serde_json::json;

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::outfile::OutFile;
use crate::report::{Measure, Report};
use crate::table::store::each_part;

/// A Parquet file being written.
#[derive(Debug)]
pub struct ParquetFile {
    path: PathBuf,
    writer: Option<ArrowWriter<OutFile>>,
}

impl ParquetFile {
    /// Fails, naming the problem, if `path` could not be written ([`OutFile::check_path`]) or names a file
    /// of another format: a table is written as Parquet, and `x.csv` holding Parquet would surprise.
    pub fn check_path(path: &Path) -> Result<()> {
        OutFile::check_path(path)?;
        let ext = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase());
        if let Some(ext) = ext.filter(|e| {
            matches!(
                e.as_str(),
                "csv" | "tsv" | "txt" | "json" | "jsonl" | "arrow" | "ipc" | "feather" | "orc"
            )
        }) {
            return Err(HostError::InvalidArgument(format!(
                "{}: tables are written as Parquet, not .{ext}: name the file .parquet",
                path.display()
            )));
        }
        Ok(())
    }

    /// Starts writing `path` with `schema`.
    pub fn create(path: &Path, schema: SchemaRef) -> Result<ParquetFile> {
        Self::check_path(path)?;
        let file = OutFile::create(path)?;
        let mut out = ParquetFile { path: path.to_path_buf(), writer: None };
        // Parquet's own types where Arrow's have none (a Date64 as a DATE, as other readers expect it:
        // written as it is, pyarrow reads it back as plain int64 milliseconds).
        let props = parquet::file::properties::WriterProperties::builder().set_coerce_types(true).build();
        out.writer = Some(ArrowWriter::try_new(file, schema, Some(props)).map_err(out.failed())?);
        Ok(out)
    }

    fn failed(&self) -> impl FnOnce(parquet::errors::ParquetError) -> HostError {
        HostError::parquet(format!("writing {}", self.path.display()))
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let f = self.failed();
        match self.writer.as_mut() {
            Some(w) => w.write(batch).map_err(f),
            None => Ok(()),
        }
    }

    /// Completes the file and moves it into place.
    pub fn finish(mut self) -> Result<()> {
        match self.writer.take() {
            Some(w) => w.into_inner().map_err(self.failed())?.commit(),
            None => Ok(()),
        }
    }
}

/// Writes table `name` to `out` as Parquet.
pub fn get_table(array: &Array, name: &str, out: &Path) -> Result<Report> {
    let (_, info) = array.table_entry(name)?;
    let measure = Measure::start("get-table", array)?;
    let mut file = ParquetFile::create(out, Arc::new(info.schema.to_arrow()))?;
    let rows = each_part(array, name, &mut |b| file.write(&b))?;
    file.finish()?;
    let headline = format!("get-table {name}: {rows} rows to {}{}", out.display(), order_note(array, name)?);
    measure.finish(array, headline, json!({ "name": name, "rows": rows, "output": out, "merged": false }))
}

/// Reads table `name` back as Arrow batches, one per part in device order (what [`get_table`] writes).
pub fn read_table(array: &Array, name: &str) -> Result<(Vec<RecordBatch>, Report)> {
    let measure = Measure::start("get-table", array)?;
    let mut batches = Vec::new();
    let rows = each_part(array, name, &mut |b| {
        batches.push(b);
        Ok(())
    })?;
    let headline = format!("get-table {name}: {rows} rows{}", order_note(array, name)?);
    let report = measure.finish(array, headline, json!({ "name": name, "rows": rows, "merged": false }))?;
    Ok((batches, report))
}

/// For a sort's output over several devices: parts in device order are not one order.
fn order_note(array: &Array, name: &str) -> Result<String> {
    let (entry, info) = array.table_entry(name)?;
    Ok(match info.sort_column() {
        Some(c) if entry.devices.len() > 1 => format!(
            "\n  parts in device order, each sorted by {}: `--merged` writes one globally sorted file",
            info.schema.columns[c].name
        ),
        _ => String::new(),
    })
}
