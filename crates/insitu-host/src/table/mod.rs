//! Tables on devices (NASCENT): schema, the hybrid layout, import from Parquet/CSV, export to Parquet, and
//! the sort operator with its placements.
//!
//! A table's part on a device is a set of objects named `TABLE#SUFFIX`:
//! `#key` (key column: plain values or string bytes), `#keyoff` (string key offsets), `#dict` and `#codes`
//! (dictionary-encoded key), `#rows` (the other columns, row-wise) and `#rowoff` (row offsets when rows
//! vary in size). The catalog entry records the schema and how each part is encoded.

pub mod export;
pub mod generate;
pub mod import;
pub mod layout;
pub mod repro;
pub mod schema;
pub mod sort;
pub mod store;

use serde::{Deserialize, Serialize};

use crate::table::schema::TableSchema;

/// A table's description in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableInfo {
    pub schema: TableSchema,
    /// The column stored column-wise (the sort key).
    pub key: usize,
    /// How rows were spread: `round-robin` or `hash:COLUMN`.
    pub partition: String,
    /// One per device of the entry, in the same order.
    pub parts: Vec<PartInfo>,
    /// Set when the table is the output of a sort: each part is sorted by the key.
    #[serde(default)]
    pub sorted: bool,
}

/// How one device's part is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    pub rows: u64,
    /// `plain`, `dict` or `bytes`.
    pub key_encoding: String,
    /// Device key type (`u32`, `i64`, ...) for plain and dict keys.
    pub key_type: Option<String>,
    /// 8 or 16 for dict keys.
    pub code_bits: Option<u32>,
    /// Row size when every row has the same size; else rows have offsets.
    pub row_size: Option<u64>,
    /// Largest row, in bytes (sizes the shuffle's buffers).
    #[serde(default)]
    pub max_row: u64,
    /// Largest byte-string key, in bytes.
    #[serde(default)]
    pub max_key: u64,
}

impl PartInfo {
    /// The device objects of this part.
    pub fn objects(&self, table: &str) -> Vec<String> {
        let mut v = vec![format!("{table}#rows")];
        if self.row_size.is_none() {
            v.push(format!("{table}#rowoff"));
        }
        match self.key_encoding.as_str() {
            "dict" => {
                v.push(format!("{table}#dict"));
                v.push(format!("{table}#codes"));
            }
            "bytes" => {
                v.push(format!("{table}#key"));
                v.push(format!("{table}#keyoff"));
            }
            _ => v.push(format!("{table}#key")),
        }
        v
    }
}
