//! [`PeerFabric`]: the fabric of an array, built from transports. A device's `CopyToPeer` becomes a
//! [`PeerWrite`] sent to the peer through that peer's transport: directly into its memory when both run in
//! this process, over the peer's socket when it runs in another. Every device of an array sits behind one
//! switch, so a transfer crosses one hop; BlueDBM's storage network will route over several.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock, Weak};

use crate::error::{DeviceError, Result};
use crate::fabric::Fabric;
use crate::memory::MemHandle;
use crate::protocol::{PeerPages, PeerRawRead, PeerWrite};
use crate::transport::client::{DeviceClient, Transport};

type Connect = Box<dyn Fn() -> Result<DeviceClient> + Send + Sync>;

enum Link {
    /// A transport this process holds anyway (weak: the fabric must not keep devices alive).
    Held(Weak<dyn Transport>),
    /// A connection made on first use.
    Lazy { connect: Connect, client: OnceLock<DeviceClient> },
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::Held(_) => f.write_str("Held"),
            Link::Lazy { client, .. } => write!(f, "Lazy(connected: {})", client.get().is_some()),
        }
    }
}

/// Peers by device id.
#[derive(Debug, Default)]
pub struct PeerFabric {
    links: RwLock<BTreeMap<u32, Arc<Link>>>,
}

impl PeerFabric {
    pub fn new() -> PeerFabric {
        PeerFabric::default()
    }

    /// Reaches device `id` through a transport held elsewhere.
    pub fn attach(&self, id: u32, t: &Arc<dyn Transport>) {
        self.insert(id, Link::Held(Arc::downgrade(t)));
    }

    /// Reaches device `id` through a connection `connect` makes on first use.
    pub fn attach_lazy(&self, id: u32, connect: impl Fn() -> Result<DeviceClient> + Send + Sync + 'static) {
        self.insert(id, Link::Lazy { connect: Box::new(connect), client: OnceLock::new() });
    }

    fn insert(&self, id: u32, link: Link) {
        self.links.write().unwrap_or_else(|p| p.into_inner()).insert(id, Arc::new(link));
    }

    fn client(&self, to: u32) -> Result<DeviceClient> {
        let link = self.links.read().unwrap_or_else(|p| p.into_inner()).get(&to).cloned();
        match link.as_deref() {
            None => Err(DeviceError::NoPeer(to)),
            Some(Link::Held(w)) => w.upgrade().map(DeviceClient::new).ok_or(DeviceError::ShutDown(to)),
            Some(Link::Lazy { connect, client }) => {
                if let Some(c) = client.get() {
                    return Ok(c.clone());
                }
                let c = connect()?;
                Ok(client.get_or_init(|| c).clone())
            }
        }
    }
}

impl Fabric for PeerFabric {
    fn deliver(&self, to: u32, dst: MemHandle, offset: u64, data: Vec<u8>) -> Result<u32> {
        const HOPS: u32 = 1;
        self.client(to)?.call(PeerWrite { dst, offset, hops: HOPS, data })?;
        Ok(HOPS)
    }

    fn raw_read(&self, to: u32, req: PeerRawRead) -> Result<PeerPages> {
        self.client(to)?.call(req)
    }
}
