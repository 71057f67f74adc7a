//! The device's flash behind a read-write lock: many readers (programs scanning pages, host reads) or one
//! writer (appends, commits, LBA writes). Poisoned locks are taken over: the flash state is journaled,
//! so a panicking holder leaves nothing half-applied that recovery would not also see.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use insitu_flash::raw::RawFlash;
use insitu_flash::Flash;

use crate::rawflash::FtlMedia;

use crate::meters::DeviceCounters;

#[derive(Debug)]
pub(crate) struct Media {
    flash: RwLock<Flash<FtlMedia>>,
}

impl Media {
    pub(crate) fn new(flash: Flash<FtlMedia>) -> Media {
        Media { flash: RwLock::new(flash) }
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Flash<FtlMedia>> {
        self.flash.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Flash<FtlMedia>> {
        self.flash.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Fills the flash counters of a snapshot from the NAND's own.
    pub(crate) fn fill_counters(&self, c: &mut DeviceCounters) {
        let flash = self.read();
        let ps = flash.page_size() as u64;
        let n = flash.ftl().nand().stats();
        c.flash_read_pages = n.pages_read;
        c.flash_read_bytes = n.pages_read * ps;
        c.flash_program_pages = n.pages_programmed;
        c.flash_program_bytes = n.pages_programmed * ps;
        c.flash_erase_blocks = n.blocks_erased;
    }
}
