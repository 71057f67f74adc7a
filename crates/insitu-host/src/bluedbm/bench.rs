//! `insitu net bench`: random 8 KB page reads over an appliance of simulated nodes (by default 4 on a
//! ring, 4 GiB spread evenly), by the paths of §6.4-6.5: how fast this machine emulates them (pages per
//! second of wall time, one core) and the bandwidth they have on the profile (simulated time).

use std::time::Instant;

use insitu_device::cluster::{Access, Cluster, Read};
use insitu_device::network::NodeId;
use insitu_device::rawflash::FlashAddr;
use insitu_device::Profile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::raw_err;
use crate::devices::ScratchDir;
use crate::error::{HostError, Result};

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub nodes: u32,
    /// ring, line, mesh, full, or a topology file.
    pub topology: String,
    pub lanes: u32,
    /// Bytes written, spread evenly over the nodes.
    pub bytes: u64,
    /// Reads per path.
    pub reads: u64,
    pub seed: u64,
}

/// One path's figures.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub path: String,
    pub reads: u64,
    pub wall_s: f64,
    /// Pages emulated per second of wall time here.
    pub pages_per_s: f64,
    /// GB (10^9 bytes) of pages emulated per second of wall time here.
    pub emulated_gb_s: f64,
    /// GB (10^9 bytes) of pages per second of simulated time on the profile.
    pub modeled_gb_s: f64,
}

/// The benchmark's report.
#[derive(Debug, Clone, Serialize)]
pub struct Bench {
    pub profile: String,
    pub nodes: u32,
    pub topology: String,
    pub bytes: u64,
    pub page_bytes: u64,
    /// Wall seconds to write the pages through the nodes' raw interfaces.
    pub fill_s: f64,
    pub rows: Vec<BenchRow>,
}

/// A stream of reads from `origin` by `access` to random pages of one of `targets`, `window` in flight.
struct Stream {
    origin: NodeId,
    access: Access,
    targets: Vec<NodeId>,
    window: usize,
}

/// Pages on each node and blocks on each of its chips for `bytes` spread over `n` nodes: at least one block,
/// and at most what a node of `profile` holds when `insitu init` sizes it (the profile's default capacity;
/// the images are sparse, so only the pages written take disk space).
fn node_size(profile: &Profile, n: u32, bytes: u64) -> Result<(u64, u64)> {
    let geo = profile.base_geometry();
    let (page, chips, ppb) = (geo.page_size as u64, geo.chips(), geo.pages_per_block as u64);
    let per_node = bytes / n as u64 / page;
    if per_node == 0 {
        return Err(HostError::InvalidArgument(format!("--size {bytes} is less than a page a node")));
    }
    let blocks = per_node.div_ceil(chips).div_ceil(ppb).max(1);
    let most = (profile.default_capacity_bytes / (chips * ppb * page)).max(1);
    if blocks > most {
        return Err(HostError::InvalidArgument(format!(
            "--size {} is more than the flash of {n} {} nodes ({})",
            crate::units::human_bytes(bytes),
            profile.name,
            crate::units::human_bytes(most * ppb * chips * page * n as u64)
        )));
    }
    Ok((per_node, blocks))
}

/// Runs the benchmark in a scratch directory under `work` (removed afterwards).
pub fn run(
    profile: &Profile,
    opts: &BenchOptions,
    work: &std::path::Path,
    progress: &dyn Fn(&str),
) -> Result<Bench> {
    if opts.reads == 0 {
        return Err(HostError::InvalidArgument("--reads must be at least 1".into()));
    }
    let topo = super::topology(&opts.topology, Some(opts.nodes), opts.lanes, profile)?;
    let n = topo.nodes();
    if n < 2 {
        return Err(HostError::InvalidArgument("the benchmark needs at least 2 nodes".into()));
    }
    let (per_node, blocks) = node_size(profile, n, opts.bytes)?;
    std::fs::create_dir_all(work).map_err(|e| HostError::io(work, e))?;
    let dir = ScratchDir::new_in(work)?;
    let geo = profile.base_geometry();
    let page = geo.page_size as u64;
    let chips = geo.chips();
    let mut c = Cluster::create(profile, &topo, dir.path(), blocks)?;
    let (cards, tags, buffers) = {
        let raw = profile.nand.interface.as_ref().expect("the cluster checked it");
        (raw.cards, raw.tags_per_card as usize, raw.host_page_buffers as usize)
    };
    let buses = geo.channels / cards;
    // Page j of a node: chips first (card, bus, chip), then pages of a block, then blocks.
    let addr = |j: u64| {
        let chip_index = j % chips;
        let k = j / chips;
        let channel = (chip_index % geo.channels as u64) as u32;
        FlashAddr {
            card: channel / buses,
            bus: channel % buses,
            chip: (chip_index / geo.channels as u64) as u32,
            block: k / geo.pages_per_block as u64,
            page: (k % geo.pages_per_block as u64) as u32,
        }
    };
    progress(&format!("writing {} pages on each of {n} nodes", per_node));
    let started = Instant::now();
    let mut data = vec![0u8; page as usize];
    for node in 0..n {
        for j in 0..per_node {
            let tag = (node as u64) << 40 | j;
            for (w, chunk) in data.chunks_exact_mut(8).enumerate() {
                chunk.copy_from_slice(&(tag ^ w as u64).to_le_bytes());
            }
            c.write(node, addr(j), tag, &data).map_err(raw_err)?;
        }
    }
    let fill_s = started.elapsed().as_secs_f64();
    let remote: Vec<NodeId> = (1..n).collect();
    let all: Vec<NodeId> = (0..n).collect();
    let isp_window = tags * cards as usize;
    let cases: Vec<(&str, Vec<Stream>)> = vec![
        (
            "ISP-local",
            vec![Stream { origin: 0, access: Access::IspFlash, targets: vec![0], window: isp_window }],
        ),
        (
            "ISP-remote (ISP-F)",
            vec![Stream { origin: 0, access: Access::IspFlash, targets: remote.clone(), window: isp_window }],
        ),
        (
            "Host-local",
            vec![Stream { origin: 0, access: Access::HostFlash, targets: vec![0], window: buffers }],
        ),
        (
            "Host-remote (H-F)",
            vec![Stream { origin: 0, access: Access::HostFlash, targets: remote, window: buffers }],
        ),
        (
            "every ISP, any node",
            all.iter()
                .map(|&o| Stream {
                    origin: o,
                    access: Access::IspFlash,
                    targets: all.clone(),
                    window: isp_window,
                })
                .collect(),
        ),
    ];
    let mut rows = Vec::new();
    for (i, (name, streams)) in cases.iter().enumerate() {
        progress(&format!("{name}: {} random reads", opts.reads));
        let mut rng = SmallRng::seed_from_u64(opts.seed + i as u64);
        let t0 = c.now();
        let started = Instant::now();
        let mut owner = std::collections::HashMap::new();
        let mut in_flight = vec![0usize; streams.len()];
        let (mut submitted, mut done) = (0u64, 0u64);
        loop {
            for (k, s) in streams.iter().enumerate() {
                while in_flight[k] < s.window && submitted < opts.reads {
                    let node = s.targets[rng.gen_range(0..s.targets.len())];
                    let a = addr(rng.gen_range(0..per_node));
                    let id = c
                        .submit(Read { origin: s.origin, access: s.access, node, addr: a })
                        .map_err(raw_err)?;
                    owner.insert(id, k);
                    in_flight[k] += 1;
                    submitted += 1;
                }
            }
            let Some(d) = c.next_done() else { break };
            in_flight[owner.remove(&d.id).expect("a read of ours")] -= 1;
            let want = (d.read.node as u64) << 40;
            if u64::from_le_bytes(d.data[..8].try_into().expect("8 bytes")) >> 40 != want >> 40 {
                return Err(HostError::InvalidArgument(format!(
                    "{name}: a read returned another node's page"
                )));
            }
            done += 1;
        }
        let wall = started.elapsed().as_secs_f64();
        let modeled_s = (c.now() - t0) as f64 * 1e-12;
        rows.push(BenchRow {
            path: (*name).into(),
            reads: done,
            wall_s: wall,
            pages_per_s: done as f64 / wall,
            emulated_gb_s: (done * page) as f64 / wall * 1e-9,
            modeled_gb_s: (done * page) as f64 / modeled_s * 1e-9,
        });
    }
    Ok(Bench {
        profile: profile.name.clone(),
        nodes: n,
        topology: opts.topology.clone(),
        bytes: per_node * page * n as u64,
        page_bytes: page,
        fill_s,
        rows,
    })
}

/// The report as text.
pub fn render(b: &Bench) -> String {
    let mut out = format!(
        "random {} page reads, {} nodes ({}), {} spread evenly, profile {}; pages written in {:.1} s\n\n",
        crate::units::human_bytes(b.page_bytes),
        b.nodes,
        b.topology,
        crate::units::human_bytes(b.bytes),
        b.profile,
        b.fill_s
    );
    out += &format!(
        "{:<22} {:>9} {:>9} {:>12} {:>14} {:>13}\n",
        "path", "reads", "wall s", "pages/s", "emulated GB/s", "modeled GB/s"
    );
    for r in &b.rows {
        out += &format!(
            "{:<22} {:>9} {:>9.2} {:>12.0} {:>14.3} {:>13.3}\n",
            r.path, r.reads, r.wall_s, r.pages_per_s, r.emulated_gb_s, r.modeled_gb_s
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default run (4 GiB over 4 nodes) fits, as does a node filled to the profile's default capacity;
    /// a byte more than that, or less than a page a node, is refused by name.
    #[test]
    fn sizes_up_to_the_nodes_default_capacity_are_taken() {
        let p = Profile::load("bluedbm").unwrap();
        let geo = p.base_geometry();
        let block_row = geo.chips() * geo.pages_per_block as u64 * geo.page_size as u64;
        let default = 4u64 << 30; // `insitu net bench`'s default --size
        let (_, blocks) = node_size(&p, 4, default).unwrap();
        assert!(blocks * block_row * 4 >= default, "{blocks} blocks a chip hold less than {default} bytes");
        let full = p.default_capacity_bytes / block_row * block_row;
        assert_eq!(node_size(&p, 2, 2 * full).unwrap().1, full / block_row);
        let e = node_size(&p, 2, 2 * full + 2 * block_row).unwrap_err().to_string();
        assert!(e.contains("more than the flash of 2 bluedbm nodes"), "{e}");
        let e = node_size(&p, 4, 3 * geo.page_size as u64).unwrap_err().to_string();
        assert!(e.contains("less than a page a node"), "{e}");
    }
}
