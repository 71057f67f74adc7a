//! The few system calls std does not wrap (each `unsafe` block is a plain libc call on a file descriptor we
//! own), and the thread that syncs a NAND image in the background ([`Flusher`]).
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

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

/// Bytes an unprivileged user may still write on the file system holding `path` (`statvfs`), if it says.
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data, for which all zeros is a valid value (the call overwrites it).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path alive for the call; `st` is the statvfs the call fills in.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// Gives the disk space of `len` bytes at `offset` of `file` back to its file system (a hole: the bytes
/// read as zeros, the file keeps its size). Where the file system cannot, nothing changes.
pub fn punch_hole(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: fallocate on a valid, open descriptor with integer arguments; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
    Ok(())
}

/// The spans of `file` below `len` that may hold data (`SEEK_DATA` / `SEEK_HOLE`): holes of a sparse file
/// are left out. Where the file system cannot tell, the whole file is one span.
pub fn data_spans(file: &File, len: u64) -> Vec<(u64, u64)> {
    #[cfg(target_os = "linux")]
    {
        let fd = file.as_raw_fd();
        let seek = |at: u64, whence: libc::c_int| {
            // SAFETY: lseek on a valid, open descriptor with integer arguments; no memory is passed.
            let r = unsafe { libc::lseek(fd, at as libc::off_t, whence) };
            (r >= 0).then_some(r as u64)
        };
        let mut spans = Vec::new();
        let mut at = 0;
        while at < len {
            // No data past `at` (ENXIO), or the call failed: the latter counts as data to the end.
            let Some(start) = seek(at, libc::SEEK_DATA) else {
                if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENXIO) {
                    spans.push((at, len));
                }
                break;
            };
            if start >= len {
                break;
            }
            let end = seek(start, libc::SEEK_HOLE).unwrap_or(len).min(len);
            spans.push((start, end));
            at = end;
        }
        spans
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        vec![(0, len)]
    }
}

/// Maps `file` read-only, whole.
///
/// SAFETY argument for the callers: the image and spare-area files belong to one device of an array whose
/// lock (flock on `LOCK`) this process holds, so no other process writes them; inside the process they
/// are written (pwrite) only through `&mut Nand`, i.e. under the device's flash write lock,
/// while every slice of the map lives only inside a `&Nand` borrow (the read lock). No byte a slice shows
/// changes while the slice exists.
pub fn map_readonly(file: &File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: see above; the mapping is read-only and the file is never truncated below the mapped size.
    unsafe { memmap2::MmapOptions::new().map(file) }
}

/// Syncs a file to disk on a thread of its own, when asked, while its writer goes on: a writer that
/// produces more than the host's disk takes at once (a gathered part, a loaded table) then finds most of
/// its bytes on the disk when it commits, instead of waiting there for all of them, idle. Only pacing:
/// durability still comes from the writer's own sync, which this never replaces.
///
/// The thread syncs through a descriptor of its own (the file opened again, not a duplicate), so that a
/// write-back error it meets is still reported to the writer's sync too: the kernel reports such an
/// error once per open file, and a duplicate would share the writer's.
#[derive(Debug)]
pub struct Flusher {
    tx: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
    /// Set when the writer goes: a request still queued is dropped, not synced.
    stop: Arc<AtomicBool>,
}

impl Flusher {
    /// A flusher of the file at `path`; one that does nothing when the file cannot be opened again or no
    /// thread can be started (the writer's syncs then do all the work, as without it).
    pub fn new(path: &Path) -> Flusher {
        let stop = Arc::new(AtomicBool::new(false));
        let idle = Flusher { tx: None, thread: None, stop: stop.clone() };
        let Ok(file) = File::open(path) else { return idle };
        // One request waits at most: kicks while a sync runs are one more sync after it.
        let (tx, rx) = sync_channel::<()>(1);
        let stopped = stop.clone();
        let thread = std::thread::Builder::new().name("flash-flush".into()).spawn(move || {
            while rx.recv().is_ok() && !stopped.load(Ordering::Relaxed) {
                // Errors are the writer's sync's to report.
                let _ = file.sync_data();
            }
        });
        match thread {
            Ok(t) => Flusher { tx: Some(tx), thread: Some(t), stop },
            Err(_) => idle,
        }
    }

    /// Asks for a sync; never waits.
    pub fn kick(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(());
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        // Closing the channel ends the thread after the sync it may be running.
        self.stop.store(true, Ordering::Relaxed);
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flusher_syncs_when_kicked_and_stops_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        let f = Flusher::new(&path);
        assert!(f.thread.is_some());
        for _ in 0..100 {
            f.kick();
        }
        drop(f);
        // A file that cannot be opened gives an idle flusher, not an error.
        let idle = Flusher::new(&dir.path().join("missing"));
        assert!(idle.thread.is_none());
        idle.kick();
    }
}
