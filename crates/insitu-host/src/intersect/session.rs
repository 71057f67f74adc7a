//! The paper's session API (SSDlets, §2 and §3.1) on top of the command set: OPEN starts a session on a
//! device with a bounded amount of device memory, PUT writes data into it, GET polls the status and
//! fetches the results (the host polls, every millisecond by default, as a SAS/SATA host must), CLOSE frees
//! everything. An open session leaves a marker object on the device; if its client is killed, the next
//! open of the array finds the marker unknown to the catalog and reclaims it.

use std::time::Duration;

use insitu_device::{Args, Command, CommandId, Response};

use crate::array::{Array, DeviceBuffer};
use crate::error::{HostError, Result};
use crate::table::store::write_object;

/// How often GET polls by default (§3.1: 1 ms).
pub const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// What GET returns.
#[derive(Debug)]
pub enum Status {
    Running,
    Done { output: Args, results: Vec<u8> },
}

/// An open session.
#[derive(Debug)]
pub struct Session<'a> {
    array: &'a Array,
    dev: u32,
    marker: String,
    out: DeviceBuffer<'a>,
    pending: Option<CommandId>,
    pub polls: u64,
}

impl<'a> Session<'a> {
    /// OPEN: reserves `result_bytes` of device memory for the results and checks that `working_bytes` more
    /// fit in what the device has free (a session's memory is bounded by the device's).
    pub fn open(array: &'a Array, dev: u32, result_bytes: u64, working_bytes: u64) -> Result<Session<'a>> {
        let d = array.device(dev)?;
        let free = match d.call(Command::Identify).map_err(HostError::device(dev))? {
            Response::Properties(p) => p.memory_available,
            _ => unreachable!("Identify answers with properties"),
        };
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
        self.array
            .device(self.dev)?
            .call(Command::WriteMemory { dst: self.out.handle, offset, data })
            .map_err(HostError::device(self.dev))?;
        Ok(())
    }

    /// Starts a program in the session, its results going to the session's buffer.
    pub fn start(&mut self, program: &str, args: Args) -> Result<()> {
        let id = self
            .array
            .device(self.dev)?
            .submit(Command::Execute { program: program.into(), args, buffers: vec![self.out.handle] })
            .map_err(HostError::device(self.dev))?;
        self.pending = Some(id);
        Ok(())
    }

    /// GET: the status; once done, the output and `result_len(output)` bytes of results.
    pub fn get(&mut self, result_len: impl Fn(&Args) -> u64) -> Result<Status> {
        self.polls += 1;
        let Some(id) = self.pending else {
            return Err(HostError::InvalidArgument("GET before a program started".into()));
        };
        let d = self.array.device(self.dev)?;
        match d.poll(id) {
            None => Ok(Status::Running),
            Some(c) => {
                self.pending = None;
                let output = match c.result.map_err(HostError::device(self.dev))? {
                    Response::Output(o) => o,
                    _ => unreachable!("Execute answers with output"),
                };
                let len = result_len(&output);
                let results = if len == 0 {
                    Vec::new()
                } else {
                    match d
                        .call(Command::ReadMemory { src: self.out.handle, offset: 0, len })
                        .map_err(HostError::device(self.dev))?
                    {
                        Response::Data(v) => v,
                        _ => unreachable!(),
                    }
                };
                Ok(Status::Done { output, results })
            }
        }
    }

    /// Polls GET every `interval` until the program is done.
    pub fn wait(&mut self, interval: Duration, result_len: impl Fn(&Args) -> u64) -> Result<(Args, Vec<u8>)> {
        loop {
            match self.get(&result_len)? {
                Status::Done { output, results } => return Ok((output, results)),
                Status::Running => std::thread::sleep(interval),
            }
        }
    }

    /// CLOSE: frees the session's memory and removes its marker.
    pub fn close(self) -> Result<()> {
        let d = self.array.device(self.dev)?;
        if let Some(id) = self.pending {
            let _ = d.wait(id);
        }
        d.call(Command::Delete { name: self.marker.clone() }).map_err(HostError::device(self.dev))?;
        Ok(())
    }
}
