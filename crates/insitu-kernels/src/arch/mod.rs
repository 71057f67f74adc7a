//! Architecture-specific kernels. Each has a scalar reference beside it and a property test comparing them.

mod radix;
#[cfg(target_arch = "x86_64")]
pub mod x86;

pub use radix::radix_pass;

/// Asks the CPU to start loading bytes `at..at + len` of `buf` into its caches, so that a read of them a
/// little later (a gather's next rows, at random places in a large buffer) does not wait for memory. Only a
/// hint: it changes no result, and the part of the range outside `buf` is ignored.
#[inline]
pub fn prefetch(buf: &[u8], at: usize, len: usize) {
    let end = at.saturating_add(len).min(buf.len());
    if at >= end {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // One hint per cache line of the range (lines are 64 bytes on every x86_64 CPU).
        let mut line = at & !63;
        while line < end {
            x86::prefetch(&buf[line.max(at)]);
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = end;
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
        prefetch(&[], 0, 64);
        assert_eq!(buf, before);
    }
}
