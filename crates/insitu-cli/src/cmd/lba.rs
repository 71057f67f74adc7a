//! `lba`: the block interface of one device (write a file at an LBA, read bytes back, trim). One LBA is
//! one flash page of the device's profile.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use insitu_host::lba;
use insitu_host::units::parse_size;

use crate::cmd::Ctx;
use crate::output;

#[derive(Subcommand, Debug)]
pub enum LbaCmd {
    /// Write FILE's bytes at block LBA of device DEV (the last block zero-padded).
    Write {
        /// The device.
        device: u32,
        /// The file whose bytes to write.
        file: PathBuf,
        /// First logical block (one flash page each).
        #[arg(long)]
        at: u64,
    },
    /// Read LEN bytes from block LBA of device DEV (to stdout unless -o is given).
    Read {
        /// The device.
        device: u32,
        /// First logical block (one flash page each).
        #[arg(long)]
        at: u64,
        /// Bytes to read (4096, 64KiB, 1MB...).
        #[arg(long)]
        len: String,
        /// Where to write the bytes (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Trim LEN bytes (whole blocks) from block LBA of device DEV: they read as zeros afterwards.
    Trim {
        /// The device.
        device: u32,
        /// First logical block (one flash page each).
        #[arg(long)]
        at: u64,
        /// Bytes to trim, e.g. 1MiB (whole blocks).
        #[arg(long)]
        len: String,
    },
}

impl LbaCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        if let LbaCmd::Read { output, .. } = &self {
            ctx.out.data_to_stdout(output.as_ref().is_none_or(|p| p.as_os_str() == "-"));
        }
        let array = ctx.open()?;
        match self {
            LbaCmd::Write { device, file, at } => {
                let size = std::fs::metadata(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?
                    .len();
                let bar = output::progress(size, "lba write");
                let r = lba::write(&array, device, at, insitu_host::input::Input::File(&file), &|d, _| {
                    bar.set_position(d);
                    Ok(())
                })?;
                bar.finish_and_clear();
                crate::cmd::close(array);
                ctx.out.report(&r);
            }
            LbaCmd::Read { device, at, len, output: out } => {
                let to_file = out.as_ref().filter(|p| p.as_os_str() != "-");
                let len = parse_size(&len)?;
                let bar = output::progress(len, "lba read");
                match to_file {
                    Some(p) => {
                        let mut w = insitu_host::outfile::OutFile::create(p)?;
                        let r = lba::read(&array, device, at, len, &mut w, &|d, _| {
                            bar.set_position(d);
                            Ok(())
                        })?;
                        w.commit()?;
                        bar.finish_and_clear();
                        crate::cmd::close(array);
                        ctx.out.report(&r);
                    }
                    None => {
                        let stdout = std::io::stdout();
                        let mut lock = stdout.lock();
                        let r = lba::read(&array, device, at, len, &mut lock, &|d, _| {
                            bar.set_position(d);
                            Ok(())
                        })?;
                        bar.finish_and_clear();
                        crate::cmd::close(array);
                        ctx.out.report_to_stderr(&r);
                    }
                }
            }
            LbaCmd::Trim { device, at, len } => {
                let len = parse_size(&len)?;
                let r = lba::trim(&array, device, at, len)?;
                crate::cmd::close(array);
                ctx.out.report(&r);
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
