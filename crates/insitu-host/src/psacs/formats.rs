//! The shuffle output formats PSACS compares in Fig. 15 (ICCD '21 §V-F): "LZ4 on shuffle outputs in
//! UnsafeRow (row-major) format \[21\]" against "the same shuffle outputs but in parquet \[22\] which also uses
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
/// ... each behind a 21-byte header (lz4-java's `LZ4BlockOutputStream`), stored raw when compression does
/// not shrink it, and ends with an empty block.
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
    /// Values of `width` bytes, little-endian, the first 8 of each in the slot.
    Fixed {
        data: ArrayRef,
        values: arrow::buffer::Buffer,
        offset: usize,
        width: usize,
    },
    Bool(ArrayRef),
    Bytes(ArrayRef),
    /// Spark's decimals of more than 18 digits: 16 bytes reserved after the slots (even for a null), the
    /// value's two's-complement big-endian bytes in them.
    WideDecimal(ArrayRef),
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
        DataType::Boolean => Column::Bool(a.clone()),
        // Spark keeps decimals of up to 18 digits as a long (TPC-H's are 15).
        DataType::Decimal128(p, _) if *p > 18 => Column::WideDecimal(a.clone()),
        t => match t.primitive_width() {
            Some(width) => {
                let d = a.to_data();
                Column::Fixed { data: a.clone(), values: d.buffers()[0].clone(), offset: d.offset(), width }
            }
            // Anything else (lists, structs...) as its text.
            None => Column::Bytes(cast(a, &DataType::Utf8).map_err(failed)?),
        },
    })
}

impl Column {
    fn array(&self) -> &ArrayRef {
        match self {
            Column::Fixed { data, .. }
            | Column::Bool(data)
            | Column::Bytes(data)
            | Column::WideDecimal(data) => data,
        }
    }
}

/// Appends row `i` as Spark's shuffle writes it: its length (`DataOutputStream.writeInt`, big-endian), then
/// the UnsafeRow: a null bitset in 8-byte words, an 8-byte slot per field (fixed-width values inline,
/// little-endian), variable-length values after the slots, each padded to 8 bytes, their slot holding
/// offset << 32 | size.
fn unsafe_row(cols: &[Column], i: usize, out: &mut Vec<u8>) {
    let n = cols.len();
    let bitset = 8 * n.div_ceil(64);
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    let row = out.len();
    out.resize(row + bitset + 8 * n, 0);
    for (f, c) in cols.iter().enumerate() {
        let slot = row + bitset + 8 * f;
        let var = |out: &mut Vec<u8>, b: &[u8], reserve: usize| {
            let offset = out.len() - row;
            out[slot..slot + 8].copy_from_slice(&(((offset as u64) << 32) | b.len() as u64).to_le_bytes());
            out.extend_from_slice(b);
            out.resize(row + offset + b.len().max(reserve).div_ceil(8) * 8, 0);
        };
        if c.array().is_null(i) {
            out[row + f / 8] |= 1 << (f % 8);
            if let Column::WideDecimal(_) = c {
                var(out, &[], 16);
            }
            continue;
        }
        match c {
            Column::Fixed { values, offset, width, .. } => {
                let at = (offset + i) * width;
                let w = (*width).min(8);
                out[slot..slot + w].copy_from_slice(&values.as_slice()[at..at + w]);
            }
            Column::Bool(data) => out[slot] = u8::from(data.as_boolean().value(i)),
            Column::Bytes(data) => {
                let b = match data.data_type() {
                    DataType::Utf8 => data.as_string::<i32>().value(i).as_bytes(),
                    _ => data.as_binary::<i32>().value(i),
                };
                var(out, b, 0);
            }
            Column::WideDecimal(data) => {
                let v = data.as_primitive::<arrow::datatypes::Decimal128Type>().value(i);
                // BigInteger.toByteArray: the shortest two's-complement big-endian form.
                let be = v.to_be_bytes();
                let skip = (0..15)
                    .take_while(|&k| {
                        (be[k] == 0 && be[k + 1] & 0x80 == 0) || (be[k] == 0xff && be[k + 1] & 0x80 != 0)
                    })
                    .count();
                var(out, &be[skip..], 16);
            }
        }
    }
    let len = (out.len() - row) as u32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// Measures a shuffle output's partitions, one after another, in the formats of Fig. 15: Spark's shuffle
/// file (each partition's records through an LZ4 stream of its own), and one Parquet file with a row group
/// a partition. Only sizes are kept (and the Parquet file being written, for its footer).
pub struct FormatMeter {
    parquet: Option<ArrowWriter<Vec<u8>>>,
    sizes: FormatSizes,
    rows: Vec<u8>,
}

const PARQUET: &str = "writing the partitions as Parquet";

impl std::fmt::Debug for FormatMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FormatMeter").field("sizes", &self.sizes).finish_non_exhaustive()
    }
}

impl FormatMeter {
    pub fn new() -> FormatMeter {
        FormatMeter { parquet: None, sizes: FormatSizes::default(), rows: Vec::new() }
    }

    /// Adds one partition (an empty one writes nothing, in either format).
    pub fn add(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let cols: Vec<Column> = batch.columns().iter().map(column).collect::<Result<_>>()?;
        self.rows.clear();
        for i in 0..batch.num_rows() {
            unsafe_row(&cols, i, &mut self.rows);
        }
        self.sizes.unsafe_rows += self.rows.len() as u64;
        let blocks: usize = self
            .rows
            .chunks(LZ4_BLOCK)
            .map(|b| (insitu_kernels::columnar::compress(b).len() - 4).min(b.len()) + LZ4_BLOCK_HEADER)
            .sum();
        self.sizes.unsafe_rows_lz4 += (blocks + LZ4_BLOCK_HEADER) as u64;
        let w = match &mut self.parquet {
            Some(w) => w,
            None => {
                let props = WriterProperties::builder().set_compression(Compression::LZ4_RAW).build();
                let w = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props))
                    .map_err(HostError::parquet(PARQUET))?;
                self.parquet.insert(w)
            }
        };
        w.write(batch).map_err(HostError::parquet(PARQUET))?;
        w.flush().map_err(HostError::parquet(PARQUET))
    }

    /// The sizes of everything added.
    pub fn finish(self) -> Result<FormatSizes> {
        let mut sizes = self.sizes;
        if let Some(w) = self.parquet {
            sizes.parquet_lz4 = w.into_inner().map_err(HostError::parquet(PARQUET))?.len() as u64;
        }
        Ok(sizes)
    }
}

impl Default for FormatMeter {
    fn default() -> FormatMeter {
        FormatMeter::new()
    }
}

/// [`FormatMeter`] over `batches`.
pub fn format_sizes(batches: &[RecordBatch]) -> Result<FormatSizes> {
    let mut m = FormatMeter::new();
    for b in batches {
        m.add(b)?;
    }
    m.finish()
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
        assert_eq!(u32::from_be_bytes(out[..4].try_into().unwrap()), 40);
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
        // A boolean in its slot; a decimal of 38 digits in 16 bytes after the slots, as BigInteger's bytes.
        let schema = Arc::new(Schema::new(vec![
            Field::new("b", DataType::Boolean, false),
            Field::new("d", DataType::Decimal128(38, 2), true),
        ]));
        let d = arrow::array::Decimal128Array::from(vec![Some(-2), None])
            .with_precision_and_scale(38, 2)
            .unwrap();
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(arrow::array::BooleanArray::from(vec![true, false])), Arc::new(d)],
        )
        .unwrap();
        let cols: Vec<Column> = batch.columns().iter().map(column).collect::<Result<_>>().unwrap();
        out.clear();
        unsafe_row(&cols, 0, &mut out);
        let row = &out[4..];
        assert_eq!(row.len(), 8 + 16 + 16);
        assert_eq!(row[8], 1);
        assert_eq!(u64::from_le_bytes(row[16..24].try_into().unwrap()), (24 << 32) | 1);
        assert_eq!(row[24], 0xfe, "-2 is one byte, 0xfe");
        out.clear();
        unsafe_row(&cols, 1, &mut out);
        assert_eq!(out.len(), 4 + 8 + 16 + 16, "a null wide decimal keeps its 16 bytes");
        assert_eq!(out[4], 0b10);
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
