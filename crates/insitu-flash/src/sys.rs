//! The few system calls std does not wrap. Each `unsafe` block is a plain libc call on a file descriptor we own.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;

/// Starts writing `len` bytes at `offset` back to disk without waiting for them, so that the sync of a
/// commit finds them written (or on their way) instead of starting all of an object's writeback then.
/// Best effort: a failure here only leaves the work to the sync, which reports errors.
pub fn start_writeback(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sync_file_range on a valid, open descriptor with integer arguments; no memory is passed.
        let _ = unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
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
