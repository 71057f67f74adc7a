//! `search`: count (and optionally locate) a literal byte string in an object, reading its pages inside the
//! device. The first step of BlueDBM's string search (§5.1: engines scan flash pages in the device and
//! only match positions leave it).
//!
//! With an object striped over several devices, a match may straddle the end of a stripe on this device
//! and the start of the next stripe, which lives on the next device. Each device counts exactly the matches
//! that *start* in its stripes; to see the bytes past each stripe end, it receives a *halo* buffer holding
//! the first `len - 1` bytes of every following stripe. The host builds it with the `heads` program on the
//! next device and a device-to-device copy.

use insitu_kernels::search::{Finder, StreamSearch};

use crate::command::{Args, Value};
use crate::error::Result;
use crate::program::{Program, ProgramContext};
use crate::stripe::StripeLayout;

/// Longest pattern accepted (a match then spans at most two stripes of the default unit).
pub const MAX_PATTERN_BYTES: usize = 64 << 10;

pub(crate) fn layout_from(ctx: &ProgramContext<'_>, args: &Args) -> Result<StripeLayout> {
    let total_size = args.u64("total_size").ok_or_else(|| ctx.bad("missing u64 argument total_size"))?;
    let count = args.u64("device_count").unwrap_or(1).max(1) as u32;
    let index = args.u64("device_index").unwrap_or(0) as u32;
    if index >= count {
        return Err(ctx.bad(format!("device_index {index} is not below device_count {count}")));
    }
    if count == 1 {
        return Ok(StripeLayout::single(total_size));
    }
    let unit = args.u64("stripe_unit").filter(|u| *u > 0).ok_or_else(|| ctx.bad("missing stripe_unit"))?;
    Ok(StripeLayout { unit, index, count, total_size })
}

/// The search program.
#[derive(Debug)]
pub struct Search;

impl Program for Search {
    fn id(&self) -> &'static str {
        "search"
    }

    fn kernel_class(&self) -> &'static str {
        "search"
    }

    fn description(&self) -> &'static str {
        "count (and locate) a literal byte string in an object; args: object, pattern, offsets, total_size, \
         stripe_unit, device_index, device_count; buffer 0: halo of following stripes"
    }

    fn run(&self, ctx: &ProgramContext<'_>, args: &Args) -> Result<Args> {
        let object = args.str("object").ok_or_else(|| ctx.bad("missing string argument object"))?;
        let pattern = args.bytes("pattern").ok_or_else(|| ctx.bad("missing bytes argument pattern"))?;
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(ctx.bad(format!("pattern longer than {MAX_PATTERN_BYTES} bytes")));
        }
        let finder = Finder::new(pattern).map_err(|e| ctx.bad(e.to_string()))?;
        let want_offsets = args.bool("offsets").unwrap_or(false);
        let layout = layout_from(ctx, args)?;
        let part = ctx.object(object)?;
        if part.size != layout.part_size() {
            return Err(ctx.bad(format!(
                "object {object:?} holds {} bytes here, the layout expects {}",
                part.size,
                layout.part_size()
            )));
        }
        if layout.count > 1 && layout.unit < pattern.len() as u64 {
            return Err(ctx.bad("the pattern is longer than a stripe"));
        }
        let halo_width = pattern.len() - 1;
        let halo = if layout.count > 1 && halo_width > 0 { Some(ctx.buffer(0)?) } else { None };
        let halo_shift = (layout.index as usize + 1) / layout.count as usize;
        // Pages stream through in runs of at most MAX_RUN_BYTES; that much device memory must be free.
        let _staging = ctx.reserve(insitu_flash::ftl::MAX_RUN_BYTES + 2 * pattern.len() as u64)?;
        let mut count = 0u64;
        let mut offsets = Vec::new();
        for (k, chunk) in layout.chunks().iter().enumerate() {
            // Stripes of one device are not contiguous in the object: each is its own stream, ended by the
            // head of the stripe that follows it (the halo), if there is one.
            let mut stream = StreamSearch::new(&finder, chunk.global_offset, want_offsets);
            ctx.read_object_with(object, chunk.local_offset, chunk.len, |s| stream.feed(s))?;
            let next = chunk.global_offset + chunk.len;
            let h = (halo_width as u64).min(layout.total_size.saturating_sub(next)) as usize;
            let (n, o) = match &halo {
                Some(halo) if h > 0 => {
                    let src = halo.lock();
                    let at = (k + halo_shift) * halo_width;
                    let slot = src.get(at..at + h).ok_or_else(|| ctx.bad("halo buffer too short"))?;
                    stream.finish_with_halo(slot)
                }
                _ => stream.finish(),
            };
            count += n;
            offsets.extend(o.into_iter().flatten());
        }
        let mut out =
            Args::new().with("count", Value::U64(count)).with("bytes_scanned", Value::U64(part.size));
        if want_offsets {
            out.set("offsets", Value::U64List(offsets));
        }
        Ok(out)
    }
}

/// `heads`: writes the first `width` bytes of each of this device's stripes into buffer 0, slot by slot.
#[derive(Debug)]
pub struct Heads;

impl Program for Heads {
    fn id(&self) -> &'static str {
        "heads"
    }

    fn kernel_class(&self) -> &'static str {
        "transfer"
    }

    fn description(&self) -> &'static str {
        "copy the first `width` bytes of each local stripe of an object into buffer 0 (halo for search)"
    }

    fn run(&self, ctx: &ProgramContext<'_>, args: &Args) -> Result<Args> {
        let object = args.str("object").ok_or_else(|| ctx.bad("missing string argument object"))?;
        let width = args.u64("width").ok_or_else(|| ctx.bad("missing u64 argument width"))? as usize;
        let layout = layout_from(ctx, args)?;
        let out = ctx.buffer(0)?;
        let mut dst = out.lock();
        let chunks = layout.chunks();
        if dst.len() < chunks.len() * width {
            return Err(ctx.bad(format!(
                "buffer 0 holds {} bytes, {} needed",
                dst.len(),
                chunks.len() * width
            )));
        }
        for (k, c) in chunks.iter().enumerate() {
            let n = (width as u64).min(c.len) as usize;
            ctx.read_object(object, c.local_offset, &mut dst[k * width..k * width + n])?;
        }
        Ok(Args::new().with("chunks", Value::U64(chunks.len() as u64)))
    }
}
