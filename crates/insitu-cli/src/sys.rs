//! The CLI's system calls: the SIGPIPE disposition (one libc call at start-up each) and the free space of a
//! file system.
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

/// Bytes an unprivileged user may still write on the file system holding `path` (`statvfs`), if it says.
pub fn free_bytes(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data, for which all zeros is a valid value (the call overwrites it).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path alive for the call; `st` is the statvfs the call fills in.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}
