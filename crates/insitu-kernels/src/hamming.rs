//! Hamming distance between binary items and the `k` nearest of a stream of them (BlueDBM §7.1: the
//! nearest-neighbour engine compares a query page with every 8 KB item of a hash bucket and returns the
//! index of the closest). Ties go to the lowest index, as `faiss.IndexBinaryFlat` breaks them.

use std::collections::BinaryHeap;

/// Bits that differ between `a` and `b`, which must be the same length (the fastest way this CPU has:
/// [`crate::arch::hamming`]).
pub fn distance(a: &[u8], b: &[u8]) -> u32 {
    crate::arch::hamming(a, b)
}

/// The `k` items closest to a query seen so far, as (distance, index), kept in a max-heap.
#[derive(Debug, Clone)]
pub struct Nearest {
    k: usize,
    heap: BinaryHeap<(u32, u32)>,
}

impl Nearest {
    pub fn new(k: usize) -> Self {
        Nearest { k, heap: BinaryHeap::with_capacity(k.min(1 << 12) + 1) }
    }

    /// Offers item `index` at `dist`.
    pub fn push(&mut self, index: u32, dist: u32) {
        if self.k == 0 {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push((dist, index));
        } else if let Some(top) = self.heap.peek() {
            if (dist, index) < *top {
                self.heap.pop();
                self.heap.push((dist, index));
            }
        }
    }

    /// Offers every item of `other`.
    pub fn merge(&mut self, other: &[(u32, u32)]) {
        for &(index, dist) in other {
            self.push(index, dist);
        }
    }

    /// The items kept, as (index, distance), closest first (ties: lowest index first).
    pub fn into_sorted(self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> = self.heap.into_iter().collect();
        v.sort_unstable();
        v.into_iter().map(|(d, i)| (i, d)).collect()
    }
}

/// Naive reference: every item's distance, sorted by (distance, index), the first `k`. For tests.
pub fn naive_nearest(query: &[u8], items: &[u8], k: usize) -> Vec<(u32, u32)> {
    let mut all: Vec<(u32, u32)> = items
        .chunks(query.len())
        .enumerate()
        .map(|(i, it)| (it.iter().zip(query).map(|(a, b)| (a ^ b).count_ones()).sum(), i as u32))
        .collect();
    all.sort_unstable();
    all.into_iter().take(k).map(|(d, i)| (i, d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn distances_by_hand() {
        assert_eq!(distance(&[0xff; 8], &[0; 8]), 64);
        assert_eq!(distance(&[1, 2, 3], &[1, 2, 3]), 0);
        assert_eq!(distance(&[0b1010_0000, 0, 0, 0, 0, 0, 0, 0, 1], &[0, 0, 0, 0, 0, 0, 0, 0, 0]), 3);
    }

    #[test]
    fn ties_go_to_the_lowest_index() {
        let mut n = Nearest::new(2);
        for (i, d) in [(5, 1), (3, 1), (9, 0), (1, 1)] {
            n.push(i, d);
        }
        assert_eq!(n.into_sorted(), vec![(9, 0), (1, 1)]);
    }

    proptest! {
        #[test]
        fn agrees_with_naive(items in proptest::collection::vec(any::<u8>(), 0..600), k in 0usize..12) {
            let size = 20;
            let items = &items[..items.len() / size * size];
            let query: Vec<u8> = (0..size as u8).map(|b| b.wrapping_mul(37)).collect();
            let mut n = Nearest::new(k);
            for (i, it) in items.chunks(size).enumerate() {
                n.push(i as u32, distance(&query, it));
            }
            prop_assert_eq!(n.into_sorted(), naive_nearest(&query, items, k));
        }
    }
}
