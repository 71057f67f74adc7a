//! Which node's port is cabled to which (BlueDBM §3.2, Fig. 5): any topology is possible as long as no
//! node needs more ports than it has. Built-in shapes (`ring`, `line`, `mesh`, `full`) or a TOML file:
//!
//! ```toml
//! # three nodes: node 0 has two cables to each of the others (Fig. 13's ISP-3Nodes)
//! nodes = 3
//! [[link]]
//! a = 0
//! b = 1
//! lanes = 2          # parallel cables, each on its own pair of ports
//! [[link]]
//! a = 0
//! a_port = 7         # ports may be named; otherwise the lowest free one is taken
//! b = 2
//! lanes = 1
//! ```
//!
//! Validation refuses, by name, a link to an unknown node, a port used twice or past the node's ports,
//! a cable from a node to itself, and a topology in which some node cannot reach another.

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A node of the appliance (a host and its BlueDBM storage device).
pub type NodeId = u32;

/// One end of a cable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PortRef {
    pub node: NodeId,
    pub port: u32,
}

impl fmt::Display for PortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} port {}", self.node, self.port)
    }
}

/// One full-duplex cable between two ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cable {
    pub a: PortRef,
    pub b: PortRef,
}

/// The most nodes a topology may have: routing tables take nodes x nodes x endpoints entries (32 MiB
/// with 8 endpoints here), and each node's shortest routes are found from every other.
pub const MAX_NODES: u32 = 1024;

/// [`TopologyError::NoNodes`] or [`TopologyError::TooManyNodes`] for `nodes` out of range.
fn check_nodes(nodes: u32) -> Result<(), TopologyError> {
    match nodes {
        0 => Err(TopologyError::NoNodes),
        n if n > MAX_NODES => Err(TopologyError::TooManyNodes { nodes: n, max: MAX_NODES }),
        _ => Ok(()),
    }
}

/// Why a topology is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum TopologyError {
    #[error("topology {origin}: {detail}")]
    Parse { origin: String, detail: String },
    #[error("topology: a network needs at least one node")]
    NoNodes,
    /// More nodes than [`MAX_NODES`]: the routing tables grow with the square of the nodes.
    #[error("topology: at most {max} nodes (BlueDBM's appliance had 20), not {nodes}")]
    TooManyNodes { nodes: u32, max: u32 },
    #[error("topology: link {link} names node {node}, but there are only {nodes} nodes (0 to {})", .nodes.saturating_sub(1))]
    UnknownNode { link: usize, node: NodeId, nodes: u32 },
    #[error("topology: link {link} has no lanes (lanes = 0): a link is at least one cable")]
    NoLanes { link: usize },
    #[error("topology: link {link} joins node {node} to itself")]
    SelfLink { link: usize, node: NodeId },
    #[error("topology: {port} is used twice (links {first} and {second})")]
    PortUsedTwice { port: PortRef, first: usize, second: usize },
    #[error("topology: link {link} uses {port}, but a node has ports 0 to {}", .ports.saturating_sub(1))]
    PortOutOfRange { link: usize, port: PortRef, ports: u32 },
    #[error("topology: node {node} needs {needed} ports, but a node has {ports}")]
    TooManyPorts { node: NodeId, needed: u32, ports: u32 },
    #[error("topology: no route from node {from} to node {to} (the network is not connected)")]
    Unreachable { from: NodeId, to: NodeId },
    #[error("topology: unknown shape {0:?} (ring, line, mesh, full, or a .toml file)")]
    UnknownShape(String),
}

/// The cabling of an appliance: nodes, each with `ports` ports, and the cables between them. Always
/// valid once built (every constructor validates).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    nodes: u32,
    ports: u32,
    cables: Vec<Cable>,
}

/// The file format (see the module docs).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyFile {
    nodes: u32,
    #[serde(default)]
    link: Vec<LinkSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkSpec {
    a: NodeId,
    b: NodeId,
    a_port: Option<u32>,
    b_port: Option<u32>,
    #[serde(default = "one")]
    lanes: u32,
}

fn one() -> u32 {
    1
}

impl Topology {
    /// Cables given port by port; validated.
    pub fn new(nodes: u32, ports: u32, cables: Vec<Cable>) -> Result<Topology, TopologyError> {
        let t = Topology { nodes, ports, cables };
        t.validate()?;
        Ok(t)
    }

    /// Cables given as node pairs; each takes the lowest free port at both ends.
    pub fn from_pairs(nodes: u32, ports: u32, pairs: &[(NodeId, NodeId)]) -> Result<Topology, TopologyError> {
        let specs: Vec<LinkSpec> =
            pairs.iter().map(|&(a, b)| LinkSpec { a, b, a_port: None, b_port: None, lanes: 1 }).collect();
        Self::from_specs(nodes, ports, &specs)
    }

    fn from_specs(nodes: u32, ports: u32, specs: &[LinkSpec]) -> Result<Topology, TopologyError> {
        check_nodes(nodes)?;
        // Named ports first, so that a lowest-free-port choice never takes a port named later.
        let mut used: Vec<Vec<bool>> = vec![vec![false; ports as usize]; nodes as usize];
        for (i, s) in specs.iter().enumerate() {
            if s.lanes == 0 {
                return Err(TopologyError::NoLanes { link: i });
            }
            for (node, port) in [(s.a, s.a_port), (s.b, s.b_port)] {
                if node >= nodes {
                    return Err(TopologyError::UnknownNode { link: i, node, nodes });
                }
                if let Some(p) = port {
                    if p >= ports {
                        return Err(TopologyError::PortOutOfRange {
                            link: i,
                            port: PortRef { node, port: p },
                            ports,
                        });
                    }
                    // A named port is the first of the link's lanes; the others take the ports after it.
                    for q in p..(p + s.lanes).min(ports) {
                        used[node as usize][q as usize] = true;
                    }
                }
            }
        }
        let mut cables = Vec::new();
        for (i, s) in specs.iter().enumerate() {
            for lane in 0..s.lanes {
                let mut end = |node: NodeId, named: Option<u32>| -> Result<PortRef, TopologyError> {
                    let port = match named {
                        Some(p) => p + lane,
                        None => {
                            let free = used[node as usize].iter().position(|u| !u);
                            let needed = ports + 1;
                            let p = free.ok_or(TopologyError::TooManyPorts { node, needed, ports })?;
                            used[node as usize][p] = true;
                            p as u32
                        }
                    };
                    if port >= ports {
                        return Err(TopologyError::PortOutOfRange {
                            link: i,
                            port: PortRef { node, port },
                            ports,
                        });
                    }
                    Ok(PortRef { node, port })
                };
                let a = end(s.a, s.a_port)?;
                let b = end(s.b, s.b_port)?;
                cables.push(Cable { a, b });
            }
        }
        // A port named for one link and taken by another shows up as a port used twice.
        let t = Topology { nodes, ports, cables };
        t.validate()?;
        Ok(t)
    }

    /// `n` nodes in a ring, `lanes` cables between neighbours (two nodes: `lanes` cables between them).
    pub fn ring(n: u32, lanes: u32, ports: u32) -> Result<Topology, TopologyError> {
        check_nodes(n)?;
        let pairs: Vec<(NodeId, NodeId)> = match n {
            0 | 1 => vec![],
            2 => vec![(0, 1)],
            _ => (0..n).map(|i| (i, (i + 1) % n)).collect(),
        };
        Self::lanes(n, ports, &pairs, lanes)
    }

    /// `n` nodes in a line.
    pub fn line(n: u32, lanes: u32, ports: u32) -> Result<Topology, TopologyError> {
        check_nodes(n)?;
        let pairs: Vec<(NodeId, NodeId)> = (1..n.max(1)).map(|i| (i - 1, i)).collect();
        Self::lanes(n, ports, &pairs, lanes)
    }

    /// `n` nodes in a 2-D mesh, row-major in rows of `ceil(sqrt(n))`, each cabled to its right and lower
    /// neighbour.
    pub fn mesh(n: u32, lanes: u32, ports: u32) -> Result<Topology, TopologyError> {
        check_nodes(n)?;
        let width = (1..=n.max(1)).find(|w| w * w >= n).unwrap_or(1);
        let mut pairs = Vec::new();
        for i in 0..n {
            if (i + 1) % width != 0 && i + 1 < n {
                pairs.push((i, i + 1));
            }
            if i + width < n {
                pairs.push((i, i + width));
            }
        }
        Self::lanes(n, ports, &pairs, lanes)
    }

    /// Every pair of the `n` nodes cabled directly.
    pub fn full(n: u32, lanes: u32, ports: u32) -> Result<Topology, TopologyError> {
        let pairs: Vec<(NodeId, NodeId)> = (0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b))).collect();
        Self::lanes(n, ports, &pairs, lanes)
    }

    fn lanes(n: u32, ports: u32, pairs: &[(NodeId, NodeId)], lanes: u32) -> Result<Topology, TopologyError> {
        let specs: Vec<LinkSpec> =
            pairs.iter().map(|&(a, b)| LinkSpec { a, b, a_port: None, b_port: None, lanes }).collect();
        Self::from_specs(n, ports, &specs)
    }

    /// A shape by name (`ring`, `line`, `mesh`, `full`) for `n` nodes, or a topology file (`*.toml`,
    /// whose node count must then be `n` when `n` is given).
    pub fn named(shape: &str, n: Option<u32>, lanes: u32, ports: u32) -> Result<Topology, TopologyError> {
        if shape.ends_with(".toml") || Path::new(shape).is_file() {
            let text = std::fs::read_to_string(shape).map_err(|e| TopologyError::Parse {
                origin: shape.into(),
                detail: format!("cannot read it: {e}"),
            })?;
            let t = Self::from_toml(&text, shape, ports)?;
            if let Some(n) = n.filter(|n| *n != t.nodes) {
                return Err(TopologyError::Parse {
                    origin: shape.into(),
                    detail: format!("it has {} nodes, but {n} were asked for", t.nodes),
                });
            }
            return Ok(t);
        }
        let n = n.unwrap_or(1);
        match shape {
            "ring" => Self::ring(n, lanes, ports),
            "line" => Self::line(n, lanes, ports),
            "mesh" => Self::mesh(n, lanes, ports),
            "full" => Self::full(n, lanes, ports),
            other => Err(TopologyError::UnknownShape(other.into())),
        }
    }

    /// Parses a topology file (see the module docs).
    pub fn from_toml(text: &str, origin: &str, ports: u32) -> Result<Topology, TopologyError> {
        let f: TopologyFile = toml::from_str(text)
            .map_err(|e| TopologyError::Parse { origin: origin.into(), detail: e.to_string() })?;
        Self::from_specs(f.nodes, ports, &f.link)
    }

    /// Checks the rules of the module docs.
    pub fn validate(&self) -> Result<(), TopologyError> {
        check_nodes(self.nodes)?;
        let mut owner: Vec<Vec<Option<usize>>> = vec![vec![None; self.ports as usize]; self.nodes as usize];
        for (i, c) in self.cables.iter().enumerate() {
            if c.a.node == c.b.node {
                return Err(TopologyError::SelfLink { link: i, node: c.a.node });
            }
            for end in [c.a, c.b] {
                if end.node >= self.nodes {
                    return Err(TopologyError::UnknownNode { link: i, node: end.node, nodes: self.nodes });
                }
                if end.port >= self.ports {
                    return Err(TopologyError::PortOutOfRange { link: i, port: end, ports: self.ports });
                }
                let slot = &mut owner[end.node as usize][end.port as usize];
                if let Some(first) = *slot {
                    return Err(TopologyError::PortUsedTwice { port: end, first, second: i });
                }
                *slot = Some(i);
            }
        }
        let dist = self.hops_from(0);
        if let Some(to) = dist.iter().position(|d| d.is_none()) {
            return Err(TopologyError::Unreachable { from: 0, to: to as NodeId });
        }
        Ok(())
    }

    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Ports per node.
    pub fn ports(&self) -> u32 {
        self.ports
    }

    pub fn cables(&self) -> &[Cable] {
        &self.cables
    }

    /// Hops from `from` to every node (`None`: unreachable), by breadth-first search.
    pub fn hops_from(&self, from: NodeId) -> Vec<Option<u32>> {
        let mut adj: Vec<Vec<NodeId>> = vec![Vec::new(); self.nodes as usize];
        for c in &self.cables {
            adj[c.a.node as usize].push(c.b.node);
            adj[c.b.node as usize].push(c.a.node);
        }
        let mut dist = vec![None; self.nodes as usize];
        dist[from as usize] = Some(0);
        let mut queue = VecDeque::from([from]);
        while let Some(n) = queue.pop_front() {
            let d = dist[n as usize].unwrap_or(0);
            for &m in &adj[n as usize] {
                if dist[m as usize].is_none() {
                    dist[m as usize] = Some(d + 1);
                    queue.push_back(m);
                }
            }
        }
        dist
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_have_the_expected_cables_and_hops() {
        let ring = Topology::ring(6, 1, 8).unwrap();
        assert_eq!(ring.cables().len(), 6);
        assert_eq!(ring.hops_from(0), [0, 1, 2, 3, 2, 1].map(Some));
        let ring4 = Topology::ring(20, 4, 8).unwrap();
        assert_eq!(ring4.cables().len(), 80, "§6.3: 4 lanes to each neighbour uses all 8 ports");
        let line = Topology::line(4, 1, 8).unwrap();
        assert_eq!(line.hops_from(0), [0, 1, 2, 3].map(Some));
        let mesh = Topology::mesh(9, 1, 8).unwrap();
        assert_eq!(mesh.cables().len(), 12);
        assert_eq!(mesh.hops_from(0)[8], Some(4));
        assert_eq!(Topology::full(9, 1, 8).unwrap().cables().len(), 36);
        assert!(matches!(Topology::full(10, 1, 8), Err(TopologyError::TooManyPorts { needed: 9, .. })));
        assert_eq!(Topology::ring(1, 1, 8).unwrap().cables().len(), 0);
        // Too many nodes is refused before any table is sized by them (65536 squared overflowed a u32).
        for n in [MAX_NODES + 1, 65_536, u32::MAX] {
            for t in [Topology::ring(n, 1, 8), Topology::line(n, 1, 8), Topology::mesh(n, 1, 8)] {
                assert_eq!(t.unwrap_err(), TopologyError::TooManyNodes { nodes: n, max: MAX_NODES });
            }
        }
        assert!(Topology::line(MAX_NODES, 1, 8).is_ok());
    }

    #[test]
    fn files_are_parsed_and_bad_ones_refused_by_name() {
        let ok = "nodes = 3\n[[link]]\na = 0\nb = 1\nlanes = 2\n[[link]]\na = 0\na_port = 7\nb = 2\n";
        let t = Topology::from_toml(ok, "t.toml", 8).unwrap();
        assert_eq!(t.cables().len(), 3);
        assert_eq!(t.cables()[2].a, PortRef { node: 0, port: 7 });
        assert_eq!(t.cables()[0].a.port, 0);
        let err = |text: &str| Topology::from_toml(text, "t.toml", 8).unwrap_err();
        assert!(matches!(
            err("nodes = 2\n[[link]]\na = 0\nb = 5\n"),
            TopologyError::UnknownNode { node: 5, .. }
        ));
        let twice = "nodes = 3\n[[link]]\na = 0\na_port = 1\nb = 1\n[[link]]\na = 0\na_port = 1\nb = 2\n";
        assert!(matches!(
            err(twice),
            TopologyError::PortUsedTwice { port: PortRef { node: 0, port: 1 }, .. }
        ));
        let nine = "nodes = 2\n[[link]]\na = 0\nb = 1\nlanes = 9\n";
        assert!(matches!(err(nine), TopologyError::TooManyPorts { node: 0, .. }));
        let past = "nodes = 2\n[[link]]\na = 0\na_port = 8\nb = 1\n";
        assert!(matches!(err(past), TopologyError::PortOutOfRange { .. }));
        let split = "nodes = 4\n[[link]]\na = 0\nb = 1\n[[link]]\na = 2\nb = 3\n";
        assert!(matches!(err(split), TopologyError::Unreachable { from: 0, to: 2 }));
        assert!(matches!(err("nodes = 2\n[[link]]\na = 1\nb = 1\n"), TopologyError::SelfLink { .. }));
        assert!(matches!(
            err("nodes = 2\n[[link]]\na = 0\nb = 1\nlanes = 0\n"),
            TopologyError::NoLanes { link: 0 }
        ));
        assert!(err("nodes = 2\nlinks = 3\n").to_string().contains("t.toml"));
        assert!(matches!(Topology::named("torus", Some(4), 1, 8), Err(TopologyError::UnknownShape(_))));
    }
}
