//! A list's description in the catalog.

use serde::{Deserialize, Serialize};

/// A sorted ID list: `entries` entries of `entry_size` bytes (a 4-byte ID, then the payload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListInfo {
    pub entry_size: u32,
    pub entries: u64,
}
