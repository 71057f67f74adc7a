//! What the host asks of Self-Sort, through a command block or a typed command: configure, resize, set
//! flags, generate, drop, flush, query, status; and the device's consistency check of every index.

use insitu_flash::FsckReport;

use crate::error::Result;
use crate::firmware::selfsort::index::{refuse, Index};
use crate::firmware::selfsort::records::{self, record_addr};
use crate::firmware::selfsort::{persist, read, State};
use crate::firmware::FirmwareContext;
use crate::protocol::block::{self, BlockCommand, LastCommand};
use crate::protocol::{
    GenerateProgress, IndexConfig, IndexInfo, IndexKind, IndexQuery, QueryRows, SelfSortStatus,
    DEFAULT_GENERATE_CHUNK, MAX_INDEXES, MAX_RUNS,
};

/// A generate command reads at most this many bytes of records (a command must not run long, §III-E).
const GENERATE_MAX_BYTES: u64 = 64 << 20;
/// A query returns at most this many bytes of records per command (the host asks for the rest).
pub const QUERY_MAX_BYTES: u64 = 16 << 20;

/// LBAs `start..end` (pages) of an index's range.
fn range_of(cfg: &IndexConfig, page_size: u32) -> (u64, u64) {
    (cfg.base_lba, cfg.base_lba + cfg.range_pages(page_size))
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Takes an index's pages (its range, and its runs) out of the object allocator's free space.
pub(crate) fn set_aside_ranges(fw: &FirmwareContext<'_>, cfg: &IndexConfig) -> Result<()> {
    let (s, e) = range_of(cfg, fw.page_size());
    if e > s {
        fw.set_aside(s, e - s)?;
    }
    if let IndexKind::Runs(runs) = &cfg.kind {
        let ps = fw.page_size() as u64;
        for r in runs {
            let pages = r.records.saturating_mul(cfg.record_size as u64).div_ceil(ps);
            if pages > 0 {
                fw.set_aside(r.lba, pages)?;
            }
        }
    }
    Ok(())
}

/// Checks a configuration against the device and the other indexes.
fn validate(st: &State, fw: &FirmwareContext<'_>, c: &IndexConfig) -> Result<()> {
    let bad = |m: String| Err(refuse(format!("index {}: {m}", c.id)));
    if c.id == 0 || c.id as usize > MAX_INDEXES {
        return bad(format!("index ids are 1 to {MAX_INDEXES}"));
    }
    if c.record_size == 0 {
        return bad("the record size must be at least 1 byte".into());
    }
    if c.key_size == 0 || c.key_size as usize > insitu_kernels::btree::MAX_KEY_BYTES {
        return bad(format!(
            "the key size must be 1 to {} bytes, got {}",
            insitu_kernels::btree::MAX_KEY_BYTES,
            c.key_size
        ));
    }
    if c.key_offset as u64 + c.key_size as u64 > c.record_size as u64 {
        return bad(format!(
            "the key (offset {}, {} bytes) ends past the {}-byte record",
            c.key_offset, c.key_size, c.record_size
        ));
    }
    if !(3..=4096).contains(&c.fanout) {
        return bad(format!("the fanout must be 3 to 4096, got {}", c.fanout));
    }
    let area = st.area()?;
    let ps = fw.page_size();
    let data_lbas = area.command_lba();
    let within = |what: &str, s: u64, bytes: u64| -> Result<()> {
        let e = s.checked_add(bytes.div_ceil(ps as u64));
        if s >= data_lbas || e.is_none_or(|e| e > data_lbas) {
            return Err(refuse(format!(
                "index {}: {what} of {bytes} bytes from LBA {s} does not fit the device's data LBAs 0 to {} \
                 ({ps}-byte pages; LBA {data_lbas} is the command LBA)",
                data_lbas.saturating_sub(1),
                c.id
            )));
        }
        Ok(())
    };
    within("the range", c.base_lba, c.range_bytes().max(1))?;
    let me = range_of(c, ps);
    let mut taken: Vec<((u64, u64), String)> = Vec::new();
    if let IndexKind::Runs(runs) = &c.kind {
        if runs.is_empty() || runs.len() > MAX_RUNS {
            return bad(format!("a merge of runs takes 1 to {MAX_RUNS} runs, got {}", runs.len()));
        }
        if c.sort_on_write {
            return bad("a merge of runs does not sort on write".into());
        }
        for (i, r) in runs.iter().enumerate() {
            let Some(bytes) = r.records.checked_mul(c.record_size as u64) else {
                return bad(format!(
                    "run {i}: {} records of {} bytes overflow 64 bits",
                    r.records, c.record_size
                ));
            };
            within(&format!("run {i}"), r.lba, bytes.max(1))?;
            let span = (r.lba, r.lba + bytes.div_ceil(ps as u64));
            if overlaps(span, me) {
                return bad(format!(
                    "run {i} (LBAs {}..{}) overlaps the range it is read through",
                    span.0, span.1
                ));
            }
            if let Some((_, who)) = taken.iter().find(|(t, _)| overlaps(*t, span)) {
                return bad(format!("run {i} overlaps {who}"));
            }
            taken.push((span, format!("run {i}")));
        }
    }
    for other in st.indexes.values().filter(|o| o.config.id != c.id) {
        let oc = &other.config;
        let theirs = range_of(oc, ps);
        if oc.base_lba == c.base_lba {
            if oc.record_size != c.record_size {
                return bad(format!(
                    "index {} covers LBA {} with {}-byte records; indexes of one range share its record size",
                    oc.id, oc.base_lba, oc.record_size
                ));
            }
            if oc.active_read && c.active_read {
                return bad(format!(
                    "index {} already serves reads of LBA {} in key order; turn its active read off first",
                    oc.id, oc.base_lba
                ));
            }
        } else if overlaps(me, theirs) {
            return bad(format!(
                "its range (LBAs {}..{}) overlaps index {}'s (LBAs {}..{})",
                me.0, me.1, oc.id, theirs.0, theirs.1
            ));
        }
        if let Some((_, who)) = taken.iter().find(|(t, _)| overlaps(*t, theirs)) {
            return bad(format!("{who} overlaps index {}'s range", oc.id));
        }
    }
    // Every index must fit the saved image (checked now, not when a flush finds out after the work).
    let slot = area.slot_pages * ps as u64;
    let image: u64 = image_bound(c)
        + st.indexes
            .values()
            .filter(|o| o.config.id != c.id)
            .map(|o| {
                let records = if o.config.base_lba == c.base_lba { c.records } else { o.config.records };
                image_bound(&IndexConfig { records, ..o.config.clone() })
            })
            .sum::<u64>();
    if image > slot {
        return bad(format!(
            "saved, the indexes would take up to {image} bytes, more than the {slot} bytes of an image slot \
             (the smaller of the device memory and 1/32 of the capacity): give the device more capacity or \
             index fewer records"
        ));
    }
    Ok(())
}

/// Most bytes an index takes in a saved image: its keys and its record ids (`persist::write_image`).
fn image_bound(c: &IndexConfig) -> u64 {
    if !matches!(c.kind, IndexKind::Tree) {
        return 64;
    }
    64 + c.records * (c.key_size as u64 + persist::id_width(c.records) as u64)
}

/// Rebuilds an index from the stored records: all stored ones for sort-on-write, the generated ones
/// otherwise. Returns the records indexed.
pub(crate) fn rebuild(ix: &mut Index, fw: &FirmwareContext<'_>) -> Result<u64> {
    ix.clear();
    if !ix.is_tree() {
        return Ok(0);
    }
    let upto = if ix.config.sort_on_write { ix.config.records } else { ix.generated };
    let cfg = ix.config.clone();
    // In batches, as generate does.
    const BATCH: u64 = 1 << 18;
    let mut from = 0;
    while from < upto {
        let to = (from + BATCH).min(upto);
        let (mut keys, mut rids) = (Vec::new(), Vec::new());
        records::scan(&cfg, fw, from, to, true, |rid, key| {
            keys.extend_from_slice(key);
            rids.push(rid);
            Ok(())
        })?;
        let r = ix.insert_batch(fw, &keys, &rids);
        ix.charge_work(fw);
        r?;
        from = to;
    }
    Ok(ix.entries())
}

impl State {
    pub(crate) fn configure(&mut self, fw: &FirmwareContext<'_>, mut c: IndexConfig) -> Result<IndexInfo> {
        if let IndexKind::Runs(runs) = &c.kind {
            // Checked: the runs' sizes are validated below, against the device (a sum that wraps would
            // pass as a small index).
            c.records = runs
                .iter()
                .try_fold(0u64, |a, r| a.checked_add(r.records))
                .ok_or_else(|| refuse(format!("index {}: its runs' record counts overflow 64 bits", c.id)))?;
        }
        // An index configured again over the same range keeps the range's records: they stay where they
        // are, and a sort-on-write index is rebuilt over them (configuring anew must not lose them).
        if let Some(o) = self.indexes.get(&c.id).filter(|o| o.config.base_lba == c.base_lba && c.records == 0)
        {
            c.records = o.config.records;
        }
        // A secondary index takes its range's record count.
        if let Some(o) =
            self.indexes.values().find(|o| o.config.base_lba == c.base_lba && o.config.id != c.id)
        {
            if c.records == 0 {
                c.records = o.config.records;
            }
        }
        validate(self, fw, &c)?;
        set_aside_ranges(fw, &c)?;
        // A range not yet sized (`selfsort write` sizes it) still starts at its first LBA: an object's
        // page there is refused now, not at the first write. Only here, where a range is configured: an
        // index saved by an earlier build over such a page still opens (its write refuses it, by name).
        let (s, e) = range_of(&c, fw.page_size());
        if e == s {
            fw.set_aside(s, 1)?;
        }
        let ix = Index::new(c.clone(), fw)?;
        self.indexes.insert(c.id, ix);
        self.save_dirty(fw)?;
        let ix = self.index(c.id)?;
        if ix.is_tree() && c.sort_on_write {
            rebuild(ix, fw)?;
        }
        Ok(ix.info())
    }

    pub(crate) fn resize(&mut self, fw: &FirmwareContext<'_>, id: u32, records: u64) -> Result<IndexInfo> {
        let base = self.index(id)?.config.base_lba;
        if !self.index(id)?.is_tree() {
            return Err(refuse(format!("index {id} is a merge of runs: its records are its runs'")));
        }
        let ids: Vec<u32> =
            self.indexes.values().filter(|o| o.config.base_lba == base).map(|o| o.config.id).collect();
        for &i in &ids {
            let mut c = self.index(i)?.config.clone();
            c.records = records;
            validate(self, fw, &c)?;
        }
        for &i in &ids {
            let ix = self.index(i)?;
            ix.resize(fw, records)?;
            let c = ix.config.clone();
            set_aside_ranges(fw, &c)?;
        }
        self.save_dirty(fw)?;
        Ok(self.index(id)?.info())
    }

    pub(crate) fn set_flags(
        &mut self,
        fw: &FirmwareContext<'_>,
        id: u32,
        sort_on_write: bool,
        active_read: bool,
    ) -> Result<IndexInfo> {
        let mut c = self.index(id)?.config.clone();
        let newly_on_write = sort_on_write && !c.sort_on_write;
        (c.sort_on_write, c.active_read) = (sort_on_write, active_read);
        validate(self, fw, &c)?;
        let ix = self.index(id)?;
        ix.config = c;
        ix.cache = None;
        ix.merge = None;
        if newly_on_write && ix.is_tree() {
            rebuild(ix, fw)?;
        }
        self.save_dirty(fw)?;
        Ok(self.index(id)?.info())
    }

    pub(crate) fn drop_index(&mut self, fw: &FirmwareContext<'_>, id: u32) -> Result<()> {
        self.index(id)?;
        self.indexes.remove(&id);
        self.save_dirty(fw)
    }

    /// Sort-on-command: indexes the next stored records (at most `max_records`, 0 for the default chunk).
    pub(crate) fn generate(
        &mut self,
        fw: &FirmwareContext<'_>,
        id: u32,
        max_records: u64,
    ) -> Result<GenerateProgress> {
        let ix = self.index(id)?;
        if !ix.is_tree() {
            return Err(refuse(format!("index {id} is a merge of runs: there is nothing to generate")));
        }
        let c = ix.config.clone();
        if c.records == 0 {
            return Err(refuse(format!(
                "index {id} has no records: give its record count (resize) or write records into it first"
            )));
        }
        if ix.generated == 0 {
            let (s, e) = range_of(&c, fw.page_size());
            if !(s..e).any(|p| fw.is_mapped(p)) {
                return Err(refuse(format!(
                    "nothing to generate: no record of index {id} is written (LBAs {s}..{e} hold no data)"
                )));
            }
        }
        let default = DEFAULT_GENERATE_CHUNK.min((GENERATE_MAX_BYTES / c.record_size as u64).max(1));
        let chunk = if max_records == 0 { default } else { max_records };
        let (from, to) = (ix.generated, (ix.generated + chunk).min(c.records));
        if from < to {
            self.changed = true;
            let ix = self.index(id)?;
            // Records already indexed (written since with the range maintained) are not inserted twice.
            let ks = c.key_size as usize;
            let (mut keys, mut rids) = (Vec::with_capacity((to - from) as usize * ks), Vec::new());
            let r = records::scan(&c, fw, from, to, false, |rid, key| {
                if !ix.is_indexed(rid) {
                    keys.extend_from_slice(key);
                    rids.push(rid);
                }
                Ok(())
            })
            .and_then(|()| ix.insert_batch(fw, &keys, &rids));
            ix.charge_work(fw);
            r?;
            ix.generated = to;
        }
        let ix = self.index(id)?;
        Ok(GenerateProgress { done: ix.generated, total: c.records })
    }

    pub(crate) fn query(
        &mut self,
        fw: &FirmwareContext<'_>,
        id: u32,
        q: &IndexQuery,
        skip: u64,
        limit: u64,
        count_only: bool,
    ) -> Result<QueryRows> {
        let ix = self.index(id)?;
        if !ix.complete() {
            return Err(ix.incomplete_error());
        }
        let n = ix.config.records;
        let ks = ix.config.key_size as usize;
        let check = |k: &[u8], what: &str| {
            if k.len() != ks {
                return Err(refuse(format!(
                    "index {id}: {what} key is {} bytes, the index's keys {ks}",
                    k.len()
                )));
            }
            Ok(())
        };
        let ranks = match q {
            IndexQuery::Ranks { start, count } => (*start).min(n)..start.saturating_add(*count).min(n),
            _ if !ix.is_tree() => {
                return Err(refuse(format!(
                    "index {id} is a merge of runs: it serves ranks, not key queries"
                )))
            }
            IndexQuery::Min => match ix.tree().nth(0) {
                Some((k, _)) => ix.tree().key_range(&k, &k),
                None => 0..0,
            },
            IndexQuery::Max => match ix.tree().nth(n.saturating_sub(1)) {
                Some((k, _)) if n > 0 => ix.tree().key_range(&k, &k),
                _ => 0..0,
            },
            IndexQuery::Range { lo, hi } => {
                check(lo, "the low")?;
                check(hi, "the high")?;
                ix.tree().key_range(lo, hi)
            }
        };
        let count = ranks.end - ranks.start;
        let mut rows = QueryRows { count, first_rank: ranks.start, records: Vec::new() };
        if !count_only {
            let r = ix.config.record_size as u64;
            let limit = limit.min((QUERY_MAX_BYTES / r).max(1));
            let from = ranks.start.saturating_add(skip).min(ranks.end);
            let to = from.saturating_add(limit).min(ranks.end);
            if ix.is_tree() {
                let rids: Vec<u64> = ix.tree().ids_from(from).take((to - from) as usize).collect();
                read::fetch(ix, fw, &rids, 0..r, &mut rows.records)?;
            } else {
                super::runs::serve(ix, fw, from, to, &mut rows.records)?;
            }
        }
        ix.charge_work(fw);
        Ok(rows)
    }

    pub(crate) fn status(&self, fw: &FirmwareContext<'_>) -> Result<SelfSortStatus> {
        let area = self.area()?;
        Ok(SelfSortStatus {
            command_lba: area.command_lba(),
            host_lbas: area.host_lbas,
            page_size: fw.page_size(),
            area_lba: area.start,
            area_pages: area.pages(),
            generation: self.generation,
            saved_clean: self.saved_clean && !self.changed,
            firmware_memory_bytes: self.firmware_memory.as_ref().map_or(0, |m| m.bytes()),
            memory_bytes: fw.memory_capacity(),
            memory_available: fw.memory_available(),
            indexes: self.indexes.values().map(Index::info).collect(),
        })
    }

    /// Carries out a command block written to the command LBA; its outcome goes to the status page.
    pub(crate) fn execute_block(&mut self, fw: &FirmwareContext<'_>, page: &[u8]) -> Result<()> {
        let cmd = match block::decode(page) {
            Ok(c) => c,
            Err(e) => {
                let msg = format!("command block refused: {e}");
                self.last = LastCommand { opcode: 0, ok: false, message: msg.clone(), progress: (0, 0) };
                return Err(refuse(msg));
            }
        };
        let opcode = cmd.opcode();
        let r = match cmd {
            BlockCommand::Configure(c) => {
                self.configure(fw, c).map(|i| (format!("index {} configured", i.config.id), (0, 0)))
            }
            BlockCommand::Generate { index, chunk_records } => {
                self.generate(fw, index, chunk_records).map(|p| {
                    (format!("index {index}: {} of {} records generated", p.done, p.total), (p.done, p.total))
                })
            }
            BlockCommand::Drop { index } => {
                self.drop_index(fw, index).map(|()| (format!("index {index} dropped"), (0, 0)))
            }
            BlockCommand::Flush => self.flush(fw).map(|()| ("indexes saved".to_string(), (0, 0))),
            BlockCommand::SetFlags { index, sort_on_write, active_read } => self
                .set_flags(fw, index, sort_on_write, active_read)
                .map(|_| (format!("index {index}: flags set"), (0, 0))),
            BlockCommand::Resize { index, records } => {
                self.resize(fw, index, records).map(|_| (format!("index {index}: {records} records"), (0, 0)))
            }
        };
        self.last = match &r {
            Ok((message, progress)) => {
                LastCommand { opcode, ok: true, message: message.clone(), progress: *progress }
            }
            Err(e) => LastCommand { opcode, ok: false, message: e.to_string(), progress: (0, 0) },
        };
        r.map(|_| ())
    }

    /// The status page read back from the command LBA.
    pub(crate) fn status_page(&self, fw: &FirmwareContext<'_>) -> Result<Vec<u8>> {
        Ok(block::encode_status(&self.status(fw)?, &self.last, fw.page_size()))
    }

    /// Checks every index: the tree's own invariants, and every entry's key against its record as stored.
    pub(crate) fn fsck(&mut self, fw: &FirmwareContext<'_>, report: &mut FsckReport) -> Result<()> {
        for ix in self.indexes.values_mut() {
            let id = ix.config.id;
            for n in &ix.notes {
                report.notes.push(format!("self-sort index {id}: {n}"));
            }
            if !ix.is_tree() {
                report
                    .notes
                    .push(format!("self-sort index {id}: merge of runs over {} records", ix.config.records));
                continue;
            }
            if let Err(e) = ix.tree().check() {
                report.problems.push(format!("self-sort index {id}: its B+tree is damaged: {e}"));
                continue;
            }
            let mut entries: Vec<(u64, Vec<u8>)> =
                ix.tree().iter_from(0).map(|(k, rid)| (rid, k.to_vec())).collect();
            entries.sort_unstable_by_key(|e| e.0);
            let cfg = ix.config.clone();
            let mut wrong = Vec::new();
            let rids: Vec<u64> = entries.iter().map(|e| e.0).collect();
            for (chunk_rids, chunk) in rids.chunks(65_536).zip(entries.chunks(65_536)) {
                let stored = records::keys(&cfg, fw, chunk_rids, None)?;
                for ((rid, key), now) in chunk.iter().zip(stored.chunks(cfg.key_size as usize)) {
                    if key[..] != *now {
                        wrong.push(*rid);
                    }
                }
            }
            let ps = fw.page_size() as u64;
            if wrong.is_empty() {
                report.notes.push(format!(
                    "self-sort index {id}: {} of {} records indexed, every entry matches its record{}",
                    ix.entries(),
                    cfg.records,
                    if ix.complete() { "" } else { " (incomplete: reads in key order are refused)" }
                ));
            } else {
                report.problems.push(format!(
                    "self-sort index {id}: {} entries disagree with their records (first: record {} at LBA {})",
                    wrong.len(),
                    wrong[0],
                    record_addr(&cfg, ps, wrong[0]) / ps
                ));
            }
        }
        Ok(())
    }
}
