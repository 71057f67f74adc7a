//! Host reads, writes and trims as Self-Sort sees them. A write to the command LBA is a command block; a
//! read of it, the status page. A write into an indexed range is carried out here, through the FTL: the
//! old keys of the records whose key bytes it changes are read first, then the data is written, then
//! those records are re-inserted and, with sort-on-write, every record the write completes is inserted
//! (§III-B; a record may straddle pages, so it is complete once all its pages hold data). A write that
//! straddles a range's boundary is refused whole. A read of a range with active read on is served in key
//! order (§III-D); other reads and writes pass to the FTL.

use crate::error::Result;
use crate::firmware::selfsort::index::refuse;
use crate::firmware::selfsort::records::{self, record_addr};
use crate::firmware::selfsort::{read, State};
use crate::firmware::{Decision, FirmwareContext};
use crate::protocol::IndexConfig;

/// Per index, the records a request changes whose old keys must leave the tree: `(record, old key)`.
type OldKeys = Vec<(u32, Vec<(u64, Vec<u8>)>)>;

/// LBAs of an index's range.
fn range(cfg: &IndexConfig, page_size: u32) -> (u64, u64) {
    (cfg.base_lba, cfg.base_lba + cfg.range_pages(page_size))
}

/// The indexes whose range `lba..end` touches; refuses a request that straddles a range's boundary.
fn touched(st: &State, fw: &FirmwareContext<'_>, lba: u64, end: u64, what: &str) -> Result<Vec<u32>> {
    let ps = fw.page_size();
    let mut hit = Vec::new();
    for ix in st.indexes.values() {
        let (s, e) = range(&ix.config, ps);
        if s < end && lba < e {
            if lba < s || end > e {
                return Err(refuse(format!(
                    "a {what} of LBAs {lba}..{end} straddles index {}'s range (LBAs {s}..{e}): {what} inside it or \
                     outside it",
                    ix.config.id
                )));
            }
            hit.push(ix.config.id);
        }
    }
    Ok(hit)
}

/// The records of `cfg` that bytes `from..to` (absolute) touch.
fn records_in(cfg: &IndexConfig, page_size: u64, from: u64, to: u64) -> std::ops::Range<u64> {
    let base = cfg.base_lba * page_size;
    let r = cfg.record_size as u64;
    let lo = (from.saturating_sub(base)) / r;
    let hi = (to.saturating_sub(base)).div_ceil(r).min(cfg.records);
    lo.min(hi)..hi
}

/// Whether bytes `from..to` (absolute) cover any byte of record `rid`'s key.
fn key_touched(cfg: &IndexConfig, page_size: u64, rid: u64, from: u64, to: u64) -> bool {
    let k = record_addr(cfg, page_size, rid) + cfg.key_offset as u64;
    k < to && from < k + cfg.key_size as u64
}

pub(crate) fn write(st: &mut State, fw: &FirmwareContext<'_>, lba: u64, data: &[u8]) -> Result<Decision> {
    let ps = fw.page_size() as u64;
    let end = lba + data.len() as u64 / ps;
    let cmd = st.area()?.command_lba();
    if lba <= cmd && cmd < end {
        if end - lba != 1 {
            return Err(refuse(format!(
                "LBA {cmd} is the command LBA: write one {ps}-byte command block to it, alone"
            )));
        }
        st.execute_block(fw, data)?;
        return Ok(Decision::Done(Vec::new()));
    }
    let hit: Vec<u32> =
        touched(st, fw, lba, end, "write")?.into_iter().filter(|id| st.indexes[id].is_tree()).collect();
    if hit.is_empty() {
        return Ok(Decision::Pass);
    }
    st.before_change(fw)?;
    let (from, to) = (lba * ps, end * ps);
    // Old keys of indexed records whose key bytes change, read before the write.
    let mut old: OldKeys = Vec::new();
    for id in &hit {
        let ix = &st.indexes[id];
        let c = &ix.config;
        let rids: Vec<u64> = records_in(c, ps, from, to)
            .filter(|&rid| ix.is_indexed(rid) && key_touched(c, ps, rid, from, to))
            .collect();
        let keys = records::keys(c, fw, &rids, None)?;
        old.push((*id, rids.into_iter().zip(keys.chunks(c.key_size as usize).map(<[u8]>::to_vec)).collect()));
    }
    fw.write_lba(lba, data)?;
    let mut result = Ok(());
    for (id, olds) in old {
        let ix = st.indexes.get_mut(&id).expect("indexes do not change during a write");
        ix.cache = None;
        for (rid, key) in &olds {
            ix.remove(key, *rid);
        }
        let c = ix.config.clone();
        // A record inside the write is stored now; one it straddles, if its other pages hold data.
        let stored = |rid: u64| {
            let a = record_addr(&c, ps, rid);
            (a >= from && a + c.record_size as u64 <= to) || records::stored(&c, fw, rid)
        };
        // Records to (re-)insert: those whose key changed and were indexed, and, with sort-on-write or
        // below the generated mark, every record the write makes whole.
        let rids: Vec<u64> = records_in(&c, ps, from, to)
            .filter(|&rid| {
                let was = olds.binary_search_by_key(&rid, |(r, _)| *r).is_ok();
                let wanted = c.sort_on_write || rid < ix.generated;
                (was || (wanted && !ix.is_indexed(rid))) && stored(rid)
            })
            .collect();
        let keys = records::keys(&c, fw, &rids, Some((from, data)))?;
        result = ix.insert_batch(fw, &keys, &rids);
        ix.charge_work(fw);
        if result.is_err() {
            break;
        }
    }
    result.map(|()| Decision::Done(Vec::new()))
}

pub(crate) fn trim(st: &mut State, fw: &FirmwareContext<'_>, lba: u64, blocks: u64) -> Result<Decision> {
    let ps = fw.page_size() as u64;
    let end = lba + blocks;
    let cmd = st.area()?.command_lba();
    if lba <= cmd && cmd < end {
        return Err(refuse(format!("LBA {cmd} is the command LBA: it holds no data to trim")));
    }
    let hit = touched(st, fw, lba, end, "trim")?;
    if hit.is_empty() {
        return Ok(Decision::Pass);
    }
    st.before_change(fw)?;
    let (from, to) = (lba * ps, end * ps);
    let mut old: OldKeys = Vec::new();
    for id in &hit {
        let ix = &st.indexes[id];
        let rids: Vec<u64> = records_in(&ix.config, ps, from, to).filter(|&rid| ix.is_indexed(rid)).collect();
        let ks = ix.config.key_size as usize;
        let keys = records::keys(&ix.config, fw, &rids, None)?;
        old.push((*id, rids.into_iter().zip(keys.chunks(ks).map(<[u8]>::to_vec)).collect()));
    }
    fw.trim_lba(lba, blocks)?;
    // Trimmed pages go back to free space: keep them out of the object allocator.
    fw.set_aside(lba, blocks)?;
    for (id, olds) in old {
        let ix = st.indexes.get_mut(&id).expect("indexes do not change during a trim");
        ix.cache = None;
        ix.merge = None;
        for (rid, key) in &olds {
            ix.remove(key, *rid);
        }
        ix.charge_work(fw);
    }
    Ok(Decision::Done(Vec::new()))
}

pub(crate) fn read(st: &mut State, fw: &FirmwareContext<'_>, lba: u64, blocks: u64) -> Result<Decision> {
    let ps = fw.page_size();
    let end = lba + blocks;
    let cmd = st.area()?.command_lba();
    let active: Vec<(u64, u64, u32)> = st
        .indexes
        .values()
        .filter(|ix| ix.config.active_read)
        .map(|ix| {
            let (s, e) = range(&ix.config, ps);
            (s, e, ix.config.id)
        })
        .filter(|(s, e, _)| *s < end && lba < *e)
        .collect();
    let has_cmd = lba <= cmd && cmd < end;
    if active.is_empty() && !has_cmd {
        return Ok(Decision::Pass);
    }
    if let [(s, e, id)] = active[..] {
        if !has_cmd && s <= lba && end <= e {
            // All of it in key order (an active read's usual request).
            return Ok(Decision::Done(read::serve(st.index(id)?, fw, lba, blocks)?));
        }
    }
    // Compose the read: pieces in key order, the status page, and the rest as stored.
    let psz = ps as usize;
    let mut out = vec![0u8; (blocks * ps as u64) as usize];
    let mut at = lba;
    while at < end {
        let slot = ((at - lba) as usize) * psz;
        if at == cmd {
            out[slot..slot + psz].copy_from_slice(&st.status_page(fw)?);
            at += 1;
            continue;
        }
        if let Some(&(_, e, id)) = active.iter().find(|(s, e, _)| *s <= at && at < *e) {
            let stop = e.min(end);
            let ix = st.index(id)?;
            let bytes = read::serve(ix, fw, at, stop - at)?;
            out[slot..slot + bytes.len()].copy_from_slice(&bytes);
            at = stop;
            continue;
        }
        // As stored, up to the next special page.
        let next = active
            .iter()
            .map(|(s, _, _)| *s)
            .chain(has_cmd.then_some(cmd))
            .filter(|&p| p > at)
            .min()
            .unwrap_or(end)
            .min(end);
        fw.read_lba(at, &mut out[slot..slot + ((next - at) as usize) * psz])?;
        at = next;
    }
    Ok(Decision::Done(out))
}
