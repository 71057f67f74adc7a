//! Objects as plain bytes: `put` (striped over all devices, or on one), `get`, `rm`, `ls`.
//!
//! Writes go through the command set like a host driver's would: CreateObject on each device holding a
//! part (space is reserved up front, so a full device fails before any byte moves), Append commands
//! pipelined per device, Commit on every device, then the catalog entry: the commit point. A crash before
//! the catalog entry leaves parts that the next open removes, so an object is whole or absent.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use insitu_device::{Command, CommandId, Response};
use serde_json::json;

use crate::array::Array;
use crate::catalog::ObjectEntry;
use crate::error::{HostError, Result};
use crate::report::{Measure, Report};

/// Commands kept in flight per device while streaming.
const WINDOW_PER_DEVICE: usize = 4;
/// Reads are issued in pieces of this size: small enough that the recycled buffers stay in cache.
const READ_PIECE_BYTES: u64 = 2048 << 10;
/// Reads kept in flight per device.
const READ_WINDOW_PER_DEVICE: usize = 2;

/// Progress callback: `(bytes done, bytes total)`.
pub type Progress<'a> = &'a dyn Fn(u64, u64);

/// Where `put` places an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Striped over all devices.
    Striped,
    /// Whole on one device.
    Device(u32),
}

fn wait_ok(array: &Array, dev: u32, id: CommandId) -> Result<Response> {
    array.device(dev)?.wait(id).result.map_err(HostError::device(dev))
}

/// Stores the file at `path` as object `name`.
pub fn put(
    array: &mut Array,
    path: &Path,
    name: &str,
    placement: Placement,
    progress: Progress<'_>,
) -> Result<Report> {
    crate::array::validate_user_name(name)?;
    if array.catalog().objects.contains_key(name) {
        return Err(HostError::AlreadyExists(name.to_string()));
    }
    let meta = std::fs::metadata(path).map_err(|e| HostError::io(path, e))?;
    if meta.is_dir() {
        return Err(HostError::InvalidArgument(format!("{} is a directory, not a file", path.display())));
    }
    let mut file = File::open(path).map_err(|e| HostError::io(path, e))?;
    let size = meta.len();
    let devices: Vec<u32> = match placement {
        Placement::Striped => (0..array.devices().len() as u32).collect(),
        Placement::Device(d) => {
            array.device(d)?;
            vec![d]
        }
    };
    let entry = ObjectEntry {
        name: name.to_string(),
        kind: "blob".into(),
        size,
        stripe_unit: array.config().stripe_unit,
        devices,
        table: None,
        shuffle: None,
        list: None,
    };
    let measure = Measure::start("put", array);
    let txns = create_parts(array, &entry)?;
    if let Err(e) = stream_parts(array, &entry, &txns, &mut file, path, progress) {
        abort_parts(array, &entry, &txns);
        return Err(e);
    }
    for (i, dev) in entry.devices.iter().enumerate() {
        if let Err(e) =
            array.device(*dev)?.call(Command::Commit { txn: txns[i] }).map_err(HostError::device(*dev))
        {
            abort_parts(array, &entry, &txns[i..]);
            for d in &entry.devices[..i] {
                let _ = array.device(*d)?.call(Command::Delete { name: name.to_string() });
            }
            return Err(e);
        }
        array.faults.hit("put-part-committed");
    }
    array.commit_entry(entry.clone())?;
    array.faults.hit("put-catalog");
    let result =
        json!({ "name": name, "size": size, "devices": entry.devices, "stripe_unit": entry.stripe_unit });
    Ok(measure.finish(array, result))
}

fn create_parts(array: &Array, entry: &ObjectEntry) -> Result<Vec<u64>> {
    let mut txns = Vec::new();
    for (i, dev) in entry.devices.iter().enumerate() {
        let layout = entry.layout(i);
        let mut attrs = BTreeMap::new();
        attrs.insert("part".into(), format!("{i}/{}", entry.devices.len()));
        attrs.insert("total_size".into(), entry.size.to_string());
        attrs.insert("stripe_unit".into(), entry.stripe_unit.to_string());
        let cmd = Command::CreateObject {
            name: entry.name.clone(),
            kind: "stripe".into(),
            attrs,
            expected_size: Some(layout.part_size()),
        };
        match array.device(*dev)?.call(cmd).map_err(HostError::device(*dev)) {
            Ok(Response::Txn(t)) => txns.push(t),
            Ok(_) => unreachable!("CreateObject answers with a transaction"),
            Err(e) => {
                abort_parts(
                    array,
                    &ObjectEntry { devices: entry.devices[..i].to_vec(), ..entry.clone() },
                    &txns,
                );
                return Err(e);
            }
        }
    }
    Ok(txns)
}

fn abort_parts(array: &Array, entry: &ObjectEntry, txns: &[u64]) {
    for (dev, txn) in entry.devices.iter().zip(txns) {
        if let Ok(d) = array.device(*dev) {
            let _ = d.call(Command::Abort { txn: *txn });
        }
    }
}

fn stream_parts(
    array: &Array,
    entry: &ObjectEntry,
    txns: &[u64],
    file: &mut File,
    path: &Path,
    progress: Progress<'_>,
) -> Result<()> {
    let mut inflight: Vec<VecDeque<CommandId>> = vec![VecDeque::new(); entry.devices.len()];
    let mut done = 0u64;
    for (part, _local, _global, len) in entry.pieces(entry.stripe_unit) {
        let mut data = vec![0u8; len as usize];
        file.read_exact(&mut data).map_err(|e| HostError::io(path, e))?;
        let dev = entry.devices[part];
        if inflight[part].len() >= WINDOW_PER_DEVICE {
            let id = inflight[part].pop_front().expect("window is not empty");
            wait_ok(array, dev, id)?;
        }
        let id = array
            .device(dev)?
            .submit(Command::Append { txn: txns[part], data })
            .map_err(HostError::device(dev))?;
        inflight[part].push_back(id);
        done += len;
        progress(done, entry.size);
        array.faults.hit("put-stripe");
    }
    for (part, q) in inflight.iter_mut().enumerate() {
        while let Some(id) = q.pop_front() {
            wait_ok(array, entry.devices[part], id)?;
        }
    }
    Ok(())
}

/// Streams object `name` to `out` in order, reading from all its devices in parallel.
pub fn get(array: &Array, name: &str, out: &mut dyn Write, progress: Progress<'_>) -> Result<Report> {
    let entry = array.blob_entry(name)?.clone();
    let measure = Measure::start("get", array);
    let mut written = 0u64;
    for_each_piece(array, &entry, |_, data| {
        out.write_all(data).map_err(|e| HostError::io("output", e))?;
        written += data.len() as u64;
        progress(written, entry.size);
        Ok(())
    })?;
    out.flush().map_err(|e| HostError::io("output", e))?;
    let result = json!({ "name": name, "size": written });
    Ok(measure.finish(array, result))
}

/// Reads the object's bytes in global order over the host link (pipelined across devices) and hands each
/// piece to `f(global offset, bytes)`.
pub(crate) fn for_each_piece(
    array: &Array,
    entry: &ObjectEntry,
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let pieces = entry.pieces(entry.stripe_unit.min(READ_PIECE_BYTES));
    let window = READ_WINDOW_PER_DEVICE * entry.devices.len();
    let mut inflight: VecDeque<(u32, CommandId, u64)> = VecDeque::new();
    // Buffers travel to the device and back, so the same few are filled again and again.
    let mut spare: Vec<Vec<u8>> = Vec::with_capacity(window);
    let mut next = 0usize;
    while next < pieces.len() || !inflight.is_empty() {
        while next < pieces.len() && inflight.len() < window {
            let (part, local, global, len) = pieces[next];
            let dev = entry.devices[part];
            let buf = spare.pop().unwrap_or_default();
            let cmd = Command::Read { name: entry.name.clone(), offset: local, len, buf };
            let id = array.device(dev)?.submit(cmd).map_err(HostError::device(dev))?;
            inflight.push_back((dev, id, global));
            next += 1;
        }
        let (dev, id, global) = inflight.pop_front().expect("something is in flight");
        match wait_ok(array, dev, id)? {
            Response::Data(data) => {
                f(global, &data)?;
                spare.push(data);
            }
            _ => unreachable!("Read answers with data"),
        }
    }
    Ok(())
}

/// Removes an object: the catalog entry first (the commit point), then the parts.
pub fn rm(array: &mut Array, name: &str) -> Result<Report> {
    let measure = Measure::start("rm", array);
    let entry = array.remove_entry(name)?;
    array.faults.hit("rm-catalog");
    for (i, dev) in entry.devices.iter().enumerate() {
        for obj in entry.device_objects(i) {
            array.device(*dev)?.call(Command::Delete { name: obj }).map_err(HostError::device(*dev))?;
        }
    }
    Ok(measure.finish(array, json!({ "removed": name, "size": entry.size })))
}

/// Lists the objects.
pub fn ls(array: &Array) -> Result<Report> {
    let measure = Measure::start("ls", array);
    let objects: Vec<_> = array
        .catalog()
        .objects
        .values()
        .map(|e| json!({ "name": e.name, "kind": e.kind, "size": e.size, "devices": e.devices }))
        .collect();
    let mut r = measure.finish(array, json!({ "objects": objects }));
    r.modeled.phases.clear();
    Ok(r)
}
