//! Arguments and results of NASCENT's programs (FPGA '21): `sort` (§3.3-3.4), `dict-decode` (§3.6) and
//! `gather`, the shuffle kernel (§3.5), `extract-key` (a row-wise column as a key column), and how a table part is stored on a device in the hybrid layout
//! (§3.5 Fig. 6c: the key column column-wise, the other columns row-wise).

use insitu_kernels::keys::{KeyType, SortAlgo};
use insitu_kernels::rowkey::FieldKey;
use serde::{Deserialize, Serialize};

use crate::memory::MemHandle;

/// Where a part's key column is and how it is encoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyColumn {
    /// Little-endian values of `key_type`.
    Plain { object: String, key_type: KeyType },
    /// A dictionary page (little-endian u64 values) and a data page of `code_bits`-bit codes (8 or 16);
    /// values decode to `key_type`.
    Dict { dict: String, codes: String, code_bits: u32, key_type: KeyType },
    /// Byte strings: the bytes back to back, and `rows + 1` little-endian u64 offsets.
    Bytes { data: String, offsets: String },
}

/// How rows (or any items) are found in their object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RowShape {
    /// Every item is `size` bytes.
    Fixed { size: u64 },
    /// Items vary in size: `offsets` is an object of `items + 1` little-endian u64 offsets.
    Var { offsets: String },
}

/// One device's part of a table, as objects on that device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TablePart {
    /// The non-key columns, row-wise.
    pub rows: String,
    pub shape: RowShape,
    pub key: KeyColumn,
}

/// Sort a key column into a sorted-indices object `out` (format in `insitu_kernels::keys`), in device
/// memory when it fits, else out of core: sorted runs on flash, then a streaming k-way merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SortArgs {
    pub key: KeyColumn,
    pub algo: SortAlgo,
    pub out: String,
    /// Cap on the device memory the sort may use (default: all that is free).
    pub memory_budget: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortOutput {
    pub rows: u64,
    /// Sorted runs (1 when the column was sorted in device memory).
    pub runs: u64,
}

/// Pull one field out of every row of a part into a key column the sorter takes: plain values of the
/// key type in `out` when the field is a number that cannot be null, else byte strings in `out` with
/// offsets in `out_offsets` (formats in `insitu_kernels::rowkey`). How a table is sorted by a column
/// it stores row-wise; rows stream from flash and the key column streams back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExtractKeyArgs {
    pub rows: String,
    pub shape: RowShape,
    pub field: FieldKey,
    pub out: String,
    pub out_offsets: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractKeyOutput {
    pub rows: u64,
    /// The key column written, for `sort`.
    pub key: KeyColumn,
}

/// Decode a dictionary-encoded column into `out_bits`-bit values (16, 32 or 64) in buffer `out`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DictDecodeArgs {
    pub dict: String,
    pub codes: String,
    pub code_bits: u32,
    pub out_bits: u32,
    pub out: MemHandle,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DictDecodeOutput {
    pub rows: u64,
}

/// The shuffle kernel: item `i` of the output is item `order[start + i]` of `source` (located as `shape`
/// says), for `count` items (default: to the end), into buffer `out`. The source and its offsets are
/// read from flash, or from device memory when the host loaded them there.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GatherArgs {
    pub source: String,
    pub shape: RowShape,
    /// A sorted-indices object.
    pub order: String,
    pub start: u64,
    pub count: Option<u64>,
    pub out: MemHandle,
    pub source_in_memory: Option<MemHandle>,
    pub offsets_in_memory: Option<MemHandle>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatherOutput {
    /// Bytes written to `out`.
    pub bytes: u64,
    pub rows: u64,
    /// For variable items: `rows + 1` offsets of the gathered items in `out`.
    pub offsets: Option<Vec<u64>>,
}
