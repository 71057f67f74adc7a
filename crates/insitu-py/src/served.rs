//! Devices served through messages, for the Ray backend (`insitu/ray.py`): [`DeviceServer`] is what a
//! device actor holds (it formats and opens its own directory on its node and answers messages of the
//! typed protocol), and [`Channels`] turns Python callables (`ray.get(actor.handle.remote(msg))`) into the
//! host's channels to them.

use std::path::PathBuf;
use std::sync::Arc;

use insitu_host::{Connector, Exchange, MessageServer, Profile};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::{from_device, to_py};

/// A channel that calls `send(message: bytes) -> bytes` in Python; an exception is the channel failing,
/// its text the reason (a dead actor says which).
#[derive(Debug)]
pub struct PyChannel(Py<PyAny>);

impl Exchange for PyChannel {
    fn exchange(&self, request: Vec<u8>) -> Result<Vec<u8>, String> {
        Python::attach(|py| {
            let reply = self.0.call1(py, (PyBytes::new(py, &request),)).map_err(|e| reason(py, &e))?;
            reply.extract::<Vec<u8>>(py).map_err(|e| format!("a device's reply is not bytes: {e}"))
        })
    }
}

/// What a Python exception says (its text, without its class: the host's error says what failed).
fn reason(py: Python<'_>, e: &PyErr) -> String {
    e.value(py).str().map(|s| s.to_string()).unwrap_or_else(|_| e.to_string())
}

/// Opens channels by calling `connect(device) -> send` in Python.
#[derive(Debug)]
pub struct Channels(pub Py<PyAny>);

impl Connector for Channels {
    fn connect(&self, device: u32) -> Result<Arc<dyn Exchange>, String> {
        Python::attach(|py| {
            let send = self.0.call1(py, (device,)).map_err(|e| reason(py, &e))?;
            Ok(Arc::new(PyChannel(send)) as Arc<dyn Exchange>)
        })
    }
}

/// One device, served through messages: what a Ray device actor holds.
#[pyclass(module = "insitu._insitu", frozen)]
#[derive(Debug)]
pub struct DeviceServer {
    server: MessageServer,
}

#[pymethods]
impl DeviceServer {
    /// Opens (and recovers) the device in `dir`.
    #[new]
    fn new(py: Python<'_>, dir: PathBuf) -> PyResult<DeviceServer> {
        let server = py.detach(|| MessageServer::open(&dir)).map_err(from_device)?;
        Ok(DeviceServer { server })
    }

    /// Formats device `id` of `profile` in `dir` (capacity in bytes; default the profile's).
    #[staticmethod]
    #[pyo3(signature = (dir, id, profile, capacity=None))]
    fn format(py: Python<'_>, dir: PathBuf, id: u32, profile: &str, capacity: Option<u64>) -> PyResult<()> {
        let profile = Profile::load(profile).map_err(from_device)?;
        py.detach(|| insitu_host::format_device(&dir, id, profile, capacity)).map_err(to_py)
    }

    /// The device's id in its array.
    #[getter]
    fn device_id(&self) -> u32 {
        self.server.device().id()
    }

    /// The device's peers, for device-to-device copies: `[(id, send)]`, `send(message) -> reply`.
    fn set_peers(&self, py: Python<'_>, peers: Vec<(u32, Py<PyAny>)>) {
        let peers = peers
            .into_iter()
            .map(|(id, send)| (id, Arc::new(PyChannel(send)) as Arc<dyn Exchange>))
            .collect();
        // The old fabric's channels are dropped here: their threads may need the GIL to finish.
        py.detach(|| self.server.set_peers(peers));
    }

    /// Answers one message of commands (the GIL released while the device works).
    fn handle<'py>(&self, py: Python<'py>, message: &[u8]) -> Bound<'py, PyBytes> {
        let reply = py.detach(|| self.server.handle(message));
        PyBytes::new(py, &reply)
    }

    /// Checkpoints and stops the device.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.server.close()).map_err(from_device)
    }
}
