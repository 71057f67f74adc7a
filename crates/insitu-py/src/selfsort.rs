//! The Self-Sorting SSD (Cavazos Quero, Lee, Kim, §III) for the Python front: the choices its methods
//! take by name, as the CLI's `selfsort` commands do. The methods themselves (`array.rs`) call the host's
//! `selfsort` operations directly.

use insitu_host::selfsort::{Interface, Query};
use insitu_host::{HostError, Result};

fn bad(detail: String) -> HostError {
    HostError::InvalidArgument(detail)
}

/// How a command reaches the firmware, by the CLI's name.
pub fn via(text: &str) -> Result<Interface> {
    match text {
        "block" => Ok(Interface::CommandBlock),
        "vendor" => Ok(Interface::Vendor),
        other => Err(bad(format!("via {other:?}: expected block (the command block) or vendor"))),
    }
}

/// A query by name: `min`, `max`, `range` (`lo`..=`hi`), `select` (`lo` is the key).
pub fn query(kind: &str, lo: Option<Vec<u8>>, hi: Option<Vec<u8>>) -> Result<Query> {
    let need = |k: Option<Vec<u8>>, what: &str| k.ok_or_else(|| bad(format!("a {kind} query needs {what}")));
    Ok(match kind {
        "min" => Query::Min,
        "max" => Query::Max,
        "range" => Query::Range { lo: need(lo, "a low key")?, hi: need(hi, "a high key")? },
        "select" => Query::Select { key: need(lo, "a key")? },
        other => return Err(bad(format!("query {other:?}: expected min, max, range or select"))),
    })
}
