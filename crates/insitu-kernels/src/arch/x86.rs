//! SSE2 kernels (baseline on every x86_64 CPU, so no runtime detection is needed).
#![allow(unsafe_code)]

use std::arch::x86_64::*;

/// Prefetches the cache line holding `byte` (see [`super::prefetch`]).
#[inline]
pub fn prefetch(byte: &u8) {
    // SAFETY: a prefetch is a hint that never faults and writes nothing; the address is a valid reference
    // anyway. SSE is part of the x86_64 baseline.
    unsafe { _mm_prefetch(byte as *const u8 as *const i8, _MM_HINT_T0) };
}

/// Intersects sorted, duplicate-free `a` and `b` in blocks of 4, appending matches to `out`; returns how
/// far it got in each list (the caller finishes the tails with the scalar merge).
pub fn intersect_blocks(a: &[u32], b: &[u32], out: &mut Vec<u32>) -> (usize, usize) {
    let (mut i, mut j) = (0usize, 0usize);
    if a.len() < 4 || b.len() < 4 {
        return (0, 0);
    }
    let (na, nb) = (a.len() / 4 * 4, b.len() / 4 * 4);
    while i < na && j < nb {
        // SAFETY: i + 4 <= na <= a.len() and j + 4 <= nb <= b.len(), so both unaligned 16-byte loads read
        // inside the slices; SSE2 is part of the x86_64 baseline.
        let mask = unsafe {
            let va = _mm_loadu_si128(a.as_ptr().add(i) as *const __m128i);
            let vb = _mm_loadu_si128(b.as_ptr().add(j) as *const __m128i);
            // Compare va against the four rotations of vb: lane k of the result is set when a[i + k]
            // equals any of b[j..j + 4].
            let r1 = _mm_shuffle_epi32(vb, 0b00_11_10_01);
            let r2 = _mm_shuffle_epi32(vb, 0b01_00_11_10);
            let r3 = _mm_shuffle_epi32(vb, 0b10_01_00_11);
            let eq = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi32(va, vb), _mm_cmpeq_epi32(va, r1)),
                _mm_or_si128(_mm_cmpeq_epi32(va, r2), _mm_cmpeq_epi32(va, r3)),
            );
            _mm_movemask_ps(_mm_castsi128_ps(eq))
        };
        // Matches come out in a's order, which is sorted.
        let mut m = mask;
        while m != 0 {
            let k = m.trailing_zeros() as usize;
            out.push(a[i + k]);
            m &= m - 1;
        }
        let (la, lb) = (a[i + 3], b[j + 3]);
        if la <= lb {
            i += 4;
        }
        if lb <= la {
            j += 4;
        }
    }
    (i, j)
}
