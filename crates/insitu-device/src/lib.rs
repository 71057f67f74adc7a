//! One computational storage drive: flash ([`insitu_flash`]) + bounded device memory + compute units +
//! device-defined programs + a command set with completion events + meters, described by a hardware
//! [`Profile`].
//!
//! Main types: [`Device`], [`Command`] / [`Response`], [`Program`], [`Profile`], [`DeviceCounters`].
//!
//! ```
//! use insitu_device::{Args, Command, Device, Profile, Response, Value};
//! let dir = tempfile::tempdir().unwrap();
//! let dev = Device::format(dir.path(), 0, Profile::load("tiny").unwrap(), 4 << 20).unwrap();
//! let Response::Txn(txn) = dev.call(Command::CreateObject {
//!     name: "t".into(), kind: "blob".into(), attrs: Default::default(), expected_size: None,
//! }).unwrap() else { panic!() };
//! dev.call(Command::Append { txn, data: b"needle in a haystack, needle".to_vec() }).unwrap();
//! dev.call(Command::Commit { txn }).unwrap();
//! let args = Args::new()
//!     .with("object", Value::Str("t".into()))
//!     .with("pattern", Value::Bytes(b"needle".to_vec()))
//!     .with("total_size", Value::U64(28));
//! let Response::Output(out) = dev.call(Command::Execute { program: "search".into(), args, buffers: vec![] })
//!     .unwrap() else { panic!() };
//! assert_eq!(out.u64("count"), Some(2));
//! ```

pub mod command;
pub mod cputime;
mod device;
pub mod error;
pub mod memory;
pub mod meters;
pub mod profile;
pub mod program;
pub mod programs;
pub mod stripe;

pub use command::{Args, Command, CommandId, Completion, ProgramInfo, Properties, Response, Value};
pub use device::{Device, Peer};
pub use error::{DeviceError, Result};
pub use memory::{DeviceMemory, MemHandle};
pub use meters::{DeviceCounters, ProgramStats};
pub use profile::Profile;
pub use program::{Program, ProgramContext};
pub use stripe::StripeLayout;
