//! Blocks of words shared by threads that each change blocks the others do not touch: a B+tree's nodes
//! while two threads insert below different children of its root (`btree::BTree::insert_sorted`). Which
//! blocks a thread will touch is known only as it goes, so each block is claimed by the first thread that
//! reaches it, and a thread reaching a block another claimed panics instead of racing it: that check is
//! what makes handing out `&mut` to a block through a shared table sound. A claim is one relaxed load of
//! a byte when the thread holds it already, a compare-exchange the first time.

#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU8, Ordering};

/// Chunks of `per_chunk` blocks of `words` words each, borrowed for the time they are shared.
#[derive(Debug)]
pub struct Claims<'a> {
    words: usize,
    per_chunk: usize,
    chunks: Vec<*mut u64>,
    owners: Vec<AtomicU8>,
    _chunks: PhantomData<&'a mut [Box<[u64]>]>,
}

// SAFETY: the chunks are borrowed mutably for 'a, so only claimants reach them while `Claims` lives, and
// a claimant reaches a block only once the owner byte says it is its own (see `Claimant::claim`).
unsafe impl Sync for Claims<'_> {}
// SAFETY: as for Sync: the raw pointers are into chunks borrowed for 'a, reached only through claims.
unsafe impl Send for Claims<'_> {}

impl<'a> Claims<'a> {
    /// Shares `chunks` (each `per_chunk * words` words long) by blocks of `words` words.
    ///
    /// # Panics
    /// If a chunk has another length.
    pub fn new(chunks: &'a mut [Box<[u64]>], per_chunk: usize, words: usize) -> Claims<'a> {
        assert!(chunks.iter().all(|c| c.len() == per_chunk * words), "chunks of another size");
        let blocks = chunks.len() * per_chunk;
        Claims {
            words,
            per_chunk,
            chunks: chunks.iter_mut().map(|c| c.as_mut_ptr()).collect(),
            owners: (0..blocks).map(|_| AtomicU8::new(0)).collect(),
            _chunks: PhantomData,
        }
    }

    /// One claimant per thread, each with a tag of its own (a second claimant with the same tag could
    /// reach a block the first holds a `&mut` to).
    pub fn claimants<const N: usize>(&mut self) -> [Claimant<'_, 'a>; N] {
        assert!(N < u8::MAX as usize, "at most 254 claimants");
        std::array::from_fn(|i| Claimant { claims: self, me: i as u8 + 1 })
    }
}

/// A thread's access to the blocks it claims.
#[derive(Debug)]
pub struct Claimant<'c, 'a> {
    claims: &'c Claims<'a>,
    me: u8,
}

impl Claimant<'_, '_> {
    /// Block `i`'s first word, once this claimant holds it.
    ///
    /// # Panics
    /// If `i` is past the blocks, or another claimant holds it.
    #[inline]
    fn claim(&self, i: usize) -> *mut u64 {
        let c = self.claims;
        let owner = &c.owners[i];
        if owner.load(Ordering::Relaxed) != self.me {
            // Acquire: whatever a thread wrote to the block before it was claimed here (none does, since
            // claims last as long as `Claims`, but the block's first use is ordered all the same).
            if let Err(other) = owner.compare_exchange(0, self.me, Ordering::Acquire, Ordering::Relaxed) {
                assert_eq!(other, self.me, "block {i} reached by two threads");
            }
        }
        // SAFETY: `i` is below chunks * per_chunk (the owner byte exists), so the offset is inside its chunk.
        unsafe { c.chunks[i / c.per_chunk].add((i % c.per_chunk) * c.words) }
    }

    /// Block `i`, claimed first.
    ///
    /// # Panics
    /// If another claimant holds it.
    #[inline]
    pub fn get(&self, i: usize) -> &[u64] {
        let p = self.claim(i);
        // SAFETY: the block is this claimant's alone, and `&self` rules out a `&mut` to it from `get_mut`.
        unsafe { std::slice::from_raw_parts(p, self.claims.words) }
    }

    /// Block `i`, claimed first, to change.
    ///
    /// # Panics
    /// If another claimant holds it.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> &mut [u64] {
        let p = self.claim(i);
        // SAFETY: the block is this claimant's alone, and `&mut self` makes this the only slice of it.
        unsafe { std::slice::from_raw_parts_mut(p, self.claims.words) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks() -> Vec<Box<[u64]>> {
        (0..3).map(|c| (0..8u64).map(|w| c * 8 + w).collect::<Vec<_>>().into_boxed_slice()).collect()
    }

    #[test]
    fn threads_change_their_own_blocks_and_see_them_after() {
        let mut data = chunks();
        {
            let mut claims = Claims::new(&mut data, 4, 2);
            let [mut a, mut b] = claims.claimants::<2>();
            std::thread::scope(|s| {
                s.spawn(move || (0..6).for_each(|i| a.get_mut(i)[0] += 100));
                s.spawn(move || (6..12).for_each(|i| b.get_mut(i)[1] += 1000));
            });
        }
        let flat: Vec<u64> = data.iter().flat_map(|c| c.iter().copied()).collect();
        for (w, v) in flat.iter().enumerate() {
            let block = w / 2;
            let want = w as u64
                + if block < 6 && w % 2 == 0 {
                    100
                } else if block >= 6 && w % 2 == 1 {
                    1000
                } else {
                    0
                };
            assert_eq!(*v, want, "word {w}");
        }
    }

    #[test]
    #[should_panic(expected = "reached by two threads")]
    fn a_block_another_claimant_holds_is_refused() {
        let mut data = chunks();
        let mut claims = Claims::new(&mut data, 4, 2);
        let [a, b] = claims.claimants::<2>();
        let _ = a.get(5);
        let _ = b.get(5);
    }
}
