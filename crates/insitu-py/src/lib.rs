//! `insitu._insitu`: the native half of the Python package. It holds an [`insitu_host::Array`] and runs
//! its operators with the GIL released; the pure-Python package (`python/insitu`) wraps it with the
//! public API: pyarrow tables in and out, numpy arrays of IDs, `Report`
//! objects, one exception class per error kind.
//!
//! What crosses the boundary is kept plain, so the Python side reads well and nothing is copied twice:
//! Arrow data moves through the Arrow PyCapsule interface (`__arrow_c_stream__`, zero-copy both ways,
//! `stream.rs`); reports and small results cross as JSON text; bulk bytes (a blob, a list's IDs) as
//! `bytes`. Errors cross as `insitu.errors` classes chosen by the host error's kind (`error.rs`), with the
//! CLI's messages.

mod array;
mod bluedbm;
mod error;
mod selfsort;
mod served;
mod stream;
mod sys;

use std::io::Write;
use std::path::{Path, PathBuf};

use insitu_host::input::Input;

use pyo3::prelude::*;

/// Every allocation of the module's Rust side (Arrow buffers handed to Python included: they come back
/// here to be freed) goes through mimalloc: see Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Bytes given in memory or as a file's path: exactly one of them.
pub(crate) fn input<'a>(data: Option<&'a [u8]>, path: Option<&'a Path>) -> insitu_host::Result<Input<'a>> {
    match (data, path) {
        (Some(d), None) => Ok(Input::Bytes(d)),
        (None, Some(p)) => Ok(Input::File(p)),
        _ => Err(insitu_host::HostError::InvalidArgument(
            "give the data as bytes or as a file's path, one of them".into(),
        )),
    }
}

/// Runs `f` writing into `out` (a file, complete or absent) or into memory (returned).
pub(crate) fn to_bytes_or_file<T>(
    out: Option<&PathBuf>,
    f: impl FnOnce(&mut dyn Write) -> insitu_host::Result<T>,
) -> insitu_host::Result<(Option<Vec<u8>>, T)> {
    match out {
        Some(p) => {
            let mut w = insitu_host::outfile::OutFile::create(p)?;
            let r = f(&mut w)?;
            w.commit()?;
            Ok((None, r))
        }
        None => {
            let mut buf = Vec::new();
            let r = f(&mut buf)?;
            Ok((Some(buf), r))
        }
    }
}

/// The built-in hardware profiles, as JSON: `[{"name": ..., "description": ..., "host": ...}, ...]`.
#[pyfunction]
fn profiles() -> PyResult<String> {
    let mut list = Vec::new();
    for (name, _) in insitu_host::profile::BUILTIN {
        let p = insitu_host::Profile::load(name).map_err(error::from_device)?;
        list.push(serde_json::json!({ "name": p.name, "description": p.description, "host": p.host.name }));
    }
    Ok(serde_json::Value::Array(list).to_string())
}

/// The list-intersection cost model (DaMoN '16 §4) for one workload on `profile`, as JSON; `text` is
/// the CLI's rendering of the same prediction.
#[pyfunction]
#[pyo3(signature = (size1, size2, entry_size, ratio, result_entry_size, profile))]
fn model_intersect(
    size1: f64,
    size2: f64,
    entry_size: f64,
    ratio: f64,
    result_entry_size: f64,
    profile: &str,
) -> PyResult<(String, String)> {
    use insitu_host::intersect::model::{predict, render, Workload};
    let profile = insitu_host::Profile::load(profile).map_err(error::from_device)?;
    let w = Workload::from_sizes(size1, size2, entry_size, ratio, result_entry_size).map_err(error::to_py)?;
    let p = predict(&profile, &w).map_err(error::to_py)?;
    let json = serde_json::to_string(&p).map_err(|e| error::invalid(e.to_string()))?;
    Ok((json, render(&profile, &p)))
}

/// BlueDBM's storage network (§3.2.3): topology `shape` (ring, line, mesh, full or a TOML file) checked
/// and its routing tables built, as `insitu net routes`: (JSON, the CLI's text).
#[pyfunction]
#[pyo3(signature = (topology, nodes, lanes, profile))]
fn net_routes(topology: &str, nodes: Option<u32>, lanes: u32, profile: &str) -> PyResult<(String, String)> {
    use insitu_host::bluedbm::routes;
    let profile = insitu_host::Profile::load(profile).map_err(error::from_device)?;
    let r = routes::routes(topology, nodes, lanes, &profile).map_err(error::to_py)?;
    let json = serde_json::to_string(&r).map_err(|e| error::invalid(e.to_string()))?;
    Ok((json, routes::render(&r)))
}

/// Random page reads over simulated nodes by every path, as `insitu net bench`, with the NAND images in a
/// scratch folder under `work` (removed afterwards); the GIL is released while it runs. (JSON, text).
#[pyfunction]
#[pyo3(signature = (nodes, topology, lanes, size, reads, profile, work))]
#[allow(clippy::too_many_arguments)]
fn net_bench(
    py: Python<'_>,
    nodes: u32,
    topology: String,
    lanes: u32,
    size: &str,
    reads: u64,
    profile: &str,
    work: PathBuf,
) -> PyResult<(String, String)> {
    use insitu_host::bluedbm::bench;
    let profile = insitu_host::Profile::load(profile).map_err(error::from_device)?;
    let bytes = insitu_host::units::parse_size(size).map_err(error::to_py)?;
    let opts = bench::BenchOptions { nodes, topology, lanes, bytes, reads, seed: 42 };
    let b = py.detach(|| bench::run(&profile, &opts, &work, &|_| {})).map_err(error::to_py)?;
    let json = serde_json::to_string(&b).map_err(|e| error::invalid(e.to_string()))?;
    Ok((json, bench::render(&b)))
}

/// Parses a size such as `64MiB`, `4TB` or `4096` into bytes, as the CLI does.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    insitu_host::units::parse_size(text).map_err(error::to_py)
}

/// An error message as Python users read it (the CLI's `--flags` as keyword arguments): what every error
/// raised here goes through, for the tests (`tests/python/test_array.py`).
#[pyfunction]
fn _in_python_words(message: &str) -> String {
    error::in_python_words(message)
}

#[pymodule]
fn _insitu(m: &Bound<'_, PyModule>) -> PyResult<()> {
    sys::keep_freed_memory();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<array::PyArray>()?;
    m.add_class::<stream::ArrowStream>()?;
    m.add_class::<served::DeviceServer>()?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(model_intersect, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(_in_python_words, m)?)?;
    m.add_function(wrap_pyfunction!(net_routes, m)?)?;
    m.add_function(wrap_pyfunction!(net_bench, m)?)?;
    Ok(())
}
