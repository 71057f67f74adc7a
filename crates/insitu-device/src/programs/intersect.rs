//! The Smart SSD list intersection (DaMoN '16): `svs` intersects lists stored on this device, the way the
//! paper's SSDlet does (§3): every page passes from flash through the small *core memory* (the staging
//! buffer, 256 KB on the 2016 Smart SSD) and only the ID field of each entry is copied on into device DRAM
//! (§4.2); then SvS runs shortest list first (§3.2) and the result goes to a device buffer the host fetches.
//!
//! A list object holds entries of `entry_size` bytes: a little-endian u32 ID, then the payload, sorted by
//! ID. With `lo`/`hi` only IDs in `lo..hi` are kept: the host splits lists that do not fit the session's
//! memory into ID ranges and runs one partition at a time.

use insitu_kernels::intersect::{intersect_k_steps, match_entries};
use insitu_kernels::le;

use crate::error::Result;
use crate::program::ProgramContext;
use crate::protocol::programs::{Returned, SvsArgs, SvsOutput};
use crate::work;

/// Loads the IDs of `list` in `lo..hi` through a staging buffer of `staging` bytes; returns them with
/// their entry positions when `positions` (only whole entries returned need them).
fn load_ids(
    ctx: &ProgramContext<'_>,
    list: &str,
    entry: u64,
    staging: u64,
    (lo, hi): (u64, u64),
    want_positions: bool,
) -> Result<(Vec<u32>, Vec<u64>)> {
    let size = ctx.object(list)?.size;
    if size % entry != 0 {
        return Err(ctx.bad(format!("{list:?} holds {size} bytes, not whole {entry}-byte entries")));
    }
    let per_read = (staging / entry).max(1) * entry;
    let mut stage = vec![0u8; per_read as usize];
    let entries = (size / entry) as usize;
    let mut ids = insitu_kernels::arch::vec_with_huge_pages(entries);
    let mut positions = match want_positions {
        true => insitu_kernels::arch::vec_with_huge_pages(entries),
        false => Vec::new(),
    };
    let mut at = 0u64;
    while at < size {
        let n = per_read.min(size - at);
        ctx.read_object(list, at, &mut stage[..n as usize])?;
        // The copy stage: only the 4-byte ID of each entry moves on to device DRAM.
        for (k, e) in stage[..n as usize].chunks_exact(entry as usize).enumerate() {
            let id = le::u32_at(e) as u64;
            if id >= lo && id < hi {
                ids.push(id as u32);
                if want_positions {
                    positions.push(at / entry + k as u64);
                }
            }
        }
        at += n;
    }
    ctx.work(|w| {
        work::add(w, work::INTERSECT_ENTRIES, ids.len() as u64);
        work::add(w, work::INTERSECT_SKIPPED, size / entry - ids.len() as u64);
    });
    Ok((ids, positions))
}

/// The list SvS would take last (the longest; the last of equally long ones, as its stable order does),
/// when lists are taken whole.
fn longest(ctx: &ProgramContext<'_>, lists: &[String]) -> Result<Option<usize>> {
    let mut best: Option<(usize, u64)> = None;
    for (i, l) in lists.iter().enumerate() {
        let size = ctx.object(l)?.size;
        if best.is_none_or(|(_, b)| size >= b) {
            best = Some((i, size));
        }
    }
    Ok(best.map(|(i, _)| i))
}

/// Streams `list` through the staging buffer (every page read, as [`load_ids`] reads them) and returns the
/// IDs of `acc` (increasing) that it holds. The emulator matches runs of the staged pieces on its cores
/// at once: a run starts at the first ID of `acc` not below its first entry, where the one pass over all
/// pieces would stand (the list increases), so the runs' matches, one after another, are that pass's.
fn match_streamed(
    ctx: &ProgramContext<'_>,
    list: &str,
    entry: u64,
    staging: u64,
    acc: &[u32],
) -> Result<Vec<u32>> {
    let size = ctx.object(list)?.size;
    if size % entry != 0 {
        return Err(ctx.bad(format!("{list:?} holds {size} bytes, not whole {entry}-byte entries")));
    }
    let per_read = (staging / entry).max(1) * entry;
    let ways = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    // Each run's place in `acc` (None until its first piece) and its matches.
    let runs = ctx.read_object_pieces(list, per_read, vec![(None, Vec::new()); ways], |run, _, piece| {
        let (next, out): &mut (Option<usize>, Vec<u32>) = run;
        let next = next.get_or_insert_with(|| {
            let first = insitu_kernels::le::u32_at(piece);
            acc.partition_point(|&x| x < first)
        });
        match_entries(acc, piece, entry as usize, next, out);
    })?;
    ctx.work(|w| work::add(w, work::INTERSECT_ENTRIES, size / entry));
    ctx.work(|w| work::add(w, work::INTERSECT_SKIPPED, 0));
    Ok(runs.into_iter().flat_map(|(_, out)| out).collect())
}

pub(crate) fn svs(ctx: &ProgramContext<'_>, a: SvsArgs) -> Result<SvsOutput> {
    if a.lists.len() < 2 {
        return Err(ctx.bad("intersection needs at least two lists"));
    }
    let entry = a.entry_size as u64;
    if entry < 4 || !entry.is_multiple_of(4) {
        return Err(ctx.bad(format!("entry_size must be a multiple of 4, at least 4, not {entry}")));
    }
    let _core = ctx.reserve(a.staging)?;
    // SvS takes the longest list last. When every ID is kept and only IDs or a count go back, that list's
    // IDs are matched against the running result as its pages pass the staging buffer, instead of being
    // copied whole into memory first: the same pages read, the same steps, the same result, with the
    // memory accounted as if they had been copied (the emulation's time on a long list is that copy).
    let streamed = match (a.lo, a.hi >= 1 << 32, a.returned) {
        (0, true, Returned::Count | Returned::Ids) => longest(ctx, &a.lists)?,
        _ => None,
    };
    let mut loaded = Vec::new();
    for (i, l) in a.lists.iter().enumerate() {
        if Some(i) == streamed {
            continue;
        }
        let (ids, pos) = load_ids(ctx, l, entry, a.staging, (a.lo, a.hi), a.returned == Returned::Entries)?;
        // The IDs now live in device DRAM; account for them (and their positions, kept for payloads; the
        // emulation keeps those only when entries are returned, the device's memory is the same).
        let mem = ctx.reserve(ids.len() as u64 * 12)?;
        loaded.push((ids, pos, mem));
    }
    let refs: Vec<&[u32]> = loaded.iter().map(|(ids, _, _)| ids.as_slice()).collect();
    let (result, steps) = match streamed {
        None => intersect_k_steps(&refs),
        Some(i) => {
            let (acc, mut steps) = intersect_k_steps(&refs);
            let size = ctx.object(&a.lists[i])?.size;
            let _mem = ctx.reserve(size / entry * 12)?;
            // The step is taken (and counted) only while the running result is not empty, as in SvS.
            if !acc.is_empty() {
                steps.push((acc.len(), (size / entry) as usize));
            }
            (match_streamed(ctx, &a.lists[i], entry, a.staging, &acc)?, steps)
        }
    };
    ctx.work(|w| {
        for (short, long) in steps {
            work::add(w, work::INTERSECT_ACCESSES, work::intersect_accesses(short as u64, long as u64));
        }
    });
    let width = match a.returned {
        Returned::Count => 0,
        Returned::Ids => 4,
        Returned::Entries => entry as usize,
    };
    if width > 0 {
        let handle = a.out.ok_or_else(|| ctx.bad("returning IDs or entries needs an output buffer"))?;
        let buf = ctx.buffer(handle)?;
        let mut dst = buf.lock();
        if dst.len() < result.len() * width {
            return Err(ctx.bad(format!(
                "buffer 0 holds {} bytes, {} needed",
                dst.len(),
                result.len() * width
            )));
        }
        if a.returned == Returned::Ids {
            for (i, id) in result.iter().enumerate() {
                dst[i * 4..i * 4 + 4].copy_from_slice(&id.to_le_bytes());
            }
        } else {
            // Whole entries of the first list, read back from flash (the load kept only their IDs). The
            // matches lie in list order: those less than a page apart are read as one span, at most a
            // staging buffer, so each page is read once however many of its entries match (a read an
            // entry read its page again for each: 16 pages for 16 entries of 256 bytes in one). §4.4
            // prices this step as the result's bytes moved.
            let (ids0, pos0, _) = &loaded[0];
            let mut at = Vec::with_capacity(result.len());
            let mut j = 0usize;
            for id in &result {
                while ids0[j] != *id {
                    j += 1;
                }
                at.push(pos0[j] * entry);
            }
            let (page, most) = (ctx.page_size().max(1), a.staging.max(entry));
            let mut span = Vec::new();
            let mut i = 0;
            while i < at.len() {
                let (start, mut end) = (at[i], at[i] + entry);
                let mut k = i + 1;
                while k < at.len() && at[k] < end + page && at[k] + entry - start <= most {
                    end = end.max(at[k] + entry);
                    k += 1;
                }
                span.resize((end - start) as usize, 0);
                ctx.read_object(&a.lists[0], start, &mut span)?;
                for m in i..k {
                    let off = (at[m] - start) as usize;
                    dst[m * width..(m + 1) * width].copy_from_slice(&span[off..off + width]);
                }
                i = k;
            }
        }
    }
    Ok(SvsOutput { count: result.len() as u64, bytes: (result.len() * width) as u64 })
}
