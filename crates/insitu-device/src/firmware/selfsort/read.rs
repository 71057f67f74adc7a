//! Reads in key order (§III-D): a read of the range at byte `i * record_size` returns the record of rank
//! `i`; the firmware redirects it through the index to the LBA that holds the record, then through the
//! FTL. Records in key order sit all over the flash, so the pages of one request are read as one batch
//! (they go to the flash together and take as long as the busiest channel), and when the records are
//! smaller than a page and the whole range fits in free device memory, the range is loaded once, in
//! order, and served from there: otherwise every 128-byte record would cost a 4 KB page read.

use std::collections::HashMap;

use crate::error::Result;
use crate::firmware::resident::Resident;
use crate::firmware::selfsort::index::{Index, RangeCache};
use crate::firmware::{work, FirmwareContext};

/// Pages read as one batch at most (a request's pages beyond this go in further batches).
const MAX_BATCH_PAGES: usize = 1024;
/// Device memory left free when deciding whether a range fits: an eighth of it.
const HEADROOM_DIVISOR: u64 = 8;

/// Absolute byte address of byte `offset` of record `rid`.
fn address(ix: &Index, page_size: u64, rid: u64, offset: u64) -> u64 {
    ix.config.base_lba * page_size + rid * ix.config.record_size as u64 + offset
}

/// Loads the range into device memory if its records are smaller than a page and it fits.
fn maybe_load(ix: &mut Index, fw: &FirmwareContext<'_>) -> Result<()> {
    let ps = fw.page_size() as u64;
    let bytes = ix.config.range_bytes();
    if ix.cache.is_some() || ix.config.record_size as u64 >= ps || bytes == 0 {
        return Ok(());
    }
    let headroom = fw.memory_capacity() / HEADROOM_DIVISOR;
    let pages = ix.config.range_pages(ps as u32);
    if pages * ps + headroom > fw.memory_available() {
        return Ok(());
    }
    let memory = fw.reserve(pages * ps)?;
    let data = Resident::load(fw, ix.config.base_lba, pages)?;
    ix.cache = Some(RangeCache { data, memory });
    Ok(())
}

/// Pages read for one request, by LBA.
struct Pages {
    slot: HashMap<u64, usize>,
    data: Vec<u8>,
    page_size: usize,
}

impl Pages {
    /// Reads `lbas` (sorted, unique) in batches.
    fn read(fw: &FirmwareContext<'_>, lbas: &[u64]) -> Result<Pages> {
        let ps = fw.page_size() as usize;
        let mut data = vec![0u8; lbas.len() * ps];
        for (i, batch) in lbas.chunks(MAX_BATCH_PAGES).enumerate() {
            let at = i * MAX_BATCH_PAGES * ps;
            fw.read_batch(batch, &mut data[at..at + batch.len() * ps])?;
        }
        let slot = lbas.iter().enumerate().map(|(i, l)| (*l, i)).collect();
        Ok(Pages { slot, data, page_size: ps })
    }

    /// Copies bytes from absolute byte address `addr` into `out`.
    fn copy(&self, addr: u64, out: &mut [u8]) {
        let ps = self.page_size as u64;
        let mut done = 0usize;
        while done < out.len() {
            let a = addr + done as u64;
            let (lba, off) = (a / ps, (a % ps) as usize);
            let n = (self.page_size - off).min(out.len() - done);
            let at = self.slot[&lba] * self.page_size + off;
            out[done..done + n].copy_from_slice(&self.data[at..at + n]);
            done += n;
        }
    }
}

/// Appends bytes `field` of each record `rids` (in that order) to `out`, from the range cache or from
/// flash (each page once per call).
pub(crate) fn fetch(
    ix: &mut Index,
    fw: &FirmwareContext<'_>,
    rids: &[u64],
    field: std::ops::Range<u64>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let ps = fw.page_size() as u64;
    let r = ix.config.record_size as u64;
    let len = (field.end - field.start) as usize;
    let start = out.len();
    out.resize(start + rids.len() * len, 0);
    if let Some(cache) = &mut ix.cache {
        let at: Vec<u64> = rids.iter().map(|&rid| rid * r + field.start).collect();
        cache.data.gather(fw, &at, len, &mut out[start..])?;
    } else {
        let mut lbas: Vec<u64> = Vec::with_capacity(rids.len() * 2);
        for &rid in rids {
            let a = address(ix, ps, rid, field.start);
            lbas.extend(a / ps..=(a + len as u64 - 1) / ps);
        }
        lbas.sort_unstable();
        lbas.dedup();
        let pages = Pages::read(fw, &lbas)?;
        for (i, &rid) in rids.iter().enumerate() {
            pages.copy(address(ix, ps, rid, field.start), &mut out[start + i * len..start + (i + 1) * len]);
        }
    }
    if ix.copies_records(ps) || ix.cache.is_some() {
        fw.add_work(&[(work::INDEX_COPY_BYTE, (rids.len() * len) as u64)]);
    }
    Ok(())
}

/// Serves a read of `pages` logical pages from `lba`, all inside `ix`'s range, in key order. Bytes past
/// the last record (the rest of the range's last page) read as zeros.
pub(crate) fn serve(ix: &mut Index, fw: &FirmwareContext<'_>, lba: u64, pages: u64) -> Result<Vec<u8>> {
    let ps = fw.page_size() as u64;
    let r = ix.config.record_size as u64;
    let span = (lba - ix.config.base_lba) * ps..(lba - ix.config.base_lba + pages) * ps;
    let end = span.end.min(ix.config.range_bytes());
    if span.start >= end {
        return Ok(vec![0u8; (pages * ps) as usize]);
    }
    if !ix.complete() {
        return Err(ix.incomplete_error());
    }
    let (r0, r1) = (span.start / r, end.div_ceil(r));
    // The records go straight into the reply: cut to the span, then zeros past the last record.
    let mut records = Vec::with_capacity((((r1 - r0) * r).max(pages * ps)) as usize);
    if ix.is_tree() {
        if r0 == 0 {
            maybe_load(ix, fw)?;
        }
        let rids: Vec<u64> = ix.tree().ids_from(r0).take((r1 - r0) as usize).collect();
        ix.charge_work(fw);
        fetch(ix, fw, &rids, 0..r, &mut records)?;
        if r1 == ix.config.records {
            // The end of a scan in key order: give the memory back.
            ix.cache = None;
        }
    } else {
        crate::firmware::selfsort::runs::serve(ix, fw, r0, r1, &mut records)?;
    }
    records.drain(..(span.start - r0 * r) as usize);
    records.truncate((end - span.start) as usize);
    records.resize((pages * ps) as usize, 0);
    Ok(records)
}
