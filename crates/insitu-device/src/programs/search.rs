//! `search` and `heads`: literal string search over an object, reading its pages inside the device
//! (BlueDBM §5.1: engines scan flash pages in the device and only match positions leave it).
//!
//! With an object striped over several devices, a match may straddle the end of a stripe on this device
//! and the start of the next stripe, which lives on the next device. Each device counts exactly the
//! matches that *start* in its stripes; to see the bytes past each stripe end, it receives a *halo*
//! buffer holding the first `len - 1` bytes of every following stripe. The host builds it with the `heads`
//! program on the next device and a device-to-device copy.

use insitu_kernels::search::{Finder, StreamSearch};

use crate::error::Result;
use crate::program::ProgramContext;
use crate::protocol::programs::{HeadsArgs, HeadsOutput, SearchArgs, SearchOutput};
use crate::stripe::StripeLayout;
use crate::work;

/// Longest pattern accepted (a match then spans at most two stripes of the default unit).
pub const MAX_PATTERN_BYTES: usize = 64 << 10;

/// Checks a layout from the host: this device's index is below the count, and a striped object has a unit.
fn checked(ctx: &ProgramContext<'_>, l: &StripeLayout) -> Result<StripeLayout> {
    let count = l.count.max(1);
    if l.index >= count {
        return Err(ctx.bad(format!("device_index {} is not below device_count {count}", l.index)));
    }
    if count == 1 {
        return Ok(StripeLayout::single(l.total_size));
    }
    if l.unit == 0 {
        return Err(ctx.bad("missing stripe_unit"));
    }
    Ok(StripeLayout { count, ..*l })
}

pub(crate) fn search(ctx: &ProgramContext<'_>, a: SearchArgs) -> Result<SearchOutput> {
    if a.pattern.len() > MAX_PATTERN_BYTES {
        return Err(ctx.bad(format!("pattern longer than {MAX_PATTERN_BYTES} bytes")));
    }
    let finder = Finder::new(&a.pattern).map_err(|e| ctx.bad(e.to_string()))?;
    let layout = checked(ctx, &a.layout)?;
    let part = ctx.object(&a.object)?;
    if part.size != layout.part_size() {
        return Err(ctx.bad(format!(
            "object {:?} holds {} bytes here, the layout expects {}",
            a.object,
            part.size,
            layout.part_size()
        )));
    }
    if layout.count > 1 && layout.unit < a.pattern.len() as u64 {
        return Err(ctx.bad("the pattern is longer than a stripe"));
    }
    let halo_width = a.pattern.len() - 1;
    let halo = if layout.count > 1 && halo_width > 0 {
        Some(ctx.buffer(a.halo.ok_or_else(|| ctx.bad("a striped search needs a halo buffer"))?)?)
    } else {
        None
    };
    let halo_shift = (layout.index as usize + 1) / layout.count as usize;
    // Pages stream through in runs of at most MAX_RUN_BYTES; that much device memory must be free.
    let _staging = ctx.reserve(insitu_flash::ftl::MAX_RUN_BYTES + 2 * a.pattern.len() as u64)?;
    let mut count = 0u64;
    let mut offsets = Vec::new();
    for (k, chunk) in layout.chunks().iter().enumerate() {
        // Stripes of one device are not contiguous in the object: each is its own stream, ended by the
        // head of the stripe that follows it (the halo), if there is one.
        let mut stream = StreamSearch::new(&finder, chunk.global_offset, a.offsets);
        ctx.read_object_with(&a.object, chunk.local_offset, chunk.len, |s| stream.feed(s))?;
        let next = chunk.global_offset + chunk.len;
        let h = (halo_width as u64).min(layout.total_size.saturating_sub(next)) as usize;
        let (n, o) = match &halo {
            Some(halo) if h > 0 => {
                let src = halo.read();
                let at = (k + halo_shift) * halo_width;
                let slot = src.get(at..at + h).ok_or_else(|| ctx.bad("halo buffer too short"))?;
                stream.finish_with_halo(slot)
            }
            _ => stream.finish(),
        };
        count += n;
        offsets.extend(o.into_iter().flatten());
    }
    // The scan is data-parallel (BlueDBM §7.3: engines scan their own segments of the pages): split among
    // the device's compute units, a page at least each, every segment after the first also scanning the
    // `len - 1` bytes before it (a match straddling two segments is found by the one it starts in). The
    // answer is the same; the model divides the work by the units.
    let units = ctx.split_among_units(part.size.div_ceil(ctx.page_size()));
    ctx.work(|w| work::add(w, work::SEARCH_BYTES, part.size + (units - 1) * halo_width as u64));
    Ok(SearchOutput { count, bytes_scanned: part.size, offsets: a.offsets.then_some(offsets) })
}

pub(crate) fn heads(ctx: &ProgramContext<'_>, a: HeadsArgs) -> Result<HeadsOutput> {
    let layout = checked(ctx, &a.layout)?;
    let width = a.width as usize;
    let out = ctx.buffer(a.out)?;
    let mut dst = out.lock();
    let chunks = layout.chunks();
    if dst.len() < chunks.len() * width {
        return Err(ctx.bad(format!("buffer 0 holds {} bytes, {} needed", dst.len(), chunks.len() * width)));
    }
    for (k, c) in chunks.iter().enumerate() {
        let n = (width as u64).min(c.len) as usize;
        ctx.read_object(&a.object, c.local_offset, &mut dst[k * width..k * width + n])?;
    }
    Ok(HeadsOutput { chunks: chunks.len() as u64 })
}
