//! Objects as bytes: `put`, `get`, `ls`, `rm`, and `search` inside the devices or on the host.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use insitu_host::blob::{self, Placement};
use insitu_host::search::{self, SearchPlacement};

use crate::cmd::{name_for, Ctx};
use crate::output;

#[derive(Args, Debug)]
pub struct Put {
    /// The file to store: a regular file, a pipe or FIFO, a device or `/proc` file (read to its end),
    /// or `-` for standard input.
    file: PathBuf,
    /// The object's name (default: the file's name; required with `-`).
    #[arg(long)]
    name: Option<String>,
    /// Keep the object whole on this device.
    #[arg(long)]
    device: Option<u32>,
}

impl Put {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let stdin = self.file.as_os_str() == "-";
        if stdin && self.name.is_none() {
            anyhow::bail!("reading standard input (-) needs --name for the object");
        }
        let name = name_for(self.name, &self.file, true, "an object")?;
        // Standard input and a FIFO are waited for before the array is opened (its lock taken): a writer
        // that has not started yet keeps no other command out of the array.
        let fifo = !stdin
            && std::fs::metadata(&self.file)
                .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()));
        // What can be refused without the input is refused before waiting for it.
        if stdin || fifo {
            if !insitu_host::Array::exists_at(&ctx.data) {
                return Err(insitu_host::HostError::NoArray(ctx.data.clone()).into());
            }
            insitu_host::array::validate_user_name(&name)?;
        }
        let label = if stdin { std::path::Path::new("standard input") } else { self.file.as_path() };
        let mut waited: Option<Box<dyn std::io::BufRead>> = if stdin {
            Some(Box::new(std::io::BufReader::with_capacity(1 << 20, std::io::stdin())))
        } else if fifo {
            let f = std::fs::File::open(&self.file)
                .with_context(|| format!("cannot open {}", self.file.display()))?;
            Some(Box::new(std::io::BufReader::with_capacity(1 << 20, f)))
        } else {
            None
        };
        if let Some(r) = waited.as_mut() {
            r.fill_buf().with_context(|| format!("cannot read {}", label.display()))?;
        }
        let mut array = ctx.open()?;
        let size = std::fs::metadata(&self.file).ok().filter(|m| m.is_file()).map_or(0, |m| m.len());
        let bar = if size > 0 { output::progress(size, "put") } else { output::dynamic("put") };
        let placement = self.device.map_or(Placement::Striped, Placement::Device);
        let progress = |d, total| {
            bar.set_length(total);
            bar.set_position(d);
            Ok(())
        };
        let report = match waited.as_mut() {
            Some(input) => blob::put_reader(&mut array, input, None, label, &name, placement, &progress)?,
            None => blob::put(&mut array, &self.file, &name, placement, &progress)?,
        };
        bar.finish_and_clear();
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(Args, Debug)]
pub struct Get {
    /// The object to read.
    name: String,
    /// Where to write it (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

impl Get {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let to_file = self.output.as_ref().filter(|p| p.as_os_str() != "-");
        ctx.out.data_to_stdout(to_file.is_none());
        let array = ctx.open()?;
        let size = array.entry(&self.name).map_err(|e| fs_hint(&array, e, "fs get"))?.size;
        let bar = output::progress(size, "get");
        let report = match to_file {
            Some(p) => {
                let mut w = insitu_host::outfile::OutFile::create(p)?;
                let r = blob::get(&array, &self.name, &mut w, &|d, _| {
                    bar.set_position(d);
                    Ok(())
                })?;
                w.commit()?;
                r
            }
            None => {
                let stdout = std::io::stdout();
                let mut lock = stdout.lock();
                blob::get(&array, &self.name, &mut lock, &|d, _| {
                    bar.set_position(d);
                    Ok(())
                })?
            }
        };
        bar.finish_and_clear();
        crate::cmd::close(array);
        if to_file.is_some() {
            ctx.out.report(&report);
        } else {
            ctx.out.report_to_stderr(&report);
        }
        Ok(ExitCode::SUCCESS)
    }
}

pub fn ls(ctx: &Ctx) -> Result<ExitCode> {
    let array = ctx.open()?;
    let report = blob::ls(&array)?;
    crate::cmd::close(array);
    ctx.out.listing(&report);
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct Rm {
    /// The object to remove.
    name: String,
}

impl Rm {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let mut array = ctx.open()?;
        let report = blob::rm(&mut array, &self.name)?;
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Where {
    Device,
    Host,
}

#[derive(Args, Debug)]
pub struct Search {
    /// The object to search.
    name: String,
    /// The bytes to look for, as given (any bytes the shell passes, not only UTF-8 text).
    pattern: std::ffi::OsString,
    /// Where to search: inside every device holding a part, or on the host.
    #[arg(long, value_enum, default_value = "device")]
    placement: Where,
    /// Also return the byte offset of every match.
    #[arg(long)]
    offsets: bool,
}

impl Search {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let array = ctx.open()?;
        let p = match self.placement {
            Where::Device => SearchPlacement::Device,
            Where::Host => SearchPlacement::Host,
        };
        let report = search::search(&array, &self.name, self.pattern.as_bytes(), p, self.offsets)
            .map_err(|e| fs_hint(&array, e, "bluedbm search"))?;
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}

/// An object not found on an appliance whose file system has a file of that name: says which command
/// reads files (BlueDBM's files are not objects).
fn fs_hint(array: &insitu_host::array::Array, e: insitu_host::HostError, cmd: &str) -> anyhow::Error {
    if let insitu_host::HostError::NotFound(name) = &e {
        if insitu_host::bluedbm::fs::catalog(array).is_ok_and(|files| files.iter().any(|f| &f.name == name)) {
            return anyhow::anyhow!("{e}: {name:?} is a file of this appliance's file system (`insitu fs ls`): `insitu {cmd}` reads it");
        }
    }
    e.into()
}
