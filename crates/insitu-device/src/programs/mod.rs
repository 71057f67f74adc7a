//! Device-defined programs, one module per seed system as they arrive.
//!
//! - [`search`]: literal string search over an object (BlueDBM §5.1), and `heads`, its helper that exports
//!   the first bytes of each stripe so matches straddling two devices are found once.
//! - [`nascent`]: `dict-decode`, `sort` (in memory or out of core through flash) and `gather` (the
//!   shuffle), NASCENT §3.3-3.6.
//! - [`psacs`]: `psacs-shuffle`, the map side of a distributed shuffle (PSACS §III-IV).
//! - [`svs`]: `svs`, list intersection as the 2016 Smart SSD's SSDlet runs it (DaMoN '16 §3).

pub mod nascent;
pub mod psacs;
pub mod search;
pub mod svs;
