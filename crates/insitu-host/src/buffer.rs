//! [`DeviceBuffer`]: a buffer in one device's memory, freed when dropped (also when an operator fails
//! half-way).

use insitu_device::protocol::{AllocMemory, FreeMemory};
use insitu_device::{DeviceClient, MemHandle};

use crate::array::Array;
use crate::error::{HostError, Result};

#[derive(Debug)]
pub struct DeviceBuffer<'a> {
    pub device: &'a DeviceClient,
    pub handle: MemHandle,
    pub bytes: u64,
    freed: bool,
}

impl<'a> DeviceBuffer<'a> {
    pub fn alloc(array: &'a Array, device: u32, bytes: u64) -> Result<DeviceBuffer<'a>> {
        let d = array.device(device)?;
        let handle = d.call(AllocMemory { bytes }).map_err(HostError::device(device))?;
        Ok(DeviceBuffer { device: d, handle, bytes, freed: false })
    }

    /// Frees the buffer now, saying whether the device could (dropping it frees it too, quietly).
    pub fn free(mut self) -> insitu_device::Result<()> {
        self.freed = true;
        self.device.call(FreeMemory { handle: self.handle })
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        if !self.freed {
            let _ = self.device.call(FreeMemory { handle: self.handle });
        }
    }
}
