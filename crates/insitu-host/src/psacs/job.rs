//! What every placement of one shuffle works from.

use insitu_kernels::columnar::RecordFormat;

use crate::psacs::options::ShuffleOptions;
use crate::table::TableInfo;

#[derive(Debug, Clone, Copy)]
pub struct ShuffleJob<'a> {
    pub table: &'a str,
    pub out: &'a str,
    /// The devices holding the table's parts, part `i` on `devices[i]`.
    pub devices: &'a [u32],
    pub info: &'a TableInfo,
    /// The row format of the parts (the key column becomes record field 0).
    pub rf: &'a RecordFormat,
    /// Record fields forming the shuffle key.
    pub fields: &'a [usize],
    /// Those of them that hold floats (hashed by value: `shuffle::push_key_field`).
    pub float_fields: &'a [usize],
    pub opts: &'a ShuffleOptions,
    /// What the output is (its parts carry it: see `catalog::part_attrs`).
    pub out_kind: &'a crate::catalog::EntryKind,
}
