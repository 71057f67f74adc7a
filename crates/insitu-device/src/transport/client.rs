//! [`Transport`]: how the host reaches a device (in this process, in another one, later a Ray actor), and
//! [`DeviceClient`], the typed handle operators use: `call` a request and get its response type, or
//! `submit` it and wait for (or poll) a [`Pending`] reply.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::completion::{CommandId, Reply};
use crate::error::Result;
use crate::meters::DeviceCounters;
use crate::protocol::{Call, Command, Execute, Program, Statistics};

/// A way to reach one device. Object-safe: requests travel as [`Command`]s, replies as [`Reply`]s (typed
/// when the device is in this process, encoded otherwise).
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// The device's id in its array.
    fn device_id(&self) -> u32;

    /// Queues a command; returns its id at once.
    fn submit(&self, cmd: Command) -> Result<CommandId>;

    /// The reply of `id` if it has arrived (consumed).
    fn poll(&self, id: CommandId) -> Option<Reply>;

    /// Waits for the reply of `id`.
    fn wait(&self, id: CommandId) -> Reply;

    /// Nobody will take the reply of `id` (its [`Pending`] was dropped): it is dropped when it comes.
    fn abandon(&self, id: CommandId);

    /// Whether the device runs in this process (then its CPU time is part of this process's).
    fn in_process(&self) -> bool;

    /// Finishes queued work, checkpoints the device and stops it; later submissions fail.
    fn close(&self) -> Result<()>;
}

/// Whether a transport to a remote device takes a command: not once closed, nor once its device is lost.
pub(crate) fn admit(
    closed: &std::sync::atomic::AtomicBool,
    completions: &crate::completion::Completions,
    device: u32,
) -> Result<()> {
    if closed.load(std::sync::atomic::Ordering::Acquire) {
        return Err(crate::error::DeviceError::ShutDown(device));
    }
    match completions.lost() {
        Some(why) => Err(crate::error::DeviceError::Disconnected(why)),
        None => Ok(()),
    }
}

/// A typed handle to one device. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DeviceClient {
    transport: Arc<dyn Transport>,
}

impl DeviceClient {
    pub fn new(transport: Arc<dyn Transport>) -> DeviceClient {
        DeviceClient { transport }
    }

    pub fn id(&self) -> u32 {
        self.transport.device_id()
    }

    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// Sends a request and waits for its response.
    pub fn call<R: Call>(&self, req: R) -> Result<R::Response> {
        self.submit(req)?.wait()
    }

    /// Sends a request; its reply comes later.
    pub fn submit<R: Call>(&self, req: R) -> Result<Pending<'_, R>> {
        let id = self.transport.submit(req.into())?;
        Ok(Pending { client: self, id, taken: false, _r: PhantomData })
    }

    /// Runs program `P` and waits for its result.
    pub fn execute<P: Program>(&self, args: P::Args) -> Result<P::Output> {
        self.call(Execute::<P>::new(args))
    }

    /// Starts program `P`; its result comes later.
    pub fn start<P: Program>(&self, args: P::Args) -> Result<Pending<'_, Execute<P>>> {
        self.submit(Execute::<P>::new(args))
    }

    /// A snapshot of the device's counters.
    pub fn counters(&self) -> Result<DeviceCounters> {
        self.call(Statistics)
    }

    /// Whether the device runs in this process.
    pub fn in_process(&self) -> bool {
        self.transport.in_process()
    }

    /// Finishes queued work, checkpoints and stops the device.
    pub fn close(&self) -> Result<()> {
        self.transport.close()
    }
}

/// A submitted request whose reply has not been taken yet. Dropping it (an operator failing half-way)
/// drops its reply when it comes.
#[derive(Debug)]
#[must_use = "a pending reply is taken with wait() or poll()"]
pub struct Pending<'a, R> {
    client: &'a DeviceClient,
    id: CommandId,
    taken: bool,
    _r: PhantomData<fn() -> R>,
}

impl<'a, R: Call> Pending<'a, R> {
    /// The device it was sent to.
    pub fn client(&self) -> &'a DeviceClient {
        self.client
    }

    /// Waits for the response.
    pub fn wait(mut self) -> Result<R::Response> {
        self.taken = true;
        self.client.transport.wait(self.id).into_response::<R>()
    }

    /// The response if it has arrived, else the request back, still pending.
    pub fn poll(mut self) -> std::result::Result<Result<R::Response>, Pending<'a, R>> {
        match self.client.transport.poll(self.id) {
            Some(r) => {
                self.taken = true;
                Ok(r.into_response::<R>())
            }
            None => Err(self),
        }
    }
}

impl<R> Drop for Pending<'_, R> {
    fn drop(&mut self) {
        if !self.taken {
            self.client.transport.abandon(self.id);
        }
    }
}
