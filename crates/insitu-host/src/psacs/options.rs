//! The options of a shuffle.

use insitu_kernels::partition::PartitionHash;
use insitu_kernels::shuffle::{ChunkLayout, Codec};
use serde::Serialize;

/// Where the shuffle runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShufflePlacement {
    Device,
    HostSort,
    HostBucket,
}

impl ShufflePlacement {
    pub fn name(self) -> &'static str {
        match self {
            ShufflePlacement::Device => "device",
            ShufflePlacement::HostSort => "host-sort",
            ShufflePlacement::HostBucket => "host-bucket",
        }
    }
}

/// Options of `shuffle`.
#[derive(Debug, Clone)]
pub struct ShuffleOptions {
    pub keys: Vec<String>,
    pub partitions: u32,
    pub placement: ShufflePlacement,
    pub threads: usize,
    pub hash: PartitionHash,
    pub layout: ChunkLayout,
    /// How chunks are stored: LZ4 (the default) or as they are.
    pub codec: Codec,
    pub out: Option<String>,
    pub memory_budget: Option<u64>,
}
