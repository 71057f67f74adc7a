//! The unsafe steps of the Python front: taking an Arrow C stream out of a PyCapsule, and setting an
//! option of the module's allocator.

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

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_t`, mimalloc.h; the enum keeps its order
/// across releases, deprecated options holding their places, since it is part of the ABI).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps memory the module freed for 10 s before mimalloc hands it back to the kernel (1 s by default): a
/// table read again a few seconds later (the user's own work in between) lands in memory already faulted
/// in rather than faulting a fresh GB in.
pub fn keep_freed_memory() {
    // SAFETY: `mi_option_set` takes any option and value; it only stores the value (options are plain
    // integers, read atomically), and mimalloc is this module's allocator, linked in statically.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10_000) };
}
