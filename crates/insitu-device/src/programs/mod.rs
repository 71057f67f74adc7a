//! Device-defined programs, one module per seed system as they arrive.
//!
//! - [`search`]: literal string search over an object (BlueDBM §5.1), and `heads`, its helper that exports
//!   the first bytes of each stripe so matches straddling two devices are found once.

pub mod search;
