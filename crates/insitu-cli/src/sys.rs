//! The CLI's system calls: the SIGPIPE disposition (one libc call at start-up each).
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
