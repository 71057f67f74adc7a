//! Storage commands: the namespace of objects (create / append / commit / abort / delete, key-value
//! style), conventional reads over the host link, the block (LBA) view (NVMe read / write / dataset
//! management / flush), and reads of physical pages (the raw path below the FTL).

use std::collections::BTreeMap;

use insitu_flash::{ObjectMeta, PhysicalPage};
use serde::{Deserialize, Serialize};

use crate::protocol::request::request;

/// Starts writing object `name`; with `expected_size` all its space is reserved now. Returns the write
/// transaction the appends name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateObject {
    pub name: String,
    pub kind: String,
    pub attrs: BTreeMap<String, String>,
    pub expected_size: Option<u64>,
}

/// Host -> storage: bytes over the host link, programmed into the object being written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Append {
    pub txn: u64,
    #[serde(skip)]
    pub data: Vec<u8>,
}

/// Makes the object whole and visible (its commit point on this device).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Commit {
    pub txn: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Abort {
    pub txn: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Delete {
    pub name: String,
}

/// Every object on the device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct List;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stat {
    pub name: String,
}

/// Where an object's pages are: `(logical page, physical page)` in object order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhysicalPages {
    pub name: String,
}

/// Storage -> host: a conventional read of object bytes over the host link. `buf` is a host buffer to
/// fill and return (its old contents are overwritten), so a streaming reader recycles its buffers instead
/// of faulting in fresh memory for every request; it stays on the host side of a transport.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Read {
    pub name: String,
    pub offset: u64,
    pub len: u64,
    #[serde(skip)]
    pub buf: Vec<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadLba {
    pub lba: u64,
    pub blocks: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteLba {
    pub lba: u64,
    #[serde(skip)]
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrimLba {
    pub lba: u64,
    pub blocks: u64,
}

/// Makes everything written durable.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Flush;

/// Raw path: `count` physical pages from `start`, as stored (each checked against its spare-area
/// checksum), below the FTL. For processors that know where data lives (BlueDBM's file system hands out
/// physical addresses, §3.2).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadPages {
    pub start: PhysicalPage,
    pub count: u32,
}

request!(CreateObject => u64, Io);
request!(Append => (), Io);
request!(Commit => ObjectMeta, Io);
request!(Abort => (), Io);
request!(Delete => (), Io);
request!(List => Vec<ObjectMeta>, Io);
request!(Stat => ObjectMeta, Io);
request!(PhysicalPages => Vec<(u64, PhysicalPage)>, Io);
request!(Read => bulk, Io);
request!(ReadLba => bulk, Io);
request!(WriteLba => (), Io);
request!(TrimLba => (), Io);
request!(Flush => (), Io);
request!(ReadPages => bulk, Io);
