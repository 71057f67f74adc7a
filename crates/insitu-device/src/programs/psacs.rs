//! PSACS's device program (ICCD '21): the map side of a shuffle inside the device.
//!
//! `psacs-shuffle` reads a table part in batches sized to device memory (§IV-B tiling). Per batch, the
//! Reader composes full records (the row-wise part with the key column put back), the Partitioner maps the
//! shuffle key to a partition id (§III-B), the Sorter orders (PID, RowID) pairs and the Gather replaces
//! RowIDs by records (§III-C), and the Indexer records each partition's extent. With one batch the
//! partitions are written at once; with several, batches go to flash and the Merger concatenates each
//! partition across batches (Fig. 8). Each partition is stored column-major, every column chunk LZ4
//! compressed (§IV-E), or row-major on request. Outputs: `OUT#data` (chunks, partition after partition) and
//! `OUT#index` (per partition: rows, offset, then the length of each chunk; little-endian u64).
//!
//! The pure steps are public functions so the host baselines run exactly the same code.

use std::collections::BTreeMap;

use insitu_kernels::columnar::{compress, records_to_columns, FieldKind, RecordFormat};
use insitu_kernels::dict::{self, Codes, Decoded};
use insitu_kernels::gather::gather_var;
use insitu_kernels::partition::{group_by_partition, partition_of, PartitionHash};

use crate::command::{Args, Value};
use crate::error::{DeviceError, Result};
use crate::program::{Program, ProgramContext};

/// Column-major (PSACS) or row-major partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Column,
    Row,
}

/// What a shuffle computes, whatever runs it.
#[derive(Debug, Clone)]
pub struct ShuffleSpec {
    pub partitions: u32,
    pub hash: PartitionHash,
    pub layout: Layout,
    /// Format of the composed records (bitmap, key column, then the row's fields).
    pub format: RecordFormat,
    /// Fields of the record that form the shuffle key, in order.
    pub key_fields: Vec<usize>,
}

impl ShuffleSpec {
    /// Chunks per partition: one per column, or one for row-major partitions.
    pub fn chunks(&self) -> usize {
        match self.layout {
            Layout::Column => self.format.columns(),
            Layout::Row => 1,
        }
    }

    /// Bytes of one index entry.
    pub fn index_entry_bytes(&self) -> usize {
        8 * (2 + self.chunks())
    }
}

/// The key column of a part, as stored.
#[derive(Debug, Clone)]
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

    /// Little-endian bytes of every key, for fixed keys (dictionary codes decoded).
    fn fixed_bytes(&self) -> Result<Option<Vec<u8>>> {
        Ok(match self {
            StoredKey::Plain { data, .. } => Some(data.clone()),
            StoredKey::Dict { dictionary, codes, width } => {
                let d = dict::decode(dictionary, codes, *width as u32 * 8).map_err(|e| {
                    DeviceError::ProgramFailed { program: "psacs-shuffle".into(), detail: e.to_string() }
                })?;
                Some(match d {
                    Decoded::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    Decoded::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    Decoded::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                })
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
) -> Result<(Vec<u8>, Vec<u64>)> {
    let n = row_offsets.len().saturating_sub(1);
    let fixed = key.fixed_bytes()?;
    let mut data = Vec::with_capacity(rows.len() + n * 8);
    let mut offs = Vec::with_capacity(n + 1);
    offs.push(0u64);
    for i in 0..n {
        let row = &rows[row_offsets[i] as usize..row_offsets[i + 1] as usize];
        data.extend_from_slice(&row[..bitmap.min(row.len())]);
        match (key, &fixed) {
            (StoredKey::Plain { width, .. } | StoredKey::Dict { width, .. }, Some(f)) => {
                data.extend_from_slice(&f[i * width..(i + 1) * width]);
            }
            (StoredKey::Bytes { data: k, offsets }, _) => {
                let v = &k[offsets[i] as usize..offsets[i + 1] as usize];
                data.extend_from_slice(&(v.len() as u32).to_le_bytes());
                data.extend_from_slice(v);
            }
            _ => unreachable!("fixed keys have fixed bytes"),
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
) -> Result<()> {
    ranges.clear();
    spec.format
        .for_each_field(rec, |_, r| ranges.push(r))
        .map_err(|e| DeviceError::ProgramFailed { program: "psacs-shuffle".into(), detail: e.to_string() })?;
    key.clear();
    for f in &spec.key_fields {
        key.extend_from_slice(&rec[ranges[*f].clone()]);
    }
    Ok(())
}

/// Partitioner: the partition of every record.
pub fn partition_ids(records: &[u8], offsets: &[u64], spec: &ShuffleSpec) -> Result<Vec<u32>> {
    let (mut key, mut ranges) = (Vec::with_capacity(64), Vec::with_capacity(spec.format.fields.len()));
    offsets
        .windows(2)
        .map(|w| {
            record_key(&records[w[0] as usize..w[1] as usize], spec, &mut key, &mut ranges)?;
            Ok(partition_of(spec.hash, &key, spec.partitions))
        })
        .collect()
}

/// Sorter + Gather + Indexer: records in partition order, their offsets, and each partition's extent
/// (`extents[p]..extents[p + 1]`, in records).
pub fn group_records(
    records: &[u8],
    offsets: &[u64],
    spec: &ShuffleSpec,
) -> Result<(Vec<u8>, Vec<u64>, Vec<u64>)> {
    let pids = partition_ids(records, offsets, spec)?;
    let (order, extents) = group_by_partition(&pids, spec.partitions);
    let (data, offs) = gather_var(records, offsets, &order);
    Ok((data, offs, extents))
}

/// Writer: one partition's records as compressed chunks (a chunk per column, or one row-major chunk).
pub fn encode_partition(records: &[u8], offsets: &[u64], spec: &ShuffleSpec) -> Result<Vec<Vec<u8>>> {
    let base = offsets.first().copied().unwrap_or(0) as usize;
    let end = offsets.last().copied().unwrap_or(0) as usize;
    match spec.layout {
        Layout::Row => Ok(vec![compress(&records[base..end])]),
        Layout::Column => {
            let rebased: Vec<u64> = offsets.iter().map(|o| o - base as u64).collect();
            let cols = records_to_columns(&records[base..end], &rebased, &spec.format).map_err(|e| {
                DeviceError::ProgramFailed { program: "psacs-shuffle".into(), detail: e.to_string() }
            })?;
            Ok(cols.iter().map(|c| compress(c)).collect())
        }
    }
}

/// Appends a partition's index entry.
pub fn index_entry(out: &mut Vec<u8>, rows: u64, offset: u64, chunks: &[Vec<u8>]) {
    out.extend_from_slice(&rows.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    for c in chunks {
        out.extend_from_slice(&(c.len() as u64).to_le_bytes());
    }
}

fn le_u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

/// The device program.
#[derive(Debug)]
pub struct PsacsShuffle;

/// Bytes the Writer gathers before one append to flash.
const WRITE_BUFFER: usize = 4 << 20;

fn spec_from(ctx: &ProgramContext<'_>, args: &Args, key_kind: FieldKind) -> Result<ShuffleSpec> {
    let partitions = args.u64("partitions").ok_or_else(|| ctx.bad("missing u64 argument partitions"))?;
    if partitions == 0 || partitions > 1 << 24 {
        return Err(ctx.bad(format!("partitions must be 1..=2^24, not {partitions}")));
    }
    let hash = PartitionHash::parse(args.str("hash").unwrap_or("zigzag-fold"))
        .ok_or_else(|| ctx.bad("hash is zigzag-fold or xxh3"))?;
    let layout = match args.str("layout").unwrap_or("column") {
        "column" => Layout::Column,
        "row" => Layout::Row,
        other => return Err(ctx.bad(format!("layout {other:?} is column or row"))),
    };
    let row_format =
        RecordFormat::parse(args.str("row_format").unwrap_or("")).map_err(|e| ctx.bad(e.to_string()))?;
    let format = record_format(&row_format, key_kind);
    let key_fields: Vec<usize> = args
        .u64_list("key_fields")
        .ok_or_else(|| ctx.bad("missing key_fields"))?
        .iter()
        .map(|f| *f as usize)
        .collect();
    if key_fields.is_empty() || key_fields.iter().any(|f| *f >= format.fields.len()) {
        return Err(
            ctx.bad(format!("key_fields {key_fields:?} outside the record's {} fields", format.fields.len()))
        );
    }
    Ok(ShuffleSpec { partitions: partitions as u32, hash, layout, format, key_fields })
}

impl Program for PsacsShuffle {
    fn id(&self) -> &'static str {
        "psacs-shuffle"
    }

    fn kernel_class(&self) -> &'static str {
        "shuffle"
    }

    fn description(&self) -> &'static str {
        "hash-partition a table part into P partitions by sort-based grouping, tiled to device memory, \
         written column-major with LZ4; args: table, key_encoding, key_width, code_bits, row_size | rowoff, \
         row_format, key_fields, partitions, hash, layout, out, memory_budget"
    }

    fn run(&self, ctx: &ProgramContext<'_>, args: &Args) -> Result<Args> {
        let table = args.str("table").ok_or_else(|| ctx.bad("missing string argument table"))?;
        let out = args.str("out").ok_or_else(|| ctx.bad("missing string argument out"))?;
        let obj = |s: &str| format!("{table}#{s}");
        let read_all = |name: &str| -> Result<Vec<u8>> {
            let size = ctx.object(name)?.size;
            let mut b = vec![0u8; size as usize];
            ctx.read_object(name, 0, &mut b)?;
            Ok(b)
        };
        let enc = args.str("key_encoding").unwrap_or("plain");
        let width = args.u64("key_width").unwrap_or(8) as usize;
        let key_kind = if enc == "bytes" { FieldKind::Var } else { FieldKind::Fixed(width) };
        let spec = spec_from(ctx, args, key_kind)?;
        // Row offsets of the whole part (8 bytes a row) and the batch size from the memory budget.
        let rows_size = ctx.object(&obj("rows"))?.size;
        let row_offsets: Vec<u64> = match args.u64("row_size") {
            Some(rs) => (0..=rows_size / rs.max(1)).map(|i| i * rs).collect(),
            None => le_u64s(&read_all(&obj("rowoff"))?),
        };
        let n = row_offsets.len() as u64 - 1;
        let budget = args.u64("memory_budget").unwrap_or(u64::MAX).min(ctx.memory_available());
        // A batch holds the composed records (rows + keys) and their grouped copy, plus 24 bytes a row of
        // offsets, PIDs and sort scratch; the raw rows are freed once composed. Budget 3x the rows.
        let avg = (rows_size / n.max(1)).max(1) + 16;
        let batch_rows = (budget / (avg * 3 + 24)).min(n.max(1));
        if batch_rows < 64.min(n.max(1)) {
            return Err(DeviceError::MemoryExhausted {
                requested: avg * 3 * 64,
                available: ctx.memory_available(),
                capacity: ctx.memory_available(),
            });
        }
        let key = match enc {
            "dict" => StoredKey::Dict {
                dictionary: le_u64s(&read_all(&obj("dict"))?),
                codes: Codes::from_bytes(
                    args.u64("code_bits").unwrap_or(16) as u32,
                    &read_all(&obj("codes"))?,
                )
                .ok_or_else(|| ctx.bad("bad data page"))?,
                width,
            },
            "bytes" => StoredKey::Bytes {
                data: read_all(&obj("key"))?,
                offsets: le_u64s(&read_all(&obj("keyoff"))?),
            },
            _ => StoredKey::Plain { data: read_all(&obj("key"))?, width },
        };
        // Tiling (§IV-B): when the part does not fit one batch, grouped batches are parked on flash.
        let tiled = n > batch_rows;
        let mut in_memory = None;
        let mut batches = 0usize;
        let mut first = 0u64;
        loop {
            let count = batch_rows.min(n - first);
            let (lo, hi) = (row_offsets[first as usize], row_offsets[(first + count) as usize]);
            let _mem = ctx.reserve((hi - lo) * 3 + count * 24)?;
            let (records, rec_offs) = {
                let mut rows = vec![0u8; (hi - lo) as usize];
                ctx.read_object(&obj("rows"), lo, &mut rows)?;
                let offs: Vec<u64> =
                    row_offsets[first as usize..=(first + count) as usize].iter().map(|o| o - lo).collect();
                let key_part = slice_key(&key, first as usize, count as usize);
                compose_records(&rows, &offs, spec.format.bitmap, &key_part)?
            };
            let grouped = group_records(&records, &rec_offs, &spec)?;
            if tiled {
                let name = format!("{out}.batch{batches}");
                store(ctx, &format!("{name}#rec"), &grouped.0)?;
                store(ctx, &format!("{name}#off"), &u64s_le(&grouped.1))?;
                store(ctx, &format!("{name}#ext"), &u64s_le(&grouped.2))?;
            } else {
                in_memory = Some(grouped);
            }
            batches += 1;
            first += count;
            if first >= n {
                break;
            }
        }
        let source = match &in_memory {
            Some(g) => Batches::Memory(g),
            None => Batches::Flash(batches),
        };
        let result = merge_and_write(ctx, out, &spec, &source);
        if tiled {
            for i in 0..batches {
                for s in ["rec", "off", "ext"] {
                    let _ = ctx.delete(&format!("{out}.batch{i}#{s}"));
                }
            }
        }
        let (bytes, raw) = result?;
        Ok(Args::new()
            .with("rows", Value::U64(n))
            .with("batches", Value::U64(batches as u64))
            .with("stored_bytes", Value::U64(bytes))
            .with("raw_bytes", Value::U64(raw)))
    }
}

fn slice_key(key: &StoredKey, first: usize, count: usize) -> StoredKey {
    match key {
        StoredKey::Plain { data, width } => {
            StoredKey::Plain { data: data[first * width..(first + count) * width].to_vec(), width: *width }
        }
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

fn store(ctx: &ProgramContext<'_>, name: &str, data: &[u8]) -> Result<()> {
    let txn = ctx.create_object(name, "shuffle-batch", BTreeMap::new(), Some(data.len() as u64))?;
    if let Err(e) = ctx.append(txn, data) {
        let _ = ctx.abort(txn);
        return Err(e);
    }
    ctx.commit(txn).map(|_| ())
}

fn read_range(ctx: &ProgramContext<'_>, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
    let mut b = vec![0u8; len as usize];
    ctx.read_object(name, offset, &mut b)?;
    Ok(b)
}

/// Grouped batches: one kept in device memory, or several parked on flash as `OUT.batchI#{rec,off,ext}`.
enum Batches<'a> {
    Memory(&'a (Vec<u8>, Vec<u64>, Vec<u64>)),
    Flash(usize),
}

fn u64s_le(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Merger + Writer: every partition, concatenated across batches, encoded and appended to `OUT#data`;
/// returns (bytes stored, bytes before compression).
fn merge_and_write(
    ctx: &ProgramContext<'_>,
    out: &str,
    spec: &ShuffleSpec,
    batches: &Batches<'_>,
) -> Result<(u64, u64)> {
    let txn = ctx.create_object(&format!("{out}#data"), "shuffle-data", BTreeMap::new(), None)?;
    let mut index = Vec::with_capacity(spec.partitions as usize * spec.index_entry_bytes());
    let (mut written, mut raw) = (0u64, 0u64);
    let mut pending = Vec::with_capacity(WRITE_BUFFER + (64 << 10));
    let r = (|| {
        let extents: Vec<Vec<u64>> = match batches {
            Batches::Memory(g) => vec![g.2.clone()],
            Batches::Flash(k) => (0..*k)
                .map(|i| {
                    read_range(ctx, &format!("{out}.batch{i}#ext"), 0, (spec.partitions as u64 + 1) * 8)
                        .map(|b| le_u64s(&b))
                })
                .collect::<Result<_>>()?,
        };
        for p in 0..spec.partitions as usize {
            let mut recs = Vec::new();
            let mut offs = vec![0u64];
            for (i, e) in extents.iter().enumerate() {
                let (lo, hi) = (e[p] as usize, e[p + 1] as usize);
                if lo == hi {
                    continue;
                }
                let base = recs.len() as u64;
                match batches {
                    Batches::Memory(g) => {
                        // The single batch stays in device memory: copy its extent straight in.
                        let o = &g.1[lo..=hi];
                        recs.extend_from_slice(&g.0[o[0] as usize..o[hi - lo] as usize]);
                        offs.extend(o[1..].iter().map(|x| x - o[0] + base));
                    }
                    Batches::Flash(_) => {
                        let o = le_u64s(&read_range(
                            ctx,
                            &format!("{out}.batch{i}#off"),
                            lo as u64 * 8,
                            (hi - lo + 1) as u64 * 8,
                        )?);
                        recs.extend_from_slice(&read_range(
                            ctx,
                            &format!("{out}.batch{i}#rec"),
                            o[0],
                            o[hi - lo] - o[0],
                        )?);
                        offs.extend(o[1..].iter().map(|x| x - o[0] + base));
                    }
                }
            }
            raw += recs.len() as u64;
            let chunks = encode_partition(&recs, &offs, spec)?;
            index_entry(&mut index, offs.len() as u64 - 1, written, &chunks);
            for c in &chunks {
                pending.extend_from_slice(c);
                written += c.len() as u64;
            }
            // The Writer's buffer: flash sees large appends, however small the partitions.
            if pending.len() >= WRITE_BUFFER {
                ctx.append(txn, &pending)?;
                pending.clear();
            }
        }
        if !pending.is_empty() {
            ctx.append(txn, &pending)?;
        }
        Ok(())
    })();
    if let Err(e) = r {
        let _ = ctx.abort(txn);
        return Err(e);
    }
    ctx.commit(txn)?;
    store(ctx, &format!("{out}#index"), &index)?;
    Ok((written, raw))
}
