//! NASCENT's device programs (FPGA '21): `dict-decode` (§3.6), `sort` (§3.3-3.4) and `gather`, the shuffle
//! kernel (§3.5), and `extract-key`, which makes a key column of a field stored row-wise. They work on one device's part of a table: a key column stored column-wise (plain or
//! dictionary-encoded) and the rest of each row stored row-wise (the hybrid layout, §3.5 Fig. 6c). Object
//! formats are those of `insitu_kernels::keys` (key columns, sorted indices) and `insitu_kernels::dict`.

use std::collections::BTreeMap;

use insitu_kernels::arch::prefetch;
use insitu_kernels::dict::Codes;
use insitu_kernels::keys::{encode_sorted, sort_byte_keys, sort_key_bytes, IndexLayout, KeyType, SortAlgo};
use insitu_kernels::le;
use insitu_kernels::rowkey::KeyForm;
use insitu_kernels::sort::SortedIndices;

use crate::error::Result;
use crate::program::ProgramContext;
use crate::protocol::programs::{
    DictDecodeArgs, DictDecodeOutput, ExtractKeyArgs, ExtractKeyOutput, GatherArgs, GatherOutput, KeyColumn,
    RowShape, SortArgs, SortOutput,
};
use crate::work::{self, SortClass};

/// A key column ready to be read in row ranges (a dictionary is read once, up front).
enum KeySource<'a> {
    Plain { object: &'a str, key_type: KeyType },
    Dict { dict: Vec<u64>, codes: &'a str, code_bits: u32, key_type: KeyType },
}

impl<'a> KeySource<'a> {
    /// The source of a fixed-width key column and its number of rows.
    fn open(ctx: &ProgramContext<'_>, key: &'a KeyColumn) -> Result<(KeySource<'a>, u64)> {
        match key {
            KeyColumn::Plain { object, key_type } => {
                let size = ctx.object(object)?.size;
                if size % key_type.width() as u64 != 0 {
                    return Err(ctx.bad(format!(
                        "{object:?} holds {size} bytes, not a whole number of {} keys",
                        key_type.name()
                    )));
                }
                Ok((KeySource::Plain { object, key_type: *key_type }, size / key_type.width() as u64))
            }
            KeyColumn::Dict { dict, codes, code_bits, key_type } => {
                if *code_bits != 8 && *code_bits != 16 {
                    return Err(ctx.bad(format!("code_bits must be 8 or 16, not {code_bits}")));
                }
                let dict = le::decode_u64s(&ctx.read_all(dict)?);
                let rows = ctx.object(codes)?.size / (*code_bits as u64 / 8);
                Ok((KeySource::Dict { dict, codes, code_bits: *code_bits, key_type: *key_type }, rows))
            }
            KeyColumn::Bytes { .. } => Err(ctx.bad("byte-string keys have no fixed width")),
        }
    }

    fn key_type(&self) -> KeyType {
        match self {
            KeySource::Plain { key_type, .. } | KeySource::Dict { key_type, .. } => *key_type,
        }
    }

    /// Little-endian key bytes of rows `first..first + n` (dictionary codes decoded on the fly).
    fn read(&self, ctx: &ProgramContext<'_>, first: u64, n: u64) -> Result<Vec<u8>> {
        self.read_to(ctx, first, n, self.key_type().width() as u64)
    }

    /// As [`KeySource::read`], for a decoder whose values leave it `out_width` bytes wide (what its
    /// `decode.out_bytes` counts).
    fn read_to(&self, ctx: &ProgramContext<'_>, first: u64, n: u64, out_width: u64) -> Result<Vec<u8>> {
        match self {
            KeySource::Plain { object, key_type } => {
                let w = key_type.width() as u64;
                let mut b = vec![0u8; (n * w) as usize];
                ctx.read_object(object, first * w, &mut b)?;
                Ok(b)
            }
            KeySource::Dict { dict, codes, code_bits, key_type } => {
                let cw = *code_bits as u64 / 8;
                let mut raw = vec![0u8; (n * cw) as usize];
                ctx.read_object(codes, first * cw, &mut raw)?;
                let codes = Codes::from_bytes(*code_bits, &raw).ok_or_else(|| ctx.bad("bad data page"))?;
                let values = key_type.decode_dict(dict, &codes).map_err(|e| ctx.bad(e.to_string()))?;
                ctx.work(|w| {
                    work::add(w, work::DECODE_CODES, n);
                    work::add(w, work::DECODE_OUT_BYTES, n * out_width);
                });
                Ok(values)
            }
        }
    }
}

/// `dict-decode`: dictionary page + data page -> values of `out_bits` bits in the output buffer (§3.6).
pub(crate) fn dict_decode(ctx: &ProgramContext<'_>, a: DictDecodeArgs) -> Result<DictDecodeOutput> {
    let kt = match a.out_bits {
        32 | 16 => KeyType::U32,
        64 => KeyType::U64,
        b => return Err(ctx.bad(format!("out_bits must be 16, 32 or 64, not {b}"))),
    };
    let column = KeyColumn::Dict { dict: a.dict, codes: a.codes, code_bits: a.code_bits, key_type: kt };
    let (src, rows) = KeySource::open(ctx, &column)?;
    let out = ctx.buffer(a.out)?;
    let mut dst = out.lock();
    let ow = a.out_bits as usize / 8;
    if dst.len() < rows as usize * ow {
        return Err(ctx.bad(format!("buffer 0 holds {} bytes, {} needed", dst.len(), rows as usize * ow)));
    }
    // Tiles of 64 Ki codes stream from flash through the decoder into device memory.
    const TILE: u64 = 64 << 10;
    let mut first = 0;
    while first < rows {
        let n = TILE.min(rows - first);
        let bytes = src.read_to(ctx, first, n, ow as u64)?;
        if a.out_bits == 16 {
            for (i, w) in le::words::<4>(&bytes).enumerate() {
                let v = u32::from_le_bytes(w);
                if v > u16::MAX as u32 {
                    return Err(ctx.bad(format!("dictionary value {v} does not fit 16 bits")));
                }
                let at = (first as usize + i) * 2;
                dst[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
            }
        } else {
            let at = first as usize * ow;
            dst[at..at + bytes.len()].copy_from_slice(&bytes);
        }
        first += n;
    }
    Ok(DictDecodeOutput { rows })
}

/// Device memory a row costs while sorting: its key, its (key, row) entry and the radix scratch copy.
fn sort_bytes_per_row(kt: KeyType) -> u64 {
    kt.width() as u64 + 2 * if kt.narrow() { 8 } else { 16 }
}

fn index_attrs(kt: Option<KeyType>, layout: IndexLayout, rows: u64) -> BTreeMap<String, String> {
    let mut attrs = BTreeMap::new();
    attrs.insert("key_type".to_string(), kt.map_or("bytes", KeyType::name).to_string());
    attrs.insert("layout".to_string(), layout_name(layout).to_string());
    attrs.insert("rows".to_string(), rows.to_string());
    attrs
}

fn layout_name(l: IndexLayout) -> &'static str {
    match l {
        IndexLayout::Narrow => "narrow",
        IndexLayout::Wide => "wide",
        IndexLayout::Rows => "rows",
    }
}

/// `sort`: key column -> sorted-indices object, in device memory if it fits, else out of core: sorted runs
/// that fit device memory are written to flash and k-way merged back (§3.4: "fetch and sort another chunk
/// ... then merges them").
pub(crate) fn sort(ctx: &ProgramContext<'_>, a: SortArgs) -> Result<SortOutput> {
    if let KeyColumn::Bytes { data, offsets } = &a.key {
        return sort_bytes(ctx, data, offsets, a.algo, &a.out, a.memory_budget);
    }
    let (src, rows) = KeySource::open(ctx, &a.key)?;
    let kt = src.key_type();
    if rows > u32::MAX as u64 {
        return Err(ctx.bad("more than 2^32 rows on one device"));
    }
    let budget = a.memory_budget.unwrap_or(u64::MAX).min(ctx.memory_available());
    let per_row = sort_bytes_per_row(kt);
    let chunk_rows = (budget / per_row).min(rows.max(1));
    if chunk_rows < 1024.min(rows.max(1)) {
        let needed = per_row * 1024.min(rows.max(1));
        return Err(ctx.too_little_memory(a.memory_budget, needed, "sorting (1024 rows a chunk)"));
    }
    let attrs = index_attrs(Some(kt), IndexLayout::for_key(kt), rows);
    if rows <= chunk_rows {
        let _mem = ctx.reserve(rows * per_row)?;
        let keys = src.read(ctx, 0, rows)?;
        let sorted = sort_key_bytes(&keys, kt, 0, a.algo);
        ctx.work(|w| SortClass::count(w, work::SORT, kt.width() as u32 * 8, rows));
        ctx.write_object(&a.out, "sorted-indices", attrs, &encode_sorted(&sorted))?;
        return Ok(SortOutput { rows, runs: 1 });
    }
    // Out of core: sorted runs to flash, then a streaming k-way merge.
    let mut runs = Vec::new();
    let mut first = 0u64;
    while first < rows {
        let n = chunk_rows.min(rows - first);
        let _mem = ctx.reserve(n * per_row)?;
        let keys = src.read(ctx, first, n)?;
        let sorted = sort_key_bytes(&keys, kt, first as u32, a.algo);
        ctx.work(|w| SortClass::count(w, work::SORT, kt.width() as u32 * 8, n));
        let name = format!("{}.run{}", a.out, runs.len());
        ctx.write_object(&name, "sort-run", BTreeMap::new(), &encode_sorted(&sorted))?;
        runs.push((name, n));
        first += n;
    }
    ctx.work(|w| work::count_merge(w, runs.len() as u64, rows));
    let merged = merge_runs_from_flash(ctx, &runs, IndexLayout::for_key(kt), &a.out, attrs, budget);
    for (name, _) in &runs {
        let _ = ctx.delete(name);
    }
    merged?;
    Ok(SortOutput { rows, runs: runs.len() as u64 })
}

/// Byte-string keys (key bytes + u64 offsets): sorted in device memory into the `rows` layout.
fn sort_bytes(
    ctx: &ProgramContext<'_>,
    key: &str,
    keyoff: &str,
    algo: SortAlgo,
    out: &str,
    memory_budget: Option<u64>,
) -> Result<SortOutput> {
    let (dsize, osize) = (ctx.object(key)?.size, ctx.object(keyoff)?.size);
    let rows = (osize / 8).saturating_sub(1);
    // Keys, offsets, row ids and the sort's scratch all live in device memory; string keys are not
    // sorted out of core yet, so a budget below that is refused (it was ignored).
    let needed = dsize + osize + rows * 8;
    if needed > memory_budget.unwrap_or(u64::MAX).min(ctx.memory_available()) {
        return Err(ctx.too_little_memory(memory_budget, needed, "sorting string keys (in device memory)"));
    }
    let _mem = ctx.reserve(needed)?;
    let data = ctx.read_all(key)?;
    let offs = le::decode_u64s(&ctx.read_all(keyoff)?);
    if offs.windows(2).any(|w| w[0] > w[1]) || offs.last().copied().unwrap_or(0) > dsize {
        return Err(ctx.bad(format!("{keyoff:?} does not hold offsets into {key:?}")));
    }
    let keys: Vec<&[u8]> = offs.windows(2).map(|w| &data[w[0] as usize..w[1] as usize]).collect();
    let order = sort_byte_keys(&keys, 0, algo);
    // Byte-string keys are priced as 64-bit keys: a sorting network compares a fixed-width prefix.
    ctx.work(|w| SortClass::count(w, work::SORT, 64, rows));
    let attrs = index_attrs(None, IndexLayout::Rows, rows);
    ctx.write_object(out, "sorted-indices", attrs, &le::encode_u32s(&order))?;
    Ok(SortOutput { rows, runs: 1 })
}

/// Streams sorted runs from flash through a k-way merge into object `out`; each run is read through a
/// window of device memory, and the output leaves in blocks.
fn merge_runs_from_flash(
    ctx: &ProgramContext<'_>,
    runs: &[(String, u64)],
    layout: IndexLayout,
    out: &str,
    attrs: BTreeMap<String, String>,
    budget: u64,
) -> Result<()> {
    let eb = layout.entry_bytes();
    let narrow = layout == IndexLayout::Narrow;
    // Split the budget: one window per run plus the output block.
    let window_entries = ((budget / (runs.len() as u64 + 1)) / eb).clamp(1, 1 << 16);
    let _mem = ctx.reserve(window_entries * eb * (runs.len() as u64 + 1))?;
    let total: u64 = runs.iter().map(|r| r.1).sum();
    let txn = ctx.create_object(out, "sorted-indices", attrs, Some(total * eb))?;
    let result = (|| {
        let mut windows: Vec<SortedIndices> = Vec::new();
        let mut next_entry = vec![0u64; runs.len()];
        let load = |r: usize, next_entry: &mut Vec<u64>| -> Result<SortedIndices> {
            let n = window_entries.min(runs[r].1 - next_entry[r]);
            let mut b = vec![0u8; (n * eb) as usize];
            ctx.read_object(&runs[r].0, next_entry[r] * eb, &mut b)?;
            next_entry[r] += n;
            Ok(layout.decode(&b))
        };
        for r in 0..runs.len() {
            windows.push(load(r, &mut next_entry)?);
        }
        let mut pos = vec![0usize; runs.len()];
        let mut heap = std::collections::BinaryHeap::new();
        for (r, w) in windows.iter().enumerate() {
            if !w.is_empty() {
                heap.push(std::cmp::Reverse((w.key(0), w.row(0), r)));
            }
        }
        let mut block: Vec<(u64, u32)> = Vec::with_capacity(window_entries as usize);
        while let Some(std::cmp::Reverse((k, row, r))) = heap.pop() {
            block.push((k, row));
            if block.len() as u64 == window_entries {
                ctx.append(txn, &encode_sorted(&SortedIndices::from_pairs(block.drain(..), narrow)))?;
            }
            pos[r] += 1;
            if pos[r] == windows[r].len() && next_entry[r] < runs[r].1 {
                windows[r] = load(r, &mut next_entry)?;
                pos[r] = 0;
            }
            if pos[r] < windows[r].len() {
                heap.push(std::cmp::Reverse((windows[r].key(pos[r]), windows[r].row(pos[r]), r)));
            }
        }
        if !block.is_empty() {
            ctx.append(txn, &encode_sorted(&SortedIndices::from_pairs(block, narrow)))?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => ctx.commit(txn).map(|_| ()),
        Err(e) => {
            let _ = ctx.abort(txn);
            Err(e)
        }
    }
}

/// Rows an extraction reads from flash at a time (fewer when rows are long: at most `EXTRACT_BYTES`, and
/// a quarter of the free device memory).
const EXTRACT_ROWS: u64 = 64 << 10;
const EXTRACT_BYTES: u64 = 4 << 20;

/// `extract-key`: one field of every row of a part into a key column (`insitu_kernels::rowkey`), so a
/// table sorts by a column its layout keeps row-wise. Rows stream from flash in blocks (their offsets
/// first, when rows vary in size), keys stream to the output objects; device memory holds one block of
/// each. Priced as a gather of the field: one pass of the shuffle kernel over the rows, the key bytes
/// moved.
pub(crate) fn extract_key(ctx: &ProgramContext<'_>, a: ExtractKeyArgs) -> Result<ExtractKeyOutput> {
    a.field.validate().map_err(|e| ctx.bad(e.to_string()))?;
    let size = ctx.object(&a.rows)?.size;
    let rows = match &a.shape {
        RowShape::Fixed { size: 0 } => return Err(ctx.bad("rows of 0 bytes")),
        RowShape::Fixed { size: rs } => {
            if size % rs != 0 {
                return Err(ctx.bad(format!("{:?} holds {size} bytes, not whole rows of {rs}", a.rows)));
            }
            size / rs
        }
        RowShape::Var { offsets } => (ctx.object(offsets)?.size / 8).saturating_sub(1),
    };
    if rows > u32::MAX as u64 {
        return Err(ctx.bad("more than 2^32 rows on one device"));
    }
    let form = a.field.form();
    let key = match form {
        KeyForm::Plain(key_type) => KeyColumn::Plain { object: a.out.clone(), key_type },
        KeyForm::Bytes => KeyColumn::Bytes { data: a.out.clone(), offsets: a.out_offsets.clone() },
    };
    // Blocks of at most a quarter of the free device memory (and EXTRACT_BYTES).
    let block_bytes = (ctx.memory_available() / 4).clamp(4096, EXTRACT_BYTES);
    let per_block = match &a.shape {
        RowShape::Fixed { size: rs } => (block_bytes / rs).clamp(1, EXTRACT_ROWS),
        RowShape::Var { .. } => (block_bytes / 64).clamp(1, EXTRACT_ROWS),
    };
    // A block of rows, their offsets, and the keys pulled out of them (at most the rows' bytes, and a
    // byte per row).
    let _mem = ctx.reserve(2 * block_bytes + per_block * 25)?;
    let expected = match form {
        KeyForm::Plain(kt) => Some(rows * kt.width() as u64),
        KeyForm::Bytes => None,
    };
    let data_txn = ctx.create_object(&a.out, "key-column", BTreeMap::new(), expected)?;
    let off_txn = match form {
        KeyForm::Plain(_) => None,
        KeyForm::Bytes => {
            match ctx.create_object(&a.out_offsets, "key-offsets", BTreeMap::new(), Some((rows + 1) * 8)) {
                Ok(t) => Some(t),
                Err(e) => {
                    let _ = ctx.abort(data_txn);
                    return Err(e);
                }
            }
        }
    };
    let mut written = 0u64;
    let result = (|| -> Result<()> {
        let (mut block, mut keys, mut offs) = (Vec::new(), Vec::new(), Vec::new());
        let mut first = 0u64;
        if off_txn.is_some() {
            offs.push(0u64);
        }
        while first < rows {
            let mut n = per_block.min(rows - first);
            let starts = match &a.shape {
                RowShape::Fixed { size: rs } => (0..=n).map(|i| (first + i) * rs).collect::<Vec<u64>>(),
                RowShape::Var { offsets } => {
                    let mut raw = vec![0u8; (n as usize + 1) * 8];
                    ctx.read_object(offsets, first * 8, &mut raw)?;
                    let mut starts = le::decode_u64s(&raw);
                    // A block holds at most `block_bytes` of rows (one row, however long, at least).
                    let fit = starts.partition_point(|s| s.saturating_sub(starts[0]) <= block_bytes);
                    n = (fit as u64).saturating_sub(1).clamp(1, n);
                    starts.truncate(n as usize + 1);
                    starts
                }
            };
            let (lo, hi) = (starts[0], starts[n as usize]);
            if starts.windows(2).any(|w| w[0] > w[1]) || hi > size {
                return Err(ctx.failed(format!("the row offsets of {:?} are not in order", a.rows)));
            }
            block.resize((hi - lo) as usize, 0);
            ctx.read_object(&a.rows, lo, &mut block)?;
            keys.clear();
            for (i, w) in starts.windows(2).enumerate() {
                let row = &block[(w[0] - lo) as usize..(w[1] - lo) as usize];
                let bad = |e| ctx.failed(format!("row {} of {:?}: {e}", first + i as u64, a.rows));
                a.field.push(row, &mut keys).map_err(bad)?;
                if off_txn.is_some() {
                    offs.push(written + keys.len() as u64);
                }
            }
            ctx.append(data_txn, &keys)?;
            written += keys.len() as u64;
            if let Some(t) = off_txn {
                ctx.append(t, &le::encode_u64s(&offs))?;
                offs.clear();
            }
            first += n;
        }
        Ok(())
    })();
    let committed = result.and_then(|()| {
        ctx.commit(data_txn)?;
        if let Some(t) = off_txn {
            if let Err(e) = ctx.commit(t) {
                let _ = ctx.delete(&a.out);
                return Err(e);
            }
        }
        Ok(())
    });
    if let Err(e) = committed {
        let _ = ctx.abort(data_txn);
        if let Some(t) = off_txn {
            let _ = ctx.abort(t);
        }
        return Err(e);
    }
    ctx.work(|w| {
        work::add(w, work::GATHER_ROWS, rows);
        work::add(w, work::GATHER_BYTES, written);
    });
    Ok(ExtractKeyOutput { rows, key })
}

/// Rows a gather looks ahead to prefetch (enough to keep several misses in flight while a row is copied).
const AHEAD: usize = 8;

/// The most bytes of one item a gather prefetches (the start of a long item; the copy streams the rest).
const PREFETCH_BYTES: usize = 512;

/// Items a gather places and copies at a time.
const BATCH: usize = 256;

/// Items a gather places at a time when they come from flash: a batch's reads go in the order of their
/// offsets (`read_object_ranges`), which walks the flash map and pages forward only when the batch covers
/// much of the part.
const FLASH_BATCH: usize = 16384;

/// Room for `len` more bytes at `written` in a gather's output buffer.
fn room<'b>(ctx: &ProgramContext<'_>, dst: &'b mut [u8], written: usize, len: usize) -> Result<&'b mut [u8]> {
    let held = dst.len();
    written
        .checked_add(len)
        .and_then(|end| dst.get_mut(written..end))
        .ok_or_else(|| ctx.bad(format!("buffer 0 holds {held} bytes, too few for the gathered items")))
}

/// `gather`: the shuffle kernel. Item `i` of the output is item `order[start + i]` of the source; items go
/// to the output buffer (the host stores buffers to flash in order). Several instances run on the compute
/// units at once, each on its own range, so the flash path stays busy (§3.5).
pub(crate) fn gather(ctx: &ProgramContext<'_>, a: GatherArgs) -> Result<GatherOutput> {
    let order_meta = ctx.object(&a.order)?;
    let layout = match order_meta.attrs.get("layout").map(String::as_str) {
        Some("rows") => IndexLayout::Rows,
        Some("wide") => IndexLayout::Wide,
        _ => IndexLayout::Narrow,
    };
    let eb = layout.entry_bytes();
    let total = order_meta.size / eb;
    let start = a.start;
    let count = a.count.unwrap_or(total.saturating_sub(start));
    if start + count > total {
        return Err(ctx.bad(format!("range {start}+{count} is past the {total} sorted indices")));
    }
    let mut raw = vec![0u8; (count * eb) as usize];
    ctx.read_object(&a.order, start * eb, &mut raw)?;
    let order = layout.decode(&raw);
    // Items come from flash (page-granular random reads), or from device memory when the host loaded the
    // part there, as NASCENT's shuffle reads DRAM.
    let rows_mem = a.source_in_memory.map(|h| ctx.buffer(h)).transpose()?;
    let off_mem = a.offsets_in_memory.map(|h| ctx.buffer(h)).transpose()?;
    let rows_guard = rows_mem.as_ref().map(|b| b.read());
    let off_guard = off_mem.as_ref().map(|b| b.read());
    let out = ctx.buffer(a.out)?;
    let mut dst = out.lock();
    let var = matches!(a.shape, RowShape::Var { .. });
    let mut written = 0usize;
    let mut offsets = if var { vec![0u64] } else { Vec::new() };
    // Items go in batches: first where each is (a variable row's offsets), then its bytes. From device
    // memory, items sit at random places in a large buffer: the next ones are prefetched while one is
    // copied, so the copies do not each wait for memory. From flash, a batch's ranges are read at once.
    let mut places: Vec<(u64, usize)> = Vec::with_capacity(BATCH);
    let mut scratch = Vec::new();
    let item_place = |b: &[u8]| -> Result<(u64, usize)> {
        let (lo, hi) = (le::u64_at(b), le::u64_at(&b[8..]));
        let len = hi.checked_sub(lo).ok_or_else(|| ctx.bad("row offsets go backwards"))?;
        Ok((lo, len as usize))
    };
    let mut first = 0usize;
    let from_flash = rows_guard.is_none() || (var && off_guard.is_none());
    let per_batch = if from_flash { FLASH_BATCH } else { BATCH };
    while first < order.len() {
        let batch = first..(first + per_batch).min(order.len());
        first = batch.end;
        places.clear();
        match &a.shape {
            RowShape::Fixed { size } => {
                places.extend(batch.map(|k| (order.row(k) as u64 * size, *size as usize)));
            }
            RowShape::Var { offsets: rowoff } => match &off_guard {
                Some(o) => {
                    for k in batch.start..(batch.start + AHEAD).min(batch.end) {
                        prefetch(o, order.row(k) as usize * 8, 16);
                    }
                    for k in batch.clone() {
                        if k + AHEAD < batch.end {
                            prefetch(o, order.row(k + AHEAD) as usize * 8, 16);
                        }
                        let at = order.row(k) as usize * 8;
                        let b = o.get(at..at + 16).ok_or_else(|| ctx.bad("row past the loaded offsets"))?;
                        places.push(item_place(b)?);
                    }
                }
                None => {
                    scratch.resize(batch.len() * 16, 0);
                    ctx.read_object_ranges(
                        rowoff,
                        batch.map(|k| (order.row(k) as u64 * 8, 16)),
                        &mut scratch,
                    )?;
                    for b in scratch.chunks_exact(16) {
                        places.push(item_place(b)?);
                    }
                }
            },
        }
        match &rows_guard {
            Some(g) => {
                for &(at, len) in places.iter().take(AHEAD) {
                    prefetch(g, at as usize, len.min(PREFETCH_BYTES));
                }
                for (j, &(at, len)) in places.iter().enumerate() {
                    if let Some(&(next, next_len)) = places.get(j + AHEAD) {
                        prefetch(g, next as usize, next_len.min(PREFETCH_BYTES));
                    }
                    let src = g
                        .get(at as usize..at as usize + len)
                        .ok_or_else(|| ctx.bad("row past the loaded buffer"))?;
                    room(ctx, &mut dst, written, len)?.copy_from_slice(src);
                    written += len;
                    if var {
                        offsets.push(written as u64);
                    }
                }
            }
            None => {
                // The batch's items are read straight into their places in the output, one after another
                // (refused at once if they cannot all fit it: a damaged offset can say anything).
                let bytes = places.iter().fold(0usize, |b, p| b.saturating_add(p.1));
                let to = room(ctx, &mut dst, written, bytes)?;
                ctx.read_object_ranges(&a.source, places.iter().copied(), to)?;
                for &(_, len) in &places {
                    written += len;
                    if var {
                        offsets.push(written as u64);
                    }
                }
            }
        }
    }
    ctx.work(|w| {
        work::add(w, work::GATHER_ROWS, count);
        work::add(w, work::GATHER_BYTES, written as u64);
    });
    Ok(GatherOutput { bytes: written as u64, rows: count, offsets: (!offsets.is_empty()).then_some(offsets) })
}
