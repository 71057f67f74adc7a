//! Moving objects and table parts between the host and the devices, through the command set.

use std::collections::{BTreeMap, VecDeque};

use arrow::array::ArrayRef;
use arrow::record_batch::RecordBatch;
use insitu_device::protocol::{Abort, Append, Commit, CreateObject, Delete, Read, Stat};
use insitu_device::transport::Pending;
use insitu_device::DeviceClient;
use insitu_kernels::dict::{self, Codes};
use insitu_kernels::keys::KeyType;
use insitu_kernels::le;

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::table::info::{KeyEncoding, PartInfo};
use crate::table::layout::{key_from_bits, key_from_bytes, EncodedKey, EncodedPart, RowDecoder};
use crate::table::schema::TableSchema;

const CHUNK: usize = 4 << 20;

/// Starts a new object of `size` bytes on device `dev`; returns its write transaction.
pub fn begin_object(array: &Array, dev: u32, name: &str, kind: &str, size: u64) -> Result<u64> {
    begin_object_with(array, dev, name, kind, size, Default::default())
}

/// [`begin_object`], the object carrying `attrs` (what a part says of the object it belongs to).
pub fn begin_object_with(
    array: &Array,
    dev: u32,
    name: &str,
    kind: &str,
    size: u64,
    attrs: BTreeMap<String, String>,
) -> Result<u64> {
    let cmd =
        CreateObject { name: name.to_string(), kind: kind.to_string(), attrs, expected_size: Some(size) };
    array.device(dev)?.call(cmd).map_err(HostError::device(dev))
}

/// Writes `data` as a new object on device `dev` (host -> device over the host link), its space reserved
/// first; on failure the object is abandoned.
pub fn write_object(array: &Array, dev: u32, name: &str, kind: &str, data: &[u8]) -> Result<()> {
    write_object_with(array, dev, name, kind, data, Default::default())
}

/// [`write_object`], the object carrying `attrs`.
pub fn write_object_with(
    array: &Array,
    dev: u32,
    name: &str,
    kind: &str,
    data: &[u8],
    attrs: BTreeMap<String, String>,
) -> Result<()> {
    let size = Some(data.len() as u64);
    let mut o = ObjectStream::begin(array.device(dev)?, name.into(), kind, size, attrs)?;
    o.write(data)?;
    o.commit().map(drop)
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

/// Hands bytes `0..size` of object `name` on device `dev` to `f(offset, bytes)` in order, in chunks of whole
/// pages (about `CHUNK` bytes: the same pages one read of the object reads), each read into the same host
/// buffer: a large object crosses the host link without the host holding all of it, or faulting in fresh
/// memory for it.
pub fn read_chunks(
    array: &Array,
    dev: u32,
    name: &str,
    size: u64,
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let d = array.device(dev)?;
    let page = array.profile().nand.page_size.max(1) as u64;
    let chunk = (CHUNK as u64).div_ceil(page) * page;
    let (mut pos, mut buf) = (0u64, Vec::new());
    loop {
        let len = chunk.min(size - pos);
        let cmd = Read { name: name.to_string(), offset: pos, len, buf: std::mem::take(&mut buf) };
        buf = d.call(cmd).map_err(HostError::device(dev))?;
        f(pos, &buf)?;
        pos += len;
        if pos == size {
            return Ok(());
        }
    }
}

/// [`read_chunks`] of an object of `entry`-byte entries, handed to `f` as whole entries only (one that
/// straddles two chunks is put together on the side).
pub fn read_entries(
    array: &Array,
    dev: u32,
    name: &str,
    size: u64,
    entry: usize,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut carry = Vec::with_capacity(entry);
    read_chunks(array, dev, name, size, |_, mut buf| {
        if !carry.is_empty() {
            let take = (entry - carry.len()).min(buf.len());
            carry.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
            if carry.len() < entry {
                return Ok(());
            }
            f(&carry)?;
            carry.clear();
        }
        let whole = buf.len() / entry * entry;
        f(&buf[..whole])?;
        carry.extend_from_slice(&buf[whole..]);
        Ok(())
    })
}

/// Deletes objects of device `dev`, ignoring failures (cleaning up after a failed write).
pub fn delete_quietly(array: &Array, dev: u32, names: impl IntoIterator<Item = String>) {
    if let Ok(d) = array.device(dev) {
        for name in names {
            let _ = d.call(Delete { name });
        }
    }
}

/// Appends in flight for one object being streamed (each holds one chunk of its bytes).
const IN_FLIGHT: usize = 2;

/// An object written as its bytes come: appended in `CHUNK`-sized commands, a few in flight, and
/// committed by [`ObjectStream::commit`]. Dropped uncommitted, it is abandoned on the device.
#[derive(Debug)]
struct ObjectStream<'a> {
    d: &'a DeviceClient,
    name: String,
    txn: u64,
    buf: Vec<u8>,
    pending: VecDeque<Pending<'a, Append>>,
    open: bool,
}

impl<'a> ObjectStream<'a> {
    /// Starts the object; with `size`, all its space is reserved now.
    fn begin(
        d: &'a DeviceClient,
        name: String,
        kind: &str,
        size: Option<u64>,
        attrs: BTreeMap<String, String>,
    ) -> Result<ObjectStream<'a>> {
        let cmd = CreateObject { name: name.clone(), kind: kind.into(), attrs, expected_size: size };
        let txn = d.call(cmd).map_err(HostError::device(d.id()))?;
        Ok(ObjectStream { d, name, txn, buf: Vec::new(), pending: VecDeque::new(), open: true })
    }

    fn write(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            let take = (CHUNK - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buf.len() == CHUNK {
                self.send()?;
            }
        }
        Ok(())
    }

    fn send(&mut self) -> Result<()> {
        if self.pending.len() >= IN_FLIGHT {
            if let Some(p) = self.pending.pop_front() {
                p.wait().map_err(HostError::device(self.d.id()))?;
            }
        }
        let data = std::mem::take(&mut self.buf);
        let p = self.d.submit(Append { txn: self.txn, data }).map_err(HostError::device(self.d.id()))?;
        self.pending.push_back(p);
        Ok(())
    }

    /// Sends the rest, waits for every append and commits the object.
    fn commit(mut self) -> Result<String> {
        if !self.buf.is_empty() {
            self.send()?;
        }
        while let Some(p) = self.pending.pop_front() {
            p.wait().map_err(HostError::device(self.d.id()))?;
        }
        self.d.call(Commit { txn: self.txn }).map_err(HostError::device(self.d.id()))?;
        self.open = false;
        Ok(std::mem::take(&mut self.name))
    }
}

impl Drop for ObjectStream<'_> {
    fn drop(&mut self) {
        if self.open {
            self.pending.clear();
            let _ = self.d.call(Abort { txn: self.txn });
        }
    }
}

/// The key column of a part being written.
#[derive(Debug)]
enum KeyStream<'a> {
    Plain {
        key_type: KeyType,
        data: ObjectStream<'a>,
    },
    /// Dictionary encoding needs every value first: the values are kept until the end.
    Dict {
        key_type: KeyType,
        bits: Vec<u64>,
    },
    Bytes {
        data: ObjectStream<'a>,
        offsets: ObjectStream<'a>,
        len: u64,
        max_key: u64,
    },
}

/// One device's part of a table written as the table is read: each encoded slice of rows is appended to
/// the part's objects (rows, row offsets, key column) as it comes, so memory holds a few chunks, not the
/// part. Nothing is visible until [`PartWriter::finish`] commits the objects; dropped before, the part is
/// abandoned on the device.
#[derive(Debug)]
pub struct PartWriter<'a> {
    d: &'a DeviceClient,
    table: String,
    rows: ObjectStream<'a>,
    rowoff: Option<ObjectStream<'a>>,
    key: KeyStream<'a>,
    n: u64,
    row_bytes: u64,
    max_row: u64,
    row_size: Option<u64>,
}

impl<'a> PartWriter<'a> {
    /// Opens the objects of `table`'s part on device `dev`. `var_rows`: rows vary in size (a row-offsets
    /// object is written); `key` says how the key column comes (`Dict` when dictionary encoding is asked);
    /// `attrs` go on the rows object (what the part says of its table).
    pub fn begin(
        array: &'a Array,
        dev: u32,
        table: &str,
        var_rows: bool,
        key: KeyEncoding,
        attrs: BTreeMap<String, String>,
    ) -> Result<Self> {
        let d = array.device(dev)?;
        let open =
            |s: &str| ObjectStream::begin(d, format!("{table}#{s}"), "table-part", None, Default::default());
        let rows = ObjectStream::begin(d, format!("{table}#rows"), "table-part", None, attrs)?;
        let rowoff = match var_rows {
            true => {
                let mut o = open("rowoff")?;
                o.write(&0u64.to_le_bytes())?;
                Some(o)
            }
            false => None,
        };
        let key = match key {
            KeyEncoding::Plain { key_type } => KeyStream::Plain { key_type, data: open("key")? },
            KeyEncoding::Dict { key_type, .. } => KeyStream::Dict { key_type, bits: Vec::new() },
            KeyEncoding::Bytes { .. } => {
                let data = open("key")?;
                let mut offsets = open("keyoff")?;
                offsets.write(&0u64.to_le_bytes())?;
                KeyStream::Bytes { data, offsets, len: 0, max_key: 0 }
            }
        };
        Ok(PartWriter {
            d,
            table: table.into(),
            rows,
            rowoff,
            key,
            n: 0,
            row_bytes: 0,
            max_row: 0,
            row_size: None,
        })
    }

    /// Bytes of row data so far.
    pub fn row_bytes(&self) -> u64 {
        self.row_bytes
    }

    /// Appends the next rows of the part (encoded with a plain or byte-string key).
    pub fn append(&mut self, part: &EncodedPart) -> Result<()> {
        self.rows.write(&part.row_data)?;
        match (&part.row_offsets, part.row_size, &mut self.rowoff) {
            (Some(o), _, Some(stream)) => {
                let base = self.row_bytes;
                stream.write(&le::encode_u64s(&o[1..].iter().map(|x| base + x).collect::<Vec<_>>()))?;
                self.max_row = self.max_row.max(o.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0));
            }
            (None, Some(rs), None) => {
                self.row_size = Some(rs);
                self.max_row = rs;
            }
            _ => return Err(HostError::InvalidArgument("rows encoded unlike the part's other rows".into())),
        }
        match (&mut self.key, &part.key) {
            (KeyStream::Plain { key_type, data }, EncodedKey::Plain { key_type: kt, data: bytes })
                if key_type == kt =>
            {
                data.write(bytes)?
            }
            (KeyStream::Dict { key_type, bits }, EncodedKey::Plain { key_type: kt, data: bytes })
                if key_type == kt =>
            {
                bits.extend(kt.bits_of(bytes))
            }
            (
                KeyStream::Bytes { data, offsets, len, max_key },
                EncodedKey::Bytes { data: bytes, offsets: o },
            ) => {
                data.write(bytes)?;
                let base = *len;
                offsets.write(&le::encode_u64s(&o[1..].iter().map(|x| base + x).collect::<Vec<_>>()))?;
                *max_key = (*max_key).max(o.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0));
                *len += bytes.len() as u64;
            }
            _ => return Err(HostError::InvalidArgument("a key encoded unlike the part's other keys".into())),
        }
        self.n += part.rows;
        self.row_bytes += part.row_data.len() as u64;
        Ok(())
    }

    /// Commits the part's objects (dictionary-encoding the key first when asked, or storing it plain when
    /// it has too many distinct values: the second value says whether the dictionary was used). On failure
    /// the objects already committed are deleted and the others abandoned.
    pub fn finish(self, fixed_row_size: Option<u64>) -> Result<(PartInfo, bool)> {
        let PartWriter { d, table, rows, rowoff, key, n, max_row, row_size, .. } = self;
        let mut done: Vec<String> = Vec::new();
        let result = (|| {
            done.push(rows.commit()?);
            if let Some(o) = rowoff {
                done.push(o.commit()?);
            }
            let mut dict_used = false;
            let encoding = match key {
                KeyStream::Plain { key_type, data } => {
                    done.push(data.commit()?);
                    KeyEncoding::Plain { key_type }
                }
                KeyStream::Bytes { data, offsets, max_key, .. } => {
                    done.push(data.commit()?);
                    done.push(offsets.commit()?);
                    KeyEncoding::Bytes { max_key }
                }
                KeyStream::Dict { key_type, bits } => {
                    let whole = |s: &str, bytes: &[u8]| -> Result<String> {
                        let name = format!("{table}#{s}");
                        let size = Some(bytes.len() as u64);
                        let mut o = ObjectStream::begin(d, name, "table-part", size, Default::default())?;
                        o.write(bytes)?;
                        o.commit()
                    };
                    match dict::encode(&bits) {
                        Some(e) => {
                            dict_used = true;
                            done.push(whole("dict", &le::encode_u64s(&e.dictionary))?);
                            done.push(whole("codes", &e.codes.to_bytes())?);
                            KeyEncoding::Dict { key_type, code_bits: e.codes.bits() }
                        }
                        None => {
                            done.push(whole("key", &key_type.bytes_of(&bits))?);
                            KeyEncoding::Plain { key_type }
                        }
                    }
                }
            };
            let row_size = row_size.or(fixed_row_size);
            let info = PartInfo { rows: n, key: encoding, row_size, max_row: row_size.unwrap_or(max_row) };
            Ok((info, dict_used))
        })();
        if result.is_err() {
            for name in done {
                let _ = d.call(Delete { name });
            }
        }
        result
    }
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
    let offsets = row_offsets(array, dev, table, info, rows.len() as u64)?;
    Ok((rows, offsets))
}

/// Where each row of a part starts (`rows + 1` entries, the last its rows' end), checked against the
/// `size` of its rows object.
fn row_offsets(array: &Array, dev: u32, table: &str, info: &PartInfo, size: u64) -> Result<Vec<u64>> {
    let offsets: Vec<u64> = match info.row_size {
        Some(rs) => (0..=info.rows).map(|i| i * rs).collect(),
        None => le::decode_u64s(&read_object(array, dev, &format!("{table}#rowoff"))?),
    };
    if offsets.len() as u64 != info.rows + 1
        || offsets.first().is_some_and(|o| *o != 0)
        || offsets.windows(2).any(|w| w[0] > w[1])
        || offsets.last().copied().unwrap_or(0) > size
    {
        return Err(HostError::Damaged {
            name: table.into(),
            detail: format!("part on dev{dev} has inconsistent row offsets"),
        });
    }
    Ok(offsets)
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

/// Reads a part back as a record batch. Its rows stream over the host link in chunks of whole pages
/// (about `CHUNK` bytes, the same pages as one read of the object) and are decoded as they arrive, so the
/// host holds a chunk of row bytes, not the part's.
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
    let rows_obj = format!("{table}#rows");
    let size = array.device(dev)?.call(Stat { name: rows_obj.clone() }).map_err(HostError::device(dev))?.size;
    let offsets = row_offsets(array, dev, table, info, size)?;
    let mut rows = RowDecoder::new(schema, key, info.rows as usize);
    // `next`: the next row to decode; `carry`: the bytes so far of a row that straddles chunks.
    let (mut next, mut carry) = (0usize, Vec::new());
    read_chunks(array, dev, &rows_obj, size, |pos, buf| {
        let end = pos + buf.len() as u64;
        let at = |o: u64| (o - pos) as usize;
        if !carry.is_empty() {
            let row_end = offsets[next + 1];
            carry.extend_from_slice(&buf[..at(row_end.min(end))]);
            if row_end <= end {
                rows.push(&carry)?;
                carry.clear();
                next += 1;
            }
        }
        if carry.is_empty() {
            // The rows that end in this chunk, decoded where they lie.
            let whole = offsets[next + 1..].partition_point(|o| *o <= end);
            rows.push_rows(buf, &offsets[next..next + whole + 1], pos)?;
            next += whole;
            if next < info.rows as usize && offsets[next] < end {
                carry.extend_from_slice(&buf[at(offsets[next])..]);
            }
        }
        Ok(())
    })?;
    debug_assert_eq!(next as u64, info.rows, "every row ends by the object's end");
    rows.finish(key_col)
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
