//! The [`Request`] trait: every command is a type whose response type is fixed, so a reply of the wrong
//! kind cannot be expressed, and each command says which queue of the device runs it.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Result;
use crate::protocol::payload::Payload;

/// Which of the device's queues runs a command (NVMe's admin queue and I/O queues; SNIA's compute
/// requests go to the compute units).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// Answered at once, beside the other queues (identify, statistics, a peer's memory write).
    Admin,
    /// The controller: storage and transfer commands, one after another in submission order.
    Io,
    /// The compute units: programs, FIFO, as many at once as the profile has units.
    Compute,
    /// The in-store processor's accelerator (BlueDBM §4): its jobs, one at a time, FIFO.
    Accel,
}

/// One command of the device protocol.
pub trait Request: std::fmt::Debug + Send + 'static {
    type Response: Serialize + DeserializeOwned + Send + 'static;
    const QUEUE: Queue;

    /// The response as it crosses a transport (a serde header; commands that return data override this
    /// to send the data as bulk).
    fn encode_response(r: Self::Response) -> Result<Payload> {
        Payload::encode(&r)
    }

    fn decode_response(p: Payload) -> Result<Self::Response> {
        p.decode()
    }
}

/// Declares a request type: `request!(Type => Response, Queue)`, optionally with the response sent as
/// bulk bytes (`bulk`).
macro_rules! request {
    ($t:ty => bulk, $q:ident) => {
        impl $crate::protocol::request::Request for $t {
            type Response = Vec<u8>;
            const QUEUE: $crate::protocol::request::Queue = $crate::protocol::request::Queue::$q;

            fn encode_response(r: Vec<u8>) -> $crate::error::Result<$crate::protocol::payload::Payload> {
                Ok($crate::protocol::payload::Payload::bulk(r))
            }

            fn decode_response(p: $crate::protocol::payload::Payload) -> $crate::error::Result<Vec<u8>> {
                Ok(p.bulk)
            }
        }
    };
    ($t:ty => $r:ty, $q:ident) => {
        impl $crate::protocol::request::Request for $t {
            type Response = $r;
            const QUEUE: $crate::protocol::request::Queue = $crate::protocol::request::Queue::$q;
        }
    };
}
pub(crate) use request;
