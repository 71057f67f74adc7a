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

use crate::columnar::{compress, decompress, records_to_columns, FieldKind, FormatError, RecordFormat};
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
        key.extend_from_slice(&rec[ranges[*f].clone()]);
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
}
