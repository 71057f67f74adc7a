//! Errors of the flash layer. Every variant names what went wrong and where, so that the CLI can print it
//! as is and `fsck` can report it.

use std::borrow::Cow;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Result of flash operations.
pub type Result<T> = std::result::Result<T, FlashError>;

/// What can go wrong in the flash layer. Errors are plain data (serde), so they cross a device protocol
/// to the host as the typed values they are.
#[derive(Debug, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum FlashError {
    #[error("I/O error on {path}: {error}")]
    Io {
        path: PathBuf,
        #[serde(with = "crate::error::io_error")]
        error: std::io::Error,
    },
    #[error("invalid flash geometry: {0}")]
    InvalidGeometry(String),
    #[error("corrupted {what} in {path}: {detail}")]
    Corrupt { what: Cow<'static, str>, path: PathBuf, detail: String },
    #[error("page {ppn} ({addr}) holds corrupted data: {detail}")]
    CorruptPage { ppn: u64, addr: String, detail: String },
    #[error("NAND rule violated: {0}")]
    NandViolation(String),
    #[error("device full: {needed_pages} more pages of {page_size} bytes needed, {free_pages} free")]
    DeviceFull { needed_pages: u64, free_pages: u64, page_size: u32 },
    #[error("invalid object name {name:?}: {why}")]
    InvalidName { name: String, why: Cow<'static, str> },
    #[error("an object named {0:?} already exists")]
    AlreadyExists(String),
    /// Formatting a directory that already holds a device's flash (its superblock).
    #[error("{0} already holds a formatted device (its superblock)")]
    AlreadyFormatted(PathBuf),
    #[error("no object named {0:?}")]
    NotFound(String),
    #[error("unknown write transaction {0}")]
    UnknownTxn(u64),
    #[error("read of bytes {offset}..{end} is past the end of {name:?} ({size} bytes)")]
    ReadPastEnd { name: String, offset: u64, end: u64, size: u64 },
    #[error("LBA range {start}..{end} is outside the device's {pages} logical pages")]
    LbaOutOfRange { start: u64, end: u64, pages: u64 },
    #[error("LBA {lba} belongs to object {owner:?}; raw block writes and trims may not change objects")]
    LbaOwned { lba: u64, owner: String },
    #[error("unsupported on-disk format version {found} in {path} (this build reads {expected})")]
    Version { path: PathBuf, found: u32, expected: u32 },
}

impl FlashError {
    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        FlashError::Io { path: path.into(), error }
    }

    /// The host's file system is full (or the user's quota is): the device's files could not grow.
    pub fn is_host_disk_full(&self) -> bool {
        matches!(self, FlashError::Io { error, .. }
            if matches!(error.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)))
    }
}

/// An I/O error as data: the OS error code when there is one (so the kind and message come back exactly),
/// else its kind and message. For `#[serde(with = "insitu_flash::error::io_error")]` on `std::io::Error`
/// fields.
pub mod io_error {
    use std::io::ErrorKind;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct IoError {
        os: Option<i32>,
        kind: String,
        message: String,
    }

    /// The kinds an error without an OS code keeps across (others come back as `Other`).
    const KINDS: &[ErrorKind] = &[
        ErrorKind::NotFound,
        ErrorKind::PermissionDenied,
        ErrorKind::AlreadyExists,
        ErrorKind::InvalidInput,
        ErrorKind::InvalidData,
        ErrorKind::UnexpectedEof,
        ErrorKind::WriteZero,
        ErrorKind::Interrupted,
        ErrorKind::Unsupported,
        ErrorKind::OutOfMemory,
        ErrorKind::TimedOut,
        ErrorKind::BrokenPipe,
    ];

    pub fn serialize<S: Serializer>(e: &std::io::Error, s: S) -> Result<S::Ok, S::Error> {
        IoError { os: e.raw_os_error(), kind: format!("{:?}", e.kind()), message: e.to_string() }.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<std::io::Error, D::Error> {
        let e = IoError::deserialize(d)?;
        Ok(match e.os {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => {
                let kind =
                    KINDS.iter().copied().find(|k| format!("{k:?}") == e.kind).unwrap_or(ErrorKind::Other);
                std::io::Error::new(kind, e.message)
            }
        })
    }
}
