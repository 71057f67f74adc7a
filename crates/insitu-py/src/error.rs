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
        // An error made here (not by the OS) has no errno: the one its kind stands for.
        let errno = error.raw_os_error().or(match error.kind() {
            std::io::ErrorKind::NotFound => Some(libc_errno::ENOENT),
            std::io::ErrorKind::NotADirectory => Some(libc_errno::ENOTDIR),
            std::io::ErrorKind::IsADirectory => Some(libc_errno::EISDIR),
            std::io::ErrorKind::PermissionDenied => Some(libc_errno::EACCES),
            _ => None,
        });
        return raise_with(name, e.to_string(), Some((errno, path)));
    }
    raise(class_name(e.kind()), in_python_words(&e.to_string()))
}

/// The CLI's message in a Python user's words: a flag named in it (`--entry-size`) becomes the keyword
/// argument it is in Python (`entry_size`), and `insitu init` becomes `insitu.Array.create`. Text in
/// double quotes (a name, a path) and in backticks (a command) is left as it is.
pub fn in_python_words(message: &str) -> String {
    // The CLI's commands a message names, as this package's calls (`insitu fsck --repair` has none: it
    // stays a command, which runs on the same array).
    let mut message = message.to_string();
    for (cli, python) in [
        ("`insitu init --nodes N --topology T`", "`insitu.Array.create(path, devices=N, topology=T)`"),
        ("`insitu init`", "`insitu.Array.create`"),
        ("`insitu selfsort config`", "`Array.selfsort_config`"),
        ("`insitu selfsort generate`", "`Array.selfsort_generate`"),
        ("`insitu fs ls`", "`Array.fs_ls`"),
        ("`insitu fs put FILE`", "`Array.fs_put`"),
        ("`insitu fs rm`", "`Array.fs_rm`"),
        ("`insitu fsck` ", "`Array.fsck` "),
        ("--ids-only or --count-only", "entries=False or count_only=True"),
    ] {
        message = message.replace(cli, python);
    }
    let mut out = String::with_capacity(message.len());
    let (mut quoted, mut command) = (false, false);
    let mut rest = message.as_str();
    while let Some(c) = rest.chars().next() {
        let flag = rest.strip_prefix("--").filter(|_| !quoted && !command);
        let starts_word = out.chars().last().is_none_or(|p| !p.is_alphanumeric() && p != '-' && p != '_');
        if let (Some(after), true) = (flag, starts_word) {
            let end = after.find(|c: char| !(c.is_ascii_lowercase() || c == '-')).unwrap_or(after.len());
            let name = after[..end].trim_end_matches('-');
            if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                out.push_str(&name.replace('-', "_"));
                rest = &after[name.len()..];
                continue;
            }
        }
        match c {
            '"' if !command => quoted = !quoted,
            '`' if !quoted => command = !command,
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A device-layer error (loading a profile) as a Python exception.
pub fn from_device(e: impl Into<HostError>) -> PyErr {
    to_py(e.into())
}

/// An `InvalidArgumentError` with `message`.
pub fn invalid(message: String) -> PyErr {
    raise("InvalidArgumentError", message)
}

/// The errno values of Linux (the only platform built), for errors made without one.
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EACCES: i32 = 13;
    pub const ENOTDIR: i32 = 20;
    pub const EISDIR: i32 = 21;
}
