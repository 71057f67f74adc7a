//! One module per command family; each command is a clap `Args` struct with a `run`.

pub mod array;
pub mod blob;
pub mod bluedbm;
pub mod demo;
pub mod fs;
pub mod gen;
pub mod intersect;
pub mod lba;
pub mod net;
pub mod repro;
pub mod selfsort;
pub mod shuffle;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use insitu_host::{Array, DeviceTransport, FaultPlan, OpenOptions};

use crate::output::Output;

/// What every command gets: where the array is, how to print, how to reach the devices.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub data: PathBuf,
    pub out: Output,
    pub transport: DeviceTransport,
    /// `--json`: no progress messages on stderr either.
    pub quiet: bool,
    /// Seconds to wait for another process to release the array (`--wait`).
    pub wait_s: f64,
    /// `--host-profile`: the host that host work is modeled on, instead of the profile's own.
    pub host: Option<insitu_host::profile::HostProfile>,
}

impl Ctx {
    /// A device profile by name or path, with the host of `--host-profile` if one was given.
    pub fn profile(&self, name: &str) -> insitu_host::Result<insitu_host::Profile> {
        let mut p = insitu_host::Profile::load(name)?;
        if let Some(h) = &self.host {
            p.host = h.clone();
        }
        Ok(p)
    }

    /// [`Ctx::profile`], with `paper_host` when `--host-profile` was not given (a repro of a paper whose
    /// host is not the one the device profile names).
    pub fn profile_on(&self, name: &str, paper_host: &str) -> insitu_host::Result<insitu_host::Profile> {
        let mut p = self.profile(name)?;
        if self.host.is_none() {
            p.host = insitu_host::profile::HostProfile::load(paper_host)?;
        }
        Ok(p)
    }

    /// Opens the array (recovering it, and saying what recovery removed).
    pub fn open(&self) -> Result<Array> {
        let array = self.when_free(|lock_wait| {
            let opts = OpenOptions {
                faults: FaultPlan::from_env(),
                transport: self.transport.clone(),
                lock_wait,
                device_wait: std::time::Duration::from_secs_f64(self.wait_s),
                host: self.host.clone(),
            };
            Array::open(&self.data, opts)
        })?;
        let r = array.open_report();
        if !r.removed_orphans.is_empty() {
            eprintln!(
                "recovered: removed {} part(s) of interrupted writes: {}",
                r.removed_orphans.len(),
                few(&r.removed_orphans)
            );
        }
        for n in &r.notes {
            eprintln!("warning: {n}");
        }
        if !r.quarantined.is_empty() {
            eprintln!(
                "warning: kept {} part(s) that no object lists in quarantine ({}); `insitu fsck` says why, \
                 `insitu fsck --repair` removes them",
                r.quarantined.len(),
                few(&r.quarantined)
            );
        }
        Ok(array)
    }

    /// Runs `f` with no wait for the array's lock; if another process holds it, says so and runs it again
    /// waiting up to `--wait` seconds.
    pub fn when_free<T>(
        &self,
        f: impl Fn(std::time::Duration) -> insitu_host::Result<T>,
    ) -> insitu_host::Result<T> {
        match f(std::time::Duration::ZERO) {
            Err(insitu_host::HostError::Locked(_)) if self.wait_s > 0.0 => {
                if !self.quiet {
                    eprintln!(
                        "the array is in use by another insitu process: waiting up to {} s for it (--wait)",
                        self.wait_s
                    );
                }
                f(std::time::Duration::from_secs_f64(self.wait_s))
            }
            r => r,
        }
    }

    /// Progress lines of long experiments (on stderr, unless `--json`).
    pub fn progress(&self) -> impl Fn(&str) + '_ {
        move |m: &str| {
            if !self.quiet {
                eprintln!("{m}");
            }
        }
    }
}

/// Closes the array once a command's work is done. A device that does not close cleanly (its server
/// gone, its checkpoint not written) keeps what it committed in its journal, which the next open
/// replays: a warning, not the command's failure (which would say a committed write failed).
pub fn close(array: Array) {
    if let Err(e) = array.close() {
        eprintln!("warning: {e}: what it committed is in its journal, replayed when the array next opens");
    }
}

/// The first few of `names`, and how many more.
pub fn few(names: &[String]) -> String {
    const SHOWN: usize = 5;
    if names.len() <= SHOWN {
        names.join(", ")
    } else {
        format!("{}, and {} more", names[..SHOWN].join(", "), names.len() - SHOWN)
    }
}

/// Runs `f` in a default working folder `dir` (relative, such as `target/insitu-repro`). The folders of
/// that path this run makes go again afterwards if left empty, whether `f` succeeded or not: a command's
/// scratch space leaves nothing behind in the user's current folder.
pub fn in_default_dir<T>(dir: &str, f: impl FnOnce(&Path) -> T) -> T {
    let path = Path::new(dir);
    let made: Vec<&Path> = path.ancestors().filter(|d| !d.as_os_str().is_empty() && !d.exists()).collect();
    let r = f(path);
    for d in made {
        let _ = std::fs::remove_dir(d);
    }
    r
}

/// The name a command gives what it stores: `--name`, else the file's name (`whole`) or stem.
pub fn name_for(given: Option<String>, file: &Path, whole: bool, what: &str) -> Result<String> {
    if let Some(n) = given {
        return Ok(n);
    }
    let derived = if whole { file.file_name() } else { file.file_stem() };
    derived
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .with_context(|| format!("cannot derive {what} name from {}; give --name", file.display()))
}
