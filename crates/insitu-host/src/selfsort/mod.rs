//! The Self-Sorting SSD (Cavazos Quero, Lee, Kim, 2015): the host's side of a drive that sorts the
//! records written to it. The drive's firmware lives in the device crate
//! (`insitu_device::firmware::selfsort`); here: record formats and generators ([`records`]), the
//! host's operations on the firmware through the block interface and its command block ([`ops`]), the
//! four sorting methods of §IV-C with the paper's baselines ([`methods`]), and the reproduction of its
//! Table I and Figs. 3-5 ([`repro`]).

pub mod methods;
pub mod ops;
pub mod records;
pub mod repro;
pub mod table;

pub use insitu_device::protocol::{IndexConfig, IndexInfo, IndexKind, RunExtent, SelfSortStatus};
pub use methods::{sort, Method, SortJob, SortRun, SORT_INDEX};
pub use ops::{Interface, Query};
pub use records::{KeyOrder, RecordFormat};
