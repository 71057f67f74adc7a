//! What every placement of one sort works from.

use insitu_kernels::keys::SortAlgo;
use insitu_kernels::rowkey::FieldKey;

use crate::catalog::EntryKind;
use crate::table::TableInfo;

#[derive(Debug, Clone, Copy)]
pub struct SortJob<'a> {
    pub table: &'a str,
    pub out: &'a str,
    /// The devices holding the table's parts, part `i` on `devices[i]`.
    pub devices: &'a [u32],
    pub info: &'a TableInfo,
    pub algo: SortAlgo,
    /// The field to sort by when it is not the stored key column: extracted from the rows first.
    pub by: Option<&'a FieldKey>,
    /// What the output is (its parts carry it: see `catalog::part_attrs`).
    pub out_kind: &'a EntryKind,
}
