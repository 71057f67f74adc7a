//! Moving table parts between the host and the devices, through the command set.

use arrow::array::ArrayRef;
use arrow::record_batch::RecordBatch;
use insitu_device::{Command, Response};
use insitu_flash::TxnId;
use insitu_kernels::dict::Codes;

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::table::layout::{decode_part, key_from_bits, key_from_bytes, EncodedKey, EncodedPart};
use crate::table::schema::TableSchema;
use crate::table::PartInfo;

const CHUNK: usize = 4 << 20;

/// Starts a new object of `size` bytes on device `dev`; returns its write transaction.
pub fn begin_object(array: &Array, dev: u32, name: &str, kind: &str, size: u64) -> Result<TxnId> {
    let cmd = Command::CreateObject {
        name: name.to_string(),
        kind: kind.to_string(),
        attrs: Default::default(),
        expected_size: Some(size),
    };
    match array.device(dev)?.call(cmd).map_err(HostError::device(dev))? {
        Response::Txn(t) => Ok(t),
        _ => unreachable!("CreateObject answers with a transaction"),
    }
}

/// Writes `data` as a new object on device `dev` (host -> device over the host link).
pub fn write_object(array: &Array, dev: u32, name: &str, kind: &str, data: &[u8]) -> Result<()> {
    let d = array.device(dev)?;
    let txn = begin_object(array, dev, name, kind, data.len() as u64)?;
    let ids: Vec<_> = data
        .chunks(CHUNK)
        .map(|c| d.submit(Command::Append { txn, data: c.to_vec() }))
        .collect::<std::result::Result<_, _>>()
        .map_err(HostError::device(dev))?;
    let mut failed = None;
    for id in ids {
        if let Err(e) = d.wait(id).result {
            failed.get_or_insert(e);
        }
    }
    if let Some(e) = failed {
        let _ = d.call(Command::Abort { txn });
        return Err(HostError::Device { device: dev, error: e });
    }
    d.call(Command::Commit { txn }).map_err(HostError::device(dev))?;
    Ok(())
}

/// Reads a whole object from device `dev` (device -> host over the host link).
pub fn read_object(array: &Array, dev: u32, name: &str) -> Result<Vec<u8>> {
    let d = array.device(dev)?;
    let size = match d.call(Command::Stat { name: name.to_string() }).map_err(HostError::device(dev))? {
        Response::Object(o) => o.size,
        _ => unreachable!("Stat answers with an object"),
    };
    match d
        .call(Command::Read { name: name.to_string(), offset: 0, len: size, buf: Vec::new() })
        .map_err(HostError::device(dev))?
    {
        Response::Data(v) => Ok(v),
        _ => unreachable!("Read answers with data"),
    }
}

fn le_u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

fn u64s_le(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Writes an encoded part of `table` to device `dev`; on failure removes what it wrote.
pub fn write_part(array: &Array, dev: u32, table: &str, part: &EncodedPart) -> Result<PartInfo> {
    let info = PartInfo {
        rows: part.rows,
        key_encoding: match &part.key {
            EncodedKey::Plain { .. } => "plain",
            EncodedKey::Dict { .. } => "dict",
            EncodedKey::Bytes { .. } => "bytes",
        }
        .to_string(),
        key_type: match &part.key {
            EncodedKey::Plain { key_type, .. } | EncodedKey::Dict { key_type, .. } => {
                Some(key_type.name().to_string())
            }
            EncodedKey::Bytes { .. } => None,
        },
        code_bits: match &part.key {
            EncodedKey::Dict { codes, .. } => Some(codes.bits()),
            _ => None,
        },
        row_size: part.row_size,
        max_row: match (&part.row_offsets, part.row_size) {
            (Some(o), _) => o.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0),
            (None, Some(rs)) => rs,
            (None, None) => 0,
        },
        max_key: match &part.key {
            EncodedKey::Bytes { offsets, .. } => offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0),
            _ => 0,
        },
    };
    let mut objects: Vec<(String, Vec<u8>)> = vec![(format!("{table}#rows"), part.row_data.clone())];
    if let Some(off) = &part.row_offsets {
        objects.push((format!("{table}#rowoff"), u64s_le(off)));
    }
    match &part.key {
        EncodedKey::Plain { data, .. } => objects.push((format!("{table}#key"), data.clone())),
        EncodedKey::Dict { dictionary, codes, .. } => {
            objects.push((format!("{table}#dict"), u64s_le(dictionary)));
            objects.push((format!("{table}#codes"), codes.to_bytes()));
        }
        EncodedKey::Bytes { data, offsets } => {
            objects.push((format!("{table}#key"), data.clone()));
            objects.push((format!("{table}#keyoff"), u64s_le(offsets)));
        }
    }
    for (i, (name, data)) in objects.iter().enumerate() {
        if let Err(e) = write_object(array, dev, name, "table-part", data) {
            for (n, _) in &objects[..i] {
                let _ = array.device(dev)?.call(Command::Delete { name: n.clone() });
            }
            return Err(e);
        }
    }
    Ok(info)
}

/// Reads the raw key bits of a part (plain or dict) as stored.
pub fn read_key_bits(array: &Array, dev: u32, table: &str, info: &PartInfo) -> Result<Vec<u64>> {
    let width = match info.key_type.as_deref() {
        Some("u32" | "i32" | "f32") => 4,
        _ => 8,
    };
    match info.key_encoding.as_str() {
        "dict" => {
            let dict = le_u64s(&read_object(array, dev, &format!("{table}#dict"))?);
            let raw = read_object(array, dev, &format!("{table}#codes"))?;
            let codes = Codes::from_bytes(info.code_bits.unwrap_or(16), &raw)
                .ok_or_else(|| HostError::Damaged { name: table.into(), detail: "bad data page".into() })?;
            let get = |c: usize| {
                dict.get(c).copied().ok_or_else(|| HostError::Damaged {
                    name: table.into(),
                    detail: format!("code {c} past the dictionary"),
                })
            };
            match codes {
                Codes::U8(c) => c.iter().map(|c| get(*c as usize)).collect(),
                Codes::U16(c) => c.iter().map(|c| get(*c as usize)).collect(),
            }
        }
        _ => {
            let raw = read_object(array, dev, &format!("{table}#key"))?;
            Ok(if width == 4 {
                raw.chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as u64)
                    .collect()
            } else {
                le_u64s(&raw)
            })
        }
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
    let key_col: ArrayRef = if info.key_encoding == "bytes" {
        let data = read_object(array, dev, &format!("{table}#key"))?;
        let offs = le_u64s(&read_object(array, dev, &format!("{table}#keyoff"))?);
        key_from_bytes(&data, &offs, ty)?
    } else {
        key_from_bits(&read_key_bits(array, dev, table, info)?, ty)?
    };
    let rows = read_object(array, dev, &format!("{table}#rows"))?;
    let offsets = match info.row_size {
        Some(rs) => (0..=info.rows).map(|i| i * rs).collect(),
        None => le_u64s(&read_object(array, dev, &format!("{table}#rowoff"))?),
    };
    if offsets.len() as u64 != info.rows + 1 || offsets.last().copied().unwrap_or(0) > rows.len() as u64 {
        return Err(HostError::Damaged {
            name: table.into(),
            detail: format!("part on dev{dev} has inconsistent row offsets"),
        });
    }
    decode_part(schema, key, key_col, &rows, &offsets)
}
