//! The Smart SSD list intersection (DaMoN '16): lists on devices, the session API, the `svs` operator with
//! device / host / auto placements, and the analytical cost model (§4).

pub mod info;
pub mod lists;
pub mod model;
pub mod operator;
pub mod repro;
pub mod session;

/// The core memory pages pass through on their way to device DRAM (§3.1: 256 KB).
pub const STAGING: u64 = 256 << 10;
