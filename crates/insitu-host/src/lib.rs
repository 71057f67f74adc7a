//! The host side of insitu: an [`Array`] of computational storage devices in a data directory, the
//! operators (one module per seed system as they arrive), their baselines, the timing and energy
//! [`model`], and [`Report`]s. The host talks to devices only through the command set
//! ([`insitu_device::Command`]), as it would to real hardware.
//!
//! - [`blob`]: put / get / rm / ls of plain objects, striped over the array or on one device.
//! - [`search`]: string search, device vs host placement (BlueDBM §5.1).
//! - [`table`]: tables on devices and NASCENT's sort (FPGA '21).
//! - [`psacs`]: PSACS's shuffle write inside the devices, its host baselines, shuffle read (ICCD '21).
//! - [`model`]: counters -> modeled time and energy on a profile.

pub mod array;
pub mod blob;
pub mod catalog;
pub mod error;
pub mod fault;
pub mod intersect;
pub mod model;
pub mod psacs;
pub mod report;
pub mod search;
pub mod table;
pub mod units;

pub use array::{Array, OpenReport, DEFAULT_STRIPE_UNIT};
pub use error::{HostError, Result};
pub use fault::FaultPlan;
pub use report::{PathBytes, Report};
