//! One computational storage drive: flash ([`insitu_flash`]) + bounded device memory + compute units +
//! device-defined programs + resident firmware on the I/O path + a typed command protocol carried by
//! transports, with meters, described by a hardware [`Profile`].
//!
//! Main types: [`Device`] (the drive), [`protocol`] (its commands, each typed with its response),
//! [`DeviceClient`] (a typed handle over a [`transport::Transport`]: in this process or in another),
//! [`Profile`], [`DeviceCounters`].
//!
//! ```
//! use insitu_device::protocol::{Append, Commit, CreateObject, Search, SearchArgs};
//! use insitu_device::{transport, Device, Profile, StripeLayout};
//! let dir = tempfile::tempdir().unwrap();
//! let dev = transport::in_process(Device::format(dir.path(), 0, Profile::load("tiny").unwrap(), 4 << 20).unwrap());
//! let txn = dev.call(CreateObject { name: "t".into(), kind: "blob".into(), attrs: Default::default(), expected_size: None }).unwrap();
//! dev.call(Append { txn, data: b"needle in a haystack, needle".to_vec() }).unwrap();
//! dev.call(Commit { txn }).unwrap();
//! let found = dev
//!     .execute::<Search>(SearchArgs {
//!         object: "t".into(),
//!         pattern: b"needle".to_vec(),
//!         offsets: true,
//!         layout: StripeLayout::single(28),
//!         halo: None,
//!     })
//!     .unwrap();
//! assert_eq!((found.count, found.offsets), (2, Some(vec![0, 22])));
//! ```

pub mod cluster;
pub mod completion;
mod device;
pub mod engines;
pub mod error;
pub mod fabric;
pub mod fault;
pub mod firmware;
pub mod global;
pub mod isp;
mod media;
pub mod memory;
pub mod meters;
pub mod network;
pub mod profile;
mod program;
mod programs;
pub mod protocol;
pub mod rawflash;
pub mod stripe;
pub mod sys;
pub mod transport;
pub mod work;

pub use device::Device;
pub use error::{DeviceError, Result};
pub use fault::FaultPlan;
pub use memory::{DeviceMemory, MemHandle};
pub use meters::{DeviceCounters, ProgramStats};
pub use profile::{HostProfile, Profile};
pub use stripe::StripeLayout;
pub use transport::DeviceClient;

/// What crosses the protocol from the flash layer: object metadata, write transactions, physical
/// addresses, space figures, fsck reports, and the rules for object names.
pub use insitu_flash::{
    validate_name, FlashError, FlashStats, FsckReport, ObjectMeta, PhysicalPage, TxnId, MAX_NAME_BYTES,
};

pub use insitu_flash::free_bytes;
pub use insitu_flash::ftl::HOST_SLACK_BYTES;
/// How the device writes its own metadata files, for the host's: atomically (temporary file, fsync,
/// rename, fsync of the directory), and small JSON files after a checksum line.
pub use insitu_flash::persist::{checked_body, with_checksum, write_atomic};
