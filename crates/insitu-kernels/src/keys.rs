//! Key columns as the devices store and sort them (NASCENT §3.3-3.6): the fixed-width key types with
//! their raw bits, key bytes -> sorted indices with either sorter, and the byte format of sorted indices.
//!
//! Object formats (little-endian):
//! - plain key column: values of the key type, 4 or 8 bytes each;
//! - sorted indices: [`IndexLayout::Narrow`] u64 words `key << 32 | row` (32-bit keys),
//!   [`IndexLayout::Wide`] 12-byte entries (u64 key, u32 row), or [`IndexLayout::Rows`] u32 rows only
//!   (byte-string keys); keys are the order-preserving radix images of [`RadixKey`].

use serde::{Deserialize, Serialize};

use crate::dict::{self, Codes, DecodeError};
use crate::le;
use crate::sort::{argsort_bitonic, argsort_fast, BitonicConfig, RadixKey, SortedIndices};

/// Types a fixed-width key column may have on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
}

impl KeyType {
    pub fn name(self) -> &'static str {
        match self {
            KeyType::U32 => "u32",
            KeyType::I32 => "i32",
            KeyType::F32 => "f32",
            KeyType::U64 => "u64",
            KeyType::I64 => "i64",
            KeyType::F64 => "f64",
        }
    }

    /// Bytes per value.
    pub fn width(self) -> usize {
        match self {
            KeyType::U32 | KeyType::I32 | KeyType::F32 => 4,
            _ => 8,
        }
    }

    /// Whether sorted indices of this type pack into one u64 word.
    pub fn narrow(self) -> bool {
        self.width() == 4
    }

    /// The raw bits of each value of a plain key column, zero-extended to u64.
    pub fn bits_of(self, bytes: &[u8]) -> Vec<u64> {
        if self.narrow() {
            le::words::<4>(bytes).map(|w| u32::from_le_bytes(w) as u64).collect()
        } else {
            le::decode_u64s(bytes)
        }
    }

    /// A plain key column from raw bits (the low `width` bytes of each).
    pub fn bytes_of(self, bits: &[u64]) -> Vec<u8> {
        if self.narrow() {
            bits.iter().flat_map(|b| (*b as u32).to_le_bytes()).collect()
        } else {
            le::encode_u64s(bits)
        }
    }

    /// A dictionary-encoded column decoded into a plain key column of this type.
    pub fn decode_dict(self, dictionary: &[u64], codes: &Codes) -> Result<Vec<u8>, DecodeError> {
        Ok(dict::decode(dictionary, codes, self.width() as u32 * 8)?.to_le_bytes())
    }
}

/// Which sorter turns keys into sorted indices. Both give the same order (ties broken by row).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SortAlgo {
    /// LSD radix sort, the fastest CPU path.
    #[default]
    Fast,
    /// NASCENT's bitonic network.
    Bitonic,
}

impl SortAlgo {
    pub fn name(self) -> &'static str {
        match self {
            SortAlgo::Fast => "fast",
            SortAlgo::Bitonic => "bitonic",
        }
    }
}

fn sort_typed<K: RadixKey>(keys: &[K], first_row: u32, algo: SortAlgo) -> SortedIndices {
    match algo {
        SortAlgo::Fast => argsort_fast(keys, first_row),
        SortAlgo::Bitonic => argsort_bitonic(keys, first_row, BitonicConfig::default()),
    }
}

/// Sorts a plain key column of `kt` (little-endian bytes) into sorted indices, rows numbered from
/// `first_row`.
pub fn sort_key_bytes(bytes: &[u8], kt: KeyType, first_row: u32, algo: SortAlgo) -> SortedIndices {
    match kt {
        KeyType::U32 => sort_typed(&le::decode_u32s(bytes), first_row, algo),
        KeyType::I32 => {
            sort_typed(&le::words::<4>(bytes).map(i32::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
        KeyType::F32 => {
            sort_typed(&le::words::<4>(bytes).map(f32::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
        KeyType::U64 => sort_typed(&le::decode_u64s(bytes), first_row, algo),
        KeyType::I64 => {
            sort_typed(&le::words::<8>(bytes).map(i64::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
        KeyType::F64 => {
            sort_typed(&le::words::<8>(bytes).map(f64::from_le_bytes).collect::<Vec<_>>(), first_row, algo)
        }
    }
}

/// Sorts byte-string keys (bytewise order, ties by row) into rows, numbered from `first_row`.
pub fn sort_byte_keys<S: AsRef<[u8]>>(keys: &[S], first_row: u32, algo: SortAlgo) -> Vec<u32> {
    match algo {
        SortAlgo::Fast => crate::sort::argsort_strings(keys, first_row),
        SortAlgo::Bitonic => crate::sort::argsort_strings_bitonic(keys, first_row),
    }
}

/// The byte format of a sorted-indices object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexLayout {
    /// u64 words `key << 32 | row` (32-bit keys).
    Narrow,
    /// 12-byte entries: u64 key, u32 row.
    Wide,
    /// u32 rows only (byte-string keys).
    Rows,
}

impl IndexLayout {
    /// The layout that sorted indices of `kt` keys take.
    pub fn for_key(kt: KeyType) -> IndexLayout {
        if kt.narrow() {
            IndexLayout::Narrow
        } else {
            IndexLayout::Wide
        }
    }

    /// Bytes per entry.
    pub fn entry_bytes(self) -> u64 {
        match self {
            IndexLayout::Narrow => 8,
            IndexLayout::Wide => 12,
            IndexLayout::Rows => 4,
        }
    }

    /// Parses entries of this layout (rows-only entries get zero keys).
    pub fn decode(self, b: &[u8]) -> SortedIndices {
        match self {
            IndexLayout::Narrow => SortedIndices::Narrow(le::decode_u64s(b)),
            IndexLayout::Rows => {
                SortedIndices::Narrow(le::words::<4>(b).map(|w| u32::from_le_bytes(w) as u64).collect())
            }
            IndexLayout::Wide => SortedIndices::Wide(
                b.chunks_exact(12).map(|c| (le::u64_at(c), le::u32_at(&c[8..]))).collect(),
            ),
        }
    }
}

/// Serializes sorted indices (narrow or wide, as they are).
pub fn encode_sorted(s: &SortedIndices) -> Vec<u8> {
    match s {
        SortedIndices::Narrow(v) => le::encode_u64s(v),
        SortedIndices::Wide(v) => {
            let mut out = Vec::with_capacity(v.len() * 12);
            for (k, r) in v {
                out.extend_from_slice(&k.to_le_bytes());
                out.extend_from_slice(&r.to_le_bytes());
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_indices_round_trip_through_their_byte_format() {
        let keys: Vec<u8> = le::encode_u64s(&[5, 1, 9, 1]);
        let s = sort_key_bytes(&keys, KeyType::U64, 10, SortAlgo::Fast);
        assert_eq!(s.rows(), vec![11, 13, 10, 12]);
        assert_eq!(IndexLayout::Wide.decode(&encode_sorted(&s)), s);
        let narrow = sort_key_bytes(&le::encode_u32s(&[3, 2]), KeyType::U32, 0, SortAlgo::Bitonic);
        assert_eq!(IndexLayout::Narrow.decode(&encode_sorted(&narrow)), narrow);
        assert_eq!(IndexLayout::Rows.decode(&le::encode_u32s(&[4, 2])).rows(), vec![4, 2]);
    }

    #[test]
    fn key_bits_and_dictionaries_decode_to_the_same_column() {
        let bits = vec![7u64, 1 << 20, 7];
        for kt in [KeyType::U32, KeyType::I64] {
            let bytes = kt.bytes_of(&bits);
            assert_eq!(kt.bits_of(&bytes), bits);
            let e = dict::encode(&bits).unwrap();
            assert_eq!(kt.decode_dict(&e.dictionary, &e.codes).unwrap(), bytes);
        }
    }
}
