//! Errors of the device layer. They are plain data (serde) so that they cross the device protocol, and
//! any transport, as the typed values they are.

use std::path::PathBuf;

use insitu_flash::FlashError;
use serde::{Deserialize, Serialize};

pub type Result<T> = std::result::Result<T, DeviceError>;

#[derive(Debug, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum DeviceError {
    #[error(transparent)]
    Flash(#[from] FlashError),
    #[error("device memory exhausted: {requested} bytes requested, {available} of {capacity} free")]
    MemoryExhausted { requested: u64, available: u64, capacity: u64 },
    #[error("unknown device memory handle {0}")]
    UnknownHandle(u64),
    #[error("range {offset}..{end} is outside device memory buffer {handle} ({len} bytes)")]
    OutOfBounds { handle: u64, offset: u64, end: u64, len: u64 },
    #[error("no program with id {0:?} on this device")]
    UnknownProgram(String),
    #[error("program {program}: {detail}")]
    BadArgument { program: String, detail: String },
    #[error("program {program} failed: {detail}")]
    ProgramFailed { program: String, detail: String },
    #[error("unknown profile {name:?} (built-in profiles: {known}; or give a path to a .toml file)")]
    UnknownProfile { name: String, known: String },
    #[error("invalid profile {profile}: {detail}")]
    InvalidProfile { profile: String, detail: String },
    #[error("device {0} is shut down")]
    ShutDown(u32),
    #[error("I/O error on {path}: {error}")]
    Io {
        path: PathBuf,
        #[serde(with = "insitu_flash::error::io_error")]
        error: std::io::Error,
    },
    #[error("{0} is not a device directory (no device.json)")]
    NotADevice(PathBuf),
    #[error("device directory {0} is in use by another process (its lock is held)")]
    InUse(PathBuf),
    #[error("no device {0} on this device's fabric")]
    NoPeer(u32),
    #[error("lost its device server: {0}")]
    Disconnected(String),
    #[error("device protocol: {0}")]
    Protocol(String),
    /// A resident firmware extension refused a request: a bad argument, or one its state does not allow
    /// (Self-Sort: a bad index configuration or command block, a write straddling an indexed range, a query
    /// of an index that is not there).
    #[error("{firmware}: {detail}")]
    FirmwareRefused { firmware: String, detail: String },
    /// A resident firmware extension failed (Self-Sort: an index that no longer fits device memory, a
    /// saved image that does not match its configuration).
    #[error("{firmware}: {detail}")]
    Firmware { firmware: String, detail: String },
    #[error("raw flash: {0}")]
    RawFlash(#[from] crate::rawflash::command::RawFlashError),
    /// The device's profile has no raw flash interface (the host names the device).
    #[error(
        "no raw flash partition: the device's profile has no raw flash interface ([nand.interface]); BlueDBM's \
         file system and applications need an appliance of a profile that has one, such as `bluedbm`"
    )]
    NoRawFlash(u32),
    /// The device's profile has a raw flash interface, but its partition is not in the device directory
    /// (removed by hand, or lost): the pages it held are gone.
    #[error(
        "the raw flash partition {0} is missing (its geometry.json is not there): the pages it held are lost"
    )]
    RawFlashMissing(PathBuf),
    /// A read across the storage network that cannot be done as asked (BlueDBM §3).
    #[error("storage network: {0}")]
    StorageNetwork(String),
    /// A job the in-store processor refused or could not finish (BlueDBM §4, §7).
    #[error("in-store processor: {0}")]
    Isp(String),
}

impl DeviceError {
    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        DeviceError::Io { path: path.into(), error }
    }
}
