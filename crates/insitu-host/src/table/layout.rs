//! NASCENT's hybrid table layout (§3.5, Fig. 6c) for one device's part of a table: the key column stored
//! column-wise (plain, dictionary-encoded, or strings with offsets), every other column stored row-wise so
//! the shuffle reads each row with one sequential access.
//!
//! Row format (little-endian): `[null bitmap if any non-key column is nullable] field*`, where a
//! fixed-width field takes its width (bool 1 byte, decimal 16) and a variable one (`Utf8`, `Binary`) is
//! `u32 length | bytes`. Rows are back to back; when any field is variable, a row-offsets array (`u64`,
//! rows + 1 entries) locates them.

use std::sync::Arc;

use arrow::array::builder::NullBufferBuilder;
use arrow::array::{
    Array, ArrayData, ArrayRef, AsArray, BinaryArray, BooleanArray, BooleanBuilder, FixedSizeBinaryArray,
    FixedSizeBinaryBuilder, StringArray,
};
use arrow::buffer::{Buffer, MutableBuffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::compute::cast;
use arrow::datatypes::*;
use arrow::record_batch::RecordBatch;
use insitu_kernels::dict::{self, Codes};
use insitu_kernels::keys::KeyType;
use insitu_kernels::rowkey::{FieldKey, FieldValue};

use crate::error::{HostError, Result};
use crate::table::schema::{ColType, KeyKind, TableSchema};

/// The key column of a part.
#[derive(Debug, Clone, PartialEq)]
pub enum EncodedKey {
    /// Little-endian values of the device key type.
    Plain { key_type: KeyType, data: Vec<u8> },
    /// Dictionary page (raw value bits) and data page.
    Dict { key_type: KeyType, dictionary: Vec<u64>, codes: Codes },
    /// Byte strings: concatenated bytes and `rows + 1` offsets.
    Bytes { data: Vec<u8>, offsets: Vec<u64> },
}

/// One device's part of a table, encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedPart {
    pub rows: u64,
    pub key: EncodedKey,
    pub row_data: Vec<u8>,
    /// `Some(offsets)` when rows vary in size.
    pub row_offsets: Option<Vec<u64>>,
    /// The size of every row when they are all alike.
    pub row_size: Option<u64>,
}

/// Casts every column to its stored Arrow type (e.g. Utf8View -> Utf8).
pub fn normalize(batch: &RecordBatch, schema: &TableSchema) -> Result<RecordBatch> {
    let cols = batch
        .columns()
        .iter()
        .zip(&schema.columns)
        .map(|(a, c)| {
            let want = c.ty.to_arrow();
            if a.data_type() == &want {
                Ok(a.clone())
            } else {
                cast(a, &want).map_err(|e| HostError::InvalidArgument(format!("column {:?}: {e}", c.name)))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(Arc::new(schema.to_arrow()), cols)
        .map_err(HostError::arrow("assembling a record batch"))
}

/// Raw bits (zero-extended to u64) of key values `pick` as their device key type; errors on nulls.
fn key_bits(a: &ArrayRef, pick: &[u32], kt: KeyType, column: &str) -> Result<Vec<u64>> {
    if let Some(i) = pick.iter().find(|i| a.is_null(**i as usize)) {
        return Err(HostError::InvalidArgument(format!("key column {column:?} has a null at row {i}")));
    }
    macro_rules! prim {
        ($t:ty, $f:expr) => {{
            let values = a.as_primitive::<$t>().values();
            pick.iter().map(|r| &values[*r as usize]).map($f).collect()
        }};
    }
    Ok(match a.data_type() {
        DataType::Boolean => {
            let b = a.as_boolean();
            pick.iter().map(|r| b.value(*r as usize) as u64).collect()
        }
        DataType::UInt8 => prim!(UInt8Type, |v| *v as u64),
        DataType::UInt16 => prim!(UInt16Type, |v| *v as u64),
        DataType::UInt32 => prim!(UInt32Type, |v| *v as u64),
        DataType::UInt64 => prim!(UInt64Type, |v| *v),
        DataType::Int8 => prim!(Int8Type, |v| *v as i32 as u32 as u64),
        DataType::Int16 => prim!(Int16Type, |v| *v as i32 as u32 as u64),
        DataType::Int32 => prim!(Int32Type, |v| *v as u32 as u64),
        DataType::Date32 => prim!(Date32Type, |v| *v as u32 as u64),
        DataType::Int64 => prim!(Int64Type, |v| *v as u64),
        DataType::Date64 => prim!(Date64Type, |v| *v as u64),
        DataType::Timestamp(TimeUnit::Second, _) => prim!(TimestampSecondType, |v| *v as u64),
        DataType::Timestamp(TimeUnit::Millisecond, _) => prim!(TimestampMillisecondType, |v| *v as u64),
        DataType::Timestamp(TimeUnit::Microsecond, _) => prim!(TimestampMicrosecondType, |v| *v as u64),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => prim!(TimestampNanosecondType, |v| *v as u64),
        DataType::Float32 => prim!(Float32Type, |v| v.to_bits() as u64),
        DataType::Float64 => prim!(Float64Type, |v| v.to_bits()),
        other => {
            return Err(HostError::InvalidArgument(format!(
                "key column {column:?} of type {other} is not a {} key",
                kt.name()
            )))
        }
    })
}

/// Encodes a (normalized) batch as one device part. With `dict`, the key column is dictionary-encoded
/// when it has at most 65,536 distinct values; the second value says whether that happened.
pub fn encode_part(
    batch: &RecordBatch,
    schema: &TableSchema,
    key: usize,
    dict: bool,
) -> Result<(EncodedPart, bool)> {
    let all: Vec<u32> = (0..batch.num_rows() as u32).collect();
    encode_rows_of(batch, &all, schema, key, dict)
}

/// Encodes rows `pick` of a (normalized) batch, in that order, as one device part: what
/// [`encode_part`] gives for the batch of those rows, without making that batch first.
pub fn encode_rows_of(
    batch: &RecordBatch,
    pick: &[u32],
    schema: &TableSchema,
    key: usize,
    dict: bool,
) -> Result<(EncodedPart, bool)> {
    let rows = pick.len() as u64;
    let kc = &schema.columns[key];
    let ka = batch.column(key);
    let mut dict_used = false;
    let key_enc = match kc.ty.key_kind(&kc.name)? {
        KeyKind::Fixed(kt) => {
            let bits = key_bits(ka, pick, kt, &kc.name)?;
            match dict.then(|| dict::encode(&bits)).flatten() {
                Some(e) => {
                    dict_used = true;
                    EncodedKey::Dict { key_type: kt, dictionary: e.dictionary, codes: e.codes }
                }
                None => EncodedKey::Plain { key_type: kt, data: kt.bytes_of(&bits) },
            }
        }
        KeyKind::Bytes => {
            if let Some(i) = pick.iter().find(|i| ka.is_null(**i as usize)) {
                return Err(HostError::InvalidArgument(format!(
                    "key column {:?} has a null at row {i}",
                    kc.name
                )));
            }
            let mut data = Vec::new();
            let mut offsets = Vec::with_capacity(pick.len() + 1);
            offsets.push(0u64);
            for r in pick {
                data.extend_from_slice(value_bytes(ka, *r as usize));
                offsets.push(data.len() as u64);
            }
            EncodedKey::Bytes { data, offsets }
        }
    };
    let (row_data, row_offsets, row_size) = encode_rows(batch, pick, schema, key);
    Ok((EncodedPart { rows, key: key_enc, row_data, row_offsets, row_size }, dict_used))
}

/// Bytes of a string / binary / fixed-binary value.
fn value_bytes(a: &ArrayRef, i: usize) -> &[u8] {
    match a.data_type() {
        DataType::Utf8 => a.as_string::<i32>().value(i).as_bytes(),
        DataType::Binary => a.as_binary::<i32>().value(i),
        DataType::FixedSizeBinary(_) => a.as_fixed_size_binary().value(i),
        _ => &[],
    }
}

fn row_columns(schema: &TableSchema, key: usize) -> Vec<usize> {
    (0..schema.columns.len()).filter(|c| *c != key).collect()
}

fn has_bitmap(schema: &TableSchema, key: usize) -> bool {
    row_columns(schema, key).iter().any(|c| schema.columns[*c].nullable)
}

/// Where column `column` (not the key) is in the rows of a part, read as a sort key: how a table sorts by
/// a column it stores row-wise (`insitu_kernels::rowkey`).
pub fn field_key(schema: &TableSchema, key: usize, column: usize) -> Result<FieldKey> {
    let c = &schema.columns[column];
    let value = match c.ty.key_kind(&c.name)? {
        KeyKind::Fixed(key_type) => {
            let width = c.ty.fixed_width().expect("fixed-width keys have a width") as u32;
            FieldValue::Number { width, key_type }
        }
        KeyKind::Bytes => FieldValue::Bytes { width: c.ty.fixed_width().map(|w| w as u32) },
    };
    let cols = row_columns(schema, key);
    let index = cols.iter().position(|x| *x == column).expect("a column other than the key is in the rows");
    let bitmap = if has_bitmap(schema, key) { cols.len().div_ceil(8) as u32 } else { 0 };
    let before =
        cols[..index].iter().map(|x| schema.columns[*x].ty.fixed_width().map(|w| w as u32)).collect();
    Ok(FieldKey { bitmap, index: index as u32, before, value, nullable: c.nullable })
}

/// The size of every row of a part when no column of the rows varies in size (what `encode_rows`
/// gives), else `None`.
pub fn fixed_row_size(schema: &TableSchema, key: usize) -> Option<u64> {
    let cols = row_columns(schema, key);
    let bitmap = if has_bitmap(schema, key) { cols.len().div_ceil(8) } else { 0 };
    let widths: Option<usize> = cols.iter().map(|c| schema.columns[*c].ty.fixed_width()).sum();
    widths.map(|w| (bitmap + w) as u64)
}

/// A column's values as [`encode_rows`] copies them, found once a column rather than once a value.
enum Values<'a> {
    /// Little-endian values `width` bytes apart (every fixed-width type but booleans: Arrow's own layout).
    Fixed {
        data: &'a [u8],
        width: usize,
    },
    Bits(&'a BooleanArray),
    /// A string or binary column's offsets and bytes.
    Var {
        offsets: &'a [i32],
        data: &'a [u8],
    },
}

impl<'a> Values<'a> {
    /// `array`'s values; `data` is its `to_data()`, which fixed-width values borrow.
    fn of(array: &'a ArrayRef, data: &'a ArrayData, ty: &ColType) -> Values<'a> {
        match (array.data_type(), ty.fixed_width()) {
            (DataType::Boolean, _) => Values::Bits(array.as_boolean()),
            (DataType::Utf8, _) => {
                let a = array.as_string::<i32>();
                Values::Var { offsets: a.value_offsets(), data: a.values().as_slice() }
            }
            (DataType::Binary, _) => {
                let a = array.as_binary::<i32>();
                Values::Var { offsets: a.value_offsets(), data: a.values().as_slice() }
            }
            (_, Some(width)) => {
                let from = data.offset() * width;
                let bytes = data.buffers().first().map_or(&[][..], |b| b.as_slice());
                Values::Fixed { data: bytes.get(from..from + data.len() * width).unwrap_or(&[]), width }
            }
            (_, None) => Values::Var { offsets: &[], data: &[] },
        }
    }

    /// The stored length of value `i` of a variable-width column.
    fn var_len(&self, i: usize) -> usize {
        match self {
            Values::Var { offsets, .. } if i + 1 < offsets.len() => (offsets[i + 1] - offsets[i]) as usize,
            _ => 0,
        }
    }
}

/// The rows `pick` of `batch` in the row format: their bytes, and their offsets when rows vary in size
/// (else the one row size).
fn encode_rows(
    batch: &RecordBatch,
    pick: &[u32],
    schema: &TableSchema,
    key: usize,
) -> (Vec<u8>, Option<Vec<u64>>, Option<u64>) {
    let n = pick.len();
    let cols = row_columns(schema, key);
    let bitmap = if has_bitmap(schema, key) { cols.len().div_ceil(8) } else { 0 };
    let fixed: usize =
        bitmap + cols.iter().map(|c| schema.columns[*c].ty.fixed_width().unwrap_or(4)).sum::<usize>();
    let datas: Vec<ArrayData> = cols.iter().map(|c| batch.column(*c).to_data()).collect();
    let values: Vec<Values<'_>> = cols
        .iter()
        .zip(&datas)
        .map(|(c, d)| Values::of(batch.column(*c), d, &schema.columns[*c].ty))
        .collect();
    let nulls: Vec<Option<&NullBuffer>> =
        cols.iter().map(|c| batch.column(*c).nulls().filter(|b| b.null_count() > 0)).collect();
    let var: Vec<(&Values<'_>, Option<&NullBuffer>)> = values
        .iter()
        .zip(&nulls)
        .filter(|(v, _)| matches!(v, Values::Var { .. }))
        .map(|(v, b)| (v, *b))
        .collect();
    // Row sizes and offsets (a null takes no bytes past its length).
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(0u64);
    let mut at = 0u64;
    for r in pick {
        let r = *r as usize;
        let extra: usize =
            var.iter().map(|(v, b)| if b.is_some_and(|b| b.is_null(r)) { 0 } else { v.var_len(r) }).sum();
        at += (fixed + extra) as u64;
        offsets.push(at);
    }
    let mut data = vec![0u8; at as usize];
    let mut cursor: Vec<usize> = offsets[..n].iter().map(|o| *o as usize + bitmap).collect();
    for (j, (vals, nulls)) in values.iter().zip(&nulls).enumerate() {
        // A null's field keeps its zeros (fixed width) or is empty (variable), and its bit is set.
        let nulls = *nulls;
        let is_null = |i: usize| nulls.is_some_and(|b| b.is_null(i));
        if let (true, Some(b)) = (bitmap > 0, nulls) {
            for (i, r) in pick.iter().enumerate() {
                if b.is_null(*r as usize) {
                    data[offsets[i] as usize + j / 8] |= 1 << (j % 8);
                }
            }
        }
        match vals {
            Values::Fixed { data: src, width } => {
                let w = *width;
                for (r, cur) in pick.iter().zip(cursor.iter_mut()) {
                    let r = *r as usize;
                    if !is_null(r) {
                        if let Some(v) = src.get(r * w..(r + 1) * w) {
                            data[*cur..*cur + w].copy_from_slice(v);
                        }
                    }
                    *cur += w;
                }
            }
            Values::Bits(b) => {
                for (r, cur) in pick.iter().zip(cursor.iter_mut()) {
                    let r = *r as usize;
                    if !is_null(r) {
                        data[*cur] = b.value(r) as u8;
                    }
                    *cur += 1;
                }
            }
            Values::Var { offsets: vo, data: src } => {
                for (r, cur) in pick.iter().zip(cursor.iter_mut()) {
                    let i = *r as usize;
                    let v = if is_null(i) || i + 1 >= vo.len() {
                        &[][..]
                    } else {
                        &src[vo[i] as usize..vo[i + 1] as usize]
                    };
                    data[*cur..*cur + 4].copy_from_slice(&(v.len() as u32).to_le_bytes());
                    data[*cur + 4..*cur + 4 + v.len()].copy_from_slice(v);
                    *cur += 4 + v.len();
                }
            }
        }
    }
    if var.is_empty() {
        (data, None, Some(fixed as u64))
    } else {
        (data, Some(offsets), None)
    }
}

/// A column being rebuilt from rows: values appended as they are stored (fixed-width little-endian
/// values are Arrow's own layout, so they are copied, not converted), nulls on the side.
#[derive(Debug)]
enum Rebuild {
    Bool(BooleanBuilder),
    /// `width` bytes a value; booleans aside, every fixed-width type.
    Fixed {
        width: usize,
        values: MutableBuffer,
    },
    /// `u32 length | bytes` a value: offsets and values of a string or binary array.
    Var {
        offsets: Vec<i32>,
        values: Vec<u8>,
    },
}

impl Rebuild {
    fn new(ty: &ColType, rows: usize) -> Rebuild {
        match (ty, ty.fixed_width()) {
            (ColType::Bool, _) => Rebuild::Bool(BooleanBuilder::with_capacity(rows)),
            (_, Some(width)) => Rebuild::Fixed { width, values: MutableBuffer::with_capacity(rows * width) },
            (_, None) => {
                let mut offsets = Vec::with_capacity(rows + 1);
                offsets.push(0);
                Rebuild::Var { offsets, values: Vec::new() }
            }
        }
    }

    fn finish(self, ty: &ColType, rows: usize, nulls: Option<NullBuffer>) -> Result<ArrayRef> {
        let built = "decoding a column of a table part";
        Ok(match self {
            Rebuild::Bool(mut b) => {
                let values = b.finish();
                Arc::new(BooleanArray::new(values.values().clone(), nulls))
            }
            Rebuild::Fixed { width, values } => {
                let values: Buffer = values.into();
                match ty {
                    ColType::FixedBinary(w) => Arc::new(
                        FixedSizeBinaryArray::try_new(*w, values, nulls).map_err(HostError::arrow(built))?,
                    ),
                    _ => {
                        debug_assert_eq!(values.len(), rows * width);
                        let data = ArrayData::builder(ty.to_arrow())
                            .len(rows)
                            .add_buffer(values)
                            .nulls(nulls)
                            .build()
                            .map_err(HostError::arrow(built))?;
                        arrow::array::make_array(data)
                    }
                }
            }
            Rebuild::Var { offsets, values } => {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
                let values = Buffer::from_vec(values);
                if *ty == ColType::Utf8 {
                    // One UTF-8 check over all the values (and of every offset's boundary), not one a value.
                    Arc::new(StringArray::try_new(offsets, values, nulls).map_err(HostError::arrow(built))?)
                } else {
                    Arc::new(BinaryArray::try_new(offsets, values, nulls).map_err(HostError::arrow(built))?)
                }
            }
        })
    }
}

/// Rebuilds a batch from a part: key column values and row bytes (rows given by offsets or a fixed size).
pub fn decode_part(
    schema: &TableSchema,
    key: usize,
    key_col: ArrayRef,
    row_data: &[u8],
    row_offsets: &[u64],
) -> Result<RecordBatch> {
    let mut rows = RowDecoder::new(schema, key, row_offsets.len().saturating_sub(1));
    rows.push_rows(row_data, row_offsets, 0)?;
    rows.finish(key_col)
}

/// Rebuilds the columns of a part's rows as the rows come (a part can be decoded as its bytes stream from
/// the device, a chunk at a time): rows a batch at a time, and within a batch a column at a time, each
/// row's cursor moving on past the field just taken (the batch stays in cache while its columns are read).
#[derive(Debug)]
pub struct RowDecoder<'a> {
    schema: &'a TableSchema,
    key: usize,
    /// The schema's columns stored in the rows, in row order.
    cols: Vec<usize>,
    /// Bytes of the null bitmap at the head of each row (0: no column in the rows is nullable).
    bitmap: usize,
    out: Vec<Rebuild>,
    nulls: Vec<NullBufferBuilder>,
    rows: usize,
    /// The rows the decoder was made for (what its columns are sized for).
    expect: usize,
    /// Scratch of [`RowDecoder::push_rows`]: where each row of a batch is decoded to, and where it ends.
    cur: Vec<usize>,
    end: Vec<usize>,
}

/// Appends a `W`-byte value from each row of a batch to `values` (Arrow's layout is the rows' own
/// little-endian bytes), advancing the rows' cursors.
fn fixed<const W: usize>(
    values: &mut MutableBuffer,
    data: &[u8],
    cur: &mut [usize],
    end: &[usize],
) -> Result<()> {
    let at = values.len();
    values.resize(at + cur.len() * W, 0);
    let out = &mut values.as_slice_mut()[at..];
    for ((c, e), o) in cur.iter_mut().zip(end).zip(out.chunks_exact_mut(W)) {
        let v: &[u8; W] = data
            .get(*c..*c + W)
            .filter(|_| *c + W <= *e)
            .and_then(|v| v.try_into().ok())
            .ok_or_else(RowDecoder::short)?;
        o.copy_from_slice(v);
        *c += W;
    }
    Ok(())
}

impl<'a> RowDecoder<'a> {
    /// A decoder of `rows` rows (the capacity its columns start with) of `schema`'s parts keyed by `key`.
    pub fn new(schema: &'a TableSchema, key: usize, rows: usize) -> RowDecoder<'a> {
        let cols = row_columns(schema, key);
        let bitmap = if has_bitmap(schema, key) { cols.len().div_ceil(8) } else { 0 };
        let out = cols.iter().map(|c| Rebuild::new(&schema.columns[*c].ty, rows)).collect();
        let nulls = cols.iter().map(|_| NullBufferBuilder::new(rows)).collect();
        RowDecoder {
            schema,
            key,
            cols,
            bitmap,
            out,
            nulls,
            rows: 0,
            expect: rows,
            cur: Vec::new(),
            end: Vec::new(),
        }
    }

    fn short() -> HostError {
        HostError::Damaged {
            name: "table part".into(),
            detail: "row bytes are shorter than the schema".into(),
        }
    }

    /// Appends one row (its bytes exactly) to the columns.
    pub fn push(&mut self, row: &[u8]) -> Result<()> {
        self.push_rows(row, &[0, row.len() as u64], 0)
    }

    /// Appends the rows lying in `data`: row `i` is bytes `offsets[i]..offsets[i + 1]` of an object of which
    /// `data` starts at byte `base`. Rows go a batch at a time, a column at a time within a batch (a tight
    /// loop per column, no dispatch per value), while the batch's rows stay in cache.
    pub fn push_rows(&mut self, data: &[u8], offsets: &[u64], base: u64) -> Result<()> {
        const BATCH: usize = 256;
        let rows = offsets.len().saturating_sub(1);
        let mut first = 0;
        while first < rows {
            let k = BATCH.min(rows - first);
            self.cur.clear();
            self.end.clear();
            for w in offsets[first..first + k + 1].windows(2) {
                let (s, e) = (w[0].wrapping_sub(base) as usize, w[1].wrapping_sub(base) as usize);
                if s > e || e > data.len() || e - s < self.bitmap {
                    return Err(Self::short());
                }
                self.cur.push(s + self.bitmap);
                self.end.push(e);
            }
            self.push_batch(data)?;
            if self.rows + first == 0 {
                self.size_var_columns(k);
            }
            first += k;
        }
        self.rows += rows;
        Ok(())
    }

    /// Once the first `k` rows are in, gives each variable-length column room for the rows still to come
    /// at the length its first values had (an eighth more), so a column grows in place rather than being
    /// copied at every doubling (an allocator that does not remap large blocks copies them all).
    fn size_var_columns(&mut self, k: usize) {
        let rest = self.expect.saturating_sub(k);
        for col in &mut self.out {
            if let Rebuild::Var { values, .. } = col {
                values.reserve(rest * values.len() / k.max(1) * 9 / 8);
            }
        }
    }

    /// Decodes the rows whose fields start at `self.cur` and end at `self.end`.
    fn push_batch(&mut self, data: &[u8]) -> Result<()> {
        let (cur, end, bitmap) = (&mut self.cur, &self.end, self.bitmap);
        if bitmap != 0 {
            for (j, nulls) in self.nulls.iter_mut().enumerate() {
                for c in cur.iter() {
                    // The bitmap is the `bitmap` bytes before the row's first field.
                    nulls.append(data[c - bitmap + j / 8] & (1 << (j % 8)) == 0);
                }
            }
        }
        for col in self.out.iter_mut() {
            match col {
                Rebuild::Bool(b) => {
                    for (c, e) in cur.iter_mut().zip(end) {
                        if *c >= *e {
                            return Err(Self::short());
                        }
                        b.append_value(data[*c] != 0);
                        *c += 1;
                    }
                }
                Rebuild::Fixed { width, values } => match *width {
                    1 => fixed::<1>(values, data, cur, end)?,
                    2 => fixed::<2>(values, data, cur, end)?,
                    4 => fixed::<4>(values, data, cur, end)?,
                    8 => fixed::<8>(values, data, cur, end)?,
                    16 => fixed::<16>(values, data, cur, end)?,
                    w => {
                        for (c, e) in cur.iter_mut().zip(end) {
                            values.extend_from_slice(
                                data.get(*c..*c + w).filter(|_| *c + w <= *e).ok_or_else(Self::short)?,
                            );
                            *c += w;
                        }
                    }
                },
                Rebuild::Var { offsets, values } => {
                    for (c, e) in cur.iter_mut().zip(end) {
                        let len = data.get(*c..*c + 4).filter(|_| *c + 4 <= *e).ok_or_else(Self::short)?;
                        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
                        let (from, to) = (*c + 4, *c + 4 + len);
                        values.extend_from_slice(
                            data.get(from..to).filter(|_| to <= *e).ok_or_else(Self::short)?,
                        );
                        offsets.push(i32::try_from(values.len()).map_err(|_| HostError::Damaged {
                            name: "table part".into(),
                            detail: "a column's variable-length values exceed 2 GiB in one part".into(),
                        })?);
                        *c = to;
                    }
                }
            }
        }
        Ok(())
    }

    /// The batch of the rows pushed, with `key_col` (as many values) as the key column.
    pub fn finish(self, key_col: ArrayRef) -> Result<RecordBatch> {
        let RowDecoder { schema, key, cols, bitmap, out, nulls, rows, .. } = self;
        if key_col.len() != rows {
            return Err(HostError::Damaged {
                name: "table part".into(),
                detail: format!("{} key values for {rows} rows", key_col.len()),
            });
        }
        let mut arrays: Vec<Option<ArrayRef>> = vec![None; schema.columns.len()];
        arrays[key] = Some(key_col);
        for ((c, col), mut nb) in cols.iter().zip(out).zip(nulls) {
            let nulls = if bitmap == 0 { None } else { nb.finish() };
            arrays[*c] = Some(col.finish(&schema.columns[*c].ty, rows, nulls)?);
        }
        let arrays: Vec<ArrayRef> = arrays.into_iter().map(|a| a.expect("every column decoded")).collect();
        RecordBatch::try_new(Arc::new(schema.to_arrow()), arrays)
            .map_err(HostError::arrow("assembling a record batch"))
    }
}

/// Rebuilds the key column from raw key bits (device key type) in the column's Arrow type.
pub fn key_from_bits(bits: &[u64], ty: &ColType) -> Result<ArrayRef> {
    let a: ArrayRef = match ty {
        ColType::Bool => {
            Arc::new(arrow::array::BooleanArray::from(bits.iter().map(|b| *b != 0).collect::<Vec<_>>()))
        }
        ColType::U8 | ColType::U16 | ColType::U32 => {
            Arc::new(arrow::array::UInt32Array::from(bits.iter().map(|b| *b as u32).collect::<Vec<_>>()))
        }
        ColType::I8 | ColType::I16 | ColType::I32 | ColType::Date32 => Arc::new(
            arrow::array::Int32Array::from(bits.iter().map(|b| *b as u32 as i32).collect::<Vec<_>>()),
        ),
        ColType::I64 | ColType::Date64 | ColType::Timestamp(..) => {
            Arc::new(arrow::array::Int64Array::from(bits.iter().map(|b| *b as i64).collect::<Vec<_>>()))
        }
        ColType::U64 => Arc::new(arrow::array::UInt64Array::from(bits.to_vec())),
        ColType::F32 => Arc::new(arrow::array::Float32Array::from(
            bits.iter().map(|b| f32::from_bits(*b as u32)).collect::<Vec<_>>(),
        )),
        ColType::F64 => Arc::new(arrow::array::Float64Array::from(
            bits.iter().map(|b| f64::from_bits(*b)).collect::<Vec<_>>(),
        )),
        other => return Err(HostError::InvalidArgument(format!("{other:?} is not a fixed-width key"))),
    };
    cast(&a, &ty.to_arrow()).map_err(HostError::arrow("restoring a column's type"))
}

/// Rebuilds a bytes key column.
pub fn key_from_bytes(data: &[u8], offsets: &[u64], ty: &ColType) -> Result<ArrayRef> {
    let vals = offsets.windows(2).map(|w| &data[w[0] as usize..w[1] as usize]);
    Ok(match ty {
        ColType::Utf8 => {
            let v: Vec<&str> =
                vals.map(std::str::from_utf8).collect::<std::result::Result<_, _>>().map_err(|_| {
                    HostError::Damaged { name: "key column".into(), detail: "invalid UTF-8".into() }
                })?;
            Arc::new(arrow::array::StringArray::from(v))
        }
        ColType::FixedBinary(w) => {
            let mut b = FixedSizeBinaryBuilder::with_capacity(offsets.len() - 1, *w);
            for v in vals {
                b.append_value(v).map_err(HostError::arrow("decoding a fixed-size binary column"))?;
            }
            Arc::new(b.finish())
        }
        _ => Arc::new(arrow::array::BinaryArray::from(vals.collect::<Vec<_>>())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    fn batch() -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("price", DataType::Decimal128(15, 2), false),
            Field::new("day", DataType::Date32, false),
            Field::new("flag", DataType::Boolean, false),
            Field::new("f", DataType::Float64, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(vec![5, -3, 9, 0])),
                Arc::new(StringArray::from(vec![Some("alpha"), None, Some(""), Some("δέλτα")])),
                Arc::new(
                    Decimal128Array::from(vec![12345, -1, 0, 99]).with_precision_and_scale(15, 2).unwrap(),
                ),
                Arc::new(Date32Array::from(vec![1, 2, 3, 19000])),
                Arc::new(BooleanArray::from(vec![true, false, true, false])),
                Arc::new(Float64Array::from(vec![Some(1.5), Some(-0.0), None, Some(f64::MAX)])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn parts_round_trip_through_the_hybrid_layout() {
        let b = batch();
        let schema = TableSchema::from_arrow(&b.schema()).unwrap();
        for (key, dict) in [(0, false), (0, true), (1, false), (3, true)] {
            if key == 1 {
                // a string key with a null is refused, naming the row
                let err = encode_part(&b, &schema, key, dict).unwrap_err().to_string();
                assert!(err.contains("null at row 1"), "{err}");
                continue;
            }
            let (part, used) = encode_part(&b, &schema, key, dict).unwrap();
            assert_eq!(used, dict);
            let bits: Vec<u64> = match &part.key {
                EncodedKey::Plain { key_type, data } => key_type.bits_of(data),
                EncodedKey::Dict { dictionary, codes, .. } => match codes {
                    Codes::U8(c) => c.iter().map(|c| dictionary[*c as usize]).collect(),
                    Codes::U16(c) => c.iter().map(|c| dictionary[*c as usize]).collect(),
                },
                EncodedKey::Bytes { .. } => panic!("key {key} is not a string column"),
            };
            assert!(part.row_offsets.is_some(), "a string column makes rows variable");
            let key_col = key_from_bits(&bits, &schema.columns[key].ty).unwrap();
            let back = decode_part(&schema, key, key_col, &part.row_data, part.row_offsets.as_ref().unwrap())
                .unwrap();
            assert_eq!(back, b, "key {key} dict {dict}");
        }
    }

    #[test]
    fn decimal_keys_are_refused_with_a_reason() {
        let b = batch();
        let schema = TableSchema::from_arrow(&b.schema()).unwrap();
        let err = encode_part(&b, &schema, 2, false).unwrap_err().to_string();
        assert!(err.contains("128-bit decimal"), "{err}");
    }
}
