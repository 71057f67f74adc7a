//! Objects as plain bytes: `put` (striped over all devices, or on one), `get`, `rm`, `ls`.
//!
//! Writes go through the command set like a host driver's would: CreateObject on each device holding a
//! part (space is reserved up front when the input's size is known, so a full device fails before any
//! byte moves; a pipe is read to its end and a full device fails the put there), Append commands
//! pipelined per device, Commit on every device, then the catalog entry: the commit point. A crash before
//! the catalog entry leaves parts that the next open removes, so an object is whole or absent.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use insitu_device::protocol::{self, Abort, Append, Commit, CreateObject, Delete};
use insitu_device::transport::Pending;
use serde_json::json;

use crate::array::Array;
use crate::catalog::{EntryKind, ObjectEntry};
use crate::error::{HostError, Result};
use crate::report::{Measure, Report};
use crate::units::human_bytes;

/// Commands kept in flight per device while streaming.
const WINDOW_PER_DEVICE: usize = 4;
/// Reads are issued in pieces of this size: small enough that the recycled buffers stay in cache.
const READ_PIECE_BYTES: u64 = 2048 << 10;
/// Reads kept in flight per device.
const READ_WINDOW_PER_DEVICE: usize = 2;

/// Progress callback: `(bytes done, bytes total)`. An error stops the operation, which then fails with
/// it and undoes what it had started, as after any failure (a front's way to cancel: a Python callback
/// that raised, Ctrl-C).
pub type Progress<'a> = &'a dyn Fn(u64, u64) -> Result<()>;

/// A [`Progress`] that shows nothing.
pub fn no_progress(_: u64, _: u64) -> Result<()> {
    Ok(())
}

/// Where `put` places an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Striped over all devices.
    Striped,
    /// Whole on one device.
    Device(u32),
}

/// Stores the file at `path` as object `name`. Pipes, FIFOs, character devices and `/proc` files
/// (whose size the file system does not know) are read to their end like any other input.
pub fn put(
    array: &mut Array,
    path: &Path,
    name: &str,
    placement: Placement,
    progress: Progress<'_>,
) -> Result<Report> {
    let meta = std::fs::metadata(path).map_err(|e| HostError::io(path, e))?;
    if meta.is_dir() {
        return Err(HostError::InvalidArgument(format!("{} is a directory, not a file", path.display())));
    }
    let mut file = File::open(path).map_err(|e| HostError::io(path, e))?;
    // A regular file says its size; anything else is read to its end, and so are the files of the
    // kernel's pseudo file systems, whose sizes are made up (a `/proc` file says 0 bytes and has more, a
    // `/sys` one says 4096 and has fewer).
    let pseudo = std::fs::canonicalize(path).is_ok_and(|p| p.starts_with("/proc") || p.starts_with("/sys"));
    let size = (meta.is_file() && meta.len() > 0 && !pseudo).then_some(meta.len());
    put_reader(array, &mut file, size, path, name, placement, progress)
}

/// Stores what `input` holds, up to its end, as object `name`. `size`, when known, reserves the
/// space before any byte moves (a full device fails at once) and must be what `input` holds: an input
/// that turns out longer or shorter (a file changed while being read) is refused and nothing is stored.
/// `label` names the input in errors.
pub fn put_reader(
    array: &mut Array,
    input: &mut dyn Read,
    size: Option<u64>,
    label: &Path,
    name: &str,
    placement: Placement,
    progress: Progress<'_>,
) -> Result<Report> {
    crate::array::validate_user_name(name)?;
    array.check_free(name)?;
    let devices: Vec<u32> = match placement {
        Placement::Striped => stripe_order(array),
        Placement::Device(d) => {
            array.device(d)?;
            vec![d]
        }
    };
    let mut entry = ObjectEntry {
        name: name.to_string(),
        size: size.unwrap_or(0),
        stripe_unit: array.config().stripe_unit,
        devices,
        kind: EntryKind::Blob,
        commits: Vec::new(),
    };
    let measure = Measure::start("put", array)?;
    let txns = create_parts(array, &entry, size.is_some())?;
    let streamed = stream_parts(array, &entry, &txns, input, label, progress).and_then(|n| match size {
        Some(s) if s != n => Err(HostError::InvalidArgument(format!(
            "{} changed while being read: {s} bytes at the start, {n} read; nothing was stored",
            label.display()
        ))),
        _ => Ok(n),
    });
    match streamed {
        Ok(n) => entry.size = n,
        Err(e) => {
            abort_parts(array, &entry, &txns);
            return Err(e);
        }
    }
    for (i, dev) in entry.devices.iter().enumerate() {
        if let Err(e) = array.device(*dev)?.call(Commit { txn: txns[i] }).map_err(HostError::device(*dev)) {
            abort_parts(array, &entry, &txns[i..]);
            for d in &entry.devices[..i] {
                let _ = array.device(*d)?.call(Delete { name: name.to_string() });
            }
            return Err(e);
        }
        array.faults.hit("put-part-committed");
    }
    let size = entry.size;
    array.commit_entry(entry.clone())?;
    array.faults.hit("put-catalog");
    let headline = format!("put {name} ({}) on device(s) {}", human_bytes(size), json!(entry.devices));
    let result =
        json!({ "name": name, "size": size, "devices": entry.devices, "stripe_unit": entry.stripe_unit });
    measure.finish(array, headline, result)
}

/// The devices a striped object goes over, in stripe order: every device, starting from the one that
/// holds the fewest of the catalog's bytes (the lowest-numbered of those). An object smaller than a
/// stripe unit lies whole on its first device: starting every object on device 0 filled device 0 with
/// small objects while the others stayed empty.
fn stripe_order(array: &Array) -> Vec<u32> {
    let n = array.device_count() as u32;
    let mut held = vec![0u64; n as usize];
    for e in array.catalog().objects.values() {
        for (i, dev) in e.devices.iter().enumerate() {
            let bytes = match e.kind {
                EntryKind::Blob | EntryKind::List(_) | EntryKind::Index => e.layout(i).part_size(),
                _ => e.size / e.devices.len().max(1) as u64,
            };
            if let Some(h) = held.get_mut(*dev as usize) {
                *h += bytes;
            }
        }
    }
    let first = (0..n).min_by_key(|d| (held[*d as usize], *d)).unwrap_or(0);
    (first..n).chain(0..first).collect()
}

/// Starts a part on each device; with `sized`, each reserves its share of `entry.size`.
fn create_parts(array: &Array, entry: &ObjectEntry, sized: bool) -> Result<Vec<u64>> {
    let mut txns = Vec::new();
    for (i, dev) in entry.devices.iter().enumerate() {
        let layout = entry.layout(i);
        let mut attrs = BTreeMap::new();
        attrs.insert("part".into(), format!("{i}/{}", entry.devices.len()));
        if sized {
            attrs.insert("total_size".into(), entry.size.to_string());
        }
        attrs.insert("stripe_unit".into(), entry.stripe_unit.to_string());
        // Which write made the part (see `catalog::part_attrs`).
        attrs.insert("write".into(), array.catalog().generation.to_string());
        let cmd = CreateObject {
            name: entry.name.clone(),
            kind: "stripe".into(),
            attrs,
            expected_size: sized.then(|| layout.part_size()),
        };
        match array.device(*dev)?.call(cmd).map_err(HostError::device(*dev)) {
            Ok(t) => txns.push(t),
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
            let _ = d.call(Abort { txn: *txn });
        }
    }
}

/// Reads `input` to its end in stripe units, dealt round-robin over the parts (the layout of
/// [`ObjectEntry::pieces`]), with a few appends in flight per device; returns the bytes read.
fn stream_parts(
    array: &Array,
    entry: &ObjectEntry,
    txns: &[u64],
    input: &mut dyn Read,
    label: &Path,
    progress: Progress<'_>,
) -> Result<u64> {
    let mut inflight: Vec<VecDeque<Pending<'_, Append>>> =
        (0..entry.devices.len()).map(|_| VecDeque::new()).collect();
    let mut done = 0u64;
    let wait = |p: Pending<'_, Append>| {
        let dev = p.client().id();
        p.wait().map_err(HostError::device(dev))
    };
    let unit = entry.stripe_unit.max(1) as usize;
    for stripe in 0u64.. {
        let mut data = vec![0u8; unit];
        let len = read_full(input, &mut data).map_err(|e| HostError::io(label, e))?;
        if len == 0 {
            break;
        }
        data.truncate(len);
        let part = (stripe % entry.devices.len() as u64) as usize;
        let dev = entry.devices[part];
        if inflight[part].len() >= WINDOW_PER_DEVICE {
            wait(inflight[part].pop_front().expect("window is not empty"))?;
        }
        let p =
            array.device(dev)?.submit(Append { txn: txns[part], data }).map_err(HostError::device(dev))?;
        inflight[part].push_back(p);
        done += len as u64;
        progress(done, entry.size.max(done))?;
        array.faults.hit("put-stripe");
        if len < unit {
            break;
        }
    }
    for q in &mut inflight {
        while let Some(p) = q.pop_front() {
            wait(p)?;
        }
    }
    Ok(done)
}

/// Fills `buf` from `input` unless it ends first; returns the bytes read (short only at the end).
pub(crate) fn read_full(input: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Streams object `name` to `out` in order, reading from all its devices in parallel.
pub fn get(array: &Array, name: &str, out: &mut dyn Write, progress: Progress<'_>) -> Result<Report> {
    let entry = array.blob_entry(name)?.clone();
    let measure = Measure::start("get", array)?;
    let mut written = 0u64;
    for_each_piece(array, &entry, |_, data| {
        out.write_all(data).map_err(|e| HostError::io("output", e))?;
        written += data.len() as u64;
        progress(written, entry.size)?;
        Ok(())
    })?;
    out.flush().map_err(|e| HostError::io("output", e))?;
    let result = json!({ "name": name, "size": written });
    measure.finish(array, format!("got {name} ({})", human_bytes(written)), result)
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
    let mut inflight: VecDeque<(Pending<'_, protocol::Read>, u64)> = VecDeque::new();
    // Buffers travel to the device and back, so the same few are filled again and again.
    let mut spare: Vec<Vec<u8>> = Vec::with_capacity(window);
    let mut next = 0usize;
    while next < pieces.len() || !inflight.is_empty() {
        while next < pieces.len() && inflight.len() < window {
            let (part, local, global, len) = pieces[next];
            let dev = entry.devices[part];
            let buf = spare.pop().unwrap_or_default();
            let cmd = protocol::Read { name: entry.name.clone(), offset: local, len, buf };
            inflight.push_back((array.device(dev)?.submit(cmd).map_err(HostError::device(dev))?, global));
            next += 1;
        }
        let (p, global) = inflight.pop_front().expect("something is in flight");
        let dev = p.client().id();
        let data = p.wait().map_err(HostError::device(dev))?;
        f(global, &data)?;
        spare.push(data);
    }
    Ok(())
}

/// Removes an object: the catalog entry first (the commit point), then the parts.
pub fn rm(array: &mut Array, name: &str) -> Result<Report> {
    let measure = Measure::start("rm", array)?;
    let entry = array.remove_entry(name)?;
    array.faults.hit("rm-catalog");
    // The catalog write removed the object; its parts go after. A part already gone (a device's journal
    // cut by `fsck --repair`) is what was asked; one that cannot be deleted now (its device offline or
    // lost) is left listed for removal, which the next open finishes: either way the object is removed.
    let mut left = Vec::new();
    for (i, dev) in entry.devices.iter().enumerate() {
        for obj in entry.device_objects(i) {
            let gone = array
                .device(*dev)
                .and_then(|d| d.call(Delete { name: obj.clone() }).map_err(HostError::device(*dev)));
            match gone {
                Ok(()) => {}
                Err(HostError::Device {
                    error: insitu_device::DeviceError::Flash(insitu_device::FlashError::NotFound(_)),
                    ..
                }) => {}
                Err(e) => {
                    left.push(format!("dev{dev}:{obj} ({e})"));
                    array.undeleted.push((*dev, obj));
                }
            }
        }
    }
    let mut r =
        measure.finish(array, format!("removed {name}"), json!({ "removed": name, "size": entry.size }))?;
    if !left.is_empty() {
        r.warnings.push(format!(
            "{} part(s) could not be deleted now and are removed when the array next opens: {}",
            left.len(),
            left.join(", ")
        ));
    }
    Ok(r)
}

/// Lists the objects.
pub fn ls(array: &Array) -> Result<Report> {
    let measure = Measure::start("ls", array)?;
    // What the listing says of each object is in the JSON too: a table's rows, a list's entries and their
    // size, a shuffle's source and partitions.
    let objects: Vec<_> = array
        .catalog()
        .objects
        .values()
        .map(|e| {
            let mut o =
                json!({ "name": e.name, "kind": e.kind.name(), "size": e.size, "devices": e.devices });
            match &e.kind {
                EntryKind::Table(t) => o["rows"] = json!(t.parts.iter().map(|p| p.rows).sum::<u64>()),
                EntryKind::List(l) => {
                    (o["entries"], o["entry_size"]) = (json!(l.entries), json!(l.entry_size))
                }
                EntryKind::Shuffle(s) => {
                    (o["source"], o["partitions"]) = (json!(s.source), json!(s.partitions))
                }
                _ => {}
            }
            o
        })
        .collect();
    let mut listing = String::new();
    for e in array.catalog().objects.values() {
        // What the object is, in a few words: a table's rows, a list's entries, a shuffle's partitions.
        let what = match &e.kind {
            EntryKind::Table(t) => format!("table, {} rows", t.parts.iter().map(|p| p.rows).sum::<u64>()),
            EntryKind::List(l) => format!("list, {} x {} B", l.entries, l.entry_size),
            EntryKind::Shuffle(s) => format!("shuffle of {}, {} partitions", s.source, s.partitions),
            k => k.name().to_string(),
        };
        listing.push_str(&format!(
            "{:<32} {:>12}  {:<28} devices {}\n",
            e.name,
            human_bytes(e.size),
            what,
            json!(e.devices)
        ));
    }
    if listing.is_empty() {
        listing.push_str("(no objects)");
    }
    let mut r = measure.finish(array, listing.trim_end().to_string(), json!({ "objects": objects }))?;
    r.modeled.phases.clear();
    Ok(r)
}
