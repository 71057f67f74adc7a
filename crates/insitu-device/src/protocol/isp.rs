//! Jobs for a BlueDBM node's in-store processor (ISCA '15 §4, §7): the host hands the physical pages of
//! a file (from its file system, §4) and the job's constants to the accelerator, the engines read the
//! pages from the node's flash through the splitter as the ISP's source, and only results come back.
//! Jobs go to the accelerator queue ([`crate::protocol::Queue::Accel`]): one job at a time, in the order
//! submitted (the FIFO scheduler of §4), each reply saying how long it waited.

use insitu_kernels::search::PageScan;
use serde::{Deserialize, Serialize};

use super::request::request;
use crate::network::Ps;
use crate::rawflash::FlashAddr;

/// Search pages of this node with the Morris-Pratt engines (§7.3): four engines per flash bus (a
/// profile figure), each reading the pages of its bus one after another, one read in flight while it
/// searches the page before.
///
/// Pages are searched apart (a first pass, `seams: None`); a match that straddles two pages is found by
/// a second pass over the later page's first `needle.len() - 1` bytes from the state the engine had at
/// the end of the page before (`seams: Some(states)`), which the host gathers from the first pass, since
/// the two pages may be on different nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IspSearch {
    pub needle: Vec<u8>,
    /// The needle's Morris-Pratt failure table, built by the host (§7.3); checked.
    pub failure: Vec<u32>,
    pub pages: Vec<FlashAddr>,
    /// Each page's spare-area record as the file system wrote it, checked as the page is read.
    pub spares: Vec<u64>,
    /// Bytes of each page that hold the file (a file's last page may be short).
    pub lens: Vec<u32>,
    /// The seam pass: each page's engine state at its start.
    pub seams: Option<Vec<u32>>,
    pub limits: IspLimits,
}

/// How much of the accelerator a job may use (§7's experiments): engines, and a cap on its flash reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IspLimits {
    /// Engines per flash bus (search) or per card (nearest neighbour), instead of the profile's.
    pub engines: Option<u32>,
    /// Flash reads throttled to this many bytes a second, all engines together (§7.1's "throttled
    /// BlueDBM": 600 MB/s).
    pub throttle_bw: Option<f64>,
}

/// What an [`IspSearch`] found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IspSearchReply {
    /// The first pass: each page's matches and end state, in the order of the job's pages.
    pub scans: Vec<PageScan>,
    /// The seam pass: for each page, how many bytes before it each match that ends in it starts.
    pub seam_starts: Vec<Vec<u32>>,
    pub job: IspJob,
}

/// Compare query items with items stored a page each on this node (§7.1): the Hamming distance of
/// each query to every page, and the `k` closest per query (ties: lowest index). The engines, one per
/// flash card (a profile figure), read their card's pages with every tag in flight and compare each
/// page with all queries as it arrives.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IspNearest {
    /// The queries, one page-sized item after another.
    pub queries: Vec<u8>,
    pub pages: Vec<FlashAddr>,
    pub spares: Vec<u64>,
    /// Each page's item index, as results name it.
    pub items: Vec<u32>,
    pub k: u32,
    pub limits: IspLimits,
}

/// The `k` nearest items of each query, as (item, distance), closest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IspNearestReply {
    pub nearest: Vec<Vec<(u32, u32)>>,
    pub job: IspJob,
}

/// How a job went through the accelerator.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IspJob {
    /// The job's place in this device's accelerator queue (0 for the first job since the device opened).
    pub seq: u64,
    /// Jobs ahead of it when it was submitted.
    pub ahead: u64,
    /// Simulated time waiting for those jobs (their service times: jobs submitted together are taken to
    /// arrive at one instant, as the devices share no clock), and its own service time.
    pub queue_ps: Ps,
    pub service_ps: Ps,
    /// Measured here: waiting in the queue, and running.
    pub queued_s: f64,
    pub run_s: f64,
    pub engines: u32,
    pub pages: u64,
    pub bytes_scanned: u64,
}

request!(IspSearch => IspSearchReply, Accel);
request!(IspNearest => IspNearestReply, Accel);
