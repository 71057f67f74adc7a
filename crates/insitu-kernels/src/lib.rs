//! Pure algorithms on in-memory slices. Nothing here knows about flash, devices or hosts: every function
//! takes slices and returns values, so the device programs and the host baselines share exactly one
//! implementation of each kernel ("all paths agree" by construction, and checked by tests).
//!
//! - [`search`]: literal substring search (BlueDBM §5.1 string search, the device program `search`).
//! - [`sort`]: key column -> sorted indices, radix (fast) and bitonic network (NASCENT §3.3-3.4).
//! - [`merge`]: k-way merge of sorted runs.
//!
//! ```
//! use insitu_kernels::search::Finder;
//! let f = Finder::new(b"ab").unwrap();
//! assert_eq!(f.count(b"xxabyyab"), 2);
//! ```

pub mod merge;
pub mod search;
pub mod sort;
