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

/// Copies `src` into `dst` (equal lengths) 64 bytes a step with unaligned 16-byte loads and stores, the
/// last partial step by the standard copy (see [`super::copy`] for why not `memcpy` alone).
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy between slices of different lengths");
    let whole = src.len() / 64 * 64;
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 64 <= whole <= len of both slices, so every 16-byte load reads inside `src` and every
        // store writes inside `dst`; `&mut dst` and `&src` cannot overlap. SSE2 is part of the x86_64 baseline.
        unsafe {
            let a = _mm_loadu_si128(s.add(i) as *const __m128i);
            let b = _mm_loadu_si128(s.add(i + 16) as *const __m128i);
            let c = _mm_loadu_si128(s.add(i + 32) as *const __m128i);
            let e = _mm_loadu_si128(s.add(i + 48) as *const __m128i);
            _mm_storeu_si128(d.add(i) as *mut __m128i, a);
            _mm_storeu_si128(d.add(i + 16) as *mut __m128i, b);
            _mm_storeu_si128(d.add(i + 32) as *mut __m128i, c);
            _mm_storeu_si128(d.add(i + 48) as *mut __m128i, e);
        }
        i += 64;
    }
    dst[whole..].copy_from_slice(&src[whole..]);
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
