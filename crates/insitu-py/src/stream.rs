//! Arrow data across the boundary through the Arrow PyCapsule interface: a capsule named
//! `arrow_array_stream` holding an `ArrowArrayStream` of the C stream interface. Buffers are shared, not
//! copied, both ways: pyarrow (or polars, duckdb... anything with `__arrow_c_stream__`) hands us its
//! stream, and [`ArrowStream`] hands ours to `pyarrow.table()`.

use std::sync::Mutex;

use arrow::datatypes::SchemaRef;
use arrow::ffi_stream::FFI_ArrowArrayStream;
use arrow::record_batch::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::error::invalid;
use crate::sys::{take_stream, STREAM};

/// Arrow record batches made here, waiting for a consumer (`pyarrow.table(stream)`): consumed once.
#[pyclass(module = "insitu._insitu", frozen)]
#[derive(Debug)]
pub struct ArrowStream {
    data: Mutex<Option<(SchemaRef, Vec<RecordBatch>)>>,
    rows: usize,
}

impl ArrowStream {
    pub fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> ArrowStream {
        let rows = batches.iter().map(RecordBatch::num_rows).sum();
        ArrowStream { data: Mutex::new(Some((schema, batches))), rows }
    }
}

#[pymethods]
impl ArrowStream {
    /// The Arrow PyCapsule interface: the batches as an `arrow_array_stream` capsule. A schema asked
    /// for is not applied: the table comes as stored.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let taken = self.data.lock().map_err(|_| invalid("the stream's lock is poisoned".into()))?.take();
        let (schema, batches) =
            taken.ok_or_else(|| invalid("this Arrow stream was consumed already".into()))?;
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
        PyCapsule::new_with_value(py, FFI_ArrowArrayStream::new(Box::new(reader)), STREAM)
    }

    /// Rows in the stream.
    #[getter]
    fn num_rows(&self) -> usize {
        self.rows
    }
}

/// Reads every batch of an object with `__arrow_c_stream__` (a `pyarrow.Table`, `RecordBatch`,
/// `RecordBatchReader`, a polars or duckdb result...).
pub fn read(obj: &Bound<'_, PyAny>) -> PyResult<(SchemaRef, Vec<RecordBatch>)> {
    if !obj.hasattr("__arrow_c_stream__")? {
        return Err(invalid(format!(
            "expected Arrow data (an object with __arrow_c_stream__, such as a pyarrow.Table), got {}",
            obj.get_type().name()?
        )));
    }
    let capsule = obj.call_method0("__arrow_c_stream__")?;
    let capsule = capsule.cast::<PyCapsule>()?;
    let reader = take_stream(capsule)?.map_err(|e| invalid(format!("reading the Arrow stream: {e}")))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("reading the Arrow stream: {e}")))?;
    Ok((schema, batches))
}
