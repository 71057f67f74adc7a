//! Architecture-specific kernels. Each has a scalar reference beside it and a property test comparing them.

mod radix;
#[cfg(target_arch = "x86_64")]
pub mod x86;

pub use radix::radix_pass;

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
