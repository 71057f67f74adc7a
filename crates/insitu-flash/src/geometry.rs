//! NAND geometry and physical addresses.
//!
//! A device is `channels x chips_per_channel` chips, each of `blocks_per_chip` erase blocks of
//! `pages_per_block` pages of `page_size` bytes (the MQSim hierarchy without dies and planes, which only
//! matter for timing that the model handles in aggregate).
//!
//! Global block ids stripe across channels first, then chips: consecutive blocks sit on different channels,
//! so a sequential stream that fills blocks in id order keeps every channel busy, as a real FTL's
//! channel-striped allocation does.

use serde::{Deserialize, Serialize};

use crate::error::{FlashError, Result};

/// A physical page number: `block * pages_per_block + page`.
pub type Ppn = u64;
/// A logical page number (the FTL's input; also the LBA of the block view, one LBA per page).
pub type Lpn = u64;
/// A global erase-block id.
pub type BlockId = u64;

/// The shape of the NAND array of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub blocks_per_chip: u64,
    pub pages_per_block: u32,
    pub page_size: u32,
}

/// Where a physical page lives, in hardware terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhysicalPage {
    pub channel: u32,
    pub chip: u32,
    pub block: u64,
    pub page: u32,
}

impl std::fmt::Display for PhysicalPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ch{}/chip{}/blk{}/pg{}", self.channel, self.chip, self.block, self.page)
    }
}

/// Spare blocks beyond the logical capacity, as a fraction of it (7%, the usual consumer-SSD figure that
/// comes from GiB vs GB), and at least [`MIN_SPARE_BLOCKS`] so that garbage collection always has room.
pub const OVERPROVISION: f64 = 0.07;
/// Lower bound on spare blocks.
pub const MIN_SPARE_BLOCKS: u64 = 8;

impl Geometry {
    /// Checks that every dimension is usable.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(FlashError::InvalidGeometry(m.to_string()));
        if self.channels == 0 || self.chips_per_channel == 0 {
            return bad("channels and chips_per_channel must be at least 1");
        }
        if self.blocks_per_chip == 0 {
            return bad("blocks_per_chip must be at least 1");
        }
        if self.pages_per_block < 2 {
            return bad("pages_per_block must be at least 2");
        }
        if self.page_size < 512 || !self.page_size.is_power_of_two() || self.page_size > 1 << 20 {
            return bad("page_size must be a power of two between 512 B and 1 MiB");
        }
        if self.total_blocks().checked_mul(self.pages_per_block as u64).is_none() {
            return bad("too many pages");
        }
        Ok(())
    }

    /// Sizes the array for a logical capacity of `capacity_bytes`: keeps channels, chips, pages per block
    /// and page size, and sets `blocks_per_chip` so that the logical pages plus the spare blocks fit.
    pub fn for_capacity(mut self, capacity_bytes: u64) -> Result<Self> {
        let block_bytes = self.page_size as u64 * self.pages_per_block as u64;
        if capacity_bytes < block_bytes {
            return Err(FlashError::InvalidGeometry(format!(
                "capacity {capacity_bytes} B is smaller than one erase block ({block_bytes} B)"
            )));
        }
        let logical_blocks = capacity_bytes.div_ceil(block_bytes);
        let spare = ((logical_blocks as f64 * OVERPROVISION).ceil() as u64).max(MIN_SPARE_BLOCKS);
        let chips = self.channels as u64 * self.chips_per_channel as u64;
        self.blocks_per_chip = (logical_blocks + spare).div_ceil(chips);
        self.validate()?;
        Ok(self)
    }

    pub fn chips(&self) -> u64 {
        self.channels as u64 * self.chips_per_channel as u64
    }

    pub fn total_blocks(&self) -> u64 {
        self.chips() * self.blocks_per_chip
    }

    pub fn total_pages(&self) -> u64 {
        self.total_blocks() * self.pages_per_block as u64
    }

    pub fn block_bytes(&self) -> u64 {
        self.page_size as u64 * self.pages_per_block as u64
    }

    /// Logical pages exposed to users: the physical pages less the spare blocks.
    pub fn logical_pages(&self) -> u64 {
        let total = self.total_blocks();
        let logical_blocks = ((total as f64) / (1.0 + OVERPROVISION)).floor() as u64;
        let logical_blocks = logical_blocks.min(total.saturating_sub(MIN_SPARE_BLOCKS));
        logical_blocks * self.pages_per_block as u64
    }

    pub fn block_of(&self, ppn: Ppn) -> BlockId {
        ppn / self.pages_per_block as u64
    }

    pub fn page_in_block(&self, ppn: Ppn) -> u32 {
        (ppn % self.pages_per_block as u64) as u32
    }

    pub fn first_ppn(&self, block: BlockId) -> Ppn {
        block * self.pages_per_block as u64
    }

    /// The hardware address of a physical page.
    pub fn physical(&self, ppn: Ppn) -> PhysicalPage {
        let block = self.block_of(ppn);
        let channel = (block % self.channels as u64) as u32;
        let chip = ((block / self.channels as u64) % self.chips_per_channel as u64) as u32;
        PhysicalPage { channel, chip, block: block / self.chips(), page: self.page_in_block(ppn) }
    }

    /// The physical page number of a hardware address (the inverse of [`Geometry::physical`]), if the
    /// address exists.
    pub fn ppn_of(&self, p: &PhysicalPage) -> Option<Ppn> {
        if p.channel >= self.channels
            || p.chip >= self.chips_per_channel
            || p.block >= self.blocks_per_chip
            || p.page >= self.pages_per_block
        {
            return None;
        }
        let block = p.block * self.chips() + p.chip as u64 * self.channels as u64 + p.channel as u64;
        Some(self.first_ppn(block) + p.page as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g() -> Geometry {
        Geometry {
            channels: 4,
            chips_per_channel: 2,
            blocks_per_chip: 16,
            pages_per_block: 64,
            page_size: 4096,
        }
    }

    #[test]
    fn capacity_sizing_keeps_spare_blocks() {
        let geo = g().for_capacity(64 << 20).unwrap();
        // 64 MiB / 256 KiB = 256 logical blocks, + 18 spare = 274, over 8 chips = 35 per chip.
        assert_eq!(geo.blocks_per_chip, 35);
        assert!(geo.logical_pages() * 4096 >= 64 << 20);
        assert!(geo.total_blocks() - geo.logical_pages() / 64 >= MIN_SPARE_BLOCKS);
    }

    #[test]
    fn a_four_terabyte_device_is_declarable() {
        let geo = g().for_capacity(4 << 40).unwrap();
        assert!(geo.logical_pages() * 4096 >= 4 << 40);
    }

    #[test]
    fn addresses_stripe_across_channels() {
        let geo = g();
        assert_eq!(geo.physical(0).channel, 0);
        assert_eq!(geo.physical(64).channel, 1);
        assert_eq!(geo.physical(64 * 4).chip, 1);
        assert_eq!(geo.physical(64 * 8 + 3), PhysicalPage { channel: 0, chip: 0, block: 1, page: 3 });
        for ppn in [0, 64, 64 * 5 + 7, geo.total_pages() - 1] {
            assert_eq!(geo.ppn_of(&geo.physical(ppn)), Some(ppn));
        }
        assert_eq!(geo.ppn_of(&PhysicalPage { channel: 4, chip: 0, block: 0, page: 0 }), None);
    }

    #[test]
    fn bad_geometry_is_named() {
        let mut geo = g();
        geo.page_size = 1000;
        assert!(geo.validate().unwrap_err().to_string().contains("page_size"));
        assert!(g().for_capacity(1000).is_err());
    }
}
