//! The host side of insitu: an [`Array`] of computational storage devices in a data directory, the
//! operators (one module per seed system), their baselines, the timing and energy [`model`], and
//! [`Report`]s. The host talks to devices only through the typed device protocol
//! ([`insitu_device::protocol`]) over a transport: devices in this process, or each in its own process
//! ([`DeviceTransport`]).
//!
//! - [`blob`]: put / get / rm / ls of plain objects, striped over the array or on one device;
//! - [`search`]: string search, device vs host placement (BlueDBM §5.1);
//! - [`table`]: tables on devices (schema, NASCENT's hybrid layout, import and export), shared by:
//! - [`nascent`]: NASCENT's sort (FPGA '21), with its host and host-accelerator baselines;
//! - [`psacs`]: PSACS's shuffle write inside the devices, its host baselines, shuffle read (ICCD '21);
//! - [`intersect`]: the Smart SSD list intersection (DaMoN '16): lists, sessions, SvS, the §4 model;
//! - [`selfsort`]: the Self-Sorting SSD (2015): records sorted by the drive's firmware as they are written
//!   or on command, read back in key order; its baselines (host merge sort, ActiveSort);
//! - [`bluedbm`]: BlueDBM (ISCA '15): the storage network and its reproduction, the file system that hands
//!   out physical addresses, and the applications (string search, nearest neighbours, graph traversal);
//! - [`lba`]: the block interface of one device (write, read, trim);
//! - [`model`]: counters -> modeled time and energy on a profile; [`report`]: what every operation returns.
//!
//! ```
//! use insitu_host::blob::{self, Placement};
//! use insitu_host::search::{search, SearchPlacement};
//! use insitu_host::{Array, OpenOptions};
//! use insitu_device::Profile;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let data = dir.path().join("array");
//! Array::init(&data, 2, Profile::load("tiny").unwrap(), Some(8 << 20), Some(4096)).unwrap().close().unwrap();
//! let mut array = Array::open(&data, OpenOptions::default()).unwrap();
//! let file = dir.path().join("log.txt");
//! std::fs::write(&file, "ok\nERROR 503\nok\n".repeat(1000)).unwrap();
//! blob::put(&mut array, &file, "log", Placement::Striped, &blob::no_progress).unwrap();
//! let inside = search(&array, "log", b"ERROR", SearchPlacement::Device, false).unwrap();
//! let outside = search(&array, "log", b"ERROR", SearchPlacement::Host, false).unwrap();
//! assert_eq!(inside.result["count"], 1000);
//! assert_eq!(inside.result["count"], outside.result["count"]);
//! println!("{} ({} bytes over the host link)", inside.headline, inside.bytes.device_to_host);
//! array.close().unwrap();
//! ```

pub mod array;
pub mod blob;
pub mod bluedbm;
pub mod buffer;
pub mod catalog;
pub mod devices;
pub mod error;
pub mod figure;
pub mod fsck;
pub mod input;
pub mod intersect;
pub mod lba;
pub mod model;
pub mod nascent;
pub mod outfile;
pub mod progress;
pub mod psacs;
pub mod report;
pub mod search;
pub mod selfsort;
pub mod stats;
pub mod table;
pub mod units;

pub use array::{Array, OpenOptions, OpenReport, DEFAULT_STRIPE_UNIT};
pub use devices::{
    format_device, serve_device, Connector, DeviceTransport, Exchange, MessageServer, ServeOptions, Served,
};
pub use error::{ErrorKind, HostError, Result};
pub use insitu_device::{free_bytes, profile, FaultPlan, Profile};
pub use report::{MeasuredPhase, PathBytes, Report};
