//! The device-defined programs' implementations, one module per seed system; their interfaces (typed
//! arguments and results) are in [`crate::protocol::programs`].
//!
//! - [`search`]: `search` and `heads` (BlueDBM §5.1 string search);
//! - [`nascent`]: `dict-decode`, `sort` (in memory or out of core), `gather` (NASCENT §3.3-3.6), and
//!   `extract-key` (a column stored row-wise as a key column);
//! - [`psacs`]: `psacs-shuffle`, the map side of a shuffle (PSACS §III-IV);
//! - [`intersect`]: `svs`, list intersection as the 2016 Smart SSD's SSDlet runs it (DaMoN '16 §3).

mod intersect;
mod nascent;
mod psacs;
mod search;

use crate::completion::Prepared;
use crate::program::ProgramContext;
use crate::protocol::programs::{
    DictDecode, Execute, ExtractKey, Gather, Heads, ProgramCall, PsacsShuffle, Search, Sort, Svs,
};

/// Runs one program call, calls `done(succeeded)` as soon as it has finished, and returns its typed result.
pub(crate) fn run(ctx: &ProgramContext<'_>, call: ProgramCall, done: impl FnOnce(bool)) -> Prepared {
    macro_rules! dispatch {
        ($($variant:ident => $f:path),* $(,)?) => {
            match call {
                $(ProgramCall::$variant(args) => {
                    let r = $f(ctx, args);
                    done(r.is_ok());
                    Prepared::of::<Execute<$variant>>(r)
                })*
            }
        };
    }
    dispatch! {
        Search => search::search,
        Heads => search::heads,
        Sort => nascent::sort,
        DictDecode => nascent::dict_decode,
        Gather => nascent::gather,
        ExtractKey => nascent::extract_key,
        PsacsShuffle => psacs::psacs_shuffle,
        Svs => intersect::svs,
    }
}
