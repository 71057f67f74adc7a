//! The Smart SSD list intersection (DaMoN '16): `svs` intersects lists stored on this device, the way the
//! paper's SSDlet does (§3): every page passes from flash through the small *core memory* (the staging
//! buffer, 256 KB on the 2016 Smart SSD) and only the ID field of each entry is copied on into device DRAM
//! (§4.2); then SvS runs shortest list first (§3.2) and the result goes to a device buffer the host fetches.
//!
//! A list object holds entries of `entry_size` bytes: a little-endian u32 ID, then the payload, sorted by
//! ID. With `lo`/`hi` only IDs in `lo..hi` are kept: the host splits lists that do not fit the session's
//! memory into ID ranges and runs one partition at a time.

use insitu_kernels::intersect::intersect_k;

use crate::command::{Args, Value};
use crate::error::{DeviceError, Result};
use crate::program::{Program, ProgramContext};

/// Default staging ("core memory") size when the host does not give one.
pub const DEFAULT_STAGING: u64 = 256 << 10;

/// The program.
#[derive(Debug)]
pub struct Svs;

/// Loads the IDs of `list` in `lo..hi` through a staging buffer of `staging` bytes.
fn load_ids(
    ctx: &ProgramContext<'_>,
    list: &str,
    entry: u64,
    staging: u64,
    lo: u64,
    hi: u64,
) -> Result<(Vec<u32>, Vec<u64>)> {
    let size = ctx.object(list)?.size;
    if size % entry != 0 {
        return Err(ctx.bad(format!("{list:?} holds {size} bytes, not whole {entry}-byte entries")));
    }
    let per_read = (staging / entry).max(1) * entry;
    let mut stage = vec![0u8; per_read as usize];
    let entries = (size / entry) as usize;
    let mut ids = insitu_kernels::arch::vec_with_huge_pages(entries);
    let mut positions = insitu_kernels::arch::vec_with_huge_pages(entries);
    let mut at = 0u64;
    while at < size {
        let n = per_read.min(size - at);
        ctx.read_object(list, at, &mut stage[..n as usize])?;
        // The copy stage: only the 4-byte ID of each entry moves on to device DRAM.
        for (k, e) in stage[..n as usize].chunks_exact(entry as usize).enumerate() {
            let id = u32::from_le_bytes([e[0], e[1], e[2], e[3]]) as u64;
            if id >= lo && id < hi {
                ids.push(id as u32);
                positions.push(at / entry + k as u64);
            }
        }
        at += n;
    }
    Ok((ids, positions))
}

impl Program for Svs {
    fn id(&self) -> &'static str {
        "svs"
    }

    fn kernel_class(&self) -> &'static str {
        "intersect"
    }

    fn description(&self) -> &'static str {
        "intersect sorted lists on this device (SvS); args: lists (names joined by '\\n'), entry_size, output \
         (count|ids|entries), lo, hi, staging; buffer 0 receives ids or entries"
    }

    fn run(&self, ctx: &ProgramContext<'_>, args: &Args) -> Result<Args> {
        let lists: Vec<&str> =
            args.str("lists").ok_or_else(|| ctx.bad("missing string argument lists"))?.split('\n').collect();
        if lists.len() < 2 {
            return Err(ctx.bad("intersection needs at least two lists"));
        }
        let entry = args.u64("entry_size").ok_or_else(|| ctx.bad("missing u64 argument entry_size"))?;
        if entry < 4 || entry % 4 != 0 {
            return Err(ctx.bad(format!("entry_size must be a multiple of 4, at least 4, not {entry}")));
        }
        let (lo, hi) = (args.u64("lo").unwrap_or(0), args.u64("hi").unwrap_or(1 << 32));
        let staging = args.u64("staging").unwrap_or(DEFAULT_STAGING);
        let _core = ctx.reserve(staging)?;
        let mut loaded = Vec::new();
        for l in &lists {
            let (ids, pos) = load_ids(ctx, l, entry, staging, lo, hi)?;
            // The IDs now live in device DRAM; account for them (and their positions, kept for payloads).
            let mem = ctx.reserve(ids.len() as u64 * 12)?;
            loaded.push((ids, pos, mem));
        }
        let refs: Vec<&[u32]> = loaded.iter().map(|(ids, _, _)| ids.as_slice()).collect();
        let result = intersect_k(&refs);
        let output = args.str("output").unwrap_or("ids");
        let mut out = Args::new().with("count", Value::U64(result.len() as u64));
        match output {
            "count" => {}
            "ids" | "entries" => {
                let buf = ctx.buffer(0)?;
                let mut dst = buf.lock();
                let width = if output == "ids" { 4 } else { entry as usize };
                if dst.len() < result.len() * width {
                    return Err(DeviceError::BadArgument {
                        program: "svs".into(),
                        detail: format!(
                            "buffer 0 holds {} bytes, {} needed",
                            dst.len(),
                            result.len() * width
                        ),
                    });
                }
                if output == "ids" {
                    for (i, id) in result.iter().enumerate() {
                        dst[i * 4..i * 4 + 4].copy_from_slice(&id.to_le_bytes());
                    }
                } else {
                    // Whole entries of the first list: read each matching entry back from flash.
                    let (ids0, pos0, _) = &loaded[0];
                    let mut j = 0usize;
                    for (i, id) in result.iter().enumerate() {
                        while ids0[j] != *id {
                            j += 1;
                        }
                        ctx.read_object(lists[0], pos0[j] * entry, &mut dst[i * width..(i + 1) * width])?;
                    }
                }
            }
            other => return Err(ctx.bad(format!("output {other:?} is count, ids or entries"))),
        }
        let width = match output {
            "count" => 0,
            "entries" => entry,
            _ => 4,
        };
        out.set("bytes", Value::U64(result.len() as u64 * width));
        Ok(out)
    }
}
