//! Arguments and results of `search` and `heads`: literal string search over an object, inside the
//! device (BlueDBM §5.1: engines scan flash pages and only match positions leave the device).

use serde::{Deserialize, Serialize};

use crate::memory::MemHandle;
use crate::stripe::StripeLayout;

/// Count (and optionally locate) `pattern` in this device's part of `object`, laid out as `layout` says.
/// A match that straddles the end of one of this device's stripes is found with `halo`: a buffer holding
/// the first `pattern.len() - 1` bytes of every stripe that follows one of ours (made by `heads` on the
/// next device and a device-to-device copy).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SearchArgs {
    pub object: String,
    pub pattern: Vec<u8>,
    /// Also return the offset (in the whole object) of every match.
    pub offsets: bool,
    pub layout: StripeLayout,
    pub halo: Option<MemHandle>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchOutput {
    /// Matches that start in this device's stripes.
    pub count: u64,
    pub bytes_scanned: u64,
    pub offsets: Option<Vec<u64>>,
}

/// Copy the first `width` bytes of each of this device's stripes of `object` into buffer `out`, slot
/// after slot (`width` bytes a slot).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeadsArgs {
    pub object: String,
    pub width: u64,
    pub layout: StripeLayout,
    pub out: MemHandle,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadsOutput {
    /// Stripes (slots written).
    pub chunks: u64,
}
