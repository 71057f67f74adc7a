//! BlueDBM (ISCA '15): an appliance of nodes whose storage devices are joined by their own network.
//! So far: the storage network's reproduction ([`repro`], Fig. 11), on the discrete-event simulation of
//! [`insitu_device::network`].

pub mod repro;

pub mod routes;

pub use insitu_device::network::{Topology, TopologyError};
