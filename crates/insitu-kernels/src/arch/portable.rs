//! Kernels in portable code that the SIMD paths also compile with their own target features.

/// Bits that differ between `a` and `b`, which must be the same length, 8 bytes a step. Inlined always, so
/// that a caller compiled with POPCNT counts with it.
#[inline(always)]
pub fn hamming(a: &[u8], b: &[u8]) -> u32 {
    assert_eq!(a.len(), b.len(), "Hamming distance of items of different sizes");
    let (wa, wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ta, tb) = (wa.remainder(), wb.remainder());
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    let mut d = 0u32;
    for (x, y) in wa.zip(wb) {
        d += (word(x) ^ word(y)).count_ones();
    }
    for (x, y) in ta.iter().zip(tb) {
        d += (x ^ y).count_ones();
    }
    d
}

/// Entries of `words` below `t`. Inlined always, as [`hamming`].
#[inline(always)]
pub fn count_below(words: &[u64], t: u64) -> usize {
    words.iter().map(|&w| (w < t) as usize).sum()
}
