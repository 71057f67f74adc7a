//! `_Array`: an open [`Array`] (holding its lock until closed), its operators run with the GIL released.
//! Reports come back as JSON text; `insitu.Array` (Python) turns them into `Report` objects and the
//! Arrow streams and ID bytes into pyarrow tables and numpy arrays.

use std::io::{Cursor, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use insitu_host::blob::{self, Placement};
use insitu_host::intersect::lists::put_list_ids;
use insitu_host::intersect::operator::{intersect, IntersectPlacement, Output};
use insitu_host::nascent::{sort_table, SortAlgo, SortOptions, SortPlacement};
use insitu_host::psacs::{
    shuffle_read_batch, shuffle_table, ChunkLayout, Codec, PartitionHash, ShuffleOptions, ShufflePlacement,
};
use insitu_host::search::{search, SearchPlacement};
use insitu_host::table::import::{put_table, put_table_batch, PutTable};
use insitu_host::units::parse_size;
use insitu_host::{Array, DeviceTransport, HostError, OpenOptions, Profile, Report, Served};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::{invalid, to_py};
use crate::served::Channels;
use crate::stream::{self, ArrowStream};

/// An open array of computational storage devices.
#[pyclass(name = "_Array", module = "insitu._insitu", frozen)]
#[derive(Debug)]
pub struct PyArray {
    inner: Mutex<Option<Array>>,
    /// Set when closed: read without the lock (which an operator holds with the GIL released).
    closed: AtomicBool,
    path: PathBuf,
}

impl Drop for PyArray {
    /// An array collected without `close()`: its devices are dropped with the GIL released (a device
    /// reached through Python channels needs the GIL to finish what it was sending).
    fn drop(&mut self) {
        let taken = self.inner.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(array) = taken {
            Python::attach(|py| py.detach(move || drop(array)));
        }
    }
}

/// A report as JSON text, with its readable summary under `"summary"`.
fn json(report: &Report) -> String {
    let mut v = serde_json::json!(report);
    v["summary"] = report.summary().into();
    v.to_string()
}

/// `text` as one of `choices` (`(name, value)`), or an error listing them.
fn choose<T: Copy>(what: &str, text: &str, choices: &[(&str, T)]) -> PyResult<T> {
    choices.iter().find(|(n, _)| *n == text).map(|(_, v)| *v).ok_or_else(|| {
        let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
        invalid(format!("{what} {text:?}: expected one of {}", names.join(", ")))
    })
}

/// The message transport over the Python `connect` callable.
fn served(connect: Py<PyAny>) -> DeviceTransport {
    DeviceTransport::Message(Served(Arc::new(Channels(connect))))
}

fn size(text: Option<&str>) -> PyResult<Option<u64>> {
    text.map(parse_size).transpose().map_err(to_py)
}

impl PyArray {
    fn new(array: Array) -> PyArray {
        PyArray {
            path: array.dir().to_path_buf(),
            inner: Mutex::new(Some(array)),
            closed: AtomicBool::new(false),
        }
    }

    /// Runs `f` with the GIL released, writing into the file `out` (complete, or absent) or into memory:
    /// the bytes (`None` for a file) and the report as JSON.
    fn produce<'py>(
        &self,
        py: Python<'py>,
        out: Option<PathBuf>,
        f: impl FnOnce(&mut Array, &mut dyn Write) -> insitu_host::Result<Report> + Send,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, String)> {
        let (data, report) = self.with(py, |a| crate::to_bytes_or_file(out.as_ref(), |w| f(a, w)))?;
        Ok((data.map(|d| PyBytes::new(py, &d)), json(&report)))
    }

    /// Runs `f` on the open array with the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Array) -> insitu_host::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            // A panic in an earlier call poisoned the lock; the array itself is as its last command left it.
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_mut() {
                Some(a) => f(a),
                None => {
                    Err(HostError::InvalidArgument(format!("the array at {} is closed", self.path.display())))
                }
            }
        })
        .map_err(to_py)
    }
}

#[pymethods]
impl PyArray {
    /// Creates an array of `devices` devices of `profile` at `path`, and opens it. With `connect`, the
    /// devices were formatted where they are served and are reached through messages:
    /// `connect(device) -> send`, `send(message: bytes) -> bytes` (the Ray backend).
    /// With `topology` (ring, line, mesh, full, or a TOML file), the devices are a BlueDBM appliance's
    /// nodes cabled by it, `lanes` cables between neighbours.
    #[staticmethod]
    #[pyo3(signature = (path, devices, profile, capacity=None, stripe_unit=None, connect=None, topology=None, lanes=1))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        devices: u32,
        profile: &str,
        capacity: Option<&str>,
        stripe_unit: Option<&str>,
        connect: Option<Py<PyAny>>,
        topology: Option<&str>,
        lanes: u32,
    ) -> PyResult<PyArray> {
        let profile = Profile::load(profile).map_err(crate::error::from_device)?;
        let (capacity, unit) = (size(capacity)?, size(stripe_unit)?);
        let topo = topology
            .map(|t| insitu_host::bluedbm::topology(t, Some(devices), lanes, &profile))
            .transpose()
            .map_err(to_py)?;
        let array = py
            .detach(|| {
                let mut a = match connect {
                    None => Array::init(&path, devices, profile, capacity, unit),
                    Some(c) => Array::init_served(&path, devices, profile, capacity, unit, served(c)),
                }?;
                if let Some(t) = topo {
                    a.set_topology(t)?;
                }
                Ok(a)
            })
            .map_err(to_py)?;
        Ok(PyArray::new(array))
    }

    /// Opens the array at `path` (recovering it), waiting up to `wait` seconds for another process to
    /// release it; with `connect`, its devices are reached through messages (as for `create`); with
    /// `host_profile` (a built-in host or a TOML file), host work is modeled on that host instead of the
    /// one the array's profile names (not stored). Returns the array and what recovery did, as JSON.
    #[staticmethod]
    #[pyo3(signature = (path, wait, connect=None, host_profile=None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        wait: f64,
        connect: Option<Py<PyAny>>,
        host_profile: Option<&str>,
    ) -> PyResult<(PyArray, String)> {
        if !(0.0..=86_400.0).contains(&wait) {
            return Err(invalid(format!("wait must be 0 to 86400 seconds, got {wait}")));
        }
        let transport = connect.map_or(DeviceTransport::InProcess, served);
        let host = host_profile
            .map(insitu_host::profile::HostProfile::load)
            .transpose()
            .map_err(crate::error::from_device)?;
        let opts = OpenOptions {
            lock_wait: Duration::from_secs_f64(wait),
            transport,
            host,
            ..OpenOptions::default()
        };
        let array = py.detach(|| Array::open(&path, opts)).map_err(to_py)?;
        let recovered = serde_json::to_string(array.open_report()).unwrap_or_default();
        Ok((PyArray::new(array), recovered))
    }

    /// Closes the array (its devices checkpoint; the lock is released). Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
            self.closed.store(true, Ordering::Release);
            taken.map_or(Ok(()), Array::close)
        })
        .map_err(to_py)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The array's configuration (devices, profile, capacity, stripe unit), as JSON.
    fn config(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |a| Ok(serde_json::json!(a.config()).to_string()))
    }

    /// Stores `data` as object `name`, striped over the devices or whole on `device`.
    #[pyo3(signature = (name, data, device=None))]
    fn put_bytes(&self, py: Python<'_>, name: &str, data: &[u8], device: Option<u32>) -> PyResult<String> {
        let placement = device.map_or(Placement::Striped, Placement::Device);
        let label = PathBuf::from("<bytes>");
        self.with(py, |a| {
            blob::put_reader(
                a,
                &mut Cursor::new(data),
                Some(data.len() as u64),
                &label,
                name,
                placement,
                &blob::no_progress,
            )
        })
        .map(|r| json(&r))
    }

    /// Stores the file at `path` as object `name`; `progress(done, total)` is called as bytes go.
    #[pyo3(signature = (name, path, device=None, progress=None))]
    fn put_file(
        &self,
        py: Python<'_>,
        name: &str,
        path: PathBuf,
        device: Option<u32>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        let placement = device.map_or(Placement::Striped, Placement::Device);
        let tell = Tell::new(progress);
        tell.result(self.with(py, |a| blob::put(a, &path, name, placement, &|d, t| tell.call(d, t))))
            .map(|r| json(&r))
    }

    /// Object `name`'s bytes (none when written to the file `out`, complete or not at all), and the
    /// report.
    #[pyo3(signature = (name, progress=None, out=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        progress: Option<Py<PyAny>>,
        out: Option<PathBuf>,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, String)> {
        let tell = Tell::new(progress);
        let each = |d, t| tell.call(d, t);
        let (data, report) = tell.result(self.with(py, |a| {
            if out.is_none() {
                // Room for the whole object at once, as it is known.
                let mut buf = Vec::with_capacity(a.blob_entry(name)?.size as usize);
                let r = blob::get(a, name, &mut buf, &each)?;
                return Ok((Some(buf), r));
            }
            crate::to_bytes_or_file(out.as_ref(), |w| blob::get(a, name, w, &each))
        }))?;
        Ok((data.map(|d| PyBytes::new(py, &d)), json(&report)))
    }

    /// Removes object `name` (any kind).
    fn rm(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        self.with(py, |a| blob::rm(a, name)).map(|r| json(&r))
    }

    /// The objects stored, as a report whose result lists them.
    fn ls(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |a| blob::ls(a)).map(|r| json(&r))
    }

    /// Stores Arrow data (anything with `__arrow_c_stream__`) as table `name`.
    #[pyo3(signature = (data, name, key=None, dict=None, partition="round-robin"))]
    fn put_table_arrow(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        name: String,
        key: Option<String>,
        dict: Option<String>,
        partition: &str,
    ) -> PyResult<String> {
        let opts = PutTable { name, key, partition: partition.parse().map_err(to_py)?, dict };
        let (schema, batches) = stream::read(data)?;
        let batch = arrow::compute::concat_batches(&schema, &batches)
            .map_err(|e| invalid(format!("joining the table's batches: {e}")))?;
        drop(batches);
        self.with(py, |a| put_table_batch(a, batch, &opts)).map(|r| json(&r))
    }

    /// Stores a Parquet or CSV file as table `name`.
    #[pyo3(signature = (path, name, key=None, dict=None, partition="round-robin"))]
    fn put_table_file(
        &self,
        py: Python<'_>,
        path: PathBuf,
        name: String,
        key: Option<String>,
        dict: Option<String>,
        partition: &str,
    ) -> PyResult<String> {
        let opts = PutTable { name, key, partition: partition.parse().map_err(to_py)?, dict };
        self.with(py, |a| put_table(a, &path, &opts)).map(|r| json(&r))
    }

    /// Table `name` as an Arrow stream (parts in device order, or `merged` into one key order for a
    /// sort's output), and the report.
    #[pyo3(signature = (name, merged=false))]
    fn get_table(&self, py: Python<'_>, name: &str, merged: bool) -> PyResult<(ArrowStream, String)> {
        let (schema, batches, report) = self.with(py, |a| {
            let (_, info) = a.table_entry(name)?;
            let schema = std::sync::Arc::new(info.schema.to_arrow());
            let (batches, report) = if merged {
                insitu_host::nascent::merge::read_table_merged(a, name)?
            } else {
                insitu_host::table::export::read_table(a, name)?
            };
            Ok((schema, batches, report))
        })?;
        Ok((ArrowStream::new(schema, batches), json(&report)))
    }

    /// NASCENT's sort of table `name` by `key`.
    #[pyo3(signature = (name, key, out=None, placement="device", algo="fast", memory_budget=None))]
    #[allow(clippy::too_many_arguments)]
    fn sort(
        &self,
        py: Python<'_>,
        name: &str,
        key: String,
        out: Option<String>,
        placement: &str,
        algo: &str,
        memory_budget: Option<&str>,
    ) -> PyResult<String> {
        let placement = choose(
            "placement",
            placement,
            &[
                ("device", SortPlacement::Device),
                ("host", SortPlacement::Host),
                ("host-accel", SortPlacement::HostAccel),
            ],
        )?;
        let algo = choose("algo", algo, &[("fast", SortAlgo::Fast), ("bitonic", SortAlgo::Bitonic)])?;
        let opts =
            SortOptions { key, placement, algo, out, merge: None, memory_budget: size(memory_budget)? };
        self.with(py, |a| sort_table(a, name, &opts)).map(|r| json(&r))
    }

    /// PSACS's shuffle of table `name` by `keys` into `partitions` partitions.
    #[pyo3(signature = (name, keys, partitions, out=None, placement="device", threads=1, hash="zigzag-fold", layout="column", memory_budget=None, compression="lz4"))]
    #[allow(clippy::too_many_arguments)]
    fn shuffle(
        &self,
        py: Python<'_>,
        name: &str,
        keys: Vec<String>,
        partitions: u32,
        out: Option<String>,
        placement: &str,
        threads: usize,
        hash: &str,
        layout: &str,
        memory_budget: Option<&str>,
        compression: &str,
    ) -> PyResult<String> {
        let opts = ShuffleOptions {
            keys,
            partitions,
            placement: choose(
                "placement",
                placement,
                &[
                    ("device", ShufflePlacement::Device),
                    ("host-sort", ShufflePlacement::HostSort),
                    ("host-bucket", ShufflePlacement::HostBucket),
                ],
            )?,
            threads,
            hash: choose(
                "hash",
                hash,
                &[("zigzag-fold", PartitionHash::ZigzagFold), ("xxh3", PartitionHash::Xxh3)],
            )?,
            layout: choose("layout", layout, &[("column", ChunkLayout::Column), ("row", ChunkLayout::Row)])?,
            codec: choose("compression", compression, &[("lz4", Codec::Lz4), ("none", Codec::None)])?,
            out,
            memory_budget: size(memory_budget)?,
        };
        self.with(py, |a| shuffle_table(a, name, &opts)).map(|r| json(&r))
    }

    /// Partition `partition` of shuffle output `name`, gathered from every device, and the report.
    fn shuffle_read(&self, py: Python<'_>, name: &str, partition: u32) -> PyResult<(ArrowStream, String)> {
        let (batch, report) = self.with(py, |a| shuffle_read_batch(a, name, partition))?;
        Ok((ArrowStream::new(batch.schema(), vec![batch]), json(&report)))
    }

    /// Stores sorted IDs (little-endian u32, back to back) as list `name` on `device`.
    #[pyo3(signature = (ids, name, entry_size=4, device=0))]
    fn put_list(
        &self,
        py: Python<'_>,
        ids: &[u8],
        name: &str,
        entry_size: u32,
        device: u32,
    ) -> PyResult<String> {
        let ids = insitu_host::intersect::lists::ids_from_le(ids)
            .map_err(|e| invalid(format!("IDs are 4-byte little-endian integers: {e}")))?;
        self.with(py, |a| put_list_ids(a, &ids, "ids", name, entry_size, device)).map(|r| json(&r))
    }

    /// Stores the sorted IDs of the file at `path` as list `name` on `device`, as `insitu put-list` does:
    /// `format` ("u32le" or "text"), or the one the file's extension names.
    #[pyo3(signature = (path, name, format=None, entry_size=4, device=0))]
    fn put_list_file(
        &self,
        py: Python<'_>,
        path: PathBuf,
        name: &str,
        format: Option<&str>,
        entry_size: u32,
        device: u32,
    ) -> PyResult<String> {
        use insitu_host::intersect::lists::{put_list, IdFormat};
        let formats = [("u32le", IdFormat::U32Le), ("text", IdFormat::Text)];
        let format = format.map(|f| choose("format", f, &formats)).transpose()?;
        self.with(py, |a| put_list(a, &path, format, name, entry_size, device)).map(|r| json(&r))
    }

    /// Intersects lists `names`: the count, the common IDs (little-endian u32 bytes; with `entries`, the
    /// first list's whole entries; empty when only the count is asked) and the report.
    #[pyo3(signature = (names, placement="device", count_only=false, entries=false))]
    fn intersect<'py>(
        &self,
        py: Python<'py>,
        names: Vec<String>,
        placement: &str,
        count_only: bool,
        entries: bool,
    ) -> PyResult<(u64, Bound<'py, PyBytes>, String)> {
        let placement = choose(
            "placement",
            placement,
            &[
                ("device", IntersectPlacement::Device),
                ("host", IntersectPlacement::Host),
                ("auto", IntersectPlacement::Auto),
            ],
        )?;
        let output = match (count_only, entries) {
            (true, true) => {
                return Err(invalid("count_only and entries ask for different results: give one".into()))
            }
            (true, false) => Output::Count,
            (false, true) => Output::Entries,
            (false, false) => Output::Ids,
        };
        let (report, answer) = self.with(py, |a| intersect(a, &names, placement, output))?;
        let bytes: Vec<u8> = match output {
            Output::Entries => answer.entries,
            _ => answer.ids.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        Ok((answer.count, PyBytes::new(py, &bytes), json(&report)))
    }

    /// Searches object `name` for `pattern`, in the devices or on the host.
    #[pyo3(signature = (name, pattern, placement="device", offsets=false))]
    fn search(
        &self,
        py: Python<'_>,
        name: &str,
        pattern: &[u8],
        placement: &str,
        offsets: bool,
    ) -> PyResult<String> {
        let placement = choose(
            "placement",
            placement,
            &[("device", SearchPlacement::Device), ("host", SearchPlacement::Host)],
        )?;
        self.with(py, |a| search(a, name, pattern, placement, offsets)).map(|r| json(&r))
    }

    /// Stores `data`, or the file at `path` (streamed, never whole in memory), as file `name` of the
    /// appliance's file system; what was stored as JSON.
    #[pyo3(signature = (name, data=None, path=None, node=None))]
    fn fs_put(
        &self,
        py: Python<'_>,
        name: &str,
        data: Option<&[u8]>,
        path: Option<PathBuf>,
        node: Option<u32>,
    ) -> PyResult<(String, String)> {
        let input = crate::input(data, path.as_deref()).map_err(to_py)?;
        self.with(py, |a| crate::bluedbm::fs_put(a, name, input, node)).map(|(r, m)| (r, json(&m)))
    }

    /// File `name` of the appliance's file system: its bytes, or `None` when written to `out`, and the
    /// read's report.
    #[pyo3(signature = (name, out=None))]
    fn fs_get<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        out: Option<PathBuf>,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, String)> {
        let (data, report) = self.with(py, |a| crate::bluedbm::fs_get(a, name, out.as_ref()))?;
        Ok((data.map(|d| PyBytes::new(py, &d)), json(&report)))
    }

    /// File `name` read by node `node` over the storage network (`via`: `isp` or `host`): its bytes
    /// (`None` when written to `out`) and the read's cost as JSON.
    #[pyo3(signature = (name, via="isp", node=0, out=None))]
    fn fs_get_via<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        via: &str,
        node: u32,
        out: Option<PathBuf>,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, String)> {
        let (data, cost) = self.with(py, |a| crate::bluedbm::fs_get_via(a, name, via, node, out.as_ref()))?;
        Ok((data.map(|d| PyBytes::new(py, &d)), cost))
    }

    /// File `name`'s physical pages as little-endian u64s, six a page (node card bus chip block page).
    fn fs_pages<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let table = self.with(py, |a| crate::bluedbm::fs_pages(a, name))?;
        let bytes: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
        Ok(PyBytes::new(py, &bytes))
    }

    /// Erases every block whose pages are all dead; what was erased, as JSON, and the report.
    fn fs_gc(&self, py: Python<'_>) -> PyResult<(String, String)> {
        self.with(py, |a| crate::bluedbm::fs_gc(a)).map(|(r, m)| (r, json(&m)))
    }

    /// The appliance's files, as JSON.
    fn fs_ls(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |a| crate::bluedbm::fs_ls(a))
    }

    fn fs_rm(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.with(py, |a| crate::bluedbm::fs_rm(a, name))
    }

    /// String search over a file (§7.3); the result and its cost as JSON.
    #[pyo3(signature = (name, needle, placement="isp", offsets=false, node=0, threads=1))]
    #[allow(clippy::too_many_arguments)]
    fn fs_search(
        &self,
        py: Python<'_>,
        name: &str,
        needle: &[u8],
        placement: &str,
        offsets: bool,
        node: u32,
        threads: u32,
    ) -> PyResult<String> {
        let args = crate::bluedbm::SearchArgs { name, needle, placement, offsets, node, threads };
        self.with(py, |a| crate::bluedbm::search_file(a, args))
    }

    /// The `k` items of file `items` nearest each query by Hamming distance (§7.1), as JSON.
    #[pyo3(signature = (items, queries, k=1, lsh=None, lsh_bits=16, placement="isp", node=0, threads=1, flash_share=0.0, disk_share=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn knn(
        &self,
        py: Python<'_>,
        items: &str,
        queries: &[u8],
        k: u32,
        lsh: Option<u32>,
        lsh_bits: u32,
        placement: &str,
        node: u32,
        threads: u32,
        flash_share: f64,
        disk_share: f64,
    ) -> PyResult<String> {
        let misses = (flash_share, disk_share);
        let args =
            crate::bluedbm::KnnArgs { items, queries, k, lsh, lsh_bits, placement, node, threads, misses };
        self.with(py, |a| crate::bluedbm::knn(a, args))
    }

    /// Stores a graph, its edges as little-endian u32 pairs, a vertex a flash page (§7.2).
    #[pyo3(signature = (edges, name, directed=false, vertices=None, node=None))]
    fn put_graph(
        &self,
        py: Python<'_>,
        edges: &[u8],
        name: &str,
        directed: bool,
        vertices: Option<u64>,
        node: Option<u32>,
    ) -> PyResult<(String, String)> {
        self.with(py, |a| crate::bluedbm::put_graph_edges(a, edges, name, directed, vertices, node))
            .map(|(r, m)| (r, json(&m)))
    }

    /// Stores the graph of the edge file at `path` (`format` "text" or "u32le", or as its extension
    /// implies), as `insitu bluedbm put-graph` does.
    #[pyo3(signature = (path, name, format=None, directed=false, vertices=None, node=None))]
    #[allow(clippy::too_many_arguments)]
    fn put_graph_file(
        &self,
        py: Python<'_>,
        path: PathBuf,
        name: &str,
        format: Option<&str>,
        directed: bool,
        vertices: Option<u64>,
        node: Option<u32>,
    ) -> PyResult<(String, String)> {
        self.with(py, |a| crate::bluedbm::put_graph_file(a, &path, format, name, directed, vertices, node))
            .map(|(r, m)| (r, json(&m)))
    }

    /// Breadth-first search of a stored graph (§7.2), as JSON.
    #[pyo3(signature = (graph, start, placement="isp", node=0, flash_share=0.0))]
    fn bfs(
        &self,
        py: Python<'_>,
        graph: &str,
        start: u32,
        placement: &str,
        node: u32,
        flash_share: f64,
    ) -> PyResult<String> {
        self.with(py, |a| {
            crate::bluedbm::bfs_graph(a, graph, start, crate::bluedbm::reader(placement, node, flash_share)?)
        })
    }

    /// Random walks on a stored graph (§7.2), as JSON.
    #[pyo3(signature = (graph, start, walks=1, length=16, seed=1, placement="isp", node=0, flash_share=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        py: Python<'_>,
        graph: &str,
        start: u32,
        walks: u32,
        length: u32,
        seed: u64,
        placement: &str,
        node: u32,
        flash_share: f64,
    ) -> PyResult<String> {
        let spec = insitu_host::bluedbm::graph::WalkSpec { from: start, walks, length, seed };
        self.with(py, |a| {
            crate::bluedbm::walk_graph(a, graph, spec, crate::bluedbm::reader(placement, node, flash_share)?)
        })
    }

    /// Writes bytes (`data`, or the file at `path`) at block `lba` of `device` (the last block padded
    /// with zeros).
    #[pyo3(signature = (device, lba, data=None, path=None, progress=None))]
    fn lba_write(
        &self,
        py: Python<'_>,
        device: u32,
        lba: u64,
        data: Option<&[u8]>,
        path: Option<PathBuf>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        let input = crate::input(data, path.as_deref()).map_err(to_py)?;
        let tell = Tell::new(progress);
        tell.result(
            self.with(py, |a| insitu_host::lba::write(a, device, lba, input, &|d, t| tell.call(d, t))),
        )
        .map(|r| json(&r))
    }

    /// `length` bytes from block `lba` of `device`: the bytes, or `None` when written to `out`.
    #[pyo3(signature = (device, lba, length, out=None, progress=None))]
    fn lba_read<'py>(
        &self,
        py: Python<'py>,
        device: u32,
        lba: u64,
        length: u64,
        out: Option<PathBuf>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, String)> {
        let tell = Tell::new(progress);
        tell.result(self.produce(py, out, |a, w| {
            insitu_host::lba::read(a, device, lba, length, w, &|d, t| tell.call(d, t))
        }))
    }

    /// Trims `length` bytes (whole blocks) from block `lba` of `device`: they read as zeros from now on.
    fn lba_trim(&self, py: Python<'_>, device: u32, lba: u64, length: u64) -> PyResult<String> {
        self.with(py, |a| insitu_host::lba::trim(a, device, lba, length)).map(|r| json(&r))
    }

    /// Configures (or replaces) a Self-Sort index (§III-E); its report as JSON.
    #[pyo3(signature = (device, index, record_size, key_size, key_offset=0, sort_on_write=false, base_lba=0, records=0, active_read=true, fanout=128, via="block"))]
    #[allow(clippy::too_many_arguments)]
    fn selfsort_config(
        &self,
        py: Python<'_>,
        device: u32,
        index: u32,
        record_size: u32,
        key_size: u32,
        key_offset: u32,
        sort_on_write: bool,
        base_lba: u64,
        records: u64,
        active_read: bool,
        fanout: u32,
        via: &str,
    ) -> PyResult<String> {
        use insitu_host::selfsort::ops;
        let c = ops::tree_config(
            index,
            base_lba,
            records,
            record_size,
            key_offset,
            key_size,
            sort_on_write,
            active_read,
            fanout,
        );
        let by = crate::selfsort::via(via).map_err(to_py)?;
        self.with(py, |a| ops::configure(a, device, c, by)).map(|r| json(&r))
    }

    /// Writes records (`data`, or the file at `path`) into an index's range from record `at_record`.
    #[pyo3(signature = (device, index, data=None, path=None, at_record=0, via="block", progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn selfsort_write(
        &self,
        py: Python<'_>,
        device: u32,
        index: u32,
        data: Option<&[u8]>,
        path: Option<PathBuf>,
        at_record: u64,
        via: &str,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        let by = crate::selfsort::via(via).map_err(to_py)?;
        let records = crate::input(data, path.as_deref()).map_err(to_py)?;
        let tell = Tell::new(progress);
        tell.result(self.with(py, |a| {
            insitu_host::selfsort::ops::write_records(a, device, index, records, at_record, by, &|d, t| {
                tell.call(d, t)
            })
        }))
        .map(|r| json(&r))
    }

    /// Sort-on-command: generate commands of `chunk` records (0: the firmware's) until the index is whole.
    #[pyo3(signature = (device, index, chunk=0, via="block", progress=None))]
    fn selfsort_generate(
        &self,
        py: Python<'_>,
        device: u32,
        index: u32,
        chunk: u64,
        via: &str,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        let by = crate::selfsort::via(via).map_err(to_py)?;
        let tell = Tell::new(progress);
        tell.result(self.with(py, |a| {
            insitu_host::selfsort::ops::generate(a, device, index, chunk, by, &|d, t| tell.call(d, t))
        }))
        .map(|r| json(&r))
    }

    /// The index's whole range in key order (active reads): the bytes, or `None` when written to `out`.
    #[pyo3(signature = (device, index, out=None, progress=None))]
    fn selfsort_read<'py>(
        &self,
        py: Python<'py>,
        device: u32,
        index: u32,
        out: Option<PathBuf>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, String)> {
        let tell = Tell::new(progress);
        tell.result(self.produce(py, out, |a, w| {
            insitu_host::selfsort::ops::read_sorted(a, device, index, w, &|d, t| tell.call(d, t))
        }))
    }

    /// A query of an index (`min`, `max`, `range` from `lo` to `hi`, `select` of key `lo`): the matching
    /// records (or `None`: with `count_only`, or written to `out`) and the report.
    #[pyo3(signature = (device, index, kind, lo=None, hi=None, count_only=false, out=None))]
    #[allow(clippy::too_many_arguments)]
    fn selfsort_query<'py>(
        &self,
        py: Python<'py>,
        device: u32,
        index: u32,
        kind: &str,
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
        count_only: bool,
        out: Option<PathBuf>,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, String)> {
        use insitu_host::selfsort::ops;
        let q = crate::selfsort::query(kind, lo, hi).map_err(to_py)?;
        if count_only {
            return self.produce(py, None, |a, _| ops::query(a, device, index, &q, true, None));
        }
        self.produce(py, out, |a, w| ops::query(a, device, index, &q, false, Some(w)))
    }

    /// Saves the device's indexes to its flash now.
    #[pyo3(signature = (device, via="block"))]
    fn selfsort_flush(&self, py: Python<'_>, device: u32, via: &str) -> PyResult<String> {
        let by = crate::selfsort::via(via).map_err(to_py)?;
        self.with(py, |a| insitu_host::selfsort::ops::flush(a, device, by)).map(|r| json(&r))
    }

    /// Forgets an index (its records stay).
    #[pyo3(signature = (device, index, via="block"))]
    fn selfsort_drop(&self, py: Python<'_>, device: u32, index: u32, via: &str) -> PyResult<String> {
        let by = crate::selfsort::via(via).map_err(to_py)?;
        self.with(py, |a| insitu_host::selfsort::ops::drop_index(a, device, index, by)).map(|r| json(&r))
    }

    /// The firmware's state (command LBA, memory, every index); its report as JSON.
    fn selfsort_stats(&self, py: Python<'_>, device: u32) -> PyResult<String> {
        self.with(py, |a| insitu_host::selfsort::ops::stats(a, device)).map(|r| json(&r))
    }

    /// Sorts records (`data`, or the file at `path`) end to end with one of the paper's four methods: the
    /// records in key order (or `None` when written to `out`) and the report.
    #[pyo3(signature = (data=None, path=None, out=None, method="self-sort-write", format="gensort", record_size=0, key_size=0, key_offset=0, device=0, index=16, base_lba=0, runs=8))]
    #[allow(clippy::too_many_arguments)]
    fn selfsort_sort<'py>(
        &self,
        py: Python<'py>,
        data: Option<&[u8]>,
        path: Option<PathBuf>,
        out: Option<PathBuf>,
        method: &str,
        format: &str,
        record_size: u32,
        key_size: u32,
        key_offset: u32,
        device: u32,
        index: u32,
        base_lba: u64,
        runs: u32,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, String)> {
        use insitu_host::selfsort::{self, Method, RecordFormat, SortJob};
        let records = crate::input(data, path.as_deref()).map_err(to_py)?;
        let method = method.parse::<Method>().map_err(to_py)?;
        let mut job =
            SortJob::new(RecordFormat::named(format, record_size, key_offset, key_size).map_err(to_py)?);
        (job.device, job.index, job.base_lba, job.runs) = (device, index, base_lba, runs);
        self.produce(py, out, |a, w| {
            selfsort::sort(a, &job, method, records, w, &|_| {}).map(|run| run.report)
        })
    }

    /// Checks the array: `{"ok": ..., "problems": [...], "notes": [...]}` as JSON.
    fn fsck(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |a| {
            let s = insitu_host::fsck::check(a)?;
            Ok(serde_json::json!({ "ok": s.problems.is_empty(), "problems": s.problems, "notes": s.notes })
                .to_string())
        })
    }

    /// Per-device figures (objects, space, flash wear, counters) as JSON, and as the CLI's text.
    fn stats(&self, py: Python<'_>) -> PyResult<(String, String)> {
        self.with(py, |a| insitu_host::stats::stats(a).map(|(j, t)| (j.to_string(), t)))
    }
}

/// A progress callback that calls the Python callable `f(done, total)` (taking the GIL for the call), or
/// does nothing. An exception in the callable is printed and otherwise ignored: progress never fails a
/// command.
/// A Python progress callback, as the host's `Progress`: called with `(done, total)` as the work goes.
/// An exception it raises, or Ctrl-C (checked at each call, with or without a callback), stops the
/// operation, which undoes what it had started as after any failure; [`Tell::result`] then raises that
/// exception in place of the operation's error.
struct Tell {
    f: Option<Py<PyAny>>,
    raised: std::sync::Mutex<Option<PyErr>>,
}

impl Tell {
    fn new(f: Option<Py<PyAny>>) -> Tell {
        Tell { f, raised: std::sync::Mutex::new(None) }
    }

    fn call(&self, done: u64, total: u64) -> insitu_host::Result<()> {
        Python::attach(|py| {
            let called = match &self.f {
                Some(f) => f.call1(py, (done, total)).map(drop),
                None => Ok(()),
            };
            match called.and_then(|()| py.check_signals()) {
                Ok(()) => Ok(()),
                Err(e) => {
                    let what = e.to_string();
                    *self.raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    Err(HostError::Cancelled(what))
                }
            }
        })
    }

    /// The operation's result, with the exception that stopped it in place of its error.
    fn result<T>(&self, r: PyResult<T>) -> PyResult<T> {
        r.map_err(|e| self.raised.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or(e))
    }
}
