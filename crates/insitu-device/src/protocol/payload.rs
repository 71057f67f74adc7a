//! What a request or a reply carries across a transport: a small serde header (postcard) and, for the
//! commands that move data, one bulk buffer sent as it is, never through the serializer.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{DeviceError, Result};

/// An encoded request or reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    pub header: Vec<u8>,
    pub bulk: Vec<u8>,
}

impl Payload {
    /// A value as a header, with no bulk.
    pub fn encode<T: Serialize>(v: &T) -> Result<Payload> {
        let header = postcard::to_stdvec(v).map_err(|e| DeviceError::Protocol(format!("encoding: {e}")))?;
        Ok(Payload { header, bulk: Vec::new() })
    }

    /// The value in the header.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        postcard::from_bytes(&self.header).map_err(|e| DeviceError::Protocol(format!("decoding: {e}")))
    }

    /// Bulk bytes alone (a data reply).
    pub fn bulk(bulk: Vec<u8>) -> Payload {
        Payload { header: Vec::new(), bulk }
    }
}
