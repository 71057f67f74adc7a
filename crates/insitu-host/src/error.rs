//! Errors of the host layer. Each says what went wrong and where, typed by what failed: a device (with its
//! id), a file, the array's metadata, Arrow or Parquet, or the user's input.

use std::path::PathBuf;

use insitu_device::rawflash::RawFlashError;
use insitu_device::{DeviceError, FlashError};

pub type Result<T> = std::result::Result<T, HostError>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    #[error("device {device}: {error}")]
    Device { device: u32, error: DeviceError },
    #[error(transparent)]
    DeviceSetup(#[from] DeviceError),
    /// From the flash layer: a name it refuses (objects are named like files), a durable write that failed.
    #[error(transparent)]
    Flash(#[from] FlashError),
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{what}: {error}")]
    Arrow { what: String, error: arrow::error::ArrowError },
    #[error("{what}: {error}")]
    Parquet { what: String, error: parquet::errors::ParquetError },
    #[error("no array at {0} (create one with `insitu init`)")]
    NoArray(PathBuf),
    #[error("an array already exists at {0}")]
    ArrayExists(PathBuf),
    #[error(
        "the array at {0} is in use by another insitu process, or by an array of this process not yet closed \
         (its lock is held); wait for it to finish, or close it"
    )]
    Locked(PathBuf),
    #[error("corrupted {what} at {path}: {detail}")]
    Corrupt { what: &'static str, path: PathBuf, detail: String },
    #[error("no object named {0:?}")]
    NotFound(String),
    #[error("an object named {0:?} already exists")]
    AlreadyExists(String),
    #[error("no device {device}: the array has {count} device(s), numbered from 0 to {}", count.saturating_sub(1))]
    NoSuchDevice { device: u32, count: u32 },
    #[error("device {device} is offline: {detail}")]
    Offline { device: u32, detail: String },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("object {name:?} is damaged: {detail}")]
    Damaged { name: String, detail: String },
    /// The BlueDBM file system's files (`insitu fs`), named as files, not objects.
    #[error(
        "no file named {0:?} in the file system (`insitu fs ls` lists them; `insitu fs put FILE` stores one)"
    )]
    NoFile(String),
    #[error("a file named {0:?} already exists in the file system")]
    FileExists(String),
    #[error("file {name:?} is damaged: {detail}")]
    FileDamaged { name: String, detail: String },
    /// The caller's progress callback asked to stop (a Python callback that raised, or Ctrl-C): the
    /// operation undid what it had started, as after any failure.
    #[error("cancelled: {0}")]
    Cancelled(String),
    /// The file system has no room for a write: what it needs and what is free, said in the file system's
    /// terms (pages, buses and the blocks cleaning keeps).
    #[error("the file system is full: {0}")]
    FsFull(String),
}

impl HostError {
    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        HostError::Io { path: path.into(), error }
    }

    pub(crate) fn device(device: u32) -> impl FnOnce(DeviceError) -> HostError {
        move |error| HostError::Device { device, error }
    }

    pub(crate) fn arrow(what: impl Into<String>) -> impl FnOnce(arrow::error::ArrowError) -> HostError {
        let what = what.into();
        move |error| HostError::Arrow { what, error }
    }

    pub(crate) fn parquet(
        what: impl Into<String>,
    ) -> impl FnOnce(parquet::errors::ParquetError) -> HostError {
        let what = what.into();
        move |error| HostError::Parquet { what, error }
    }
}

/// What kind of failure an error is: what a front that types its errors (the Python package's exception
/// classes) needs, whatever layer the error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller asked for something impossible: a bad name, option, value or profile.
    InvalidArgument,
    /// No object of that name.
    NotFound,
    /// An object of that name exists already.
    AlreadyExists,
    /// No array in the directory.
    NoArray,
    /// An array is in the directory already.
    ArrayExists,
    /// Another process holds the array.
    Locked,
    /// Metadata on disk is not what was written (a damaged image or catalog).
    Corrupt,
    /// An object's data is damaged.
    Damaged,
    /// A device has no room for the write.
    DeviceFull,
    /// A device's memory cannot hold what a program needs.
    DeviceMemory,
    /// A device did not open, or its server went away.
    Offline,
    /// A file of the caller's could not be read or written.
    File,
    /// Input data that Arrow or Parquet refused.
    Format,
    /// Anything else a device reported.
    Device,
}

impl ErrorKind {
    /// The kind's name in the CLI's `--json` errors (`{"error": ..., "kind": "not_found"}`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::NoArray => "no_array",
            ErrorKind::ArrayExists => "array_exists",
            ErrorKind::Locked => "locked",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Damaged => "damaged",
            ErrorKind::DeviceFull => "device_full",
            ErrorKind::DeviceMemory => "device_memory",
            ErrorKind::Offline => "offline",
            ErrorKind::File => "file",
            ErrorKind::Format => "format",
            ErrorKind::Device => "device",
        }
    }
}

impl HostError {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            HostError::Device { error, .. } | HostError::DeviceSetup(error) => device_kind(error),
            HostError::Flash(e) => flash_kind(e),
            HostError::Io { .. } => ErrorKind::File,
            HostError::Arrow { .. } | HostError::Parquet { .. } => ErrorKind::Format,
            HostError::NoArray(_) => ErrorKind::NoArray,
            HostError::ArrayExists(_) => ErrorKind::ArrayExists,
            HostError::Locked(_) => ErrorKind::Locked,
            HostError::Corrupt { .. } => ErrorKind::Corrupt,
            HostError::NotFound(_) | HostError::NoFile(_) => ErrorKind::NotFound,
            HostError::AlreadyExists(_) | HostError::FileExists(_) => ErrorKind::AlreadyExists,
            HostError::NoSuchDevice { .. } | HostError::InvalidArgument(_) => ErrorKind::InvalidArgument,
            HostError::Offline { .. } => ErrorKind::Offline,
            HostError::Damaged { .. } | HostError::FileDamaged { .. } => ErrorKind::Damaged,
            HostError::FsFull(_) => ErrorKind::DeviceFull,
            HostError::Cancelled(_) => ErrorKind::InvalidArgument,
        }
    }
}

fn device_kind(e: &DeviceError) -> ErrorKind {
    match e {
        DeviceError::Flash(f) | DeviceError::RawFlash(RawFlashError::Flash(f)) => flash_kind(f),
        // A page the raw interface finds erased is one a file system's map names but never programmed.
        DeviceError::RawFlash(RawFlashError::ErasedPage { .. }) => ErrorKind::Damaged,
        DeviceError::MemoryExhausted { .. } => ErrorKind::DeviceMemory,
        DeviceError::UnknownProfile { .. }
        | DeviceError::InvalidProfile { .. }
        | DeviceError::BadArgument { .. }
        | DeviceError::FirmwareRefused { .. }
        // An appliance's operation asked of an array whose profile has no raw flash: the caller's choice.
        | DeviceError::NoRawFlash(_) => ErrorKind::InvalidArgument,
        DeviceError::ShutDown(_) | DeviceError::Disconnected(_) => ErrorKind::Offline,
        DeviceError::InUse(_) => ErrorKind::Locked,
        DeviceError::NotADevice(_) | DeviceError::RawFlashMissing(_) => ErrorKind::Corrupt,
        _ => ErrorKind::Device,
    }
}

fn flash_kind(e: &FlashError) -> ErrorKind {
    match e {
        FlashError::DeviceFull { .. } => ErrorKind::DeviceFull,
        // A name, or a capacity (a geometry) the caller gave that cannot be.
        FlashError::InvalidName { .. } | FlashError::InvalidGeometry(_) => ErrorKind::InvalidArgument,
        FlashError::AlreadyExists(_) => ErrorKind::AlreadyExists,
        FlashError::NotFound(_) => ErrorKind::NotFound,
        FlashError::Corrupt { .. } | FlashError::Version { .. } => ErrorKind::Corrupt,
        FlashError::CorruptPage { .. } => ErrorKind::Damaged,
        _ => ErrorKind::Device,
    }
}
