//! The device command set, shaped after the SNIA Computational Storage API and NVMe Computational Programs
//! with Subsystem Local Memory (TP4091 / TP4131):
//!
//! | SNIA CS API / NVMe                      | here                                              |
//! |-----------------------------------------|---------------------------------------------------|
//! | csQueryDeviceProperties / Identify      | [`Command::Identify`], [`Command::Statistics`]    |
//! | csAllocMem / csFreeMem (SLM)            | [`Command::AllocMemory`], [`Command::FreeMemory`] |
//! | csQueueStorageRequest to/from SLM       | [`Command::LoadObject`], [`Command::StoreToObject`] (internal path) |
//! | csCopyMemRequest host <-> device        | [`Command::WriteMemory`], [`Command::ReadMemory`] (host link) |
//! | peer-to-peer copy                       | [`Command::CopyToPeer`] (device <-> device)       |
//! | csQueueComputeRequest / Execute Program | [`Command::Execute`] (by program id, with args)   |
//! | NVMe I/O read / write / dataset mgmt    | [`Command::ReadLba`], [`Command::WriteLba`], [`Command::TrimLba`], [`Command::Flush`] |
//! | namespace of objects (key-value-like)   | `CreateObject` / `Append` / `Commit` / `Read` / `Delete` / `List` |
//!
//! Both usage models: *direct* (the host passes memory handles and ranges to `Execute`) and *indirect* (the
//! program reads objects itself through its [`crate::ProgramContext`]).

use std::collections::BTreeMap;

use insitu_flash::{FlashStats, FsckReport, ObjectMeta, PhysicalPage, TxnId};
use serde::{Deserialize, Serialize};

use crate::device::Peer;
use crate::memory::MemHandle;
use crate::meters::DeviceCounters;

/// A program argument or result value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    U64(u64),
    F64(f64),
    Str(String),
    Bytes(Vec<u8>),
    U64List(Vec<u64>),
}

/// Named arguments of a program run, or its named results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Args(pub BTreeMap<String, Value>);

impl Args {
    pub fn new() -> Args {
        Args::default()
    }

    /// Builder-style insert.
    pub fn with(mut self, key: &str, v: Value) -> Args {
        self.0.insert(key.to_string(), v);
        self
    }

    pub fn set(&mut self, key: &str, v: Value) {
        self.0.insert(key.to_string(), v);
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub fn u64(&self, key: &str) -> Option<u64> {
        match self.0.get(key) {
            Some(Value::U64(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.0.get(key) {
            Some(Value::Bool(v)) => Some(*v),
            _ => None,
        }
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        match self.0.get(key) {
            Some(Value::Str(v)) => Some(v),
            _ => None,
        }
    }

    pub fn bytes(&self, key: &str) -> Option<&[u8]> {
        match self.0.get(key) {
            Some(Value::Bytes(v)) => Some(v),
            _ => None,
        }
    }

    pub fn u64_list(&self, key: &str) -> Option<&[u64]> {
        match self.0.get(key) {
            Some(Value::U64List(v)) => Some(v),
            _ => None,
        }
    }
}

/// What a device reports about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Properties {
    pub device_id: u32,
    pub profile: String,
    pub memory_bytes: u64,
    pub memory_available: u64,
    pub compute_units: u32,
    pub programs: Vec<ProgramInfo>,
    pub flash: FlashStats,
}

/// A program the device can execute.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProgramInfo {
    pub id: String,
    pub kernel_class: String,
    pub description: String,
}

/// One request to a device.
#[derive(Debug)]
#[non_exhaustive]
pub enum Command {
    Identify,
    Statistics,
    AllocMemory {
        bytes: u64,
    },
    FreeMemory {
        handle: MemHandle,
    },
    /// Storage -> device memory: bytes of an object into a buffer (the internal path).
    LoadObject {
        name: String,
        offset: u64,
        len: u64,
        dst: MemHandle,
        dst_offset: u64,
    },
    /// Device memory -> storage: bytes of a buffer appended to an object being written.
    StoreToObject {
        src: MemHandle,
        offset: u64,
        len: u64,
        txn: TxnId,
    },
    /// Host -> device memory.
    WriteMemory {
        dst: MemHandle,
        offset: u64,
        data: Vec<u8>,
    },
    /// Device memory -> host.
    ReadMemory {
        src: MemHandle,
        offset: u64,
        len: u64,
    },
    /// Device memory -> another device's memory (storage network / PCIe peer-to-peer).
    CopyToPeer {
        src: MemHandle,
        offset: u64,
        len: u64,
        peer: Peer,
        dst: MemHandle,
        dst_offset: u64,
    },
    /// Run a program on a compute unit.
    Execute {
        program: String,
        args: Args,
        buffers: Vec<MemHandle>,
    },
    CreateObject {
        name: String,
        kind: String,
        attrs: BTreeMap<String, String>,
        expected_size: Option<u64>,
    },
    /// Host -> storage: bytes over the host link, programmed into the object being written.
    Append {
        txn: TxnId,
        data: Vec<u8>,
    },
    Commit {
        txn: TxnId,
    },
    Abort {
        txn: TxnId,
    },
    Delete {
        name: String,
    },
    List,
    Stat {
        name: String,
    },
    PhysicalPages {
        name: String,
    },
    /// Storage -> host: a conventional read of object bytes over the host link. `buf` is a host buffer to
    /// fill and return (its old contents are overwritten), so a streaming reader can recycle its buffers
    /// instead of faulting in fresh memory for every request; pass `Vec::new()` when there is none.
    Read {
        name: String,
        offset: u64,
        len: u64,
        buf: Vec<u8>,
    },
    ReadLba {
        lba: u64,
        blocks: u64,
    },
    WriteLba {
        lba: u64,
        data: Vec<u8>,
    },
    TrimLba {
        lba: u64,
        blocks: u64,
    },
    Flush,
    Fsck,
}

impl Command {
    /// Compute requests go to the compute units; everything else to the controller, in order.
    pub fn is_compute(&self) -> bool {
        matches!(self, Command::Execute { .. })
    }
}

/// What a command returns.
#[derive(Debug)]
#[non_exhaustive]
pub enum Response {
    Done,
    Properties(Box<Properties>),
    Statistics(Box<DeviceCounters>),
    Handle(MemHandle),
    Data(Vec<u8>),
    Txn(TxnId),
    Object(ObjectMeta),
    Objects(Vec<ObjectMeta>),
    Pages(Vec<(u64, PhysicalPage)>),
    Output(Args),
    Fsck(FsckReport),
}

/// Identifier of a submitted command.
pub type CommandId = u64;

/// The completion event of a command.
#[derive(Debug)]
pub struct Completion {
    pub id: CommandId,
    pub result: crate::Result<Response>,
    pub cpu_ns: u64,
    pub wall_ns: u64,
}
