//! String search over an object (BlueDBM §5.1), in two placements that must agree:
//!
//! - `device`: every device holding a part runs the `search` program over its own pages, in parallel;
//!   only counts (and match offsets, if asked) cross the host link. Matches that straddle the end of a
//!   stripe are counted once, by the device holding the stripe where they start: each device first gets
//!   the first `len - 1` bytes of the stripes that follow its own, from the next device (`heads` program
//!   plus a device-to-device copy).
//! - `host`: the conventional system; every byte crosses the host link and the host CPU searches it.

use std::time::Instant;

use insitu_device::protocol::{CopyToPeer, Heads, HeadsArgs, Search, SearchArgs};
use insitu_kernels::search::{Finder, StreamSearch};
use serde::Serialize;
use serde_json::json;

use crate::array::Array;
use crate::blob::for_each_piece;
use crate::buffer::DeviceBuffer;
use crate::catalog::ObjectEntry;
use crate::error::{HostError, Result};
use insitu_device::work::{self, Ledger};

use crate::model::HostWork;
use crate::report::{Measure, Report};
use crate::units::human_bytes;

/// Where the search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SearchPlacement {
    Device,
    Host,
}

/// The answer of a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchResult {
    pub count: u64,
    pub offsets: Option<Vec<u64>>,
}

/// Searches object `name` for `pattern`.
pub fn search(
    array: &Array,
    name: &str,
    pattern: &[u8],
    placement: SearchPlacement,
    offsets: bool,
) -> Result<Report> {
    let entry = array.blob_entry(name)?.clone();
    let finder = Finder::new(pattern).map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    let op = match placement {
        SearchPlacement::Device => "search (device)",
        SearchPlacement::Host => "search (host)",
    };
    let mut measure = Measure::start(op, array)?;
    let t0 = Instant::now();
    let (found, host) = match placement {
        SearchPlacement::Device => (search_device(array, &entry, pattern, offsets)?, HostWork::default()),
        SearchPlacement::Host => search_host(array, &entry, &finder, offsets)?,
    };
    measure.phase("search", array, host)?;
    let secs = t0.elapsed().as_secs_f64();
    let mut result = json!({
        "name": name,
        "pattern": String::from_utf8_lossy(pattern),
        "placement": placement,
        "count": found.count,
        "bytes_searched": entry.size,
        "throughput_gb_s": entry.size as f64 / secs.max(1e-9) / 1e9,
    });
    let mut headline = format!(
        "{op}: {} match(es) of {:?} in {name} ({})",
        found.count,
        String::from_utf8_lossy(pattern),
        human_bytes(entry.size)
    );
    if let Some(o) = &found.offsets {
        let shown: Vec<String> = o.iter().take(20).map(|v| v.to_string()).collect();
        headline.push_str(&format!(
            "\n  offsets: {}{}",
            shown.join(" "),
            if o.len() > 20 {
                format!(" ... ({} in all: --json lists every one)", o.len())
            } else {
                String::new()
            }
        ));
        result["offsets"] = json!(o);
    }
    measure.finish(array, headline, result)
}

fn search_device(
    array: &Array,
    entry: &ObjectEntry,
    pattern: &[u8],
    want_offsets: bool,
) -> Result<SearchResult> {
    let n = entry.devices.len();
    let width = pattern.len() as u64 - 1;
    // Halos: device i needs the heads of part (i + 1) % n. Buffers are freed when dropped, errors included.
    let mut halos: Vec<Option<DeviceBuffer<'_>>> = (0..n).map(|_| None).collect();
    if n > 1 && width > 0 {
        if entry.stripe_unit < pattern.len() as u64 {
            return Err(HostError::InvalidArgument(format!(
                "the pattern ({} bytes) is longer than the stripe unit ({} bytes)",
                pattern.len(),
                entry.stripe_unit
            )));
        }
        let mut buffers = Vec::with_capacity(n);
        let mut running = Vec::with_capacity(n);
        for (i, dev) in entry.devices.iter().copied().enumerate() {
            let bytes = entry.layout(i).chunks().len() as u64 * width;
            buffers.push((DeviceBuffer::alloc(array, dev, bytes.max(1))?, bytes));
        }
        for (i, (buf, _)) in buffers.iter().enumerate() {
            let args =
                HeadsArgs { object: entry.name.clone(), width, layout: entry.layout(i), out: buf.handle };
            running.push(buf.device.start::<Heads>(args).map_err(HostError::device(buf.device.id()))?);
        }
        for p in running {
            let dev = p.client().id();
            p.wait().map_err(HostError::device(dev))?;
        }
        for (i, dev) in entry.devices.iter().copied().enumerate() {
            let (src, bytes) = &buffers[(i + 1) % n];
            let dst = DeviceBuffer::alloc(array, dev, (*bytes).max(1))?;
            let cmd = CopyToPeer {
                src: src.handle,
                offset: 0,
                len: *bytes,
                peer: dev,
                dst: dst.handle,
                dst_offset: 0,
            };
            src.device.call(cmd).map_err(HostError::device(src.device.id()))?;
            halos[i] = Some(dst);
        }
    }
    let mut running = Vec::with_capacity(n);
    for (i, (dev, halo)) in entry.devices.iter().copied().zip(&halos).enumerate() {
        let args = SearchArgs {
            object: entry.name.clone(),
            pattern: pattern.to_vec(),
            offsets: want_offsets,
            layout: entry.layout(i),
            halo: halo.as_ref().map(|b| b.handle),
        };
        running.push(array.device(dev)?.start::<Search>(args).map_err(HostError::device(dev))?);
    }
    let mut count = 0u64;
    let mut offsets = want_offsets.then(Vec::new);
    let mut first_err = None;
    for p in running {
        let dev = p.client().id();
        match p.wait().map_err(HostError::device(dev)) {
            Ok(out) => {
                count += out.count;
                if let (Some(all), Some(o)) = (offsets.as_mut(), out.offsets) {
                    all.extend(o);
                }
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if let Some(o) = offsets.as_mut() {
        o.sort_unstable();
    }
    Ok(SearchResult { count, offsets })
}

fn search_host(
    array: &Array,
    entry: &ObjectEntry,
    finder: &Finder,
    want_offsets: bool,
) -> Result<(SearchResult, HostWork)> {
    let mut stream = StreamSearch::new(finder, 0, want_offsets);
    let mut work = Ledger::new();
    for_each_piece(array, entry, |_, data| {
        work::add(&mut work, work::SEARCH_BYTES, data.len() as u64);
        stream.feed(data);
        Ok(())
    })?;
    let (count, offsets) = stream.finish();
    Ok((SearchResult { count, offsets }, HostWork::counted(work)))
}
