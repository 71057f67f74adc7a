//! The paper's session API (SSDlets, §2 and §3.1) on top of the command set: OPEN starts a session on a
//! device with a bounded amount of device memory, PUT writes data into it, GET polls the status and
//! fetches the results (the host polls, every millisecond by default, as a SAS/SATA host must), CLOSE frees
//! everything. A session is device memory only: it writes nothing to flash, so a read-only intersection
//! stays read-only (no page programmed, nothing journaled, nothing to sync at close) and runs on a full
//! device. A session whose client is killed goes with the device's memory, which lives no longer than
//! the client's connection (the device runs in the client's process, or its server exits with its owner).

use std::time::Duration;

use insitu_device::protocol::{Execute, Identify, ReadMemory, Svs, SvsArgs, SvsOutput, WriteMemory};
use insitu_device::transport::Pending;

use crate::array::Array;
use crate::buffer::DeviceBuffer;
use crate::error::{HostError, Result};

/// How often GET polls by default (§3.1: 1 ms).
pub const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// What GET returns.
#[derive(Debug)]
pub enum Status {
    Running,
    Done { output: SvsOutput, results: Vec<u8> },
}

/// An open session.
#[derive(Debug)]
pub struct Session<'a> {
    dev: u32,
    out: DeviceBuffer<'a>,
    pending: Option<Pending<'a, Execute<Svs>>>,
    pub polls: u64,
}

impl<'a> Session<'a> {
    /// OPEN: reserves `result_bytes` of device memory for the results and checks that `working_bytes` more
    /// fit in what the device has free (a session's memory is bounded by the device's).
    pub fn open(array: &'a Array, dev: u32, result_bytes: u64, working_bytes: u64) -> Result<Session<'a>> {
        let d = array.device(dev)?;
        let free = d.call(Identify).map_err(HostError::device(dev))?.memory_available;
        if result_bytes + working_bytes > free {
            return Err(HostError::InvalidArgument(format!(
                "OPEN needs {} bytes of device memory, device {dev} has {free} free",
                result_bytes + working_bytes
            )));
        }
        let out = DeviceBuffer::alloc(array, dev, result_bytes.max(1))?;
        Ok(Session { dev, out, pending: None, polls: 0 })
    }

    /// PUT: writes bytes into the session's memory.
    pub fn put(&self, offset: u64, data: Vec<u8>) -> Result<()> {
        self.out
            .device
            .call(WriteMemory { dst: self.out.handle, offset, data })
            .map_err(HostError::device(self.dev))
    }

    /// Starts the intersection in the session, its results going to the session's buffer.
    pub fn start(&mut self, args: SvsArgs) -> Result<()> {
        let args = SvsArgs { out: Some(self.out.handle), ..args };
        self.pending = Some(self.out.device.start::<Svs>(args).map_err(HostError::device(self.dev))?);
        Ok(())
    }

    /// GET: the status; once done, the output and its results.
    pub fn get(&mut self) -> Result<Status> {
        self.polls += 1;
        let pending = self
            .pending
            .take()
            .ok_or_else(|| HostError::InvalidArgument("GET before a program started".into()))?;
        match pending.poll() {
            Err(still) => {
                self.pending = Some(still);
                Ok(Status::Running)
            }
            Ok(r) => {
                let output = r.map_err(HostError::device(self.dev))?;
                let results = if output.bytes == 0 {
                    Vec::new()
                } else {
                    self.out
                        .device
                        .call(ReadMemory { src: self.out.handle, offset: 0, len: output.bytes })
                        .map_err(HostError::device(self.dev))?
                };
                Ok(Status::Done { output, results })
            }
        }
    }

    /// Polls GET every `interval` until the program is done.
    pub fn wait(&mut self, interval: Duration) -> Result<(SvsOutput, Vec<u8>)> {
        loop {
            match self.get()? {
                Status::Done { output, results } => return Ok((output, results)),
                Status::Running => std::thread::sleep(interval),
            }
        }
    }

    /// CLOSE: waits for a program still running, then frees the session's memory.
    pub fn close(mut self) -> Result<()> {
        if let Some(p) = self.pending.take() {
            let _ = p.wait();
        }
        self.out.free().map_err(HostError::device(self.dev))
    }
}
