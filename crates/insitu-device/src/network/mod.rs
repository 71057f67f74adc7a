//! BlueDBM's integrated storage network (ISCA '15 §3.2): nodes' devices cabled port to port in any
//! topology ([`topology`]), deterministic routes per logical endpoint ([`routes`]), and a
//! discrete-event simulation of the links that real messages cross ([`sim`]), with token flow control,
//! back-pressure, per-hop latency and contention, in simulated time.
//!
//! ```
//! use insitu_device::network::{NetConfig, Network, Topology};
//! use insitu_device::Profile;
//! let cfg = NetConfig::from_profile(&Profile::load("bluedbm").unwrap()).unwrap();
//! let mut net = Network::new(&Topology::line(4, 1, 8).unwrap(), cfg);
//! net.send(0, 0, 3, b"a page of data".to_vec()).unwrap();   // endpoint 0 of node 0 -> node 3
//! net.run();
//! let got = net.receive(3, 0).unwrap();
//! assert_eq!((got.src, got.hops, &got.data[..]), (0, 3, &b"a page of data"[..]));
//! assert!(got.delivered_ps >= 3 * 480_000);                   // §6.3: 0.48 us a hop
//! ```

pub mod routes;
pub mod sim;
pub mod topology;

pub use routes::{Channel, ChannelId, Routes};
pub use sim::{Delivery, EndpointId, NetConfig, NetError, Network, Payload, Ps};
pub use topology::{Cable, NodeId, PortRef, Topology, TopologyError};
