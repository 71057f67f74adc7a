//! Raw flash commands (BlueDBM §3.1, §4): the device's raw partition, driven by physical address, for host
//! software that manages flash itself (BlueDBM's file system). Devices whose profile has a raw flash
//! interface (`[nand.interface]`) have one; others refuse these commands.

use serde::{Deserialize, Serialize};

use crate::cluster::Access;
use crate::error::Result;
use crate::network::{Ps, Topology};
use crate::protocol::payload::Payload;
use crate::protocol::request::{request, Queue, Request};
use crate::rawflash::{FlashAddr, RawInfo};

/// The raw partition's shape, the blocks holding pages and how far each is programmed, and its counters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawIdentify;

/// Programs pages: `pages[i]` (address, spare-area value) gets `data[i * page_size..]`. Pages of one block
/// must come in order, after the block's programmed pages.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawWrite {
    pub pages: Vec<(FlashAddr, u64)>,
    #[serde(skip)]
    pub data: Vec<u8>,
}

/// Reads pages: the reply is the pages one after another, then each page's spare-area value (8 bytes,
/// little endian). Every page is checked against its checksum; one checked since it was programmed is
/// taken as checked, unless `recheck` asks for every byte of each again: what a move reads (the file
/// system's cleaning), so that a page changed since its last check fails there, naming its address,
/// rather than being programmed again under a fresh checksum.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawRead {
    pub addrs: Vec<FlashAddr>,
    pub recheck: bool,
}

/// Erases the blocks holding `addrs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawErase {
    pub addrs: Vec<FlashAddr>,
}

/// The pages at `addrs` hold nothing their owner will read again (a removed file's pages, in blocks still
/// in use): the device gives back the space they take on its backing store. Not a flash operation (it takes
/// no modeled time, and real flash has no such command): the pages stay programmed until their block is
/// erased, and their data is gone (a read of one fails its checksum). Refused for a page not programmed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawDiscard {
    pub addrs: Vec<FlashAddr>,
}

/// Makes programmed pages durable.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawSync;

request!(RawIdentify => RawInfo, Io);
request!(RawWrite => (), Io);
request!(RawRead => bulk, Io);
request!(RawErase => (), Io);
request!(RawDiscard => (), Io);
request!(RawSync => (), Io);

/// A page of the appliance's global address space (BlueDBM §3): the node that holds it and its address
/// in that node's raw partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GlobalPage {
    pub node: u32,
    pub addr: FlashAddr,
}

/// Reads pages anywhere in the appliance as this node's in-store processor (`Access::IspFlash`) or its
/// host through this device (`Access::HostFlash`) would: pages on this node from its own flash, the
/// others from their nodes' flash over the storage network of `topology`, through the remote devices'
/// splitters and no host but this one (§6.4's ISP-F and H-F; ISP-Local and Host-Local for this node's
/// pages). With `Access::HostRemoteHost` or `HostRemoteDram`, this node's host asks each page's host,
/// which reads it from its flash or sends its copy from memory (§6.4's H-RH-F and H-D); this node's own
/// pages come from its flash or its host's memory. The reply is the pages in order, and the read's
/// modeled time (see [`crate::global`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GlobalRead {
    pub access: Access,
    pub topology: Topology,
    pub pages: Vec<GlobalPage>,
    /// With `HostRemoteDram`: the pages (indices into `pages`) that are not in their host's memory, which
    /// it reads from its flash first, as H-RH-F (Fig. 20's "DRAM + x% F"). Empty otherwise.
    #[serde(default)]
    pub misses: Vec<u32>,
}

/// What a [`GlobalRead`] read and cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GlobalReadReply {
    pub pages: u64,
    /// Pages on this node (read from its own flash).
    pub local_pages: u64,
    /// Simulated time from the request to the last byte at the reader (the in-store processor, or the
    /// host after its PCIe link).
    pub modeled_ps: Ps,
    /// Network messages and their bytes (requests and answers); hops, a request's and its answer's,
    /// summed over pages.
    pub network_messages: u64,
    pub network_bytes: u64,
    pub hops: u64,
    /// Bytes over this node's PCIe link, device to host and host to device.
    pub pcie_up_bytes: u64,
    pub pcie_down_bytes: u64,
    /// Each page's spare-area value.
    pub spares: Vec<u64>,
    /// Bytes of each page `data` holds (see [`page_heads`]).
    pub heads: Vec<u32>,
    /// The pages one after another without their zero tails (sent as bulk data).
    #[serde(skip)]
    pub data: Vec<u8>,
}

/// What a remote node's device receives for a [`GlobalRead`] of its pages: read `addrs` for node
/// `origin`, each request arriving at `arrivals_ps[i]` after the read started, the way `access` says:
/// through the splitter for the asking node (`IspFlash`, `HostFlash`), or through this node's host
/// (`HostRemoteHost`: the device interrupts its host, which reads the page through it and sends it back
/// down; `HostRemoteDram`: the host sends its copy of the page from memory). Answered beside the I/O
/// queue (as a peer's memory write is), so two nodes reading each other's flash never wait on each other.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerRawRead {
    pub origin: u32,
    pub addrs: Vec<FlashAddr>,
    pub arrivals_ps: Vec<Ps>,
    #[serde(default)]
    pub access: Access,
    /// With `HostRemoteDram`: the pages (indices into `addrs`) the host reads from its flash first.
    #[serde(default)]
    pub misses: Vec<u32>,
}

/// The pages of a [`PeerRawRead`] and when each slice left the cards, relative to the read's start:
/// (page index, offset, length, time).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerPages {
    pub slices: Vec<(u32, u32, u32, Ps)>,
    pub spares: Vec<u64>,
    /// Bytes of each page `data` holds (see [`page_heads`]).
    pub heads: Vec<u32>,
    #[serde(skip)]
    pub data: Vec<u8>,
}

/// The pages of a reply, which travel without their zero tails: page `i` is the next `heads[i]` bytes
/// of `data`, then zeros up to `page_size` (a page's head, as its flash read gave it: see
/// [`insitu_flash::raw::Oob::head`]; a vertex of a graph fills a tenth of its page). Each page's bytes,
/// or what does not add up.
pub fn page_heads<'a>(
    heads: &[u32],
    data: &'a [u8],
    page_size: usize,
) -> std::result::Result<Vec<&'a [u8]>, String> {
    let mut pages = Vec::with_capacity(heads.len());
    let mut at = 0;
    for (i, &held) in heads.iter().enumerate() {
        let held = held as usize;
        if held > page_size {
            return Err(format!("page {i} holds {held} bytes, more than a page of {page_size}"));
        }
        let Some(bytes) = data.get(at..at + held) else {
            return Err(format!("{} bytes of data, short of page {i}'s", data.len()));
        };
        pages.push(bytes);
        at += held;
    }
    if at != data.len() {
        return Err(format!("{} bytes of data for pages that hold {at}", data.len()));
    }
    Ok(pages)
}

/// Pages (each without its zero tail) put one after another as a reply carries them, for
/// [`page_heads`] to split: (each page's bytes, the bytes).
pub fn pack_heads<P: AsRef<[u8]>>(pages: &[P]) -> (Vec<u32>, Vec<u8>) {
    let heads = pages.iter().map(|p| p.as_ref().len() as u32).collect();
    let mut data = Vec::with_capacity(pages.iter().map(|p| p.as_ref().len()).sum());
    for p in pages {
        data.extend_from_slice(p.as_ref());
    }
    (heads, data)
}

/// A reply whose `data` travels as bulk beside its header.
macro_rules! bulk_reply {
    ($req:ty => $resp:ty, $q:ident) => {
        impl Request for $req {
            type Response = $resp;
            const QUEUE: Queue = Queue::$q;

            fn encode_response(mut r: $resp) -> Result<Payload> {
                let data = std::mem::take(&mut r.data);
                let mut p = Payload::encode(&r)?;
                p.bulk = data;
                Ok(p)
            }

            fn decode_response(p: Payload) -> Result<$resp> {
                let mut r: $resp = p.decode()?;
                r.data = p.bulk;
                Ok(r)
            }
        }
    };
}

bulk_reply!(GlobalRead => GlobalReadReply, Io);
bulk_reply!(PeerRawRead => PeerPages, Admin);
