//! BlueDBM nodes in one simulation (§6.4): every access path returns the page exactly as written, the
//! paths' latencies order as their work does, and many reads in flight across nodes all arrive intact.

use insitu_device::cluster::{Access, Cluster, ClusterConfig, Read};
use insitu_device::network::Topology;
use insitu_device::rawflash::FlashAddr;
use insitu_device::Profile;
use insitu_flash::nand::Nand;
use insitu_flash::Geometry;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn page(node: u32, a: &FlashAddr) -> Vec<u8> {
    let seed =
        node as u64 * 7919 + a.card as u64 * 131 + a.bus as u64 * 17 + a.chip as u64 * 5 + a.page as u64;
    (0..8192u64).map(|i| (i.wrapping_mul(seed | 1) >> 3) as u8).collect()
}

/// `nodes` nodes in a line, each with `pages` pages programmed on every chip.
fn cluster(dir: &std::path::Path, nodes: u32, pages: u32) -> (Cluster, Vec<FlashAddr>) {
    let profile = Profile::load("bluedbm").unwrap();
    let geo = Geometry { blocks_per_chip: 2, ..profile.base_geometry() };
    let media = (0..nodes)
        .map(|n| {
            let d = dir.join(format!("node{n}"));
            std::fs::create_dir_all(&d).unwrap();
            Nand::open(&d, geo).unwrap()
        })
        .collect();
    let topo = Topology::line(nodes, 1, 8).unwrap();
    let mut c = Cluster::new(ClusterConfig::from_profile(&profile).unwrap(), &topo, media).unwrap();
    let mut addrs = Vec::new();
    for card in 0..2 {
        for bus in 0..8 {
            for chip in 0..8 {
                for p in 0..pages {
                    addrs.push(FlashAddr { card, bus, chip, block: 0, page: p });
                }
            }
        }
    }
    for n in 0..nodes {
        for a in &addrs {
            c.write(n, *a, 0, &page(n, a)).unwrap();
        }
    }
    (c, addrs)
}

#[test]
fn every_access_path_returns_the_page_and_their_latencies_order_as_their_work() {
    let dir = tempfile::tempdir().unwrap();
    let (mut c, _) = cluster(dir.path(), 3, 1);
    let a = FlashAddr { card: 1, bus: 4, chip: 2, block: 0, page: 0 };
    c.put_dram(2, a, page(2, &a));
    let mut latency = std::collections::HashMap::new();
    for (access, node) in [
        (Access::IspFlash, 0),
        (Access::IspFlash, 2),
        (Access::HostFlash, 0),
        (Access::HostFlash, 2),
        (Access::HostRemoteHost, 2),
        (Access::HostRemoteDram, 2),
    ] {
        let id = c.submit(Read { origin: 0, access, node, addr: a }).unwrap();
        let d = c.next_done().unwrap();
        assert_eq!(d.id, id);
        assert!(d.data == page(node, &a), "{access:?} at node {node} returned another page");
        assert_eq!(d.hops, if node == 0 { 0 } else { 4 }, "{access:?}");
        assert!(
            d.issued_ps <= d.at_device_ps && d.at_device_ps <= d.first_out_ps && d.first_out_ps < d.done_ps
        );
        latency.insert((access, node), d.done_ps - d.issued_ps);
        assert!(c.next_done().is_none(), "nothing else was in flight");
    }
    let l = |a, n| latency[&(a, n)];
    let cfg = c.config().clone();
    // Remote flash costs the local read plus the network both ways, not more than a few us of it.
    let extra = l(Access::IspFlash, 2) - l(Access::IspFlash, 0);
    assert!(extra > 4 * cfg.net.hop_latency_ps && extra < 10_000_000, "ISP-F adds {extra} ps");
    assert!(l(Access::IspFlash, 2) < l(Access::HostFlash, 2), "the host's PCIe adds to H-F");
    assert!(
        l(Access::HostFlash, 2) < l(Access::HostRemoteHost, 2),
        "the remote host cannot overlap flash and network"
    );
    assert!(l(Access::HostRemoteDram, 2) < l(Access::HostRemoteHost, 2), "DRAM has no tR");
    // A read of flash takes at least tR and the page's bus transfer.
    assert!(l(Access::IspFlash, 0) > cfg.raw.read_ps + cfg.raw.bus_page_ps);
}

/// A remote read puts on the network one request of 32 bytes and its page's slices, each after a data
/// header of 13 bytes (kind, request id, offset): the messages travel by reference, and this is what
/// their flits are priced from. A local read puts nothing on it.
#[test]
fn a_remote_read_crosses_the_network_as_one_request_and_its_page_in_slices() {
    let dir = tempfile::tempdir().unwrap();
    let (mut c, _) = cluster(dir.path(), 3, 1);
    let a = FlashAddr { card: 0, bus: 3, chip: 1, block: 0, page: 0 };
    c.put_dram(2, a, page(2, &a));
    let slice = c.config().raw.slice_bytes as u64;
    let slices = 8192u64.div_ceil(slice);
    for (access, node) in [
        (Access::IspFlash, 0),
        (Access::IspFlash, 2),
        (Access::HostFlash, 2),
        (Access::HostRemoteHost, 2),
        (Access::HostRemoteDram, 2),
    ] {
        let before = c.stats();
        c.submit(Read { origin: 0, access, node, addr: a }).unwrap();
        assert!(c.next_done().unwrap().data == page(node, &a), "{access:?}");
        let after = c.stats();
        let (messages, bytes) = if node == 0 { (0, 0) } else { (1 + slices, 32 + 13 * slices + 8192) };
        assert_eq!(after.network_messages - before.network_messages, messages, "{access:?} at node {node}");
        assert_eq!(after.network_bytes - before.network_bytes, bytes, "{access:?} at node {node}");
    }
}

#[test]
fn many_reads_in_flight_across_nodes_all_arrive_intact() {
    let dir = tempfile::tempdir().unwrap();
    let (mut c, addrs) = cluster(dir.path(), 3, 2);
    let mut rng = SmallRng::seed_from_u64(9);
    let accesses = [Access::IspFlash, Access::HostFlash, Access::HostRemoteHost];
    let mut want = std::collections::HashMap::new();
    let mut submitted = 0;
    let mut finished = 0;
    while finished < 1500 {
        while submitted < 1500 && c.in_flight() < 300 {
            let (origin, node) = (rng.gen_range(0..3), rng.gen_range(0..3));
            let access = accesses[rng.gen_range(0..accesses.len())];
            let addr = addrs[rng.gen_range(0..addrs.len())];
            let id = c.submit(Read { origin, access, node, addr }).unwrap();
            want.insert(id, page(node, &addr));
            submitted += 1;
        }
        let d = c.next_done().expect("reads in flight finish");
        assert!(d.data == want[&d.id], "read {} ({:?}) returned another page", d.id, d.read);
        finished += 1;
    }
    assert!(c.next_done().is_none());
    assert_eq!(c.network().units_waiting(), 0);
    assert_eq!(c.stats().reads, 1500);
    // Addresses past a node's geometry, or a node past the cluster, are refused before anything moves.
    let bad = FlashAddr { chip: 8, ..addrs[0] };
    assert!(c.submit(Read { origin: 0, access: Access::IspFlash, node: 1, addr: bad }).is_err());
    assert!(c.submit(Read { origin: 0, access: Access::IspFlash, node: 3, addr: addrs[0] }).is_err());
}
