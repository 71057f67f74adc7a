//! The CLI's system call: the default SIGPIPE disposition. The `unsafe` is one libc call at start-up.
#![allow(unsafe_code)]

/// Dies quietly on a closed pipe (`insitu ls | head`), as Unix tools do, instead of panicking in `println!`.
pub fn default_sigpipe() {
    // SAFETY: resetting one signal's disposition to its default at start-up, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
