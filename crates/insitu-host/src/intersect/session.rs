//! The paper's session API (SSDlets, §2 and §3.1) on top of the command set: OPEN starts a session on a
//! device with a bounded amount of device memory, PUT writes data into it, GET polls the status and
//! fetches the results (the host polls, every millisecond by default, as a SAS/SATA host must), CLOSE frees
//! everything. An open session leaves a marker object on the device; if its client is killed, the next
//! open of the array finds the marker unknown to the catalog and reclaims it.

use std::time::Duration;

use insitu_device::protocol::{Delete, Execute, Identify, ReadMemory, Svs, SvsArgs, SvsOutput, WriteMemory};
use insitu_device::transport::Pending;

use crate::array::Array;
use crate::buffer::DeviceBuffer;
use crate::error::{HostError, Result};
use crate::table::store::write_object;

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
    array: &'a Array,
    dev: u32,
    marker: String,
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
        let marker = format!("#session.{}", out.handle);
        write_object(array, dev, &marker, "session", b"open")?;
        Ok(Session { array, dev, marker, out, pending: None, polls: 0 })
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

    /// CLOSE: frees the session's memory and removes its marker.
    pub fn close(mut self) -> Result<()> {
        if let Some(p) = self.pending.take() {
            let _ = p.wait();
        }
        self.array
            .device(self.dev)?
            .call(Delete { name: self.marker.clone() })
            .map_err(HostError::device(self.dev))
    }
}
