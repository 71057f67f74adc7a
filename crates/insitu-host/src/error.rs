//! Errors of the host layer. Each says what went wrong and where, typed by what failed: a device (with its
//! id), a file, the array's metadata, Arrow or Parquet, or the user's input.

use std::path::PathBuf;

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
        "the array at {0} is in use by another insitu process (its lock is held); wait for it to finish"
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
