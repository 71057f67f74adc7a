//! BlueDBM (ISCA '15): an appliance of nodes whose storage devices are joined by their own network.
//! So far: the reproduction of §6.3-6.5 ([`repro`]: Fig. 11 on the discrete-event simulation of
//! [`insitu_device::network`], Figs. 12-13 in [`access`] on simulated nodes of
//! [`insitu_device::cluster`]), the routes of a topology ([`routes`]), the file system of §4 ([`fs`]),
//! and the graphs of §7.2 ([`graph`]: the Graph500 generator, edge-list files).

pub mod access;
pub mod apps;
pub mod bench;
pub mod fs;
pub mod graph;
pub mod nearest;
pub mod ops;
pub mod power;
pub mod repro;
pub mod repro_apps;

pub mod routes;
pub mod search;

pub use insitu_device::network::{Topology, TopologyError};
pub use insitu_device::protocol::IspLimits;

use insitu_device::network::NetConfig;
use insitu_device::profile::StorageNetworkProfile;
use insitu_device::Profile;

use crate::error::{HostError, Result};

pub use crate::figure::Row;

/// The topology `shape` (ring, line, mesh, full, or a TOML file) of `nodes` nodes with `lanes` cables
/// between neighbours, on `profile`'s storage network; refused by name when it does not fit.
pub fn topology(shape: &str, nodes: Option<u32>, lanes: u32, profile: &Profile) -> Result<Topology> {
    let (net, _) = storage_network(profile)?;
    if lanes == 0 {
        return Err(HostError::InvalidArgument("--lanes must be at least 1".into()));
    }
    if !shape.ends_with(".toml") && nodes.is_none() {
        return Err(HostError::InvalidArgument(format!("the {shape} topology needs --nodes")));
    }
    Topology::named(shape, nodes, lanes, net.ports).map_err(|e| HostError::InvalidArgument(e.to_string()))
}

/// The storage network `profile` describes and the simulation's configuration for it, or an error
/// naming the profile when its devices have none.
fn storage_network(profile: &Profile) -> Result<(&StorageNetworkProfile, NetConfig)> {
    match (profile.network.storage.as_ref(), NetConfig::from_profile(profile)) {
        (Some(net), Some(cfg)) => Ok((net, cfg)),
        _ => Err(HostError::InvalidArgument(format!(
            "profile {} has no storage network ([network.storage]); try --profile bluedbm",
            profile.name
        ))),
    }
}

/// A topology the caller built, refused: an invalid argument naming why.
fn topo_err(e: TopologyError) -> HostError {
    HostError::InvalidArgument(e.to_string())
}

/// An appliance of `nodes` nodes of the bluedbm profile with a small geometry (2 cards x 2 buses x 2
/// chips, 16 pages of 8 KiB a block) and `capacity` bytes a node, cabled in a line: for tests.
#[cfg(test)]
pub(crate) fn small_appliance(dir: &std::path::Path, nodes: u32, capacity: u64) -> crate::Array {
    let text = include_str!("../../../../profiles/bluedbm.toml")
        .replace("channels = 16 ", "channels = 4 ")
        .replace("chips_per_channel = 8 ", "chips_per_channel = 2 ")
        .replace("pages_per_block = 256 ", "pages_per_block = 16 ");
    let profile = Profile::from_toml(&text, "small").unwrap();
    let topo = topology("line", Some(nodes), 1, &profile).unwrap();
    let mut array = crate::Array::init(dir, nodes, profile, Some(capacity), None).unwrap();
    array.set_topology(topo).unwrap();
    array
}

/// Figures' rows as text, a table a figure: its name and title, then each row's unit, the paper's, the
/// modeled and the measured value, and why.
fn rows_text(figs: &[(&str, &str, &Vec<Row>)]) -> String {
    let mut out = String::new();
    for (name, title, rows) in figs {
        out += &format!(
            "\n{:<52} {:>10} {:>10} {:>10} {:>10}  {}\n",
            format!("{name}: {title}"),
            "unit",
            "paper",
            "modeled",
            "measured",
            "why"
        );
        for r in rows.iter() {
            let paper = r.paper.map_or("-".to_string(), |p| format!("{p:.2}"));
            let measured = r.measured.map_or("-".to_string(), |m| format!("{m:.3}"));
            out += &format!(
                "{:<52} {:>10} {:>10} {:>10.3} {:>10}  {}\n",
                r.label, r.unit, paper, r.modeled, measured, r.note
            );
        }
    }
    out
}

/// A raw flash command of a simulation refused.
fn raw_err(e: insitu_device::rawflash::RawFlashError) -> HostError {
    HostError::InvalidArgument(format!("raw flash: {e}"))
}
