//! The fabric between devices (a PCIe switch's peer-to-peer path, BlueDBM's storage network): how a
//! device's [`crate::protocol::CopyToPeer`] reaches another device's memory, and how its
//! [`crate::protocol::GlobalRead`] reaches another device's flash. A device holds one; the
//! array (or the process serving a device) installs it. Implementations: [`crate::transport::PeerFabric`].

use crate::error::Result;
use crate::memory::MemHandle;
use crate::protocol::{PeerPages, PeerRawRead};

/// Reaches other devices.
pub trait Fabric: Send + Sync + std::fmt::Debug {
    /// Writes `data` into buffer `dst` at `offset` of device `to`; returns the hops the transfer crossed.
    fn deliver(&self, to: u32, dst: MemHandle, offset: u64, data: Vec<u8>) -> Result<u32>;

    /// Has device `to` read pages of its raw partition for another node's in-store processor.
    fn raw_read(&self, to: u32, req: PeerRawRead) -> Result<PeerPages>;
}
