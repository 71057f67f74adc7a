//! The shared state of one device, reachable from its worker threads.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use crate::error::{DeviceError, Result};
use crate::fabric::Fabric;
use crate::firmware::selfsort::SelfSort;
use crate::firmware::{FirmwareContext, IoPath};
use crate::media::Media;
use crate::memory::DeviceMemory;
use crate::meters::{DeviceCounters, Meters};
use crate::profile::Profile;
use crate::rawflash::RawPartition;

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) id: u32,
    pub(crate) dir: PathBuf,
    pub(crate) profile: Profile,
    pub(crate) media: Media,
    pub(crate) memory: DeviceMemory,
    pub(crate) meters: Meters,
    pub(crate) io_path: IoPath,
    /// The resident Self-Sort firmware (also on the I/O path).
    pub(crate) selfsort: Arc<SelfSort>,
    fabric: RwLock<Option<Arc<dyn Fabric>>>,
    /// The raw flash partition, on devices whose profile has a raw interface.
    pub(crate) raw: Option<Mutex<RawPartition>>,
    /// The in-store processor's job queue (BlueDBM §4).
    pub(crate) accel: super::accel::Scheduler,
    /// The lock on the device directory: one process serves a device at a time. Released when the device
    /// closes (even if a thread still holds this state) or drops.
    lock: Mutex<Option<File>>,
}

impl Inner {
    pub(crate) fn new(
        id: u32,
        dir: PathBuf,
        profile: Profile,
        media: Media,
        raw: Option<RawPartition>,
        lock: File,
    ) -> Inner {
        Inner {
            id,
            dir,
            memory: DeviceMemory::new(profile.device.memory_bytes),
            profile,
            media,
            meters: Meters::default(),
            io_path: IoPath::default(),
            selfsort: Arc::new(SelfSort::default()),
            fabric: RwLock::new(None),
            raw: raw.map(Mutex::new),
            accel: Default::default(),
            lock: Mutex::new(Some(lock)),
        }
    }

    /// Starts the resident firmware: Self-Sort takes its area and loads (or rebuilds) its indexes.
    pub(crate) fn mount_firmware(&self) -> Result<()> {
        self.selfsort.mount(&self.firmware_context())?;
        self.io_path.install(self.selfsort.clone());
        Ok(())
    }

    /// LBAs the host may address (the firmware keeps the top of the logical pages).
    pub(crate) fn host_lbas(&self) -> u64 {
        self.selfsort.host_lbas().unwrap_or_else(|| self.media.read().geometry().logical_pages())
    }

    /// Lets another process open the device directory.
    pub(crate) fn release_lock(&self) {
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    pub(crate) fn counters(&self) -> DeviceCounters {
        let mut c = self.meters.snapshot();
        self.media.fill_counters(&mut c);
        // The raw partition's cells (BlueDBM's file system) are the device's flash too.
        if let Some(raw) = &self.raw {
            let raw = raw.lock().unwrap_or_else(|p| p.into_inner());
            let (n, ps) = (raw.nand_stats(), raw.page_size() as u64);
            c.flash_read_pages += n.pages_read;
            c.flash_read_bytes += n.pages_read * ps;
            c.flash_program_pages += n.pages_programmed;
            c.flash_program_bytes += n.pages_programmed * ps;
            c.flash_erase_blocks += n.blocks_erased;
        }
        c
    }

    pub(crate) fn firmware_context(&self) -> FirmwareContext<'_> {
        FirmwareContext {
            media: &self.media,
            memory: &self.memory,
            meters: &self.meters,
            profile: &self.profile,
        }
    }

    /// The raw partition, or the error saying this device has none.
    pub(crate) fn raw(&self) -> Result<std::sync::MutexGuard<'_, RawPartition>> {
        let raw = self.raw.as_ref().ok_or_else(|| match self.profile.nand.interface {
            Some(_) => DeviceError::RawFlashMissing(self.dir.join(crate::rawflash::partition::DIR)),
            None => DeviceError::NoRawFlash(self.id),
        })?;
        Ok(raw.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn set_fabric(&self, f: Arc<dyn Fabric>) {
        *self.fabric.write().unwrap_or_else(|p| p.into_inner()) = Some(f);
    }

    pub(crate) fn fabric(&self, peer: u32) -> Result<Arc<dyn Fabric>> {
        self.fabric.read().unwrap_or_else(|p| p.into_inner()).clone().ok_or(DeviceError::NoPeer(peer))
    }
}
