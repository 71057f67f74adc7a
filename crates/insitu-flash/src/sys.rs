//! The few system calls std does not wrap. Each `unsafe` block is a plain libc call on a file descriptor we own.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;

/// Deallocates `len` bytes at `offset` (keeps the file size), so an erased block takes no disk space and
/// the image stays sparse. Best effort: filesystems without hole punching just keep the old bytes, which
/// the FTL never reads back (an erased page is unmapped).
pub fn punch_hole(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: fallocate on a valid, open descriptor with integer arguments; no memory is passed.
        let _ = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, offset, len);
    }
}

/// Maps `file` read-only, whole.
///
/// SAFETY argument for the callers: the image and spare-area files belong to one device of an array whose
/// lock (flock on `LOCK`) this process holds, so no other process writes them; inside the process they
/// are written (pwrite, hole punching) only through `&mut Nand`, i.e. under the device's flash write lock,
/// while every slice of the map lives only inside a `&Nand` borrow (the read lock). No byte a slice shows
/// changes while the slice exists.
pub fn map_readonly(file: &File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: see above; the mapping is read-only and the file is never truncated below the mapped size.
    unsafe { memmap2::MmapOptions::new().map(file) }
}
