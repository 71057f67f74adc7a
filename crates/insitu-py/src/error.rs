//! Host errors as Python exceptions: the class (defined in `insitu/errors.py`, so it can also derive
//! from `ValueError`, `LookupError` or `OSError` and pickle across Ray) is chosen by the error's
//! [`ErrorKind`]; the message is the CLI's.

use insitu_host::{ErrorKind, HostError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The `insitu.errors` class of each kind.
fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidArgument => "InvalidArgumentError",
        ErrorKind::NotFound => "NotFoundError",
        ErrorKind::AlreadyExists => "AlreadyExistsError",
        ErrorKind::NoArray => "NoArrayError",
        ErrorKind::ArrayExists => "ArrayExistsError",
        ErrorKind::Locked => "LockedError",
        ErrorKind::Corrupt => "CorruptError",
        ErrorKind::Damaged => "DamagedError",
        ErrorKind::DeviceFull => "DeviceFullError",
        ErrorKind::DeviceMemory => "DeviceMemoryError",
        ErrorKind::Offline => "OfflineError",
        ErrorKind::File => "FileError",
        ErrorKind::Format => "FormatError",
        ErrorKind::Device => "DeviceError",
    }
}

/// The exception of class `name` in `insitu.errors` with `message`; an error of a file also carries
/// `errno` and `filename`, as Python's own `OSError`s do.
fn raise_with(name: &str, message: String, file: Option<(Option<i32>, &std::path::Path)>) -> PyErr {
    Python::attach(|py| {
        let made = py.import("insitu.errors").and_then(|m| m.getattr(name)).and_then(|class| {
            let e = class.call1((message.clone(),))?;
            if let Some((errno, path)) = file {
                e.setattr("errno", errno)?;
                e.setattr("filename", path.as_os_str())?;
            }
            Ok(e)
        });
        match made {
            Ok(e) => PyErr::from_value(e),
            // The native module used without its package: the message still gets through.
            Err(_) => PyRuntimeError::new_err(message),
        }
    })
}

fn raise(name: &str, message: String) -> PyErr {
    raise_with(name, message, None)
}

/// A host error as the Python exception of its kind. A file that is not there is a
/// `MissingFileError`, which `except FileNotFoundError` catches too.
pub fn to_py(e: HostError) -> PyErr {
    if let HostError::Io { path, error } = &e {
        let name =
            if error.kind() == std::io::ErrorKind::NotFound { "MissingFileError" } else { "FileError" };
        return raise_with(name, e.to_string(), Some((error.raw_os_error(), path)));
    }
    raise(class_name(e.kind()), e.to_string())
}

/// A device-layer error (loading a profile) as a Python exception.
pub fn from_device(e: impl Into<HostError>) -> PyErr {
    to_py(e.into())
}

/// An `InvalidArgumentError` with `message`.
pub fn invalid(message: String) -> PyErr {
    raise("InvalidArgumentError", message)
}
