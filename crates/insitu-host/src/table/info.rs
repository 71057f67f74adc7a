//! How a table is described in the catalog: its schema, key column, how rows were spread, and how each
//! device's part is stored.

use insitu_device::protocol::{KeyColumn, RowShape, TablePart};
use std::collections::BTreeMap;

use insitu_kernels::keys::KeyType;
use serde::{Deserialize, Serialize};

use crate::table::schema::{KeyKind, TableSchema};

/// How rows were spread over the devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Partitioning {
    RoundRobin,
    /// By a hash of one column's value.
    Hash {
        column: String,
    },
}

impl std::str::FromStr for Partitioning {
    type Err = crate::error::HostError;

    /// `round-robin` or `hash:COLUMN`.
    fn from_str(s: &str) -> crate::error::Result<Partitioning> {
        match s {
            "round-robin" => Ok(Partitioning::RoundRobin),
            _ => match s.strip_prefix("hash:") {
                Some(c) if !c.is_empty() => Ok(Partitioning::Hash { column: c.to_string() }),
                _ => Err(crate::error::HostError::InvalidArgument(format!(
                    "--partition {s:?}: use round-robin or hash:COLUMN"
                ))),
            },
        }
    }
}

impl Partitioning {
    /// `round-robin` or `hash:COLUMN`.
    pub fn describe(&self) -> String {
        match self {
            Partitioning::RoundRobin => "round-robin".into(),
            Partitioning::Hash { column } => format!("hash:{column}"),
        }
    }
}

/// A table's description in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableInfo {
    pub schema: TableSchema,
    /// The column stored column-wise (the sort key).
    pub key: usize,
    pub partition: Partitioning,
    /// One per device of the entry, in the same order.
    pub parts: Vec<PartInfo>,
    /// Set when the table is the output of a sort: each part is sorted by the key, or by `sorted_by`.
    #[serde(default)]
    pub sorted: bool,
    /// The column a sort's output is sorted by when it is not the key (nulls last, ties in row order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sorted_by: Option<usize>,
}

impl TableInfo {
    /// The column each part is sorted by, if the table is a sort's output.
    pub fn sort_column(&self) -> Option<usize> {
        self.sorted.then_some(self.sorted_by.unwrap_or(self.key))
    }
}

/// How a part's key column is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyEncoding {
    /// Values of the device key type.
    Plain { key_type: KeyType },
    /// A dictionary page and a data page of 8- or 16-bit codes.
    Dict { key_type: KeyType, code_bits: u32 },
    /// Byte strings with offsets; the longest is `max_key` bytes.
    Bytes { max_key: u64 },
}

impl KeyEncoding {
    /// The device key type of fixed-width keys.
    pub fn key_type(&self) -> Option<KeyType> {
        match self {
            KeyEncoding::Plain { key_type } | KeyEncoding::Dict { key_type, .. } => Some(*key_type),
            KeyEncoding::Bytes { .. } => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            KeyEncoding::Plain { .. } => "plain",
            KeyEncoding::Dict { .. } => "dict",
            KeyEncoding::Bytes { .. } => "bytes",
        }
    }
}

/// How one device's part is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    pub rows: u64,
    pub key: KeyEncoding,
    /// Row size when every row has the same size; else rows have offsets.
    pub row_size: Option<u64>,
    /// Largest row, in bytes (sizes the shuffle's buffers).
    pub max_row: u64,
}

impl PartInfo {
    /// The device objects of this part of `table`.
    pub fn objects(&self, table: &str) -> Vec<String> {
        let mut v = vec![format!("{table}#rows")];
        if self.row_size.is_none() {
            v.push(format!("{table}#rowoff"));
        }
        match self.key {
            KeyEncoding::Dict { .. } => {
                v.push(format!("{table}#dict"));
                v.push(format!("{table}#codes"));
            }
            KeyEncoding::Bytes { .. } => {
                v.push(format!("{table}#key"));
                v.push(format!("{table}#keyoff"));
            }
            KeyEncoding::Plain { .. } => v.push(format!("{table}#key")),
        }
        v
    }

    /// Where this part's key column is, for the device programs.
    pub fn key_column(&self, table: &str) -> KeyColumn {
        match self.key {
            KeyEncoding::Plain { key_type } => KeyColumn::Plain { object: format!("{table}#key"), key_type },
            KeyEncoding::Dict { key_type, code_bits } => KeyColumn::Dict {
                dict: format!("{table}#dict"),
                codes: format!("{table}#codes"),
                code_bits,
                key_type,
            },
            KeyEncoding::Bytes { .. } => {
                KeyColumn::Bytes { data: format!("{table}#key"), offsets: format!("{table}#keyoff") }
            }
        }
    }

    /// How this part's rows are found.
    pub fn row_shape(&self, table: &str) -> RowShape {
        match self.row_size {
            Some(size) => RowShape::Fixed { size },
            None => RowShape::Var { offsets: format!("{table}#rowoff") },
        }
    }

    /// The whole part, for the device programs.
    pub fn table_part(&self, table: &str) -> TablePart {
        TablePart { rows: format!("{table}#rows"), shape: self.row_shape(table), key: self.key_column(table) }
    }

    /// Bytes of one fixed-width key value (8 for byte strings, which have none).
    pub fn key_width(&self) -> usize {
        self.key.key_type().map_or(8, KeyType::width)
    }
}

/// How one device's part of a table is stored, worked out from its objects alone (`objs`: their
/// descriptions by suffix, `rows`, `key`...) and the table's schema, for `fsck --repair` when the catalog
/// lost the table; `None` when the objects are not a whole part. Offsets are read (`read`: an object's
/// bytes) to find the longest row and key.
pub(crate) fn part_from_objects(
    table: &str,
    head: &TableInfo,
    objs: &BTreeMap<String, u64>,
    read: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Option<PartInfo> {
    let key_col = head.schema.columns.get(head.key)?;
    let offsets = |s: &str| -> Option<Vec<u64>> {
        let o = insitu_kernels::le::decode_u64s(&read(&format!("{table}#{s}"))?);
        (o.first() == Some(&0) && o.windows(2).all(|w| w[0] <= w[1])).then_some(o)
    };
    let longest = |o: &[u64]| o.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    let (key, rows) = match key_col.ty.key_kind(&key_col.name).ok()? {
        KeyKind::Bytes => {
            let o = offsets("keyoff")?;
            (*o.last()? == *objs.get("key")?).then_some(())?;
            (KeyEncoding::Bytes { max_key: longest(&o) }, o.len() as u64 - 1)
        }
        KeyKind::Fixed(key_type) => match (objs.get("dict"), objs.get("codes"), objs.get("key")) {
            (Some(dict), Some(codes), None) => {
                // The dictionary's size says the codes' width (8 bits up to 256 values, as encoding chose).
                let code_bits = if dict / 8 <= 256 { 8 } else { 16 };
                (KeyEncoding::Dict { key_type, code_bits }, codes / (code_bits as u64 / 8))
            }
            (None, None, Some(key)) => {
                let w = key_type.width() as u64;
                (key % w == 0).then_some(())?;
                (KeyEncoding::Plain { key_type }, key / w)
            }
            _ => return None,
        },
    };
    let size = *objs.get("rows")?;
    let (row_size, max_row) = match objs.contains_key("rowoff") {
        true => {
            let o = offsets("rowoff")?;
            (o.len() as u64 == rows + 1 && *o.last()? == size).then_some(())?;
            (None, longest(&o))
        }
        false => {
            let rs = crate::table::layout::fixed_row_size(&head.schema, head.key)?;
            (rs * rows == size).then_some(())?;
            (Some(rs), rs)
        }
    };
    let part = PartInfo { rows, key, row_size, max_row };
    // Exactly the objects such a part has.
    let want: std::collections::BTreeSet<String> = part.objects(table).into_iter().collect();
    let have: std::collections::BTreeSet<String> = objs.keys().map(|s| format!("{table}#{s}")).collect();
    (want == have).then_some(part)
}
