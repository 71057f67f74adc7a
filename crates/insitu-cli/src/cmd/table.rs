//! Tables and NASCENT's sort: `put-table`, `get-table`, `sort`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};
use insitu_host::nascent::{sort_table, SortAlgo, SortOptions, SortPlacement};
use insitu_host::table::import::{put_table, PutTable as PutTableOptions};
use insitu_host::units::parse_size;

use crate::cmd::{name_for, Ctx};

#[derive(Args, Debug)]
pub struct PutTable {
    /// A Parquet or CSV file (CSV with a header line).
    file: PathBuf,
    /// The table's name (default: the file's name without its extension).
    #[arg(long)]
    name: Option<String>,
    /// The column stored column-wise, the one `sort` sorts by (default: the first column).
    #[arg(long)]
    key: Option<String>,
    /// How rows are spread: round-robin or hash:COLUMN.
    #[arg(long, default_value = "round-robin")]
    partition: String,
    /// Dictionary-encode this column (the key column; 8- or 16-bit codes).
    #[arg(long)]
    dict: Option<String>,
}

impl PutTable {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let name = name_for(self.name, &self.file, false, "a table")?;
        let opts =
            PutTableOptions { name, key: self.key, partition: self.partition.parse()?, dict: self.dict };
        let mut array = ctx.open()?;
        let progress = array.progress().clone();
        let report = crate::output::busy_counting("put-table", &progress, || {
            put_table(&mut array, &self.file, &opts)
        })?;
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(Args, Debug)]
pub struct GetTable {
    /// The table to export.
    name: String,
    /// The Parquet file to write.
    #[arg(short, long)]
    output: PathBuf,
    /// For a sort's output: k-way merge the parts into one globally sorted file (without it, the parts
    /// are written in device order, each sorted on its own).
    #[arg(long)]
    merged: bool,
}

impl GetTable {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let array = ctx.open()?;
        let report = if self.merged {
            insitu_host::nascent::merge::get_table_merged(&array, &self.name, &self.output)?
        } else {
            insitu_host::table::export::get_table(&array, &self.name, &self.output)?
        };
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Placement {
    Device,
    Host,
    HostAccel,
}

impl From<Placement> for SortPlacement {
    fn from(p: Placement) -> SortPlacement {
        match p {
            Placement::Device => SortPlacement::Device,
            Placement::Host => SortPlacement::Host,
            Placement::HostAccel => SortPlacement::HostAccel,
        }
    }
}

/// The sorter: `fast` (radix) or `bitonic` (NASCENT's sorting network).
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Algo {
    Fast,
    Bitonic,
}

impl From<Algo> for SortAlgo {
    fn from(a: Algo) -> SortAlgo {
        match a {
            Algo::Fast => SortAlgo::Fast,
            Algo::Bitonic => SortAlgo::Bitonic,
        }
    }
}

#[derive(Args, Debug)]
pub struct Sort {
    /// The table to sort.
    name: String,
    /// The column to sort by: any column. The one stored column-wise at put-table sorts at once; another
    /// is first pulled out of every row inside the devices (one more pass over the rows), nulls last.
    #[arg(long)]
    key: String,
    /// Where to sort: inside every device, on the host, or on one accelerator beside it.
    #[arg(long, value_enum, default_value = "device")]
    placement: Placement,
    /// How this machine sorts: fast (radix) or bitonic (NASCENT's sorting network, run as such). The same
    /// order either way, and the same modeled time: the model prices the profile's sorter for the keys.
    #[arg(long, value_enum, default_value = "fast")]
    algo: Algo,
    /// Name of the sorted table (default NAME.sorted).
    #[arg(long)]
    out: Option<String>,
    /// Also k-way merge the sorted parts into one globally sorted Parquet file (needs -o).
    #[arg(long, requires = "output")]
    merge: bool,
    /// The Parquet file --merge writes (only with --merge).
    #[arg(short, long, requires = "merge")]
    output: Option<PathBuf>,
    /// Device memory the sort program may use, e.g. 64MiB (default: all that is free).
    #[arg(long)]
    memory_budget: Option<String>,
}

impl Sort {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let opts = SortOptions {
            key: self.key,
            placement: self.placement.into(),
            algo: self.algo.into(),
            out: self.out,
            merge: if self.merge { self.output } else { None },
            memory_budget: self.memory_budget.as_deref().map(parse_size).transpose()?,
        };
        let mut array = ctx.open()?;
        let progress = array.progress().clone();
        let report =
            crate::output::busy_counting("sort", &progress, || sort_table(&mut array, &self.name, &opts))?;
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}
