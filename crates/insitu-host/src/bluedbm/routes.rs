//! `insitu net routes`: a topology validated, and the routing tables built from it (BlueDBM §3.2.3),
//! shown per (source, destination): hops, the route each endpoint takes, how many distinct routes the
//! endpoints spread over.

use insitu_device::network::Routes;
use insitu_device::Profile;
use serde::Serialize;

use crate::error::Result;
use crate::units::count;

/// Routes between one pair of nodes.
#[derive(Debug, Clone, Serialize)]
pub struct PairRoutes {
    pub src: u32,
    pub dst: u32,
    pub hops: u32,
    /// Per endpoint, the route as "node.port" hops: `0.2>1.0 1.3>2.1` leaves node 0 on port 2, enters
    /// node 1 on port 0, and so on.
    pub routes: Vec<String>,
    pub distinct: usize,
}

/// A topology's routing tables.
#[derive(Debug, Clone, Serialize)]
pub struct RoutesReport {
    pub nodes: u32,
    pub cables: usize,
    pub ports: u32,
    pub endpoints: u32,
    pub diameter: u32,
    pub mean_hops: f64,
    /// The pairs listed: every one, or on a topology of more than [`LIST_ALL_UP_TO`] nodes those from
    /// node 0 (`pairs_from`), since all of them take memory and lines by the square of the nodes (and
    /// their routes by the cube).
    pub pairs: Vec<PairRoutes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs_from: Option<u32>,
}

/// Topologies of up to this many nodes list the routes of every pair.
pub const LIST_ALL_UP_TO: u32 = 64;

/// The topology `shape` (ring, line, mesh, full or a TOML file) of `nodes` nodes (a shape's default: 4; a
/// file says how many it has) with `lanes` cables per neighbour, on the ports and endpoints of `profile`.
pub fn routes(shape: &str, nodes: Option<u32>, lanes: u32, profile: &Profile) -> Result<RoutesReport> {
    let (net, _) = super::storage_network(profile)?;
    let nodes = if shape.ends_with(".toml") { nodes } else { Some(nodes.unwrap_or(4)) };
    let topo = super::topology(shape, nodes, lanes, profile)?;
    let r = Routes::build(&topo, net.endpoints);
    let n = topo.nodes();
    let mut pairs = Vec::new();
    let (mut diameter, mut total, mut count) = (0, 0u64, 0u64);
    let pairs_from = (n > LIST_ALL_UP_TO).then_some(0);
    for src in 0..n {
        for dst in (0..n).filter(|d| *d != src) {
            let hops = r.hops(src, dst);
            diameter = diameter.max(hops);
            total += hops as u64;
            count += 1;
            if pairs_from.is_some_and(|from| from != src) {
                continue;
            }
            let routes: Vec<String> = (0..net.endpoints).map(|ep| describe(&r, src, dst, ep)).collect();
            let mut distinct = routes.clone();
            distinct.sort();
            distinct.dedup();
            pairs.push(PairRoutes { src, dst, hops, routes, distinct: distinct.len() });
        }
    }
    let mean_hops = if count == 0 { 0.0 } else { total as f64 / count as f64 };
    Ok(RoutesReport {
        nodes: n,
        cables: topo.cables().len(),
        ports: net.ports,
        endpoints: net.endpoints,
        diameter,
        mean_hops,
        pairs,
        pairs_from,
    })
}

fn describe(r: &Routes, src: u32, dst: u32, ep: u32) -> String {
    r.path(src, dst, ep)
        .iter()
        .map(|c| {
            let ch = r.channels()[*c as usize];
            format!("{}.{}>{}.{}", ch.from.node, ch.from.port, ch.to.node, ch.to.port)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The report as text: a summary, then one line per pair (endpoint 0's route and the spread).
pub fn render(r: &RoutesReport) -> String {
    let mut out = format!(
        "{}, {} ({} ports a node), {}; diameter {}, mean {:.2} hops\n",
        count(r.nodes as u64, "node"),
        count(r.cables as u64, "cable"),
        r.ports,
        count(r.endpoints as u64, "endpoint"),
        count(r.diameter as u64, "hop"),
        r.mean_hops
    );
    if let Some(from) = r.pairs_from {
        out += &format!(
            "(the routes from node {from} only: a topology of more than {LIST_ALL_UP_TO} nodes lists one node's)\n"
        );
    }
    for p in &r.pairs {
        out += &format!(
            "{:>3} -> {:<3} {:>2} hop{}  {:<9}  endpoint 0: {}\n",
            p.src,
            p.dst,
            p.hops,
            if p.hops == 1 { " " } else { "s" },
            count(p.distinct as u64, "route"),
            p.routes[0]
        );
    }
    out
}
