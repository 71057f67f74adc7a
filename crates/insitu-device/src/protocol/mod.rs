//! The device protocol: typed commands after the SNIA Computational Storage API and NVMe Computational
//! Programs with Subsystem Local Memory (TP4091 / TP4131). Every command is a type implementing
//! [`Request`], whose `Response` type is the only reply it can get; [`Command`] is all of them as one
//! serde type, which is what a transport carries (see [`crate::transport`]).
//!
//! | SNIA CS API / NVMe                      | here                                                   |
//! |-----------------------------------------|--------------------------------------------------------|
//! | csQueryDeviceProperties / Identify      | [`Identify`], [`Statistics`]                           |
//! | csAllocMem / csFreeMem (SLM)            | [`AllocMemory`], [`FreeMemory`]                        |
//! | csQueueStorageRequest to/from SLM       | [`LoadObject`], [`StoreToObject`] (the internal path)  |
//! | csQueueCopyMemRequest host <-> device   | [`WriteMemory`], [`ReadMemory`] (the host link)        |
//! | peer-to-peer copy                       | [`CopyToPeer`] (device -> device over the fabric; [`PeerWrite`] at the peer) |
//! | csQueueComputeRequest / Execute Program | [`Execute`] of a [`Program`], typed arguments and result |
//! | NVMe read / write / dataset mgmt / flush| [`ReadLba`], [`WriteLba`], [`TrimLba`], [`Flush`]      |
//! | namespace of objects (key-value-like)   | [`CreateObject`] / [`Append`] / [`Commit`] / [`Abort`] / [`Read`] / [`Delete`] / [`List`] / [`Stat`] |
//! | raw flash (below the FTL)               | [`PhysicalPages`] (where an object lives), [`ReadPages`] |
//! | raw flash partition (BlueDBM §3.1)      | [`RawIdentify`], [`RawWrite`], [`RawRead`], [`RawErase`], [`RawDiscard`], [`RawSync`] |
//! | global address space (BlueDBM §3, §6.4) | [`GlobalRead`] (an ISP's or host's read of any node's pages; [`PeerRawRead`] at each remote node) |
//! | in-store processor jobs (BlueDBM §4, §7) | [`IspSearch`] (Morris-Pratt engines), [`IspNearest`] (Hamming engines), on the accelerator's FIFO queue |
//! | vendor commands (Self-Sorting SSD §III-E) | [`ConfigureIndex`], [`GenerateIndex`], [`QueryIndex`], [`FlushIndexes`], [`IndexStatus`]... (also as a command block written to the command LBA) |
//!
//! Both usage models: *direct* (the host passes memory handles in a program's arguments) and *indirect*
//! (the program reads objects itself).

mod admin;
pub mod block;
mod command;
mod index;
mod isp;
mod memory;
mod payload;
pub mod programs;
mod raw;
mod request;
mod storage;

pub use self::admin::{Fsck, Identify, ProgramInfo, Properties, SetArrayGeneration, Statistics};
pub use self::command::{Call, Command};
pub use self::index::{
    ConfigureIndex, DropIndex, FlushIndexes, GenerateIndex, GenerateProgress, IndexConfig, IndexInfo,
    IndexKind, IndexQuery, IndexStatus, QueryIndex, QueryRows, ResizeIndex, RunExtent, SelfSortStatus,
    SetIndexFlags, DEFAULT_FANOUT, DEFAULT_GENERATE_CHUNK, MAX_INDEXES, MAX_RUNS,
};
pub use self::isp::{IspJob, IspLimits, IspNearest, IspNearestReply, IspSearch, IspSearchReply};
pub use self::memory::{
    AllocMemory, CopyToPeer, FreeMemory, LoadObject, PeerWrite, ReadMemory, StoreToObject, WriteMemory,
};
pub use self::payload::Payload;
pub use self::programs::*;
pub use self::raw::{
    pack_heads, page_heads, GlobalPage, GlobalRead, GlobalReadReply, PeerPages, PeerRawRead, RawDiscard,
    RawErase, RawIdentify, RawRead, RawSync, RawWrite,
};
pub use self::request::{Queue, Request};
pub use self::storage::{
    Abort, Append, Commit, CreateObject, Delete, Flush, List, PhysicalPages, Read, ReadLba, ReadPages, Stat,
    TrimLba, WriteLba,
};
