//! Pure algorithms on in-memory slices. Nothing here knows about flash, devices or hosts: every function
//! takes slices and returns values, so the device programs and the host baselines share exactly one
//! implementation of each kernel ("all paths agree" by construction, and checked by tests).
//!
//! - [`search`]: literal substring search (BlueDBM §5.1 string search, the device program `search`).
//! - [`sort`]: key column -> sorted indices ([`indices::SortedIndices`]), radix (fast) and bitonic network
//!   (NASCENT §3.3-3.4).
//! - [`merge`]: k-way merge of sorted runs.
//! - [`dict`]: dictionary encoding with 8/16-bit codes and run-time output widths (NASCENT §3.6).
//! - [`gather`]: the shuffle, rows in sorted-index order (NASCENT §3.5).
//! - [`partition`]: zigzag-fold and xxh3 partitioning, sort-based grouping (PSACS §III).
//! - [`columnar`]: records <-> column chunks, LZ4 chunks (PSACS §IV-E).
//! - [`intersect`]: SvS intersection of sorted ID lists, linear merge or galloping (DaMoN '16 §3.2).
//! - [`keys`]: key types and their bytes, key columns -> sorted indices, the sorted-indices format.
//! - [`rowkey`]: one field of a row read as a sort key (sorting by a column stored row-wise).
//! - [`shuffle`]: the steps of a shuffle write (compose records, partition, group, encode), PSACS §III-IV.
//! - [`btree`]: an order-statistic B+tree over fixed-size byte keys (Self-Sorting SSD §III-C).
//! - [`hamming`]: Hamming distance of binary items and their k nearest (BlueDBM §7.1).
//! - [`le`]: little-endian integer arrays, the byte format of everything stored.
//!
//! `unsafe` code lives only in [`arch`], each block with its safety argument and a scalar reference.
//!
//! ```
//! use insitu_kernels::search::Finder;
//! let f = Finder::new(b"ab").unwrap();
//! assert_eq!(f.count(b"xxabyyab"), 2);
//! ```

pub mod arch;
pub mod btree;
pub mod columnar;
pub mod dict;
pub mod gather;
pub mod hamming;
pub mod indices;
pub mod intersect;
pub mod keys;
pub mod le;
pub mod merge;
pub mod partition;
pub mod rowkey;
pub mod search;
pub mod shuffle;
pub mod sort;
