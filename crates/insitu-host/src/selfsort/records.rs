//! Fixed-size records to sort, deterministic from a seed:
//!
//! - **gensort**: the Sort Benchmark's 100-byte records in gensort's binary layout: a 10-byte random key,
//!   `00 11`, the record number as 32 upper-case hex digits, `88 99 AA BB`, 48 filler bytes (12 hex
//!   digits of the random number, each repeated 4 times), `CC DD EE FF`. The random numbers come from
//!   this seeded generator, not gensort's own, so the records are laid out as gensort's but are not its
//!   byte-for-byte output (valsort's order check applies; its checksum of a given `-b` does not).
//! - **paper**: the Self-Sorting SSD's 16 KB records with 10-byte keys (§IV-A): the key, the record
//!   number in hex, then filler.
//! - **fixed**: any size, key offset and key size: random key bytes, the record number, filler.
//!
//! Keys are uniformly random, or presorted (the paper's "PS" inputs: ascending, evenly spread).

use std::io::Write;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::error::{HostError, Result};

/// A record layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordFormat {
    pub size: u32,
    pub key_offset: u32,
    pub key_size: u32,
    gensort: bool,
}

impl RecordFormat {
    /// The Sort Benchmark's record (gensort's binary layout).
    pub const GENSORT: RecordFormat = RecordFormat { size: 100, key_offset: 0, key_size: 10, gensort: true };
    /// The paper's record: 16 KB with a 10-byte key (§IV-A).
    pub const PAPER: RecordFormat = RecordFormat { size: 16384, key_offset: 0, key_size: 10, gensort: false };

    /// Any fixed layout; the key must lie inside the record.
    pub fn fixed(size: u32, key_offset: u32, key_size: u32) -> Result<RecordFormat> {
        if size == 0 || key_size == 0 || key_offset as u64 + key_size as u64 > size as u64 {
            return Err(HostError::InvalidArgument(format!(
                "records of {size} bytes with a {key_size}-byte key at offset {key_offset}: the key must be \
                 1 or more bytes inside the record"
            )));
        }
        Ok(RecordFormat { size, key_offset, key_size, gensort: false })
    }

    /// `gensort`, `paper`, or `fixed` with the given layout. A named format has its own layout: a size or
    /// key given with it (not 0) must be its own, or it is refused rather than ignored.
    pub fn named(name: &str, size: u32, key_offset: u32, key_size: u32) -> Result<RecordFormat> {
        let own = match name {
            "gensort" => Self::GENSORT,
            "paper" => Self::PAPER,
            "fixed" => return Self::fixed(size, key_offset, key_size),
            other => {
                return Err(HostError::InvalidArgument(format!(
                    "unknown record format {other:?} (gensort, paper, fixed)"
                )))
            }
        };
        let fits = |given: u32, own: u32| given == 0 || given == own;
        if !(fits(size, own.size) && fits(key_offset, own.key_offset) && fits(key_size, own.key_size)) {
            return Err(HostError::InvalidArgument(format!(
                "{name} records are {} bytes with a {}-byte key at offset {}; another layout is the fixed format \
                 (got {size} bytes, a {key_size}-byte key at offset {key_offset})",
                own.size, own.key_size, own.key_offset
            )));
        }
        Ok(own)
    }

    /// Where the key is in a record.
    pub fn key_field(&self) -> std::ops::Range<usize> {
        self.key_offset as usize..(self.key_offset + self.key_size) as usize
    }
}

/// How keys are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    Random,
    /// Ascending and evenly spread over the key space (the paper's presorted inputs).
    Presorted,
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Fills `rec` as record `number` of `count`.
fn fill(fmt: &RecordFormat, rec: &mut [u8], number: u64, count: u64, order: KeyOrder, rng: &mut SmallRng) {
    let r: u128 = rng.gen();
    let key = fmt.key_field();
    match order {
        KeyOrder::Random => {
            for (i, b) in rec[key.clone()].iter_mut().enumerate() {
                *b = (r >> (120 - 8 * (i % 16))) as u8;
            }
        }
        KeyOrder::Presorted => {
            // number * (2^bits / count), big-endian over the key's bytes (at most 16 significant).
            let bits = (8 * key.len()).min(120) as u32;
            let step = (1u128 << bits) / count.max(1) as u128;
            let v = number as u128 * step;
            let k = &mut rec[key.clone()];
            let n = k.len();
            for (i, b) in k.iter_mut().enumerate() {
                let shift = 8 * (n - 1 - i);
                *b = if shift < 128 { (v >> shift) as u8 } else { 0 };
            }
        }
    }
    if fmt.gensort {
        rec[10] = 0x00;
        rec[11] = 0x11;
        for i in 0..32 {
            rec[12 + i] = HEX[((number as u128) >> (124 - 4 * i)) as usize & 0xF];
        }
        rec[44..48].copy_from_slice(&[0x88, 0x99, 0xAA, 0xBB]);
        for i in 0..12 {
            let d = HEX[(r >> (44 - 4 * i)) as usize & 0xF];
            rec[48 + 4 * i..52 + 4 * i].fill(d);
        }
        rec[96..100].copy_from_slice(&[0xCC, 0xDD, 0xEE, 0xFF]);
        return;
    }
    // Outside the key: the record number in hex, then a filler of the random number's bytes.
    let mut at = 0usize;
    let tag: Vec<u8> = (0..16).map(|i| HEX[(number >> (60 - 4 * i)) as usize & 0xF]).collect();
    let filler = r.to_le_bytes();
    for (i, b) in rec.iter_mut().enumerate() {
        if key.contains(&i) {
            continue;
        }
        *b = if at < tag.len() { tag[at] } else { filler[at % 16] };
        at += 1;
    }
}

/// Writes `count` records to `out`; returns the bytes written.
pub fn generate(
    fmt: &RecordFormat,
    count: u64,
    order: KeyOrder,
    seed: u64,
    out: &mut dyn Write,
) -> Result<u64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let size = fmt.size as usize;
    let per = ((1usize << 20) / size).max(1);
    let mut buf = vec![0u8; per * size];
    let mut n = 0u64;
    while n < count {
        let k = per.min((count - n) as usize);
        for (i, rec) in buf[..k * size].chunks_mut(size).enumerate() {
            fill(fmt, rec, n + i as u64, count, order, &mut rng);
        }
        out.write_all(&buf[..k * size]).map_err(|e| HostError::io("output", e))?;
        n += k as u64;
    }
    Ok(count * size as u64)
}

/// The records of `data` in key order, equal keys in record order (the reference every method is held
/// to).
pub fn sort_records(fmt: &RecordFormat, data: &[u8]) -> Vec<u8> {
    let size = fmt.size as usize;
    let k = fmt.key_field();
    let mut idx: Vec<usize> = (0..data.len() / size).collect();
    idx.sort_by(|a, b| data[a * size..][k.clone()].cmp(&data[b * size..][k.clone()]));
    let mut out = Vec::with_capacity(data.len());
    for i in idx {
        out.extend_from_slice(&data[i * size..(i + 1) * size]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gensort_records_have_gensorts_layout() {
        let mut v = Vec::new();
        generate(&RecordFormat::GENSORT, 3, KeyOrder::Random, 1, &mut v).unwrap();
        assert_eq!(v.len(), 300);
        let r = &v[200..300];
        assert_eq!(&r[10..12], &[0x00, 0x11]);
        assert_eq!(&r[12..44], b"00000000000000000000000000000002");
        assert_eq!(&r[44..48], &[0x88, 0x99, 0xAA, 0xBB]);
        assert!(r[48..96].chunks(4).all(|c| c.iter().all(|b| *b == c[0]) && c[0].is_ascii_hexdigit()));
        assert_eq!(&r[96..], &[0xCC, 0xDD, 0xEE, 0xFF]);
        let mut again = Vec::new();
        generate(&RecordFormat::GENSORT, 3, KeyOrder::Random, 1, &mut again).unwrap();
        assert_eq!(v, again, "deterministic from the seed");
    }

    #[test]
    fn presorted_keys_ascend_and_sorting_keeps_equal_keys_in_order() {
        let fmt = RecordFormat::fixed(40, 5, 3).unwrap();
        let mut v = Vec::new();
        generate(&fmt, 1000, KeyOrder::Presorted, 2, &mut v).unwrap();
        let keys: Vec<&[u8]> = v.chunks(40).map(|r| &r[5..8]).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sort_records(&fmt, &v), v);
        assert!(RecordFormat::fixed(8, 4, 5).is_err() && RecordFormat::fixed(0, 0, 1).is_err());
    }
}
