//! Completion events (SNIA csPollEvent; NVMe completion queue entries): each submitted command gets an
//! id, and its reply lands in a [`Completions`] table that the host polls or waits on.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::{DeviceError, Result};
use crate::protocol::{Payload, Request};

/// Identifier of a submitted command (unique per device client).
pub type CommandId = u64;

/// A reply on its way to the host: the typed result itself when the device runs in this process, or its
/// encoding when it crossed a transport.
#[derive(Debug)]
pub enum Reply {
    Local(Box<dyn Any + Send>),
    Remote(Result<Payload>),
}

impl Reply {
    /// The reply to `R`, typed.
    pub fn local<R: Request>(r: Result<R::Response>) -> Reply {
        Reply::Local(Box::new(r))
    }

    /// Decodes the reply as the response of `R`.
    pub fn into_response<R: Request>(self) -> Result<R::Response> {
        match self {
            Reply::Local(b) => match b.downcast::<Result<R::Response>>() {
                Ok(r) => *r,
                Err(_) => Err(DeviceError::Protocol(format!(
                    "a reply that is not the response to {}",
                    std::any::type_name::<R>()
                ))),
            },
            Reply::Remote(Ok(p)) => R::decode_response(p),
            Reply::Remote(Err(e)) => Err(e),
        }
    }
}

#[derive(Debug, Default)]
struct Table {
    done: HashMap<CommandId, Reply>,
    /// Commands whose replies nobody will take: dropped when they arrive.
    abandoned: HashSet<CommandId>,
    /// Set when no more replies will come (the device is gone); waiters get this error.
    lost: Option<String>,
}

/// Replies by command id, with a condition variable for waiters.
#[derive(Debug, Default)]
pub struct Completions {
    table: Mutex<Table>,
    changed: Condvar,
}

impl Completions {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the reply of `id`.
    pub fn complete(&self, id: CommandId, reply: Reply) {
        let mut t = self.lock();
        if !t.abandoned.remove(&id) {
            t.done.insert(id, reply);
        }
        drop(t);
        self.changed.notify_all();
    }

    /// Nobody will take the reply of `id`: drop it now, or when it arrives.
    pub fn abandon(&self, id: CommandId) {
        let mut t = self.lock();
        if t.done.remove(&id).is_none() && t.lost.is_none() {
            t.abandoned.insert(id);
        }
    }

    /// The reply of `id` if it has arrived (consumed).
    pub fn poll(&self, id: CommandId) -> Option<Reply> {
        let mut t = self.lock();
        match t.done.remove(&id) {
            Some(r) => Some(r),
            None => t.lost.clone().map(|why| Reply::Remote(Err(DeviceError::Disconnected(why)))),
        }
    }

    /// Waits for the reply of `id`.
    pub fn wait(&self, id: CommandId) -> Reply {
        let mut t = self.lock();
        loop {
            if let Some(r) = t.done.remove(&id) {
                return r;
            }
            if let Some(why) = &t.lost {
                return Reply::Remote(Err(DeviceError::Disconnected(why.clone())));
            }
            t = self.changed.wait(t).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// No more replies will come: pending and future waits fail with `why`.
    pub fn lose(&self, why: String) {
        self.lock().lost.get_or_insert(why);
        self.changed.notify_all();
    }

    /// Why replies stopped, if they did.
    pub fn lost(&self) -> Option<String> {
        self.lock().lost.clone()
    }
}

/// Where a transport writes encoded replies.
pub trait WireSink: Send + Sync + std::fmt::Debug {
    fn send(&self, id: CommandId, reply: Result<Payload>);
}

/// A command's result as the device produced it, typed, with how to encode it should it cross a transport
/// (encoding happens on delivery, after the work is charged, so both transports charge the same work).
pub struct Prepared(Outcome);

enum Outcome {
    /// The typed result of a request, and how to encode it.
    Done { value: Box<dyn Any + Send>, encode: fn(Box<dyn Any + Send>) -> Result<Payload> },
    /// An error that any request may end with, whatever its response type.
    Failed(DeviceError),
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prepared")
    }
}

impl Prepared {
    /// The result of request `R`.
    pub fn of<R: Request>(r: Result<R::Response>) -> Prepared {
        Prepared(Outcome::Done { value: Box::new(r), encode: encode_as::<R> })
    }

    /// A request of any kind that failed with `e` (a device whose handler panicked answers this way).
    pub fn failed(e: DeviceError) -> Prepared {
        Prepared(Outcome::Failed(e))
    }
}

fn encode_as<R: Request>(b: Box<dyn Any + Send>) -> Result<Payload> {
    match b.downcast::<Result<R::Response>>() {
        Ok(r) => (*r).and_then(R::encode_response),
        Err(_) => Err(DeviceError::Protocol("a result of another type".into())),
    }
}

/// Where a device sends the reply of a command.
#[derive(Debug, Clone)]
pub enum ReplyTo {
    /// The completion table of a client in this process: the typed result moves as it is (zero-copy).
    Table(Arc<Completions>),
    /// A transport: the result is encoded and written back.
    Wire(Arc<dyn WireSink>),
}

impl ReplyTo {
    /// Delivers the result of command `id`.
    pub fn deliver(&self, id: CommandId, p: Prepared) {
        match (self, p.0) {
            (ReplyTo::Table(t), Outcome::Done { value, .. }) => t.complete(id, Reply::Local(value)),
            (ReplyTo::Wire(w), Outcome::Done { value, encode }) => w.send(id, encode(value)),
            // An error decodes as the response to any request (`Reply::into_response`).
            (ReplyTo::Table(t), Outcome::Failed(e)) => t.complete(id, Reply::Remote(Err(e))),
            (ReplyTo::Wire(w), Outcome::Failed(e)) => w.send(id, Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Identify;

    #[derive(Debug, Default)]
    struct Sent(Mutex<Vec<(CommandId, Result<Payload>)>>);

    impl WireSink for Sent {
        fn send(&self, id: CommandId, reply: Result<Payload>) {
            self.0.lock().unwrap().push((id, reply));
        }
    }

    #[test]
    fn a_failure_reaches_the_waiter_as_the_error_of_whatever_it_asked() {
        let failed = || DeviceError::ProgramFailed { program: "gather".into(), detail: "it panicked".into() };
        // In this process: the waiter gets the error as the response to its own request.
        let table = Arc::new(Completions::default());
        ReplyTo::Table(Arc::clone(&table)).deliver(7, Prepared::failed(failed()));
        let err = table.wait(7).into_response::<Identify>().unwrap_err();
        assert_eq!(err.to_string(), failed().to_string());
        // Across a transport: the error is what is written back.
        let sent = Arc::new(Sent::default());
        ReplyTo::Wire(sent.clone()).deliver(8, Prepared::failed(failed()));
        let got = sent.0.lock().unwrap().pop().unwrap();
        assert_eq!(got.0, 8);
        assert_eq!(got.1.unwrap_err().to_string(), failed().to_string());
    }
}
