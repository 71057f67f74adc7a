//! NASCENT's device programs (FPGA '21): `dict-decode` (§3.6), `sort` (§3.3-3.4) and `gather`, the shuffle
//! kernel (§3.5). They work on one device's part of a table: a key column stored column-wise (plain or
//! dictionary-encoded) and the rest of each row stored row-wise (the hybrid layout, §3.5 Fig. 6c).
//!
//! Object formats:
//! - plain key column: little-endian values of `key_type` (4 or 8 bytes each);
//! - dictionary page: little-endian u64 values; data page: 8- or 16-bit little-endian codes;
//! - sorted indices: `narrow` (32-bit keys) u64 words `key << 32 | row`, or `wide` 12-byte entries
//!   (u64 key, u32 row); keys are the order-preserving radix images of [`insitu_kernels::sort::RadixKey`].

use std::collections::BTreeMap;

use insitu_kernels::dict::{self, Codes, Decoded};
use insitu_kernels::sort::{argsort_bitonic, argsort_fast, BitonicConfig, RadixKey, SortedIndices};

use crate::command::{Args, Value};
use crate::error::{DeviceError, Result};
use crate::program::{Program, ProgramContext};

/// Types a key column may have on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
}

impl KeyType {
    pub fn parse(s: &str) -> Option<KeyType> {
        Some(match s {
            "u32" => KeyType::U32,
            "i32" => KeyType::I32,
            "f32" => KeyType::F32,
            "u64" => KeyType::U64,
            "i64" => KeyType::I64,
            "f64" => KeyType::F64,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            KeyType::U32 => "u32",
            KeyType::I32 => "i32",
            KeyType::F32 => "f32",
            KeyType::U64 => "u64",
            KeyType::I64 => "i64",
            KeyType::F64 => "f64",
        }
    }

    pub fn width(self) -> usize {
        match self {
            KeyType::U32 | KeyType::I32 | KeyType::F32 => 4,
            _ => 8,
        }
    }

    pub fn narrow(self) -> bool {
        self.width() == 4
    }
}

/// Sort algorithm of the `sort` program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    Fast,
    Bitonic,
}

fn sort_typed<K: RadixKey>(keys: &[K], first_row: u32, algo: Algo) -> SortedIndices {
    match algo {
        Algo::Fast => argsort_fast(keys, first_row),
        Algo::Bitonic => argsort_bitonic(keys, first_row, BitonicConfig::default()),
    }
}

fn le<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    b.chunks_exact(N).map(|c| c.try_into().expect("chunks_exact yields N bytes"))
}

/// Sorts little-endian key bytes of `kt` into sorted indices, rows numbered from `first_row`.
pub fn sort_key_bytes(bytes: &[u8], kt: KeyType, first_row: u32, algo: Algo) -> SortedIndices {
    match kt {
        KeyType::U32 => {
            sort_typed(&le::<4>(bytes).map(u32::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
        KeyType::I32 => {
            sort_typed(&le::<4>(bytes).map(i32::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
        KeyType::F32 => {
            sort_typed(&le::<4>(bytes).map(f32::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
        KeyType::U64 => {
            sort_typed(&le::<8>(bytes).map(u64::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
        KeyType::I64 => {
            sort_typed(&le::<8>(bytes).map(i64::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
        KeyType::F64 => {
            sort_typed(&le::<8>(bytes).map(f64::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
    }
}

/// Serializes sorted indices (the object format above).
pub fn sorted_to_bytes(s: &SortedIndices) -> Vec<u8> {
    match s {
        SortedIndices::Narrow(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        SortedIndices::Wide(v) => {
            let mut out = Vec::with_capacity(v.len() * 12);
            for (k, r) in v {
                out.extend_from_slice(&k.to_le_bytes());
                out.extend_from_slice(&r.to_le_bytes());
            }
            out
        }
    }
}

/// Parses the `rows` layout (u32 rows only, for byte-string keys) into sorted indices with zero keys.
pub fn rows_from_bytes(b: &[u8]) -> SortedIndices {
    SortedIndices::Narrow(le::<4>(b).map(|c| u32::from_le_bytes(c) as u64).collect())
}

/// Parses sorted indices.
pub fn sorted_from_bytes(b: &[u8], narrow: bool) -> SortedIndices {
    if narrow {
        SortedIndices::Narrow(le::<8>(b).map(u64::from_le_bytes).collect())
    } else {
        SortedIndices::Wide(
            b.chunks_exact(12)
                .map(|c| {
                    let k = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
                    (k, u32::from_le_bytes(c[8..].try_into().expect("4 bytes")))
                })
                .collect(),
        )
    }
}

fn entry_bytes(narrow: bool) -> u64 {
    if narrow {
        8
    } else {
        12
    }
}

/// Where the key column comes from.
enum KeySource {
    Plain { object: String },
    Dict { dict: Vec<u64>, codes: String, code_bits: u32 },
}

impl KeySource {
    fn from_args(ctx: &ProgramContext<'_>, args: &Args) -> Result<(KeySource, u64)> {
        let kt = key_type(ctx, args)?;
        match args.str("encoding").unwrap_or("plain") {
            "plain" => {
                let object =
                    args.str("key").ok_or_else(|| ctx.bad("missing string argument key"))?.to_string();
                let size = ctx.object(&object)?.size;
                if size % kt.width() as u64 != 0 {
                    return Err(ctx.bad(format!(
                        "{object:?} holds {size} bytes, not a whole number of {} keys",
                        kt.name()
                    )));
                }
                Ok((KeySource::Plain { object }, size / kt.width() as u64))
            }
            "dict" => {
                let dict_obj = args.str("dict").ok_or_else(|| ctx.bad("missing string argument dict"))?;
                let codes =
                    args.str("codes").ok_or_else(|| ctx.bad("missing string argument codes"))?.to_string();
                let code_bits = args.u64("code_bits").unwrap_or(16) as u32;
                if code_bits != 8 && code_bits != 16 {
                    return Err(ctx.bad(format!("code_bits must be 8 or 16, not {code_bits}")));
                }
                let d = ctx.object(dict_obj)?;
                let mut raw = vec![0u8; d.size as usize];
                ctx.read_object(dict_obj, 0, &mut raw)?;
                let dict = le::<8>(&raw).map(u64::from_le_bytes).collect();
                let rows = ctx.object(&codes)?.size / (code_bits as u64 / 8);
                Ok((KeySource::Dict { dict, codes, code_bits }, rows))
            }
            other => Err(ctx.bad(format!("unknown encoding {other:?} (plain or dict)"))),
        }
    }

    /// Little-endian key bytes of rows `first..first + n`.
    fn read(&self, ctx: &ProgramContext<'_>, kt: KeyType, first: u64, n: u64) -> Result<Vec<u8>> {
        match self {
            KeySource::Plain { object } => {
                let w = kt.width() as u64;
                let mut b = vec![0u8; (n * w) as usize];
                ctx.read_object(object, first * w, &mut b)?;
                Ok(b)
            }
            KeySource::Dict { dict, codes, code_bits } => {
                let cw = *code_bits as u64 / 8;
                let mut raw = vec![0u8; (n * cw) as usize];
                ctx.read_object(codes, first * cw, &mut raw)?;
                let codes = Codes::from_bytes(*code_bits, &raw).ok_or_else(|| ctx.bad("bad data page"))?;
                let bits = kt.width() as u32 * 8;
                let decoded = dict::decode(dict, &codes, bits).map_err(|e| ctx.bad(e.to_string()))?;
                Ok(match decoded {
                    Decoded::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    Decoded::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    Decoded::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                })
            }
        }
    }
}

fn key_type(ctx: &ProgramContext<'_>, args: &Args) -> Result<KeyType> {
    let s = args.str("key_type").ok_or_else(|| ctx.bad("missing string argument key_type"))?;
    KeyType::parse(s).ok_or_else(|| ctx.bad(format!("key_type {s:?} is not one of u32 i32 f32 u64 i64 f64")))
}

/// `dict-decode`: dictionary page + data page -> values of `out_bits` bits in buffer 0 (§3.6).
#[derive(Debug)]
pub struct DictDecode;

impl Program for DictDecode {
    fn id(&self) -> &'static str {
        "dict-decode"
    }

    fn kernel_class(&self) -> &'static str {
        "dict-decode"
    }

    fn description(&self) -> &'static str {
        "decode a dictionary-encoded column into 16/32/64-bit values in buffer 0; args: dict, codes, \
         code_bits (8|16), out_bits (16|32|64)"
    }

    fn run(&self, ctx: &ProgramContext<'_>, args: &Args) -> Result<Args> {
        let out_bits = args.u64("out_bits").unwrap_or(32) as u32;
        let kt = match out_bits {
            32 => KeyType::U32,
            64 => KeyType::U64,
            16 => KeyType::U32,
            b => return Err(ctx.bad(format!("out_bits must be 16, 32 or 64, not {b}"))),
        };
        let mut a = args.clone();
        a.set("encoding", Value::Str("dict".into()));
        a.set("key_type", Value::Str(kt.name().into()));
        let (src, rows) = KeySource::from_args(ctx, &a)?;
        let out = ctx.buffer(0)?;
        let mut dst = out.lock();
        let ow = out_bits as usize / 8;
        if dst.len() < rows as usize * ow {
            return Err(ctx.bad(format!(
                "buffer 0 holds {} bytes, {} needed",
                dst.len(),
                rows as usize * ow
            )));
        }
        // Tiles of 64 Ki codes stream from flash through the decoder into device memory.
        const TILE: u64 = 64 << 10;
        let mut first = 0;
        while first < rows {
            let n = TILE.min(rows - first);
            let bytes = src.read(ctx, kt, first, n)?;
            if out_bits == 16 {
                for (i, c) in bytes.chunks_exact(4).enumerate() {
                    let v = u32::from_le_bytes(c.try_into().expect("4 bytes"));
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
        Ok(Args::new().with("rows", Value::U64(rows)))
    }
}

/// `sort`: key column -> sorted-indices object, in device memory if it fits, else out of core: sorted runs
/// that fit device memory are written to flash and k-way merged back (§3.4: "fetch and sort another chunk
/// ... then merges them").
#[derive(Debug)]
pub struct Sort;

/// Device memory a row costs while sorting: its key, its (key, row) entry and the radix scratch copy.
fn sort_bytes_per_row(kt: KeyType) -> u64 {
    kt.width() as u64 + 2 * if kt.narrow() { 8 } else { 16 }
}

impl Program for Sort {
    fn id(&self) -> &'static str {
        "sort"
    }

    fn kernel_class(&self) -> &'static str {
        "sort"
    }

    fn description(&self) -> &'static str {
        "sort a key column into a sorted-indices object; args: key_type, encoding (plain|dict), key | dict + \
         codes + code_bits, algo (fast|bitonic), out, memory_budget (optional, bytes)"
    }

    fn run(&self, ctx: &ProgramContext<'_>, args: &Args) -> Result<Args> {
        if args.str("key_type") == Some("bytes") {
            return sort_bytes(ctx, args);
        }
        let kt = key_type(ctx, args)?;
        let algo = match args.str("algo").unwrap_or("fast") {
            "fast" => Algo::Fast,
            "bitonic" => Algo::Bitonic,
            other => return Err(ctx.bad(format!("algo {other:?} is not fast or bitonic"))),
        };
        let out = args.str("out").ok_or_else(|| ctx.bad("missing string argument out"))?;
        let (src, rows) = KeySource::from_args(ctx, args)?;
        if rows > u32::MAX as u64 {
            return Err(ctx.bad("more than 2^32 rows on one device"));
        }
        let budget = args.u64("memory_budget").unwrap_or(u64::MAX).min(ctx.memory_available());
        let per_row = sort_bytes_per_row(kt);
        let chunk_rows = (budget / per_row).min(rows.max(1));
        if chunk_rows < 1024.min(rows.max(1)) {
            return Err(DeviceError::MemoryExhausted {
                requested: per_row * 1024,
                available: ctx.memory_available(),
                capacity: ctx.memory_available(),
            });
        }
        let mut attrs = BTreeMap::new();
        attrs.insert("key_type".to_string(), kt.name().to_string());
        attrs.insert("layout".to_string(), if kt.narrow() { "narrow" } else { "wide" }.to_string());
        attrs.insert("rows".to_string(), rows.to_string());
        if rows <= chunk_rows {
            let _mem = ctx.reserve(rows * per_row)?;
            let keys = src.read(ctx, kt, 0, rows)?;
            let sorted = sort_key_bytes(&keys, kt, 0, algo);
            write_object(ctx, out, "sorted-indices", attrs, &sorted_to_bytes(&sorted))?;
            return Ok(Args::new().with("rows", Value::U64(rows)).with("runs", Value::U64(1)));
        }
        // Out of core: sorted runs to flash, then a streaming k-way merge.
        let mut runs = Vec::new();
        let mut first = 0u64;
        while first < rows {
            let n = chunk_rows.min(rows - first);
            let _mem = ctx.reserve(n * per_row)?;
            let keys = src.read(ctx, kt, first, n)?;
            let sorted = sort_key_bytes(&keys, kt, first as u32, algo);
            let name = format!("{out}.run{}", runs.len());
            write_object(ctx, &name, "sort-run", BTreeMap::new(), &sorted_to_bytes(&sorted))?;
            runs.push((name, n));
            first += n;
        }
        let merged = merge_runs_from_flash(ctx, &runs, kt.narrow(), out, attrs, budget);
        for (name, _) in &runs {
            let _ = ctx.delete(name);
        }
        merged?;
        Ok(Args::new().with("rows", Value::U64(rows)).with("runs", Value::U64(runs.len() as u64)))
    }
}

/// Byte-string keys (`key` bytes + `keyoff` u64 offsets): sorted in device memory into the `rows` layout.
fn sort_bytes(ctx: &ProgramContext<'_>, args: &Args) -> Result<Args> {
    let key = args.str("key").ok_or_else(|| ctx.bad("missing string argument key"))?;
    let keyoff = args.str("keyoff").ok_or_else(|| ctx.bad("missing string argument keyoff"))?;
    let out = args.str("out").ok_or_else(|| ctx.bad("missing string argument out"))?;
    let (dsize, osize) = (ctx.object(key)?.size, ctx.object(keyoff)?.size);
    let rows = (osize / 8).saturating_sub(1);
    // Keys, offsets, row ids and the sort's scratch all live in device memory; string keys are not
    // sorted out of core yet.
    let _mem = ctx.reserve(dsize + osize + rows * 8)?;
    let mut data = vec![0u8; dsize as usize];
    ctx.read_object(key, 0, &mut data)?;
    let mut raw = vec![0u8; osize as usize];
    ctx.read_object(keyoff, 0, &mut raw)?;
    let offs: Vec<u64> = le::<8>(&raw).map(u64::from_le_bytes).collect();
    if offs.windows(2).any(|w| w[0] > w[1]) || offs.last().copied().unwrap_or(0) > dsize {
        return Err(ctx.bad(format!("{keyoff:?} does not hold offsets into {key:?}")));
    }
    let keys: Vec<&[u8]> = offs.windows(2).map(|w| &data[w[0] as usize..w[1] as usize]).collect();
    let order = match args.str("algo").unwrap_or("fast") {
        "bitonic" => insitu_kernels::sort::argsort_strings_bitonic(&keys, 0),
        _ => insitu_kernels::sort::argsort_strings(&keys, 0),
    };
    let mut attrs = BTreeMap::new();
    attrs.insert("key_type".to_string(), "bytes".to_string());
    attrs.insert("layout".to_string(), "rows".to_string());
    attrs.insert("rows".to_string(), rows.to_string());
    let bytes: Vec<u8> = order.iter().flat_map(|r| r.to_le_bytes()).collect();
    write_object(ctx, out, "sorted-indices", attrs, &bytes)?;
    Ok(Args::new().with("rows", Value::U64(rows)).with("runs", Value::U64(1)))
}

fn write_object(
    ctx: &ProgramContext<'_>,
    name: &str,
    kind: &str,
    attrs: BTreeMap<String, String>,
    data: &[u8],
) -> Result<()> {
    let txn = ctx.create_object(name, kind, attrs, Some(data.len() as u64))?;
    let r = data.chunks(4 << 20).try_for_each(|c| ctx.append(txn, c));
    if let Err(e) = r {
        let _ = ctx.abort(txn);
        return Err(e);
    }
    ctx.commit(txn)?;
    Ok(())
}

/// Streams sorted runs from flash through a k-way merge into object `out`; each run is read through a
/// window of device memory, and the output leaves in blocks.
fn merge_runs_from_flash(
    ctx: &ProgramContext<'_>,
    runs: &[(String, u64)],
    narrow: bool,
    out: &str,
    attrs: BTreeMap<String, String>,
    budget: u64,
) -> Result<()> {
    let eb = entry_bytes(narrow);
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
            Ok(sorted_from_bytes(&b, narrow))
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
                ctx.append(txn, &sorted_to_bytes(&SortedIndices::from_pairs(block.drain(..), narrow)))?;
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
            ctx.append(txn, &sorted_to_bytes(&SortedIndices::from_pairs(block, narrow)))?;
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

/// `gather`: the shuffle kernel. Row `i` of the output is row `order[start + i]` of the row-wise part;
/// rows go to buffer 0 (the host stores buffers to flash in order). Several instances run on the compute
/// units at once, each on its own range, so the flash path stays busy (§3.5).
#[derive(Debug)]
pub struct Gather;

impl Program for Gather {
    fn id(&self) -> &'static str {
        "gather"
    }

    fn kernel_class(&self) -> &'static str {
        "gather"
    }

    fn description(&self) -> &'static str {
        "gather rows in sorted-index order into buffer 0; args: rows, row_size | rowoff, order, start, count; \
         optional buffers 1 and 2: the rows and row offsets already in device memory"
    }

    fn run(&self, ctx: &ProgramContext<'_>, args: &Args) -> Result<Args> {
        let rows_obj = args.str("rows").ok_or_else(|| ctx.bad("missing string argument rows"))?;
        let order_obj = args.str("order").ok_or_else(|| ctx.bad("missing string argument order"))?;
        let start = args.u64("start").unwrap_or(0);
        let order_meta = ctx.object(order_obj)?;
        let layout = order_meta.attrs.get("layout").map(String::as_str).unwrap_or("narrow");
        let eb = match layout {
            "rows" => 4,
            "wide" => 12,
            _ => 8,
        };
        let total = order_meta.size / eb;
        let count = args.u64("count").unwrap_or(total.saturating_sub(start));
        if start + count > total {
            return Err(ctx.bad(format!("range {start}+{count} is past the {total} sorted indices")));
        }
        let mut raw = vec![0u8; (count * eb) as usize];
        ctx.read_object(order_obj, start * eb, &mut raw)?;
        let order = match layout {
            "rows" => rows_from_bytes(&raw),
            l => sorted_from_bytes(&raw, l != "wide"),
        };
        // Rows come from flash (page-granular random reads), or from device memory when the host loaded
        // the part there (buffer 1: rows, buffer 2: row offsets), as NASCENT's shuffle reads DRAM.
        let rows_mem = if ctx.buffer_count() > 1 { Some(ctx.buffer(1)?) } else { None };
        let off_mem = if ctx.buffer_count() > 2 { Some(ctx.buffer(2)?) } else { None };
        let rows_guard = rows_mem.as_ref().map(|b| b.read());
        let off_guard = off_mem.as_ref().map(|b| b.read());
        let from_mem = |mem: &[u8], at: u64, dst: &mut [u8]| -> Result<()> {
            let src = mem
                .get(at as usize..at as usize + dst.len())
                .ok_or_else(|| ctx.bad("row past the loaded buffer"))?;
            dst.copy_from_slice(src);
            Ok(())
        };
        let read_rows = |at: u64, dst: &mut [u8]| -> Result<()> {
            match &rows_guard {
                Some(g) => from_mem(g, at, dst),
                None => ctx.read_object(rows_obj, at, dst),
            }
        };
        let out = ctx.buffer(0)?;
        let mut dst = out.lock();
        let mut written = 0usize;
        let mut offsets = Vec::new();
        if let Some(row_size) = args.u64("row_size") {
            let rs = row_size as usize;
            if dst.len() < count as usize * rs {
                return Err(ctx.bad(format!(
                    "buffer 0 holds {} bytes, {} needed",
                    dst.len(),
                    count as usize * rs
                )));
            }
            for i in 0..order.len() {
                let r = order.row(i) as u64;
                read_rows(r * row_size, &mut dst[written..written + rs])?;
                written += rs;
            }
        } else {
            let rowoff = args.str("rowoff").ok_or_else(|| ctx.bad("needs row_size or rowoff"))?;
            offsets.push(0u64);
            for i in 0..order.len() {
                let r = order.row(i) as u64;
                let mut b = [0u8; 16];
                match &off_guard {
                    Some(g) => from_mem(g, r * 8, &mut b)?,
                    None => ctx.read_object(rowoff, r * 8, &mut b)?,
                }
                let a = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                let e = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
                let len = e.checked_sub(a).ok_or_else(|| ctx.bad("row offsets go backwards"))? as usize;
                if written + len > dst.len() {
                    return Err(ctx.bad("buffer 0 is too small for the gathered rows"));
                }
                read_rows(a, &mut dst[written..written + len])?;
                written += len;
                offsets.push(written as u64);
            }
        }
        let mut out = Args::new().with("bytes", Value::U64(written as u64)).with("rows", Value::U64(count));
        if !offsets.is_empty() {
            out.set("offsets", Value::U64List(offsets));
        }
        Ok(out)
    }
}
