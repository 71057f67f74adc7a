//! Raw flash commands (BlueDBM §3.1, §4): the device's raw partition, driven by physical address, for host
//! software that manages flash itself (BlueDBM's file system). Devices whose profile has a raw flash
//! interface (`[nand.interface]`) have one; others refuse these commands.

use serde::{Deserialize, Serialize};

use crate::protocol::request::request;
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
/// little endian).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawRead {
    pub addrs: Vec<FlashAddr>,
}

/// Erases the blocks holding `addrs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawErase {
    pub addrs: Vec<FlashAddr>,
}

/// Makes programmed pages durable.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RawSync;

request!(RawIdentify => RawInfo, Io);
request!(RawWrite => (), Io);
request!(RawRead => bulk, Io);
request!(RawErase => (), Io);
request!(RawSync => (), Io);
