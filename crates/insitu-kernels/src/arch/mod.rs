//! Architecture-specific kernels. Each has a scalar reference beside it and a property test comparing them.

pub mod claim;
mod portable;
mod radix;
#[cfg(target_arch = "x86_64")]
pub mod x86;

pub use portable::count_below as count_below_portable;
pub use portable::hamming as hamming_portable;
pub use radix::radix_pass;

/// Asks the CPU to start loading elements `at..at + len` of `buf` into its caches, so that a read of them a
/// little later (a gather's next rows, at random places in a large buffer; the node an insert goes to next)
/// does not wait for memory. Only a hint: it changes no result, and the part of the range outside `buf` is
/// ignored.
#[inline]
pub fn prefetch<T>(buf: &[T], at: usize, len: usize) {
    let end = at.saturating_add(len).min(buf.len());
    if at >= end {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // One hint per cache line of the range (lines are 64 bytes on every x86_64 CPU), counted from the
        // slice's start; an element larger than a line gets one hint, for its first line.
        let per_line = (64 / std::mem::size_of::<T>().max(1)).max(1);
        let mut line = at / per_line * per_line;
        while line < end {
            x86::prefetch(&buf[line.max(at)]);
            line += per_line;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = end;
}

/// Copies `src` into `dst` (equal lengths, as `copy_from_slice`). Flash pages move this way between the
/// NAND image's mapping and the buffers they are read into.
///
/// Why not `memcpy` alone: from 2 KiB up, glibc before 2.39 copies with `rep movsb` on CPUs that report
/// fast short `rep movsb` (FSRM), and on AMD Zen that instruction runs at a quarter of its speed when source
/// and destination are not at the same offset within 64 bytes. Large heap buffers start 16 bytes into a
/// page and mapped pages at 0, so every page read from the image into one was such a copy: 1.8 GB/s here
/// against 7.5 GB/s for this loop (bench/RESULTS.md, 2026-11-27). Below 2 KiB `memcpy` is used as is.
#[inline]
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy between slices of different lengths");
    #[cfg(target_arch = "x86_64")]
    if src.len() >= 2048 {
        return x86::copy(dst, src);
    }
    dst.copy_from_slice(src);
}

/// A new vector holding a copy of `src`: as [`copy`] does (and for the same reason), into memory that is
/// not zeroed first. Flash pages read into buffers of their own are made this way.
#[inline]
pub fn to_vec(src: &[u8]) -> Vec<u8> {
    #[cfg(target_arch = "x86_64")]
    if src.len() >= 2048 {
        return x86::to_vec(src);
    }
    src.to_vec()
}

/// Bits that differ between `a` and `b`, which must be the same length: AVX-512 VPOPCNTDQ where the CPU has
/// it, else AVX2 (about 2.5x POPCNT on 8 KB items), else POPCNT, else the portable count (x86_64's baseline has no POPCNT, so a
/// build for any x86_64 counts bits with shifts and masks unless told otherwise at run time).
#[inline]
pub fn hamming(a: &[u8], b: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(d) = x86::hamming(a, b) {
        return d;
    }
    hamming_portable(a, b)
}

/// How many of `words` are below `t`, as unsigned integers: with AVX2 where the CPU has it, four words a
/// compare. A B+tree node finds a key's place this way, one pass over its first key column whose loads the
/// CPU overlaps, rather than a binary search's chain of dependent ones; x86_64's baseline (SSE2) has no
/// 64-bit compare, so the portable count is a scalar compare and add a word.
#[inline]
pub fn count_below(words: &[u64], t: u64) -> usize {
    #[cfg(target_arch = "x86_64")]
    if let Some(n) = x86::count_below(words, t) {
        return n;
    }
    count_below_portable(words, t)
}

/// A vector with room for `capacity` items whose memory is advised to be backed by transparent huge pages
/// (where the kernel allows it only on request, as here). Large ID lists searched at random positions then
/// cost far fewer TLB misses; numpy asks the same for its large arrays. Must be called before the memory is
/// touched; elsewhere it is a plain `Vec::with_capacity`.
#[allow(unsafe_code)]
pub fn vec_with_huge_pages<T>(capacity: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(capacity);
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = capacity * std::mem::size_of::<T>();
        if bytes >= 2 * HUGE {
            let start = v.as_ptr() as usize;
            let lo = start.div_ceil(HUGE) * HUGE;
            let hi = (start + bytes) / HUGE * HUGE;
            if hi > lo {
                // SAFETY: madvise only changes how the kernel backs this range of our own allocation (inside
                // `v`'s capacity); it reads and writes no memory and an error leaves everything as it was.
                unsafe {
                    libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_takes_any_range_and_changes_nothing() {
        let buf: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let before = buf.clone();
        for (at, len) in
            [(0, 0), (0, 1000), (63, 2), (990, 64), (1000, 10), (5000, 10), (usize::MAX, 5), (7, usize::MAX)]
        {
            prefetch(&buf, at, len);
        }
        prefetch::<u8>(&[], 0, 64);
        assert_eq!(buf, before);
    }

    proptest::proptest! {
        /// The copy equals `copy_from_slice` at any length and any offsets of source and destination, and
        /// writes nothing outside its destination.
        #[test]
        fn copy_agrees_with_copy_from_slice(len in 0usize..9000, from in 0usize..80, to in 0usize..80) {
            let src: Vec<u8> = (0..len + from).map(|i| (i * 7 + 3) as u8).collect();
            let mut got = vec![0xAAu8; len + to + 80];
            let mut want = got.clone();
            copy(&mut got[to..to + len], &src[from..]);
            want[to..to + len].copy_from_slice(&src[from..]);
            proptest::prop_assert_eq!(got, want);
            // A vector of its own: the same bytes, as long as the source.
            proptest::prop_assert_eq!(to_vec(&src[from..]), src[from..].to_vec());
        }
    }

    proptest::proptest! {
        /// Every Hamming path (the one this CPU takes, AVX2, POPCNT, the portable count) equals a
        /// bit-by-bit count, at any length and alignment.
        #[test]
        fn hamming_agrees_with_counting_bits(len in 0usize..700, from in 0usize..40, seed in 0u64..1000) {
            let bytes = |salt: u64| -> Vec<u8> {
                (0..len + from).map(|i| ((i as u64 * 2654435761 + seed * 97 + salt) >> 7) as u8).collect()
            };
            let (a, b) = (bytes(1), bytes(2));
            let (a, b) = (&a[from..], &b[from..]);
            let want: u32 = a.iter().zip(b).map(|(x, y)| (0..8).map(|k| u32::from((x ^ y) >> k & 1)).sum::<u32>()).sum();
            proptest::prop_assert_eq!(hamming(a, b), want);
            proptest::prop_assert_eq!(hamming_portable(a, b), want);
            #[cfg(target_arch = "x86_64")]
            for d in [x86::hamming_by_avx2(a, b), x86::hamming_by_popcnt(a, b)].into_iter().flatten() {
                proptest::prop_assert_eq!(d, want);
            }
        }
    }

    proptest::proptest! {
        /// The count this CPU makes equals the portable one at any length, with words and targets near
        /// both ends of the unsigned range (where a signed compare would be wrong).
        #[test]
        fn count_below_agrees_with_the_portable_count(
            words in proptest::collection::vec(proptest::prop_oneof![0u64..8, u64::MAX - 8..=u64::MAX, proptest::num::u64::ANY], 0..300),
            t in proptest::prop_oneof![0u64..8, u64::MAX - 8..=u64::MAX, proptest::num::u64::ANY],
        ) {
            let want = words.iter().filter(|&&w| w < t).count();
            proptest::prop_assert_eq!(count_below(&words, t), want);
            proptest::prop_assert_eq!(count_below_portable(&words, t), want);
        }
    }

    #[test]
    #[should_panic(expected = "different lengths")]
    fn a_copy_between_different_lengths_panics_as_copy_from_slice_does() {
        copy(&mut [0u8; 4096], &[1u8; 4097]);
    }
}
