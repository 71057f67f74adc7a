//! What an operation reads its data from: a file, or bytes already in memory (the counterpart of
//! [`crate::outfile`] for inputs). The CLI passes files; the Python front passes either.

use std::io::Read;
use std::path::Path;

use crate::error::{HostError, Result};

/// Bytes to store, write or sort: a file's, or bytes in memory (the Python front's).
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    File(&'a Path),
    Bytes(&'a [u8]),
}

impl<'a> Input<'a> {
    /// Its size in bytes.
    pub fn size(&self) -> Result<u64> {
        match self {
            Input::File(p) => Ok(std::fs::metadata(p).map_err(|e| HostError::io(p, e))?.len()),
            Input::Bytes(b) => Ok(b.len() as u64),
        }
    }

    /// Its bytes from the start.
    pub fn reader(&self) -> Result<Box<dyn Read + 'a>> {
        match *self {
            Input::File(p) => Ok(Box::new(std::io::BufReader::with_capacity(
                1 << 20,
                std::fs::File::open(p).map_err(|e| HostError::io(p, e))?,
            ))),
            Input::Bytes(b) => Ok(Box::new(b)),
        }
    }

    /// How an error names it.
    pub fn name(&self) -> String {
        match self {
            Input::File(p) => p.display().to_string(),
            Input::Bytes(_) => "the data".into(),
        }
    }

    /// Its number of `record`-byte records; refused unless whole and non-zero (`what` ends the message).
    pub fn records(&self, record: u64, what: &str) -> Result<u64> {
        let size = self.size()?;
        if size == 0 || size % record != 0 {
            return Err(HostError::InvalidArgument(format!(
                "{} holds {size} bytes: not a whole, non-zero number of {record}-byte records{what}",
                self.name()
            )));
        }
        Ok(size / record)
    }
}
