//! PSACS's shuffle: `shuffle` (write, in storage or on the host) and `shuffle-read`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, ValueEnum};
use insitu_host::psacs::{
    shuffle_read, shuffle_table, ChunkLayout, Codec, PartitionHash, ShuffleOptions, ShufflePlacement,
};
use insitu_host::units::parse_size;

use crate::cmd::Ctx;

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Placement {
    Device,
    HostSort,
    HostBucket,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Hash {
    /// The paper's zigzag-fold hash.
    ZigzagFold,
    Xxh3,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Layout {
    /// Column-major partitions, a chunk per column (PSACS).
    Column,
    Row,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Compression {
    /// LZ4 per chunk.
    Lz4,
    /// Chunks stored as they are (PSACS as evaluated: no compression module).
    None,
}

#[derive(Args, Debug)]
pub struct Shuffle {
    /// The table to shuffle.
    name: String,
    /// Shuffle key column(s), comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    key: Vec<String>,
    /// Number of partitions.
    #[arg(long, default_value_t = 1024)]
    partitions: u32,
    /// Where to shuffle: inside every device, or one of the host baselines.
    #[arg(long, value_enum, default_value = "device")]
    placement: Placement,
    /// Host threads for the host-sort and host-bucket baselines.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Partition hash.
    #[arg(long, value_enum, default_value = "zigzag-fold")]
    hash: Hash,
    /// Output layout of each partition.
    #[arg(long, value_enum, default_value = "column")]
    layout: Layout,
    /// How each chunk is stored.
    #[arg(long, value_enum, default_value = "lz4")]
    compression: Compression,
    /// Name of the output (default NAME.shuffled).
    #[arg(long)]
    out: Option<String>,
    /// Device memory a shuffle may use, e.g. 64MiB (default: all that is free).
    #[arg(long)]
    memory_budget: Option<String>,
}

impl Shuffle {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let opts = ShuffleOptions {
            keys: self.key,
            partitions: self.partitions,
            placement: match self.placement {
                Placement::Device => ShufflePlacement::Device,
                Placement::HostSort => ShufflePlacement::HostSort,
                Placement::HostBucket => ShufflePlacement::HostBucket,
            },
            threads: self.threads,
            hash: match self.hash {
                Hash::ZigzagFold => PartitionHash::ZigzagFold,
                Hash::Xxh3 => PartitionHash::Xxh3,
            },
            layout: match self.layout {
                Layout::Column => ChunkLayout::Column,
                Layout::Row => ChunkLayout::Row,
            },
            codec: match self.compression {
                Compression::Lz4 => Codec::Lz4,
                Compression::None => Codec::None,
            },
            out: self.out,
            memory_budget: self.memory_budget.as_deref().map(parse_size).transpose()?,
        };
        let mut array = ctx.open()?;
        let progress = array.progress().clone();
        let report = crate::output::busy_counting("shuffle", &progress, || {
            shuffle_table(&mut array, &self.name, &opts)
        })?;
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}

#[derive(Args, Debug)]
pub struct ShuffleRead {
    /// The shuffle output to read (a `shuffle`'s --out).
    name: String,
    /// The partition to read (0-based).
    #[arg(long)]
    partition: u32,
    /// The Parquet file to write.
    #[arg(short, long)]
    output: PathBuf,
}

impl ShuffleRead {
    pub fn run(self, ctx: &Ctx) -> Result<ExitCode> {
        let array = ctx.open()?;
        let report = shuffle_read(&array, &self.name, self.partition, &self.output)?;
        crate::cmd::close(array);
        ctx.out.report(&report);
        Ok(ExitCode::SUCCESS)
    }
}
