//! SSE2 kernels (baseline on every x86_64 CPU, so no runtime detection is needed), and the Hamming distance
//! with AVX2 or POPCNT, which [`super::hamming`] calls only where the CPU has them.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

/// Prefetches the cache line holding `x` (see [`super::prefetch`]).
#[inline]
pub fn prefetch<T>(x: &T) {
    // SAFETY: a prefetch is a hint that never faults and writes nothing; the address is a valid reference
    // anyway. SSE is part of the x86_64 baseline.
    unsafe { _mm_prefetch(x as *const T as *const i8, _MM_HINT_T0) };
}

/// Copies `src` into `dst` (equal lengths) 64 bytes a step with unaligned 16-byte loads and stores, the
/// last partial step by the standard copy (see [`super::copy`] for why not `memcpy` alone).
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy between slices of different lengths");
    let whole = src.len() / 64 * 64;
    // SAFETY: `dst` has room for `whole <= src.len()` bytes, and `&mut dst` and `&src` cannot overlap.
    unsafe { copy_64s(dst.as_mut_ptr(), src.as_ptr(), whole) };
    dst[whole..].copy_from_slice(&src[whole..]);
}

/// A new vector holding `src`, copied as [`copy`] does, into memory not zeroed first.
pub fn to_vec(src: &[u8]) -> Vec<u8> {
    let mut v: Vec<u8> = Vec::with_capacity(src.len());
    let (len, whole) = (src.len(), src.len() / 64 * 64);
    // SAFETY: the capacity holds `len` bytes, so both copies write inside it; a fresh allocation cannot
    // overlap `src`. Every byte of `0..len` is written before `set_len` makes it part of the vector.
    unsafe {
        copy_64s(v.as_mut_ptr(), src.as_ptr(), whole);
        std::ptr::copy_nonoverlapping(src.as_ptr().add(whole), v.as_mut_ptr().add(whole), len - whole);
        v.set_len(len);
    }
    v
}

/// Copies the first `whole` bytes (a multiple of 64) from `s` to `d`, 64 a step.
///
/// # Safety
/// `s` must be readable and `d` writable for `whole` bytes, and the two ranges must not overlap.
unsafe fn copy_64s(d: *mut u8, s: *const u8, whole: usize) {
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 64 <= whole, inside both ranges (the caller's promise). SSE2 is part of the x86_64
        // baseline.
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

/// How many of `words` are below `t` with AVX2 (see [`super::count_below`]); `None` without it.
#[inline]
pub fn count_below(words: &[u64], t: u64) -> Option<usize> {
    // SAFETY: the CPU has AVX2, checked first.
    is_x86_feature_detected!("avx2").then(|| unsafe { count_below_avx2(words, t) })
}

/// Eight words a step in two independent sums: each word and `t` have their top bit flipped, so that the
/// signed compare AVX2 has (`vpcmpgtq`) orders them as unsigned; a lane's compare is -1 where the word is
/// below, subtracted from its sum. The tail by the portable count.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
unsafe fn count_below_avx2(words: &[u64], t: u64) -> usize {
    let whole = words.len() / 8 * 8;
    let p = words.as_ptr();
    let bias = _mm256_set1_epi64x(i64::MIN);
    let tv = _mm256_xor_si256(_mm256_set1_epi64x(t as i64), bias);
    let (mut s0, mut s1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 8 <= whole <= words.len(), so both unaligned 32-byte loads read inside `words`; the
        // caller guarantees AVX2.
        let (a, b) = unsafe {
            (
                _mm256_loadu_si256(p.add(i) as *const __m256i),
                _mm256_loadu_si256(p.add(i + 4) as *const __m256i),
            )
        };
        s0 = _mm256_sub_epi64(s0, _mm256_cmpgt_epi64(tv, _mm256_xor_si256(a, bias)));
        s1 = _mm256_sub_epi64(s1, _mm256_cmpgt_epi64(tv, _mm256_xor_si256(b, bias)));
        i += 8;
    }
    let mut lanes = [0u64; 4];
    // SAFETY: `lanes` is 32 writable bytes.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, _mm256_add_epi64(s0, s1)) };
    lanes.iter().sum::<u64>() as usize + super::portable::count_below(&words[whole..], t)
}

/// Bits that differ between `a` and `b` (equal lengths) with the best of AVX-512, AVX2 and POPCNT this CPU
/// has; `None` where it has none of them.
pub fn hamming(a: &[u8], b: &[u8]) -> Option<u32> {
    if is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512vpopcntdq")
        && is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("popcnt")
    {
        // SAFETY: the CPU has all four features, checked just above.
        return Some(unsafe { hamming_avx512(a, b) });
    }
    hamming_by_avx2(a, b).or_else(|| hamming_by_popcnt(a, b))
}

/// [`hamming`] by AVX2 and POPCNT (`None` without them): the AVX-512 path's tail, and a check of it in tests.
pub fn hamming_by_avx2(a: &[u8], b: &[u8]) -> Option<u32> {
    // SAFETY: the CPU has both features, checked first.
    (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("popcnt"))
        .then(|| unsafe { hamming_avx2(a, b) })
}

/// [`hamming`] by POPCNT alone (`None` without it): the AVX2 path's tail, and a check of it in tests.
pub fn hamming_by_popcnt(a: &[u8], b: &[u8]) -> Option<u32> {
    // SAFETY: the CPU has POPCNT, checked first.
    is_x86_feature_detected!("popcnt").then(|| unsafe { hamming_popcnt(a, b) })
}

/// Bits that differ between `a` and `b` (equal lengths), 64 bytes a step by AVX-512's population count of
/// 64-bit lanes (`vpopcntq`), the last partial step by the AVX2 path. A nearest-neighbour scan spends most
/// of its time here: this counts a 64-byte step in about the instructions the AVX2 table lookup needs for 32.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512 VPOPCNTDQ, AVX2 and POPCNT.
#[target_feature(enable = "avx512f,avx512vpopcntdq,avx2,popcnt")]
unsafe fn hamming_avx512(a: &[u8], b: &[u8]) -> u32 {
    assert_eq!(a.len(), b.len(), "Hamming distance of items of different sizes");
    let whole = a.len() / 64 * 64;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut sum = _mm512_setzero_si512();
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 64 <= whole <= the length of both slices, so each unaligned 64-byte load reads inside
        // them; the caller guarantees AVX-512F.
        let x = unsafe {
            _mm512_xor_si512(
                _mm512_loadu_si512(pa.add(i) as *const __m512i),
                _mm512_loadu_si512(pb.add(i) as *const __m512i),
            )
        };
        sum = _mm512_add_epi64(sum, _mm512_popcnt_epi64(x));
        i += 64;
    }
    // SAFETY: the caller guarantees AVX2 and POPCNT.
    let tail = unsafe { hamming_avx2(&a[whole..], &b[whole..]) };
    _mm512_reduce_add_epi64(sum) as u32 + tail
}

/// Bits that differ between `a` and `b` (equal lengths), 32 bytes a step: each byte's bits counted by a
/// 16-entry table lookup of its two halves (`vpshufb`), the counts summed per 8 bytes (`vpsadbw`); the
/// last partial step by POPCNT.
///
/// # Safety
/// The CPU must have AVX2 and POPCNT.
#[target_feature(enable = "avx2,popcnt")]
unsafe fn hamming_avx2(a: &[u8], b: &[u8]) -> u32 {
    assert_eq!(a.len(), b.len(), "Hamming distance of items of different sizes");
    let whole = a.len() / 32 * 32;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let table = _mm256_setr_epi8(
        0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
    );
    let low = _mm256_set1_epi8(0x0f);
    let mut sum = _mm256_setzero_si256();
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 32 <= whole <= the length of both slices, so each unaligned 32-byte load reads inside
        // them; the caller guarantees AVX2.
        let x = unsafe {
            _mm256_xor_si256(
                _mm256_loadu_si256(pa.add(i) as *const __m256i),
                _mm256_loadu_si256(pb.add(i) as *const __m256i),
            )
        };
        let lo = _mm256_and_si256(x, low);
        let hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low);
        let bytes = _mm256_add_epi8(_mm256_shuffle_epi8(table, lo), _mm256_shuffle_epi8(table, hi));
        sum = _mm256_add_epi64(sum, _mm256_sad_epu8(bytes, _mm256_setzero_si256()));
        i += 32;
    }
    let mut lanes = [0u64; 4];
    // SAFETY: `lanes` is 32 writable bytes.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, sum) };
    // SAFETY: the caller guarantees POPCNT.
    let tail = unsafe { hamming_popcnt(&a[whole..], &b[whole..]) };
    lanes.iter().sum::<u64>() as u32 + tail
}

/// Bits that differ between `a` and `b` (equal lengths), 8 bytes a step by POPCNT.
///
/// # Safety
/// The CPU must have POPCNT.
#[target_feature(enable = "popcnt")]
unsafe fn hamming_popcnt(a: &[u8], b: &[u8]) -> u32 {
    // The portable loop, compiled here with POPCNT.
    super::portable::hamming(a, b)
}
