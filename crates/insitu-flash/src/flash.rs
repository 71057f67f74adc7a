//! [`Flash`]: one device's flash as a whole — NAND + FTL + namespace + block view, persisted in a
//! directory and recovered after a crash.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{FlashError, Result};
use crate::ftl::{Ftl, FtlStats, WearStats};
use crate::geometry::{Geometry, Lpn, PhysicalPage, Ppn};
use crate::interval::IntervalSet;
use crate::namespace::{self, validate_name, Extent, ObjectMeta, Txn};
use crate::nand::Nand;
use crate::persist::{self, CheckpointState, Journal, Record, Superblock, FORMAT_VERSION};
use crate::raw::{NandStats, RawFlash};

/// Journal size past which a checkpoint is taken at the next quiet point.
const CHECKPOINT_AFTER_BYTES: u64 = 32 << 20;
/// Logical space is reserved for new objects in chunks of this many bytes (or the size announced).
const RESERVE_CHUNK_BYTES: u64 = 8 << 20;

/// Handle of an object being written.
pub type TxnId = u64;

/// What recovery found when the device was opened.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecoveryReport {
    pub journal_records: u64,
    pub torn_journal_bytes: u64,
    /// Objects whose creation was cut off and rolled back.
    pub rolled_back: Vec<String>,
    /// Copies of the superblock or checkpoint found damaged (or a generation behind) and rewritten
    /// from the other copy.
    pub mended_copies: Vec<String>,
}

/// Space and activity figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlashStats {
    pub geometry: Geometry,
    pub capacity_bytes: u64,
    pub logical_pages: u64,
    pub object_pages: u64,
    pub raw_pages: u64,
    pub free_pages: u64,
    pub mapped_pages: u64,
    pub objects: u64,
    pub free_blocks: u64,
    pub nand: NandStats,
    pub ftl: FtlStats,
    pub write_amplification: f64,
    pub wear: WearStats,
}

/// Result of a consistency check.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FsckReport {
    pub problems: Vec<String>,
    pub objects: u64,
    pub pages_scrubbed: u64,
    /// What was checked and found in order, beside the problems (resident firmware says what state its
    /// indexes are in).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One device's flash: the FTL on media `M`, by default the NAND image itself (a device with a raw
/// flash interface puts its controller between them: [`Flash::open_on`]).
#[derive(Debug)]
pub struct Flash<M = Nand> {
    dir: PathBuf,
    sb: Superblock,
    ftl: Ftl<M>,
    objects: BTreeMap<String, ObjectMeta>,
    txns: HashMap<TxnId, Txn>,
    next_txn: TxnId,
    /// The generation of the array's catalog this device last heard of (see [`Flash::set_array_generation`]).
    array_generation: u64,
    free: IntervalSet,
    raw: IntervalSet,
    generation: u64,
    recovery: RecoveryReport,
}

impl Flash {
    /// Formats a new device in `dir` (which must not hold one) with `geometry` sized for `capacity_bytes`.
    pub fn format(dir: &Path, geometry: Geometry, capacity_bytes: u64) -> Result<Flash> {
        Self::format_on(dir, geometry, capacity_bytes, Ok)
    }

    /// With the user's consent (`fsck --repair`), makes a device whose journal is damaged inside open
    /// again: the journal is cut at the damaged record (the records after it are dropped; the whole
    /// journal is kept beside it). Says what it did, or `None` when there was nothing to do.
    pub fn repair_journal(dir: &Path) -> Result<Option<String>> {
        let ckpt = persist::read_checkpoint(dir)?;
        Ok(Journal::cut_at_damage(dir, ckpt.generation)?.map(|(at, kept)| {
            format!(
                "journal cut at its damaged record (byte {at}); the records after it were dropped, the whole \
                 journal is kept as {}",
                kept.display()
            )
        }))
    }

    /// Opens the device in `dir`, replaying the journal and rolling back unfinished object creations.
    pub fn open(dir: &Path) -> Result<Flash> {
        Self::open_on(dir, Ok)
    }
}

impl<M: RawFlash> Flash<M> {
    /// [`Flash::format`], with the FTL on what `media` makes of the new NAND image (see [`Flash::open_on`]).
    pub fn format_on(
        dir: &Path,
        geometry: Geometry,
        capacity_bytes: u64,
        media: impl FnOnce(Nand) -> Result<M>,
    ) -> Result<Flash<M>> {
        let geometry = geometry.for_capacity(capacity_bytes)?;
        std::fs::create_dir_all(dir).map_err(|e| FlashError::io(dir, e))?;
        if dir.join("superblock").exists() || dir.join("superblock.b").exists() {
            return Err(FlashError::AlreadyFormatted(dir.to_path_buf()));
        }
        let sb = Superblock { version: FORMAT_VERSION, geometry, capacity_bytes };
        Nand::create(dir, geometry)?;
        persist::write_checkpoint(dir, &CheckpointState::default())?;
        Journal::create(dir, 0)?;
        persist::write_superblock(dir, &sb)?;
        Self::open_on(dir, media)
    }

    /// [`Flash::open`], with the FTL on what `media` makes of the device's NAND image (its block states
    /// already restored from the checkpoint; the journal is replayed through `M`).
    pub fn open_on(dir: &Path, media: impl FnOnce(Nand) -> Result<M>) -> Result<Flash<M>> {
        let sb_copies = persist::read_superblock_copies(dir)?;
        let mut sb = sb_copies.state;
        sb.geometry.validate()?;
        let ckpt_copies = persist::read_checkpoint_copies(dir)?;
        // The bad copy is rewritten from the good one before anything else changes; a device of an
        // older format is marked with this one before this build writes anything of its own.
        let older = sb.version < FORMAT_VERSION;
        sb.version = sb.version.max(FORMAT_VERSION);
        if !sb_copies.damaged.is_empty() || older {
            persist::write_superblock(dir, &sb)?;
        }
        if !ckpt_copies.damaged.is_empty() {
            persist::write_checkpoint(dir, &ckpt_copies.state)?;
        }
        let mended_copies: Vec<String> = sb_copies.damaged.into_iter().chain(ckpt_copies.damaged).collect();
        let ckpt = ckpt_copies.state;
        let scan = Journal::scan(dir, ckpt.generation)?;
        let journal = if scan.stale {
            Journal::create(dir, ckpt.generation)?
        } else {
            Journal::reopen(dir, scan.valid_len, scan.version)?
        };
        let mut nand = Nand::open(dir, sb.geometry)?;
        nand.restore(ckpt.blocks.iter().copied().collect());
        let mut ftl = Ftl::new(media(nand)?, journal);
        ftl.restore_map(&ckpt.map);
        let mut flash = Flash {
            dir: dir.to_path_buf(),
            sb,
            ftl,
            objects: ckpt.objects.into_iter().map(|o| (o.name.clone(), o)).collect(),
            txns: HashMap::new(),
            next_txn: ckpt.next_txn,
            array_generation: ckpt.array_generation,
            free: IntervalSet::new(),
            raw: IntervalSet::new(),
            generation: ckpt.generation,
            recovery: RecoveryReport {
                journal_records: scan.records.len() as u64,
                torn_journal_bytes: scan.torn_bytes,
                rolled_back: Vec::new(),
                mended_copies,
            },
        };
        for rec in &scan.records {
            flash.replay(rec)?;
        }
        flash.ftl.finish_recovery();
        // Object creations that never committed: trim what they wrote.
        let mut open: Vec<(TxnId, Txn)> = flash.txns.drain().collect();
        open.sort_by_key(|(id, _)| *id);
        for (id, txn) in open {
            for e in &txn.reserved {
                flash.ftl.trim(e.lpn, e.pages)?;
            }
            flash.ftl.journal.append(&Record::Abort { txn: id })?;
            flash.recovery.rolled_back.push(txn.name);
        }
        flash.rebuild_space();
        if !flash.recovery.rolled_back.is_empty() || flash.recovery.torn_journal_bytes > 0 {
            flash.ftl.sync()?;
        }
        if flash.ftl.journal.len() > CHECKPOINT_AFTER_BYTES {
            flash.checkpoint()?;
        }
        Ok(flash)
    }

    fn replay(&mut self, rec: &Record) -> Result<()> {
        let corrupt = |d: String| FlashError::Corrupt {
            what: "journal".into(),
            path: self.dir.join("journal"),
            detail: d,
        };
        match rec {
            Record::Begin { txn, name } => {
                self.txns.insert(*txn, Txn::new(name, "", BTreeMap::new()));
                self.next_txn = self.next_txn.max(txn + 1);
            }
            Record::Reserve { txn, lpn, count } => {
                let t = self
                    .txns
                    .get_mut(txn)
                    .ok_or_else(|| corrupt(format!("reserve for unknown transaction {txn}")))?;
                t.reserved.push(Extent { lpn: *lpn, pages: *count });
            }
            Record::Commit { txn, object } => {
                self.txns.remove(txn);
                self.next_txn = self.next_txn.max(txn + 1);
                self.objects.insert(object.name.clone(), object.clone());
            }
            Record::Abort { txn } => {
                self.txns.remove(txn);
            }
            Record::ArrayGeneration { generation } => self.array_generation = *generation,
            Record::Delete { name } => {
                let obj = self
                    .objects
                    .remove(name)
                    .ok_or_else(|| corrupt(format!("delete of unknown {name:?}")))?;
                for e in &obj.extents {
                    self.ftl.apply(&Record::Trim { lpn: e.lpn, count: e.pages })?;
                }
            }
            other => self.ftl.apply(other)?,
        }
        Ok(())
    }

    /// Recomputes free and raw logical space from the objects and the map.
    fn rebuild_space(&mut self) {
        let mut owned = IntervalSet::new();
        for o in self.objects.values() {
            for e in &o.extents {
                owned.insert(e.lpn, e.pages);
            }
        }
        for t in self.txns.values() {
            for e in &t.reserved {
                owned.insert(e.lpn, e.pages);
            }
        }
        let mut raw = IntervalSet::new();
        for (lpn, _, n) in self.ftl.map().runs() {
            raw.insert(lpn, n);
        }
        for (s, l) in owned.iter() {
            raw.remove(s, l);
        }
        let mut free = IntervalSet::new();
        free.insert(0, self.sb.geometry.logical_pages());
        for (s, l) in owned.iter().chain(raw.iter()) {
            free.remove(s, l);
        }
        self.free = free;
        self.raw = raw;
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn geometry(&self) -> &Geometry {
        &self.sb.geometry
    }

    /// The bytes the device was formatted to hold (its superblock's).
    pub fn capacity_bytes(&self) -> u64 {
        self.sb.capacity_bytes
    }

    pub fn page_size(&self) -> u32 {
        self.sb.geometry.page_size
    }

    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The FTL (read-only access for stats, tests and fsck).
    pub fn ftl(&self) -> &Ftl<M> {
        &self.ftl
    }

    // ------------------------------------------------------------------------------------------ objects

    /// Starts writing a new object. With `expected_size`, all its space is reserved now, so a device that
    /// cannot hold it fails before anything is written.
    pub fn create_object(
        &mut self,
        name: &str,
        kind: &str,
        attrs: BTreeMap<String, String>,
        expected_size: Option<u64>,
    ) -> Result<TxnId> {
        validate_name(name)?;
        if self.objects.contains_key(name) || self.txns.values().any(|t| t.name == name) {
            return Err(FlashError::AlreadyExists(name.to_string()));
        }
        let id = self.next_txn;
        self.next_txn += 1;
        self.ftl.journal.append(&Record::Begin { txn: id, name: name.to_string() })?;
        self.txns.insert(id, Txn::new(name, kind, attrs));
        if let Some(size) = expected_size {
            let pages = size.div_ceil(self.page_size() as u64);
            if let Err(e) = self.reserve(id, pages) {
                self.abort(id)?;
                return Err(e);
            }
        }
        Ok(id)
    }

    /// Reserves at least `pages` more logical pages for `txn`.
    fn reserve(&mut self, txn: TxnId, pages: u64) -> Result<()> {
        if pages > self.free.total() {
            return Err(FlashError::DeviceFull {
                needed_pages: pages,
                free_pages: self.free.total(),
                page_size: self.page_size(),
            });
        }
        let mut left = pages;
        while left > 0 {
            let (lpn, n) = self.free.take(left).expect("free space was checked");
            self.ftl.journal.append(&Record::Reserve { txn, lpn, count: n })?;
            self.txns
                .get_mut(&txn)
                .ok_or(FlashError::UnknownTxn(txn))?
                .reserved
                .push(Extent { lpn, pages: n });
            left -= n;
        }
        Ok(())
    }

    /// Appends bytes to an object being written.
    pub fn append(&mut self, txn: TxnId, mut data: &[u8]) -> Result<()> {
        let ps = self.page_size() as usize;
        let t = self.txns.get_mut(&txn).ok_or(FlashError::UnknownTxn(txn))?;
        t.size += data.len() as u64;
        if !t.tail.is_empty() {
            let take = (ps - t.tail.len()).min(data.len());
            t.tail.extend_from_slice(&data[..take]);
            data = &data[take..];
            if t.tail.len() == ps {
                let page = std::mem::take(&mut t.tail);
                self.write_pages(txn, &page)?;
            }
        }
        let whole = data.len() / ps * ps;
        if whole > 0 {
            self.write_pages(txn, &data[..whole])?;
        }
        if whole < data.len() {
            let t = self.txns.get_mut(&txn).ok_or(FlashError::UnknownTxn(txn))?;
            t.tail.extend_from_slice(&data[whole..]);
        }
        Ok(())
    }

    /// Writes whole pages at the transaction's next reserved logical pages, reserving more if needed.
    fn write_pages(&mut self, txn: TxnId, data: &[u8]) -> Result<()> {
        let ps = self.page_size() as u64;
        let pages = data.len() as u64 / ps;
        let t = self.txns.get(&txn).ok_or(FlashError::UnknownTxn(txn))?;
        let have = t.reserved_pages() - t.written_pages;
        if have < pages {
            let chunk = (RESERVE_CHUNK_BYTES / ps).max(self.geometry().pages_per_block as u64);
            let need = pages - have;
            // Room for the next writes too (fewer, longer extents), but no more than a share of what is
            // free: objects written side by side (a table's parts) must each still find their pages on a
            // nearly full device.
            let extra = chunk.saturating_sub(need).min(self.free.total().saturating_sub(need) / 8);
            self.reserve(txn, need + extra)?;
        }
        let t = self.txns.get(&txn).ok_or(FlashError::UnknownTxn(txn))?;
        let runs = namespace::runs(&t.reserved, t.written_pages, pages);
        let mut off = 0usize;
        for (lpn, n) in runs {
            let len = (n * ps) as usize;
            self.ftl.write(lpn, &data[off..off + len])?;
            off += len;
        }
        self.txns.get_mut(&txn).ok_or(FlashError::UnknownTxn(txn))?.written_pages += pages;
        Ok(())
    }

    /// Makes the object whole and visible: after this returns, it survives a crash; before, a crash
    /// leaves no trace of it.
    pub fn commit(&mut self, txn: TxnId) -> Result<ObjectMeta> {
        let ps = self.page_size() as usize;
        let t = self.txns.get_mut(&txn).ok_or(FlashError::UnknownTxn(txn))?;
        if !t.tail.is_empty() {
            let mut page = std::mem::take(&mut t.tail);
            page.resize(ps, 0);
            self.write_pages(txn, &page)?;
        }
        let t = self.txns.remove(&txn).ok_or(FlashError::UnknownTxn(txn))?;
        let extents = t.written_extents(t.written_pages);
        // Reserved pages past the data go back to free space.
        let mut skip = t.written_pages;
        for e in &t.reserved {
            let used = skip.min(e.pages);
            skip -= used;
            if used < e.pages {
                self.free.insert(e.lpn + used, e.pages - used);
            }
        }
        let object = ObjectMeta { name: t.name, kind: t.kind, size: t.size, extents, attrs: t.attrs, txn };
        // Data first, then the commit record: the object is never visible without its pages.
        self.ftl.nand.sync()?;
        self.ftl.journal.append(&Record::Commit { txn, object: object.clone() })?;
        self.ftl.journal.sync()?;
        self.objects.insert(object.name.clone(), object.clone());
        self.maybe_checkpoint()?;
        Ok(object)
    }

    /// Abandons an object being written: its pages are trimmed and its space freed.
    pub fn abort(&mut self, txn: TxnId) -> Result<()> {
        let t = self.txns.remove(&txn).ok_or(FlashError::UnknownTxn(txn))?;
        for e in &t.reserved {
            self.ftl.trim(e.lpn, e.pages)?;
            self.free.insert(e.lpn, e.pages);
        }
        self.ftl.journal.append(&Record::Abort { txn })?;
        self.ftl.journal.flush()?;
        self.ftl.reclaim_emptied()
    }

    /// Deletes an object and trims its pages.
    pub fn delete(&mut self, name: &str) -> Result<()> {
        let obj = self.objects.remove(name).ok_or_else(|| FlashError::NotFound(name.to_string()))?;
        // The delete record goes first: on replay it trims the extents itself.
        self.ftl.journal.append(&Record::Delete { name: name.to_string() })?;
        for e in &obj.extents {
            self.ftl.trim(e.lpn, e.pages)?;
            self.free.insert(e.lpn, e.pages);
        }
        self.ftl.journal.sync()?;
        self.ftl.reclaim_emptied()?;
        self.maybe_checkpoint()
    }

    /// Name of an object being written, and the bytes appended to it so far.
    pub fn pending_object(&self, txn: TxnId) -> Option<(&str, u64)> {
        self.txns.get(&txn).map(|t| (t.name.as_str(), t.size))
    }

    pub fn stat(&self, name: &str) -> Result<&ObjectMeta> {
        self.objects.get(name).ok_or_else(|| FlashError::NotFound(name.to_string()))
    }

    pub fn objects(&self) -> impl Iterator<Item = &ObjectMeta> {
        self.objects.values()
    }

    /// Reads `buf.len()` bytes of object `name` from byte `offset`.
    pub fn read(&self, name: &str, offset: u64, buf: &mut [u8]) -> Result<()> {
        let copy_in = |buf: &mut [u8], offset: u64| {
            let mut at = 0usize;
            self.read_with(name, offset, buf.len() as u64, |data| {
                insitu_kernels::arch::copy(&mut buf[at..at + data.len()], data);
                at += data.len();
                Ok(())
            })
        };
        // The whole pages inside the range go straight into `buf` (`Ftl::read`: a long run is read from
        // the image file, not its map); a partial page at either end is copied from the pages in place.
        // A short read (a gather's row) goes by `read_with` at once, without a second look-up of the
        // object, as does a range past the object or past any offset (refused there, naming the object).
        let ps = self.page_size() as u64;
        let Some((end, lo)) = offset.checked_add(buf.len() as u64).zip(offset.checked_next_multiple_of(ps))
        else {
            return copy_in(buf, offset);
        };
        let hi = end / ps * ps;
        if hi <= lo || (hi - lo) < 2 * ps {
            return copy_in(buf, offset);
        }
        let obj = self.stat(name)?;
        if end > obj.size {
            return copy_in(buf, offset);
        }
        let (head, rest) = buf.split_at_mut((lo - offset) as usize);
        let (middle, tail) = rest.split_at_mut((hi - lo) as usize);
        copy_in(head, offset)?;
        let mut at = 0usize;
        for (lpn, n) in obj.runs(lo / ps, (hi - lo) / ps) {
            let len = (n * ps) as usize;
            self.ftl.read(lpn, &mut middle[at..at + len])?;
            at += len;
        }
        copy_in(tail, hi)
    }

    /// Reads byte ranges of object `name`, each `(offset, buffer)` filling its buffer from `offset`, in
    /// the order given: the same reads as one [`Flash::read`] per range, with the object looked up once,
    /// and each short range's page asked of memory a few ranges ahead (a gather's rows lie at places
    /// that only the flash map knows, so a plain loop waits for each page in turn).
    pub fn read_ranges(&self, name: &str, ranges: &mut [(u64, &mut [u8])]) -> Result<()> {
        const AHEAD: usize = 8;
        let obj = self.stat(name)?;
        let ps = self.page_size() as u64;
        let ask = |(offset, buf): &(u64, &mut [u8])| {
            if let Some(ppn) = obj.lpn_of(offset / ps).and_then(|lpn| self.ftl.map().get(lpn)) {
                self.ftl.nand().prefetch(ppn, (offset % ps) as usize, buf.len());
            }
        };
        ranges.iter().take(AHEAD).for_each(ask);
        for i in 0..ranges.len() {
            if let Some(next) = ranges.get(i + AHEAD) {
                ask(next);
            }
            let (offset, dst) = &mut ranges[i];
            if dst.len() as u64 >= 2 * ps {
                self.read(name, *offset, dst)?;
                continue;
            }
            let mut pos = 0usize;
            self.read_object_with(obj, name, *offset, dst.len() as u64, |data| {
                insitu_kernels::arch::copy(&mut dst[pos..pos + data.len()], data);
                pos += data.len();
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Hands bytes `offset..offset + len` of object `name` to `f` in order, as slices of the flash pages
    /// themselves (checked against their checksums, no copy). How in-device programs scan objects.
    pub fn read_with(
        &self,
        name: &str,
        offset: u64,
        len: u64,
        f: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        self.read_object_with(self.stat(name)?, name, offset, len, f)
    }

    fn read_object_with(
        &self,
        obj: &ObjectMeta,
        name: &str,
        offset: u64,
        len: u64,
        mut f: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let end =
            offset.checked_add(len).filter(|e| *e <= obj.size).ok_or_else(|| FlashError::ReadPastEnd {
                name: name.to_string(),
                offset,
                end: offset.saturating_add(len),
                size: obj.size,
            })?;
        if len == 0 {
            return Ok(());
        }
        let ps = self.page_size() as u64;
        let first_page = offset / ps;
        let last_page = (end - 1) / ps;
        // Byte position (in the object) of the next byte the runs will deliver.
        let mut pos = first_page * ps;
        for (lpn, n) in obj.runs(first_page, last_page - first_page + 1) {
            self.ftl.read_with(lpn, n, |data| {
                let (lo, hi) = (pos.max(offset), (pos + data.len() as u64).min(end));
                if lo < hi {
                    f(&data[(lo - pos) as usize..(hi - pos) as usize])?;
                }
                pos += data.len() as u64;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Where each page of an object lives: `(object page index, physical page)`. In-device programs that
    /// read objects themselves use this (BlueDBM §4: the file system hands physical addresses to the
    /// in-store processors).
    pub fn physical_pages(&self, name: &str) -> Result<Vec<(u64, PhysicalPage)>> {
        let obj = self.stat(name)?;
        let geo = self.geometry();
        let mut out = Vec::with_capacity(obj.pages() as usize);
        for i in 0..obj.pages() {
            let lpn = obj.lpn_of(i).expect("index below pages()");
            if let Some(ppn) = self.ftl.map().get(lpn) {
                out.push((i, geo.physical(ppn)));
            }
        }
        Ok(out)
    }

    // --------------------------------------------------------------------------------------- block view

    fn check_lba_range(&self, lba: Lpn, pages: u64) -> Result<()> {
        let n = self.geometry().logical_pages();
        if lba.checked_add(pages).is_none_or(|e| e > n) {
            return Err(FlashError::LbaOutOfRange { start: lba, end: lba.saturating_add(pages), pages: n });
        }
        Ok(())
    }

    /// Refuses, naming the first such page and its owner, a range of logical pages `lba..lba + pages` of
    /// which an object holds any (pages neither free nor in the block view). A step per range of the two
    /// sets, not per page: firmware sets aside tens of thousands of pages at every open.
    fn check_unowned(&self, lba: Lpn, pages: u64) -> Result<()> {
        let (mut at, end) = (lba, lba + pages);
        while at < end {
            match self.raw.end_of_range_at(at).or_else(|| self.free.end_of_range_at(at)) {
                Some(next) => at = next,
                None => return Err(FlashError::LbaOwned { lba: at, owner: self.owner_of(at) }),
            }
        }
        Ok(())
    }

    fn owner_of(&self, lba: Lpn) -> String {
        let hit = |extents: &[Extent]| extents.iter().any(|e| lba >= e.lpn && lba < e.lpn + e.pages);
        self.objects
            .values()
            .find(|o| hit(&o.extents))
            .map(|o| o.name.clone())
            .or_else(|| {
                self.txns.values().find(|t| hit(&t.reserved)).map(|t| format!("{} (being written)", t.name))
            })
            .unwrap_or_else(|| "?".into())
    }

    /// Reads logical blocks (one per page) for host block I/O. Unwritten blocks read as zeros.
    pub fn lba_read(&self, lba: Lpn, buf: &mut [u8]) -> Result<()> {
        let ps = self.page_size() as usize;
        if !buf.len().is_multiple_of(ps) {
            return Err(FlashError::NandViolation(format!("block reads are in whole {ps}-byte blocks")));
        }
        self.check_lba_range(lba, (buf.len() / ps) as u64)?;
        self.ftl.read(lba, buf)
    }

    /// Reads logical pages `lba..lba + pages` as [`Flash::lba_read`] does (checked, counted), handing them
    /// to `f` in order and in place instead of copying them: runs of pages that lie together, and a page
    /// of zeros for each unmapped one.
    pub fn lba_read_with(&self, lba: Lpn, pages: u64, f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        self.check_lba_range(lba, pages)?;
        self.ftl.read_with(lba, pages, f)
    }

    /// The physical page of each logical page `lba..lba + pages` (none: unmapped), to read them in place
    /// later ([`Flash::in_place`]).
    pub fn lba_locations(&self, lba: Lpn, pages: u64) -> Result<Vec<Option<Ppn>>> {
        self.check_lba_range(lba, pages)?;
        Ok((lba..lba + pages).map(|l| self.ftl.map().get(l)).collect())
    }

    /// The media's pages in place, where it keeps them in memory (see [`RawFlash::in_place`]).
    pub fn in_place(&self) -> Option<crate::raw::InPlace<'_>> {
        self.ftl.nand().in_place()
    }

    /// Writes logical blocks that belong to no object. Like a disk write without FLUSH: it survives the
    /// process being killed, and [`Flash::sync`] makes it durable.
    pub fn lba_write(&mut self, lba: Lpn, data: &[u8]) -> Result<()> {
        let ps = self.page_size() as usize;
        if !data.len().is_multiple_of(ps) {
            return Err(FlashError::NandViolation(format!("block writes are in whole {ps}-byte blocks")));
        }
        let pages = (data.len() / ps) as u64;
        self.check_lba_range(lba, pages)?;
        self.check_unowned(lba, pages)?;
        let moved = self.free.remove(lba, pages);
        self.raw.remove(lba, pages);
        self.raw.insert(lba, pages);
        debug_assert!(moved <= pages);
        self.ftl.write(lba, data)?;
        self.ftl.journal.flush()
    }

    /// Takes logical pages `lba..lba + pages` out of the object allocator's free space: they stay readable
    /// and writable through the block view only. Resident firmware keeps its ranges this way (a range of
    /// records being indexed, its own metadata area). Not persisted: the owner sets it aside again after
    /// every open, before any object is created. Fails, naming the owner, if an object holds any of them.
    pub fn set_aside(&mut self, lba: Lpn, pages: u64) -> Result<()> {
        self.check_lba_range(lba, pages)?;
        self.check_unowned(lba, pages)?;
        self.free.remove(lba, pages);
        self.raw.remove(lba, pages);
        self.raw.insert(lba, pages);
        Ok(())
    }

    /// Whether logical page `lba` holds data (unwritten and trimmed pages read as zeros).
    pub fn is_mapped(&self, lba: Lpn) -> bool {
        self.ftl.map().get(lba).is_some()
    }

    /// Trims logical blocks written through the block view.
    pub fn lba_trim(&mut self, lba: Lpn, pages: u64) -> Result<()> {
        self.check_lba_range(lba, pages)?;
        self.check_unowned(lba, pages)?;
        self.raw.remove(lba, pages);
        self.free.remove(lba, pages);
        self.free.insert(lba, pages);
        self.ftl.trim(lba, pages)?;
        self.ftl.journal.flush()
    }

    // -------------------------------------------------------------------------------------- maintenance

    /// Makes everything written so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.ftl.sync()?;
        // What overwrites and trims of the block view emptied is erased now that it is durable (cheaply:
        // only the journal has anything to sync). Not on a short host disk, where the erase records might
        // not fit and a sync must not fail for them (the trims there erase at once).
        if !self.ftl.host_short() {
            self.ftl.reclaim_emptied()?;
        }
        Ok(())
    }

    fn maybe_checkpoint(&mut self) -> Result<()> {
        if self.txns.is_empty() && self.ftl.journal.len() > CHECKPOINT_AFTER_BYTES {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// The transaction id the next object creation will get: every object this device holds has a
    /// smaller one.
    pub fn next_txn(&self) -> TxnId {
        self.next_txn
    }

    /// The generation of the array's catalog this device last recorded.
    pub fn array_generation(&self) -> u64 {
        self.array_generation
    }

    /// Records, durably, that the array's catalog reached `generation`: the host compares the two at
    /// open to tell a catalog or a device folder restored from an older copy.
    pub fn set_array_generation(&mut self, generation: u64) -> Result<()> {
        self.ftl.journal.append(&Record::ArrayGeneration { generation })?;
        self.ftl.journal.sync()?;
        self.array_generation = generation;
        Ok(())
    }

    /// Folds the journal into a new checkpoint. Only between object writes.
    pub fn checkpoint(&mut self) -> Result<()> {
        if !self.txns.is_empty() {
            return Ok(());
        }
        self.ftl.sync()?;
        let st = CheckpointState {
            generation: self.generation + 1,
            next_txn: self.next_txn,
            array_generation: self.array_generation,
            blocks: self.ftl.block_states(),
            map: self.ftl.map().runs(),
            objects: self.objects.values().cloned().collect(),
        };
        persist::write_checkpoint(&self.dir, &st)?;
        self.generation += 1;
        self.ftl.journal = Journal::create(&self.dir, self.generation)?;
        Ok(())
    }

    /// Writes a checkpoint if the journal holds anything, so the next open is quick.
    pub fn close(mut self) -> Result<()> {
        self.checkpoint_if_dirty()
    }

    /// The checkpoint at close: as [`Flash::checkpoint_if_dirty`], except that a host file system too
    /// full to take it is not an error. The journal, synced, already holds every change; the next open
    /// replays it (and checkpoints then, if there is room). So a full disk does not make every command
    /// fail at its end, reads included, nor keep the user from removing what would free room.
    pub fn checkpoint_at_close(&mut self) -> Result<()> {
        match self.checkpoint_if_dirty() {
            Err(e) if e.is_host_disk_full() => Ok(()),
            r => r,
        }
    }

    /// Checkpoints only if something was journaled since the last checkpoint.
    pub fn checkpoint_if_dirty(&mut self) -> Result<()> {
        if self.ftl.journal.is_empty() {
            return Ok(());
        }
        self.checkpoint()
    }

    pub fn stats(&self) -> FlashStats {
        let object_pages = self.objects.values().map(|o| o.pages()).sum();
        let ftl = self.ftl.stats();
        FlashStats {
            geometry: self.sb.geometry,
            capacity_bytes: self.sb.capacity_bytes,
            logical_pages: self.geometry().logical_pages(),
            object_pages,
            raw_pages: self.raw.total(),
            free_pages: self.free.total(),
            mapped_pages: self.ftl.map().mapped(),
            objects: self.objects.len() as u64,
            free_blocks: self.ftl.free_blocks(),
            nand: self.ftl.nand().stats(),
            ftl,
            write_amplification: ftl.write_amplification(),
            wear: self.ftl.wear(),
        }
    }

    /// Checks FTL invariants, the namespace against the map, and scrubs every mapped page against its
    /// spare-area checksum. Reports every problem found; never stops at the first.
    pub fn fsck(&self) -> FsckReport {
        // Every page's bytes are checked again, not taken as checked by an earlier read.
        self.ftl.nand().forget_verified();
        let mut problems = self.ftl.check_invariants();
        let logical = self.geometry().logical_pages();
        let mut owned = IntervalSet::new();
        let ps = self.page_size() as u64;
        for o in self.objects.values() {
            if o.pages() != o.size.div_ceil(ps) {
                problems.push(format!("object {:?}: {} bytes but {} pages", o.name, o.size, o.pages()));
            }
            for e in &o.extents {
                if e.lpn + e.pages > logical {
                    problems.push(format!("object {:?}: extent past the logical capacity", o.name));
                } else if owned.overlaps(e.lpn, e.pages) {
                    problems.push(format!(
                        "object {:?}: extent {}+{} overlaps another object",
                        o.name, e.lpn, e.pages
                    ));
                } else {
                    owned.insert(e.lpn, e.pages);
                }
            }
            // One line per object, not per page: how many are lost and the first.
            let lost: Vec<Lpn> = o
                .extents
                .iter()
                .flat_map(|e| e.lpn..e.lpn + e.pages)
                .filter(|l| self.ftl.map().get(*l).is_none())
                .collect();
            if let Some(first) = lost.first() {
                problems.push(format!(
                    "object {:?}: {} logical page(s) not mapped (data lost), the first {first}",
                    o.name,
                    lost.len()
                ));
            }
        }
        // Damaged pages, counted by what owns them (an object, or the block view), with the first error.
        let mut owners: Vec<(Lpn, u64, &str)> = self
            .objects
            .values()
            .flat_map(|o| o.extents.iter().map(|e| (e.lpn, e.pages, o.name.as_str())))
            .collect();
        owners.sort_unstable();
        let owner_of = |lpn: Lpn| -> String {
            let i = owners.partition_point(|(start, _, _)| *start <= lpn);
            match i.checked_sub(1).map(|i| owners[i]) {
                Some((start, pages, name)) if lpn < start + pages => format!("object {name:?}"),
                _ => "the block view (LBAs no object owns)".to_string(),
            }
        };
        let mut damaged: BTreeMap<String, (u64, String)> = BTreeMap::new();
        let mut scrubbed = 0u64;
        let geo = *self.geometry();
        let mut buf = vec![0u8; geo.page_size as usize];
        for (lpn, ppn, n) in self.ftl.map().runs() {
            for i in 0..n {
                match self.ftl.nand().read(ppn + i, &[lpn + i], &mut buf) {
                    Ok(()) => scrubbed += 1,
                    Err(e) => {
                        let d = damaged.entry(owner_of(lpn + i)).or_insert((0, e.to_string()));
                        d.0 += 1;
                    }
                }
            }
        }
        for (owner, (count, first)) in damaged {
            problems.push(format!("{owner}: {count} damaged page(s); the first: {first}"));
        }
        FsckReport {
            problems,
            objects: self.objects.len() as u64,
            pages_scrubbed: scrubbed,
            notes: Vec::new(),
        }
    }
}
