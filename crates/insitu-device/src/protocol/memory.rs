//! Device memory commands (NVMe Subsystem Local Memory; SNIA csAllocMem / csFreeMem and copies): buffers
//! are allocated and freed; bytes move between them and storage (the internal path), the host (the host
//! link) and other devices (the fabric).

use serde::{Deserialize, Serialize};

use crate::memory::MemHandle;
use crate::protocol::request::request;

/// Allocates a zeroed, host-addressable buffer of `bytes` in device memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AllocMemory {
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FreeMemory {
    pub handle: MemHandle,
}

/// Storage -> device memory: bytes of an object into a buffer (the internal path).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadObject {
    pub name: String,
    pub offset: u64,
    pub len: u64,
    pub dst: MemHandle,
    pub dst_offset: u64,
}

/// Device memory -> storage: bytes of a buffer appended to an object being written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoreToObject {
    pub src: MemHandle,
    pub offset: u64,
    pub len: u64,
    pub txn: u64,
}

/// Host -> device memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteMemory {
    pub dst: MemHandle,
    pub offset: u64,
    #[serde(skip)]
    pub data: Vec<u8>,
}

/// Device memory -> host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadMemory {
    pub src: MemHandle,
    pub offset: u64,
    pub len: u64,
}

/// Device memory -> another device's memory over the fabric (PCIe peer-to-peer, a storage network):
/// `len` bytes from `src` at `offset` to buffer `dst` of device `peer`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopyToPeer {
    pub src: MemHandle,
    pub offset: u64,
    pub len: u64,
    pub peer: u32,
    pub dst: MemHandle,
    pub dst_offset: u64,
}

/// What arrives at the peer of a [`CopyToPeer`]: bytes written into one of its buffers by the fabric
/// (a DMA, not a host command), `hops` fabric hops after leaving the sender.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerWrite {
    pub dst: MemHandle,
    pub offset: u64,
    pub hops: u32,
    #[serde(skip)]
    pub data: Vec<u8>,
}

request!(AllocMemory => MemHandle, Io);
request!(FreeMemory => (), Io);
request!(LoadObject => (), Io);
request!(StoreToObject => (), Io);
request!(WriteMemory => (), Io);
request!(ReadMemory => bulk, Io);
request!(CopyToPeer => (), Io);
request!(PeerWrite => (), Admin);
