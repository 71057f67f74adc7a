//! Table schemas: the column types insitu stores, how they map to Arrow, and which can be sort keys.

use std::collections::{BTreeMap, HashMap};

use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use insitu_kernels::keys::KeyType;
use serde::{Deserialize, Serialize};

use crate::error::{HostError, Result};

/// A column type as stored on the devices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    Date32,
    Date64,
    /// Timestamp with unit (`s`, `ms`, `us`, `ns`) and optional time zone.
    Timestamp(String, Option<String>),
    Decimal128(u8, i8),
    Utf8,
    Binary,
    FixedBinary(i32),
}

/// How a key column is sorted on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// Fixed-width: stored as this device key type.
    Fixed(KeyType),
    /// Byte strings (UTF-8 or binary), compared bytewise.
    Bytes,
}

impl ColType {
    /// The stored type of an Arrow type; string-like types (LargeUtf8, Utf8View, dictionaries of strings)
    /// are stored as Utf8 (the caller casts them).
    pub fn from_arrow(dt: &DataType, column: &str) -> Result<ColType> {
        Ok(match dt {
            DataType::Boolean => ColType::Bool,
            DataType::Int8 => ColType::I8,
            DataType::Int16 => ColType::I16,
            DataType::Int32 => ColType::I32,
            DataType::Int64 => ColType::I64,
            DataType::UInt8 => ColType::U8,
            DataType::UInt16 => ColType::U16,
            DataType::UInt32 => ColType::U32,
            DataType::UInt64 => ColType::U64,
            DataType::Float32 => ColType::F32,
            DataType::Float64 => ColType::F64,
            DataType::Date32 => ColType::Date32,
            DataType::Date64 => ColType::Date64,
            DataType::Timestamp(u, tz) => {
                ColType::Timestamp(unit_name(u).into(), tz.as_ref().map(|t| t.to_string()))
            }
            DataType::Decimal128(p, s) => ColType::Decimal128(*p, *s),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColType::Utf8,
            DataType::Dictionary(_, v) if matches!(**v, DataType::Utf8 | DataType::LargeUtf8) => {
                ColType::Utf8
            }
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => ColType::Binary,
            DataType::FixedSizeBinary(n) => ColType::FixedBinary(*n),
            other => {
                return Err(HostError::InvalidArgument(format!(
                    "column {column:?} has type {other}, which insitu tables do not store"
                )))
            }
        })
    }

    pub fn to_arrow(&self) -> DataType {
        match self {
            ColType::Bool => DataType::Boolean,
            ColType::I8 => DataType::Int8,
            ColType::I16 => DataType::Int16,
            ColType::I32 => DataType::Int32,
            ColType::I64 => DataType::Int64,
            ColType::U8 => DataType::UInt8,
            ColType::U16 => DataType::UInt16,
            ColType::U32 => DataType::UInt32,
            ColType::U64 => DataType::UInt64,
            ColType::F32 => DataType::Float32,
            ColType::F64 => DataType::Float64,
            ColType::Date32 => DataType::Date32,
            ColType::Date64 => DataType::Date64,
            ColType::Timestamp(u, tz) => DataType::Timestamp(unit_of(u), tz.as_deref().map(Into::into)),
            ColType::Decimal128(p, s) => DataType::Decimal128(*p, *s),
            ColType::Utf8 => DataType::Utf8,
            ColType::Binary => DataType::Binary,
            ColType::FixedBinary(n) => DataType::FixedSizeBinary(*n),
        }
    }

    /// Bytes a value takes in a row (None for variable-length types).
    pub fn fixed_width(&self) -> Option<usize> {
        Some(match self {
            ColType::Bool | ColType::I8 | ColType::U8 => 1,
            ColType::I16 | ColType::U16 => 2,
            ColType::I32 | ColType::U32 | ColType::F32 | ColType::Date32 => 4,
            ColType::I64 | ColType::U64 | ColType::F64 | ColType::Date64 | ColType::Timestamp(..) => 8,
            ColType::Decimal128(..) => 16,
            ColType::FixedBinary(n) => *n as usize,
            ColType::Utf8 | ColType::Binary => return None,
        })
    }

    /// How the column sorts as a key, or why it cannot.
    pub fn key_kind(&self, column: &str) -> Result<KeyKind> {
        Ok(match self {
            ColType::Bool | ColType::U8 | ColType::U16 | ColType::U32 => KeyKind::Fixed(KeyType::U32),
            ColType::I8 | ColType::I16 | ColType::I32 | ColType::Date32 => KeyKind::Fixed(KeyType::I32),
            ColType::I64 | ColType::Date64 | ColType::Timestamp(..) => KeyKind::Fixed(KeyType::I64),
            ColType::U64 => KeyKind::Fixed(KeyType::U64),
            ColType::F32 => KeyKind::Fixed(KeyType::F32),
            ColType::F64 => KeyKind::Fixed(KeyType::F64),
            ColType::Utf8 | ColType::Binary | ColType::FixedBinary(_) => KeyKind::Bytes,
            ColType::Decimal128(..) => {
                return Err(HostError::InvalidArgument(format!(
                    "key column {column:?} is a 128-bit decimal, which the device sorters do not support \
                     (keys: integers, floats, dates, timestamps, strings)"
                )))
            }
        })
    }
}

fn unit_name(u: &TimeUnit) -> &'static str {
    match u {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    }
}

fn unit_of(s: &str) -> TimeUnit {
    match s {
        "s" => TimeUnit::Second,
        "ms" => TimeUnit::Millisecond,
        "ns" => TimeUnit::Nanosecond,
        _ => TimeUnit::Microsecond,
    }
}

/// The key-value metadata Arrow carries with a schema or a field (pandas keeps a frame's index and
/// dtypes there, under `pandas`): kept with the table and given back with it, in key order.
pub type Metadata = BTreeMap<String, String>;

/// The most metadata a table keeps, keys and values together: it lives in the catalog (and each sorted
/// output and each device's part records keep a copy), which is written again at every change of the
/// array. pandas' own is a few KB, about 200 bytes a column.
pub const METADATA_LIMIT: usize = 64 << 10;

/// One column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub ty: ColType,
    pub nullable: bool,
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

/// A table's columns, and the metadata of its schema.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSchema {
    pub columns: Vec<Column>,
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

fn metadata_of(m: &HashMap<String, String>) -> Metadata {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn metadata_bytes(m: &Metadata) -> usize {
    m.iter().map(|(k, v)| k.len() + v.len()).sum()
}

impl TableSchema {
    pub fn from_arrow(schema: &Schema) -> Result<TableSchema> {
        let columns = schema
            .fields()
            .iter()
            .map(|f| {
                Ok(Column {
                    name: f.name().clone(),
                    ty: ColType::from_arrow(f.data_type(), f.name())?,
                    nullable: f.is_nullable(),
                    metadata: metadata_of(f.metadata()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if columns.is_empty() {
            return Err(HostError::InvalidArgument("the table has no columns".into()));
        }
        for (j, c) in columns.iter().enumerate() {
            if let Some(i) = columns[..j].iter().position(|o| o.name == c.name) {
                return Err(HostError::InvalidArgument(format!(
                    "column name {:?} is used twice (columns {} and {}): give every column its own name",
                    c.name,
                    i + 1,
                    j + 1
                )));
            }
        }
        let metadata = metadata_of(schema.metadata());
        let bytes =
            metadata_bytes(&metadata) + columns.iter().map(|c| metadata_bytes(&c.metadata)).sum::<usize>();
        if bytes > METADATA_LIMIT {
            return Err(HostError::InvalidArgument(format!(
                "the table's schema metadata takes {bytes} bytes, over the {METADATA_LIMIT} a table keeps \
                 (it is stored in the array's catalog): drop it or keep it beside the table"
            )));
        }
        Ok(TableSchema { columns, metadata })
    }

    /// The Arrow schema, with the metadata the table came with.
    pub fn to_arrow(&self) -> Schema {
        let hash = |m: &Metadata| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<HashMap<_, _>>();
        let fields = self
            .columns
            .iter()
            .map(|c| Field::new(&c.name, c.ty.to_arrow(), c.nullable).with_metadata(hash(&c.metadata)))
            .collect::<Vec<_>>();
        Schema::new_with_metadata(fields, hash(&self.metadata))
    }

    /// Index of a column by name, or an error listing the columns.
    pub fn index_of(&self, name: &str) -> Result<usize> {
        self.columns.iter().position(|c| c.name == name).ok_or_else(|| {
            HostError::InvalidArgument(format!(
                "no column {name:?} (columns: {})",
                self.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
            ))
        })
    }
}
