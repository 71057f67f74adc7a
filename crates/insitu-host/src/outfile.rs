//! Files a command writes: [`OutFile`], written beside its destination and renamed over it once
//! complete, so a command that fails or is killed leaves neither a partial file nor a damaged earlier one.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{HostError, Result};

/// A file written beside its destination (`.NAME.partial`) and renamed over it once complete, so a
/// command that fails or is killed leaves neither a partial file nor a damaged earlier one at the path.
/// A destination that exists and is not a regular file (`/dev/null`, `/dev/stdout`, a FIFO) is written
/// directly: there is nothing there to damage, and nothing to rename over.
#[derive(Debug)]
pub struct OutFile {
    path: PathBuf,
    /// The file being written beside the destination; `None` when writing the destination itself.
    tmp: Option<PathBuf>,
    w: Option<BufWriter<File>>,
}

impl OutFile {
    /// Fails, naming the problem, if `path` could not be written: a missing or non-directory parent, or
    /// a directory at `path` itself. Commands check their outputs this way before any work starts.
    pub fn check_path(path: &Path) -> Result<()> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if !parent.is_dir() {
            let why = if parent.exists() { "is not a directory" } else { "does not exist" };
            return Err(HostError::InvalidArgument(format!(
                "cannot write {}: {} {why}",
                path.display(),
                parent.display()
            )));
        }
        if path.is_dir() {
            return Err(HostError::InvalidArgument(format!(
                "cannot write {}: it is a directory",
                path.display()
            )));
        }
        Ok(())
    }

    /// Starts writing `path` (beside it until [`OutFile::commit`]); a path that cannot be written is
    /// refused as [`OutFile::check_path`] says, naming the path given, not the file beside it.
    pub fn create(path: &Path) -> Result<OutFile> {
        Self::check_path(path)?;
        let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
        let tmp = if special {
            None
        } else {
            let name = path.file_name().ok_or_else(|| {
                HostError::InvalidArgument(format!("{} does not name a file", path.display()))
            })?;
            let mut tmp_name = std::ffi::OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(".partial");
            Some(path.with_file_name(tmp_name))
        };
        let target = tmp.as_deref().unwrap_or(path);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(!special)
            .open(target)
            .map_err(|e| HostError::io(target, e))?;
        Ok(OutFile { path: path.to_path_buf(), tmp, w: Some(BufWriter::with_capacity(1 << 20, f)) })
    }

    /// Flushes the file and moves it into place. On failure the partial file goes too.
    pub fn commit(mut self) -> Result<()> {
        let mut w = self.w.take().expect("written until committed");
        let done = w.flush().map_err(|e| HostError::io(&self.path, e));
        drop(w);
        let done = done.and_then(|()| match &self.tmp {
            Some(tmp) => std::fs::rename(tmp, &self.path).map_err(|e| HostError::io(&self.path, e)),
            None => Ok(()),
        });
        if done.is_err() {
            if let Some(tmp) = &self.tmp {
                let _ = std::fs::remove_file(tmp);
            }
        }
        done
    }

    fn out(&mut self) -> &mut BufWriter<File> {
        self.w.as_mut().expect("written until committed")
    }
}

impl std::io::Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.out().write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out().flush()
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if self.w.take().is_some() {
            // Never committed: the partial file goes, and the destination is as it was.
            if let Some(tmp) = &self.tmp {
                let _ = std::fs::remove_file(tmp);
            }
        }
    }
}
