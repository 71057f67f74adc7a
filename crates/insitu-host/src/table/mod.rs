//! Tables on devices, shared by every system that works on tables (NASCENT's sort, PSACS's shuffle): the
//! schema, NASCENT's hybrid layout (the key column column-wise, the other columns row-wise), import from
//! Parquet/CSV, export to Parquet, and moving parts between the host and the devices.
//!
//! A table's part on a device is a set of objects named `TABLE#SUFFIX`: `#key` (key column: plain values
//! or string bytes), `#keyoff` (string key offsets), `#dict` and `#codes` (dictionary-encoded key),
//! `#rows` (the other columns, row-wise) and `#rowoff` (row offsets when rows vary in size). The catalog
//! entry records the schema and how each part is encoded ([`TableInfo`]).

pub mod export;
pub mod import;
pub mod info;
pub mod layout;
pub mod schema;
pub mod store;

pub use self::info::{KeyEncoding, PartInfo, Partitioning, TableInfo};
