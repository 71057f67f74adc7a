//! The CLI's system calls at start-up: the SIGPIPE disposition and the allocator's reuse of large
//! buffers. Each `unsafe` is one libc call.
#![allow(unsafe_code)]

/// Dies quietly on a closed pipe (`insitu ls | head`), as Unix tools do, instead of panicking in `println!`.
pub fn default_sigpipe() {
    // SAFETY: resetting one signal's disposition to its default at start-up, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Ignores SIGPIPE: a device server writing to a host that went away gets an error (and carries on closing the
/// device cleanly) instead of being killed.
pub fn ignore_sigpipe() {
    // SAFETY: setting one signal's disposition at the start of `serve-device`, before it starts any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Lets the allocator reuse freed buffers of up to 64 MiB instead of unmapping them. Glibc serves an
/// allocation above its mmap threshold (at most 32 MiB, however it adapts) with fresh pages and unmaps
/// them on free, so every batch of pages a read moves (32 MiB: `GlobalRead`'s reply, the pages each
/// node reads) page-faulted its memory anew: 40% of `bluedbm search --placement host` on 1 GiB went to
/// faulting in and zeroing fresh pages (more on a VM that hands freed memory back to its host). With
/// the threshold at 64 MiB and the trim threshold at 128 MiB, freed batches stay in the heap for the
/// next (at most 128 MiB kept beyond what is in use); larger buffers are still mapped and unmapped.
pub fn keep_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: two allocator settings at start-up, before any thread exists; a refusal (0) leaves glibc's
    // defaults, which only cost speed.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
}
