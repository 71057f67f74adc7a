//! The in-process transport: the device's threads run in this process and replies move as typed values
//! (zero-copy: a `Read`'s buffer goes to the device and comes back filled). The embedded default.

use std::sync::Arc;

use crate::completion::{CommandId, Reply};
use crate::device::Device;
use crate::error::Result;
use crate::protocol::Command;
use crate::transport::client::{DeviceClient, Transport};

#[derive(Debug)]
pub struct LocalTransport {
    device: Device,
}

impl LocalTransport {
    pub fn new(device: Device) -> LocalTransport {
        LocalTransport { device }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }
}

/// A client of a device running in this process.
pub fn in_process(device: Device) -> DeviceClient {
    DeviceClient::new(Arc::new(LocalTransport::new(device)))
}

impl Transport for LocalTransport {
    fn device_id(&self) -> u32 {
        self.device.id()
    }

    fn submit(&self, cmd: Command) -> Result<CommandId> {
        self.device.submit(cmd)
    }

    fn poll(&self, id: CommandId) -> Option<Reply> {
        self.device.poll(id)
    }

    fn wait(&self, id: CommandId) -> Reply {
        self.device.wait(id)
    }

    fn abandon(&self, id: CommandId) {
        self.device.abandon(id);
    }

    fn in_process(&self) -> bool {
        true
    }

    fn close(&self) -> Result<()> {
        self.device.close()
    }
}
