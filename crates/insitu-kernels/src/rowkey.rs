//! One field of a row read as a sort key: how a table is sorted by a column that NASCENT's hybrid layout
//! (§3.5, Fig. 6c) stores row-wise rather than column-wise. The device pulls the field out of every row
//! into a key column the sorters take (the extraction is one more pass of the shuffle kernel over the
//! rows), and the host baselines use the same code.
//!
//! Row format (little-endian, written by the host's table layout): `[null bitmap] field*`, where a
//! fixed-width field takes its width and a variable one is `u32 length | bytes`; bit `j` of the bitmap is
//! set when field `j` is null.
//!
//! Keys come out in one of two forms ([`KeyForm`]):
//! - a column that cannot be null and holds numbers: plain values of its key type (the form a stored key
//!   column has, so the fixed-width sorters run on it unchanged);
//! - anything else: byte strings whose bytewise order is the key order, nulls last: a number is a `0`
//!   byte and its radix image ([`RadixKey`]) big-endian; bytes are themselves, after a `0` byte when the
//!   column may be null; a null is the single byte `1`.

use serde::{Deserialize, Serialize};

use crate::keys::KeyType;
use crate::sort::RadixKey;

/// What a field holds, as a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FieldValue {
    /// A little-endian number of `width` bytes (1, 2, 4 or 8), widened to `key_type` (sign-extended when
    /// the key type is signed).
    Number { width: u32, key_type: KeyType },
    /// Bytes: `width` of them, or `u32 length | bytes` when `None`.
    Bytes { width: Option<u32> },
}

/// Where a field is in a row and how it reads as a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldKey {
    /// Bytes of the null bitmap at the start of every row (0 when there is none).
    pub bitmap: u32,
    /// The field's place among the row's fields (its bit in the bitmap).
    pub index: u32,
    /// The fields before it: a fixed width, or `None` for `u32 length | bytes`.
    pub before: Vec<Option<u32>>,
    pub value: FieldValue,
    /// Whether the field may be null.
    pub nullable: bool,
}

/// The form of the keys [`FieldKey::push`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyForm {
    /// Little-endian values of the key type, back to back.
    Plain(KeyType),
    /// Byte strings in bytewise order; the caller keeps their offsets.
    Bytes,
}

/// A row too short for its fields, or a field that is not what the key says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow(pub String);

impl std::fmt::Display for BadRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadRow {}

/// The radix image of `bits`, the raw bits of a `kt` value (zero-extended).
fn radix(kt: KeyType, bits: u64) -> u64 {
    match kt {
        KeyType::U32 => (bits as u32).to_radix(),
        KeyType::I32 => (bits as u32 as i32).to_radix(),
        KeyType::F32 => f32::from_bits(bits as u32).to_radix(),
        KeyType::U64 => bits.to_radix(),
        KeyType::I64 => (bits as i64).to_radix(),
        KeyType::F64 => f64::from_bits(bits).to_radix(),
    }
}

impl FieldKey {
    /// Checks what the row layout cannot: number widths, and a bitmap wide enough for the field's bit.
    pub fn validate(&self) -> Result<(), BadRow> {
        if let FieldValue::Number { width, key_type } = self.value {
            if !matches!(width, 1 | 2 | 4 | 8) || width as usize > key_type.width() {
                return Err(BadRow(format!(
                    "a {width}-byte field cannot be read as a {} key",
                    key_type.name()
                )));
            }
        }
        if self.nullable && (self.index / 8) >= self.bitmap {
            return Err(BadRow(format!(
                "field {} may be null but the rows' bitmap has {} bytes",
                self.index, self.bitmap
            )));
        }
        if self.before.len() != self.index as usize {
            return Err(BadRow(format!("field {} has {} fields before it", self.index, self.before.len())));
        }
        Ok(())
    }

    /// The form of the keys this field gives.
    pub fn form(&self) -> KeyForm {
        match self.value {
            FieldValue::Number { key_type, .. } if !self.nullable => KeyForm::Plain(key_type),
            _ => KeyForm::Bytes,
        }
    }

    /// Appends the key of `row` to `out` (one value, or one byte string whose end the caller records).
    pub fn push(&self, row: &[u8], out: &mut Vec<u8>) -> Result<(), BadRow> {
        let short = || BadRow(format!("a row of {} bytes is shorter than its fields", row.len()));
        let bitmap = self.bitmap as usize;
        let null = self.nullable
            && row.get(self.index as usize / 8).ok_or_else(short)? & (1 << (self.index % 8)) != 0;
        if null {
            out.push(1);
            return Ok(());
        }
        let mut at = bitmap;
        for w in &self.before {
            at += match w {
                Some(w) => *w as usize,
                None => 4 + le_u32(row, at).ok_or_else(short)? as usize,
            };
        }
        match self.value {
            FieldValue::Number { width, key_type } => {
                let b = row.get(at..at + width as usize).ok_or_else(short)?;
                let mut raw = [0u8; 8];
                raw[..b.len()].copy_from_slice(b);
                let mut bits = u64::from_le_bytes(raw);
                let signed = matches!(key_type, KeyType::I32 | KeyType::I64);
                if signed && (width as usize) < key_type.width() {
                    let shift = 64 - 8 * width;
                    bits = ((bits << shift) as i64 >> shift) as u64;
                }
                let kw = key_type.width();
                if self.nullable {
                    out.push(0);
                    out.extend_from_slice(&radix(key_type, bits).to_be_bytes()[8 - kw..]);
                } else {
                    out.extend_from_slice(&bits.to_le_bytes()[..kw]);
                }
            }
            FieldValue::Bytes { width } => {
                let (from, len) = match width {
                    Some(w) => (at, w as usize),
                    None => (at + 4, le_u32(row, at).ok_or_else(short)? as usize),
                };
                let b = row.get(from..from + len).ok_or_else(short)?;
                if self.nullable {
                    out.push(0);
                }
                out.extend_from_slice(b);
            }
        }
        Ok(())
    }
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of (u8 a, str s nullable, i16 n nullable, f64 x) with a one-byte bitmap.
    fn row(a: u8, s: Option<&str>, n: Option<i16>, x: f64) -> Vec<u8> {
        let mut r = vec![(s.is_none() as u8) << 1 | (n.is_none() as u8) << 2];
        r.push(a);
        let s = s.unwrap_or("");
        r.extend_from_slice(&(s.len() as u32).to_le_bytes());
        r.extend_from_slice(s.as_bytes());
        r.extend_from_slice(&n.unwrap_or(0).to_le_bytes());
        r.extend_from_slice(&x.to_le_bytes());
        r
    }

    fn key(index: u32, value: FieldValue, nullable: bool) -> FieldKey {
        let all = [Some(1), None, Some(2), Some(8)];
        FieldKey { bitmap: 1, index, before: all[..index as usize].to_vec(), value, nullable }
    }

    fn keys_of(k: &FieldKey, rows: &[Vec<u8>]) -> Vec<Vec<u8>> {
        k.validate().unwrap();
        rows.iter()
            .map(|r| {
                let mut out = Vec::new();
                k.push(r, &mut out).unwrap();
                out
            })
            .collect()
    }

    fn rows() -> Vec<Vec<u8>> {
        vec![
            row(7, Some("pear"), Some(-3), 2.5),
            row(1, None, Some(300), -0.0),
            row(200, Some(""), None, -1e300),
            row(7, Some("apple"), Some(-300), f64::NAN),
            row(0, Some("pea"), Some(0), 0.0),
        ]
    }

    #[test]
    fn plain_numbers_are_the_key_types_values() {
        let a = keys_of(&key(0, FieldValue::Number { width: 1, key_type: KeyType::U32 }, false), &rows());
        let want: Vec<Vec<u8>> = [7u32, 1, 200, 7, 0].iter().map(|v| v.to_le_bytes().to_vec()).collect();
        assert_eq!(a, want);
        let x = keys_of(&key(3, FieldValue::Number { width: 8, key_type: KeyType::F64 }, false), &rows());
        assert_eq!(f64::from_le_bytes(x[2].clone().try_into().unwrap()), -1e300);
    }

    #[test]
    fn byte_keys_sort_as_the_values_with_nulls_last() {
        // i16 widened to i32 and sign-extended: the byte order is the numeric order, the null last.
        let n = keys_of(&key(2, FieldValue::Number { width: 2, key_type: KeyType::I32 }, true), &rows());
        let mut order: Vec<usize> = (0..5).collect();
        order.sort_by(|a, b| n[*a].cmp(&n[*b]));
        assert_eq!(order, [3, 0, 4, 1, 2]);
        // Strings: bytewise, a prefix first, the null last.
        let s = keys_of(&key(1, FieldValue::Bytes { width: None }, true), &rows());
        order.sort_by(|a, b| s[*a].cmp(&s[*b]).then(a.cmp(b)));
        assert_eq!(order, [2, 3, 4, 0, 1]);
    }

    #[test]
    fn nullable_floats_keep_the_sorters_total_order() {
        let x = keys_of(&key(3, FieldValue::Number { width: 8, key_type: KeyType::F64 }, true), &rows());
        let vals: Vec<f64> =
            rows().iter().map(|r| f64::from_le_bytes(r[r.len() - 8..].try_into().unwrap())).collect();
        for i in 0..5 {
            for j in 0..5 {
                assert_eq!(x[i].cmp(&x[j]), vals[i].total_cmp(&vals[j]), "{} vs {}", vals[i], vals[j]);
            }
        }
    }

    #[test]
    fn short_rows_and_bad_keys_are_refused() {
        let k = key(3, FieldValue::Number { width: 8, key_type: KeyType::F64 }, false);
        let r = &rows()[0];
        assert!(k.push(&r[..r.len() - 1], &mut Vec::new()).is_err());
        // A length that runs past the row.
        let mut long = r.clone();
        long[2..6].copy_from_slice(&1000u32.to_le_bytes());
        assert!(key(1, FieldValue::Bytes { width: None }, true).push(&long, &mut Vec::new()).is_err());
        assert!(key(0, FieldValue::Number { width: 3, key_type: KeyType::U32 }, false).validate().is_err());
        assert!(key(0, FieldValue::Number { width: 8, key_type: KeyType::U32 }, false).validate().is_err());
        let no_bitmap = FieldKey { bitmap: 0, ..key(0, FieldValue::Bytes { width: Some(1) }, true) };
        assert!(no_bitmap.validate().is_err());
    }
}
