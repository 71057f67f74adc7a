//! Deterministic routing per logical endpoint (BlueDBM §3.2.3, Fig. 6): every packet from one endpoint
//! to one destination takes the same path, so the endpoint is a FIFO across the cluster without
//! completion buffers; different endpoints to the same destination may take different paths, which
//! spreads traffic over parallel cables. Tables are computed from the topology (no discovery protocol):
//! at each node, among the channels that lie on a shortest path to the destination, endpoint `e` to
//! destination `d` takes the one at position `(e + d) mod k`.

use super::topology::{NodeId, PortRef, Topology};

/// One direction of a cable.
pub type ChannelId = u32;

/// The two ends of one direction of a cable: it carries packets out of `from` into `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channel {
    pub from: PortRef,
    pub to: PortRef,
}

/// The routing tables of a whole appliance.
#[derive(Debug, Clone)]
pub struct Routes {
    nodes: u32,
    endpoints: u32,
    channels: Vec<Channel>,
    /// `[node][dst][endpoint]` -> the channel out of `node`; `NONE` where `node == dst`.
    next: Vec<ChannelId>,
    hops: Vec<u32>,
}

const NONE: ChannelId = ChannelId::MAX;

impl Routes {
    /// Tables for a (validated, hence connected) topology and `endpoints` endpoints per node.
    pub fn build(topology: &Topology, endpoints: u32) -> Routes {
        let n = topology.nodes();
        let mut channels = Vec::with_capacity(topology.cables().len() * 2);
        for c in topology.cables() {
            channels.push(Channel { from: c.a, to: c.b });
            channels.push(Channel { from: c.b, to: c.a });
        }
        let mut out: Vec<Vec<ChannelId>> = vec![Vec::new(); n as usize];
        for (id, c) in channels.iter().enumerate() {
            out[c.from.node as usize].push(id as ChannelId);
        }
        let mut hops = vec![0u32; (n * n) as usize];
        for d in 0..n {
            for (m, h) in topology.hops_from(d).into_iter().enumerate() {
                hops[m * n as usize + d as usize] = h.unwrap_or(u32::MAX);
            }
        }
        let mut next = vec![NONE; (n * n * endpoints) as usize];
        for node in 0..n {
            for dst in 0..n {
                if node == dst {
                    continue;
                }
                let here = hops[(node * n + dst) as usize];
                let on_path: Vec<ChannelId> = out[node as usize]
                    .iter()
                    .copied()
                    .filter(|&c| hops[(channels[c as usize].to.node * n + dst) as usize] + 1 == here)
                    .collect();
                for e in 0..endpoints {
                    let pick = on_path[((e + dst) as usize) % on_path.len()];
                    next[((node * n + dst) * endpoints + e) as usize] = pick;
                }
            }
        }
        Routes { nodes: n, endpoints, channels, next, hops }
    }

    pub fn channels(&self) -> &[Channel] {
        &self.channels
    }

    pub fn endpoints(&self) -> u32 {
        self.endpoints
    }

    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// The channel a packet of endpoint `ep` for `dst` leaves `node` on (`None` at its destination).
    pub fn next(&self, node: NodeId, dst: NodeId, ep: u32) -> Option<ChannelId> {
        let c = self.next[((node * self.nodes + dst) * self.endpoints + ep) as usize];
        (c != NONE).then_some(c)
    }

    /// Hops on a shortest path between two nodes.
    pub fn hops(&self, from: NodeId, to: NodeId) -> u32 {
        self.hops[(from * self.nodes + to) as usize]
    }

    /// The channels from `src` to `dst` for endpoint `ep`, in order.
    pub fn path(&self, src: NodeId, dst: NodeId, ep: u32) -> Vec<ChannelId> {
        let mut path = Vec::new();
        let mut at = src;
        while let Some(c) = self.next(at, dst, ep) {
            path.push(c);
            at = self.channels[c as usize].to.node;
        }
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_shortest_deterministic_and_spread_over_lanes() {
        let t = Topology::ring(8, 4, 8).unwrap();
        let r = Routes::build(&t, 8);
        for src in 0..8 {
            for dst in 0..8 {
                for ep in 0..8 {
                    let p = r.path(src, dst, ep);
                    assert_eq!(p.len() as u32, r.hops(src, dst));
                    assert_eq!(p, r.path(src, dst, ep), "deterministic");
                    if let Some(last) = p.last() {
                        assert_eq!(r.channels()[*last as usize].to.node, dst);
                    }
                }
            }
        }
        // 4 endpoints to the neighbour use the 4 lanes.
        let mut first: Vec<ChannelId> = (0..4).map(|ep| r.path(0, 1, ep)[0]).collect();
        first.sort();
        first.dedup();
        assert_eq!(first.len(), 4);
        assert_eq!(r.hops(0, 4), 4);
    }
}
