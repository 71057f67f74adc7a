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
    DictDecode, DictDecodeOutput, Execute, ExtractKey, ExtractKeyOutput, Gather, GatherOutput, Heads,
    HeadsOutput, ProgramCall, PsacsShuffle, Search, SearchOutput, ShuffleOutput, Sort, SortOutput, Svs,
    SvsOutput,
};

/// Bytes of a program's result that cross the host link with its completion: the lists it returns (a
/// search's match offsets, a gather's item offsets), counted as the device sends them. Its few counters
/// travel with the completion, as a command's status does, and are not counted.
trait ResultBytes {
    fn result_bytes(&self) -> u64 {
        0
    }
}

impl ResultBytes for SearchOutput {
    fn result_bytes(&self) -> u64 {
        self.offsets.as_ref().map_or(0, |o| 8 * o.len() as u64)
    }
}

impl ResultBytes for GatherOutput {
    fn result_bytes(&self) -> u64 {
        self.offsets.as_ref().map_or(0, |o| 8 * o.len() as u64)
    }
}

impl ResultBytes for HeadsOutput {}
impl ResultBytes for SortOutput {}
impl ResultBytes for DictDecodeOutput {}
impl ResultBytes for ExtractKeyOutput {}
impl ResultBytes for ShuffleOutput {}
impl ResultBytes for SvsOutput {}

/// Runs one program call, calls `done(succeeded)` as soon as it has finished, and returns its typed result.
pub(crate) fn run(ctx: &ProgramContext<'_>, call: ProgramCall, done: impl FnOnce(bool)) -> Prepared {
    macro_rules! dispatch {
        ($($variant:ident => $f:path),* $(,)?) => {
            match call {
                $(ProgramCall::$variant(args) => {
                    let r = $f(ctx, args);
                    if let Ok(out) = &r {
                        crate::meters::Meters::add(&ctx.meters.device_to_host, out.result_bytes());
                    }
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
