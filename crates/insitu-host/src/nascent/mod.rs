//! NASCENT (FPGA '21): table sort near storage. Tables are stored in the hybrid layout ([`crate::table`]);
//! `sort` runs the sort and shuffle kernels in every device at once, or on the host, or on one accelerator
//! beside the host (the paper's two baselines), and all three write the same table.
//!
//! - [`sort`]: the operator and its options;
//! - [`device`]: the device placement (`sort` then `gather` programs on every device);
//! - [`host`]: the host CPU and host-accelerator baselines;
//! - [`merge`]: the global k-way merge of the sorted parts into one Parquet file;
//! - [`data`]: the paper's workloads (TPC-C ORDER-LINE, the synthetic table of Fig. 12/13);
//! - [`repro`]: Figs. 8, 9, 13 and 14.

pub mod data;
pub mod device;
pub mod host;
mod job;
pub mod merge;
pub mod repro;
pub mod sort;

pub use self::sort::{sort_table, SortOptions, SortPlacement};
pub use insitu_kernels::keys::SortAlgo;
