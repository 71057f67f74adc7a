//! Sorting a key column into *sorted indices* (NASCENT §3.3-3.4): the output pairs each key with the row
//! it came from, in key order, so the shuffle can gather rows (`SortedTable[i] = Table[SortedIndices[i]]`).
//!
//! Two interchangeable implementations that return identical results (ties are broken by row index, so
//! the order is total and unique):
//! - [`argsort_fast`]: LSD radix sort of (key, row) pairs, the fastest CPU path;
//! - [`argsort_bitonic`]: the bitonic network of NASCENT: a P-element sorter whose outputs alternate
//!   ascending / descending, bitonic merges of the sorted arrays up to the sequence-memory capacity, and a
//!   k-way merge of those chunks.
//!
//! Keys of every fixed-width type map to unsigned integers whose order is the keys' order
//! ([`RadixKey`]): signed integers flip their sign bit, floats use the IEEE total order (`-0.0 < +0.0`,
//! NaNs last by sign-and-payload). Strings sort by bytes ([`argsort_strings`]).

pub use crate::indices::SortedIndices;
use crate::merge::kway_merge_runs;

/// A key with an order-preserving map to unsigned bits.
pub trait RadixKey: Copy + Send + Sync + 'static {
    /// Significant bits of [`RadixKey::to_radix`] (32 or 64).
    const BITS: u32;
    /// Unsigned bits whose numeric order is the key order.
    fn to_radix(self) -> u64;
}

impl RadixKey for u32 {
    const BITS: u32 = 32;
    fn to_radix(self) -> u64 {
        self as u64
    }
}

impl RadixKey for i32 {
    const BITS: u32 = 32;
    fn to_radix(self) -> u64 {
        (self as u32 ^ 0x8000_0000) as u64
    }
}

impl RadixKey for f32 {
    const BITS: u32 = 32;
    fn to_radix(self) -> u64 {
        let b = self.to_bits();
        (if b & 0x8000_0000 != 0 { !b } else { b | 0x8000_0000 }) as u64
    }
}

impl RadixKey for u64 {
    const BITS: u32 = 64;
    fn to_radix(self) -> u64 {
        self
    }
}

impl RadixKey for i64 {
    const BITS: u32 = 64;
    fn to_radix(self) -> u64 {
        self as u64 ^ 0x8000_0000_0000_0000
    }
}

impl RadixKey for f64 {
    const BITS: u32 = 64;
    fn to_radix(self) -> u64 {
        let b = self.to_bits();
        if b & 0x8000_0000_0000_0000 != 0 {
            !b
        } else {
            b | 0x8000_0000_0000_0000
        }
    }
}

const DIGIT_BITS: u32 = 11;
const BUCKETS: usize = 1 << DIGIT_BITS;

/// Sorts `keys` into sorted indices with an LSD radix sort (stable, so equal keys keep row order).
/// Rows are numbered from `first_row`.
pub fn argsort_fast<K: RadixKey>(keys: &[K], first_row: u32) -> SortedIndices {
    let n = keys.len();
    assert!(n as u64 + first_row as u64 <= u32::MAX as u64 + 1, "row ids are 32-bit");
    if K::BITS == 32 {
        // Pack (key << 32 | row) into one u64 and sort by the high half only: one 8-byte move per element.
        let mut a = vec![0u64; n];
        let part = n.div_ceil(threads_for(n)).max(1);
        std::thread::scope(|sc| {
            for (c, (out, ks)) in a.chunks_mut(part).zip(keys.chunks(part)).enumerate() {
                sc.spawn(move || {
                    let base = first_row as u64 + (c * part) as u64;
                    for (i, (o, k)) in out.iter_mut().zip(ks).enumerate() {
                        *o = k.to_radix() << 32 | (base + i as u64);
                    }
                });
            }
        });
        radix_sort_u64_by(&mut a, 32, 32);
        SortedIndices::Narrow(a)
    } else {
        let mut a: Vec<(u64, u32)> =
            keys.iter().enumerate().map(|(i, k)| (k.to_radix(), first_row + i as u32)).collect();
        radix_sort_pairs(&mut a);
        SortedIndices::Wide(a)
    }
}

/// Threads for the parallel scatter: below this many elements one thread is faster.
const PARALLEL_MIN: usize = 1 << 20;

fn threads_for(n: usize) -> usize {
    if n < PARALLEL_MIN {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |p| p.get()).min(8)
    }
}

/// Stable LSD radix sort of `a` by bits `shift..shift + bits` of each element, 11 bits a pass, skipping
/// passes whose digit is the same for every element. Large inputs are split among threads
/// ([`crate::arch::radix_pass`]).
fn radix_sort_u64_by(a: &mut Vec<u64>, shift: u32, bits: u32) {
    let n = a.len();
    let passes = bits.div_ceil(DIGIT_BITS) as usize;
    let part = n.div_ceil(threads_for(n)).max(1);
    let mut tmp = vec![0u64; n];
    for p in 0..passes {
        let s = shift + p as u32 * DIGIT_BITS;
        let digit = |x: u64| ((x >> s) as usize) & (BUCKETS - 1);
        if crate::arch::radix_pass(a, &mut tmp, part, BUCKETS, digit) {
            std::mem::swap(a, &mut tmp);
        }
    }
}

fn radix_sort_pairs(a: &mut Vec<(u64, u32)>) {
    let passes = 64usize.div_ceil(DIGIT_BITS as usize);
    let mut hist = vec![[0usize; BUCKETS]; passes];
    for x in a.iter() {
        for (p, h) in hist.iter_mut().enumerate() {
            h[((x.0 >> (p as u32 * DIGIT_BITS)) as usize) & (BUCKETS - 1)] += 1;
        }
    }
    let mut tmp = vec![(0u64, 0u32); a.len()];
    for (p, h) in hist.iter().enumerate() {
        if h.contains(&a.len()) {
            continue;
        }
        let mut offs = [0usize; BUCKETS];
        let mut sum = 0;
        for (o, c) in offs.iter_mut().zip(h.iter()) {
            *o = sum;
            sum += c;
        }
        let s = p as u32 * DIGIT_BITS;
        for x in a.iter() {
            let d = ((x.0 >> s) as usize) & (BUCKETS - 1);
            tmp[offs[d]] = *x;
            offs[d] += 1;
        }
        std::mem::swap(a, &mut tmp);
    }
}

/// Parameters of the bitonic sorter (NASCENT §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitonicConfig {
    /// Elements sorted at once by the P-sorter network (a power of two).
    pub p: usize,
    /// Elements the sequence memory holds: sorted chunks of this size are then k-way merged (a power of
    /// two, at least `p`). NASCENT fits 128K elements in BRAM.
    pub chunk: usize,
}

impl Default for BitonicConfig {
    fn default() -> Self {
        BitonicConfig { p: 64, chunk: 128 << 10 }
    }
}

/// Sorts `keys` into sorted indices with the bitonic network; same output as [`argsort_fast`].
pub fn argsort_bitonic<K: RadixKey>(keys: &[K], first_row: u32, cfg: BitonicConfig) -> SortedIndices {
    assert!(
        cfg.p.is_power_of_two() && cfg.chunk.is_power_of_two() && cfg.chunk >= cfg.p,
        "bad bitonic config"
    );
    let mut runs = Vec::new();
    for (c, part) in keys.chunks(cfg.chunk).enumerate() {
        let base = first_row as u64 + (c * cfg.chunk) as u64;
        let mut pairs: Vec<(u64, u32)> =
            part.iter().enumerate().map(|(i, k)| (k.to_radix(), (base + i as u64) as u32)).collect();
        bitonic_sort_pairs(&mut pairs, cfg.p);
        runs.push(SortedIndices::from_pairs(pairs, K::BITS == 32));
    }
    if runs.is_empty() {
        return SortedIndices::from_pairs([], K::BITS == 32);
    }
    kway_merge_runs(&runs)
}

/// Runs the stages `k = k_from, 2 k_from, ..., k_to` of the bitonic network over items `lo..lo + len`
/// (`len` a power of two, `lo` a multiple of it). For each compared pair `(i, l)`, `i < l`,
/// `compare_swap(i, l, ascending)` puts them in order. Directions depend on the global index, so the
/// P-sorter run block by block and the merge stages run over everything compose into one network.
fn bitonic_stages(
    lo: usize,
    len: usize,
    k_from: usize,
    k_to: usize,
    mut compare_swap: impl FnMut(usize, usize, bool),
) {
    let mut k = k_from;
    while k <= k_to {
        let mut j = k / 2;
        while j > 0 {
            for i in lo..lo + len {
                let l = i ^ j;
                if l > i {
                    compare_swap(i, l, i & k == 0);
                }
            }
            j /= 2;
        }
        k *= 2;
    }
}

/// Sorts `(key, row)` pairs ascending with NASCENT's network: the P-sorter sorts each P-element array
/// (ascending and descending in turn, so neighbours form bitonic sequences), then bitonic merges of sorted
/// arrays double their length until one remains (§3.4, Fig. 4). Pads to a power of two with
/// `(u64::MAX, u32::MAX)` sentinels, which sort last and are dropped.
pub fn bitonic_sort_pairs(a: &mut Vec<(u64, u32)>, p: usize) {
    let n = a.len();
    if n < 2 {
        return;
    }
    let size = n.next_power_of_two();
    a.resize(size, (u64::MAX, u32::MAX));
    let p = p.clamp(2, size);
    let mut cas = |i: usize, l: usize, ascending: bool| {
        if (a[i] > a[l]) == ascending {
            a.swap(i, l);
        }
    };
    for block in (0..size).step_by(p) {
        bitonic_stages(block, p, 2, p, &mut cas);
    }
    bitonic_stages(0, size, 2 * p, size, &mut cas);
    a.truncate(n);
}

/// Sorted indices of byte-string keys (ties by row).
pub fn argsort_strings<S: AsRef<[u8]>>(keys: &[S], first_row: u32) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..keys.len() as u32).collect();
    idx.sort_unstable_by(|a, b| keys[*a as usize].as_ref().cmp(keys[*b as usize].as_ref()).then(a.cmp(b)));
    idx.iter().map(|i| i + first_row).collect()
}

/// Sorted indices of byte-string keys with a comparator-driven bitonic network (same output as
/// [`argsort_strings`]).
pub fn argsort_strings_bitonic<S: AsRef<[u8]>>(keys: &[S], first_row: u32) -> Vec<u32> {
    let n = keys.len();
    if n < 2 {
        return (0..n as u32).map(|i| i + first_row).collect();
    }
    let size = n.next_power_of_two();
    let mut idx: Vec<u32> = (0..size as u32).collect();
    // Padding rows (index >= n) compare greater than every real row.
    let less = |a: u32, b: u32| -> bool {
        match (a as usize >= n, b as usize >= n) {
            (true, true) => a < b,
            (true, false) => false,
            (false, true) => true,
            (false, false) => (keys[a as usize].as_ref(), a) < (keys[b as usize].as_ref(), b),
        }
    };
    bitonic_stages(0, size, 2, size, |i, l, ascending| {
        if less(idx[l], idx[i]) == ascending {
            idx.swap(i, l);
        }
    });
    idx.truncate(n);
    idx.iter().map(|i| i + first_row).collect()
}

/// Naive reference for tests: stable sort of rows by key.
pub fn argsort_naive<K: RadixKey>(keys: &[K], first_row: u32) -> Vec<u32> {
    let mut idx: Vec<u32> = (0..keys.len() as u32).collect();
    idx.sort_by_key(|i| keys[*i as usize].to_radix());
    idx.iter().map(|i| i + first_row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn radix_images_preserve_order() {
        let ints = [i32::MIN, -5, -1, 0, 1, 7, i32::MAX];
        assert!(ints.windows(2).all(|w| w[0].to_radix() < w[1].to_radix()));
        let floats = [f64::NEG_INFINITY, -2.5, -0.0, 0.0, 1e-300, 3.0, f64::INFINITY];
        assert!(floats.windows(2).all(|w| w[0].to_radix() < w[1].to_radix()));
        let f32s = [f32::MIN, -1.0, -0.0, 0.0, 0.5, f32::MAX];
        assert!(f32s.windows(2).all(|w| w[0].to_radix() < w[1].to_radix()));
    }

    #[test]
    fn ties_keep_row_order_in_both_paths() {
        let keys = [3u32, 1, 3, 1, 2];
        let want = vec![1, 3, 4, 0, 2];
        assert_eq!(argsort_fast(&keys, 0).rows(), want);
        assert_eq!(argsort_bitonic(&keys, 0, BitonicConfig { p: 2, chunk: 2 }).rows(), want);
        assert_eq!(argsort_fast(&keys, 10).rows(), want.iter().map(|r| r + 10).collect::<Vec<_>>());
    }

    proptest! {
        #[test]
        fn fast_and_bitonic_agree_with_naive_u32(keys in proptest::collection::vec(0u32..50, 0..600), pe in 0u32..4, ce in 0u32..6) {
            let p = 2usize << pe;
            let cfg = BitonicConfig { p, chunk: p << ce };
            let want = argsort_naive(&keys, 5);
            prop_assert_eq!(&argsort_fast(&keys, 5).rows(), &want);
            let b = argsort_bitonic(&keys, 5, cfg);
            prop_assert_eq!(&b.rows(), &want);
            prop_assert_eq!(b, argsort_fast(&keys, 5));
        }

        #[test]
        fn fast_and_bitonic_agree_with_naive_i64(keys in proptest::collection::vec(any::<i64>(), 0..300)) {
            let want = argsort_naive(&keys, 0);
            prop_assert_eq!(&argsort_fast(&keys, 0).rows(), &want);
            prop_assert_eq!(&argsort_bitonic(&keys, 0, BitonicConfig { p: 8, chunk: 32 }).rows(), &want);
        }

        #[test]
        fn floats_sort_in_total_order(keys in proptest::collection::vec(any::<f64>(), 0..300)) {
            let mut want: Vec<u32> = (0..keys.len() as u32).collect();
            want.sort_by(|a, b| keys[*a as usize].total_cmp(&keys[*b as usize]).then(a.cmp(b)));
            prop_assert_eq!(&argsort_fast(&keys, 0).rows(), &want);
            prop_assert_eq!(&argsort_bitonic(&keys, 0, BitonicConfig::default()).rows(), &want);
        }

        #[test]
        fn string_paths_agree(keys in proptest::collection::vec("[a-c]{0,4}", 0..200)) {
            let mut want: Vec<u32> = (0..keys.len() as u32).collect();
            want.sort_by(|a, b| keys[*a as usize].cmp(&keys[*b as usize]).then(a.cmp(b)));
            prop_assert_eq!(&argsort_strings(&keys, 0), &want);
            prop_assert_eq!(&argsort_strings_bitonic(&keys, 0), &want);
        }
    }
}
