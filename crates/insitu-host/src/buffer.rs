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
}

impl<'a> DeviceBuffer<'a> {
    pub fn alloc(array: &'a Array, device: u32, bytes: u64) -> Result<DeviceBuffer<'a>> {
        let d = array.device(device)?;
        let handle = d.call(AllocMemory { bytes }).map_err(HostError::device(device))?;
        Ok(DeviceBuffer { device: d, handle, bytes })
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        let _ = self.device.call(FreeMemory { handle: self.handle });
    }
}
