//! `insitu intersect L1 L2 [L3...] [--placement device|host|auto] [--count-only|--ids-only]`.
//!
//! - `device`: a session on the device holding the lists runs `svs`; lists that do not fit the session's
//!   memory are intersected partition by partition over ID ranges.
//! - `host`: the lists cross the host link and the host CPU intersects them (same kernel).
//! - `auto`: the placement whose modeled cost is lower: each one's counted work for the lists' sizes (at
//!   1% matches), priced by the array's profile as a run's report prices it.

use insitu_device::protocol::{Identify, Stat, SvsArgs};
use insitu_device::DeviceError;
use insitu_kernels::intersect::{intersect_k_steps, match_entries};
use insitu_kernels::le;
use serde::Serialize;
use serde_json::json;

use crate::array::Array;
use crate::catalog::EntryKind;
use crate::error::{HostError, Result};
use crate::intersect::model::{placement_costs, result_width as width, DevicePlan, ListShape};
use crate::intersect::session::{Session, POLL_INTERVAL};
use insitu_device::work::{self, Ledger};

use crate::model::HostWork;
use crate::report::{Measure, Report};

/// Where the intersection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntersectPlacement {
    Device,
    Host,
    Auto,
}

/// What comes back: whole entries of the first list, the common IDs, or their count.
pub use insitu_device::protocol::Returned as Output;

/// The answer.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub count: u64,
    pub ids: Vec<u32>,
    /// Entries (ID + payload) of the first list, when asked.
    #[serde(skip)]
    pub entries: Vec<u8>,
}

/// Intersects lists `names`.
pub fn intersect(
    array: &Array,
    names: &[String],
    placement: IntersectPlacement,
    output: Output,
) -> Result<(Report, Answer)> {
    if names.len() < 2 {
        return Err(HostError::InvalidArgument("intersect needs at least two lists".into()));
    }
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(HostError::InvalidArgument(format!(
                "list {n:?} is given twice: intersecting a list with itself is the list"
            )));
        }
    }
    let entries: Vec<_> = names.iter().map(|n| array.entry(n).cloned()).collect::<Result<_>>()?;
    let mut infos = Vec::new();
    for e in &entries {
        match &e.kind {
            EntryKind::List(l) => infos.push(l.clone()),
            _ => return Err(HostError::InvalidArgument(format!("{:?} is not a list", e.name))),
        }
    }
    let s = infos[0].entry_size;
    if infos.iter().any(|i| i.entry_size != s) {
        return Err(HostError::InvalidArgument("the lists have different entry sizes".into()));
    }
    // Auto's choice and why: each placement's counted work at 1% matches, priced as a run's report prices
    // it (see `placement_costs`); lists on different devices can only meet on the host.
    let mut predicted = None;
    let chosen = match placement {
        IntersectPlacement::Auto => {
            let shapes: Vec<ListShape> = entries
                .iter()
                .zip(&infos)
                .map(|(e, i)| ListShape { device: e.devices[0], entries: i.entries })
                .collect();
            let dev = shapes[0].device;
            // The device's plan, where one device holds every list and has the memory for them (a plan
            // refused for want of memory leaves the host).
            let plan = match shapes.iter().all(|l| l.device == dev) {
                true => {
                    let sizes: Vec<u64> = infos.iter().map(|i| i.entries).collect();
                    match plan(array, dev, names, s, &sizes, output) {
                        Ok(p) => Some(p),
                        Err(HostError::InvalidArgument(_)) => None,
                        Err(e) => return Err(e),
                    }
                }
                false => None,
            };
            let device =
                plan.map(|p| DevicePlan { passes: p.parts, in_span: p.in_span, ends_read: p.ends_read });
            let costs = placement_costs(
                array.profile(),
                array.device_count(),
                &shapes,
                s,
                output,
                AUTO_MATCH_RATIO,
                device.as_ref(),
            );
            let faster = costs.faster();
            predicted = Some(json!({
                "host_ms": costs.host.time_s * 1e3,
                "device_ms": costs.device.as_ref().map(|d| d.time_s * 1e3),
                "device_partitions": device.as_ref().map(|d| d.passes),
                "by": "each placement's counted work at 1% matches, priced as a run's report prices it",
            }));
            match faster {
                "device" => IntersectPlacement::Device,
                _ => IntersectPlacement::Host,
            }
        }
        p => p,
    };
    let op = if chosen == IntersectPlacement::Device { "intersect (device)" } else { "intersect (host)" };
    let mut measure = Measure::start(op, array)?;
    let (answer, partitions, polls) = match chosen {
        IntersectPlacement::Device => {
            let dev = entries[0].devices[0];
            if let Some(e) = entries.iter().find(|e| e.devices[0] != dev) {
                return Err(HostError::InvalidArgument(format!(
                    "{:?} is on device {} and {:?} on device {dev}: put the lists on one device (--device) to intersect them there",
                    e.name, e.devices[0], entries[0].name
                )));
            }
            on_device(array, dev, names, s, &infos.iter().map(|i| i.entries).collect::<Vec<_>>(), output)?
        }
        _ => {
            let a = on_host(
                array,
                &entries.iter().map(|e| (e.name.clone(), e.devices[0])).collect::<Vec<_>>(),
                s,
                output,
                &mut measure,
            )?;
            (a, 1, 0)
        }
    };
    let mut result = json!({
        "lists": names, "placement": if chosen == IntersectPlacement::Device { "device" } else { "host" },
        "requested_placement": placement, "output": output, "count": answer.count, "entry_size": s,
        "partitions": partitions, "polls": polls,
    });
    if output == Output::Ids {
        result["ids"] = json!(answer.ids);
    }
    if let Some(p) = predicted {
        result["auto"] = p;
    }
    let mut headline = format!(
        "{op}: {} common of {} ({partitions} partition(s), {polls} poll(s))",
        answer.count,
        json!(names)
    );
    if let Some(h) = result["auto"]["host_ms"].as_f64() {
        headline.push_str(&match result["auto"]["device_ms"].as_f64() {
            Some(d) => format!("; auto: modeled host {h:.2} ms, device {d:.2} ms at 1% matches"),
            None => format!("; auto: no one device can intersect these lists (they are on different devices, or its memory is too small), so the host ({h:.2} ms modeled)"),
        });
    }
    Ok((measure.finish(array, headline, result)?, answer))
}

fn on_device(
    array: &Array,
    dev: u32,
    names: &[String],
    s: u32,
    sizes: &[u64],
    output: Output,
) -> Result<(Answer, u64, u64)> {
    let width = width(output, s).max(4);
    let smallest = sizes.iter().copied().min().unwrap_or(0);
    let plan = plan(array, dev, names, s, sizes, output)?;
    let mut parts = plan.parts;
    loop {
        match run_partitions(array, dev, names, s, smallest, width, output, parts, plan.ids.clone()) {
            Err(HostError::Device { error: DeviceError::MemoryExhausted { .. }, .. })
                if parts < MAX_PARTS =>
            {
                parts *= 2
            }
            other => return other.map(|(a, polls, passes)| (a, passes, polls)),
        }
    }
}

/// Most ID ranges the device placement takes before it gives up for want of device memory.
const MAX_PARTS: u64 = 1 << 16;

/// How the device placement starts: the IDs common entries can have, the ranges it splits them in (none
/// when the lists' ends already show that nothing is common), and whether it read the lists' ends.
#[derive(Debug, Clone)]
struct Plan {
    ids: std::ops::Range<u64>,
    parts: u64,
    ends_read: bool,
    /// Entries of each list expected in `ids`.
    in_span: Vec<u64>,
}

/// Plans the device placement of lists `names` of `sizes` entries on `dev`: one pass over the whole ID
/// space when their IDs fit its memory. Else, common IDs lie between the largest first ID and the smallest
/// last ID of the lists (one entry read from each end of each list), so only that span is split into
/// ranges, as many as its entries need memory for, taking the entries as spread evenly between each
/// list's ends (ranges that still do not fit are halved as they fail). An empty list, or ends that leave
/// no span, need no pass: nothing is common.
fn plan(array: &Array, dev: u32, names: &[String], s: u32, sizes: &[u64], output: Output) -> Result<Plan> {
    let free = array.device(dev)?.call(Identify).map_err(HostError::device(dev))?.memory_available;
    // The results' buffer: a common entry for each entry of the shortest list, at most (none for a
    // count); the passes are sized as if 4 bytes a common entry were kept even then.
    let smallest = sizes.iter().copied().min().unwrap_or(0);
    let width = width(output, s);
    let results = smallest * width.max(4);
    if smallest * width + crate::intersect::STAGING > free {
        return Err(HostError::InvalidArgument(format!(
            "device {dev} has {} of memory free, and the results of these lists may take {} there (as many \
             entries of {width} bytes as the shortest list has); use --placement host, or --ids-only or \
             --count-only",
            crate::units::human_bytes(free),
            crate::units::human_bytes(smallest * width + crate::intersect::STAGING)
        )));
    }
    if partitions(free, sizes, results) == 1 {
        return Ok(Plan { ids: 0..1u64 << 32, parts: 1, ends_read: false, in_span: sizes.to_vec() });
    }
    if sizes.contains(&0) {
        return Ok(Plan { ids: 0..0, parts: 0, ends_read: false, in_span: vec![0; sizes.len()] });
    }
    let mut ends = Vec::new();
    for (name, &n) in names.iter().zip(sizes) {
        let id = |entry: u64| -> Result<u64> {
            let b = crate::table::store::read_range(array, dev, name, entry * s as u64, 4)?;
            Ok(le::u32_at(&b) as u64)
        };
        ends.push((id(0)?, id(n - 1)?));
    }
    let lo = ends.iter().map(|e| e.0).max().unwrap_or(0);
    let hi = ends.iter().map(|e| e.1).min().unwrap_or(0) + 1;
    if lo >= hi {
        return Ok(Plan { ids: lo..lo, parts: 0, ends_read: true, in_span: vec![0; sizes.len()] });
    }
    let in_span: Vec<u64> = sizes
        .iter()
        .zip(&ends)
        .map(|(&n, &(first, last))| {
            let share = (hi - lo) as f64 / (last - first + 1) as f64;
            ((n as f64 * share).ceil() as u64).min(n)
        })
        .collect();
    let parts = partitions(free, &in_span, results);
    if parts > MAX_PARTS {
        return Err(HostError::InvalidArgument(format!(
            "device {dev} has {} of memory free: too little to intersect these lists there in at most {MAX_PARTS} passes; use --placement host",
            crate::units::human_bytes(free)
        )));
    }
    Ok(Plan { parts: parts.min(hi - lo), ids: lo..hi, ends_read: true, in_span })
}

/// The match ratio `auto` assumes (of the shortest list), as the paper's model does (§4: r = 1%).
const AUTO_MATCH_RATIO: f64 = 0.01;

/// ID ranges the device intersects lists of `sizes` entries in, with `free` bytes of memory: their IDs in
/// device DRAM (12 bytes each with their positions) in half of what the staging buffer and the results'
/// `result_bytes` leave. A range that still does not fit doubles them (see `on_device`).
fn partitions(free: u64, sizes: &[u64], result_bytes: u64) -> u64 {
    let working: u64 = sizes.iter().sum::<u64>() * 12 + crate::intersect::STAGING;
    let room = free.saturating_sub(result_bytes + crate::intersect::STAGING) / 2;
    working.div_ceil(room.max(1)).max(1)
}

#[allow(clippy::too_many_arguments)]
fn run_partitions(
    array: &Array,
    dev: u32,
    names: &[String],
    s: u32,
    smallest: u64,
    width: u64,
    output: Output,
    parts: u64,
    ids: std::ops::Range<u64>,
) -> Result<(Answer, u64, u64)> {
    let mut answer = Answer { count: 0, ids: Vec::new(), entries: Vec::new() };
    let mut polls = 0;
    // Ranges of one span each, as many as cover the IDs (fewer than `parts` when it does not divide them).
    let span = (ids.end - ids.start).div_ceil(parts.max(1)).max(1);
    let passes = (ids.end - ids.start).div_ceil(span);
    for p in 0..passes {
        let (lo, hi) = (ids.start + p * span, (ids.start + (p + 1) * span).min(ids.end));
        let result_bytes = if output == Output::Count { 0 } else { smallest * width };
        let mut session = Session::open(array, dev, result_bytes, 0)?;
        let args = SvsArgs {
            lists: names.to_vec(),
            entry_size: s,
            returned: output,
            lo,
            hi,
            staging: crate::intersect::STAGING,
            out: None,
        };
        let r = session.start(args).and_then(|()| session.wait(POLL_INTERVAL));
        polls += session.polls;
        let close = session.close();
        let (out, results) = r?;
        close?;
        answer.count += out.count;
        match output {
            Output::Ids => answer.ids.extend(le::decode_u32s(&results)),
            Output::Entries => answer.entries.extend(results),
            Output::Count => {}
        }
    }
    Ok((answer, polls, passes))
}

fn on_host(
    array: &Array,
    lists: &[(String, u32)],
    s: u32,
    output: Output,
    measure: &mut Measure,
) -> Result<Answer> {
    let mut sizes = Vec::new();
    for (name, dev) in lists {
        sizes.push(
            array.device(*dev)?.call(Stat { name: name.clone() }).map_err(HostError::device(*dev))?.size,
        );
    }
    let lens: Vec<usize> = sizes.iter().map(|b| (*b / s as u64) as usize).collect();
    // SvS takes the longest list last (the last of equally long ones; `max_by_key` keeps the last): unless
    // whole entries go back, its IDs are matched against the running result as its bytes stream over the
    // host link, a chunk at a time, not read whole first.
    let last = match output {
        Output::Entries => None,
        _ => lens.iter().enumerate().max_by_key(|(_, n)| **n).map(|(i, _)| i),
    };
    let mut datas = Vec::new();
    for (i, (name, dev)) in lists.iter().enumerate() {
        datas.push(match Some(i) == last {
            true => Vec::new(),
            false => crate::table::store::read_range(array, *dev, name, 0, sizes[i])?,
        });
    }
    let ids: Vec<Vec<u32>> =
        datas.iter().map(|d| d.chunks_exact(s as usize).map(le::u32_at).collect()).collect();
    let refs: Vec<&[u32]> =
        ids.iter().enumerate().filter(|(i, _)| Some(*i) != last).map(|(_, v)| v.as_slice()).collect();
    let (result, steps) = match last {
        None => intersect_k_steps(&refs),
        Some(i) => {
            let (acc, mut steps) = intersect_k_steps(&refs);
            if !acc.is_empty() {
                steps.push((acc.len(), lens[i]));
            }
            let (mut found, mut next) = (Vec::new(), 0);
            let (name, dev) = &lists[i];
            crate::table::store::read_entries(array, *dev, name, sizes[i], s as usize, |piece| {
                match_entries(&acc, piece, s as usize, &mut next, &mut found);
                Ok(())
            })?;
            (found, steps)
        }
    };
    let mut work = Ledger::new();
    work::add(&mut work, work::INTERSECT_ENTRIES, lens.iter().map(|n| *n as u64).sum());
    for (short, long) in steps {
        work::add(&mut work, work::INTERSECT_ACCESSES, work::intersect_accesses(short as u64, long as u64));
    }
    let mut answer = Answer { count: result.len() as u64, ids: Vec::new(), entries: Vec::new() };
    match output {
        Output::Ids => answer.ids = result,
        Output::Entries => {
            let mut j = 0;
            for id in &result {
                while ids[0][j] != *id {
                    j += 1;
                }
                answer.entries.extend_from_slice(&datas[0][j * s as usize..(j + 1) * s as usize]);
            }
        }
        Output::Count => {}
    }
    measure.phase("intersect", array, HostWork::counted(work))?;
    Ok(answer)
}
