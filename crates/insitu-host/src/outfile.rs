//! Files a command writes: [`OutFile`], written as a file with no name in its destination's folder (or
//! beside it, where the file system cannot make one) and named once complete, so a command that fails or
//! is killed leaves neither a partial file nor a damaged earlier one.

use std::fs::File;
use std::io::BufWriter;
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
    /// Whether that file has no name yet (`O_TMPFILE`): killed before [`OutFile::commit`], the process
    /// leaves nothing, where a named one would stay as `.NAME.partial`.
    unnamed: bool,
    w: Option<BufWriter<File>>,
}

/// The array folder (its `array.json` and `catalog.json`, either copy of each) or device folder
/// (`device.json` and a superblock) that holds `dir` or is `dir`, if any. Two files each, so that a
/// folder of someone else's with a `device.json` in it is not taken for a device.
fn array_holding(dir: &Path) -> Option<PathBuf> {
    let dir = dir.canonicalize().ok()?;
    let either = |d: &Path, name: &str| {
        let first = d.join(name);
        first.exists() || crate::catalog::second_copy(&first).exists()
    };
    dir.ancestors()
        .find(|d| {
            either(d, "array.json") && either(d, "catalog.json")
                || d.join("device.json").exists()
                    && (d.join("superblock").exists() || d.join("superblock.b").exists())
        })
        .map(Path::to_path_buf)
}

impl OutFile {
    /// Fails, naming the problem, if `path` could not be written: a missing or non-directory parent, a
    /// directory at `path` itself, or a place inside an array's or a device's folder (where a command's
    /// output would overwrite what the array stores). Commands check their outputs this way before any
    /// work starts. `-` is refused: a command that can write to standard output takes it before this
    /// (`get`, `lba read`, `fs get`, `selfsort`), and one that cannot would make a file named `-`.
    pub fn check_path(path: &Path) -> Result<()> {
        if path.as_os_str() == "-" {
            return Err(HostError::InvalidArgument(
                "- (standard output) cannot be written here: name a file (./- for a file named -)".into(),
            ));
        }
        Self::check_writable(path)?;
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if let Some(array) = array_holding(parent) {
            return Err(HostError::InvalidArgument(format!(
                "cannot write {}: it is inside the array (or device) folder {}, whose images and metadata it \
                 could overwrite; write it outside that folder",
                path.display(),
                array.display()
            )));
        }
        Ok(())
    }

    /// [`OutFile::check_path`] without the array's folder: for a file the array keeps in it.
    fn check_writable(path: &Path) -> Result<()> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if !parent.is_dir() {
            // A file error, as the operating system would give it (a front keeps its kind: Python's
            // FileNotFoundError, with errno and filename).
            let (kind, why) = if parent.exists() {
                (std::io::ErrorKind::NotADirectory, "is not a directory")
            } else {
                (std::io::ErrorKind::NotFound, "does not exist")
            };
            return Err(HostError::Io {
                path: path.to_path_buf(),
                error: std::io::Error::new(kind, format!("cannot be written: {} {why}", parent.display())),
            });
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
        Self::create_checked(path)
    }

    /// Starts writing a file the array keeps in its own folder (an index of its data), as
    /// [`OutFile::create`] does a command's output.
    pub fn create_in_array(path: &Path) -> Result<OutFile> {
        Self::check_writable(path)?;
        Self::create_checked(path)
    }

    fn create_checked(path: &Path) -> Result<OutFile> {
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
        let unnamed = match &tmp {
            Some(_) => {
                let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
                insitu_device::sys::open_unnamed(dir).map_err(|e| HostError::io(path, e))?
            }
            None => None,
        };
        let is_unnamed = unnamed.is_some();
        let f = match unnamed {
            Some(f) => f,
            None => {
                let target = tmp.as_deref().unwrap_or(path);
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(!special)
                    .open(target)
                    .map_err(|e| HostError::io(target, e))?
            }
        };
        Ok(OutFile {
            path: path.to_path_buf(),
            tmp,
            unnamed: is_unnamed,
            w: Some(BufWriter::with_capacity(1 << 20, f)),
        })
    }

    /// Names the unnamed file `f`: the destination itself when there is none yet, else `.NAME.partial`
    /// (one left by an older process killed between its naming and its rename goes first), which the
    /// caller renames over it.
    fn name_unnamed(f: &File, path: &Path, tmp: &Path) -> std::io::Result<bool> {
        use insitu_device::sys::link_unnamed;
        if !path.exists() {
            match link_unnamed(f, path) {
                Ok(()) => return Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        match link_unnamed(f, tmp) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(tmp)?;
                link_unnamed(f, tmp)?;
            }
            r => r?,
        }
        Ok(false)
    }

    /// Flushes the file and moves it into place. On failure the partial file goes too.
    pub fn commit(mut self) -> Result<()> {
        let w = self.w.take().expect("written until committed");
        let f = match w.into_inner() {
            Ok(f) => f,
            Err(e) => {
                if let Some(tmp) = self.tmp.as_ref().filter(|_| !self.unnamed) {
                    let _ = std::fs::remove_file(tmp);
                }
                return Err(HostError::io(&self.path, e.into_error()));
            }
        };
        let done = match (&self.tmp, self.unnamed) {
            // In place already when it took the destination's name; else named beside it, then renamed.
            (Some(tmp), true) => Self::name_unnamed(&f, &self.path, tmp)
                .map_err(|e| HostError::io(&self.path, e))
                .and_then(|placed| match placed {
                    true => Ok(()),
                    false => std::fs::rename(tmp, &self.path).map_err(|e| HostError::io(&self.path, e)),
                }),
            (Some(tmp), false) => std::fs::rename(tmp, &self.path).map_err(|e| HostError::io(&self.path, e)),
            (None, _) => Ok(()),
        };
        drop(f);
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
            // Never committed: the partial file goes (an unnamed one with its handle), and the
            // destination is as it was.
            if let Some(tmp) = self.tmp.as_ref().filter(|_| !self.unnamed) {
                let _ = std::fs::remove_file(tmp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_file_appears_whole_at_commit_and_nothing_else_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        // New, then over an existing file, then over one beside a stale partial file of a killed process.
        for (i, stale) in [(0u8, false), (1, false), (2, true)] {
            if stale {
                std::fs::write(dir.path().join(".out.bin.partial"), b"old half").unwrap();
            }
            let mut f = OutFile::create(&path).unwrap();
            f.write_all(&[i; 100_000]).unwrap();
            assert!(i == 0 && !path.exists() || i > 0 && std::fs::read(&path).unwrap() == [i - 1; 100_000]);
            f.commit().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), [i; 100_000]);
            assert_eq!(names(dir.path()), ["out.bin"]);
        }
    }

    #[test]
    fn a_path_inside_an_array_or_device_folder_is_refused_and_its_files_kept() {
        let dir = tempfile::tempdir().unwrap();
        let array = dir.path().join("a");
        std::fs::create_dir_all(array.join("dev0")).unwrap();
        std::fs::write(array.join("dev0/nand.img"), b"pages").unwrap();
        std::fs::write(array.join("dev0/device.json"), b"{}").unwrap();
        std::fs::write(array.join("dev0/superblock.b"), b"").unwrap();
        std::fs::write(crate::catalog::second_copy(&array.join("array.json")), b"{}").unwrap();
        std::fs::write(array.join("catalog.json"), b"{}").unwrap();
        // Someone else's folder with a device.json or an array.json of its own is no array.
        let other = dir.path().join("iot");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("device.json"), b"{}").unwrap();
        std::fs::write(other.join("array.json"), b"{}").unwrap();
        OutFile::create(&other.join("out.bin")).unwrap().commit().unwrap();
        for p in ["dev0/nand.img", "catalog.json", "dev0/x", "../a/y"] {
            let e = OutFile::create(&array.join(p)).unwrap_err().to_string();
            assert!(e.contains("inside the array"), "{p}: {e}");
        }
        assert_eq!(std::fs::read(array.join("dev0/nand.img")).unwrap(), b"pages");
        // A lone device folder (an `insitu serve-device` one) too; beside the array is fine.
        std::fs::remove_file(crate::catalog::second_copy(&array.join("array.json"))).unwrap();
        assert!(OutFile::create(&array.join("dev0/z")).is_err());
        OutFile::create(&dir.path().join("out.bin")).unwrap().commit().unwrap();
    }

    #[test]
    fn a_failed_or_killed_writer_leaves_the_destination_as_it_was_and_nothing_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        std::fs::write(&path, b"earlier").unwrap();
        let mut f = OutFile::create(&path).unwrap();
        f.write_all(b"half of a new file").unwrap();
        drop(f); // a command that failed
        assert_eq!(std::fs::read(&path).unwrap(), b"earlier");
        assert_eq!(names(dir.path()), ["out.bin"]);
        // A process killed mid-write runs no destructor: where the file system makes unnamed files,
        // it leaves nothing (a named partial file would stay).
        if insitu_device::sys::open_unnamed(dir.path()).unwrap().is_some() {
            let mut f = OutFile::create(&path).unwrap();
            f.write_all(&[7; 3 << 20]).unwrap();
            std::mem::forget(f);
            assert_eq!(names(dir.path()), ["out.bin"]);
            assert_eq!(std::fs::read(&path).unwrap(), b"earlier");
        }
    }
}
