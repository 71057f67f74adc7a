//! Integration tests of the flash layer: FTL invariants under random workloads with restarts and crashes,
//! object atomicity, space accounting, corruption detection.
#![allow(clippy::unwrap_used)]

mod ftl_props;
mod objects;
