//! Device-defined programs as the protocol sees them (NVMe Computational Programs' device-defined
//! programs, named by id): each is a type implementing [`Program`], with typed arguments and a typed
//! result, so `client.execute::<Sort>(SortArgs { .. })` returns a [`SortOutput`] and nothing else.
//!
//! | program         | arguments          | result             | paper |
//! |-----------------|--------------------|--------------------|-------|
//! | `search`        | [`SearchArgs`]     | [`SearchOutput`]   | BlueDBM §5.1 |
//! | `heads`         | [`HeadsArgs`]      | [`HeadsOutput`]    | (search's halo) |
//! | `sort`          | [`SortArgs`]       | [`SortOutput`]     | NASCENT §3.3-3.4 |
//! | `dict-decode`   | [`DictDecodeArgs`] | [`DictDecodeOutput`] | NASCENT §3.6 |
//! | `gather`        | [`GatherArgs`]     | [`GatherOutput`]   | NASCENT §3.5 |
//! | `extract-key`   | [`ExtractKeyArgs`] | [`ExtractKeyOutput`] | (sort by a row-wise column) |
//! | `psacs-shuffle` | [`ShuffleArgs`]    | [`ShuffleOutput`]  | PSACS §III-IV |
//! | `svs`           | [`SvsArgs`]        | [`SvsOutput`]      | DaMoN '16 §3 |

mod intersect;
mod nascent;
mod psacs;
mod search;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::protocol::request::{Queue, Request};

pub use self::intersect::{Returned, SvsArgs, SvsOutput};
pub use self::nascent::{
    DictDecodeArgs, DictDecodeOutput, ExtractKeyArgs, ExtractKeyOutput, GatherArgs, GatherOutput, KeyColumn,
    RowShape, SortArgs, SortOutput, TablePart,
};
pub use self::psacs::{ShuffleArgs, ShuffleOutput};
pub use self::search::{HeadsArgs, HeadsOutput, SearchArgs, SearchOutput};

/// A device-defined program: its id, the kernel class the timing model prices its work by, and its
/// argument and result types.
pub trait Program: std::fmt::Debug + Send + 'static {
    const ID: &'static str;
    const KERNEL_CLASS: &'static str;
    type Args: Serialize + DeserializeOwned + std::fmt::Debug + Send + 'static;
    type Output: Serialize + DeserializeOwned + std::fmt::Debug + Send + 'static;

    /// The arguments as the one call type every transport carries.
    fn call(args: Self::Args) -> ProgramCall;
}

/// Runs program `P` on a compute unit (NVMe Execute Program; SNIA csQueueComputeRequest).
#[derive(Debug)]
pub struct Execute<P: Program> {
    pub args: P::Args,
}

impl<P: Program> Execute<P> {
    pub fn new(args: P::Args) -> Execute<P> {
        Execute { args }
    }
}

impl<P: Program> Request for Execute<P> {
    type Response = P::Output;
    const QUEUE: Queue = Queue::Compute;
}

macro_rules! programs {
    ($($(#[$doc:meta])* $name:ident = $id:literal, $class:literal, $args:ident => $out:ident, $what:literal;)*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $name;

            impl Program for $name {
                const ID: &'static str = $id;
                const KERNEL_CLASS: &'static str = $class;
                type Args = $args;
                type Output = $out;

                fn call(args: $args) -> ProgramCall {
                    ProgramCall::$name(args)
                }
            }
        )*

        /// The arguments of one program run, whichever program it is.
        #[derive(Debug, Clone, Serialize, Deserialize)]
        pub enum ProgramCall {
            $($name($args),)*
        }

        impl ProgramCall {
            /// The id of the program called.
            pub fn id(&self) -> &'static str {
                match self {
                    $(ProgramCall::$name(_) => $id,)*
                }
            }

            /// Its kernel class.
            pub fn kernel_class(&self) -> &'static str {
                match self {
                    $(ProgramCall::$name(_) => $class,)*
                }
            }
        }

        /// Every device-defined program: (id, kernel class, what it does).
        pub const CATALOG: &[(&str, &str, &str)] = &[$(($id, $class, $what),)*];
    };
}

programs! {
    /// String search in an object, inside the device.
    Search = "search", "search", SearchArgs => SearchOutput,
        "count (and locate) a literal byte string in this device's part of an object";
    /// The first bytes of each stripe: the halo `search` needs at stripe ends.
    Heads = "heads", "transfer", HeadsArgs => HeadsOutput,
        "copy the first bytes of each local stripe of an object into a buffer (search's halo)";
    /// NASCENT's sort: key column -> sorted indices.
    Sort = "sort", "sort", SortArgs => SortOutput,
        "sort a key column into a sorted-indices object, in device memory or out of core";
    /// NASCENT's dictionary decoder.
    DictDecode = "dict-decode", "dict-decode", DictDecodeArgs => DictDecodeOutput,
        "decode a dictionary-encoded column into 16/32/64-bit values";
    /// NASCENT's shuffle kernel.
    Gather = "gather", "gather", GatherArgs => GatherOutput,
        "gather rows (or any items) in sorted-index order into a buffer";
    /// A row-wise column as a key column (sorting by a column that is not the stored key).
    ExtractKey = "extract-key", "gather", ExtractKeyArgs => ExtractKeyOutput,
        "pull one field out of every row of a table part into a key column";
    /// PSACS's shuffle write.
    PsacsShuffle = "psacs-shuffle", "shuffle", ShuffleArgs => ShuffleOutput,
        "hash-partition a table part by sort-based grouping, tiled to device memory, column-major, LZ4 or none";
    /// The Smart SSD's SvS list intersection.
    Svs = "svs", "intersect", SvsArgs => SvsOutput,
        "intersect sorted lists on this device (SvS) through a staging buffer";
}
