//! Arguments and results of `svs`, the Smart SSD list intersection (DaMoN '16 §3): lists stored on the
//! device, read through a small staging buffer ("core memory"), intersected shortest first.

use serde::{Deserialize, Serialize};

use crate::memory::MemHandle;

/// What an intersection returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Returned {
    /// Whole entries (ID and payload) of the first list.
    #[default]
    Entries,
    /// The common IDs (4 bytes each).
    Ids,
    /// Only their number.
    Count,
}

/// Intersect `lists` (entries of `entry_size` bytes: a little-endian u32 ID, then the payload, sorted by
/// ID), keeping only IDs in `lo..hi`; results go to buffer `out` (not needed for a count).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SvsArgs {
    pub lists: Vec<String>,
    pub entry_size: u32,
    pub returned: Returned,
    pub lo: u64,
    pub hi: u64,
    /// Bytes of the staging buffer pages pass through.
    pub staging: u64,
    pub out: Option<MemHandle>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SvsOutput {
    pub count: u64,
    /// Bytes of results written to `out`.
    pub bytes: u64,
}
