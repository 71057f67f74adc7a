//! Errors of the device layer.

use insitu_flash::FlashError;

pub type Result<T> = std::result::Result<T, DeviceError>;

#[derive(Debug, thiserror::Error)]
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
    #[error("no command {0} is pending on this device")]
    UnknownCommand(u64),
}
