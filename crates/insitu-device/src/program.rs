//! Programs: code that runs on a device's compute units, registered by id (NVMe Computational Programs'
//! device-defined programs). A program gets a [`ProgramContext`]: it may reserve device memory, read
//! objects from flash over the internal path (indirect usage), and use host-passed buffers (direct usage).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

use insitu_flash::{ObjectMeta, TxnId};

use crate::command::{Args, ProgramInfo};
use crate::cputime::thread_cpu_ns;
use crate::device::Inner;
use crate::error::{DeviceError, Result};
use crate::memory::{Buffer, MemHandle, MemReservation};
use crate::meters::Meters;

/// A device program.
pub trait Program: Send + Sync + std::fmt::Debug {
    /// The id the host names it by.
    fn id(&self) -> &'static str;
    /// The kernel class the timing model prices its CPU time by (`search`, `sort`, ...).
    fn kernel_class(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// Runs the program.
    fn run(&self, ctx: &ProgramContext<'_>, args: &Args) -> Result<Args>;
}

/// What a running program can touch.
#[derive(Debug)]
pub struct ProgramContext<'a> {
    pub(crate) inner: &'a Inner,
    pub(crate) buffers: &'a [MemHandle],
    pub(crate) program: &'static str,
    pub(crate) bytes_in: Cell<u64>,
    /// CPU time spent in flash I/O on the program's behalf (charged as data movement, not compute).
    pub(crate) io_ns: Cell<u64>,
}

impl ProgramContext<'_> {
    /// Runs flash I/O, counting its CPU time apart from the kernel's.
    fn io<T>(&self, f: impl FnOnce() -> T) -> T {
        let c0 = thread_cpu_ns();
        let r = f();
        self.io_ns.set(self.io_ns.get() + thread_cpu_ns().saturating_sub(c0));
        r
    }

    /// Reserves device memory for scratch space (fails past the profile's bound).
    pub fn reserve(&self, bytes: u64) -> Result<MemReservation> {
        self.inner.memory.reserve(bytes)
    }

    /// Device memory not yet in use.
    pub fn memory_available(&self) -> u64 {
        self.inner.memory.available()
    }

    /// Metadata of an object on this device.
    pub fn object(&self, name: &str) -> Result<ObjectMeta> {
        Ok(self.inner.flash_read().stat(name)?.clone())
    }

    /// Reads object bytes from flash into device memory (the internal path).
    pub fn read_object(&self, name: &str, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.io(|| self.inner.flash_read().read(name, offset, buf))?;
        Meters::add(&self.inner.meters.flash_to_device_mem, buf.len() as u64);
        self.bytes_in.set(self.bytes_in.get() + buf.len() as u64);
        Ok(())
    }

    /// Streams object bytes from flash to `f` as slices of the pages themselves (the internal path without
    /// a staging copy, as a flash engine streams pages past its logic). The caller should hold a
    /// reservation of [`insitu_flash::ftl::MAX_RUN_BYTES`] for the bytes in flight.
    pub fn read_object_with(&self, name: &str, offset: u64, len: u64, f: impl FnMut(&[u8])) -> Result<()> {
        let mut f = f;
        // The page checks are I/O; the callback is the kernel: time them apart.
        let (c0, mut kernel) = (thread_cpu_ns(), 0u64);
        let r = self.inner.flash_read().read_with(name, offset, len, |d| {
            let k0 = thread_cpu_ns();
            f(d);
            kernel += thread_cpu_ns().saturating_sub(k0);
            Ok(())
        });
        self.io_ns.set(self.io_ns.get() + thread_cpu_ns().saturating_sub(c0).saturating_sub(kernel));
        r?;
        Meters::add(&self.inner.meters.flash_to_device_mem, len);
        self.bytes_in.set(self.bytes_in.get() + len);
        Ok(())
    }

    /// Starts writing a new object on this device's flash (a program's output, or a temporary run of an
    /// out-of-core sort). Atomic like every object: invisible until [`ProgramContext::commit`].
    pub fn create_object(
        &self,
        name: &str,
        kind: &str,
        attrs: BTreeMap<String, String>,
        expected_size: Option<u64>,
    ) -> Result<TxnId> {
        Ok(self.io(|| self.inner.flash_write().create_object(name, kind, attrs, expected_size))?)
    }

    /// Appends device-memory bytes to an object being written (device memory -> flash).
    pub fn append(&self, txn: TxnId, data: &[u8]) -> Result<()> {
        self.io(|| self.inner.flash_write().append(txn, data))?;
        Meters::add(&self.inner.meters.device_mem_to_flash, data.len() as u64);
        Ok(())
    }

    pub fn commit(&self, txn: TxnId) -> Result<ObjectMeta> {
        Ok(self.io(|| self.inner.flash_write().commit(txn))?)
    }

    pub fn abort(&self, txn: TxnId) -> Result<()> {
        Ok(self.inner.flash_write().abort(txn)?)
    }

    pub fn delete(&self, name: &str) -> Result<()> {
        Ok(self.io(|| self.inner.flash_write().delete(name))?)
    }

    /// The `i`-th buffer the host passed to this run.
    pub fn buffer(&self, i: usize) -> Result<Arc<Buffer>> {
        let h = self
            .buffers
            .get(i)
            .ok_or_else(|| self.bad(format!("expects at least {} memory buffer(s)", i + 1)))?;
        self.inner.memory.buffer(*h)
    }

    /// Number of buffers passed.
    pub fn buffer_count(&self) -> usize {
        self.buffers.len()
    }

    /// An argument error naming this program.
    pub fn bad(&self, detail: impl Into<String>) -> DeviceError {
        DeviceError::BadArgument { program: self.program.to_string(), detail: detail.into() }
    }
}

/// The programs a device can run.
#[derive(Debug, Default)]
pub struct ProgramRegistry {
    programs: BTreeMap<&'static str, Arc<dyn Program>>,
}

impl ProgramRegistry {
    /// The device-defined programs every device ships.
    pub fn builtin() -> ProgramRegistry {
        let mut r = ProgramRegistry::default();
        r.register(Arc::new(crate::programs::search::Search));
        r.register(Arc::new(crate::programs::search::Heads));
        r.register(Arc::new(crate::programs::nascent::DictDecode));
        r.register(Arc::new(crate::programs::nascent::Sort));
        r.register(Arc::new(crate::programs::nascent::Gather));
        r.register(Arc::new(crate::programs::psacs::PsacsShuffle));
        r.register(Arc::new(crate::programs::svs::Svs));
        r
    }

    pub fn register(&mut self, p: Arc<dyn Program>) {
        self.programs.insert(p.id(), p);
    }

    pub fn get(&self, id: &str) -> Result<Arc<dyn Program>> {
        self.programs.get(id).cloned().ok_or_else(|| DeviceError::UnknownProgram(id.to_string()))
    }

    pub fn list(&self) -> Vec<ProgramInfo> {
        self.programs
            .values()
            .map(|p| ProgramInfo {
                id: p.id().to_string(),
                kernel_class: p.kernel_class().to_string(),
                description: p.description().to_string(),
            })
            .collect()
    }
}
