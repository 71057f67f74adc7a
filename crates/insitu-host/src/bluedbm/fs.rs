//! BlueDBM's file system (ISCA '15 §4): log-structured over the nodes' raw flash partitions, keeping
//! its own map from files to physical pages (as RFS does) so it can hand those addresses to in-store
//! processors, and cleaning its own segments.
//!
//! - **Layout.** A file is a list of physical pages (node, card, bus, chip, block, page). Pages are
//!   appended at one write point per (node, card, bus, chip): an open erase block (a *segment*) filled in
//!   page order. A file's consecutive pages go to different nodes, then different buses, then each bus's
//!   chips in turn, so reading it keeps every node, bus and chip busy; `--node K` keeps a file on node K. Each page's spare area holds
//!   `(file id << 24) | page index`, checked on every read.
//! - **Metadata.** The map lives on the host, in `fs/` of the appliance's data directory: a checkpoint
//!   (`fs/index.json`) and a journal of records (`fs/journal`, one checksummed line each: a file put, a
//!   file removed, a page moved). A put is committed by its journal record, written and synced only once
//!   every page of the file is durable on its node; a crash before that leaves pages no file names.
//! - **Recovery.** On open, the checkpoint is loaded, the journal replayed up to its first damaged line
//!   (a torn tail is cut off), and each node's blocks are read back from its raw partition (the device
//!   finds each block's programmed pages from their spare areas). Pages no committed file names, such as
//!   those of a put cut off by a crash (a *torn segment*), are dead: cleaning reclaims them. Partly
//!   programmed blocks become write points again (one per chip), appended to from their first erased
//!   page.
//! - **Cleaning.** Each bus keeps one erased block in reserve. When a bus has no other erased block,
//!   the closed segment of that bus with the fewest live pages is cleaned: its live pages are copied to
//!   the bus's write points (into the reserve block if need be), the moves are journaled, then the block
//!   is erased and becomes the reserve. When a bus has nothing to clean, the page goes to another bus.
//!   `insitu fs gc` erases every block whose pages are all dead, write points' blocks too, and cleans the
//!   closed blocks at least half dead (their live pages moved as above, then erased); it leaves write
//!   points' blocks with live pages alone (moving them into the write points beside them, themselves
//!   partly dead, would churn).
//! - **Host disk.** A removed file's pages are punched out of the nodes' images at once ([`RawDiscard`]):
//!   they stay programmed until cleaning erases their block, but no longer take the host's disk.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub use insitu_device::cluster::Access;
use insitu_device::protocol::{
    page_heads, GlobalPage as DevicePage, GlobalRead, RawDiscard, RawErase, RawIdentify, RawRead, RawSync,
    RawWrite,
};
use insitu_device::rawflash::{FlashAddr, RawInfo};
use serde::{Deserialize, Serialize};

use crate::array::{validate_user_name, Array, FsckSummary};
use crate::blob::read_full;
use crate::bluedbm::power::{self, storage_cpu_s, Busy};
use crate::error::{HostError, Result};

/// A page in the appliance: a node and its flash address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GlobalPage {
    pub node: u32,
    #[serde(flatten)]
    pub addr: FlashAddr,
}

impl GlobalPage {
    /// Its address as numbers: node, card, bus, chip, block, page (as the checkpoint and `fs pages` give
    /// them).
    pub fn numbers(&self) -> [u64; PAGE_FIELDS] {
        let a = self.addr;
        [self.node as u64, a.card as u64, a.bus as u64, a.chip as u64, a.block, a.page as u64]
    }
}

impl std::fmt::Display for GlobalPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [n, c, b, ch, bl, p] = self.numbers();
        write!(f, "{n} {c} {b} {ch} {bl} {p}")
    }
}

/// A file: its size and its pages in order.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "StoredFile")]
pub struct FsFile {
    pub id: u64,
    pub name: String,
    pub size: u64,
    pub pages: Vec<GlobalPage>,
}

/// A file as the checkpoint and the journal hold it: its pages as one flat array, six numbers a page
/// (node, card, bus, chip, block, page). A GiB is 131,072 pages, and as objects they made every command
/// parse 7.5 MB of JSON per GiB stored when it opened the file system (0.12 s a GiB here); as numbers,
/// about 2 MB, parsed without building a map per page. Metadata written before names each page as an
/// object (`pages`); it is read as well. (Written straight from an [`FsFile`], without a copy.)
struct StoredFile {
    id: u64,
    name: String,
    size: u64,
    pages: Vec<GlobalPage>,
    page_table: PageTable,
}

impl<'de> Deserialize<'de> for StoredFile {
    /// The fields in any order, `pages` and `page_table` optional; the size, written before the page
    /// table, sizes the table's room (the page table is most of what opening a file system parses, and
    /// growing it by doubling was a third of that).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<StoredFile, D::Error> {
        struct File;
        impl<'de> serde::de::Visitor<'de> for File {
            type Value = StoredFile;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a file: its id, name, size and pages")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<StoredFile, A::Error> {
                use serde::de::Error;
                let (mut id, mut name, mut size) = (None, None, None);
                let (mut pages, mut page_table) = (Vec::new(), PageTable::default());
                while let Some(key) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                    match &*key {
                        "id" => id = Some(m.next_value()?),
                        "name" => name = Some(m.next_value()?),
                        "size" => size = Some(m.next_value()?),
                        "pages" => pages = m.next_value()?,
                        "page_table" => page_table = m.next_value_seed(Room(size.unwrap_or(0)))?,
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(StoredFile {
                    id: id.ok_or_else(|| A::Error::missing_field("id"))?,
                    name: name.ok_or_else(|| A::Error::missing_field("name"))?,
                    size: size.ok_or_else(|| A::Error::missing_field("size"))?,
                    pages,
                    page_table,
                })
            }
        }
        d.deserialize_struct("StoredFile", &["id", "name", "size", "pages", "page_table"], File)
    }
}

/// A [`PageTable`] read with room made first for the pages of a file of this many bytes (at 4 KiB a
/// page, the smallest a profile has; at most 2^24 pages, whatever a damaged size says).
struct Room(u64);

impl<'de> serde::de::DeserializeSeed<'de> for Room {
    type Value = PageTable;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<PageTable, D::Error> {
        d.deserialize_seq(Numbers((self.0.div_ceil(4096)).min(1 << 24) as usize))
    }
}

/// Numbers a page takes in [`StoredFile::page_table`].
const PAGE_FIELDS: usize = 6;

/// [`StoredFile::page_table`], read straight into pages six numbers at a time (not into a table of
/// numbers first, then pages: that was most of the time every command took to open a file system
/// holding gigabytes), or what is wrong with it, for [`FsFile::try_from`] to say with the file's name.
struct PageTable(std::result::Result<Vec<GlobalPage>, String>);

impl Default for PageTable {
    fn default() -> PageTable {
        PageTable(Ok(Vec::new()))
    }
}

/// Reads a [`PageTable`], with room for this many pages first.
struct Numbers(usize);

impl<'de> serde::de::Visitor<'de> for Numbers {
    type Value = PageTable;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an array of {PAGE_FIELDS} numbers a page")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<PageTable, A::Error> {
        let mut pages = Vec::with_capacity(self.0.max(seq.size_hint().unwrap_or(0) / PAGE_FIELDS));
        let (mut n, mut count, mut bad) = ([0u64; PAGE_FIELDS], 0usize, None);
        while let Some(v) = seq.next_element::<u64>()? {
            n[count % PAGE_FIELDS] = v;
            count += 1;
            if count.is_multiple_of(PAGE_FIELDS) && bad.is_none() {
                match page_of(n) {
                    Ok(p) => pages.push(p),
                    Err(e) => bad = Some(e),
                }
            }
        }
        if !count.is_multiple_of(PAGE_FIELDS) {
            bad = Some(format!("its page table holds {count} numbers, not {PAGE_FIELDS} a page"));
        }
        Ok(PageTable(bad.map_or(Ok(pages), Err)))
    }
}

/// The page of six numbers (node, card, bus, chip, block, page), each in the range of its field.
fn page_of(
    [node, card, bus, chip, block, page]: [u64; PAGE_FIELDS],
) -> std::result::Result<GlobalPage, String> {
    let small = |v: u64| u32::try_from(v).map_err(|_| format!("a page's address has a field of {v}"));
    Ok(GlobalPage {
        node: small(node)?,
        addr: FlashAddr {
            card: small(card)?,
            bus: small(bus)?,
            chip: small(chip)?,
            block,
            page: small(page)?,
        },
    })
}

impl Serialize for FsFile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        /// The pages as [`StoredFile::page_table`] holds them.
        struct Table<'a>(&'a [GlobalPage]);
        impl Serialize for Table<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().flat_map(GlobalPage::numbers))
            }
        }
        let mut st = s.serialize_struct("FsFile", 4)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("size", &self.size)?;
        st.serialize_field("page_table", &Table(&self.pages))?;
        st.end()
    }
}

impl TryFrom<StoredFile> for FsFile {
    type Error = String;

    fn try_from(s: StoredFile) -> std::result::Result<FsFile, String> {
        let table = s.page_table.0.map_err(|e| format!("file {}: {e}", s.name))?;
        let pages = match (table.is_empty(), s.pages.is_empty()) {
            (true, _) => s.pages,
            (false, true) => table,
            (false, false) => {
                return Err(format!("file {}: its pages are given twice, as a table and one by one", s.name))
            }
        };
        Ok(FsFile { id: s.id, name: s.name, size: s.size, pages })
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Index {
    files: BTreeMap<String, FsFile>,
    next_id: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Record {
    Put(FsFile),
    Remove {
        name: String,
    },
    Move {
        name: String,
        index: u32,
        to: GlobalPage,
    },
    /// The journal's first record after a checkpoint emptied it: the checkpoint (of `files` files) holds
    /// everything before, so a journal that says so without a checkpoint beside it has lost it.
    Checkpointed {
        files: u64,
    },
}

/// What opening the file system found and did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FsReport {
    pub journal_records: u64,
    /// Bytes of a damaged journal tail cut off (a record being written when the process died).
    pub torn_journal_bytes: u64,
    /// Blocks found partly programmed, appended to again from their first erased page.
    pub resumed_segments: u64,
    /// Files naming pages that are not programmed (reading them fails; `rm` removes them).
    pub damaged: Vec<String>,
    /// What else opening did (a checkpoint mended from its second copy).
    pub notes: Vec<String>,
}

/// Space and activity, for `fs ls` and tests.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FsStats {
    pub files: u64,
    pub bytes: u64,
    pub live_pages: u64,
    pub dead_pages: u64,
    pub free_blocks: u64,
    pub blocks_cleaned: u64,
    pub pages_moved: u64,
}

/// A read by one node ([`Fs::get_via`]): what it moved and what it cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ViaReport {
    /// The node whose in-store processor or host reads, and how.
    pub origin: u32,
    pub access: Access,
    pub bytes: u64,
    pub pages: u64,
    /// Pages on the reading node.
    pub local_pages: u64,
    /// Simulated time on the profile, the file's pages read in batches one after another.
    pub modeled_s: f64,
    pub network_messages: u64,
    pub network_bytes: u64,
    /// Hops of requests and their answers, summed over pages.
    pub hops: u64,
    /// Bytes over the reading node's PCIe link, device to host and host to device (a host's read).
    pub pcie_up_bytes: u64,
    pub pcie_down_bytes: u64,
    /// Pages each node's flash read (a page in its host's memory reads none), and pages each other
    /// node's host served (H-RH-F, H-D): what kept the nodes busy, for the run's energy.
    pub flash_pages: BTreeMap<u32, u64>,
    pub served_pages: BTreeMap<u32, u64>,
    /// Wall time here.
    pub wall_s: f64,
}

impl ViaReport {
    /// Adds `r`'s bytes, pages, network use and modeled time to these (not its wall time).
    pub fn add(&mut self, r: &ViaReport) {
        self.bytes += r.bytes;
        self.pages += r.pages;
        self.local_pages += r.local_pages;
        self.network_messages += r.network_messages;
        self.network_bytes += r.network_bytes;
        self.hops += r.hops;
        self.pcie_up_bytes += r.pcie_up_bytes;
        self.pcie_down_bytes += r.pcie_down_bytes;
        self.modeled_s += r.modeled_s;
        for (n, p) in &r.flash_pages {
            *self.flash_pages.entry(*n).or_default() += p;
        }
        for (n, p) in &r.served_pages {
            *self.served_pages.entry(*n).or_default() += p;
        }
    }

    /// What these reads kept busy: each node's flash for its pages, each serving host's storage stack
    /// for a request a page (the reader's own CPU is its caller's to add).
    pub fn busy(&self, profile: &insitu_device::Profile, page_size: usize) -> Busy {
        let mut b = Busy::default();
        for (n, p) in &self.flash_pages {
            b.device(*n, power::flash_s(profile, *p, page_size));
        }
        for (n, p) in &self.served_pages {
            b.host(*n, storage_cpu_s(profile, *p, *p * page_size as u64));
        }
        b
    }

    /// A whole read's modeled time and energy on the `nodes` nodes of `profile`: [`ViaReport::busy`],
    /// and a reading host's storage stack for each page.
    pub fn modeled(&self, profile: &insitu_device::Profile, nodes: u32, page_size: usize) -> power::Modeled {
        let mut b = self.busy(profile, page_size);
        if self.access != Access::IspFlash {
            b.host(self.origin, storage_cpu_s(profile, self.pages, self.pages * page_size as u64));
        }
        power::modeled(profile, nodes, self.modeled_s, &b)
    }
}

/// The pages of one [`GlobalRead`], checked to add up, as they came: each without its zero tail (see
/// [`page_heads`]).
struct Heads {
    heads: Vec<u32>,
    data: Vec<u8>,
}

impl Heads {
    /// Each page's bytes up to its head, in order (pages of `page_size` bytes).
    fn pages(&self, page_size: usize) -> Vec<&[u8]> {
        page_heads(&self.heads, &self.data, page_size).expect("checked when the batch came")
    }

    /// Whether every page came whole (`data` is the pages one after another).
    fn is_whole(&self, page_size: usize) -> bool {
        self.heads.iter().all(|&h| h as usize == page_size)
    }
}

/// Pages per [`GlobalRead`] of [`Fs::get_via`]: 32 MiB, so that the pipeline's fill and drain at each
/// batch's ends (a page's latency, about 0.1 ms) cost under 1% of a batch (about 13 ms at 2.4 GB/s).
const GLOBAL_BATCH_PAGES: usize = 4096;
/// Most pages a file may have: the page index takes 24 bits of the spare area.
pub(crate) const MAX_FILE_PAGES: u64 = 1 << 24;
/// Pages read or written per device command.
const BATCH_PAGES: usize = 256;
/// A checkpoint is taken once the journal is this long, and at least as long as the last checkpoint over
/// [`JOURNAL_SHARE`]: so rewriting the checkpoint costs a bounded share of what was journaled (a put of a
/// GiB journals 1.8 MB; with a checkpoint twice the journal, a hundred such files cost a few hundred MB of
/// checkpoints, not the 9 GB of one full checkpoint per put), and an open replays at most half a
/// checkpoint's worth of journal.
const CHECKPOINT_AFTER: u64 = 1 << 20;
/// See [`CHECKPOINT_AFTER`].
const JOURNAL_SHARE: u64 = 2;

/// The spare-area record of page `index` of file `id`.
pub(crate) fn spare(id: u64, index: u64) -> u64 {
    id << 24 | index
}

/// Pages to program per node: (address, spare-area value) and their data, one page after another.
type Batch = BTreeMap<u32, (Vec<(FlashAddr, u64)>, Vec<u8>)>;

/// What [`Fs::collect_garbage`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Garbage {
    /// Blocks erased: all their pages were dead.
    pub erased_blocks: u64,
    /// Closed blocks at least half dead, cleaned: their live pages moved to their bus's write points,
    /// then the block erased.
    pub cleaned_blocks: u64,
    /// Live pages those cleanings moved.
    pub moved_pages: u64,
    /// Dead pages beside live ones whose space on the host's disk was given back.
    pub discarded_pages: u64,
}

/// Pages per [`RawDiscard`].
const DISCARD_BATCH: usize = 1 << 16;

/// One erase block's use.
#[derive(Debug, Clone, Copy, Default)]
struct Segment {
    written: u32,
    live: u32,
}

/// A write point: an open block on one chip, filled in page order.
#[derive(Debug, Clone, Copy)]
struct Open {
    chip: u32,
    block: u64,
    next: u32,
}

#[derive(Debug)]
struct Node {
    info: RawInfo,
    /// (card, bus, chip, block) -> use, for blocks with pages.
    segments: HashMap<(u32, u32, u32, u64), Segment>,
    /// Per (card, bus): erased blocks as (block, chip), the first of a chip taken first.
    free: HashMap<(u32, u32), VecDeque<(u64, u32)>>,
    /// Per (card, bus, chip): the write point.
    host: HashMap<(u32, u32, u32), Open>,
    /// Per (card, bus): the chip the bus's next page goes to.
    turn: HashMap<(u32, u32), u32>,
    /// Why the node is offline, if it is: its blocks are not known (none is listed, none free), its
    /// files' pages there cannot be read, and the file system takes no change until it is back.
    down: Option<String>,
}

impl Node {
    fn buses(&self) -> Vec<(u32, u32)> {
        (0..self.info.cards).flat_map(|c| (0..self.info.buses_per_card).map(move |b| (c, b))).collect()
    }

    /// Whether the block is a write point with room left (a full one is closed, and may be cleaned).
    fn is_open(&self, key: (u32, u32, u32, u64)) -> bool {
        let ppb = self.info.pages_per_block;
        self.host.get(&(key.0, key.1, key.2)).is_some_and(|o| o.block == key.3 && o.next < ppb)
    }
}

/// The file system of an appliance (see the [module](self) documentation).
#[derive(Debug)]
pub struct Fs<'a> {
    array: &'a Array,
    dir: PathBuf,
    index: Index,
    journal: File,
    /// The journal's length, its [`Record::Checkpointed`] line included.
    journal_len: u64,
    /// Bytes of that line at the journal's start (0 before the first checkpoint).
    journal_base: u64,
    nodes: Vec<Node>,
    report: FsReport,
    cleaned: u64,
    moved: u64,
    /// The file being put: its pages are live to the cleaner, which may move them, before it commits.
    pending: Option<FsFile>,
    /// A journal write failed in a way that leaves its durability unknown: no more changes.
    poisoned: bool,
    /// Segments (node, (card, bus, chip, block)) cleaning set aside: a live page of each does not read
    /// back, so it cannot be moved.
    stuck: std::collections::HashSet<(u32, (u32, u32, u32, u64))>,
    /// Journal bytes past which a checkpoint is taken, at the least ([`CHECKPOINT_AFTER`]).
    checkpoint_after: u64,
    /// The checkpoint's size, and the share of it the journal may reach before the next ([`JOURNAL_SHARE`]).
    checkpoint_bytes: u64,
    journal_share: u64,
}

fn corrupt(path: &Path, detail: String) -> HostError {
    HostError::Corrupt { what: "file system metadata", path: path.to_path_buf(), detail }
}

impl<'a> Fs<'a> {
    /// Opens (creating on first use) the file system over `array`'s raw partitions, recovering as the
    /// module documentation says.
    pub fn open(array: &'a Array) -> Result<Fs<'a>> {
        let dir = array.dir().join("fs");
        std::fs::create_dir_all(&dir).map_err(|e| HostError::io(&dir, e))?;
        let (mut index, checkpoint_bytes, index_note) = read_index(&dir.join("index.json"))?;
        let mut report = FsReport::default();
        if let Some(why) = index_note {
            // Mended from the second copy (the caller holds the array's lock), the damaged file kept.
            let done = crate::catalog::restore_first_copy(&dir.join("index.json"), &why)?;
            report.notes.push(format!("file system: {done}"));
        }
        let journal_path = dir.join("journal");
        let nodes = read_nodes(array, &mut report)?;
        // A journal is made with the file system, before any page is written, and never removed (a
        // checkpoint empties it): a checkpoint or pages on the nodes without one (the whole `fs/` folder
        // gone, too) mean lost metadata, not a new file system, and cleaning would erase the files' pages.
        if !journal_path.exists() && (checkpoint_bytes > 0 || nodes.iter().any(|n| !n.segments.is_empty())) {
            return Err(missing_journal(&journal_path));
        }
        let mut journal = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&journal_path)
            .map_err(|e| HostError::io(&journal_path, e))?;
        let (valid, checkpointed) = replay(&mut journal, &journal_path, &mut index, &mut report)?;
        if let Some(files) = checkpointed.filter(|_| checkpoint_bytes == 0) {
            return Err(missing_checkpoint(&dir.join("index.json"), files));
        }
        let journal_base =
            if checkpointed.is_some() { first_line_len(&mut journal, &journal_path)? } else { 0 };
        let total = journal.metadata().map_err(|e| HostError::io(&journal_path, e))?.len();
        if total > valid {
            report.torn_journal_bytes = total - valid;
            journal.set_len(valid).map_err(|e| HostError::io(&journal_path, e))?;
            journal.sync_all().map_err(|e| HostError::io(&journal_path, e))?;
        }
        journal.seek(SeekFrom::Start(valid)).map_err(|e| HostError::io(&journal_path, e))?;
        let mut fs = Fs {
            array,
            dir,
            index,
            journal,
            journal_len: valid,
            journal_base,
            nodes,
            report,
            cleaned: 0,
            moved: 0,
            pending: None,
            poisoned: false,
            stuck: Default::default(),
            checkpoint_after: CHECKPOINT_AFTER,
            checkpoint_bytes,
            journal_share: JOURNAL_SHARE,
        };
        fs.count_live()?;
        Ok(fs)
    }

    /// Nodes of the appliance.
    pub fn node_count(&self) -> u32 {
        self.nodes.len() as u32
    }

    /// Refuses a node the appliance does not have, by name (a node is a device of the array, but a user of
    /// the appliance names nodes).
    pub fn check_node(&self, node: u32) -> Result<()> {
        let n = self.nodes.len();
        if (node as usize) < n {
            return Ok(());
        }
        Err(HostError::InvalidArgument(format!(
            "no node {node}: the appliance has {n} node(s), numbered from 0 to {}",
            n.saturating_sub(1)
        )))
    }

    /// What opening found.
    pub fn report(&self) -> &FsReport {
        &self.report
    }

    /// Counts each segment's live pages from the map, checking every page the map names was programmed.
    /// A file naming a page that is not programmed is damaged: it is reported (reading it fails by
    /// name), its other pages count, and the rest of the file system works.
    fn count_live(&mut self) -> Result<()> {
        let mut damaged = Vec::new();
        for f in self.index.files.values() {
            let mut bad = false;
            for p in &f.pages {
                // A page on a node that is down is not known to be damaged: it cannot be looked at.
                if self.nodes.get(p.node as usize).is_some_and(|n| n.down.is_some()) {
                    continue;
                }
                let a = p.addr;
                let seg = self
                    .nodes
                    .get_mut(p.node as usize)
                    .and_then(|n| n.segments.get_mut(&(a.card, a.bus, a.chip, a.block)))
                    .filter(|s| a.page < s.written);
                match seg {
                    Some(s) => s.live += 1,
                    None => bad = true,
                }
            }
            if bad {
                damaged.push(f.name.clone());
            }
        }
        self.report.damaged = damaged;
        Ok(())
    }

    pub fn files(&self) -> impl Iterator<Item = &FsFile> {
        self.index.files.values()
    }

    pub fn file(&self, name: &str) -> Result<&FsFile> {
        self.index.files.get(name).ok_or_else(|| HostError::NoFile(name.to_string()))
    }

    pub fn stats(&self) -> FsStats {
        let mut s = FsStats {
            files: self.index.files.len() as u64,
            bytes: self.index.files.values().map(|f| f.size).sum(),
            blocks_cleaned: self.cleaned,
            pages_moved: self.moved,
            ..FsStats::default()
        };
        for n in &self.nodes {
            for seg in n.segments.values() {
                s.live_pages += seg.live as u64;
                s.dead_pages += (seg.written - seg.live) as u64;
            }
            s.free_blocks += n.free.values().map(|q| q.len() as u64).sum::<u64>();
        }
        s
    }

    fn check_usable(&self) -> Result<()> {
        if self.poisoned {
            return Err(corrupt(
                &self.dir,
                "a journal write failed after its record may have reached the disk; run the command again \
                 (the file system is recovered from its journal on open)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Appends a record; a failed append is cut off again, so later records never follow a torn one.
    fn append(&mut self, rec: &Record) -> Result<()> {
        let line = record_line(rec);
        let path = self.dir.join("journal");
        if let Err(e) = self.journal.write_all(line.as_bytes()) {
            let undo = self
                .journal
                .set_len(self.journal_len)
                .and_then(|()| self.journal.seek(SeekFrom::Start(self.journal_len)).map(|_| ()));
            if undo.is_err() {
                self.poisoned = true;
            }
            return Err(HostError::io(&path, e));
        }
        self.journal_len += line.len() as u64;
        Ok(())
    }

    /// Makes the records appended so far durable: their commit point. If this fails, whether they are
    /// durable is unknown, so this `Fs` takes no more changes (the next open replays the journal).
    fn sync_journal(&mut self) -> Result<()> {
        let path = self.dir.join("journal");
        if let Err(e) = self.journal.sync_data() {
            self.poisoned = true;
            return Err(HostError::io(&path, e));
        }
        Ok(())
    }

    /// Once the journal is long, writes the map as a checkpoint and empties the journal. Called only
    /// after the map holds every record's change. A checkpoint that fails leaves the journal as it was
    /// (its records are replayed onto the older checkpoint), so it does not fail the change before it.
    fn maybe_checkpoint(&mut self) {
        if self.since_checkpoint() < self.checkpoint_after.max(self.checkpoint_bytes / self.journal_share) {
            return;
        }
        let json = serde_json::to_vec(&self.index).expect("plain data serializes");
        let body = insitu_device::with_checksum(INDEX_HEADER, &json);
        // Two copies, the second written after the first: the journal is emptied only once both hold
        // its records, so either can be replayed onto (see `read_index`).
        let first = self.dir.join("index.json");
        if insitu_device::write_atomic(&first, &body).is_err()
            || insitu_device::write_atomic(&crate::catalog::second_copy(&first), &body).is_err()
        {
            return;
        }
        self.checkpoint_bytes = body.len() as u64;
        // Replaying records already in the checkpoint is harmless (each is idempotent), so a journal
        // that cannot be emptied now is emptied by a later checkpoint. Emptied, it starts with a record
        // that says a checkpoint holds the rest (a crash before that record leaves an empty journal beside
        // the checkpoint: the same state).
        let mark = record_line(&Record::Checkpointed { files: self.index.files.len() as u64 });
        let emptied = self
            .journal
            .set_len(0)
            .and_then(|()| self.journal.seek(SeekFrom::Start(0)).map(|_| ()))
            .and_then(|()| self.journal.write_all(mark.as_bytes()))
            .and_then(|()| self.journal.sync_all());
        match emptied {
            Ok(()) => (self.journal_len, self.journal_base) = (mark.len() as u64, mark.len() as u64),
            Err(_) => self.poisoned = true,
        }
    }

    /// Bytes of records the journal holds since the last checkpoint.
    fn since_checkpoint(&self) -> u64 {
        self.journal_len - self.journal_base
    }

    /// Stores `reader`'s bytes as file `name`, striped over every node, or kept on `node`. If it fails,
    /// nothing of it is in the file system (pages already programmed are dead, for cleaning).
    pub fn put(&mut self, name: &str, reader: &mut dyn Read, node: Option<u32>) -> Result<FsFile> {
        self.all_nodes_up()?;
        self.check_usable()?;
        let r = self.put_pages(name, reader, node);
        if r.is_err() {
            // The failed file's id is not given out again, so its stale pages can never pass as another's.
            let failed = self.pending.take();
            if let Some(f) = &failed {
                self.index.next_id = self.index.next_id.max(f.id + 1);
                self.unstick(&f.pages);
            }
            if !self.poisoned {
                self.reload()?;
                // A put that filled the host's disk gives back what it took (best effort: the put's own
                // error is the one to report, and `fs gc` gives the space back later).
                if let Some(f) = failed.filter(|_| self.host_short()) {
                    let _ = self.discard(&f.pages);
                }
            }
        }
        r
    }

    /// Whether the host's disk holding the appliance has less than [`insitu_device::HOST_SLACK_BYTES`]
    /// free: dead pages then give their space back at once (as the FTL's erases do), not only at `fs gc`.
    fn host_short(&self) -> bool {
        insitu_device::free_bytes(self.array.dir()).is_some_and(|f| f < insitu_device::HOST_SLACK_BYTES)
    }

    /// Gives back the host's disk space of the programmed ones among `pages` ([`RawDiscard`]): pages no
    /// file will read again. Returns how many.
    fn discard(&mut self, pages: &[GlobalPage]) -> Result<u64> {
        let mut by_node: BTreeMap<u32, Vec<FlashAddr>> = BTreeMap::new();
        for p in pages {
            let a = p.addr;
            let programmed = self
                .nodes
                .get(p.node as usize)
                .and_then(|n| n.segments.get(&(a.card, a.bus, a.chip, a.block)));
            if programmed.is_some_and(|s| a.page < s.written) {
                by_node.entry(p.node).or_default().push(a);
            }
        }
        let mut n = 0;
        for (nd, addrs) in by_node {
            for chunk in addrs.chunks(DISCARD_BATCH) {
                self.device(nd)?.call(RawDiscard { addrs: chunk.to_vec() }).map_err(HostError::device(nd))?;
            }
            n += addrs.len() as u64;
        }
        Ok(n)
    }

    /// Every dead page in a block that has live ones too (blocks all dead are for erasing).
    fn dead_pages(&self) -> Vec<GlobalPage> {
        let mixed = |p: &GlobalPage| {
            let a = p.addr;
            self.nodes[p.node as usize]
                .segments
                .get(&(a.card, a.bus, a.chip, a.block))
                .is_some_and(|s| s.live < s.written)
        };
        let mut live: HashMap<(u32, u32, u32, u32, u64), Vec<u32>> = HashMap::new();
        for p in
            self.index.files.values().chain(self.pending.as_ref()).flat_map(|f| &f.pages).filter(|p| mixed(p))
        {
            let a = p.addr;
            live.entry((p.node, a.card, a.bus, a.chip, a.block)).or_default().push(a.page);
        }
        let mut dead = Vec::new();
        for (nd, node) in self.nodes.iter().enumerate() {
            for (&(card, bus, chip, block), s) in
                node.segments.iter().filter(|(_, s)| s.live > 0 && s.live < s.written)
            {
                let mut keep = live.remove(&(nd as u32, card, bus, chip, block)).unwrap_or_default();
                keep.sort_unstable();
                dead.extend((0..s.written).filter(|pg| keep.binary_search(pg).is_err()).map(|page| {
                    GlobalPage { node: nd as u32, addr: FlashAddr { card, bus, chip, block, page } }
                }));
            }
        }
        dead
    }

    /// Reads every node's blocks again and recounts live pages (after a failure left the write points
    /// in doubt: they are closed, as after a crash).
    fn reload(&mut self) -> Result<()> {
        self.nodes = read_nodes(self.array, &mut FsReport::default())?;
        self.count_live()
    }

    /// Refuses `name` for a new file: not a valid name, or a file's already.
    pub fn check_new_name(&self, name: &str) -> Result<()> {
        validate_user_name(name)?;
        if self.index.files.contains_key(name) {
            return Err(HostError::FileExists(name.to_string()));
        }
        Ok(())
    }

    fn put_pages(&mut self, name: &str, reader: &mut dyn Read, node: Option<u32>) -> Result<FsFile> {
        self.check_new_name(name)?;
        let nodes: Vec<u32> = match node {
            Some(n) => {
                self.check_node(n)?;
                vec![n]
            }
            None => (0..self.nodes.len() as u32).collect(),
        };
        let ps = self.page_size();
        let id = self.index.next_id;
        self.pending = Some(FsFile { id, name: name.to_string(), size: 0, pages: Vec::new() });
        let mut size = 0u64;
        let mut chunk = vec![0u8; BATCH_PAGES * ps];
        let mut touched = vec![false; self.nodes.len()];
        loop {
            let got = read_full(reader, &mut chunk).map_err(|e| HostError::io(name, e))?;
            if got == 0 {
                break;
            }
            size += got as u64;
            chunk[got..].fill(0);
            let n = got.div_ceil(ps);
            let have = self.pending.as_ref().map_or(0, |f| f.pages.len());
            if have as u64 + n as u64 > MAX_FILE_PAGES {
                return Err(HostError::InvalidArgument(format!(
                    "{name:?} is larger than the file system's largest file ({} pages)",
                    MAX_FILE_PAGES
                )));
            }
            // Page i goes to node i mod N, then to the buses of that node in turn. Pages given out are
            // written before any cleaning, so the cleaner only ever reads programmed pages.
            let mut by_node: Batch = BTreeMap::new();
            let mut failed = None;
            let mut k = 0;
            while k < n {
                let i = self.pending.as_ref().map_or(0, |f| f.pages.len()) as u64;
                // Each file starts one write point further on, so small files spread too.
                let slot = i + id;
                let nd = nodes[(slot % nodes.len() as u64) as usize];
                let buses = self.nodes[nd as usize].buses();
                let (card, bus) = buses[((slot / nodes.len() as u64) % buses.len() as u64) as usize];
                let (nd, addr) = match self.alloc(nd, card, bus, false) {
                    Ok(Some(a)) => (nd, a),
                    Ok(None) => {
                        self.write_batch(std::mem::take(&mut by_node), &mut touched)?;
                        // Clean this bus; if it has nothing to clean, take any bus of the file's nodes.
                        let r = match self.clean_one(nd, card, bus) {
                            Ok(true) => Ok(None),
                            Ok(false) => self.room_anywhere(&nodes).map(Some),
                            Err(e) => Err(e),
                        };
                        match r {
                            Ok(Some(placed)) => placed,
                            Ok(None) => continue,
                            Err(e) => {
                                failed = Some(e);
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                };
                let page = GlobalPage { node: nd, addr };
                self.segment(&page).live += 1;
                self.pending.as_mut().expect("a put in progress").pages.push(page);
                let e = by_node.entry(nd).or_default();
                e.0.push((addr, spare(id, i)));
                e.1.extend_from_slice(&chunk[k * ps..(k + 1) * ps]);
                k += 1;
            }
            // Pages already given out are programmed even when the file fails, so that each block's
            // programmed pages stay in step with the write points.
            self.write_batch(by_node, &mut touched)?;
            if let Some(e) = failed {
                return Err(e);
            }
            self.array.faults.hit("fs-put-pages");
            if got < chunk.len() {
                break;
            }
        }
        for (nd, _) in touched.iter().enumerate().filter(|(_, t)| **t) {
            self.device(nd as u32)?.call(RawSync).map_err(HostError::device(nd as u32))?;
        }
        let mut file = self.pending.take().expect("a put in progress");
        file.size = size;
        self.append(&Record::Put(file.clone()))?;
        self.sync_journal()?;
        self.array.faults.hit("fs-put-journal");
        self.index.next_id = self.index.next_id.max(id + 1);
        self.index.files.insert(name.to_string(), file.clone());
        self.maybe_checkpoint();
        Ok(file)
    }

    /// Programs a batch of pages, per node.
    fn write_batch(&mut self, by_node: Batch, touched: &mut [bool]) -> Result<()> {
        for (nd, (list, data)) in by_node {
            touched[nd as usize] = true;
            self.device(nd)?.call(RawWrite { pages: list, data }).map_err(HostError::device(nd))?;
        }
        Ok(())
    }

    /// Writes file `name` to `out`, every page checked against the spare area it was written with.
    pub fn get(&self, name: &str, out: &mut dyn Write) -> Result<u64> {
        let f = self.file(name)?;
        let ps = self.page_size();
        let mut left = f.size;
        for (c, chunk) in f.pages.chunks(BATCH_PAGES).enumerate() {
            let data = self.read_pages(f, c * BATCH_PAGES, chunk)?;
            let take = left.min(data.len() as u64) as usize;
            out.write_all(&data[..take]).map_err(|e| HostError::io("output", e))?;
            left -= take as u64;
            debug_assert_eq!(data.len(), chunk.len() * ps);
        }
        Ok(f.size)
    }

    /// Reads `pages` (pages `first..` of `f`) from their nodes, in order, checking their spare areas. A
    /// page that fails is named: the file, the page, its node and address.
    fn read_pages(&self, f: &FsFile, first: usize, pages: &[GlobalPage]) -> Result<Vec<u8>> {
        let ps = self.page_size();
        let mut out = vec![0u8; pages.len() * ps];
        let mut by_node: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, p) in pages.iter().enumerate() {
            by_node.entry(p.node).or_default().push(first + i);
        }
        for (nd, idx) in by_node {
            let data = match self.read_on(f, nd, &idx) {
                Ok(d) => d,
                // Damage is named by its page; any other failure (a node offline) as it is.
                Err(e) if e.kind() == crate::error::ErrorKind::Damaged => {
                    return Err(self.locate_damage(f, &idx).unwrap_or(e))
                }
                Err(e) => return Err(e),
            };
            for (k, i) in idx.iter().enumerate() {
                out[(i - first) * ps..(i - first + 1) * ps].copy_from_slice(&data[k * ps..(k + 1) * ps]);
            }
        }
        Ok(out)
    }

    /// Reads pages `idx` of `f`, all on node `nd`, straight from its raw partition (no network): each
    /// checked whole against its checksum, and against the spare-area value it was written with. The
    /// pages, one after another.
    fn read_on(&self, f: &FsFile, nd: u32, idx: &[usize]) -> Result<Vec<u8>> {
        let ps = self.page_size();
        let addrs: Vec<FlashAddr> = idx.iter().map(|i| f.pages[*i].addr).collect();
        let mut got =
            self.device(nd)?.call(RawRead { addrs, recheck: false }).map_err(HostError::device(nd))?;
        for (k, i) in idx.iter().enumerate() {
            let at = idx.len() * ps + k * 8;
            let s = u64::from_le_bytes(got[at..at + 8].try_into().expect("8 bytes"));
            check_spare(f, *i, &f.pages[*i], s)?;
        }
        got.truncate(idx.len() * ps);
        Ok(got)
    }

    /// Reads pages `idx` of `f` from their nodes as [`Fs::read_on`] does, a batch a node at a time, and
    /// each page of a batch that fails alone: `bad(i, error)` gets each page that does not read back
    /// whole as written (or at all), its error naming the file, the page, its node and address. A node
    /// that is offline (or goes offline: its server gone) is not read further, nor is any node of `skip`.
    /// Returns, for each node read, how many of its pages read good and the error that took it offline.
    fn scrub(
        &self,
        f: &FsFile,
        idx: &[usize],
        skip: &BTreeSet<u32>,
        bad: &mut dyn FnMut(usize, HostError),
    ) -> Vec<(u32, u64, Option<HostError>)> {
        let mut by_node: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for &i in idx.iter().filter(|&&i| !skip.contains(&f.pages[i].node)) {
            by_node.entry(f.pages[i].node).or_default().push(i);
        }
        let offline = |e: &HostError| e.kind() == crate::error::ErrorKind::Offline;
        // The nodes read at once, each on a thread (their flash and the host's disk under them both
        // work); each node's bad pages, in order.
        let scrub_node = |nd: u32, idx: &[usize]| {
            let (mut good, mut bad) = (0u64, Vec::new());
            for group in idx.chunks(BATCH_PAGES) {
                match self.read_on(f, nd, group) {
                    Ok(_) => {
                        good += group.len() as u64;
                        continue;
                    }
                    Err(e) if offline(&e) => return (nd, good, bad, Some(e)),
                    Err(_) => {}
                }
                for &i in group {
                    match self.read_on(f, nd, &[i]) {
                        Ok(_) => good += 1,
                        Err(e) if offline(&e) => return (nd, good, bad, Some(e)),
                        Err(e) => bad.push((i, page_error(f, i, e))),
                    }
                }
            }
            (nd, good, bad, None)
        };
        type NodeScrub = (u32, u64, Vec<(usize, HostError)>, Option<HostError>);
        let per_node: Vec<NodeScrub> = std::thread::scope(|s| {
            let running: Vec<_> =
                by_node.iter().map(|(nd, idx)| s.spawn(move || scrub_node(*nd, idx))).collect();
            running.into_iter().map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
        });
        let mut out = Vec::new();
        for (nd, good, errors, went) in per_node {
            for (i, e) in errors {
                bad(i, e);
            }
            out.push((nd, good, went));
        }
        out
    }

    /// The first of pages `idx` of `f` that does not read back as written, as an error that names it
    /// (a read through another node, or of many pages at once, fails naming neither); `None` if every
    /// one reads good.
    fn locate_damage(&self, f: &FsFile, idx: &[usize]) -> Option<HostError> {
        let mut first = None;
        // A node offline fails the read as it did: only damage is located here.
        self.scrub(f, idx, &BTreeSet::new(), &mut |i, e| {
            if first.as_ref().is_none_or(|(j, _)| i < *j) {
                first = Some((i, e));
            }
        });
        first.map(|(_, e)| e)
    }

    /// Checks the file system against its nodes' flash, for `insitu fsck`: each file's size fits its
    /// pages, no page is held by two files, and every page of every file reads back whole (its checksum)
    /// holding what it was written with (its spare area). One problem a damaged file: how many of its
    /// pages are bad, and the first. Notes say what was checked and what opening recovered.
    pub fn check(&self) -> FsckSummary {
        let (mut problems, mut notes) = (Vec::new(), Vec::new());
        let ps = self.page_size() as u64;
        let mut owners: Vec<(GlobalPage, &str)> =
            self.index.files.values().flat_map(|f| f.pages.iter().map(|p| (*p, f.name.as_str()))).collect();
        owners.sort_unstable();
        for w in owners.windows(2) {
            if w[0].0 == w[1].0 {
                problems.push(format!(
                    "file system: page {} is held by files {:?} and {:?}",
                    w[0].0, w[0].1, w[1].1
                ));
            }
        }
        let mut scrubbed = 0;
        // Nodes found offline, with why: not read again for later files. Pages each node holds, and how
        // many of them were read (good or bad).
        let mut down: BTreeMap<u32, String> = BTreeMap::new();
        let (mut held, mut read): (BTreeMap<u32, u64>, BTreeMap<u32, u64>) = Default::default();
        for f in self.index.files.values() {
            if f.pages.len() as u64 != f.size.div_ceil(ps) {
                problems.push(format!(
                    "file {:?}: {} bytes in {} pages of {ps} bytes",
                    f.name,
                    f.size,
                    f.pages.len()
                ));
            }
            for p in &f.pages {
                *held.entry(p.node).or_default() += 1;
            }
            let idx: Vec<usize> = (0..f.pages.len()).collect();
            let (mut count, mut first) = (0u64, None);
            let skip: BTreeSet<u32> = down.keys().copied().collect();
            let per_node = self.scrub(f, &idx, &skip, &mut |i, e| {
                count += 1;
                *read.entry(f.pages[i].node).or_default() += 1;
                first.get_or_insert(e);
            });
            for (nd, good, went) in per_node {
                scrubbed += good;
                *read.entry(nd).or_default() += good;
                if let Some(e) = went {
                    down.insert(nd, e.to_string());
                }
            }
            if let Some(e) = first {
                problems.push(format!(
                    "{e}; {count} of its {} page(s) bad; `insitu fs rm {}` removes it",
                    f.pages.len(),
                    f.name
                ));
            }
        }
        for (nd, why) in &down {
            let unread = held[nd] - read.get(nd).copied().unwrap_or(0);
            problems.push(format!(
                "file system: {unread} page(s) on node {nd} could not be read to check them: {why}"
            ));
        }
        let s = self.stats();
        notes.push(format!(
            "file system: {} file(s), {scrubbed} page(s) read back and checked; {} dead page(s) for cleaning",
            s.files, s.dead_pages
        ));
        notes.extend(self.report.notes.iter().cloned());
        if self.report.torn_journal_bytes > 0 {
            notes.push(format!(
                "file system: cut a torn record of {} byte(s) off its journal (a change cut off by a crash)",
                self.report.torn_journal_bytes
            ));
        }
        FsckSummary { problems, notes }
    }

    /// Writes file `name` to `out` as node `origin`'s in-store processor (`Access::IspFlash`) or host
    /// (`Access::HostFlash`) reads it: its pages on `origin` from that node's flash, the others over the
    /// storage network from their nodes' flash, through their splitters and no other host (§3, §6.4).
    /// Every page is checked against its spare area. Returns the read's cost, modeled on the profile's
    /// devices and network and measured here.
    pub fn get_via(&self, name: &str, origin: u32, access: Access, out: &mut dyn Write) -> Result<ViaReport> {
        self.check_node(origin)?;
        let f = self.file(name)?;
        let ps = self.page_size();
        let mut left = f.size;
        let mut report = ViaReport { origin, access, ..Default::default() };
        let started = std::time::Instant::now();
        let zeros = vec![0u8; ps];
        let mut w = std::io::BufWriter::with_capacity(1 << 20, out);
        let io = |e| HostError::io("output", e);
        for first in (0..f.pages.len()).step_by(GLOBAL_BATCH_PAGES) {
            let idx: Vec<usize> = (first..(first + GLOBAL_BATCH_PAGES).min(f.pages.len())).collect();
            let batch = self.via_batch(f, &idx, (origin, access), &[], &mut report)?;
            // Whole pages go out as runs of the batch's buffer. A page without its zero tail, or the one
            // the file ends in, ends a run: the file's bytes of it, then its zeros.
            let (mut from, mut at) = (0, 0);
            for page in batch.pages(ps) {
                let take = left.min(ps as u64) as usize;
                let held = page.len().min(take);
                if held < take || take < page.len() {
                    w.write_all(&batch.data[from..at + held]).map_err(io)?;
                    w.write_all(&zeros[..take - held]).map_err(io)?;
                    from = at + page.len();
                }
                at += page.len();
                left -= take as u64;
            }
            w.write_all(&batch.data[from..at]).map_err(io)?;
        }
        w.flush().map_err(io)?;
        report.bytes = f.size;
        report.wall_s = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Reads pages `indices` of file `name`, in that order, as node `origin`'s in-store processor or host
    /// does (see [`Fs::get_via`]): every page checked. Returns the pages, a page after another, and what
    /// the read cost.
    pub fn read_pages_via(
        &self,
        name: &str,
        indices: &[usize],
        origin: u32,
        access: Access,
    ) -> Result<(Vec<u8>, ViaReport)> {
        let ps = self.page_size();
        let mut out = Vec::new();
        let report = self.for_each_batch(name, indices, (origin, access), &[], |_, batch| {
            // A single batch of whole pages (the usual request) is the device's buffer itself, not a
            // copy of it.
            if out.is_empty() && batch.is_whole(ps) {
                out = batch.data;
                out.reserve_exact(indices.len() * ps - out.len());
            } else {
                out.reserve(batch.heads.len() * ps);
                for page in batch.pages(ps) {
                    out.extend_from_slice(page);
                    out.resize(out.len() + ps - page.len(), 0);
                }
            }
            Ok(())
        })?;
        Ok((out, report))
    }

    /// [`Fs::read_pages_via`] without holding the pages: `each(k, page)` gets page `indices[k]`, a batch
    /// of reads at a time, in order, so a traversal's memory is a batch's whatever its round (§7.2).
    /// `misses` is empty, or one flag a page: with `Access::HostRemoteDram`, a flagged page is not in its
    /// host's memory, and its host reads it from its flash first (Fig. 20's "DRAM + x% F").
    pub fn for_each_page(
        &self,
        name: &str,
        indices: &[usize],
        (origin, access): (u32, Access),
        misses: &[bool],
        mut each: impl FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<ViaReport> {
        let ps = self.page_size();
        // A page that came without its zero tail is put back together here, the tail of the one before
        // cleared: one buffer, in cache, for the whole read.
        let (mut whole, mut dirty) = (vec![0u8; ps], 0);
        self.for_each_batch(name, indices, (origin, access), misses, |first, batch| {
            for (j, page) in batch.pages(ps).into_iter().enumerate() {
                if page.len() == ps {
                    each(first + j, page)?;
                    continue;
                }
                whole[..page.len()].copy_from_slice(page);
                if dirty > page.len() {
                    whole[page.len()..dirty].fill(0);
                }
                dirty = page.len();
                each(first + j, &whole)?;
            }
            Ok(())
        })
    }

    /// [`Fs::for_each_page`] a batch of pages at a time: `each(k, pages)` gets pages `indices[k..]`, as
    /// many as one `GlobalRead` returns.
    fn for_each_batch(
        &self,
        name: &str,
        indices: &[usize],
        (origin, access): (u32, Access),
        misses: &[bool],
        mut each: impl FnMut(usize, Heads) -> Result<()>,
    ) -> Result<ViaReport> {
        let f = self.file(name)?;
        if !misses.is_empty() && misses.len() != indices.len() {
            return Err(HostError::InvalidArgument(format!(
                "{} miss flags for {} pages",
                misses.len(),
                indices.len()
            )));
        }
        if let Some(i) = indices.iter().find(|i| **i >= f.pages.len()) {
            return Err(HostError::InvalidArgument(match f.pages.len() {
                0 => format!("{name} has no pages, so no page {i}"),
                n => format!("{name} has pages 0 to {}, not {i}", n - 1),
            }));
        }
        let mut report = ViaReport { origin, access, ..Default::default() };
        let started = std::time::Instant::now();
        for (k, idx) in indices.chunks(GLOBAL_BATCH_PAGES).enumerate() {
            let m = if misses.is_empty() { &[][..] } else { &misses[k * GLOBAL_BATCH_PAGES..][..idx.len()] };
            let batch = self.via_batch(f, idx, (origin, access), m, &mut report)?;
            report.bytes += (idx.len() * self.page_size()) as u64;
            each(k * GLOBAL_BATCH_PAGES, batch)?;
        }
        report.wall_s = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// One `GlobalRead` of pages `idx` of `f`, checked, its cost added to `report`.
    fn via_batch(
        &self,
        f: &FsFile,
        idx: &[usize],
        (origin, access): (u32, Access),
        missed: &[bool],
        report: &mut ViaReport,
    ) -> Result<Heads> {
        let topology = self.array.config().topology.clone().ok_or_else(|| {
            HostError::InvalidArgument(
                "this array has no storage network: make an appliance with `insitu init --nodes N --topology T`"
                    .into(),
            )
        })?;
        let reader = self.device(origin)?;
        let pages =
            idx.iter().map(|i| DevicePage { node: f.pages[*i].node, addr: f.pages[*i].addr }).collect();
        let misses = (0..missed.len() as u32).filter(|k| missed[*k as usize]).collect();
        let got = match reader.call(GlobalRead { access, topology, pages, misses }) {
            Ok(got) => got,
            // The reading node names the page by its address only, whichever node holds it.
            Err(e) => {
                let e = HostError::device(origin)(e);
                let damaged = e.kind() == crate::error::ErrorKind::Damaged;
                return Err(damaged.then(|| self.locate_damage(f, idx)).flatten().unwrap_or(e));
            }
        };
        let protocol = |e: String| HostError::device(origin)(insitu_device::DeviceError::Protocol(e));
        let pages = page_heads(&got.heads, &got.data, self.page_size()).map_err(protocol)?.len();
        if pages != idx.len() || got.spares.len() != idx.len() {
            return Err(protocol(format!(
                "a read of {} pages answered {pages} pages and {} spare areas",
                idx.len(),
                got.spares.len()
            )));
        }
        let (mut flash_pages, mut served_pages) = (BTreeMap::new(), BTreeMap::new());
        for (k, i) in idx.iter().enumerate() {
            check_spare(f, *i, &f.pages[*i], got.spares[k])?;
            let node = f.pages[*i].node;
            let in_memory = access == Access::HostRemoteDram && !missed.get(k).copied().unwrap_or(false);
            if !in_memory {
                *flash_pages.entry(node).or_default() += 1;
            }
            if matches!(access, Access::HostRemoteHost | Access::HostRemoteDram) && node != origin {
                *served_pages.entry(node).or_default() += 1;
            }
        }
        report.add(&ViaReport {
            flash_pages,
            served_pages,
            pages: got.pages,
            local_pages: got.local_pages,
            network_messages: got.network_messages,
            network_bytes: got.network_bytes,
            hops: got.hops,
            pcie_up_bytes: got.pcie_up_bytes,
            pcie_down_bytes: got.pcie_down_bytes,
            modeled_s: got.modeled_ps as f64 * 1e-12,
            ..Default::default()
        });
        Ok(Heads { heads: got.heads, data: got.data })
    }

    /// Removes file `name`: its pages are dead, for cleaning to reclaim.
    pub fn remove(&mut self, name: &str) -> Result<()> {
        self.all_nodes_up()?;
        self.check_usable()?;
        let f = self.file(name)?.clone();
        // The array's reserve on the host's disk goes first if that disk is full, so the record fits.
        crate::array::release_reserve_if_short(self.array.dir());
        self.append(&Record::Remove { name: name.to_string() })?;
        self.sync_journal()?;
        for p in &f.pages {
            if let Some(s) = self.segment_of(p) {
                s.live = s.live.saturating_sub(1);
            }
        }
        self.unstick(&f.pages);
        self.index.files.remove(name);
        self.maybe_checkpoint();
        // The file's pages give their space on the host's disk back now: files share blocks, so its blocks
        // are rarely all dead, and a block is erased (for new pages to take its space) only when cleaning
        // picks it, once the flash fills; until then new files take fresh blocks, and without this the
        // images would grow by every file ever stored. Best effort: the removal is committed, and what
        // fails to go back now `fs gc` gives back later.
        let _ = self.discard(&f.pages);
        // What applications built over the file (nearest-neighbour buckets under `lsh/`, named by the
        // file's id, which is never given out again) goes with it.
        if let Ok(dir) = std::fs::read_dir(self.dir.join("lsh")) {
            let prefix = format!("{}-", f.id);
            for e in dir.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(())
    }

    /// Erases every block with pages, all of them dead, and gives back the host's disk space of the dead
    /// pages in blocks that still hold live ones ([`RawDiscard`]: files share blocks, so a removed file's
    /// pages mostly lie beside others'). A write point's block is erased too (its chip opens another when
    /// it next takes a page): after a file of a few pages per chip is removed, its blocks are still open,
    /// and only this gives them back. The next open puts erased blocks first in each bus's queue, so
    /// writes reuse the space the images already hold on the host's disk before growing them.
    ///
    /// Then it cleans (§4's segment cleaning, as a put does when a bus runs out of erased blocks) every
    /// closed block at least half dead: moving its live pages costs no more programs than the block
    /// frees. A block mostly live is left; its dead pages' disk space is given back all the same.
    pub fn collect_garbage(&mut self) -> Result<Garbage> {
        self.all_nodes_up()?;
        let erased_blocks = self.erase_dead_blocks()?;
        let (moved, mut cleaned_blocks) = (self.moved, 0);
        for nd in 0..self.nodes.len() as u32 {
            for (card, bus) in self.nodes[nd as usize].buses() {
                loop {
                    let aside = self.stuck.len();
                    if !self.clean_victim(nd, card, bus, true)? {
                        break;
                    }
                    cleaned_blocks += u64::from(self.stuck.len() == aside);
                }
            }
        }
        let dead = self.dead_pages();
        let discarded_pages = self.discard(&dead)?;
        Ok(Garbage { erased_blocks, cleaned_blocks, moved_pages: self.moved - moved, discarded_pages })
    }

    fn erase_dead_blocks(&mut self) -> Result<u64> {
        self.check_usable()?;
        let mut n = 0;
        for nd in 0..self.nodes.len() as u32 {
            let dead: Vec<(u32, u32, u32, u64)> = {
                let node = &self.nodes[nd as usize];
                let mut v: Vec<_> = node
                    .segments
                    .iter()
                    .filter(|(_, s)| s.live == 0 && s.written > 0)
                    .map(|(k, _)| *k)
                    .collect();
                v.sort();
                v
            };
            let erased = !dead.is_empty();
            for key in dead {
                self.erase(nd, key)?;
                n += 1;
            }
            // The blocks' erase counts (their wear), durable before the cleaning says it is done.
            if erased {
                self.device(nd)?.call(RawSync).map_err(HostError::device(nd))?;
            }
        }
        Ok(n)
    }

    /// The folder of the file system's metadata on the host (`fs/` in the appliance's directory), where
    /// applications keep what they build over files (nearest-neighbour indexes).
    pub fn meta_dir(&self) -> &Path {
        &self.dir
    }

    /// The appliance the file system is on.
    pub fn array(&self) -> &'a Array {
        self.array
    }

    /// Refuses a change while a node is down: its blocks are not known, so neither are the space free
    /// nor the pages cleaning would move or erase.
    fn all_nodes_up(&self) -> Result<()> {
        match self.nodes.iter().position(|n| n.down.is_some()) {
            None => Ok(()),
            Some(i) => Err(HostError::Offline {
                device: i as u32,
                detail: "the file system takes no change while a node is offline; files whose pages are all \
                         on the other nodes can still be read"
                    .into(),
            }),
        }
    }

    /// Bytes a flash page holds (every node has the same).
    pub fn page_size(&self) -> usize {
        self.nodes.first().map_or(8192, |n| n.info.page_size as usize)
    }

    fn device(&self, node: u32) -> Result<&insitu_device::DeviceClient> {
        self.array.device(node)
    }

    fn segment_of(&mut self, p: &GlobalPage) -> Option<&mut Segment> {
        let a = p.addr;
        self.nodes.get_mut(p.node as usize)?.segments.get_mut(&(a.card, a.bus, a.chip, a.block))
    }

    fn segment(&mut self, p: &GlobalPage) -> &mut Segment {
        let a = p.addr;
        self.nodes[p.node as usize]
            .segments
            .get_mut(&(a.card, a.bus, a.chip, a.block))
            .expect("a written segment")
    }

    /// Pages of a file that is gone (removed, or a put that failed) are dead: a block set aside for a page
    /// that did not read back may have been for one of them, so cleaning tries each of their blocks again
    /// (and sets it aside again if another file's page there fails too).
    fn unstick(&mut self, pages: &[GlobalPage]) {
        if self.stuck.is_empty() {
            return;
        }
        for p in pages {
            let a = p.addr;
            self.stuck.remove(&(p.node, (a.card, a.bus, a.chip, a.block)));
        }
    }

    fn erase(&mut self, nd: u32, key: (u32, u32, u32, u64)) -> Result<()> {
        let (card, bus, chip, block) = key;
        let addr = FlashAddr { card, bus, chip, block, page: 0 };
        self.array.faults.hit("fs-gc-erase");
        self.device(nd)?.call(RawErase { addrs: vec![addr] }).map_err(HostError::device(nd))?;
        self.stuck.remove(&(nd, key));
        let node = &mut self.nodes[nd as usize];
        node.segments.remove(&key);
        if node.host.get(&(card, bus, chip)).is_some_and(|o| o.block == block) {
            node.host.remove(&(card, bus, chip));
        }
        node.free.entry((card, bus)).or_default().push_back((block, chip));
        self.cleaned += 1;
        Ok(())
    }

    /// The next page of (node, card, bus): the bus's chips take pages in turn, each at its write point
    /// (an open block filled in page order, a new one opened when it is full), so a file's pages on one
    /// bus keep all its chips busy when read. `None` when only the bus's reserve block is left and this
    /// is not the cleaner asking (clean the bus first, [`Fs::clean_one`]).
    fn alloc(&mut self, nd: u32, card: u32, bus: u32, cleaning: bool) -> Result<Option<FlashAddr>> {
        let ppb = self.nodes[nd as usize].info.pages_per_block;
        let chips = self.nodes[nd as usize].info.chips_per_bus;
        // A bus with no erased block left (a crash cut a cleaning short after it took the reserve) keeps
        // its write points' room for the cleaner until cleaning has given it a reserve again.
        if !cleaning && self.free_on(nd, card, bus) == 0 {
            return Ok(None);
        }
        let turn = self.nodes[nd as usize].turn.get(&(card, bus)).copied().unwrap_or(0);
        for k in 0..chips {
            let chip = (turn + k) % chips;
            // A new block: the host keeps one of the bus's in reserve for cleaning; cleaning may take it.
            let may_open = cleaning || self.free_on(nd, card, bus) > 1;
            let node = &mut self.nodes[nd as usize];
            let open = node.host.get(&(card, bus, chip)).copied().filter(|o| o.next < ppb);
            let o = match open {
                Some(o) => o,
                None if !may_open => continue,
                None => {
                    let q = node.free.entry((card, bus)).or_default();
                    let Some(at) = q.iter().position(|(_, c)| *c == chip) else { continue };
                    let (block, _) = q.remove(at).expect("a position in the queue");
                    node.segments.insert((card, bus, chip, block), Segment::default());
                    Open { chip, block, next: 0 }
                }
            };
            self.nodes[nd as usize].turn.insert((card, bus), chip + 1);
            return Ok(Some(self.take(nd, card, bus, o)));
        }
        if cleaning {
            return Err(HostError::InvalidArgument(format!(
                "node {nd} card {card} bus {bus}: no erased block left to clean into"
            )));
        }
        Ok(None)
    }

    /// A page on any bus of `nodes` that has room, cleaning where it can; `Err` when none has.
    fn room_anywhere(&mut self, nodes: &[u32]) -> Result<(u32, FlashAddr)> {
        for &nd in nodes {
            for (card, bus) in self.nodes[nd as usize].buses() {
                loop {
                    if let Some(a) = self.alloc(nd, card, bus, false)? {
                        return Ok((nd, a));
                    }
                    if !self.clean_one(nd, card, bus)? {
                        break;
                    }
                }
            }
        }
        let mut why = format!(
            "no bus of node(s) {nodes:?} has an erased page left or a segment with dead pages to clean (each \
             bus keeps one erased block for cleaning); `insitu fs rm` files to make room"
        );
        let stuck = self.stuck.iter().filter(|(nd, _)| nodes.contains(nd)).count();
        if stuck > 0 {
            why += &format!(
                "; {stuck} segment(s) with dead pages could not be cleaned: a live page of each does not read \
                 back (`insitu fsck` names their files)"
            );
        }
        Err(HostError::FsFull(why))
    }

    /// Pages a put could take on `nodes` (every node if `None`) at the most: each bus's pages less its
    /// live ones, the blocks cleaning set aside, and the erased block it keeps for cleaning.
    pub fn room(&self, node: Option<u32>) -> u64 {
        let mut room = 0;
        for (nd, n) in self.nodes.iter().enumerate() {
            if node.is_some_and(|k| k as usize != nd) {
                continue;
            }
            let i = &n.info;
            let per_bus = i.chips_per_bus as u64 * i.blocks_per_chip * i.pages_per_block as u64;
            // A block set aside by cleaning holds its dead pages too: it is not erased until it is
            // cleaned.
            let mut live: HashMap<(u32, u32), u64> = HashMap::new();
            for (k, seg) in &n.segments {
                let held = if self.stuck.contains(&(nd as u32, *k)) { i.pages_per_block } else { seg.live };
                *live.entry((k.0, k.1)).or_default() += held as u64;
            }
            for bus in n.buses() {
                let held = live.get(&bus).copied().unwrap_or(0) + i.pages_per_block as u64;
                room += per_bus.saturating_sub(held);
            }
        }
        room
    }

    /// Refuses a put of `bytes` as `name` on `node` (every node if `None`) before it writes anything, as
    /// [`Fs::put`] would refuse it: a name that is not valid or taken, a node the appliance does not have,
    /// or bytes that cannot fit ([`Fs::room`]: the error says what it needs and what there is). A put
    /// that passes may still find the room taken by pages cleaning cannot move, and then fails as it would
    /// have, leaving nothing.
    pub fn check_put(&self, name: &str, bytes: u64, node: Option<u32>) -> Result<()> {
        self.check_new_name(name)?;
        if let Some(n) = node {
            self.check_node(n)?;
        }
        let ps = self.page_size() as u64;
        let (need, room) = (bytes.div_ceil(ps), self.room(node));
        if need <= room {
            return Ok(());
        }
        let on = node
            .map_or_else(|| format!("its {} node(s) have", self.nodes.len()), |n| format!("node {n} has"));
        let aside = self.stuck.iter().filter(|(nd, _)| node.is_none_or(|n| n == *nd)).count();
        let aside = match aside {
            0 => String::new(),
            n => format!(", the {n} block(s) cleaning set aside (a live page of each does not read back)"),
        };
        Err(HostError::FsFull(format!(
            "{} needs {need} page(s) of {} and {on} room for {room} (each bus's pages less its live ones{aside} \
             and the erased block it keeps for cleaning); `insitu fs rm` files to make room",
            crate::units::human_bytes(bytes),
            crate::units::human_bytes(ps)
        )))
    }

    fn take(&mut self, nd: u32, card: u32, bus: u32, o: Open) -> FlashAddr {
        let node = &mut self.nodes[nd as usize];
        node.host.insert((card, bus, o.chip), Open { next: o.next + 1, ..o });
        node.segments.get_mut(&(card, bus, o.chip, o.block)).expect("an open segment").written += 1;
        FlashAddr { card, bus, chip: o.chip, block: o.block, page: o.next }
    }

    fn free_on(&self, nd: u32, card: u32, bus: u32) -> usize {
        self.nodes[nd as usize].free.get(&(card, bus)).map_or(0, |q| q.len())
    }

    /// Cleans the segment of (node, card, bus) with the fewest live pages, if one has dead pages: its
    /// live pages move to the bus's write points, the moves are journaled, the block is erased. A write
    /// point whose pages are all dead (a put cut off by a crash wrote them) is erased as it is. Returns
    /// whether it changed anything: a block cleaned, or one set aside because a live page of it does not
    /// read back (it cannot be moved; its file fails to read by name and `insitu fsck` names it), so
    /// that the caller tries again.
    fn clean_one(&mut self, nd: u32, card: u32, bus: u32) -> Result<bool> {
        self.clean_victim(nd, card, bus, false)
    }

    /// [`Fs::clean_one`], of a segment at least half dead only if `half_dead` (what `fs gc` cleans).
    fn clean_victim(&mut self, nd: u32, card: u32, bus: u32, half_dead: bool) -> Result<bool> {
        // A victim must have dead pages, be closed (or all dead), and have no more live pages than the
        // cleaner can take: what its open block has left, and the bus's erased blocks.
        let key = {
            let node = &self.nodes[nd as usize];
            let ppb = node.info.pages_per_block;
            let open_room: u32 = (0..node.info.chips_per_bus)
                .filter_map(|chip| node.host.get(&(card, bus, chip)))
                .map(|o| ppb - o.next.min(ppb))
                .sum();
            let room = open_room as u64 + self.free_on(nd, card, bus) as u64 * ppb as u64;
            // A write point (an open block) is never moved from: its live pages would go to the write
            // points beside it, themselves partly dead, and be moved again.
            node.segments
                .iter()
                .filter(|(k, s)| k.0 == card && k.1 == bus && s.live < s.written)
                .filter(|(k, s)| s.live == 0 || !node.is_open(**k))
                .filter(|(k, s)| s.live as u64 <= room && !self.stuck.contains(&(nd, **k)))
                .filter(|(_, s)| !half_dead || s.live * 2 <= s.written)
                .min_by_key(|(k, s)| (s.live, **k))
                .map(|(k, _)| *k)
        };
        let Some(key) = key else {
            return Ok(false);
        };
        let (_, _, chip, block) = key;
        // The live pages of the victim, with the file and index each holds.
        let mut live: Vec<(String, u32, GlobalPage)> = Vec::new();
        for f in self.index.files.values().chain(self.pending.as_ref()) {
            for (i, p) in f.pages.iter().enumerate() {
                let a = p.addr;
                if p.node == nd && (a.card, a.bus, a.chip, a.block) == (card, bus, chip, block) {
                    live.push((f.name.clone(), i as u32, *p));
                }
            }
        }
        if !live.is_empty() {
            // Every live page is read before any is written: a page that does not read back leaves the
            // block as it is, with nothing programmed for it. Each is checked whole, even if a read checked
            // it before (a page changed since must not move under a fresh checksum).
            let mut read = Vec::new();
            for group in live.chunks(BATCH_PAGES) {
                let addrs: Vec<FlashAddr> = group.iter().map(|l| l.2.addr).collect();
                match self.device(nd)?.call(RawRead { addrs, recheck: true }) {
                    Ok(got) => read.push(got),
                    Err(e) => {
                        let e = HostError::device(nd)(e);
                        if e.kind() != crate::error::ErrorKind::Damaged {
                            return Err(e);
                        }
                        self.stuck.insert((nd, key));
                        return Ok(true);
                    }
                }
            }
            let ps = self.page_size();
            let mut moves = Vec::new();
            for (group, got) in live.chunks(BATCH_PAGES).zip(read) {
                let (data, spares) = got.split_at(group.len() * ps);
                let mut list = Vec::new();
                for (k, (name, index, _)) in group.iter().enumerate() {
                    let s = u64::from_le_bytes(spares[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
                    let to = self.alloc(nd, card, bus, true)?.ok_or_else(|| {
                        HostError::InvalidArgument(format!(
                            "node {nd} card {card} bus {bus}: no block to clean into"
                        ))
                    })?;
                    list.push((to, s));
                    moves.push((name.clone(), *index, GlobalPage { node: nd, addr: to }));
                }
                self.device(nd)?
                    .call(RawWrite { pages: list, data: data.to_vec() })
                    .map_err(HostError::device(nd))?;
            }
            self.device(nd)?.call(RawSync).map_err(HostError::device(nd))?;
            self.array.faults.hit("fs-gc-moved");
            for (name, index, to) in &moves {
                self.append(&Record::Move { name: name.clone(), index: *index, to: *to })?;
            }
            self.sync_journal()?;
            for (name, index, to) in moves {
                let f = match self.pending.as_mut().filter(|f| f.name == name) {
                    Some(f) => f,
                    None => self.index.files.get_mut(&name).expect("a live page's file"),
                };
                f.pages[index as usize] = to;
                self.segment(&to).live += 1;
                self.moved += 1;
            }
            self.maybe_checkpoint();
        }
        self.erase(nd, key)?;
        Ok(true)
    }
}

/// Checks that page `index` of `f`, read from `at`, holds the spare-area value it was written with.
fn check_spare(f: &FsFile, index: usize, at: &GlobalPage, found: u64) -> Result<()> {
    if found == spare(f.id, index as u64) {
        return Ok(());
    }
    Err(HostError::FileDamaged {
        name: f.name.clone(),
        detail: format!(
            "page {index} on node {} (at {at}) holds file {} page {}, not this file's",
            at.node,
            found >> 24,
            found & (MAX_FILE_PAGES - 1)
        ),
    })
}

/// `e`, from reading page `index` of `f`, as an error of the file that names the page, its node and its
/// address.
fn page_error(f: &FsFile, index: usize, e: HostError) -> HostError {
    let at = f.pages[index];
    let why = match e {
        HostError::Device { error, .. } => error.to_string(),
        HostError::FileDamaged { detail, .. } => {
            return HostError::FileDamaged { name: f.name.clone(), detail }
        }
        e => e.to_string(),
    };
    HostError::FileDamaged {
        name: f.name.clone(),
        detail: format!("page {index} on node {} (at {at}): {why}", at.node),
    }
}

/// A record as its journal line: its CRC-32 in hex, its JSON, a newline.
fn record_line(rec: &Record) -> String {
    let body = serde_json::to_string(rec).expect("plain data serializes");
    format!("{:08x} {body}\n", crc32fast::hash(body.as_bytes()))
}

/// Bytes of the journal's first line (its [`Record::Checkpointed`]).
fn first_line_len(journal: &mut File, path: &Path) -> Result<u64> {
    journal.seek(SeekFrom::Start(0)).map_err(|e| HostError::io(path, e))?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while journal.read(&mut byte).map_err(|e| HostError::io(path, e))? == 1 {
        head.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    Ok(head.len() as u64)
}

/// The error for a checkpoint gone while the journal says one holds the files before it.
fn missing_checkpoint(path: &Path, files: u64) -> HostError {
    corrupt(
        path,
        format!(
            "the checkpoint is missing (both copies), while the journal says one holds the file system's \
             {files} file(s) as of its start: they would be lost, and cleaning would erase their pages. \
             Nothing was changed; put the checkpoint back, or let `insitu fsck --repair` drop that record \
             (those files are then lost)"
        ),
    )
}

/// One journal line's record, if the line is whole (ends in a newline) and its checksum and body are good.
fn parse_line(line: &[u8]) -> Option<Record> {
    let l = std::str::from_utf8(line.strip_suffix(b"\n")?).ok()?;
    let (crc, body) = l.split_once(' ')?;
    let crc = u32::from_str_radix(crc, 16).ok()?;
    (crc32fast::hash(body.as_bytes()) == crc).then(|| serde_json::from_str::<Record>(body).ok())?
}

/// What a journal holds: its records up to the first damaged line, and whether that line is damage.
struct JournalScan {
    records: Vec<Record>,
    /// Bytes of whole, good records before the first damaged line (the journal's length if none is).
    valid: u64,
    /// Why the damaged line at `valid` is damage, not a record cut off by a crash, if it is. A killed
    /// process leaves its last write cut short: whole records, then part of one, without its newline
    /// (each record is one write, its newline last). So a torn tail is one last line without its
    /// newline; any damaged line that ends in a newline (whole, but failing its checksum), or one with a
    /// good record after it, is damage.
    damage: Option<String>,
}

/// Reads the journal's lines; see [`JournalScan`].
fn scan_journal(journal: &mut File, path: &Path) -> Result<JournalScan> {
    journal.seek(SeekFrom::Start(0)).map_err(|e| HostError::io(path, e))?;
    let mut bytes = Vec::new();
    journal.read_to_end(&mut bytes).map_err(|e| HostError::io(path, e))?;
    let mut lines = bytes.split_inclusive(|&b| b == b'\n');
    let mut records = Vec::new();
    let mut valid = 0usize;
    let mut damage = None;
    for l in lines.by_ref() {
        match parse_line(l) {
            Some(r) => {
                records.push(r);
                valid += l.len();
            }
            None if valid + l.len() == bytes.len() && !l.ends_with(b"\n") => break,
            None => {
                let mut at = valid + l.len();
                for next in lines.by_ref() {
                    if parse_line(next).is_some() {
                        damage = Some(format!(
                            "the record at byte {valid} is damaged and a valid record follows at byte {at}"
                        ));
                        break;
                    }
                    at += next.len();
                }
                damage.get_or_insert_with(|| {
                    format!("the record at byte {valid} is whole (it ends its line) but fails its checksum")
                });
                break;
            }
        }
    }
    Ok(JournalScan { records, valid: valid as u64, damage })
}

/// The error for a journal gone from a file system in use (see [`Fs::open`]).
fn missing_journal(path: &Path) -> HostError {
    corrupt(
        path,
        "the journal is missing, while the file system has a checkpoint or pages on its nodes: the files \
         it named would be lost, and cleaning would erase their pages. Nothing was changed; put the journal \
         back, or let `insitu fsck --repair` start an empty one (the files put or removed since the last \
         checkpoint are then lost)"
            .into(),
    )
}

/// The error for a journal damaged inside (see [`JournalScan::damage`]).
fn damaged_journal(path: &Path, why: &str) -> HostError {
    corrupt(
        path,
        format!(
            "{why}: damage inside the journal, not a record cut off at its end by a crash. Nothing was \
             changed; `insitu fsck --repair` drops the damaged record and keeps the others (the change it \
             recorded is lost: a file put, removed, or a page moved), keeping the whole journal beside it"
        ),
    )
}

/// Applies the journal's records to `index`; returns the length of its valid part, and the files of the
/// checkpoint it says holds what came before it, if it says so. A journal damaged inside is refused by
/// name (nothing is cut: see [`repair`]).
fn replay(
    journal: &mut File,
    path: &Path,
    index: &mut Index,
    report: &mut FsReport,
) -> Result<(u64, Option<u64>)> {
    let scan = scan_journal(journal, path)?;
    if let Some(why) = &scan.damage {
        return Err(damaged_journal(path, why));
    }
    let mut checkpointed = None;
    for rec in scan.records {
        match rec {
            Record::Checkpointed { files } => {
                checkpointed = Some(files);
                continue;
            }
            Record::Put(f) => {
                index.next_id = index.next_id.max(f.id + 1);
                index.files.insert(f.name.clone(), f);
            }
            Record::Remove { name } => {
                index.files.remove(&name);
            }
            Record::Move { name, index: i, to } => {
                if let Some(p) = index.files.get_mut(&name).and_then(|f| f.pages.get_mut(i as usize)) {
                    *p = to;
                }
            }
        }
        report.journal_records += 1;
    }
    Ok((scan.valid, checkpointed))
}

/// With the user's consent (`insitu fsck --repair`), mends the file system's metadata in the appliance
/// directory `dir` where it stops the file system from opening: a journal damaged inside loses its
/// damaged records and keeps its good ones, after the whole journal is kept beside it
/// (`journal.damaged-at-OFFSET`); a missing journal is started again, empty. Says what it did; nothing when there was nothing to do.
pub fn repair(dir: &Path) -> Result<Vec<String>> {
    let fs_dir = dir.join("fs");
    // An appliance's nodes have raw partitions: its file system's folder may be gone with its metadata.
    if !fs_dir.is_dir() && !dir.join("dev0").join("raw").is_dir() {
        return Ok(Vec::new());
    }
    // Held while the journal is rewritten: a process with the file system open appends to it.
    let _held = crate::array::lock(dir)?;
    std::fs::create_dir_all(&fs_dir).map_err(|e| HostError::io(&fs_dir, e))?;
    let path = fs_dir.join("journal");
    let mut journal = match OpenOptions::new().read(true).write(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let (_, checkpoint, _) = read_index(&fs_dir.join("index.json")).unwrap_or_default();
            let nodes_written = (0..)
                .map(|i| dir.join(format!("dev{i}")))
                .take_while(|d| d.is_dir())
                .any(|d| std::fs::metadata(d.join("raw").join("nand.img")).is_ok_and(|m| m.blocks() > 0));
            if checkpoint == 0 && !nodes_written {
                return Ok(Vec::new());
            }
            File::create(&path).and_then(|f| f.sync_all()).map_err(|e| HostError::io(&path, e))?;
            return Ok(vec![format!(
                "file system: its journal was missing: started an empty one (files put or removed since its \
                 last checkpoint, {}, are lost; their pages are dead, for cleaning)",
                fs_dir.join("index.json").display()
            )]);
        }
        Err(e) => return Err(HostError::io(&path, e)),
    };
    let scan = scan_journal(&mut journal, &path)?;
    if scan.damage.is_none() {
        // A journal that says a checkpoint holds the files before it, with no checkpoint beside it: that
        // record goes, with the user's consent (those files are lost; their pages are dead).
        let (_, checkpoint, _) = read_index(&fs_dir.join("index.json")).unwrap_or_default();
        let said = scan.records.iter().find_map(|r| match r {
            Record::Checkpointed { files } => Some(*files),
            _ => None,
        });
        if let (Some(files), 0) = (said, checkpoint) {
            let bytes = std::fs::read(&path).map_err(|e| HostError::io(&path, e))?;
            let kept: Vec<u8> = bytes
                .split_inclusive(|&b| b == b'\n')
                .filter(|l| !matches!(parse_line(l), Some(Record::Checkpointed { .. })))
                .flatten()
                .copied()
                .collect();
            insitu_device::write_atomic(&path, &kept).map_err(|e| corrupt(&path, e.to_string()))?;
            return Ok(vec![format!(
                "file system: its checkpoint was missing: the {files} file(s) it held are lost (their pages are \
                 dead, for cleaning); the journal's later records are kept"
            )]);
        }
        return Ok(Vec::new());
    }
    let kept = fs_dir.join(format!("journal.damaged-at-{}", scan.valid));
    std::fs::copy(&path, &kept)
        .and_then(|_| File::open(&kept)?.sync_all())
        .map_err(|e| HostError::io(&kept, e))?;
    // The good records stay, in their order: each is a whole change (a file put with all its pages, a
    // file removed, a page moved), so a damaged one loses that change alone. `fsck` then reads every
    // file's pages back against their spare areas, and names a file the lost change leaves wrong.
    let bytes = std::fs::read(&path).map_err(|e| HostError::io(&path, e))?;
    let (mut good, mut dropped, mut records) = (Vec::with_capacity(bytes.len()), Vec::new(), 0usize);
    let mut at = 0usize;
    for l in bytes.split_inclusive(|&b| b == b'\n') {
        match parse_line(l) {
            Some(_) => {
                good.extend_from_slice(l);
                records += 1;
            }
            None => dropped.push(at),
        }
        at += l.len();
    }
    insitu_device::write_atomic(&path, &good).map_err(|e| corrupt(&path, e.to_string()))?;
    Ok(vec![format!(
        "file system: dropped {} damaged record(s) of its journal (at byte {}) and kept the {} good ones; \
         the whole journal is kept as {}",
        dropped.len(),
        dropped.iter().map(usize::to_string).collect::<Vec<_>>().join(", byte "),
        records,
        kept.display()
    )])
}

/// The first line of a checkpoint: its body's CRC-32 follows, in hex (a checkpoint written before it
/// is the JSON alone).
const INDEX_HEADER: &str = "insitu-fs index crc32=";

/// One copy of the checkpoint, checked.
fn read_index_copy(path: &Path) -> Result<Option<(Index, u64)>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HostError::io(path, e)),
    };
    let json = insitu_device::checked_body(INDEX_HEADER, &bytes).map_err(|why| corrupt(path, why))?;
    let index = serde_json::from_slice(json).map_err(|e| corrupt(path, e.to_string()))?;
    Ok(Some((index, bytes.len() as u64)))
}

/// The file system's index checkpoint, and its size in bytes (none yet: empty): from `path`, or from
/// its second copy when `path` is damaged or gone (the two are written one after the other, and the
/// journal emptied after both, so either holds every change the journal no longer does); also, then,
/// why the first could not be read.
fn read_index(path: &Path) -> Result<(Index, u64, Option<String>)> {
    let copy = crate::catalog::second_copy(path);
    match read_index_copy(path) {
        Ok(Some((index, len))) => Ok((index, len, None)),
        Ok(None) if !copy.exists() => Ok((Index::default(), 0, None)),
        // Only a first copy that is damaged or gone is replaced by the second: any other error is its own.
        Err(e @ HostError::Io { .. }) => Err(e),
        first => {
            let why = match first {
                Err(e) => e.to_string(),
                _ => format!("{} is missing", path.display()),
            };
            match read_index_copy(&copy) {
                Ok(Some((index, len))) => Ok((index, len, Some(why))),
                Ok(None) => Err(corrupt(path, why)),
                Err(e) => Err(corrupt(path, format!("{why}; its second copy too: {e}"))),
            }
        }
    }
}

/// The files of `array`'s file system as its index and journal hold them, read without asking the nodes
/// and writing nothing: a listing while a node is offline (a torn journal tail is left for
/// [`Fs::open`] to cut).
pub fn catalog(array: &Array) -> Result<Vec<FsFile>> {
    let dir = array.dir().join("fs");
    let (mut index, index_bytes, _) = read_index(&dir.join("index.json"))?;
    let path = dir.join("journal");
    match File::open(&path) {
        Ok(mut journal) => {
            let (_, checkpointed) = replay(&mut journal, &path, &mut index, &mut FsReport::default())?;
            if let Some(files) = checkpointed.filter(|_| index_bytes == 0) {
                return Err(missing_checkpoint(&dir.join("index.json"), files));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && index_bytes > 0 => {
            return Err(missing_journal(&path));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(HostError::io(&path, e)),
    }
    Ok(index.files.into_values().collect())
}

/// Every node's blocks, from its raw partition. A node whose device is offline is listed as down, with
/// the others' geometry (an appliance's nodes are alike); with no node online, the first one's error.
fn read_nodes(array: &Array, report: &mut FsReport) -> Result<Vec<Node>> {
    let mut nodes = Vec::new();
    let mut down = Vec::new();
    for i in 0..array.device_count() as u32 {
        match array.device(i) {
            Ok(d) => nodes.push(Some(node_of(d.call(RawIdentify).map_err(HostError::device(i))?, report))),
            Err(e) => {
                nodes.push(None);
                down.push((i, e));
            }
        }
    }
    let Some(like) = nodes.iter().flatten().next().map(|n| n.info.clone()) else {
        return Err(down
            .into_iter()
            .next()
            .map_or_else(|| HostError::InvalidArgument("the appliance has no nodes".into()), |(_, e)| e));
    };
    let mut why: HashMap<u32, String> = down.into_iter().map(|(i, e)| (i, e.to_string())).collect();
    Ok(nodes
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            n.unwrap_or_else(|| Node {
                info: RawInfo { written: Vec::new(), ..like.clone() },
                segments: HashMap::new(),
                free: HashMap::new(),
                host: HashMap::new(),
                turn: HashMap::new(),
                down: why.remove(&(i as u32)),
            })
        })
        .collect())
}

/// A node's blocks as its raw partition reports them: blocks with pages are segments; on each chip, the
/// first partly programmed one becomes the write point again; the others are erased and free.
fn node_of(info: RawInfo, report: &mut FsReport) -> Node {
    let mut segments = HashMap::new();
    let mut host = HashMap::new();
    for (a, written) in &info.written {
        segments.insert((a.card, a.bus, a.chip, a.block), Segment { written: *written, live: 0 });
        if *written < info.pages_per_block {
            if let std::collections::hash_map::Entry::Vacant(e) = host.entry((a.card, a.bus, a.chip)) {
                e.insert(Open { chip: a.chip, block: a.block, next: *written });
                report.resumed_segments += 1;
            }
        }
    }
    let mut free: HashMap<(u32, u32), VecDeque<(u64, u32)>> = HashMap::new();
    for card in 0..info.cards {
        for bus in 0..info.buses_per_card {
            let q = free.entry((card, bus)).or_default();
            for block in 0..info.blocks_per_chip {
                for chip in 0..info.chips_per_bus {
                    if !segments.contains_key(&(card, bus, chip, block)) {
                        q.push_back((block, chip));
                    }
                }
            }
        }
    }
    Node { info, segments, free, host, turn: HashMap::new(), down: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::OpenOptions;

    fn appliance(dir: &Path) -> Array {
        crate::bluedbm::small_appliance(dir, 2, 4 << 20)
    }

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
    }

    #[test]
    fn checkpoints_hold_every_change_journaled_before_them() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        {
            let mut fs = Fs::open(&array).unwrap();
            // Every change ends with a checkpoint.
            (fs.checkpoint_after, fs.journal_share) = (1, u64::MAX);
            fs.put("a", &mut &bytes(30_000, 1)[..], None).unwrap();
            fs.put("b", &mut &bytes(70_000, 2)[..], None).unwrap();
            fs.remove("a").unwrap();
            fs.put("c", &mut &bytes(10, 3)[..], Some(1)).unwrap();
            assert_eq!(fs.since_checkpoint(), 0, "the journal was emptied into the checkpoint");
        }
        array.close().unwrap();
        let array = Array::open(dir.path(), OpenOptions::default()).unwrap();
        let fs = Fs::open(&array).unwrap();
        let names: Vec<&str> = fs.files().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["b", "c"]);
        let mut out = Vec::new();
        fs.get("b", &mut out).unwrap();
        assert_eq!(out, bytes(70_000, 2));
        let ids: Vec<u64> = fs.files().map(|f| f.id).collect();
        assert!(ids.iter().all(|id| *id < fs.index.next_id), "ids are never given out twice: {ids:?}");
        assert!(fs.report().damaged.is_empty());
    }

    /// The checkpoint is checksummed and kept twice: a damaged or missing first copy is mended from the
    /// second (the damaged one kept), both damaged are refused by name, and a checkpoint written before
    /// the checksum (the JSON alone) is still read.
    #[test]
    fn a_damaged_checkpoint_is_mended_from_its_second_copy() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        {
            let mut fs = Fs::open(&array).unwrap();
            (fs.checkpoint_after, fs.journal_share) = (1, u64::MAX);
            fs.put("a", &mut &bytes(30_000, 1)[..], None).unwrap();
            fs.put("b", &mut &bytes(20_000, 2)[..], None).unwrap();
            assert_eq!(fs.since_checkpoint(), 0);
        }
        let first = dir.path().join("fs").join("index.json");
        let copy = crate::catalog::second_copy(&first);
        let good = std::fs::read(&first).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), good);
        let names = |fs: &Fs| fs.files().map(|f| f.name.clone()).collect::<Vec<_>>();
        // A digit changed in a page address: still JSON, but not the checkpoint written.
        let at = good.iter().rposition(|b| b.is_ascii_digit()).unwrap();
        let mut bad = good.clone();
        bad[at] = if bad[at] == b'9' { b'8' } else { bad[at] + 1 };
        for damage in [Some(&bad), None] {
            match damage {
                Some(b) => std::fs::write(&first, b).unwrap(),
                None => std::fs::remove_file(&first).unwrap(),
            }
            let fs = Fs::open(&array).unwrap();
            assert_eq!(names(&fs), ["a", "b"]);
            assert!(fs.report().notes.iter().any(|n| n.contains("restored from its second copy")));
            assert_eq!(std::fs::read(&first).unwrap(), good, "mended");
            let mut out = Vec::new();
            fs.get("a", &mut out).unwrap();
            assert_eq!(out, bytes(30_000, 1));
        }
        assert_eq!(
            std::fs::read(first.with_extension("json.damaged")).unwrap(),
            bad,
            "the damaged file is kept"
        );
        std::fs::write(&first, &bad).unwrap();
        std::fs::write(&copy, &bad).unwrap();
        let Err(e) = Fs::open(&array) else { panic!("both copies damaged, yet it opened") };
        let e = e.to_string();
        assert!(e.contains("checksum mismatch") && e.contains("second copy"), "{e}");
        // The format before the checksum: the JSON alone, one copy.
        let json = &good[good.iter().position(|b| *b == b'\n').unwrap() + 1..];
        std::fs::write(&first, json).unwrap();
        std::fs::remove_file(&copy).unwrap();
        let fs = Fs::open(&array).unwrap();
        assert_eq!(names(&fs), ["a", "b"]);
        assert!(fs.report().notes.is_empty());
        drop(fs);
        array.close().unwrap();
    }

    /// A checkpoint empties the journal down to a record that says so: with both copies of the checkpoint
    /// gone, the file system is refused by name (its files would be lost and their pages erased), until
    /// the repair drops that record; the changes after it are kept.
    #[test]
    fn a_journal_that_says_a_checkpoint_holds_its_files_refuses_to_open_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        {
            let mut fs = Fs::open(&array).unwrap();
            (fs.checkpoint_after, fs.journal_share) = (1, u64::MAX);
            fs.put("a", &mut &bytes(30_000, 1)[..], None).unwrap();
            assert_eq!(fs.since_checkpoint(), 0);
            assert!(fs.journal_len > 0, "the journal says a checkpoint holds the rest");
            fs.checkpoint_after = u64::MAX;
            fs.put("b", &mut &bytes(20_000, 2)[..], None).unwrap();
        }
        let first = dir.path().join("fs").join("index.json");
        std::fs::remove_file(&first).unwrap();
        std::fs::remove_file(crate::catalog::second_copy(&first)).unwrap();
        let Err(e) = Fs::open(&array) else { panic!("opened without its checkpoint") };
        assert!(e.to_string().contains("the checkpoint is missing"), "{e}");
        assert!(catalog(&array).unwrap_err().to_string().contains("the checkpoint is missing"));
        drop(array);
        let said = repair(dir.path()).unwrap();
        assert!(said.iter().any(|n| n.contains("the 1 file(s) it held are lost")), "{said:?}");
        let array = Array::open(dir.path(), OpenOptions::default()).unwrap();
        let fs = Fs::open(&array).unwrap();
        assert_eq!(fs.files().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["b"]);
        let mut out = Vec::new();
        fs.get("b", &mut out).unwrap();
        assert_eq!(out, bytes(20_000, 2));
        drop(fs);
        array.close().unwrap();
    }

    #[test]
    fn the_journal_grows_to_half_the_checkpoint_before_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        let mut names = vec!["big".to_string(), "s".to_string()];
        {
            let mut fs = Fs::open(&array).unwrap();
            fs.checkpoint_after = 1;
            fs.put("big", &mut &bytes(400_000, 1)[..], None).unwrap();
            assert_eq!(fs.since_checkpoint(), 0, "the first change is checkpointed");
            let first = fs.checkpoint_bytes;
            fs.put("s", &mut &bytes(10, 2)[..], None).unwrap();
            assert!(
                fs.since_checkpoint() > 0 && fs.since_checkpoint() < first / 2,
                "{} of {first}",
                fs.since_checkpoint()
            );
            // Small changes pile up in the journal until it reaches half the checkpoint.
            while fs.since_checkpoint() > 0 {
                assert!(fs.since_checkpoint() < first / 2, "{} of {first}", fs.since_checkpoint());
                let name = format!("t{}", names.len());
                fs.put(&name, &mut &bytes(10, 3)[..], None).unwrap();
                names.push(name);
                assert!(names.len() < 100);
            }
            assert!(names.len() > 3 && fs.checkpoint_bytes > first, "{names:?}");
            fs.put("last", &mut &bytes(10, 4)[..], None).unwrap();
            names.push("last".into());
        }
        array.close().unwrap();
        // Checkpoint and journal together hold every file.
        let array = Array::open(dir.path(), OpenOptions::default()).unwrap();
        let fs = Fs::open(&array).unwrap();
        let mut got: Vec<String> = fs.files().map(|f| f.name.clone()).collect();
        got.sort();
        names.sort();
        assert_eq!(got, names);
    }

    #[test]
    fn a_file_naming_unprogrammed_pages_is_damaged_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        {
            let mut fs = Fs::open(&array).unwrap();
            fs.put("good", &mut &bytes(20_000, 4)[..], None).unwrap();
            fs.put("bad", &mut &bytes(20_000, 5)[..], None).unwrap();
            // The map names a page that was never programmed (as a lost record would leave it).
            let mut f = fs.file("bad").unwrap().clone();
            f.pages[0].addr.block += 1;
            fs.append(&Record::Put(f)).unwrap();
            fs.sync_journal().unwrap();
        }
        let mut fs = Fs::open(&array).unwrap();
        assert_eq!(fs.report().damaged, ["bad"]);
        let mut out = Vec::new();
        assert!(fs.get("bad", &mut out).is_err());
        let mut out = Vec::new();
        fs.get("good", &mut out).unwrap();
        assert_eq!(out, bytes(20_000, 4));
        fs.remove("bad").unwrap();
        fs.put("again", &mut &bytes(5_000, 6)[..], None).unwrap();
    }

    #[test]
    fn a_files_pages_are_stored_as_numbers_and_read_back_in_both_forms() {
        let page = |node, card, bus, chip, block, page| GlobalPage {
            node,
            addr: FlashAddr { card, bus, chip, block, page },
        };
        let f = FsFile {
            id: 7,
            name: "f".into(),
            size: 20_000,
            pages: vec![page(1, 0, 3, 2, 5_000_000_000, 9), page(0, 1, 7, 0, 0, 0)],
        };
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(
            json["page_table"],
            serde_json::json!([1, 0, 3, 2, 5_000_000_000u64, 9, 0, 1, 7, 0, 0, 0])
        );
        assert!(json.get("pages").is_none());
        assert_eq!(serde_json::from_value::<FsFile>(json).unwrap(), f);
        // As metadata written before the page table holds it: one object a page.
        let old = serde_json::json!({"id": 7, "name": "f", "size": 20_000, "pages": [
            {"node": 1, "card": 0, "bus": 3, "chip": 2, "block": 5_000_000_000u64, "page": 9},
            {"node": 0, "card": 1, "bus": 7, "chip": 0, "block": 0, "page": 0}]});
        assert_eq!(serde_json::from_value::<FsFile>(old).unwrap(), f);
        // A table cut short, or a field too large for its type, is refused by name.
        for bad in [serde_json::json!([1, 0, 3, 2, 5]), serde_json::json!([1, 0, 3, 2, 5, 1u64 << 40])] {
            let err = serde_json::from_value::<FsFile>(
                serde_json::json!({"id": 7, "name": "f", "size": 1, "page_table": bad}),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("file f"), "{err}");
        }
        let both = serde_json::json!({"id": 7, "name": "f", "size": 1, "page_table": [1, 0, 3, 2, 5, 9],
            "pages": [{"node": 1, "card": 0, "bus": 3, "chip": 2, "block": 5, "page": 9}]});
        let err = serde_json::from_value::<FsFile>(both).unwrap_err().to_string();
        assert!(err.contains("file f") && err.contains("twice"), "{err}");
        // The fields in any order, one unknown to this version left aside.
        let shuffled = serde_json::json!({"page_table": [1, 0, 3, 2, 5_000_000_000u64, 9, 0, 1, 7, 0, 0, 0],
            "later": {"x": [1]}, "size": 20_000, "name": "f", "id": 7});
        assert_eq!(serde_json::from_value::<FsFile>(shuffled).unwrap(), f);
        // An empty file has neither.
        let empty = serde_json::json!({"id": 7, "name": "f", "size": 0, "page_table": []});
        assert!(serde_json::from_value::<FsFile>(empty).unwrap().pages.is_empty());
    }

    /// The byte offset in node `node`'s raw image of the first page holding `page` (every page of the
    /// tests' files repeats its first 256 bytes, so any page of a file's data finds one of its pages).
    fn find_in_image(dir: &Path, node: u32, page: &[u8]) -> u64 {
        let image = std::fs::read(dir.join(format!("dev{node}/raw/nand.img"))).unwrap();
        image.windows(page.len()).position(|w| w == page).expect("the page is in the image") as u64
    }

    fn flip(dir: &Path, node: u32, at: u64) {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join(format!("dev{node}/raw/nand.img")));
        let f = f.unwrap();
        let mut b = [0u8];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[!b[0]], at).unwrap();
    }

    #[test]
    fn a_write_point_whose_pages_are_all_dead_is_erased_by_cleaning() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        let mut fs = Fs::open(&array).unwrap();
        fs.put("a", &mut &bytes(3 * 8192, 1)[..], Some(0)).unwrap();
        let p = fs.file("a").unwrap().pages[0];
        fs.remove("a").unwrap();
        let (a, key) = (p.addr, (p.addr.card, p.addr.bus, p.addr.chip, p.addr.block));
        assert!(fs.nodes[0].is_open(key));
        let free = fs.free_on(0, a.card, a.bus);
        // As a put cut off by a crash leaves its write points: open, every page dead. A bus with no
        // erased block but its reserve must get this one back without `fs gc`.
        assert!(fs.clean_one(0, a.card, a.bus).unwrap());
        assert!(!fs.nodes[0].segments.contains_key(&key));
        assert!(!fs.nodes[0].host.contains_key(&(a.card, a.bus, a.chip)), "the write point went with it");
        assert_eq!(fs.free_on(0, a.card, a.bus), free + 1);
        fs.put("b", &mut &bytes(40_000, 2)[..], Some(0)).unwrap();
        let mut out = Vec::new();
        fs.get("b", &mut out).unwrap();
        assert_eq!(out, bytes(40_000, 2));
    }

    /// Node 1's 8 write points (4 buses x 2 chips, 16 pages a block): a file `dead` fills half of each
    /// block, `bad` (64 pages of `bytes(.., 5)`) the other half; `dead` is removed, so every block is closed
    /// with 8 live pages and 8 dead ones.
    fn half_dead(fs: &mut Fs) {
        let ps = 8192;
        fs.put("dead", &mut &bytes(64 * ps, 1)[..], Some(1)).unwrap();
        fs.put("bad", &mut &bytes(64 * ps, 5)[..], Some(1)).unwrap();
        fs.remove("dead").unwrap();
    }

    #[test]
    fn a_page_that_does_not_read_back_is_named_and_cleaning_sets_its_block_aside() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        let ps = 8192;
        let mut fs = Fs::open(&array).unwrap();
        half_dead(&mut fs);
        fs.put("good", &mut &bytes(10 * ps, 9)[..], None).unwrap();
        let at = find_in_image(dir.path(), 1, &bytes(ps, 5));
        flip(dir.path(), 1, at + 100);
        let summary = crate::fsck::check(&array).unwrap();
        let named: Vec<&String> = summary.problems.iter().filter(|p| p.contains("\"bad\"")).collect();
        assert_eq!(named.len(), 1, "{summary:?}");
        assert!(named[0].contains("on node 1") && named[0].contains("checksum"), "{}", named[0]);
        assert!(named[0].contains("1 of its 64 page(s) bad"), "{}", named[0]);
        assert_eq!(summary.problems.len(), 1, "{summary:?}");
        // Reads name the page and its node, whoever reads.
        let mut out = Vec::new();
        let e = fs.get("bad", &mut out).unwrap_err().to_string();
        assert!(e.contains("file \"bad\" is damaged: page") && e.contains("on node 1"), "{e}");
        let e = fs.get_via("bad", 0, Access::IspFlash, &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("on node 1") && e.contains("checksum"), "{e}");
        // Cleaning node 1 moves what it can and sets the damaged block aside, not failing on it.
        let bad = fs.file("bad").unwrap().clone();
        let mut cleaned = 0;
        for (card, bus) in fs.nodes[1].buses() {
            while fs.clean_one(1, card, bus).unwrap() {
                cleaned += 1;
                assert!(cleaned < 100, "cleaning never ends");
            }
        }
        assert_eq!(fs.stuck.len(), 1, "{:?}", fs.stuck);
        let (_, k) = *fs.stuck.iter().next().unwrap();
        assert!(fs.nodes[1].segments.contains_key(&k), "the damaged block is kept");
        let moved = fs.file("bad").unwrap().pages.iter().zip(&bad.pages).filter(|(a, b)| a != b).count();
        assert_eq!(moved, 56, "every page of the other 7 blocks moved");
        let mut out = Vec::new();
        fs.get("good", &mut out).unwrap();
        assert_eq!(out, bytes(10 * ps, 9));
        // Removing the damaged file frees its block for cleaning again; until then the block's dead
        // pages are no room (it holds 8 of `bad`'s live pages and 8 dead ones).
        let room = fs.room(Some(1));
        fs.remove("bad").unwrap();
        assert_eq!(
            fs.room(Some(1)),
            room + 64 + 8,
            "the set-aside block's dead pages count once it is cleanable"
        );
        assert!(fs.stuck.is_empty(), "{:?}", fs.stuck);
        while fs.nodes[1].segments.contains_key(&k) {
            assert!(fs.clean_one(1, k.0, k.1).unwrap(), "the block is cleaned");
        }
        fs.put("after", &mut &bytes(100 * ps, 3)[..], Some(1)).unwrap();
        assert!(crate::fsck::check(&array).unwrap().problems.is_empty());
    }

    #[test]
    fn cleaning_checks_a_page_changed_since_it_was_read_before_it_moves_it() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        let ps = 8192;
        let mut fs = Fs::open(&array).unwrap();
        half_dead(&mut fs);
        // Read whole (so checked) before its byte changes.
        let mut out = Vec::new();
        fs.get("bad", &mut out).unwrap();
        assert_eq!(out, bytes(64 * ps, 5));
        let at = find_in_image(dir.path(), 1, &bytes(ps, 5));
        flip(dir.path(), 1, at + 100);
        for (card, bus) in fs.nodes[1].buses() {
            while fs.clean_one(1, card, bus).unwrap() {}
        }
        assert_eq!(fs.stuck.len(), 1, "the changed page's block is set aside, not moved: {:?}", fs.stuck);
        let e = fs.get("bad", &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("checksum") && e.contains("on node 1"), "{e}");
    }

    #[test]
    fn a_node_that_goes_down_during_a_check_is_one_problem_not_damage() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        let ps = 8192;
        let mut fs = Fs::open(&array).unwrap();
        for k in 0..3 {
            fs.put(&format!("f{k}"), &mut &bytes(40 * ps, k)[..], None).unwrap();
        }
        // A page that fails alone, for a reason other than damage (an index naming an address past the
        // geometry), is that file's problem; the node's other pages are still checked.
        let good = fs.index.files["f1"].pages[3];
        fs.index.files.get_mut("f1").unwrap().pages[3].addr.chip = 99;
        let summary = fs.check();
        assert_eq!(summary.problems.len(), 1, "{summary:?}");
        let p = &summary.problems[0];
        assert!(p.contains("\"f1\"") && p.contains("past the geometry") && p.contains("fs rm f1"), "{p}");
        assert!(p.contains("1 of its 40 page(s) bad"), "{p}");
        fs.index.files.get_mut("f1").unwrap().pages[3] = good;
        assert!(fs.check().problems.is_empty());
        array.device(1).unwrap().close().unwrap();
        let summary = fs.check();
        assert_eq!(summary.problems.len(), 1, "{summary:?}");
        let p = &summary.problems[0];
        assert!(p.contains("could not be read") && p.contains("device 1"), "{p}");
        assert!(!p.contains("damaged") && !p.contains("fs rm"), "{p}");
        // Node 1's pages of the three files went unchecked, each counted once; the others were read.
        let on1: usize = fs.files().map(|f| f.pages.iter().filter(|p| p.node == 1).count()).sum();
        assert!(on1 > 0 && p.starts_with(&format!("file system: {on1} page(s) on node 1")), "{on1}: {p}");
        // A spare-area mismatch names its node too.
        let f = fs.file("f0").unwrap();
        let e = check_spare(f, 0, &f.pages[0], 7).unwrap_err().to_string();
        assert!(e.contains(&format!("on node {}", f.pages[0].node)), "{e}");
    }

    #[test]
    fn a_put_that_cannot_fit_is_refused_before_it_writes() {
        let dir = tempfile::tempdir().unwrap();
        let array = appliance(dir.path());
        let mut fs = Fs::open(&array).unwrap();
        let (ps, room) = (fs.page_size() as u64, fs.room(None));
        // 2 nodes x 4 buses, each keeping one 16-page block of its 2 chips' blocks.
        let i = &fs.nodes[0].info;
        let per_bus = i.chips_per_bus as u64 * i.blocks_per_chip * 16;
        assert_eq!(room, 8 * (per_bus - 16));
        assert_eq!(fs.room(Some(1)), room / 2);
        fs.check_put("next", room * ps, None).unwrap();
        let e = fs.check_put("next", room * ps + 1, None).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::DeviceFull);
        assert!(e.to_string().contains(&format!("have room for {room}")), "{e}");
        // A name that a put would refuse is refused first, whatever the size.
        fs.put("a", &mut &bytes(ps as usize, 1)[..], Some(0)).unwrap();
        let e = fs.check_put("a", room * ps + 1, None).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::AlreadyExists, "{e}");
        let e = fs.check_put("../x", room * ps + 1, None).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::InvalidArgument, "{e}");
        fs.remove("a").unwrap();
        fs.put("a", &mut &bytes(10 * ps as usize, 1)[..], Some(1)).unwrap();
        assert_eq!(fs.room(Some(1)), room / 2 - 10);
        fs.remove("a").unwrap();
        assert_eq!(fs.room(None), room, "dead pages are room: cleaning reclaims them");
        // What the room promises, a put can take whole.
        fs.put("all", &mut &bytes((room * ps) as usize, 2)[..], None).unwrap();
        assert_eq!(fs.room(None), 0);
    }
}
