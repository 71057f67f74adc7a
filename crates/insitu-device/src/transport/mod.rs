//! Transports between the host and a device, behind one trait ([`Transport`]) and one typed handle
//! ([`DeviceClient`]):
//!
//! - in-process ([`LocalTransport`], [`in_process`]): the device's threads run in this process and
//!   replies move as typed values; the embedded default;
//! - process ([`ProcessTransport`], [`serve`]): the device runs in another process (`insitu
//!   serve-device DIR`), reached over a Unix socket in length-prefixed frames whose bulk data is written
//!   as it is.
//!
//! [`PeerFabric`] builds the fabric between devices from the same transports.

mod client;
mod fabric;
mod local;
mod process;
mod server;
mod wire;

pub use self::client::{DeviceClient, Pending, Transport};
pub use self::fabric::PeerFabric;
pub use self::local::{in_process, LocalTransport};
pub use self::process::{ProcessTransport, ServeOptions};
pub use self::server::serve;
