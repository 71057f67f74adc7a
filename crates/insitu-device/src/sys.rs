//! The few system calls std does not wrap: thread and process CPU time (how device compute and host
//! compute are told apart), a lock on a directory, and a real SIGKILL for crash tests. Each `unsafe`
//! block is one libc call on values we own.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// CPU time consumed by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by the whole process, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Takes an exclusive, non-blocking advisory lock (flock) on `file`. Returns false if another open file
/// description holds it.
pub fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a valid, open descriptor.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Locks directory `dir` itself (it cannot vanish or be replaced under a running process the way a lock
/// file can): `Some(handle)` holds the lock until dropped, `None` means another process holds it.
pub fn lock_dir(dir: &Path) -> std::io::Result<Option<File>> {
    let f = File::open(dir)?;
    Ok(try_lock_exclusive(&f)?.then_some(f))
}

/// A file with no name yet in directory `dir` (`O_TMPFILE`): if the process dies before
/// [`link_unnamed`] gives it one, nothing is left behind. `None` where the file system cannot make one.
pub fn open_unnamed(dir: &Path) -> std::io::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    // The name is given through /proc: without it the file could never be named.
    if !Path::new("/proc/self/fd").is_dir() {
        return Ok(None);
    }
    let r = std::fs::OpenOptions::new().write(true).mode(0o666).custom_flags(libc::O_TMPFILE).open(dir);
    match r {
        Ok(f) => Ok(Some(f)),
        // Not supported by the kernel or the file system (EOPNOTSUPP), or O_TMPFILE unknown (EISDIR).
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EISDIR)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Gives the unnamed file `file` (from [`open_unnamed`]) the name `path`, which must not exist.
pub fn link_unnamed(file: &File, path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let to = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: both paths are NUL-terminated strings we own, alive for the call.
    let r = unsafe {
        libc::linkat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::AT_SYMLINK_FOLLOW)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Writes all of `buf` to `stream` with `MSG_NOSIGNAL`: a peer that went away is an `EPIPE` error, never a
/// SIGPIPE that kills this process (whatever the process's SIGPIPE disposition, and whatever std does).
pub fn send_all(stream: &UnixStream, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: send(2) reads at most `buf.len()` bytes from the valid, borrowed `buf` on a socket we own.
        let n = unsafe {
            libc::send(stream.as_raw_fd(), buf.as_ptr() as *const libc::c_void, buf.len(), libc::MSG_NOSIGNAL)
        };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// Kills this process with SIGKILL: no destructor, flush or checkpoint runs, exactly as when an operator's
/// process is killed.
pub fn kill_self() {
    // SAFETY: kill(2) on our own pid with a constant signal; it does not return.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn thread_cpu_time_advances_with_work() {
        let t0 = super::thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(super::thread_cpu_ns() > t0);
        assert!(super::process_cpu_ns() >= super::thread_cpu_ns());
    }

    #[test]
    fn a_directory_lock_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let held = super::lock_dir(dir.path()).unwrap().expect("free");
        assert!(super::lock_dir(dir.path()).unwrap().is_none(), "a second lock must fail");
        drop(held);
        assert!(super::lock_dir(dir.path()).unwrap().is_some());
    }
}
