//! Transports between the host and a device, behind one trait ([`Transport`]) and one typed handle
//! ([`DeviceClient`]):
//!
//! - in-process ([`LocalTransport`], [`in_process`]): the device's threads run in this process and
//!   replies move as typed values; the embedded default;
//! - process ([`ProcessTransport`], [`serve`]): the device runs in another process (`insitu
//!   serve-device DIR`), reached over a Unix socket in length-prefixed frames whose bulk data is written
//!   as it is.
//!
//! - message ([`MessageTransport`], [`MessageServer`]): the device is reached through any channel that
//!   carries one message of bytes and returns one (a Ray actor's method): frames batched per message, one
//!   message in flight per device, so commands arrive in order.
//!
//! [`PeerFabric`] builds the fabric between devices from the same transports.

mod client;
mod fabric;
mod local;
mod message;
mod process;
mod server;
mod wire;

pub use self::client::{DeviceClient, Pending, Transport};
pub use self::fabric::PeerFabric;
pub use self::local::{in_process, LocalTransport};
pub use self::message::{Exchange, MessageServer, MessageTransport};
pub use self::process::{ProcessTransport, ServeOptions};
pub use self::server::serve;
