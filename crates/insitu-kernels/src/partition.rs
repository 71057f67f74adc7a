//! Hash partitioning (PSACS §III-B): partition id = hash(shuffle key) mod P.
//!
//! Two hashes, chosen by [`PartitionHash`]:
//! - **zigzag-fold**, the paper's Fig. 6 (the figure is missing from our copy; this is our reading of the
//!   text and caption): the key's bits `b_0, b_1, ...` are laid out in rows as wide as the output
//!   (`w = ceil(log2 P)` bits, 10 for P = 1024), every other row reversed (the zigzag), and the rows XORed
//!   together (the fold) into `h_0 .. h_{w-1}`. Zigzagging keeps keys that differ only in high bits of a
//!   row apart from keys that differ in the low bits of the next row.
//! - **xxh3** (64-bit), a standard fast hash, reduced to `0..P` by a multiply-shift.
//!
//! A key is the little-endian bytes of its column value(s); multi-column keys concatenate them.

use serde::{Deserialize, Serialize};

/// Which hash maps keys to partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionHash {
    #[default]
    ZigzagFold,
    Xxh3,
}

impl PartitionHash {
    pub fn name(self) -> &'static str {
        match self {
            PartitionHash::ZigzagFold => "zigzag-fold",
            PartitionHash::Xxh3 => "xxh3",
        }
    }
}

/// Output bits of the zigzag-fold hash for `partitions` partitions.
pub fn fold_bits(partitions: u32) -> u32 {
    (32 - partitions.saturating_sub(1).leading_zeros()).max(1)
}

/// The zigzag-fold hash of `key` into `w` bits (1..=32).
pub fn zigzag_fold(key: &[u8], w: u32) -> u32 {
    debug_assert!((1..=32).contains(&w));
    let mask = if w == 32 { u32::MAX } else { (1u32 << w) - 1 };
    let mut h = 0u32;
    let mut acc = 0u64; // bits not yet folded, lowest first
    let mut have = 0u32;
    let mut row = 0u32;
    let mut fold = |bits: u32, row: u32| {
        // Odd rows run the other way: reverse the w-bit row.
        let r = if row % 2 == 1 { bits.reverse_bits() >> (32 - w) } else { bits };
        h ^= r & mask;
    };
    for b in key {
        acc |= (*b as u64) << have;
        have += 8;
        while have >= w {
            fold((acc as u32) & mask, row);
            row += 1;
            acc >>= w;
            have -= w;
        }
    }
    if have > 0 {
        fold((acc as u32) & mask, row);
    }
    h
}

/// The partition of `key` among `partitions`.
pub fn partition_of(hash: PartitionHash, key: &[u8], partitions: u32) -> u32 {
    match hash {
        PartitionHash::ZigzagFold => zigzag_fold(key, fold_bits(partitions)) % partitions,
        PartitionHash::Xxh3 => {
            let h = xxhash_rust::xxh3::xxh3_64(key);
            ((h as u128 * partitions as u128) >> 64) as u32
        }
    }
}

/// Naive reference of the zigzag-fold hash, bit by bit. For tests.
pub fn zigzag_fold_naive(key: &[u8], w: u32) -> u32 {
    let mut h = 0u32;
    for i in 0..key.len() as u32 * 8 {
        let bit = (key[(i / 8) as usize] >> (i % 8)) as u32 & 1;
        let (row, col) = (i / w, i % w);
        let pos = if row % 2 == 0 { col } else { w - 1 - col };
        h ^= bit << pos;
    }
    h
}

/// Sort-based grouping (PSACS §III-C): the rows of a batch in partition order (stable: rows keep their
/// order within a partition) and the Indexer's extents, `offsets[p]..offsets[p + 1]` being partition `p`'s
/// rows in that order. Memory is the pid array and its sort, whatever the number of partitions (the
/// offsets aside).
pub fn group_by_partition(pids: &[u32], partitions: u32) -> (Vec<u32>, Vec<u64>) {
    let sorted = crate::sort::argsort_fast(pids, 0);
    let mut offsets = vec![0u64; partitions as usize + 1];
    for p in pids {
        offsets[*p as usize + 1] += 1;
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    (sorted.rows(), offsets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fold_width_follows_the_partition_count() {
        assert_eq!(fold_bits(1024), 10);
        assert_eq!(fold_bits(1000), 10);
        assert_eq!(fold_bits(65_536), 16);
        assert_eq!(fold_bits(1), 1);
        assert_eq!(fold_bits(2), 1);
    }

    #[test]
    fn both_hashes_spread_sequential_keys_evenly() {
        for hash in [PartitionHash::ZigzagFold, PartitionHash::Xxh3] {
            let p = 1024u32;
            let mut counts = vec![0u32; p as usize];
            for k in 0..1_000_000u64 {
                counts[partition_of(hash, &k.to_le_bytes(), p) as usize] += 1;
            }
            let (min, max) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
            // ~977 expected per partition; allow generous slack.
            assert!(min > 700 && max < 1300, "{hash:?}: min {min} max {max}");
        }
    }

    #[test]
    fn grouping_is_stable_and_indexed() {
        let pids = [2u32, 0, 2, 1, 0];
        let (order, offsets) = group_by_partition(&pids, 3);
        assert_eq!(order, vec![1, 4, 3, 0, 2]);
        assert_eq!(offsets, vec![0, 2, 3, 5]);
    }

    proptest! {
        #[test]
        fn zigzag_fold_matches_the_bitwise_reference(key in proptest::collection::vec(any::<u8>(), 0..40), w in 1u32..=32) {
            prop_assert_eq!(zigzag_fold(&key, w), zigzag_fold_naive(&key, w));
        }

        #[test]
        fn partitions_are_in_range(key in proptest::collection::vec(any::<u8>(), 0..20), p in 1u32..100_000) {
            prop_assert!(partition_of(PartitionHash::ZigzagFold, &key, p) < p);
            prop_assert!(partition_of(PartitionHash::Xxh3, &key, p) < p);
        }
    }
}
