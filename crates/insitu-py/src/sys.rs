//! The one unsafe step of the Python front: taking an Arrow C stream out of a PyCapsule.

// The C stream interface is a pair of raw pointers by nature; the contract is stated where it is taken.
#![allow(unsafe_code)]

use std::ffi::CStr;

use arrow::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// The name the Arrow PyCapsule interface gives a stream's capsule.
pub const STREAM: &CStr = c"arrow_array_stream";

/// Moves the stream out of `capsule` (which must be named [`STREAM`]) into a reader.
pub fn take_stream(capsule: &Bound<'_, PyCapsule>) -> PyResult<arrow::error::Result<ArrowArrayStreamReader>> {
    let ptr = capsule.pointer_checked(Some(STREAM))?;
    // SAFETY: a capsule named `arrow_array_stream` holds an `ArrowArrayStream` (the PyCapsule
    // interface's contract, its name checked above). `from_raw` moves the stream out and leaves a
    // released one behind, so the capsule's destructor releases nothing twice; the capsule is alive
    // (borrowed) while the stream is moved.
    Ok(unsafe { ArrowArrayStreamReader::from_raw(ptr.cast::<FFI_ArrowArrayStream>().as_ptr()) })
}
