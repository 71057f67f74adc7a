//! Resident firmware extensions on the device's I/O path: code that runs inside the device and sees every
//! host read and write (LBA and object) before and after the FTL does, and may take a request over:
//! answer a read with other data (redirect it), or absorb a write. The FTL and the namespace do not know
//! about extensions; an extension reaches the media only through its [`FirmwareContext`], whose reads and
//! writes go straight to the FTL (never back through the extensions).
//!
//! The Self-Sorting SSD ([`selfsort`]) is such an extension, resident on every device: it indexes records
//! as they are written and serves reads of the data's LBA range in key order. A minimal one, serving
//! reads of LBA 0 from LBA 1:
//!
//! ```
//! use insitu_device::firmware::{Decision, Firmware, FirmwareContext, Io};
//!
//! #[derive(Debug)]
//! struct Redirect;
//!
//! impl Firmware for Redirect {
//!     fn name(&self) -> &str {
//!         "redirect"
//!     }
//!
//!     fn before(&self, fw: &FirmwareContext<'_>, io: &Io<'_>) -> insitu_device::Result<Decision> {
//!         Ok(match io {
//!             Io::ReadLba { lba: 0, blocks: 1 } => {
//!                 let mut page = vec![0u8; fw.page_size() as usize];
//!                 fw.read_lba(1, &mut page)?;
//!                 Decision::Done(page)
//!             }
//!             _ => Decision::Pass,
//!         })
//!     }
//! }
//! ```
//! Installed with [`crate::Device::install_firmware`]; the device then lists it in `Identify`.

pub mod resident;
pub mod selfsort;

use std::sync::{Arc, RwLock};

use insitu_flash::raw::RawFlash;

use crate::error::Result;
use crate::media::Media;
use crate::memory::{DeviceMemory, MemReservation};
use crate::meters::Meters;
use crate::profile::Profile;

/// Names of the firmware work the meters count and the profile's `[firmware]` cycles price.
pub mod work {
    /// A tree node entered.
    pub const INDEX_VISIT: &str = "index.visit";
    /// Two keys compared.
    pub const INDEX_COMPARE: &str = "index.compare";
    /// A byte of tree entries moved (inserts shift entries, splits move half a node).
    pub const INDEX_MOVE_BYTE: &str = "index.move_byte";
    /// A record parsed: its key found and taken out.
    pub const INDEX_RECORD: &str = "index.record";
    /// A byte the firmware copied itself to assemble a redirected read (records that are not whole,
    /// aligned pages; whole pages move by DMA).
    pub const INDEX_COPY_BYTE: &str = "index.copy_byte";
    /// Two run heads compared by an on-the-fly merge (ActiveSort).
    pub const MERGE_COMPARE: &str = "merge.compare";
}

/// A request on the I/O path, as an extension sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Io<'a> {
    /// Host data for logical blocks `lba..`, whole pages.
    WriteLba {
        lba: u64,
        data: &'a [u8],
    },
    ReadLba {
        lba: u64,
        blocks: u64,
    },
    TrimLba {
        lba: u64,
        blocks: u64,
    },
    /// Host data appended to object `object` (being written) at byte `offset` of it.
    Append {
        object: &'a str,
        offset: u64,
        data: &'a [u8],
    },
    ReadObject {
        object: &'a str,
        offset: u64,
        len: u64,
    },
}

/// What an extension does with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let the FTL carry it out.
    Pass,
    /// The extension carried it out: for a read, these are the bytes returned (exactly the length asked);
    /// for a write or trim, the FTL never sees it (pass an empty vector).
    Done(Vec<u8>),
}

/// A resident firmware extension.
pub trait Firmware: Send + Sync + std::fmt::Debug {
    fn name(&self) -> &str;

    /// Before the FTL: observe, or take the request over.
    fn before(&self, fw: &FirmwareContext<'_>, io: &Io<'_>) -> Result<Decision> {
        let _ = (fw, io);
        Ok(Decision::Pass)
    }

    /// After the FTL carried a request out successfully (a write is then in the FTL's map). An error here
    /// reaches the host as the command's error, although the FTL applied the request: the extension
    /// failed to follow it (an index that no longer fits device memory, say), the data did not.
    fn after(&self, fw: &FirmwareContext<'_>, io: &Io<'_>) -> Result<()> {
        let _ = (fw, io);
        Ok(())
    }
}

/// What an extension may touch: the media through the FTL, device memory (its own state counts against
/// the profile's DRAM like everything else), and the raw pages below the FTL.
#[derive(Debug)]
pub struct FirmwareContext<'a> {
    pub(crate) media: &'a Media,
    pub(crate) memory: &'a DeviceMemory,
    pub(crate) meters: &'a Meters,
    pub(crate) profile: &'a Profile,
}

impl FirmwareContext<'_> {
    pub fn page_size(&self) -> u32 {
        self.media.read().page_size()
    }

    /// Logical pages of the flash (the host sees fewer: the firmware keeps the top for itself).
    pub fn logical_pages(&self) -> u64 {
        self.media.read().geometry().logical_pages()
    }

    pub fn channels(&self) -> u32 {
        self.media.read().geometry().channels
    }

    pub fn profile(&self) -> &Profile {
        self.profile
    }

    /// Whether logical page `lba` holds data.
    pub fn is_mapped(&self, lba: u64) -> bool {
        self.media.read().is_mapped(lba)
    }

    /// Takes pages out of the object allocator's free space (see [`insitu_flash::Flash::set_aside`]).
    pub fn set_aside(&self, lba: u64, pages: u64) -> Result<()> {
        Ok(self.media.write().set_aside(lba, pages)?)
    }

    /// Trims logical pages through the FTL.
    pub fn trim_lba(&self, lba: u64, pages: u64) -> Result<()> {
        Ok(self.media.write().lba_trim(lba, pages)?)
    }

    /// Reads the logical pages `lbas` (each once, in any order) as one batch: the pages go to the flash
    /// together, so a batch takes as long as its busiest channel, and the time lost to pages sharing a
    /// channel is counted (`flash_read_conflict_bytes`: the busiest channel's pages times the channels,
    /// less the pages read). Channels are those of a page-striping FTL (page `lba` on channel
    /// `lba % channels`: pages written in order are striped over all of them), which this emulator's
    /// log-structured FTL, striping by block, does not reproduce physically. Page `lbas[i]` lands at
    /// `out[i * page_size..]`.
    pub fn read_batch(&self, lbas: &[u64], out: &mut [u8]) -> Result<()> {
        self.read_pages(lbas, out)?;
        self.count_batch(lbas);
        Ok(())
    }

    /// Reads the logical pages `lbas` (page `lbas[i]` at `out[i * page_size..]`), without counting them
    /// as a batch: for reads whose batch is counted at once later ([`FirmwareContext::count_batch`]).
    pub fn read_pages(&self, lbas: &[u64], out: &mut [u8]) -> Result<()> {
        let flash = self.media.read();
        let ps = flash.page_size() as usize;
        for (i, &lba) in lbas.iter().enumerate() {
            flash.lba_read(lba, &mut out[i * ps..(i + 1) * ps])?;
        }
        Meters::add(&self.meters.flash_to_device_mem, (lbas.len() * ps) as u64);
        Ok(())
    }

    /// Counts the channel conflicts of pages read together (see [`FirmwareContext::read_batch`]).
    pub fn count_batch(&self, lbas: &[u64]) {
        let (ps, channels) = {
            let flash = self.media.read();
            (flash.page_size() as u64, flash.geometry().channels.max(1) as u64)
        };
        let mut per_channel = vec![0u64; channels as usize];
        for &lba in lbas {
            per_channel[(lba % channels) as usize] += 1;
        }
        let busiest = per_channel.iter().copied().max().unwrap_or(0);
        let lost = busiest * channels - lbas.len() as u64;
        Meters::add(&self.meters.flash_read_conflict_bytes, lost * ps);
    }

    /// Counts firmware work (names in [`work`]).
    pub fn add_work(&self, items: &[(&'static str, u64)]) {
        self.meters.add_work(items);
    }

    /// Device memory not in use.
    pub fn memory_available(&self) -> u64 {
        self.memory.available()
    }

    pub fn memory_capacity(&self) -> u64 {
        self.memory.capacity()
    }

    /// Makes everything written durable (an FTL flush).
    pub fn sync(&self) -> Result<()> {
        Ok(self.media.write().sync()?)
    }

    /// Reads logical blocks from `lba` into `buf` (whole pages), through the FTL.
    pub fn read_lba(&self, lba: u64, buf: &mut [u8]) -> Result<()> {
        self.media.read().lba_read(lba, buf)?;
        Meters::add(&self.meters.flash_to_device_mem, buf.len() as u64);
        Ok(())
    }

    /// Reads logical pages `lba..lba + pages` as [`FirmwareContext::read_lba`] does (checked, counted),
    /// handing them to `f` in place instead of copying them.
    pub fn read_lba_with(&self, lba: u64, pages: u64, mut f: impl FnMut(&[u8])) -> Result<()> {
        let flash = self.media.read();
        let ps = flash.page_size() as u64;
        flash.lba_read_with(lba, pages, |bytes| {
            f(bytes);
            Ok(())
        })?;
        Meters::add(&self.meters.flash_to_device_mem, pages * ps);
        Ok(())
    }

    /// Writes whole pages at `lba`, through the FTL.
    pub fn write_lba(&self, lba: u64, data: &[u8]) -> Result<()> {
        self.media.write().lba_write(lba, data)?;
        Meters::add(&self.meters.device_mem_to_flash, data.len() as u64);
        Ok(())
    }

    /// Reads bytes of an object.
    pub fn read_object(&self, name: &str, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.media.read().read(name, offset, buf)?;
        Meters::add(&self.meters.flash_to_device_mem, buf.len() as u64);
        Ok(())
    }

    /// Reads whole physical pages from `ppn` (the raw path below the FTL); returns their spare-area tags.
    pub fn read_physical(&self, ppn: u64, buf: &mut [u8]) -> Result<Vec<u64>> {
        let tags = self.media.read().ftl().nand().read_tagged(ppn, buf)?;
        Meters::add(&self.meters.flash_to_device_mem, buf.len() as u64);
        Ok(tags)
    }

    /// Accounts for extension state in device memory.
    pub fn reserve(&self, bytes: u64) -> Result<MemReservation> {
        self.memory.reserve(bytes)
    }
}

/// The extensions installed on a device, in installation order: the first that takes a request over
/// carries it out.
#[derive(Debug, Default)]
pub(crate) struct IoPath {
    extensions: RwLock<Vec<Arc<dyn Firmware>>>,
}

impl IoPath {
    pub(crate) fn install(&self, fw: Arc<dyn Firmware>) {
        self.extensions.write().unwrap_or_else(|p| p.into_inner()).push(fw);
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.list().iter().map(|f| f.name().to_string()).collect()
    }

    fn list(&self) -> Vec<Arc<dyn Firmware>> {
        self.extensions.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.extensions.read().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    pub(crate) fn before(&self, fw: &FirmwareContext<'_>, io: &Io<'_>) -> Result<Decision> {
        for e in self.list() {
            if let d @ Decision::Done(_) = e.before(fw, io)? {
                return Ok(d);
            }
        }
        Ok(Decision::Pass)
    }

    pub(crate) fn after(&self, fw: &FirmwareContext<'_>, io: &Io<'_>) -> Result<()> {
        for e in self.list() {
            e.after(fw, io)?;
        }
        Ok(())
    }
}
