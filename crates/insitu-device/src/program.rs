//! What a running program can touch ([`ProgramContext`]): device memory (scratch reservations and the
//! buffers the host named in its arguments), and objects on the device's flash over the internal path
//! (read, and write new objects). Flash I/O done for the program is timed apart from its kernel, so the
//! model prices it as data movement, not compute.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

use insitu_flash::{ObjectMeta, TxnId};

use crate::error::{DeviceError, Result};
use crate::media::Media;
use crate::memory::{Buffer, DeviceMemory, MemHandle, MemReservation};
use crate::meters::Meters;
use crate::rawflash::FtlMedia;
use crate::sys::thread_cpu_ns;

/// The context of one program run.
#[derive(Debug)]
pub struct ProgramContext<'a> {
    pub(crate) media: &'a Media,
    pub(crate) memory: &'a DeviceMemory,
    pub(crate) meters: &'a Meters,
    pub(crate) program: &'static str,
    pub(crate) bytes_in: Cell<u64>,
    /// CPU time spent in flash I/O on the program's behalf (charged as data movement, not compute).
    pub(crate) io_ns: Cell<u64>,
    /// CPU time the program's work took on the emulator's helper threads (the program's thread does not
    /// see it in its own clock).
    pub(crate) helper_ns: Cell<u64>,
    /// The device's compute units.
    units: u32,
    /// Pieces this run's work splits into for the compute units (see [`ProgramContext::split_among_units`]).
    pub(crate) pieces: Cell<u64>,
    /// The kernels' shuffle scratchpad ([`crate::engines::Engine::shuffle_scratchpad_bytes`]).
    shuffle_scratchpad: Option<u64>,
}

impl<'a> ProgramContext<'a> {
    pub(crate) fn new(
        media: &'a Media,
        memory: &'a DeviceMemory,
        meters: &'a Meters,
        program: &'static str,
        units: u32,
        shuffle_scratchpad: Option<u64>,
    ) -> ProgramContext<'a> {
        ProgramContext {
            media,
            memory,
            meters,
            program,
            bytes_in: 0.into(),
            io_ns: 0.into(),
            helper_ns: 0.into(),
            units: units.max(1),
            pieces: 1.into(),
            shuffle_scratchpad,
        }
    }

    /// Bytes of records the device's shuffle kernel holds on chip at once, if it works in such tiles
    /// (PSACS's Reader scratchpad, §IV-B): the work a shuffle counts is that of its tiles.
    pub fn shuffle_scratchpad_bytes(&self) -> Option<u64> {
        self.shuffle_scratchpad
    }

    /// Splits the run's work into `pieces` that compute units take in parallel (a data-parallel scan);
    /// returns how many of this device's units that keeps busy. The model divides the run's work by the
    /// units of the profile it prices on, at most `pieces`.
    pub(crate) fn split_among_units(&self, pieces: u64) -> u64 {
        self.pieces.set(pieces.max(1));
        pieces.clamp(1, self.units as u64)
    }

    /// Runs flash I/O, counting its CPU time apart from the kernel's.
    fn io<T>(&self, f: impl FnOnce() -> T) -> T {
        let c0 = thread_cpu_ns();
        let r = f();
        self.io_ns.set(self.io_ns.get() + thread_cpu_ns().saturating_sub(c0));
        r
    }

    /// Counts work the program did (see [`crate::work`]); the model prices it with the profile's kernels.
    pub fn work(&self, f: impl FnOnce(&mut crate::work::Ledger)) {
        let mut l = crate::work::Ledger::new();
        f(&mut l);
        self.meters.add_ledger(&l);
    }

    /// Reserves device memory for scratch space (fails past the profile's bound).
    pub fn reserve(&self, bytes: u64) -> Result<MemReservation> {
        self.memory.reserve(bytes)
    }

    /// Device memory not yet in use.
    pub fn memory_available(&self) -> u64 {
        self.memory.available()
    }

    /// The error for work that needs `needed` bytes of memory at least, given the caller's `budget`
    /// (if any): names the budget when it is what falls short, the device's memory otherwise.
    pub fn too_little_memory(&self, budget: Option<u64>, needed: u64, what: &str) -> DeviceError {
        let available = self.memory_available();
        match budget.filter(|b| *b < available) {
            Some(b) => self.bad(format!(
                "the memory budget of {b} bytes is too small: {what} needs at least {needed} bytes (raise \
                 --memory-budget, or leave it out to use the device's free memory, {available} bytes)"
            )),
            None => DeviceError::MemoryExhausted {
                requested: needed,
                available,
                capacity: self.memory.capacity(),
            },
        }
    }

    /// Bytes of a flash page.
    pub fn page_size(&self) -> u64 {
        self.media.read().page_size() as u64
    }

    /// Metadata of an object on this device.
    pub fn object(&self, name: &str) -> Result<ObjectMeta> {
        Ok(self.media.read().stat(name)?.clone())
    }

    /// Reads object bytes from flash into device memory (the internal path).
    pub fn read_object(&self, name: &str, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.io(|| self.media.read().read(name, offset, buf))?;
        Meters::add(&self.meters.flash_to_device_mem, buf.len() as u64);
        self.bytes_in.set(self.bytes_in.get() + buf.len() as u64);
        Ok(())
    }

    /// Reads all of object `name` into device memory `piece` bytes at a time (the last piece may be
    /// shorter), handing each piece to `each` with its offset: the same reads, in the same pieces, as a
    /// loop of [`ProgramContext::read_object`]. The emulator spreads the pieces over up to `states.len()`
    /// of its threads, each taking a run of consecutive pieces in order with its own state (the first run
    /// on this thread); the states come back in run order. Their CPU time is the program's, its I/O
    /// apart as always. For a piece that lands on one of its threads, the device's memory holds one
    /// piece as for the loop: the extra buffers are the emulator's, not the device's.
    pub fn read_object_pieces<S: Send>(
        &self,
        name: &str,
        piece: u64,
        mut states: Vec<S>,
        each: impl Fn(&mut S, u64, &[u8]) + Sync,
    ) -> Result<Vec<S>> {
        let size = self.object(name)?.size;
        let piece = piece.max(1);
        let pieces = size.div_ceil(piece);
        let runs = (states.len() as u64).min(pieces).max(1);
        states.truncate(runs as usize);
        // Run `r`: pieces `r * pieces / runs ..`, with (I/O, other) CPU nanoseconds of the thread.
        let run = |r: u64, state: &mut S| -> Result<(u64, u64)> {
            let (c0, mut io) = (thread_cpu_ns(), 0u64);
            let mut buf = Vec::new();
            for k in r * pieces / runs..(r + 1) * pieces / runs {
                let (at, n) = (k * piece, piece.min(size - k * piece));
                buf.resize(n as usize, 0);
                let i0 = thread_cpu_ns();
                self.media.read().read(name, at, &mut buf)?;
                io += thread_cpu_ns().saturating_sub(i0);
                each(state, at, &buf);
            }
            Ok((io, thread_cpu_ns().saturating_sub(c0).saturating_sub(io)))
        };
        let (first, rest) = states.split_first_mut().expect("one run at least");
        let (mine, theirs) = std::thread::scope(|scope| {
            let helpers: Vec<_> = rest
                .iter_mut()
                .enumerate()
                .map(|(i, state)| scope.spawn(move || run(i as u64 + 1, state)))
                .collect();
            let mine = run(0, first);
            let theirs: Vec<Result<(u64, u64)>> = helpers
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                .collect();
            (mine, theirs)
        });
        let (io, _) = mine?;
        self.io_ns.set(self.io_ns.get() + io);
        for r in theirs {
            let (io, other) = r?;
            self.io_ns.set(self.io_ns.get() + io);
            self.helper_ns.set(self.helper_ns.get() + io + other);
        }
        Meters::add(&self.meters.flash_to_device_mem, size);
        self.bytes_in.set(self.bytes_in.get() + size);
        Ok(states)
    }

    /// Reads several byte ranges of an object, `(offset, len)` each, into `out` one after another (a
    /// gather's rows at random places): the same reads as one [`ProgramContext::read_object`] per range,
    /// with the flash lock taken and the I/O timed once for them all.
    ///
    /// On flash whose reads are not timed one command at a time (an image without a raw controller), the
    /// ranges are read in the order of their offsets, each into its own place in `out`: the same pages
    /// read and counted, but the flash map, the spare areas and the pages are then walked forward instead
    /// of at random, which the host's caches and TLB favour. Behind a raw controller the order is the
    /// caller's, since there it sets the simulated time.
    pub fn read_object_ranges(
        &self,
        name: &str,
        ranges: impl IntoIterator<Item = (u64, usize)>,
        out: &mut [u8],
    ) -> Result<()> {
        // Each range's own part of `out`, in the order given.
        let ranges = ranges.into_iter();
        let mut rest = &mut out[..];
        let mut places: Vec<(u64, &mut [u8])> = Vec::with_capacity(ranges.size_hint().0);
        for (offset, len) in ranges {
            if len > rest.len() {
                return Err(self.bad("read ranges overflow their buffer"));
            }
            let (dst, more) = std::mem::take(&mut rest).split_at_mut(len);
            rest = more;
            places.push((offset, dst));
        }
        let at = places.iter().map(|(_, d)| d.len()).sum::<usize>();
        if matches!(self.media.read().ftl().nand(), FtlMedia::Image(_)) {
            places.sort_unstable_by_key(|&(offset, _)| offset);
        }
        self.io(|| Ok::<_, DeviceError>(self.media.read().read_ranges(name, &mut places)?))?;
        Meters::add(&self.meters.flash_to_device_mem, at as u64);
        self.bytes_in.set(self.bytes_in.get() + at as u64);
        Ok(())
    }

    /// A whole object read into device memory.
    pub fn read_all(&self, name: &str) -> Result<Vec<u8>> {
        let mut b = vec![0u8; self.object(name)?.size as usize];
        self.read_object(name, 0, &mut b)?;
        Ok(b)
    }

    /// Streams object bytes from flash to `f` as slices of the pages themselves (the internal path without
    /// a staging copy, as a flash engine streams pages past its logic). The caller should hold a
    /// reservation of [`insitu_flash::ftl::MAX_RUN_BYTES`] for the bytes in flight.
    pub fn read_object_with(&self, name: &str, offset: u64, len: u64, f: impl FnMut(&[u8])) -> Result<()> {
        let mut f = f;
        // The page checks are I/O; the callback is the kernel: time them apart.
        let (c0, mut kernel) = (thread_cpu_ns(), 0u64);
        let r = self.media.read().read_with(name, offset, len, |d| {
            let k0 = thread_cpu_ns();
            f(d);
            kernel += thread_cpu_ns().saturating_sub(k0);
            Ok(())
        });
        self.io_ns.set(self.io_ns.get() + thread_cpu_ns().saturating_sub(c0).saturating_sub(kernel));
        r?;
        Meters::add(&self.meters.flash_to_device_mem, len);
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
        Ok(self.io(|| self.media.write().create_object(name, kind, attrs, expected_size))?)
    }

    /// Appends device-memory bytes to an object being written (device memory -> flash).
    pub fn append(&self, txn: TxnId, data: &[u8]) -> Result<()> {
        self.io(|| self.media.write().append(txn, data))?;
        Meters::add(&self.meters.device_mem_to_flash, data.len() as u64);
        Ok(())
    }

    pub fn commit(&self, txn: TxnId) -> Result<ObjectMeta> {
        Ok(self.io(|| self.media.write().commit(txn))?)
    }

    pub fn abort(&self, txn: TxnId) -> Result<()> {
        Ok(self.media.write().abort(txn)?)
    }

    pub fn delete(&self, name: &str) -> Result<()> {
        Ok(self.io(|| self.media.write().delete(name))?)
    }

    /// Writes `data` as a whole new object (in 4 MiB appends), removing it again if any step fails.
    pub fn write_object(
        &self,
        name: &str,
        kind: &str,
        attrs: BTreeMap<String, String>,
        data: &[u8],
    ) -> Result<()> {
        let txn = self.create_object(name, kind, attrs, Some(data.len() as u64))?;
        if let Err(e) = data.chunks(4 << 20).try_for_each(|c| self.append(txn, c)) {
            let _ = self.abort(txn);
            return Err(e);
        }
        self.commit(txn).map(|_| ())
    }

    /// A buffer the host named in the program's arguments.
    pub fn buffer(&self, handle: MemHandle) -> Result<Arc<Buffer>> {
        self.memory.buffer(handle)
    }

    /// An argument error naming this program.
    pub fn bad(&self, detail: impl Into<String>) -> DeviceError {
        DeviceError::BadArgument { program: self.program.to_string(), detail: detail.into() }
    }

    /// A failure of this program's kernel (bad data found while running).
    pub fn failed(&self, detail: impl std::fmt::Display) -> DeviceError {
        DeviceError::ProgramFailed { program: self.program.to_string(), detail: detail.to_string() }
    }
}
