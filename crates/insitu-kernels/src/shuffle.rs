//! The pure steps of a shuffle write (PSACS §III-IV), shared by the device program and the host
//! baselines so every placement computes the same bytes:
//!
//! - Reader ([`compose_records`]): a table part's row-wise bytes with its key column put back, as
//!   records `bitmap | key | row fields`;
//! - Partitioner ([`partition_ids`]): the shuffle key of every record to a partition id (§III-B);
//! - Sorter + Gather + Indexer ([`group_records`]): records in partition order and each partition's
//!   extent (§III-C);
//! - Writer ([`encode_partition`], [`index_entry`]): a partition as LZ4 chunks, one per column
//!   (column-major, §IV-E) or one row-major chunk, and its index entry.

use serde::{Deserialize, Serialize};

use crate::arch::prefetch;
use crate::columnar::{
    compress, decompress, push_value, records_to_columns, split_fields, FieldKind, FormatError, RecordFormat,
};
use crate::dict::{Codes, DecodeError};
use crate::gather::gather_var;
use crate::keys::KeyType;
use crate::partition::{group_by_partition, partition_of, PartitionHash};

/// Column-major (PSACS) or row-major partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkLayout {
    #[default]
    Column,
    Row,
}

impl ChunkLayout {
    pub fn name(self) -> &'static str {
        match self {
            ChunkLayout::Column => "column",
            ChunkLayout::Row => "row",
        }
    }
}

/// How a partition's chunks are stored: LZ4 blocks (the default), or as they are. PSACS as evaluated has
/// no compression module (ICCD '21 §V-F measures LZ4 apart, "if future implementation of PSACS includes a
/// compression module"), so its figures are reproduced without one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    #[default]
    Lz4,
    None,
}

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Lz4 => "lz4",
            Codec::None => "none",
        }
    }

    /// One chunk, encoded.
    pub fn encode(self, b: &[u8]) -> Vec<u8> {
        match self {
            Codec::Lz4 => compress(b),
            Codec::None => b.to_vec(),
        }
    }

    /// Inverse of [`Codec::encode`].
    pub fn decode(self, b: Vec<u8>) -> Result<Vec<u8>, FormatError> {
        match self {
            Codec::Lz4 => decompress(&b),
            Codec::None => Ok(b),
        }
    }
}

/// What a shuffle computes, whatever runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShuffleSpec {
    pub partitions: u32,
    pub hash: PartitionHash,
    pub layout: ChunkLayout,
    pub codec: Codec,
    /// Format of the composed records (bitmap, key column, then the row's fields).
    pub format: RecordFormat,
    /// Fields of the record that form the shuffle key, in order.
    pub key_fields: Vec<usize>,
    /// Key fields holding IEEE floats (4 or 8 bytes, little-endian): hashed by value as SQL compares
    /// them (see [`push_key_field`]).
    pub float_fields: Vec<usize>,
}

/// Appends one field's bytes to a record's shuffle key. A float is taken as SQL's equality takes it, as
/// Spark normalizes join and grouping keys before their shuffle (`NormalizeFloatingNumbers`): -0.0 as 0.0
/// and every NaN as one NaN, so that keys equal in a join or a group meet in one partition. Other bytes
/// go as they are.
pub fn push_key_field(key: &mut Vec<u8>, bytes: &[u8], float: bool) {
    match (float, bytes.len()) {
        (true, 4) => {
            let v = f32::from_le_bytes(bytes.try_into().expect("4 bytes"));
            let v = if v == 0.0 {
                0.0
            } else if v.is_nan() {
                f32::NAN
            } else {
                v
            };
            key.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        (true, 8) => {
            let v = f64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            let v = if v == 0.0 {
                0.0
            } else if v.is_nan() {
                f64::NAN
            } else {
                v
            };
            key.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        _ => key.extend_from_slice(bytes),
    }
}

impl ShuffleSpec {
    /// Chunks per partition: one per column, or one for row-major partitions.
    pub fn chunks(&self) -> usize {
        match self.layout {
            ChunkLayout::Column => self.format.columns(),
            ChunkLayout::Row => 1,
        }
    }

    /// Bytes of one index entry (rows, offset, then one length per chunk; u64 each).
    pub fn index_entry_bytes(&self) -> usize {
        8 * (2 + self.chunks())
    }
}

/// Why a shuffle step failed: a record that does not match its format, or a bad dictionary page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShuffleError {
    Record(FormatError),
    Dictionary(DecodeError),
}

impl std::fmt::Display for ShuffleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShuffleError::Record(e) => write!(f, "record: {e}"),
            ShuffleError::Dictionary(e) => write!(f, "dictionary: {e}"),
        }
    }
}

impl std::error::Error for ShuffleError {}

impl From<FormatError> for ShuffleError {
    fn from(e: FormatError) -> Self {
        ShuffleError::Record(e)
    }
}

impl From<DecodeError> for ShuffleError {
    fn from(e: DecodeError) -> Self {
        ShuffleError::Dictionary(e)
    }
}

/// The key column of a part, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredKey {
    /// Fixed-width little-endian values (`width` bytes each).
    Plain { data: Vec<u8>, width: usize },
    /// Dictionary page and data page; values are `width` bytes wide.
    Dict { dictionary: Vec<u64>, codes: Codes, width: usize },
    /// Byte strings.
    Bytes { data: Vec<u8>, offsets: Vec<u64> },
}

impl StoredKey {
    /// The record field the key becomes.
    pub fn field_kind(&self) -> FieldKind {
        match self {
            StoredKey::Plain { width, .. } | StoredKey::Dict { width, .. } => FieldKind::Fixed(*width),
            StoredKey::Bytes { .. } => FieldKind::Var,
        }
    }

    /// Rows `first..first + count` of the key column.
    pub fn slice(&self, first: usize, count: usize) -> StoredKey {
        match self {
            StoredKey::Plain { data, width } => StoredKey::Plain {
                data: data[first * width..(first + count) * width].to_vec(),
                width: *width,
            },
            StoredKey::Dict { dictionary, codes, width } => StoredKey::Dict {
                dictionary: dictionary.clone(),
                codes: match codes {
                    Codes::U8(c) => Codes::U8(c[first..first + count].to_vec()),
                    Codes::U16(c) => Codes::U16(c[first..first + count].to_vec()),
                },
                width: *width,
            },
            StoredKey::Bytes { data, offsets } => {
                let base = offsets[first];
                StoredKey::Bytes {
                    data: data[base as usize..offsets[first + count] as usize].to_vec(),
                    offsets: offsets[first..=first + count].iter().map(|o| o - base).collect(),
                }
            }
        }
    }

    /// Little-endian bytes of every key, for fixed keys (dictionary codes decoded).
    fn fixed_bytes(&self) -> Result<Option<Vec<u8>>, ShuffleError> {
        Ok(match self {
            StoredKey::Plain { data, .. } => Some(data.clone()),
            StoredKey::Dict { dictionary, codes, width } => {
                let kt = if *width == 4 { KeyType::U32 } else { KeyType::U64 };
                Some(kt.decode_dict(dictionary, codes)?)
            }
            StoredKey::Bytes { .. } => None,
        })
    }
}

/// The record format of a part: the row format (bitmap and fields, `b1,f8,v,...`) with the key column
/// inserted as the first field.
pub fn record_format(row_format: &RecordFormat, key: FieldKind) -> RecordFormat {
    let mut fields = vec![key];
    fields.extend_from_slice(&row_format.fields);
    RecordFormat { bitmap: row_format.bitmap, fields }
}

/// Reader: composes records `bitmap | key | row fields` from the row-wise part and the key column.
pub fn compose_records(
    rows: &[u8],
    row_offsets: &[u64],
    bitmap: usize,
    key: &StoredKey,
) -> Result<(Vec<u8>, Vec<u64>), ShuffleError> {
    let n = row_offsets.len().saturating_sub(1);
    // Fixed keys as little-endian bytes (empty for byte-string keys, which are taken from `key`).
    let fixed = key.fixed_bytes()?.unwrap_or_default();
    let mut data = Vec::with_capacity(rows.len() + n * 8);
    let mut offs = Vec::with_capacity(n + 1);
    offs.push(0u64);
    for i in 0..n {
        let row = &rows[row_offsets[i] as usize..row_offsets[i + 1] as usize];
        data.extend_from_slice(&row[..bitmap.min(row.len())]);
        match key {
            StoredKey::Bytes { data: k, offsets } => {
                let v = &k[offsets[i] as usize..offsets[i + 1] as usize];
                data.extend_from_slice(&(v.len() as u32).to_le_bytes());
                data.extend_from_slice(v);
            }
            StoredKey::Plain { width, .. } | StoredKey::Dict { width, .. } => {
                data.extend_from_slice(&fixed[i * width..(i + 1) * width]);
            }
        }
        data.extend_from_slice(&row[bitmap.min(row.len())..]);
        offs.push(data.len() as u64);
    }
    Ok((data, offs))
}

/// The shuffle key of one record: its key fields' value bytes, in `spec.key_fields` order.
pub fn record_key(
    rec: &[u8],
    spec: &ShuffleSpec,
    key: &mut Vec<u8>,
    ranges: &mut Vec<std::ops::Range<usize>>,
) -> Result<(), ShuffleError> {
    ranges.clear();
    spec.format.for_each_field(rec, |_, r| ranges.push(r))?;
    key.clear();
    for f in &spec.key_fields {
        push_key_field(key, &rec[ranges[*f].clone()], spec.float_fields.contains(f));
    }
    Ok(())
}

/// Partitioner: the partition of every record.
pub fn partition_ids(records: &[u8], offsets: &[u64], spec: &ShuffleSpec) -> Result<Vec<u32>, ShuffleError> {
    let (mut key, mut ranges) = (Vec::with_capacity(64), Vec::with_capacity(spec.format.fields.len()));
    offsets
        .windows(2)
        .map(|w| {
            record_key(&records[w[0] as usize..w[1] as usize], spec, &mut key, &mut ranges)?;
            Ok(partition_of(spec.hash, &key, spec.partitions))
        })
        .collect()
}

/// Records in partition order with their offsets, and each partition's extent in records
/// (`extents[p]..extents[p + 1]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grouped {
    pub records: Vec<u8>,
    pub offsets: Vec<u64>,
    pub extents: Vec<u64>,
}

impl Grouped {
    /// The offsets of partition `p`'s records in `records`, its first record's start to its last's end
    /// (one offset, 0, for an empty partition): with `records`, what [`encode_partition`] takes, in place.
    pub fn partition_offsets(&self, p: usize) -> &[u64] {
        let (lo, hi) = (self.extents[p] as usize, self.extents[p + 1] as usize);
        if lo == hi {
            &[0]
        } else {
            &self.offsets[lo..=hi]
        }
    }

    /// Appends partition `p` of this batch to `recs`/`offs` (offsets continue from `recs.len()`).
    pub fn append_partition(&self, p: usize, recs: &mut Vec<u8>, offs: &mut Vec<u64>) {
        let o = self.partition_offsets(p);
        if o.len() == 1 {
            return;
        }
        let base = recs.len() as u64;
        recs.extend_from_slice(&self.records[o[0] as usize..o[o.len() - 1] as usize]);
        offs.extend(o[1..].iter().map(|x| x - o[0] + base));
    }
}

/// Sorter + Gather + Indexer: records grouped by partition.
pub fn group_records(records: &[u8], offsets: &[u64], spec: &ShuffleSpec) -> Result<Grouped, ShuffleError> {
    let pids = partition_ids(records, offsets, spec)?;
    let (order, extents) = group_by_partition(&pids, spec.partitions);
    let (data, offs) = gather_var(records, offsets, &order);
    Ok(Grouped { records: data, offsets: offs, extents })
}

/// One batch of a table part as the Reader has it: the row-wise bytes and the key column, before any
/// record is composed. The fused steps below make from it exactly the bytes that [`compose_records`],
/// [`group_records`] and [`encode_partition`] make from composed records, without composing the whole
/// batch first: a record is composed only where it is gathered to (a grouped batch parked on flash) or
/// split into columns (a partition written), so the batch is copied once instead of three times.
#[derive(Debug)]
pub struct RowBatch<'a> {
    rows: &'a [u8],
    offsets: &'a [u64],
    key: &'a StoredKey,
    /// Fixed keys as little-endian bytes (dictionary codes decoded); empty for byte-string keys.
    fixed: Vec<u8>,
    bitmap: usize,
    /// The row's own format: the record format without its key field.
    row_format: RecordFormat,
    /// Where each shuffle key field lies: `None` for the key column, else the byte range inside every
    /// row when all the row's fields up to it have a fixed width (then no row is parsed to find it).
    key_at: Option<Vec<Option<std::ops::Range<usize>>>>,
}

impl<'a> RowBatch<'a> {
    /// `rows` split by `offsets` (one more than the rows), with `key`'s values for the same rows, in the
    /// record format of `spec`.
    pub fn new(
        rows: &'a [u8],
        offsets: &'a [u64],
        key: &'a StoredKey,
        spec: &ShuffleSpec,
    ) -> Result<RowBatch<'a>, ShuffleError> {
        if let Some(f) = spec.key_fields.iter().find(|&&f| f >= spec.format.fields.len()) {
            return Err(FormatError(format!(
                "shuffle key field {f} past the record's {} fields",
                spec.format.fields.len()
            ))
            .into());
        }
        let fixed = key.fixed_bytes()?.unwrap_or_default();
        let bitmap = spec.format.bitmap;
        let row_format =
            RecordFormat { bitmap, fields: spec.format.fields.iter().skip(1).copied().collect() };
        let key_at = spec
            .key_fields
            .iter()
            .map(|&f| {
                if f == 0 {
                    return Some(None);
                }
                let mut at = bitmap;
                for k in &row_format.fields[..f - 1] {
                    match k {
                        FieldKind::Fixed(w) => at += w,
                        FieldKind::Var => return None,
                    }
                }
                match row_format.fields.get(f - 1)? {
                    FieldKind::Fixed(w) => Some(Some(at..at + w)),
                    FieldKind::Var => None,
                }
            })
            .collect();
        Ok(RowBatch { rows, offsets, key, fixed, bitmap, row_format, key_at })
    }

    /// Rows in the batch.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn row(&self, i: usize) -> &'a [u8] {
        &self.rows[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Calls `f(i, row i)` for each row `i` of `order`. The rows lie at random places in the batch, so
    /// each one's bytes (and its fixed key) are asked of memory a few rows ahead: several misses are then in
    /// flight while a row is handled, where a plain loop would wait for each (as NASCENT's gather does).
    fn for_each_row_in<E>(
        &self,
        order: &[u32],
        mut f: impl FnMut(usize, &'a [u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        const BATCH: usize = 256;
        const AHEAD: usize = 8;
        let width = match self.key {
            StoredKey::Plain { width, .. } | StoredKey::Dict { width, .. } => *width,
            StoredKey::Bytes { .. } => 0,
        };
        let ask = |&(r, a, b): &(usize, usize, usize)| {
            prefetch(self.rows, a, (b - a).min(512));
            prefetch(&self.fixed, r * width, width);
        };
        let mut places: Vec<(usize, usize, usize)> = Vec::with_capacity(BATCH);
        for chunk in order.chunks(BATCH) {
            places.clear();
            places.extend(chunk.iter().map(|&r| {
                let r = r as usize;
                (r, self.offsets[r] as usize, self.offsets[r + 1] as usize)
            }));
            places.iter().take(AHEAD).for_each(ask);
            for (j, &(r, a, b)) in places.iter().enumerate() {
                if let Some(next) = places.get(j + AHEAD) {
                    ask(next);
                }
                f(r, &self.rows[a..b])?;
            }
        }
        Ok(())
    }

    /// Row `i`'s key value (without a length prefix).
    fn key_value(&self, i: usize) -> &[u8] {
        match self.key {
            StoredKey::Bytes { data, offsets } => &data[offsets[i] as usize..offsets[i + 1] as usize],
            StoredKey::Plain { width, .. } | StoredKey::Dict { width, .. } => {
                &self.fixed[i * width..(i + 1) * width]
            }
        }
    }

    /// Row `i`'s key as its record carries it (a byte string after its u32 length).
    fn push_key_field(&self, i: usize, out: &mut Vec<u8>) {
        let v = self.key_value(i);
        if let StoredKey::Bytes { .. } = self.key {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        }
        push_value(out, v);
    }

    /// Appends the record `bitmap | key | row fields` of row `i` (`row`), as [`compose_records`] makes it.
    fn push_record(&self, i: usize, row: &[u8], out: &mut Vec<u8>) {
        let b = self.bitmap.min(row.len());
        out.extend_from_slice(&row[..b]);
        self.push_key_field(i, out);
        out.extend_from_slice(&row[b..]);
    }

    /// Bytes of the composed records: the rows, plus each key as its record carries it.
    pub fn record_bytes(&self) -> u64 {
        let n = self.len() as u64;
        let keys = match self.key {
            StoredKey::Bytes { offsets, .. } => {
                offsets.last().copied().unwrap_or(0) - offsets.first().copied().unwrap_or(0) + 4 * n
            }
            StoredKey::Plain { width, .. } | StoredKey::Dict { width, .. } => *width as u64 * n,
        };
        self.offsets.last().copied().unwrap_or(0) - self.offsets.first().copied().unwrap_or(0) + keys
    }

    /// Bytes of the records of the rows in `order`, composed.
    pub fn record_bytes_of(&self, order: &[u32]) -> u64 {
        let rows =
            order.iter().map(|&r| self.offsets[r as usize + 1] - self.offsets[r as usize]).sum::<u64>();
        rows + match self.key {
            StoredKey::Bytes { offsets, .. } => {
                order.iter().map(|&r| offsets[r as usize + 1] - offsets[r as usize] + 4).sum::<u64>()
            }
            StoredKey::Plain { width, .. } | StoredKey::Dict { width, .. } => (width * order.len()) as u64,
        }
    }

    /// Partitioner: the partition of every row, as [`partition_ids`] gives for its record. A key field
    /// at a fixed place in every row is read there; otherwise the row is parsed (and checked) to find it.
    pub fn partition_ids(&self, spec: &ShuffleSpec) -> Result<Vec<u32>, ShuffleError> {
        let mut key = Vec::with_capacity(64);
        let mut ranges = Vec::with_capacity(self.row_format.fields.len());
        let short = || FormatError("record shorter than its format".into());
        (0..self.len())
            .map(|i| {
                let row = self.row(i);
                key.clear();
                match &self.key_at {
                    Some(at) => {
                        for (r, f) in at.iter().zip(&spec.key_fields) {
                            let float = spec.float_fields.contains(f);
                            match r {
                                None => push_key_field(&mut key, self.key_value(i), float),
                                Some(r) => {
                                    push_key_field(&mut key, row.get(r.clone()).ok_or_else(short)?, float)
                                }
                            }
                        }
                    }
                    None => {
                        ranges.clear();
                        self.row_format.for_each_field(row, |_, r| ranges.push(r))?;
                        for &f in &spec.key_fields {
                            let float = spec.float_fields.contains(&f);
                            match f {
                                0 => push_key_field(&mut key, self.key_value(i), float),
                                f => push_key_field(&mut key, &row[ranges[f - 1].clone()], float),
                            }
                        }
                    }
                }
                Ok(partition_of(spec.hash, &key, spec.partitions))
            })
            .collect()
    }

    /// Sorter + Gather + Indexer over rows whose partitions are `pids`: what [`group_records`] makes of
    /// the composed records.
    pub fn group(&self, pids: &[u32], spec: &ShuffleSpec) -> Grouped {
        let (order, extents) = group_by_partition(pids, spec.partitions);
        let (records, offsets) = self.gather(&order);
        Grouped { records, offsets, extents }
    }

    /// The records of the rows in `order`, composed, and their offsets.
    pub fn gather(&self, order: &[u32]) -> (Vec<u8>, Vec<u64>) {
        let mut out = Vec::with_capacity(self.record_bytes_of(order) as usize);
        let mut offs = Vec::with_capacity(order.len() + 1);
        offs.push(0);
        let Ok(()) = self.for_each_row_in(order, |i, row| {
            self.push_record(i, row, &mut out);
            offs.push(out.len() as u64);
            Ok::<(), std::convert::Infallible>(())
        });
        (out, offs)
    }

    /// Writer: the rows in `order` (one partition) as [`encode_partition`] encodes their records. Column
    /// chunks are split straight from the rows, each row parsed (and checked) once.
    pub fn encode_partition(&self, order: &[u32], spec: &ShuffleSpec) -> Result<Vec<Vec<u8>>, ShuffleError> {
        match spec.layout {
            ChunkLayout::Row => {
                let (records, _) = self.gather(order);
                // Checked as the Partitioner checks composed records, so both paths refuse the same rows.
                for &r in order {
                    self.row_format.for_each_field(self.row(r as usize), |_, _| ())?;
                }
                Ok(vec![spec.codec.encode(&records)])
            }
            ChunkLayout::Column => {
                let fmt = &spec.format;
                let first = usize::from(self.bitmap > 0);
                let mut cols: Vec<Vec<u8>> = (0..fmt.columns())
                    .map(|c| match (c, c.checked_sub(first).map(|j| fmt.fields[j])) {
                        (0, None) => Vec::with_capacity(self.bitmap * order.len()),
                        (_, Some(FieldKind::Fixed(w))) => Vec::with_capacity(w * order.len()),
                        _ => Vec::new(),
                    })
                    .collect();
                // The rows come into cache here, in partition order, with their bitmaps and keys; their
                // fields are then split a column at a time from the cache.
                let (mut at, mut ends) = (Vec::with_capacity(order.len()), Vec::with_capacity(order.len()));
                self.for_each_row_in(order, |r, row| {
                    if self.bitmap > 0 {
                        cols[0].extend_from_slice(
                            row.get(..self.bitmap)
                                .ok_or_else(|| FormatError("record shorter than its bitmap".into()))?,
                        );
                    }
                    self.push_key_field(r, &mut cols[first]);
                    at.push(self.offsets[r] as usize + self.bitmap);
                    ends.push(self.offsets[r + 1] as usize);
                    Ok::<(), FormatError>(())
                })?;
                split_fields(self.rows, &mut at, &ends, &self.row_format.fields, &mut cols[first + 1..])?;
                Ok(cols.iter().map(|c| spec.codec.encode(c)).collect())
            }
        }
    }
}

/// Writer: one partition's records as chunks (a chunk per column, or one row-major chunk), each encoded by
/// the spec's codec.
pub fn encode_partition(
    records: &[u8],
    offsets: &[u64],
    spec: &ShuffleSpec,
) -> Result<Vec<Vec<u8>>, ShuffleError> {
    let base = offsets.first().copied().unwrap_or(0) as usize;
    let end = offsets.last().copied().unwrap_or(0) as usize;
    match spec.layout {
        ChunkLayout::Row => Ok(vec![spec.codec.encode(&records[base..end])]),
        ChunkLayout::Column => {
            let rebased: Vec<u64> = offsets.iter().map(|o| o - base as u64).collect();
            let cols = records_to_columns(&records[base..end], &rebased, &spec.format)?;
            Ok(cols.iter().map(|c| spec.codec.encode(c)).collect())
        }
    }
}

/// Appends a partition's index entry: rows, offset of its first chunk, then each chunk's length.
pub fn index_entry(out: &mut Vec<u8>, rows: u64, offset: u64, chunks: &[Vec<u8>]) {
    out.extend_from_slice(&rows.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    for c in chunks {
        out.extend_from_slice(&(c.len() as u64).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_keeps_every_record_once_and_in_its_partition() {
        let rf = RecordFormat::parse("f4").unwrap();
        let rows: Vec<u8> = (0..100u32).flat_map(|i| (i * 3).to_le_bytes()).collect();
        let offs: Vec<u64> = (0..=100).map(|i| i * 4).collect();
        let key =
            StoredKey::Plain { data: (0..100u64).flat_map(|i| (i % 7).to_le_bytes()).collect(), width: 8 };
        let (recs, roffs) = compose_records(&rows, &offs, 0, &key).unwrap();
        let spec = ShuffleSpec {
            partitions: 4,
            hash: PartitionHash::Xxh3,
            layout: ChunkLayout::Column,
            codec: Codec::Lz4,
            format: record_format(&rf, FieldKind::Fixed(8)),
            key_fields: vec![0],
            float_fields: Vec::new(),
        };
        let g = group_records(&recs, &roffs, &spec).unwrap();
        assert_eq!(g.extents.len(), 5);
        assert_eq!(*g.extents.last().unwrap(), 100);
        let pids = partition_ids(&g.records, &g.offsets, &spec).unwrap();
        for p in 0..4 {
            for r in g.extents[p]..g.extents[p + 1] {
                assert_eq!(pids[r as usize], p as u32);
            }
        }
        let mut sorted_in = recs.chunks(12).map(|c| c.to_vec()).collect::<Vec<_>>();
        let mut sorted_out = g.records.chunks(12).map(|c| c.to_vec()).collect::<Vec<_>>();
        sorted_in.sort();
        sorted_out.sort();
        assert_eq!(sorted_in, sorted_out);
        let (mut r, mut o) = (Vec::new(), vec![0]);
        g.append_partition(1, &mut r, &mut o);
        assert_eq!(o.len() as u64 - 1, g.extents[2] - g.extents[1]);
        assert_eq!(encode_partition(&r, &o, &spec).unwrap().len(), 2);
    }

    fn stored_key(kind: u8, n: usize, seed: u64) -> StoredKey {
        let v = |i: usize| (i as u64).wrapping_mul(seed | 1).rotate_left(17) % 13;
        match kind {
            0 => StoredKey::Plain { data: (0..n).flat_map(|i| v(i).to_le_bytes()).collect(), width: 8 },
            1 => StoredKey::Dict {
                dictionary: (0..13u64).map(|d| d * 1000 + 7).collect(),
                codes: Codes::U8((0..n).map(|i| v(i) as u8).collect()),
                width: 4,
            },
            _ => {
                let mut data = Vec::new();
                let mut offsets = vec![0u64];
                for i in 0..n {
                    data.extend(std::iter::repeat_n(b'a' + v(i) as u8, v(i) as usize % 5));
                    offsets.push(data.len() as u64);
                }
                StoredKey::Bytes { data, offsets }
            }
        }
    }

    proptest::proptest! {
        /// The fused steps make the very bytes of compose + group + encode, for every record shape, key
        /// kind, choice of key fields, layout and codec.
        #[test]
        fn fused_steps_match_composing_first(
            bitmap in 0usize..3,
            fields in proptest::collection::vec(proptest::option::of(1usize..9), 1..6),
            rows in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..12), 0..60),
            key_kind in 0u8..3,
            key_fields in proptest::collection::vec(0usize..7, 1..3),
            seed in proptest::num::u64::ANY,
            row_layout in proptest::bool::ANY,
            lz4 in proptest::bool::ANY,
        ) {
            let row_fmt = RecordFormat {
                bitmap,
                fields: fields.iter().map(|f| f.map_or(FieldKind::Var, FieldKind::Fixed)).collect(),
            };
            // Rows that match the format: a bitmap, then each field (a Var field's length from the data).
            let mut data = Vec::new();
            let mut offs = vec![0u64];
            for r in &rows {
                data.extend((0..bitmap).map(|i| r.get(i).copied().unwrap_or(0)));
                for f in &row_fmt.fields {
                    match f {
                        FieldKind::Fixed(w) => data.extend((0..*w).map(|i| r.get(i).copied().unwrap_or(9))),
                        FieldKind::Var => {
                            let len = r.len() % 7;
                            data.extend_from_slice(&(len as u32).to_le_bytes());
                            data.extend_from_slice(&r[..len]);
                        }
                    }
                }
                offs.push(data.len() as u64);
            }
            let key = stored_key(key_kind, rows.len(), seed);
            let format = record_format(&row_fmt, key.field_kind());
            let key_fields: Vec<usize> = key_fields.iter().map(|f| f % format.fields.len()).collect();
            let spec = ShuffleSpec {
                partitions: 5,
                hash: if seed % 2 == 0 { PartitionHash::Xxh3 } else { PartitionHash::ZigzagFold },
                layout: if row_layout { ChunkLayout::Row } else { ChunkLayout::Column },
                codec: if lz4 { Codec::Lz4 } else { Codec::None },
                format,
                // Some key fields taken as floats: the fused and composed paths must agree on them too.
                float_fields: key_fields.iter().copied().filter(|f| (*f as u64 + seed).is_multiple_of(2)).collect(),
                key_fields,
            };
            let (recs, roffs) = compose_records(&data, &offs, bitmap, &key).unwrap();
            let batch = RowBatch::new(&data, &offs, &key, &spec).unwrap();
            proptest::prop_assert_eq!(batch.record_bytes(), recs.len() as u64);
            let pids = batch.partition_ids(&spec).unwrap();
            proptest::prop_assert_eq!(&pids, &partition_ids(&recs, &roffs, &spec).unwrap());
            let want = group_records(&recs, &roffs, &spec).unwrap();
            let got = batch.group(&pids, &spec);
            proptest::prop_assert_eq!(&got, &want);
            let (order, _) = group_by_partition(&pids, spec.partitions);
            for p in 0..spec.partitions as usize {
                let part = &order[want.extents[p] as usize..want.extents[p + 1] as usize];
                let o = want.partition_offsets(p);
                proptest::prop_assert_eq!(batch.record_bytes_of(part), o[o.len() - 1] - o[0]);
                proptest::prop_assert_eq!(
                    batch.encode_partition(part, &spec).unwrap(),
                    encode_partition(&want.records, want.partition_offsets(p), &spec).unwrap()
                );
            }
        }
    }

    #[test]
    fn float_keys_equal_in_sql_hash_alike_and_others_keep_their_bytes() {
        let f64s = [0.0f64, -0.0, f64::NAN, -f64::NAN, f64::from_bits(0x7ff8_0000_0000_0001), 1.5];
        let f32s = [0.0f32, -0.0, f32::NAN, -f32::NAN, f32::from_bits(0x7fc0_0001), 1.5];
        let key64 = |v: f64, float| {
            let mut k = Vec::new();
            push_key_field(&mut k, &v.to_le_bytes(), float);
            k
        };
        let key32 = |v: f32| {
            let mut k = Vec::new();
            push_key_field(&mut k, &v.to_le_bytes(), true);
            k
        };
        assert_eq!(key64(f64s[0], true), key64(f64s[1], true), "-0.0 is 0.0");
        assert!(f64s[2..5].iter().all(|&v| key64(v, true) == key64(f64::NAN, true)), "one NaN");
        assert_eq!(key32(f32s[0]), key32(f32s[1]));
        assert!(f32s[2..5].iter().all(|&v| key32(v) == key32(f32::NAN)));
        assert_eq!(key64(1.5, true), 1.5f64.to_le_bytes(), "other values keep their bits");
        assert_ne!(key64(-0.0, false), key64(0.0, false), "a field not a float keeps its bytes");
        // Through a record: the same partition for 0.0 and -0.0 whatever the partition count.
        let rf = RecordFormat::parse("f8").unwrap();
        for partitions in [2, 7, 1024] {
            let spec = ShuffleSpec {
                partitions,
                hash: PartitionHash::ZigzagFold,
                layout: ChunkLayout::Column,
                codec: Codec::None,
                format: rf.clone(),
                key_fields: vec![0],
                float_fields: vec![0],
            };
            let recs: Vec<u8> = [0.0f64, -0.0].iter().flat_map(|v| v.to_le_bytes()).collect();
            let p = partition_ids(&recs, &[0, 8, 16], &spec).unwrap();
            assert_eq!(p[0], p[1], "{partitions} partitions");
        }
    }

    #[test]
    fn fused_steps_refuse_what_composing_first_refuses() {
        let row_fmt = RecordFormat::parse("f4,v").unwrap();
        // The second row's string claims 9 bytes but has 2.
        let mut data = Vec::new();
        for (v, len, s) in [(1u32, 2u32, &b"ab"[..]), (2, 9, b"cd")] {
            data.extend_from_slice(&v.to_le_bytes());
            data.extend_from_slice(&len.to_le_bytes());
            data.extend_from_slice(s);
        }
        let offs = [0u64, 10, 20];
        let key = StoredKey::Plain { data: (0..2u64).flat_map(|i| i.to_le_bytes()).collect(), width: 8 };
        let spec = |layout, key_fields| ShuffleSpec {
            partitions: 2,
            hash: PartitionHash::Xxh3,
            layout,
            codec: Codec::Lz4,
            format: record_format(&row_fmt, FieldKind::Fixed(8)),
            key_fields,
            float_fields: Vec::new(),
        };
        for layout in [ChunkLayout::Column, ChunkLayout::Row] {
            for key_fields in [vec![0], vec![2]] {
                let spec = spec(layout, key_fields);
                let batch = RowBatch::new(&data, &offs, &key, &spec).unwrap();
                let refused =
                    batch.partition_ids(&spec).is_err() || batch.encode_partition(&[0, 1], &spec).is_err();
                assert!(refused, "{layout:?} {:?}", spec.key_fields);
            }
        }
        // A key field past the record's fields.
        let spec = spec(ChunkLayout::Column, vec![3]);
        assert!(RowBatch::new(&data, &offs, &key, &spec).is_err());
    }
}
