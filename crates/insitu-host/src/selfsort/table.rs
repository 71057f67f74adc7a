//! Fixed-size records cut from a table (a Parquet or CSV file, as `put-table` reads it): each row becomes
//! one record: the key column's value encoded so that byte order is value order (integers big-endian
//! with the sign bit flipped, floats by their total order, text and bytes zero-padded to the column's
//! longest value), then the row's values as text separated by `|`, padded with spaces to the width.

use std::io::Write;
use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::error::{HostError, Result};
use crate::selfsort::records::RecordFormat;

/// Longest text key taken.
const MAX_TEXT_KEY: usize = 64;

/// The records made from a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableRecords {
    pub format: RecordFormat,
    pub rows: u64,
}

/// Order-preserving key bytes of every row of `col` (nulls as zeros: first).
fn key_bytes(col: &dyn Array, name: &str) -> Result<(usize, Vec<Vec<u8>>)> {
    macro_rules! ints {
        ($t:ty, $w:expr, $signed:expr) => {{
            let a = col.as_primitive::<$t>();
            let v = (0..a.len())
                .map(|i| {
                    if a.is_null(i) {
                        return vec![0u8; $w];
                    }
                    let mut b = a.value(i).to_be_bytes().to_vec();
                    if $signed {
                        b[0] ^= 0x80;
                    }
                    b
                })
                .collect();
            Ok(($w, v))
        }};
    }
    match col.data_type() {
        DataType::Int8 => ints!(Int8Type, 1, true),
        DataType::Int16 => ints!(Int16Type, 2, true),
        DataType::Int32 => ints!(Int32Type, 4, true),
        DataType::Int64 => ints!(Int64Type, 8, true),
        DataType::UInt8 => ints!(UInt8Type, 1, false),
        DataType::UInt16 => ints!(UInt16Type, 2, false),
        DataType::UInt32 => ints!(UInt32Type, 4, false),
        DataType::UInt64 => ints!(UInt64Type, 8, false),
        DataType::Date32 => ints!(Date32Type, 4, true),
        DataType::Float32 => {
            let a = col.as_primitive::<Float32Type>();
            let v = (0..a.len())
                .map(|i| {
                    let b = a.value(i).to_bits();
                    let o = if b >> 31 == 1 { !b } else { b | 1 << 31 };
                    if a.is_null(i) {
                        vec![0; 4]
                    } else {
                        o.to_be_bytes().to_vec()
                    }
                })
                .collect();
            Ok((4, v))
        }
        DataType::Float64 => {
            let a = col.as_primitive::<Float64Type>();
            let v = (0..a.len())
                .map(|i| {
                    let b = a.value(i).to_bits();
                    let o = if b >> 63 == 1 { !b } else { b | 1 << 63 };
                    if a.is_null(i) {
                        vec![0; 8]
                    } else {
                        o.to_be_bytes().to_vec()
                    }
                })
                .collect();
            Ok((8, v))
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary => {
            let vals: Vec<Vec<u8>> = (0..col.len())
                .map(|i| {
                    if col.is_null(i) {
                        return Vec::new();
                    }
                    match col.data_type() {
                        DataType::Utf8 => col.as_string::<i32>().value(i).as_bytes().to_vec(),
                        DataType::LargeUtf8 => col.as_string::<i64>().value(i).as_bytes().to_vec(),
                        DataType::Binary => col.as_binary::<i32>().value(i).to_vec(),
                        _ => col.as_binary::<i64>().value(i).to_vec(),
                    }
                })
                .collect();
            let w = vals.iter().map(Vec::len).max().unwrap_or(0).max(1);
            if w > MAX_TEXT_KEY {
                return Err(HostError::InvalidArgument(format!(
                    "key column {name:?} has values of {w} bytes; keys are at most {MAX_TEXT_KEY}"
                )));
            }
            Ok((
                w,
                vals.into_iter()
                    .map(|mut v| {
                        v.resize(w, 0);
                        v
                    })
                    .collect(),
            ))
        }
        t => Err(HostError::InvalidArgument(format!(
            "key column {name:?} is {t}: keys are integers, floats, dates, text or bytes"
        ))),
    }
}

/// Writes one record per row of the table at `path` to `out`, keyed by `key_column`. `width` is the
/// record size (default: the longest row); a row that does not fit is refused, naming it.
pub fn records_from_table(
    path: &Path,
    key_column: &str,
    width: Option<u32>,
    out: &mut dyn Write,
) -> Result<TableRecords> {
    let batch = crate::table::import::read_table_file(path)?;
    let schema = batch.schema();
    let ki = schema.index_of(key_column).map_err(|_| {
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        HostError::InvalidArgument(format!(
            "{} has no column {key_column:?} (columns: {})",
            path.display(),
            names.join(", ")
        ))
    })?;
    let (ks, keys) = key_bytes(batch.column(ki).as_ref(), key_column)?;
    let opts = FormatOptions::default();
    let fmts: Vec<ArrayFormatter<'_>> = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
        .collect::<std::result::Result<_, _>>()
        .map_err(HostError::arrow("formatting the table's values"))?;
    let rows: Vec<Vec<u8>> = (0..batch.num_rows())
        .map(|i| {
            let text: Vec<String> = fmts.iter().map(|f| f.value(i).to_string()).collect();
            let mut r = keys[i].clone();
            r.extend_from_slice(text.join("|").as_bytes());
            r
        })
        .collect();
    let longest = rows.iter().map(Vec::len).max().unwrap_or(ks);
    let w = width.map_or(longest, |w| w as usize);
    if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() > w) {
        return Err(HostError::InvalidArgument(format!(
            "row {i} of {} takes {} bytes, more than the record width {w} (give a larger --width)",
            path.display(),
            r.len()
        )));
    }
    let mut buf = Vec::with_capacity(w);
    for r in &rows {
        buf.clear();
        buf.extend_from_slice(r);
        buf.resize(w, b' ');
        out.write_all(&buf).map_err(|e| HostError::io("output", e))?;
    }
    let format = RecordFormat::fixed(w as u32, 0, ks as u32)?;
    Ok(TableRecords { format, rows: rows.len() as u64 })
}
