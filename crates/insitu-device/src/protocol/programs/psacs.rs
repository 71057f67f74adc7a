//! Arguments and results of `psacs-shuffle`, the map side of a shuffle inside the device (PSACS, ICCD '21
//! §III-IV).

use std::collections::BTreeMap;

use insitu_kernels::columnar::RecordFormat;
use insitu_kernels::partition::PartitionHash;
use insitu_kernels::shuffle::{ChunkLayout, Codec};
use serde::{Deserialize, Serialize};

use crate::protocol::programs::nascent::TablePart;

/// Hash-partition a table part into `partitions` partitions by sort-based grouping, tiled to device
/// memory, and write `OUT#data` (the partitions' chunks, partition after partition) and `OUT#index` (per
/// partition: rows, offset, then the length of each chunk; little-endian u64).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShuffleArgs {
    pub part: TablePart,
    /// The row format of `part.rows` (bitmap and fields; the key column is inserted as field 0).
    pub row_format: RecordFormat,
    /// Record fields forming the shuffle key, in order.
    pub key_fields: Vec<u32>,
    pub partitions: u32,
    pub hash: PartitionHash,
    pub layout: ChunkLayout,
    pub out: String,
    pub memory_budget: Option<u64>,
    /// How chunks are stored.
    pub codec: Codec,
    /// Attributes of the `OUT#data` object (what the part says of the output it belongs to).
    #[serde(default)]
    pub attrs: BTreeMap<String, String>,
    /// Key fields holding floats, hashed by value (-0.0 as 0.0, one NaN: `shuffle::push_key_field`).
    #[serde(default)]
    pub float_fields: Vec<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleOutput {
    pub rows: u64,
    /// Batches the part was tiled into (1 when it fit device memory).
    pub batches: u64,
    pub stored_bytes: u64,
    /// Bytes before compression.
    pub raw_bytes: u64,
}
