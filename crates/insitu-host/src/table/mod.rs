//! Tables on devices (NASCENT): schema, the hybrid layout, import from Parquet/CSV, export to Parquet, and
//! the sort operator with its placements.

pub mod layout;
pub mod schema;
