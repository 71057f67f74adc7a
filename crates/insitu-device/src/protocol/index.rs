//! Vendor commands of the Self-Sorting SSD firmware (§III-E): configure an index over a range of records,
//! generate it on command in chunks, query it, flush it, read its status. The same operations are also
//! reachable as the paper has them, by writing a command block to the command LBA and reading the status
//! back from it (see [`super::block`]); these typed commands are for programs and the Python
//! front.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::protocol::payload::Payload;
use crate::protocol::request::{request, Queue, Request};

/// The paper's fanout (§IV-B), the B+tree's own.
pub const DEFAULT_FANOUT: u32 = insitu_kernels::btree::PAPER_FANOUT as u32;
/// Records a generate command indexes when the host does not say (§III-E: chunks, so no command runs
/// long enough to time out).
pub const DEFAULT_GENERATE_CHUNK: u64 = 65_536;
/// Indexes a device keeps at once.
pub const MAX_INDEXES: usize = 16;
/// Runs an ActiveSort merge view takes.
pub const MAX_RUNS: usize = 256;

/// What an index is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexKind {
    /// A B+tree over the records' keys (Self-Sorting SSD).
    Tree,
    /// ActiveSort's on-the-fly merge: the records of the range are the host's sorted runs, each stored at
    /// its own LBA region, merged by key as they are read (§IV-C, the paper's baseline).
    Runs(Vec<RunExtent>),
}

/// One sorted run of records, packed from the start of LBA `lba`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunExtent {
    pub lba: u64,
    pub records: u64,
}

/// An index over fixed-size records packed back to back from the start of LBA `base_lba` (records may
/// straddle pages). Reads of the range are served in key order when `active_read` is on (§III-D).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexConfig {
    /// 1..=[`MAX_INDEXES`]; indexes over the same range are the secondary indexes of one another.
    pub id: u32,
    pub base_lba: u64,
    /// Records in the range (0 until records are written; see [`ResizeIndex`]).
    pub records: u64,
    pub record_size: u32,
    pub key_offset: u32,
    pub key_size: u32,
    /// Insert every record written into the range as it arrives (§III-B); otherwise on command.
    pub sort_on_write: bool,
    /// Serve reads of the range in key order (redirected through the index); otherwise as stored.
    pub active_read: bool,
    pub fanout: u32,
    pub kind: IndexKind,
}

impl IndexConfig {
    /// A B+tree index with the paper's fanout, serving reads in key order.
    pub fn tree(id: u32, base_lba: u64, record_size: u32, key_offset: u32, key_size: u32) -> IndexConfig {
        IndexConfig {
            id,
            base_lba,
            records: 0,
            record_size,
            key_offset,
            key_size,
            sort_on_write: false,
            active_read: true,
            fanout: DEFAULT_FANOUT,
            kind: IndexKind::Tree,
        }
    }

    /// Bytes of the range.
    pub fn range_bytes(&self) -> u64 {
        // Saturating: a record count past any device (a typo, 2^64 - 1) is refused by size, not wrapped.
        self.records.saturating_mul(self.record_size as u64)
    }

    /// Logical pages of the range.
    pub fn range_pages(&self, page_size: u32) -> u64 {
        self.range_bytes().div_ceil(page_size as u64)
    }

    /// The key field of a record.
    pub fn key_field(&self) -> std::ops::Range<usize> {
        self.key_offset as usize..(self.key_offset + self.key_size) as usize
    }
}

/// Creates (or replaces) an index; returns its state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigureIndex {
    pub config: IndexConfig,
}

/// Sets the number of records of an index's range (and of every index over the same range), keeping
/// what is indexed: the host says how many records it is about to write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResizeIndex {
    pub index: u32,
    pub records: u64,
}

/// Turns sort-on-write and active read on or off.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetIndexFlags {
    pub index: u32,
    pub sort_on_write: bool,
    pub active_read: bool,
}

/// Sort-on-command (§III-B, §III-E): the device reads up to `max_records` more stored records of the
/// range and inserts their keys. The host repeats it until `done == total`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GenerateIndex {
    pub index: u32,
    pub max_records: u64,
}

/// How far a generate has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenerateProgress {
    pub done: u64,
    pub total: u64,
}

/// Forgets an index (the records stay as they are).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DropIndex {
    pub index: u32,
}

/// Writes every index to the device's reserved flash pages (§III-C), so it is loaded, not rebuilt, at
/// the next open.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlushIndexes;

/// The firmware's state: where its command block is, and every index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexStatus;

/// What a query asks for; keys are `key_size` bytes, bounds inclusive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexQuery {
    /// The records of the smallest key.
    Min,
    /// The records of the largest key.
    Max,
    Range {
        lo: Vec<u8>,
        hi: Vec<u8>,
    },
    /// The records in key order from rank `start` (what an active read of the range returns).
    Ranks {
        start: u64,
        count: u64,
    },
}

/// Runs a query against an index: records `skip..skip + limit` of its answer (in key order), or only
/// the count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryIndex {
    pub index: u32,
    pub query: IndexQuery,
    pub skip: u64,
    pub limit: u64,
    pub count_only: bool,
}

/// A query's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryRows {
    /// Records the query matches in all.
    pub count: u64,
    /// Rank (in key order) of its first match.
    pub first_rank: u64,
    /// The records asked for, back to back (sent as bulk data).
    #[serde(skip)]
    pub records: Vec<u8>,
}

/// The state of one index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexInfo {
    pub config: IndexConfig,
    /// Records in the index.
    pub indexed: u64,
    /// Sort-on-command: records generated so far (the first `generated` of the range).
    pub generated: u64,
    /// Every record of the range is indexed: reads in key order are served.
    pub complete: bool,
    pub height: u32,
    pub leaves: u64,
    pub internal_nodes: u64,
    /// Device memory the index holds (its nodes in the paper's layout).
    pub memory_bytes: u64,
    /// Where it came from at the last open, and anything the firmware noticed.
    pub notes: Vec<String>,
}

/// The Self-Sort firmware's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfSortStatus {
    /// The LBA the command block is written to and the status read from (§III-E).
    pub command_lba: u64,
    /// LBAs the host may use (`0..host_lbas`, the command LBA the last of them).
    pub host_lbas: u64,
    pub page_size: u32,
    /// The firmware's own flash area (index images), above the host's LBAs.
    pub area_lba: u64,
    pub area_pages: u64,
    /// Generation of the last saved state, and whether the indexes match it (no change since).
    pub generation: u64,
    pub saved_clean: bool,
    /// Device memory: the firmware's own (FTL map when it lives there, I/O buffers) and the total.
    pub firmware_memory_bytes: u64,
    pub memory_bytes: u64,
    pub memory_available: u64,
    pub indexes: Vec<IndexInfo>,
}

request!(ConfigureIndex => IndexInfo, Io);
request!(ResizeIndex => IndexInfo, Io);
request!(SetIndexFlags => IndexInfo, Io);
request!(GenerateIndex => GenerateProgress, Io);
request!(DropIndex => (), Io);
request!(FlushIndexes => (), Io);
request!(IndexStatus => SelfSortStatus, Io);

impl Request for QueryIndex {
    type Response = QueryRows;
    const QUEUE: Queue = Queue::Io;

    fn encode_response(mut r: QueryRows) -> Result<Payload> {
        let records = std::mem::take(&mut r.records);
        let mut p = Payload::encode(&r)?;
        p.bulk = records;
        Ok(p)
    }

    fn decode_response(p: Payload) -> Result<QueryRows> {
        let mut r: QueryRows = p.decode()?;
        r.records = p.bulk;
        Ok(r)
    }
}
