//! Dictionary encoding (NASCENT §3.6): a column becomes a *dictionary page* of its distinct values and a
//! *data page* of 8- or 16-bit codes, chosen from the number of distinct values; past 65,536 distinct
//! values the column stays plain. Decoding turns codes back into 16-, 32- or 64-bit values, the widths
//! chosen at run time (the decoder's byte-addressable table, §3.6 Fig. 7).

use std::collections::HashMap;

/// Codes of a data page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Codes {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

impl Codes {
    pub fn len(&self) -> usize {
        match self {
            Codes::U8(c) => c.len(),
            Codes::U16(c) => c.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bits per code (8 or 16).
    pub fn bits(&self) -> u32 {
        match self {
            Codes::U8(_) => 8,
            Codes::U16(_) => 16,
        }
    }

    /// The data page as little-endian bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Codes::U8(c) => c.clone(),
            Codes::U16(c) => c.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// Reads a data page of `bits`-bit codes.
    pub fn from_bytes(bits: u32, b: &[u8]) -> Option<Codes> {
        match bits {
            8 => Some(Codes::U8(b.to_vec())),
            16 if b.len().is_multiple_of(2) => {
                Some(Codes::U16(crate::le::words::<2>(b).map(u16::from_le_bytes).collect()))
            }
            _ => None,
        }
    }
}

/// A dictionary-encoded column: distinct values in first-seen order, and one code per row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub dictionary: Vec<u64>,
    pub codes: Codes,
}

/// Most distinct values a dictionary may hold (16-bit codes).
pub const MAX_DICTIONARY: usize = 1 << 16;

/// Encodes a column of (radix images of) values; `None` when it has more than 65,536 distinct values.
pub fn encode(values: &[u64]) -> Option<Encoded> {
    let mut index: HashMap<u64, u32> = HashMap::new();
    let mut dictionary = Vec::new();
    let mut codes32 = Vec::with_capacity(values.len());
    for v in values {
        let next = dictionary.len() as u32;
        let c = *index.entry(*v).or_insert_with(|| {
            dictionary.push(*v);
            next
        });
        if dictionary.len() > MAX_DICTIONARY {
            return None;
        }
        codes32.push(c);
    }
    let codes = if dictionary.len() <= 256 {
        Codes::U8(codes32.iter().map(|c| *c as u8).collect())
    } else {
        Codes::U16(codes32.iter().map(|c| *c as u16).collect())
    };
    Some(Encoded { dictionary, codes })
}

/// A decoded column at the width asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl Decoded {
    /// The values as little-endian bytes of their width (the format of a plain key column).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match self {
            Decoded::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Decoded::U32(v) => crate::le::encode_u32s(v),
            Decoded::U64(v) => crate::le::encode_u64s(v),
        }
    }
}

/// Why a column cannot be decoded as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// A code points past the dictionary.
    CodeOutOfRange { row: usize, code: usize, dictionary: usize },
    /// A dictionary value does not fit the output width.
    TooWide { value: u64, bits: u32 },
    /// Output widths are 16, 32 or 64 bits.
    BadWidth(u32),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::CodeOutOfRange { row, code, dictionary } => {
                write!(f, "row {row}: code {code} is past the dictionary of {dictionary} values")
            }
            DecodeError::TooWide { value, bits } => {
                write!(f, "dictionary value {value} does not fit {bits} bits")
            }
            DecodeError::BadWidth(b) => write!(f, "output width must be 16, 32 or 64 bits, not {b}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes `codes` through `dictionary` into `bits`-bit values (16, 32 or 64).
pub fn decode(dictionary: &[u64], codes: &Codes, bits: u32) -> Result<Decoded, DecodeError> {
    if !matches!(bits, 16 | 32 | 64) {
        return Err(DecodeError::BadWidth(bits));
    }
    if bits < 64 {
        if let Some(v) = dictionary.iter().find(|v| **v >> bits != 0) {
            return Err(DecodeError::TooWide { value: *v, bits });
        }
    }
    let check = |row: usize, code: usize| {
        if code < dictionary.len() {
            Ok(())
        } else {
            Err(DecodeError::CodeOutOfRange { row, code, dictionary: dictionary.len() })
        }
    };
    // The table lookup is the whole kernel; codes are validated in the same pass.
    fn run<C: Copy + Into<usize>, T: Copy>(
        codes: &[C],
        dict: &[u64],
        conv: impl Fn(u64) -> T,
        check: impl Fn(usize, usize) -> Result<(), DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        // The byte-addressable table of §3.6 becomes a table of output-width values, built once.
        let table: Vec<T> = dict.iter().map(|v| conv(*v)).collect();
        let mut out = Vec::with_capacity(codes.len());
        for (row, c) in codes.iter().enumerate() {
            let c: usize = (*c).into();
            check(row, c)?;
            out.push(table[c]);
        }
        Ok(out)
    }
    Ok(match (codes, bits) {
        (Codes::U8(c), 16) => Decoded::U16(run(c, dictionary, |v| v as u16, check)?),
        (Codes::U8(c), 32) => Decoded::U32(run(c, dictionary, |v| v as u32, check)?),
        (Codes::U8(c), _) => Decoded::U64(run(c, dictionary, |v| v, check)?),
        (Codes::U16(c), 16) => Decoded::U16(run(c, dictionary, |v| v as u16, check)?),
        (Codes::U16(c), 32) => Decoded::U32(run(c, dictionary, |v| v as u32, check)?),
        (Codes::U16(c), _) => Decoded::U64(run(c, dictionary, |v| v, check)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn code_width_follows_the_number_of_distinct_values() {
        let small: Vec<u64> = (0..1000).map(|i| i % 200).collect();
        assert_eq!(encode(&small).unwrap().codes.bits(), 8);
        let mid: Vec<u64> = (0..70_000).map(|i| i % 60_000).collect();
        assert_eq!(encode(&mid).unwrap().codes.bits(), 16);
        let big: Vec<u64> = (0..70_000).collect();
        assert!(encode(&big).is_none(), "more than 65,536 distinct values stay plain");
    }

    #[test]
    fn bad_inputs_are_named() {
        assert!(matches!(
            decode(&[1, 2], &Codes::U8(vec![0, 5]), 32),
            Err(DecodeError::CodeOutOfRange { row: 1, .. })
        ));
        assert!(matches!(decode(&[70_000], &Codes::U8(vec![0]), 16), Err(DecodeError::TooWide { .. })));
        assert!(matches!(decode(&[1], &Codes::U8(vec![0]), 8), Err(DecodeError::BadWidth(8))));
    }

    proptest! {
        #[test]
        fn decode_inverts_encode_at_every_width(vals in proptest::collection::vec(0u64..1000, 0..500), wide in any::<bool>()) {
            let vals: Vec<u64> = if wide { vals.iter().map(|v| v * 7919).collect() } else { vals };
            let e = encode(&vals).unwrap();
            let bytes = e.codes.to_bytes();
            let codes = Codes::from_bytes(e.codes.bits(), &bytes).unwrap();
            prop_assert_eq!(decode(&e.dictionary, &codes, 64).unwrap(), Decoded::U64(vals.clone()));
            prop_assert_eq!(decode(&e.dictionary, &codes, 32).unwrap(), Decoded::U32(vals.iter().map(|v| *v as u32).collect()));
            let fits16 = vals.iter().all(|v| *v < 65536);
            prop_assert_eq!(decode(&e.dictionary, &codes, 16).is_ok(), fits16);
        }
    }
}
