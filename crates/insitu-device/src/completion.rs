//! Completion events (SNIA csPollEvent; NVMe completion queue entries): each submitted command gets an
//! id, and its reply lands in a [`Completions`] table that the host polls or waits on.

use std::any::Any;
use std::collections::HashMap;
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
        self.lock().done.insert(id, reply);
        self.changed.notify_all();
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

/// Where a device sends the reply of a command.
#[derive(Debug, Clone)]
pub enum ReplyTo {
    /// The completion table of a client in this process: the typed result moves as it is (zero-copy).
    Table(Arc<Completions>),
    /// A transport: the result is encoded and written back.
    Wire(Arc<dyn WireSink>),
}

impl ReplyTo {
    /// The result of request `R` in the form this destination takes: kept typed for a table, encoded for a
    /// transport.
    pub fn prepare<R: Request>(&self, r: Result<R::Response>) -> Reply {
        match self {
            ReplyTo::Table(_) => Reply::local::<R>(r),
            ReplyTo::Wire(_) => Reply::Remote(r.and_then(R::encode_response)),
        }
    }

    /// Delivers the reply of command `id` (prepared by [`ReplyTo::prepare`]).
    pub fn deliver(&self, id: CommandId, reply: Reply) {
        match self {
            ReplyTo::Table(t) => t.complete(id, reply),
            ReplyTo::Wire(w) => w.send(
                id,
                match reply {
                    Reply::Remote(r) => r,
                    Reply::Local(_) => {
                        Err(DeviceError::Protocol("a typed reply cannot cross a transport".into()))
                    }
                },
            ),
        }
    }
}
