//! The Smart SSD list intersection: `put-list`, `index-text`, `intersect`, and `model intersect` (the
//! paper's §4 cost model).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use insitu_host::intersect::lists::{index_text, put_list, IdFormat};
use insitu_host::intersect::model::{predict, render, Workload};
use insitu_host::intersect::operator::{intersect, IntersectPlacement, Output};
use insitu_host::units::parse_size;
use serde_json::json;

use crate::cmd::{name_for, Ctx};

/// How a file of IDs is written.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ListFormat {
    /// Little-endian unsigned 32-bit integers, back to back.
    U32le,
    /// Decimal integers separated by white space, commas or new lines.
    Text,
}

#[derive(Args, Debug)]
pub struct PutList {
    /// A file of sorted IDs without duplicates.
    file: PathBuf,
    /// How the file's IDs are written (default: from its extension: .bin and .u32 are u32le; .txt,
    /// .csv and .tsv are text; any other extension needs --format).
    #[arg(long, value_enum)]
    format: Option<ListFormat>,
    /// The list's name (default: the file's name without its extension).
    #[arg(long)]
    name: Option<String>,
    /// Bytes per entry: a 4-byte ID plus a payload (filled deterministically).
    #[arg(long, default_value_t = 4)]
    entry_size: u32,
    /// The device that stores it.
    #[arg(long, default_value_t = 0)]
    device: u32,
}

impl PutList {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let name = name_for(self.name, &self.file, false, "a list")?;
        let mut array = ctx.open()?;
        let format = self.format.map(|f| match f {
            ListFormat::U32le => IdFormat::U32Le,
            ListFormat::Text => IdFormat::Text,
        });
        let progress = array.progress().clone();
        let report = crate::output::busy_counting("put-list", &progress, || {
            put_list(&mut array, &self.file, format, &name, self.entry_size, self.device)
        })?;
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(Args, Debug)]
pub struct IndexText {
    /// A file or a directory of text files to index.
    path: PathBuf,
    /// Prefix of the stored lists' names.
    #[arg(long)]
    name: String,
    /// Bytes per entry: a 4-byte ID plus a payload.
    #[arg(long, default_value_t = 4)]
    entry_size: u32,
    /// The device that stores it.
    #[arg(long, default_value_t = 0)]
    device: u32,
    /// Keep the terms found in the most documents, at most this many.
    #[arg(long, default_value_t = 5000)]
    max_terms: usize,
}

impl IndexText {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let mut array = ctx.open()?;
        let report = crate::output::busy("index-text", || {
            index_text(&mut array, &self.path, &self.name, self.entry_size, self.device, self.max_terms)
        })?;
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Placement {
    Device,
    Host,
    /// Where its modeled cost is lower: each placement's counted work at 1% matches, priced as a run's
    /// report prices it.
    Auto,
}

#[derive(Args, Debug)]
pub struct Intersect {
    /// Two or more stored lists.
    #[arg(num_args = 2.., required = true)]
    lists: Vec<String>,
    /// Where to intersect: inside the device, on the host, or the one modeled faster.
    #[arg(long, value_enum, default_value = "device")]
    placement: Placement,
    /// Return only the number of common IDs.
    #[arg(long, conflicts_with = "ids_only")]
    count_only: bool,
    /// Return the common IDs (default: whole entries of the first list).
    #[arg(long)]
    ids_only: bool,
    /// Write the answer to FILE: the common IDs with --ids-only (as --format says, or the file's
    /// extension: .bin/.u32 little-endian u32, .txt/.csv/.tsv one per line), else the first list's whole
    /// entries as stored (binary).
    #[arg(short, long, conflicts_with = "count_only")]
    output: Option<PathBuf>,
    /// How to write the IDs of --ids-only -o FILE.
    #[arg(long, value_enum, requires = "output")]
    format: Option<ListFormat>,
}

impl Intersect {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let placement = match self.placement {
            Placement::Device => IntersectPlacement::Device,
            Placement::Host => IntersectPlacement::Host,
            Placement::Auto => IntersectPlacement::Auto,
        };
        let output = if self.count_only {
            Output::Count
        } else if self.ids_only {
            Output::Ids
        } else {
            Output::Entries
        };
        // Where the IDs go is settled before any work.
        let id_format = match (&self.output, self.ids_only) {
            (Some(p), true) => Some(match self.format {
                Some(ListFormat::U32le) => IdFormat::U32Le,
                Some(ListFormat::Text) => IdFormat::Text,
                None => IdFormat::resolve(None, p)?,
            }),
            _ => None,
        };
        let mut file = self.output.as_deref().map(insitu_host::outfile::OutFile::create).transpose()?;
        let array = ctx.open()?;
        let (report, answer) =
            crate::output::busy("intersect", || intersect(&array, &self.lists, placement, output))?;
        crate::cmd::close(array);
        if let Some(mut f) = file.take() {
            use std::io::Write;
            match id_format {
                Some(IdFormat::U32Le) => {
                    f.write_all(&answer.ids.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?
                }
                Some(IdFormat::Text) => {
                    for id in &answer.ids {
                        writeln!(f, "{id}")?;
                    }
                }
                None => f.write_all(&answer.entries)?,
            }
            f.commit()?;
        }
        ctx.out.report(&report);
        if !self.ids_only && !self.count_only && self.output.is_none() && !ctx.out.json {
            println!(
                "whole entries: {} ({}) reached the host and were not kept: -o FILE writes them, --ids-only \
                 prints the common IDs",
                answer.count,
                insitu_host::units::human_bytes(answer.entries.len() as u64)
            );
        }
        if self.ids_only && !ctx.out.json {
            const HEAD: usize = 10;
            let head: Vec<String> = answer.ids.iter().take(HEAD).map(u32::to_string).collect();
            let more = answer.ids.len().saturating_sub(HEAD);
            let tail = if more > 0 {
                format!(" ... and {more} more (every one: -o FILE, or --json)")
            } else {
                String::new()
            };
            println!(
                "common IDs: {}{tail}",
                if head.is_empty() { "none".to_string() } else { head.join(", ") }
            );
        }
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(Subcommand, Debug)]
pub enum ModelCmd {
    /// The list-intersection model (DaMoN '16 §4): load, copy, intersect, send results, host vs device.
    Intersect(ModelIntersect),
}

#[derive(Args, Debug)]
pub struct ModelIntersect {
    /// Size of the first list in bytes (decimal suffixes as in the paper: 50MB).
    #[arg(long)]
    size1: String,
    /// Size of the second list in bytes.
    #[arg(long)]
    size2: String,
    /// Entry size s in bytes (a 4-byte ID plus the payload).
    #[arg(long, default_value_t = 256)]
    entry_size: u32,
    /// Intersection ratio r: the fraction of the shorter list in the result.
    #[arg(long, default_value_t = 0.01)]
    ratio: f64,
    /// Bytes per result entry sent to the host (4: IDs only).
    #[arg(long, default_value_t = 4)]
    result_entry_size: u32,
    /// Hardware profile to price the two placements on.
    #[arg(long, default_value = "smartssd-2016")]
    profile: String,
}

impl ModelCmd {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let ModelCmd::Intersect(m) = self;
        let profile = ctx.profile(&m.profile)?;
        let (size1, size2) = (parse_size(&m.size1)?, parse_size(&m.size2)?);
        let w = Workload::from_sizes(
            size1 as f64,
            size2 as f64,
            m.entry_size as f64,
            m.ratio,
            m.result_entry_size as f64,
        )?;
        let p = predict(&profile, &w)?;
        let mut text = render(&profile, &p);
        let mut result = json!(p);
        // The model takes L1 as the shorter list (the paper's θ = |L2| / |L1| >= 1).
        if size1 > size2 {
            let note = "L1 is the shorter list: the model took --size2's as L1 and --size1's as L2";
            text = format!("note: {note}\n{text}");
            result["note"] = json!(note);
        }
        ctx.out.plain("model intersect", result, &text);
        Ok(ExitCode::SUCCESS)
    }
}
