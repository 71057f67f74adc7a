//! Admin commands: what a device is and what it has done (NVMe Identify and Get Log Page; SNIA
//! csQueryDeviceProperties / Capabilities / Statistics), and its consistency check.

use insitu_flash::{FlashStats, FsckReport};
use serde::{Deserialize, Serialize};

use crate::meters::DeviceCounters;
use crate::protocol::request::request;
use crate::rawflash::RawStats;

/// Identify: the device's properties.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Identify;

/// Statistics: a snapshot of the device's counters (bytes on every path, device CPU by kernel class,
/// per-program statistics).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Statistics;

/// Fsck: FTL invariants, the namespace, and a checksum scrub of every mapped page.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fsck;

/// Records, durably, that the array's catalog reached `generation` (the host's, after each catalog
/// write): at open the host compares the two to tell a catalog or a device folder restored from an
/// older copy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetArrayGeneration {
    pub generation: u64,
}

request!(Identify => Properties, Admin);
request!(SetArrayGeneration => (), Io);
request!(Statistics => DeviceCounters, Admin);
request!(Fsck => FsckReport, Io);

/// What a device reports about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Properties {
    pub device_id: u32,
    pub profile: String,
    pub memory_bytes: u64,
    pub memory_available: u64,
    pub compute_units: u32,
    pub programs: Vec<ProgramInfo>,
    /// Resident firmware extensions on the I/O path.
    pub firmware: Vec<String>,
    /// Logical blocks the host may address with block I/O, and their size (one flash page each).
    #[serde(default)]
    pub lba_blocks: u64,
    #[serde(default)]
    pub lba_block_size: u32,
    pub flash: FlashStats,
    /// The transaction id the next object creation gets: every object here has a smaller one.
    pub next_txn: u64,
    /// The array catalog's generation this device last recorded ([`SetArrayGeneration`]).
    pub array_generation: u64,
    /// What the FTL sent through the raw flash interface, on a profile with one (BlueDBM §4: the FTL is
    /// one user of it); `None` where the FTL works on the NAND image directly. Last, so that a reader
    /// that does not know it still decodes the rest.
    #[serde(default)]
    pub ftl_raw: Option<RawStats>,
}

/// A program the device can execute.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProgramInfo {
    pub id: String,
    pub kernel_class: String,
    pub description: String,
}
