//! PSACS's device program (ICCD '21): the map side of a shuffle inside the device.
//!
//! `psacs-shuffle` reads a table part in batches sized to device memory. Per batch, the Reader composes
//! full records (the row-wise part with the key column put back), the Partitioner maps the shuffle key to
//! a partition id (§III-B), the Sorter orders (PID, RowID) pairs and the Gather replaces RowIDs by records
//! (§III-C), and the Indexer records each partition's extent. With one batch the partitions are written at
//! once; with several, batches go to flash and are concatenated partition by partition at the end (the
//! paper's "another level of grouping ... externally on disk", §IV-B).
//!
//! The kernel itself holds far less than a batch: its scratchpad (64 UltraRAMs, 2.25 MiB, Table I) takes
//! one tile of records at a time (§IV-B: "the size of each batch is limited by the on-chip memory
//! resources"), and the Merger concatenates every partition across the tiles in device memory (Fig. 8).
//! The work counted is the tiles': a sort of each tile's pairs, and the Merger's pass over the records
//! when a batch takes more than one tile ([`ProgramContext::shuffle_scratchpad_bytes`]). Tiles and batches
//! group the rows alike (each partition's rows in arrival order), so the result does not depend on them.
//!
//! Each partition is stored column-major (§IV-E), every column chunk LZ4
//! compressed (insitu's addition) or stored as it is (PSACS as evaluated), or row-major on request.
//! Outputs: `OUT#data` (chunks, partition after partition) and `OUT#index` (per partition: rows, offset,
//! then the length of each chunk; little-endian u64).
//!
//! The steps themselves are `insitu_kernels::shuffle`'s, which the host baselines run too. The device runs
//! them fused ([`RowBatch`]): a record is composed where the Gather puts it (a batch parked on flash) or
//! where the Writer splits it into columns (the one batch kept in memory), never first in arrival order. The
//! bytes are those of the steps run one after another (the kernels' tests compare them), the work counted is
//! the paper's steps', and the batch is copied once instead of three times.

use std::collections::BTreeMap;

use insitu_kernels::dict::Codes;
use insitu_kernels::le;
use insitu_kernels::partition::group_by_partition;
use insitu_kernels::shuffle::{
    encode_partition, index_entry, record_format, Codec, RowBatch, ShuffleSpec, StoredKey,
};

use crate::error::Result;
use crate::program::ProgramContext;
use crate::protocol::programs::{KeyColumn, RowShape, ShuffleArgs, ShuffleOutput};
use crate::work::{self, SortClass};

/// Bytes the Writer gathers before one append to flash.
const WRITE_BUFFER: usize = 4 << 20;

fn spec_of(ctx: &ProgramContext<'_>, a: &ShuffleArgs, key: &StoredKey) -> Result<ShuffleSpec> {
    if a.partitions == 0 || a.partitions > 1 << 24 {
        return Err(ctx.bad(format!("partitions must be 1 to 2^24, not {}", a.partitions)));
    }
    let format = record_format(&a.row_format, key.field_kind());
    let key_fields: Vec<usize> = a.key_fields.iter().map(|f| *f as usize).collect();
    if key_fields.is_empty() || key_fields.iter().any(|f| *f >= format.fields.len()) {
        return Err(
            ctx.bad(format!("key_fields {key_fields:?} outside the record's {} fields", format.fields.len()))
        );
    }
    Ok(ShuffleSpec {
        partitions: a.partitions,
        hash: a.hash,
        layout: a.layout,
        codec: a.codec,
        format,
        key_fields,
        float_fields: a.float_fields.iter().map(|f| *f as usize).collect(),
    })
}

/// The part's key column, read whole into device memory.
fn read_key(ctx: &ProgramContext<'_>, key: &KeyColumn) -> Result<StoredKey> {
    Ok(match key {
        KeyColumn::Plain { object, key_type } => {
            StoredKey::Plain { data: ctx.read_all(object)?, width: key_type.width() }
        }
        KeyColumn::Dict { dict, codes, code_bits, key_type } => StoredKey::Dict {
            dictionary: le::decode_u64s(&ctx.read_all(dict)?),
            codes: Codes::from_bytes(*code_bits, &ctx.read_all(codes)?)
                .ok_or_else(|| ctx.bad("bad data page"))?,
            width: key_type.width(),
        },
        KeyColumn::Bytes { data, offsets } => {
            StoredKey::Bytes { data: ctx.read_all(data)?, offsets: le::decode_u64s(&ctx.read_all(offsets)?) }
        }
    })
}

pub(crate) fn psacs_shuffle(ctx: &ProgramContext<'_>, a: ShuffleArgs) -> Result<ShuffleOutput> {
    let out = a.out.as_str();
    let rows_obj = a.part.rows.as_str();
    // Row offsets of the whole part (8 bytes a row) and the batch size from the memory budget.
    let rows_size = ctx.object(rows_obj)?.size;
    let row_offsets: Vec<u64> = match &a.part.shape {
        RowShape::Fixed { size } => (0..=rows_size / size.max(&1)).map(|i| i * size).collect(),
        RowShape::Var { offsets } => le::decode_u64s(&ctx.read_all(offsets)?),
    };
    let n = row_offsets.len() as u64 - 1;
    let budget = a.memory_budget.unwrap_or(u64::MAX).min(ctx.memory_available());
    // A batch holds the composed records (rows + keys) and their grouped copy, plus 24 bytes a row of
    // offsets, PIDs and sort scratch; the raw rows are freed once composed. Budget 3x the rows.
    let avg = (rows_size / n.max(1)).max(1) + 16;
    let batch_rows = (budget / (avg * 3 + 24)).min(n.max(1));
    if batch_rows < 64.min(n.max(1)) {
        let needed = (avg * 3 + 24) * 64.min(n.max(1));
        return Err(ctx.too_little_memory(a.memory_budget, needed, "a shuffle batch (64 rows)"));
    }
    let key = read_key(ctx, &a.part.key)?;
    let spec = spec_of(ctx, &a, &key)?;
    // Tiling (§IV-B): when the part does not fit one batch, grouped batches are parked on flash.
    let tiled = n > batch_rows;
    let mut in_memory = None;
    let mut batches = 0usize;
    let mut first = 0u64;
    let grouping = (|| -> Result<()> {
        loop {
            let count = batch_rows.min(n - first);
            let (lo, hi) = (row_offsets[first as usize], row_offsets[(first + count) as usize]);
            let _mem = ctx.reserve((hi - lo) * 3 + count * 24)?;
            let mut rows = vec![0u8; (hi - lo) as usize];
            ctx.read_object(rows_obj, lo, &mut rows)?;
            let offs: Vec<u64> =
                row_offsets[first as usize..=(first + count) as usize].iter().map(|o| o - lo).collect();
            let key_part = key.slice(first as usize, count as usize);
            // The Reader's records are composed where they are gathered to or split into columns, not
            // first in arrival order: the same bytes, one copy of the batch instead of three.
            let batch = RowBatch::new(&rows, &offs, &key_part, &spec).map_err(|e| ctx.failed(e))?;
            let pids = batch.partition_ids(&spec).map_err(|e| ctx.failed(e))?;
            // Partitioner, Sorter (8-byte (PID, RowID) pairs, §IV-C) and Gather; a dictionary key is
            // decoded as the Reader composes the records.
            let record_bytes = batch.record_bytes();
            let tiles = tiles_of(ctx.shuffle_scratchpad_bytes(), record_bytes, count);
            ctx.work(|w| {
                work::add(w, work::SHUFFLE_HASH_ROWS, count);
                // The Sorter orders one tile's pairs at a time, as even in rows as the tiles go.
                let (per, more) = (count / tiles, count % tiles);
                SortClass::count_calls(w, work::SHUFFLE_SORT, 64, per + 1, more);
                SortClass::count_calls(w, work::SHUFFLE_SORT, 64, per, tiles - more);
                work::add(w, work::SHUFFLE_GATHER_ROWS, count);
                work::add(w, work::SHUFFLE_GATHER_BYTES, record_bytes);
                // The Merger concatenates every partition across the tiles (Fig. 8): each record once more.
                if tiles > 1 {
                    work::add(w, work::SHUFFLE_MERGE_BYTES, record_bytes);
                }
                if matches!(key, StoredKey::Dict { .. }) {
                    work::add(w, work::DECODE_CODES, count);
                }
            });
            // Counted before a batch is stored, so a batch cut off half-stored is cleaned up too.
            batches += 1;
            if tiled {
                let grouped = batch.group(&pids, &spec);
                let name = format!("{out}.batch{}", batches - 1);
                store(ctx, &format!("{name}#rec"), &grouped.records)?;
                store(ctx, &format!("{name}#off"), &le::encode_u64s(&grouped.offsets))?;
                store(ctx, &format!("{name}#ext"), &le::encode_u64s(&grouped.extents))?;
            } else {
                // The one batch stays in device memory, its rows in arrival order: each partition's
                // records are gathered as it is written.
                let (order, extents) = group_by_partition(&pids, spec.partitions);
                drop(batch);
                in_memory = Some(Held { rows, offs, key: key_part, order, extents });
            }
            first += count;
            if first >= n {
                return Ok(());
            }
        }
    })();
    let result = grouping.and_then(|()| {
        let source = match &in_memory {
            Some(h) => Batches::Memory(h),
            None => Batches::Flash(batches),
        };
        merge_and_write(ctx, out, &spec, &source, a.attrs.clone())
    });
    // The parked batches go whatever happened (a full device, a failed merge): no temporary part stays.
    if tiled {
        for i in 0..batches {
            for s in ["rec", "off", "ext"] {
                let _ = ctx.delete(&format!("{out}.batch{i}#{s}"));
            }
        }
    }
    let (bytes, raw) = result?;
    Ok(ShuffleOutput { rows: n, batches: batches as u64, stored_bytes: bytes, raw_bytes: raw })
}

/// Tiles a batch of `rows` rows and `record_bytes` bytes of records takes on a kernel whose scratchpad
/// holds `scratchpad` bytes of them (§IV-B: "the size of each batch is limited by the on-chip memory
/// resources of PSACS"); one without a scratchpad takes the batch whole. At least one tile, and never
/// more than there are rows.
fn tiles_of(scratchpad: Option<u64>, record_bytes: u64, rows: u64) -> u64 {
    scratchpad.map_or(1, |s| record_bytes.div_ceil(s.max(1))).clamp(1, rows.max(1))
}

fn store(ctx: &ProgramContext<'_>, name: &str, data: &[u8]) -> Result<()> {
    ctx.write_object(name, "shuffle-batch", BTreeMap::new(), data)
}

fn read_range(ctx: &ProgramContext<'_>, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
    let mut b = vec![0u8; len as usize];
    ctx.read_object(name, offset, &mut b)?;
    Ok(b)
}

/// The one batch of an untiled shuffle, kept in device memory: its rows and keys in arrival order, the
/// rows' order by partition and each partition's extent in that order.
struct Held {
    rows: Vec<u8>,
    offs: Vec<u64>,
    key: StoredKey,
    order: Vec<u32>,
    extents: Vec<u64>,
}

/// Grouped batches: one kept in device memory, or several parked on flash as `OUT.batchI#{rec,off,ext}`.
enum Batches<'a> {
    Memory(&'a Held),
    Flash(usize),
}

/// Merger + Writer: every partition, concatenated across batches, encoded and appended to `OUT#data`;
/// returns (bytes stored, bytes before compression).
fn merge_and_write(
    ctx: &ProgramContext<'_>,
    out: &str,
    spec: &ShuffleSpec,
    batches: &Batches<'_>,
    attrs: BTreeMap<String, String>,
) -> Result<(u64, u64)> {
    let txn = ctx.create_object(&format!("{out}#data"), "shuffle-data", attrs, None)?;
    let mut index = Vec::with_capacity(spec.partitions as usize * spec.index_entry_bytes());
    let (mut written, mut raw) = (0u64, 0u64);
    let mut pending = Vec::with_capacity(WRITE_BUFFER + (64 << 10));
    let r = (|| {
        let extents: Vec<Vec<u64>> = match batches {
            Batches::Memory(_) => Vec::new(),
            Batches::Flash(k) => (0..*k)
                .map(|i| {
                    read_range(ctx, &format!("{out}.batch{i}#ext"), 0, (spec.partitions as u64 + 1) * 8)
                        .map(|b| le::decode_u64s(&b))
                })
                .collect::<Result<_>>()?,
        };
        let held = match batches {
            Batches::Memory(h) => {
                Some(RowBatch::new(&h.rows, &h.offs, &h.key, spec).map_err(|e| ctx.failed(e))?)
            }
            Batches::Flash(_) => None,
        };
        let mut recs = Vec::new();
        let mut offs = vec![0u64];
        for p in 0..spec.partitions as usize {
            // A partition's rows, its bytes as records, and its chunks.
            let (rows, bytes, chunks) = match (batches, &held) {
                // The single batch: its rows are composed and split into columns in partition order.
                (Batches::Memory(h), Some(batch)) => {
                    let part = &h.order[h.extents[p] as usize..h.extents[p + 1] as usize];
                    let chunks = batch.encode_partition(part, spec).map_err(|e| ctx.failed(e))?;
                    (part.len() as u64, batch.record_bytes_of(part), chunks)
                }
                _ => {
                    recs.clear();
                    offs.truncate(1);
                    for (i, e) in extents.iter().enumerate() {
                        let (lo, hi) = (e[p] as usize, e[p + 1] as usize);
                        if lo == hi {
                            continue;
                        }
                        let base = recs.len() as u64;
                        let o = le::decode_u64s(&read_range(
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
                        ctx.work(|w| work::add(w, work::SHUFFLE_MERGE_BYTES, o[hi - lo] - o[0]));
                        offs.extend(o[1..].iter().map(|x| x - o[0] + base));
                    }
                    let chunks = encode_partition(&recs, &offs, spec).map_err(|e| ctx.failed(e))?;
                    (offs.len() as u64 - 1, recs.len() as u64, chunks)
                }
            };
            raw += bytes;
            if spec.codec != Codec::None {
                ctx.work(|w| work::add(w, work::ENCODE_BYTES, bytes));
            }
            index_entry(&mut index, rows, written, &chunks);
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
