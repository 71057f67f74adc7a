//! One index of the Self-Sort firmware: its configuration, its B+tree in device memory (§III-C), which
//! records of its range the tree holds, how far sort-on-command has come, and the state of reads in key
//! order (a cache of the range, or ActiveSort's merge).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use insitu_kernels::btree::BTree;

use crate::error::{DeviceError, Result};
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
    pub data: Vec<u8>,
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
    /// Accounts for the bytes in device memory.
    pub memory: MemReservation,
}

/// Bytes `start..start + data.len()` of a run (run-relative).
#[derive(Debug, Default)]
pub(crate) struct Window {
    pub start: u64,
    pub data: Vec<u8>,
}

#[derive(Debug)]
pub(crate) struct Index {
    pub config: IndexConfig,
    pub tree: BTree,
    /// Bit `i`: record `i` is in the tree.
    indexed: Vec<u64>,
    /// Sort-on-command: the first `generated` records have been generated.
    pub generated: u64,
    memory: MemReservation,
    pub notes: Vec<String>,
    pub cache: Option<RangeCache>,
    pub merge: Option<Merge>,
}

impl Index {
    pub fn new(config: IndexConfig, fw: &FirmwareContext<'_>) -> Result<Index> {
        let tree = BTree::new(config.key_size as usize, config.fanout as usize);
        let memory = fw.reserve(0)?;
        let mut ix = Index {
            config,
            tree,
            indexed: Vec::new(),
            generated: 0,
            memory,
            notes: Vec::new(),
            cache: None,
            merge: None,
        };
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
        self.indexed.len() as u64 * 8 + self.tree.footprint_bytes()
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
            let dropped: Vec<(Vec<u8>, u64)> = self
                .tree
                .iter_from(0)
                .filter(|(_, id)| *id >= records)
                .map(|(k, id)| (k.to_vec(), id))
                .collect();
            for (k, id) in dropped {
                self.tree.remove(&k, id);
            }
            self.generated = self.generated.min(records);
        }
        self.config.records = records;
        self.resize_bitmap(fw)?;
        let words = records.div_ceil(64) as usize;
        if let Some(last) = self.indexed.get_mut(words.saturating_sub(1)) {
            if records % 64 != 0 {
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
                self.tree.len(),
                fw.memory_available(),
                fw.memory_capacity(),
                held,
                self.memory.bytes(),
            ))
        })
    }

    /// Inserts record `rid` with `key`, the next of [`Index::insert_batch`]'s entries in key order. Device
    /// memory for the nodes an insert may add is checked first: when it is exhausted, nothing changes and
    /// the error says so.
    fn insert(&mut self, fw: &FirmwareContext<'_>, key: &[u8], rid: u64) -> Result<()> {
        let need = self.needed_bytes() + self.tree.growth_bound_bytes(1);
        if need > self.memory.bytes() {
            let step = GROW_NODES
                * insitu_kernels::btree::node_bytes(self.tree.key_size(), self.tree.fanout(), true);
            let want = (need - self.memory.bytes()).max(step);
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
    /// the inserts' work is (it differs from record order's by about 1%). Stops at the first failure
    /// (device memory), the records before it inserted.
    pub fn insert_batch(&mut self, fw: &FirmwareContext<'_>, keys: &[u8], rids: &[u64]) -> Result<()> {
        let ks = self.config.key_size as usize;
        debug_assert_eq!(keys.len(), rids.len() * ks);
        let key = |i: usize| &keys[i * ks..(i + 1) * ks];
        // Sorted by the first 16 key bytes as integers, then the rest of the key, then the record.
        let prefix = |k: &[u8]| {
            let mut b = [0u8; 16];
            let n = k.len().min(16);
            b[..n].copy_from_slice(&k[..n]);
            u128::from_be_bytes(b)
        };
        let mut order: Vec<(u128, u64, u32)> =
            (0..rids.len()).map(|i| (prefix(key(i)), rids[i], i as u32)).collect();
        if ks <= 16 {
            order.sort_unstable();
        } else {
            order.sort_unstable_by(|a, b| {
                a.0.cmp(&b.0).then_with(|| key(a.2 as usize).cmp(key(b.2 as usize))).then(a.1.cmp(&b.1))
            });
        }
        for (_, rid, i) in order {
            self.insert(fw, key(i as usize), rid)?;
        }
        Ok(())
    }

    /// Removes record `rid`, whose key was `key`.
    pub fn remove(&mut self, key: &[u8], rid: u64) {
        if self.tree.remove(key, rid) {
            self.set_indexed(rid, false);
        }
    }

    /// Forgets every entry (a rebuild starts here).
    pub fn clear(&mut self) {
        self.tree = BTree::new(self.config.key_size as usize, self.config.fanout as usize);
        self.indexed.iter_mut().for_each(|w| *w = 0);
        self.cache = None;
        self.merge = None;
    }

    /// Replaces the tree by one restored from saved entries in key order: `keys` one after another, `ids`
    /// 8 bytes each, little-endian (a saved image's).
    pub fn restore(&mut self, fw: &FirmwareContext<'_>, keys: &[u8], id_bytes: &[u8]) -> Result<()> {
        let ks = self.config.key_size as usize;
        let n = id_bytes.len() / 8;
        let ids = || id_bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        if n * 8 != id_bytes.len() || keys.len() != n * ks || ids().any(|id| id >= self.config.records) {
            return Err(fail(format!(
                "index {}: its saved image does not fit its configuration",
                self.config.id
            )));
        }
        // Leaves two-thirds full: the fill random inserts leave, so new inserts do not split every leaf.
        let fill = (self.config.fanout as usize * 2 / 3).max(1);
        let tree = BTree::bulk_load(ks, self.config.fanout as usize, fill, keys.chunks(ks).zip(ids()));
        let need = tree.footprint_bytes() + self.indexed.len() as u64 * 8;
        if need > self.memory.bytes() {
            self.grow(fw, need - self.memory.bytes(), "the restored B+tree")?;
        }
        self.tree = tree;
        self.indexed.iter_mut().for_each(|w| *w = 0);
        for id in ids() {
            self.set_indexed(id, true);
        }
        Ok(())
    }

    /// Every record of the range is in the index (so reads in key order can be served).
    pub fn complete(&self) -> bool {
        !self.is_tree() || self.tree.len() == self.config.records
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
            self.tree.len(),
            self.config.records,
            missing.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
            if (self.config.records - self.tree.len()) as usize > missing.len() { ", ..." } else { "" },
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
        let (leaves, internal_nodes) = self.tree.nodes();
        IndexInfo {
            config: self.config.clone(),
            indexed: if self.is_tree() { self.tree.len() } else { self.config.records },
            generated: self.generated,
            complete: self.complete(),
            height: if self.is_tree() { self.tree.height() } else { 0 },
            leaves: if self.is_tree() { leaves } else { 0 },
            internal_nodes,
            memory_bytes: self.memory_bytes(),
            notes: self.notes.clone(),
        }
    }
}
