//! `insitu fsck`: an array's devices and catalog ([`Array::check`]), and on an appliance its file system
//! too ([`Fs::check`]: every page of every file read back).

use std::path::Path;

use crate::array::{Array, FsckSummary};
use crate::bluedbm::fs::Fs;
use crate::devices::DeviceTransport;
use crate::error::Result;

/// Checks `array`, and its file system if it has one (BlueDBM's, on the nodes' raw partitions).
pub fn check(array: &Array) -> Result<FsckSummary> {
    let mut s = array.check()?;
    if array.dir().join("fs").is_dir() {
        match Fs::open(array) {
            Ok(fs) => {
                let f = fs.check();
                s.problems.extend(f.problems);
                s.notes.extend(f.notes);
            }
            Err(e) => s.problems.push(format!("file system: {e}")),
        }
    }
    Ok(s)
}

/// [`check`] of the array in `dir`, which may not open ([`Array::fsck_dir`]).
pub fn check_dir(
    dir: &Path,
    transport: &DeviceTransport,
    wait: std::time::Duration,
    device_wait: std::time::Duration,
) -> Result<FsckSummary> {
    Array::fsck_dir_with(dir, transport, wait, device_wait, check)
}
