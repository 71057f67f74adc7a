//! The shuffle output formats PSACS compares in Fig. 15 (ICCD '21 §V-F): "LZ4 on shuffle outputs in
//! UnsafeRow (row-major) format [21]" against "the same shuffle outputs but in parquet [22] which also uses
//! LZ4 compression but compresses in column-major format". Both are written here from the rows of each
//! partition, and only their sizes are kept.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::{HostError, Result};

/// Spark's LZ4 stream compresses blocks of 32 KiB (`spark.io.compression.lz4.blockSize`) ...
const LZ4_BLOCK: usize = 32 << 10;
/// ... each behind a 21-byte header (lz4-java's `LZ4BlockOutputStream`).
const LZ4_BLOCK_HEADER: usize = 21;

/// Sizes of one partition's rows in each format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FormatSizes {
    /// Spark's shuffle records: each row's 4-byte length, then the row as an UnsafeRow.
    pub unsafe_rows: u64,
    /// The same, through Spark's LZ4 block stream.
    pub unsafe_rows_lz4: u64,
    /// The rows as Parquet: dictionary and RLE encodings where they pay, LZ4 pages.
    pub parquet_lz4: u64,
}

/// A column as UnsafeRow stores it: inline in its 8-byte slot, or as bytes after the slots.
enum Column {
    Fixed { data: ArrayRef, width: usize },
    Bytes(ArrayRef),
}

fn column(a: &ArrayRef) -> Result<Column> {
    let failed = |e: arrow::error::ArrowError| {
        HostError::InvalidArgument(format!("UnsafeRow of {}: {e}", a.data_type()))
    };
    Ok(match a.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            Column::Bytes(cast(a, &DataType::Utf8).map_err(failed)?)
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            Column::Bytes(cast(a, &DataType::Binary).map_err(failed)?)
        }
        // Spark keeps decimals of up to 18 digits as a long (TPC-H's are 15), wider ones as bytes.
        DataType::Decimal128(p, _) if *p > 18 => Column::Bytes(cast(a, &DataType::Utf8).map_err(failed)?),
        t => match t.primitive_width() {
            Some(width) => Column::Fixed { data: a.clone(), width },
            None => Column::Bytes(cast(a, &DataType::Utf8).map_err(failed)?),
        },
    })
}

/// Appends row `i` of `batch` as Spark's shuffle writes it: its length, then the UnsafeRow (a null bitset
/// in 8-byte words, an 8-byte slot per field, variable-length values after the slots, each padded to 8
/// bytes, their slot holding offset << 32 | size).
fn unsafe_row(cols: &[Column], i: usize, out: &mut Vec<u8>) {
    let n = cols.len();
    let fixed = 8 * n.div_ceil(64) + 8 * n;
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    let row = out.len();
    out.resize(row + fixed, 0);
    for (f, c) in cols.iter().enumerate() {
        let slot = row + 8 * n.div_ceil(64) + 8 * f;
        let (array, bytes): (&ArrayRef, Option<&[u8]>) = match c {
            Column::Fixed { data, .. } => (data, None),
            Column::Bytes(data) => (
                data,
                Some(match data.data_type() {
                    DataType::Utf8 => data.as_string::<i32>().value(i).as_bytes(),
                    _ => data.as_binary::<i32>().value(i),
                }),
            ),
        };
        if array.is_null(i) {
            out[row + f / 8] |= 1 << (f % 8);
            continue;
        }
        match (c, bytes) {
            (Column::Fixed { data, width }, _) => {
                let d = data.to_data();
                let at = (d.offset() + i) * width;
                let v = &d.buffers()[0].as_slice()[at..at + width];
                let w = (*width).min(8);
                out[slot..slot + w].copy_from_slice(&v[..w]);
            }
            (Column::Bytes(_), Some(b)) => {
                let offset = (out.len() - row) as u64;
                out[slot..slot + 8].copy_from_slice(&((offset << 32) | b.len() as u64).to_le_bytes());
                out.extend_from_slice(b);
                out.resize(out.len() + (8 - b.len() % 8) % 8, 0);
            }
            (Column::Bytes(_), None) => unreachable!("a bytes column always has bytes"),
        }
    }
    let len = (out.len() - row) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// The sizes of a shuffle output's partitions (`batches`, one a partition, all of one schema) in the
/// formats of Fig. 15: Spark's shuffle file (each partition's records through an LZ4 stream of its own),
/// and one Parquet file with a row group a partition.
pub fn format_sizes(batches: &[RecordBatch]) -> Result<FormatSizes> {
    let Some(first) = batches.first() else { return Ok(FormatSizes::default()) };
    let props = WriterProperties::builder().set_compression(Compression::LZ4_RAW).build();
    let what = "writing the partitions as Parquet";
    let mut w =
        ArrowWriter::try_new(Vec::new(), first.schema(), Some(props)).map_err(HostError::parquet(what))?;
    let mut out = FormatSizes::default();
    let mut rows = Vec::new();
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        let cols: Vec<Column> = batch.columns().iter().map(column).collect::<Result<_>>()?;
        rows.clear();
        for i in 0..batch.num_rows() {
            unsafe_row(&cols, i, &mut rows);
        }
        out.unsafe_rows += rows.len() as u64;
        out.unsafe_rows_lz4 += rows
            .chunks(LZ4_BLOCK)
            .map(|b| (insitu_kernels::columnar::compress(b).len() - 4 + LZ4_BLOCK_HEADER) as u64)
            .sum::<u64>();
        w.write(batch).map_err(HostError::parquet(what))?;
        w.flush().map_err(HostError::parquet(what))?;
    }
    out.parquet_lz4 = w.into_inner().map_err(HostError::parquet(what))?.len() as u64;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{Int32Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    #[test]
    fn an_unsafe_row_is_spark_s_layout_by_hand() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Int32, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![7, -1])),
                Arc::new(StringArray::from(vec![Some("hello"), None])),
                Arc::new(Int32Array::from(vec![None, Some(3)])),
            ],
        )
        .unwrap();
        let cols: Vec<Column> = batch.columns().iter().map(column).collect::<Result<_>>().unwrap();
        let mut out = Vec::new();
        unsafe_row(&cols, 0, &mut out);
        // 4-byte length; a bitset word; three slots; "hello" padded to 8.
        assert_eq!(out.len(), 4 + 8 + 24 + 8);
        assert_eq!(u32::from_le_bytes(out[..4].try_into().unwrap()), 40);
        let row = &out[4..];
        assert_eq!(row[0], 0b100, "c is null");
        assert_eq!(i64::from_le_bytes(row[8..16].try_into().unwrap()), 7);
        assert_eq!(u64::from_le_bytes(row[16..24].try_into().unwrap()), (32 << 32) | 5);
        assert_eq!(&row[32..37], b"hello");
        out.clear();
        unsafe_row(&cols, 1, &mut out);
        assert_eq!(out.len(), 4 + 32);
        assert_eq!(out[4], 0b010, "b is null");
        assert_eq!(i64::from_le_bytes(out[12..20].try_into().unwrap()), -1);
        assert_eq!(i32::from_le_bytes(out[28..32].try_into().unwrap()), 3);
    }

    #[test]
    fn columns_of_few_values_compress_better_in_parquet() {
        // A low-cardinality column and a sequence: Parquet's dictionary and RLE beat LZ4 over rows.
        let n = 20_000;
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("flag", DataType::Utf8, false),
        ]));
        let flags = ["A", "N", "R"];
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 7919 % 100_003))),
                Arc::new(StringArray::from_iter_values((0..n).map(|i| flags[(i * 31 % 3) as usize]))),
            ],
        )
        .unwrap();
        let halves = [batch.slice(0, n as usize / 2), batch.slice(n as usize / 2, n as usize / 2)];
        let s = format_sizes(&halves).unwrap();
        assert_eq!(s.unsafe_rows, n as u64 * (4 + 8 + 16 + 8));
        assert!(s.unsafe_rows_lz4 < s.unsafe_rows);
        assert!(s.parquet_lz4 < s.unsafe_rows_lz4, "{s:?}");
    }
}
