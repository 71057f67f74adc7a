//! PSACS (ICCD '21): the map side of a distributed shuffle, inside every device, its host baselines, and
//! the shuffle read.
//!
//! - [`shuffle`]: the operator (`insitu shuffle`) and the record format of a table's parts;
//! - [`device`]: the device placement (`psacs-shuffle` on every device);
//! - [`host`]: the software baselines with N host threads, sort-based and bucket-based;
//! - [`read`]: `shuffle-read`, a partition from every device back to rows;
//! - [`formats`]: Spark's UnsafeRow and Parquet, for Fig. 15's compression;
//! - [`repro`]: §V on TPC-H.

pub mod device;
pub mod formats;
pub mod host;
pub mod info;
mod job;
pub mod options;
pub mod read;
pub mod repro;
pub mod shuffle;

pub use self::info::ShuffleInfo;
pub use self::options::{ShuffleOptions, ShufflePlacement};
pub use self::read::{read_partition, shuffle_read, shuffle_read_batch};
pub use self::shuffle::{row_format, shuffle_table};
pub use insitu_kernels::partition::PartitionHash;
pub use insitu_kernels::shuffle::{ChunkLayout, Codec};
