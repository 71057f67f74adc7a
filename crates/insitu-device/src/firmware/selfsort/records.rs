//! Records of a range as the firmware finds them on flash: where a record's bytes are, whether all of
//! them are stored, and reading the key fields of many records at once (each page once).

use std::collections::HashMap;

use crate::error::Result;
use crate::firmware::selfsort::index::refuse;
use crate::firmware::{work, FirmwareContext};
use crate::protocol::IndexConfig;

/// Bytes a scan reads at once (the firmware's I/O buffer for generate and rebuilds).
const SCAN_BYTES: u64 = 1 << 20;

/// Absolute byte address of record `rid`.
pub(crate) fn record_addr(cfg: &IndexConfig, page_size: u64, rid: u64) -> u64 {
    cfg.base_lba * page_size + rid * cfg.record_size as u64
}

/// The logical pages holding bytes `addr..addr + len`.
pub(crate) fn pages_of(addr: u64, len: u64, page_size: u64) -> std::ops::RangeInclusive<u64> {
    addr / page_size..=(addr + len.max(1) - 1) / page_size
}

/// Whether every page of record `rid` holds data.
pub(crate) fn stored(cfg: &IndexConfig, fw: &FirmwareContext<'_>, rid: u64) -> bool {
    let ps = fw.page_size() as u64;
    pages_of(record_addr(cfg, ps, rid), cfg.record_size as u64, ps).all(|p| fw.is_mapped(p))
}

/// The key fields of records `rids`, one after another (`key_size` bytes each). Bytes inside `overlay`
/// (absolute address, bytes) come from it (data being written); the rest from flash, each page read once.
pub(crate) fn keys(
    cfg: &IndexConfig,
    fw: &FirmwareContext<'_>,
    rids: &[u64],
    overlay: Option<(u64, &[u8])>,
) -> Result<Vec<u8>> {
    let ps = fw.page_size() as u64;
    let ks = cfg.key_size as u64;
    let inside = |a: u64| overlay.is_some_and(|(start, d)| a >= start && a < start + d.len() as u64);
    let mut lbas: Vec<u64> = Vec::new();
    for &rid in rids {
        let a = record_addr(cfg, ps, rid) + cfg.key_offset as u64;
        for p in pages_of(a, ks, ps) {
            let lo = (p * ps).max(a);
            if !inside(lo) || !inside((p * ps + ps).min(a + ks) - 1) {
                lbas.push(p);
            }
        }
    }
    lbas.sort_unstable();
    lbas.dedup();
    let mut data = vec![0u8; lbas.len() * ps as usize];
    fw.read_pages(&lbas, &mut data)?;
    let slot: HashMap<u64, usize> = lbas.iter().enumerate().map(|(i, l)| (*l, i)).collect();
    let mut out = Vec::with_capacity(rids.len() * ks as usize);
    for &rid in rids {
        let a = record_addr(cfg, ps, rid) + cfg.key_offset as u64;
        match overlay {
            // The whole key is in the data being written (a sort-on-write's records).
            Some((start, d)) if inside(a) && inside(a + ks - 1) => {
                out.extend_from_slice(&d[(a - start) as usize..(a - start + ks) as usize]);
            }
            _ => out.extend((a..a + ks).map(|b| match overlay {
                Some((start, d)) if inside(b) => d[(b - start) as usize],
                _ => data[slot[&(b / ps)] * ps as usize + (b % ps) as usize],
            })),
        }
    }
    fw.add_work(&[(work::INDEX_RECORD, rids.len() as u64)]);
    Ok(out)
}

/// Calls `f(rid, key)` for the records `from..to` of the range, reading them in order in pieces of the
/// firmware's I/O buffer. A record not wholly stored is skipped (`skip_missing`) or refused.
pub(crate) fn scan(
    cfg: &IndexConfig,
    fw: &FirmwareContext<'_>,
    from: u64,
    to: u64,
    skip_missing: bool,
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let ps = fw.page_size() as u64;
    let r = cfg.record_size as u64;
    let per_piece = (SCAN_BYTES / r).max(1);
    let k = cfg.key_field();
    let mut buf = Vec::new();
    let mut rid = from;
    while rid < to {
        let end = (rid + per_piece).min(to);
        let a = record_addr(cfg, ps, rid);
        let pages: Vec<u64> = pages_of(a, (end - rid) * r, ps).collect();
        let mapped: Vec<bool> = pages.iter().map(|&p| fw.is_mapped(p)).collect();
        let want: Vec<u64> = pages.iter().zip(&mapped).filter(|(_, m)| **m).map(|(p, _)| *p).collect();
        if want.is_empty() && skip_missing {
            // Nothing of the piece is stored (a range just trimmed or never written): no record to pass
            // on, and no page to read or clear; the records are counted as examined all the same.
            fw.add_work(&[(work::INDEX_RECORD, end - rid)]);
            rid = end;
            continue;
        }
        buf.clear();
        buf.resize(pages.len() * ps as usize, 0);
        if want.len() == pages.len() {
            // Every page stored (the usual case): read straight into place.
            fw.read_pages(&want, &mut buf)?;
        } else {
            let mut data = vec![0u8; want.len() * ps as usize];
            fw.read_pages(&want, &mut data)?;
            let mut j = 0;
            for (i, m) in mapped.iter().enumerate() {
                if *m {
                    buf[i * ps as usize..(i + 1) * ps as usize]
                        .copy_from_slice(&data[j * ps as usize..(j + 1) * ps as usize]);
                    j += 1;
                }
            }
        }
        let first_page = pages[0];
        for id in rid..end {
            let ra = record_addr(cfg, ps, id);
            let whole = pages_of(ra, r, ps).all(|p| mapped[(p - first_page) as usize]);
            if !whole {
                if skip_missing {
                    continue;
                }
                return Err(refuse(format!(
                    "record {id} of index {} (LBA {}) is not written: generate needs every record of the \
                     range stored",
                    cfg.id,
                    ra / ps
                )));
            }
            let at = (ra - first_page * ps) as usize;
            f(id, &buf[at + k.start..at + k.end])?;
        }
        fw.add_work(&[(work::INDEX_RECORD, end - rid)]);
        rid = end;
    }
    Ok(())
}
