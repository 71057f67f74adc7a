//! One index of the Self-Sort firmware: its configuration, its B+tree in device memory (§III-C), which
//! records of its range the tree holds, how far sort-on-command has come, and the state of reads in key
//! order (a cache of the range, or ActiveSort's merge).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::Arc;

use insitu_kernels::btree::BTree;
use insitu_kernels::indices::SortedIndices;

use crate::error::{DeviceError, Result};
use crate::firmware::resident::Resident;
use crate::firmware::{work, FirmwareContext};
use crate::memory::MemReservation;
use crate::protocol::{IndexConfig, IndexInfo, IndexKind};

/// The tree's device memory grows in steps of this many nodes (fewer updates of the shared budget).
const GROW_NODES: u64 = 64;

/// A request Self-Sort refuses: a bad argument, or one the firmware's state does not allow.
pub(crate) fn refuse(detail: impl Into<String>) -> DeviceError {
    DeviceError::FirmwareRefused { firmware: "self-sort".into(), detail: detail.into() }
}

/// A failure of Self-Sort itself (its memory, its saved state).
pub(crate) fn fail(detail: impl Into<String>) -> DeviceError {
    DeviceError::Firmware { firmware: "self-sort".into(), detail: detail.into() }
}

/// The bytes of an index's range, in device memory.
#[derive(Debug)]
pub(crate) struct RangeCache {
    pub data: Resident,
    /// Accounts for the bytes in device memory.
    pub memory: MemReservation,
}

impl RangeCache {
    pub fn bytes(&self) -> u64 {
        self.memory.bytes()
    }
}

/// The merge's state: the next rank it serves, the head of every run, and the pages of each run it has
/// read (a window from the run's current record).
#[derive(Debug)]
pub(crate) struct Merge {
    pub next_rank: u64,
    pub heap: BinaryHeap<Reverse<(Vec<u8>, usize, u64)>>,
    pub windows: Vec<Window>,
    /// The record of rank `next_rank - 1`: a read whose pages ended inside it asks for it again, and the
    /// merge goes on from there instead of starting over.
    pub last: Vec<u8>,
    /// Accounts for the bytes in device memory.
    pub memory: MemReservation,
}

/// Bytes `start..start + data.len()` of a run (run-relative).
#[derive(Debug, Default)]
pub(crate) struct Window {
    pub start: u64,
    pub data: Vec<u8>,
}

/// Entries of a saved image, in key order, that an index's tree is built from on first use (§III-C: the
/// index is loaded at open, but its nodes are built only when something reads or changes it, so a command
/// that drops or replaces the index, or never touches it, does not pay for them). The bytes are the
/// image's, shared by the indexes it holds.
#[derive(Debug)]
pub(crate) struct Saved {
    pub bytes: Arc<Vec<u8>>,
    pub keys: Range<usize>,
    pub ids: Range<usize>,
    pub id_width: usize,
}

impl Saved {
    fn entries(&self) -> u64 {
        (self.ids.len() / self.id_width) as u64
    }

    fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        insitu_kernels::le::uints(&self.bytes[self.ids.clone()], self.id_width)
    }
}

#[derive(Debug)]
pub(crate) struct Index {
    pub config: IndexConfig,
    /// The B+tree; empty while `saved` holds the entries it is to be built from.
    tree: BTree,
    saved: Option<Saved>,
    /// Bit `i`: record `i` is in the tree.
    indexed: Vec<u64>,
    /// Sort-on-command: the first `generated` records have been generated.
    pub generated: u64,
    memory: MemReservation,
    pub notes: Vec<String>,
    pub cache: Option<RangeCache>,
    pub merge: Option<Merge>,
    /// Entries a leaf of a restored tree holds (see [`Index::restore`]).
    fill: usize,
}

impl Index {
    pub fn new(config: IndexConfig, fw: &FirmwareContext<'_>) -> Result<Index> {
        let tree = BTree::new(config.key_size as usize, config.fanout as usize);
        let memory = fw.reserve(0)?;
        let mut ix = Index {
            config,
            tree,
            saved: None,
            indexed: Vec::new(),
            generated: 0,
            memory,
            notes: Vec::new(),
            cache: None,
            merge: None,
            fill: 1,
        };
        ix.fill = ix.roomy_fill();
        ix.resize_bitmap(fw)?;
        Ok(ix)
    }

    /// Whether the firmware copies record bytes itself to serve them (records that are not whole,
    /// aligned pages; whole pages go from flash to the host by DMA).
    pub fn copies_records(&self, page_size: u64) -> bool {
        self.config.record_size as u64 != page_size
    }

    pub fn is_tree(&self) -> bool {
        self.config.kind == IndexKind::Tree
    }

    pub fn is_indexed(&self, rid: u64) -> bool {
        self.indexed.get((rid / 64) as usize).is_some_and(|w| w >> (rid % 64) & 1 == 1)
    }

    fn set_indexed(&mut self, rid: u64, on: bool) {
        let w = &mut self.indexed[(rid / 64) as usize];
        if on {
            *w |= 1 << (rid % 64);
        } else {
            *w &= !(1 << (rid % 64));
        }
    }

    /// Device memory the index needs now: its bitmap and its nodes in the paper's layout.
    fn needed_bytes(&self) -> u64 {
        self.indexed.len() as u64 * 8 + self.tree_footprint()
    }

    pub fn memory_bytes(&self) -> u64 {
        self.needed_bytes()
            + self.cache.as_ref().map_or(0, RangeCache::bytes)
            + self.merge.as_ref().map_or(0, |m| m.memory.bytes())
    }

    /// Sizes the bitmap for the configured records (accounted in device memory).
    fn resize_bitmap(&mut self, fw: &FirmwareContext<'_>) -> Result<()> {
        let words = self.config.records.div_ceil(64) as usize;
        let more = (words as u64 * 8).saturating_sub(self.indexed.len() as u64 * 8);
        if more > 0 {
            self.grow(fw, more, "the record bitmap")?;
        }
        self.indexed.resize(words, 0);
        Ok(())
    }

    /// Sets the number of records of the range, keeping the records indexed below it.
    pub fn resize(&mut self, fw: &FirmwareContext<'_>, records: u64) -> Result<()> {
        if records < self.config.records {
            let tree = self.tree_mut();
            let dropped: Vec<(Vec<u8>, u64)> =
                tree.iter_from(0).filter(|(_, id)| *id >= records).map(|(k, id)| (k.to_vec(), id)).collect();
            for (k, id) in dropped {
                tree.remove(&k, id);
            }
            self.generated = self.generated.min(records);
        }
        self.config.records = records;
        self.resize_bitmap(fw)?;
        let words = records.div_ceil(64) as usize;
        if let Some(last) = self.indexed.get_mut(words.saturating_sub(1)) {
            if !records.is_multiple_of(64) {
                *last &= (1u64 << (records % 64)) - 1;
            }
        }
        self.cache = None;
        self.merge = None;
        Ok(())
    }

    fn grow(&mut self, fw: &FirmwareContext<'_>, more: u64, what: &str) -> Result<()> {
        self.memory.grow(more).map_err(|_| {
            let p = fw.profile();
            let held = p.firmware_memory_bytes(fw.logical_pages());
            fail(format!(
                "index {}: device memory exhausted by {what} after {} records: {more} more bytes needed, \
                 {} of {} free ({} held by the FTL map and I/O buffers, {} by this index); the records \
                 stay stored and readable, not indexed",
                self.config.id,
                self.entries(),
                fw.memory_available(),
                fw.memory_capacity(),
                held,
                self.memory.bytes(),
            ))
        })
    }

    /// Bytes of device memory the index takes at a time as its tree grows.
    fn grow_step(&self) -> u64 {
        GROW_NODES * insitu_kernels::btree::node_bytes(self.tree.key_size(), self.tree.fanout(), true)
    }

    /// Inserts record `rid` with `key`, the next of [`Index::insert_batch`]'s entries in key order. Device
    /// memory for the nodes an insert may add is checked first: when it is exhausted, nothing changes and
    /// the error says so.
    fn insert(&mut self, fw: &FirmwareContext<'_>, key: &[u8], rid: u64) -> Result<()> {
        self.build();
        let need = self.needed_bytes() + self.tree.growth_bound_bytes(1);
        if need > self.memory.bytes() {
            let want = (need - self.memory.bytes()).max(self.grow_step());
            if self.grow(fw, want, "the B+tree").is_err() {
                self.grow(fw, need - self.memory.bytes(), "the B+tree")?;
            }
        }
        if self.tree.insert(key, rid) {
            self.set_indexed(rid, true);
        }
        Ok(())
    }

    /// Inserts records `rids` with their keys (`keys`: one after another, `key_size` bytes each), as
    /// many [`Index::insert`]s. The emulator inserts a batch (a generate chunk, the records a write
    /// completes) in key order rather than record order: the same entries, but the inserts then visit
    /// the leaves in order, which the host's caches reward (about twice as fast for large trees). The
    /// firmware modeled inserts them one by one as they come, so the sort is not counted as its work;
    /// the inserts' work is (it differs from record order's by about 1%). A large batch is inserted by two
    /// threads ([`BTree::insert_sorted`]: the same tree and work). Stops at the first failure (device
    /// memory), the records before it inserted.
    pub fn insert_batch(&mut self, fw: &FirmwareContext<'_>, keys: &[u8], rids: &[u64]) -> Result<()> {
        let ks = self.config.key_size as usize;
        debug_assert_eq!(keys.len(), rids.len() * ks);
        let key = |i: usize| &keys[i * ks..(i + 1) * ks];
        // Sorted by the first 8 key bytes (a radix sort), then each run of equal first words by the whole
        // key and the record: random keys rarely share 8 bytes, keys from a small alphabet sort their runs.
        let first: Vec<u64> = (0..rids.len())
            .map(|i| {
                let mut w = [0u8; 8];
                let k = key(i);
                let n = k.len().min(8);
                w[..n].copy_from_slice(&k[..n]);
                u64::from_be_bytes(w)
            })
            .collect();
        let mut order: Vec<(u64, u32)> = match insitu_kernels::sort::argsort_fast(&first, 0) {
            SortedIndices::Wide(pairs) => pairs,
            SortedIndices::Narrow(_) => unreachable!("64-bit keys sort into pairs"),
        };
        for run in order.chunk_by_mut(|a, b| a.0 == b.0).filter(|r| r.len() > 1) {
            run.sort_unstable_by(|a, b| {
                let (i, j) = (a.1 as usize, b.1 as usize);
                key(i).cmp(key(j)).then(rids[i].cmp(&rids[j]))
            });
        }
        let order: Vec<(u64, u32)> = order.into_iter().map(|(_, i)| (rids[i as usize], i)).collect();
        // All but the last at once, on two threads, when device memory has room for the most they can
        // add: then no insert of them would have failed, and the memory they take is what inserts one
        // by one would have taken (below).
        if let Some(((rid, i), most)) = order.split_last() {
            self.build();
            // The most the batch can add, then room for one more insert at the tallest the tree can be
            // and a step's rounding: what the memory below may grow to.
            let inserts = most.len() as u64;
            let room = self.tree.growth_bound_bytes(1)
                + self.tree.new_levels_bound(inserts)
                    * insitu_kernels::btree::node_bytes(self.tree.key_size(), self.tree.fanout(), true);
            let bound = self.tree.batch_growth_bound_bytes(inserts) + room + self.grow_step();
            if most.len() > 1 && self.needed_bytes() + bound <= self.memory.bytes() + fw.memory_available() {
                let entries: Vec<(&[u8], u64)> =
                    most.iter().map(|&(rid, i)| (key(i as usize), rid)).collect();
                let new = self.tree.insert_sorted(&entries);
                for (&(_, rid), new) in entries.iter().zip(new) {
                    if new {
                        self.set_indexed(rid, true);
                    }
                }
                // One by one, memory grows a step whenever the tree with room for one more insert needs
                // more than the index holds, checked before each insert; what the tree needs only grows,
                // so the check before the last insert decides how many steps.
                // (Only memory another command took meanwhile can make a step fail: then, as an insert
                // does, the least that is needed, and an error if even that is gone.)
                while self.needed_bytes() + self.tree.growth_bound_bytes(1) > self.memory.bytes() {
                    if self.grow(fw, self.grow_step(), "the B+tree").is_err() {
                        let short =
                            self.needed_bytes() + self.tree.growth_bound_bytes(1) - self.memory.bytes();
                        self.grow(fw, short, "the B+tree")?;
                    }
                }
                return self.insert(fw, key(*i as usize), *rid);
            }
        }
        for (rid, i) in order {
            self.insert(fw, key(i as usize), rid)?;
        }
        Ok(())
    }

    /// Removes record `rid`, whose key was `key`.
    pub fn remove(&mut self, key: &[u8], rid: u64) {
        if self.tree_mut().remove(key, rid) {
            self.set_indexed(rid, false);
        }
    }

    /// Forgets every entry (a rebuild starts here).
    pub fn clear(&mut self) {
        self.tree = BTree::new(self.config.key_size as usize, self.config.fanout as usize);
        self.saved = None;
        self.indexed.iter_mut().for_each(|w| *w = 0);
        self.cache = None;
        self.merge = None;
    }

    /// Replaces the tree by the entries of a saved image (in key order), built on first use: the records
    /// they name are marked indexed and the device memory of the tree they make is taken now.
    pub fn restore(&mut self, fw: &FirmwareContext<'_>, saved: Saved) -> Result<()> {
        let ks = self.config.key_size as usize;
        let n = saved.entries();
        let id = self.config.id;
        let misfit = move || fail(format!("index {id}: its saved image does not fit its configuration"));
        if !saved.ids.len().is_multiple_of(saved.id_width) || saved.keys.len() as u64 != n * ks as u64 {
            return Err(misfit());
        }
        // Leaves two-thirds full, or full when that is all the memory allows: an index built up to the
        // device's memory by inserts in key order has fuller leaves than two-thirds, and must load again
        // (it did not, and lost its records at every open).
        let held = self.memory.bytes();
        let need = |fill: usize| {
            let (_, leaves, internals) = BTree::bulk_load_shape(self.config.fanout as usize, fill, n);
            self.footprint_of(leaves, internals) + self.indexed.len() as u64 * 8
        };
        let (roomy, full) = (self.roomy_fill(), self.config.fanout as usize);
        let fill = if need(roomy) <= held + fw.memory_available() { roomy } else { full };
        if need(fill) > held {
            self.grow(fw, need(fill) - held, "the restored B+tree")?;
        }
        self.fill = fill;
        self.clear();
        // The records named are marked as they are checked (one pass over the ids), and all unmarked
        // again, the memory given back, if one lies past the range.
        let records = self.config.records;
        let mut past = false;
        for id in saved.ids() {
            past |= id >= records;
            if !past {
                self.set_indexed(id, true);
            }
        }
        if past {
            self.clear();
            self.memory.shrink_to(held);
            return Err(misfit());
        }
        self.saved = Some(saved);
        Ok(())
    }

    /// Leaves of a restored tree are two-thirds full: the fill random inserts leave, so new inserts do not
    /// split every leaf. (Full, when memory allows no more: [`Index::restore`].)
    fn roomy_fill(&self) -> usize {
        (self.config.fanout as usize * 2 / 3).max(1)
    }

    fn fill(&self) -> usize {
        self.fill
    }

    fn footprint_of(&self, leaves: u64, internals: u64) -> u64 {
        let (ks, f) = (self.config.key_size as usize, self.config.fanout as usize);
        leaves * insitu_kernels::btree::node_bytes(ks, f, false)
            + internals * insitu_kernels::btree::node_bytes(ks, f, true)
    }

    /// Entries in the index (built or not).
    pub fn entries(&self) -> u64 {
        self.saved.as_ref().map_or(self.tree.len(), Saved::entries)
    }

    /// `(height, leaves, internal nodes)` of the tree, built or not.
    fn shape(&self) -> (u32, u64, u64) {
        match &self.saved {
            Some(s) => BTree::bulk_load_shape(self.config.fanout as usize, self.fill(), s.entries()),
            None => {
                let (l, i) = self.tree.nodes();
                (self.tree.height(), l, i)
            }
        }
    }

    /// Bytes of the tree's nodes in the paper's layout, built or not.
    fn tree_footprint(&self) -> u64 {
        let (_, l, i) = self.shape();
        self.footprint_of(l, i)
    }

    /// Builds the tree from the saved entries, if it waits for that.
    fn build(&mut self) {
        if let Some(s) = self.saved.take() {
            let ks = self.config.key_size as usize;
            let keys = s.bytes[s.keys.clone()].chunks(ks);
            self.tree = BTree::bulk_load(ks, self.config.fanout as usize, self.fill(), keys.zip(s.ids()));
        }
    }

    /// The tree, built first if it was restored and not yet used.
    pub fn tree(&mut self) -> &BTree {
        self.build();
        &self.tree
    }

    fn tree_mut(&mut self) -> &mut BTree {
        self.build();
        &mut self.tree
    }

    /// The entries the index was restored from, while its tree is not built.
    pub fn saved(&self) -> Option<&Saved> {
        self.saved.as_ref()
    }

    /// The tree of an index whose tree is built ([`Index::tree`] builds it).
    ///
    /// # Panics
    /// If it is not built yet.
    pub fn built_tree(&self) -> &BTree {
        assert!(self.saved.is_none(), "index {}: its tree is not built", self.config.id);
        &self.tree
    }

    /// Every record of the range is in the index (so reads in key order can be served).
    pub fn complete(&self) -> bool {
        !self.is_tree() || self.entries() == self.config.records
    }

    /// Records of the range that are not in the index (the first few).
    pub fn missing(&self, limit: usize) -> Vec<u64> {
        (0..self.config.records).filter(|r| !self.is_indexed(*r)).take(limit).collect()
    }

    /// Why reads in key order cannot be served yet.
    pub fn incomplete_error(&self) -> DeviceError {
        let missing = self.missing(5);
        let how = if self.config.sort_on_write {
            "sort-on-write indexes a record once all its bytes are written"
        } else {
            "run generate to index them"
        };
        refuse(format!(
            "index {} holds {} of its {} records (not indexed: {}{}): {how}",
            self.config.id,
            self.entries(),
            self.config.records,
            missing.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
            if (self.config.records - self.entries()) as usize > missing.len() { ", ..." } else { "" },
        ))
    }

    /// Moves the tree's counted work to the device's meters.
    pub fn charge_work(&self, fw: &FirmwareContext<'_>) {
        let w = self.tree.take_work();
        fw.add_work(&[
            (work::INDEX_VISIT, w.visits),
            (work::INDEX_COMPARE, w.compares),
            (work::INDEX_MOVE_BYTE, w.moved_bytes),
        ]);
    }

    pub fn info(&self) -> IndexInfo {
        let (height, leaves, internal_nodes) = self.shape();
        IndexInfo {
            config: self.config.clone(),
            indexed: if self.is_tree() { self.entries() } else { self.config.records },
            generated: self.generated,
            complete: self.complete(),
            height: if self.is_tree() { height } else { 0 },
            leaves: if self.is_tree() { leaves } else { 0 },
            internal_nodes,
            memory_bytes: self.memory_bytes(),
            notes: self.notes.clone(),
        }
    }
}
