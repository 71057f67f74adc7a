//! Moving objects and table parts between the host and the devices, through the command set.

use arrow::array::ArrayRef;
use arrow::record_batch::RecordBatch;
use insitu_device::protocol::{Abort, Append, Commit, CreateObject, Delete, Read, Stat};
use insitu_kernels::dict::Codes;
use insitu_kernels::le;

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::table::info::{KeyEncoding, PartInfo};
use crate::table::layout::{decode_part, key_from_bits, key_from_bytes, EncodedKey, EncodedPart};
use crate::table::schema::TableSchema;

const CHUNK: usize = 4 << 20;

/// Starts a new object of `size` bytes on device `dev`; returns its write transaction.
pub fn begin_object(array: &Array, dev: u32, name: &str, kind: &str, size: u64) -> Result<u64> {
    let cmd = CreateObject {
        name: name.to_string(),
        kind: kind.to_string(),
        attrs: Default::default(),
        expected_size: Some(size),
    };
    array.device(dev)?.call(cmd).map_err(HostError::device(dev))
}

/// Writes `data` as a new object on device `dev` (host -> device over the host link).
pub fn write_object(array: &Array, dev: u32, name: &str, kind: &str, data: &[u8]) -> Result<()> {
    let d = array.device(dev)?;
    let txn = begin_object(array, dev, name, kind, data.len() as u64)?;
    // Appends are pipelined; the first error (of a submission or an append) wins and the object is
    // abandoned.
    let mut failed = None;
    let mut pending = Vec::new();
    for c in data.chunks(CHUNK) {
        match d.submit(Append { txn, data: c.to_vec() }) {
            Ok(p) => pending.push(p),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    for p in pending {
        if let Err(e) = p.wait() {
            failed.get_or_insert(e);
        }
    }
    if let Some(error) = failed {
        let _ = d.call(Abort { txn });
        return Err(HostError::Device { device: dev, error });
    }
    d.call(Commit { txn }).map_err(HostError::device(dev))?;
    Ok(())
}

/// Reads a whole object from device `dev` (device -> host over the host link).
pub fn read_object(array: &Array, dev: u32, name: &str) -> Result<Vec<u8>> {
    let d = array.device(dev)?;
    let size = d.call(Stat { name: name.to_string() }).map_err(HostError::device(dev))?.size;
    read_range(array, dev, name, 0, size)
}

/// Reads `len` bytes of an object from byte `offset`.
pub fn read_range(array: &Array, dev: u32, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
    let cmd = Read { name: name.to_string(), offset, len, buf: Vec::new() };
    array.device(dev)?.call(cmd).map_err(HostError::device(dev))
}

/// Deletes objects of device `dev`, ignoring failures (cleaning up after a failed write).
pub fn delete_quietly(array: &Array, dev: u32, names: impl IntoIterator<Item = String>) {
    if let Ok(d) = array.device(dev) {
        for name in names {
            let _ = d.call(Delete { name });
        }
    }
}

/// Writes an encoded part of `table` to device `dev`; on failure removes what it wrote.
pub fn write_part(array: &Array, dev: u32, table: &str, part: &EncodedPart) -> Result<PartInfo> {
    let info = PartInfo {
        rows: part.rows,
        key: match &part.key {
            EncodedKey::Plain { key_type, .. } => KeyEncoding::Plain { key_type: *key_type },
            EncodedKey::Dict { key_type, codes, .. } => {
                KeyEncoding::Dict { key_type: *key_type, code_bits: codes.bits() }
            }
            EncodedKey::Bytes { offsets, .. } => {
                KeyEncoding::Bytes { max_key: offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0) }
            }
        },
        row_size: part.row_size,
        max_row: match (&part.row_offsets, part.row_size) {
            (Some(o), _) => o.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0),
            (None, Some(rs)) => rs,
            (None, None) => 0,
        },
    };
    let mut objects: Vec<(String, Vec<u8>)> = vec![(format!("{table}#rows"), part.row_data.clone())];
    if let Some(off) = &part.row_offsets {
        objects.push((format!("{table}#rowoff"), le::encode_u64s(off)));
    }
    match &part.key {
        EncodedKey::Plain { data, .. } => objects.push((format!("{table}#key"), data.clone())),
        EncodedKey::Dict { dictionary, codes, .. } => {
            objects.push((format!("{table}#dict"), le::encode_u64s(dictionary)));
            objects.push((format!("{table}#codes"), codes.to_bytes()));
        }
        EncodedKey::Bytes { data, offsets } => {
            objects.push((format!("{table}#key"), data.clone()));
            objects.push((format!("{table}#keyoff"), le::encode_u64s(offsets)));
        }
    }
    for (i, (name, data)) in objects.iter().enumerate() {
        if let Err(e) = write_object(array, dev, name, "table-part", data) {
            delete_quietly(array, dev, objects[..i].iter().map(|(n, _)| n.clone()));
            return Err(e);
        }
    }
    Ok(info)
}

/// A part's key column read over the host link.
#[derive(Debug)]
pub enum HostKey {
    Plain(Vec<u8>),
    Dict { dictionary: Vec<u64>, codes: Codes },
    Bytes { data: Vec<u8>, offsets: Vec<u64> },
}

/// Reads a part's key column as stored.
pub fn read_key(array: &Array, dev: u32, table: &str, info: &PartInfo) -> Result<HostKey> {
    let obj = |s: &str| read_object(array, dev, &format!("{table}#{s}"));
    Ok(match info.key {
        KeyEncoding::Plain { .. } => HostKey::Plain(obj("key")?),
        KeyEncoding::Dict { code_bits, .. } => HostKey::Dict {
            dictionary: le::decode_u64s(&obj("dict")?),
            codes: Codes::from_bytes(code_bits, &obj("codes")?)
                .ok_or_else(|| HostError::Damaged { name: table.into(), detail: "bad data page".into() })?,
        },
        KeyEncoding::Bytes { .. } => {
            HostKey::Bytes { data: obj("key")?, offsets: le::decode_u64s(&obj("keyoff")?) }
        }
    })
}

/// Reads a part's rows and their offsets.
pub fn read_rows(array: &Array, dev: u32, table: &str, info: &PartInfo) -> Result<(Vec<u8>, Vec<u64>)> {
    let rows = read_object(array, dev, &format!("{table}#rows"))?;
    let offsets = match info.row_size {
        Some(rs) => (0..=info.rows).map(|i| i * rs).collect(),
        None => le::decode_u64s(&read_object(array, dev, &format!("{table}#rowoff"))?),
    };
    if offsets.len() as u64 != info.rows + 1 || offsets.last().copied().unwrap_or(0) > rows.len() as u64 {
        return Err(HostError::Damaged {
            name: table.into(),
            detail: format!("part on dev{dev} has inconsistent row offsets"),
        });
    }
    Ok((rows, offsets))
}

/// The raw key bits (the device key type's) of a plain or dictionary key.
fn key_bits(table: &str, info: &PartInfo, key: HostKey) -> Result<Vec<u64>> {
    let damaged = |detail: String| HostError::Damaged { name: table.into(), detail };
    match key {
        HostKey::Dict { dictionary, codes } => {
            let get = |c: usize| {
                dictionary.get(c).copied().ok_or_else(|| damaged(format!("code {c} past the dictionary")))
            };
            match codes {
                Codes::U8(c) => c.iter().map(|c| get(*c as usize)).collect(),
                Codes::U16(c) => c.iter().map(|c| get(*c as usize)).collect(),
            }
        }
        HostKey::Plain(raw) => {
            let kt = info.key.key_type().ok_or_else(|| damaged("a plain key without a type".into()))?;
            Ok(kt.bits_of(&raw))
        }
        HostKey::Bytes { .. } => Err(damaged("byte-string keys have no bits".into())),
    }
}

/// Reads a part back as a record batch.
pub fn read_part(
    array: &Array,
    dev: u32,
    table: &str,
    schema: &TableSchema,
    key: usize,
    info: &PartInfo,
) -> Result<RecordBatch> {
    let ty = &schema.columns[key].ty;
    let key_col: ArrayRef = match read_key(array, dev, table, info)? {
        HostKey::Bytes { data, offsets } => key_from_bytes(&data, &offsets, ty)?,
        k => key_from_bits(&key_bits(table, info, k)?, ty)?,
    };
    let (rows, offsets) = read_rows(array, dev, table, info)?;
    decode_part(schema, key, key_col, &rows, &offsets)
}

/// Reads every part of table `table` back as record batches, handing them to `sink` in device order. Parts
/// are read and decoded a few at a time in parallel (as many as the host has cores), so memory holds no more
/// than that many decoded parts beyond what `sink` keeps.
pub fn each_part(array: &Array, table: &str, sink: &mut dyn FnMut(RecordBatch) -> Result<()>) -> Result<u64> {
    let (entry, info) = array.table_entry(table)?;
    let parts: Vec<(u32, &PartInfo)> = entry.devices.iter().copied().zip(&info.parts).collect();
    let window = std::thread::available_parallelism().map_or(1, |n| n.get()).max(1);
    let mut rows = 0u64;
    for chunk in parts.chunks(window) {
        let read: Vec<Result<RecordBatch>> = std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|(dev, part)| {
                    s.spawn(move || read_part(array, *dev, table, &info.schema, info.key, part))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a part reader panicked")).collect()
        });
        for b in read {
            let b = b?;
            rows += b.num_rows() as u64;
            sink(b)?;
        }
    }
    Ok(rows)
}
