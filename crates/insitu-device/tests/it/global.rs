//! Reads across an appliance's global address space (BlueDBM §3, §6.4), done by the devices themselves
//! over their fabric, in this process and over sockets: every page comes back as written, the modeled
//! time is the one the single simulation of all nodes ([`Cluster`]) gets for the same reads, and bad
//! requests are refused by name with nothing changed.

use insitu_device::cluster::{Access, Cluster, ClusterConfig, Read};
use insitu_device::network::Topology;
use insitu_device::protocol::{
    page_heads, GlobalPage, GlobalRead, GlobalReadReply, RawIdentify, RawRead, RawWrite,
};
use insitu_device::rawflash::FlashAddr;
use insitu_device::{Device, DeviceError, Profile};
use insitu_flash::nand::Nand;
use insitu_flash::raw::head_len;
use insitu_flash::Geometry;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{joined, Served, BOTH};

const NODES: u32 = 3;
/// Pages programmed on every chip of every node.
const PAGES: u32 = 2;

/// Page `a` of `node`: bytes from a seed, with zeros after some point on a third of the pages (a page's
/// zero tail does not travel, and must come back), and all zeros on one page of each bus.
fn page(node: u32, a: &FlashAddr) -> Vec<u8> {
    let seed =
        node as u64 * 7919 + a.card as u64 * 131 + a.bus as u64 * 17 + a.chip as u64 * 5 + a.page as u64;
    let end = match (a.chip + a.page) % 3 {
        _ if a.chip == 6 && a.page == 1 => 0,
        0 => seed * 37 % 8192,
        _ => 8192,
    };
    (0..8192u64).map(|i| if i < end { (i.wrapping_mul(seed | 1) >> 3) as u8 | 1 } else { 0 }).collect()
}

/// The pages of a reply, whole: each page's bytes, then its zeros.
fn whole(r: &GlobalReadReply) -> Vec<u8> {
    let pages = page_heads(&r.heads, &r.data, 8192).unwrap();
    assert_eq!(pages.len() as u64, r.pages);
    pages.iter().flat_map(|p| p.iter().copied().chain(std::iter::repeat_n(0, 8192 - p.len()))).collect()
}

fn spare(node: u32, a: &FlashAddr) -> u64 {
    page(node, a)[..8].iter().fold(node as u64, |s, b| s << 8 | *b as u64)
}

fn addrs() -> Vec<FlashAddr> {
    let mut v = Vec::new();
    for card in 0..2 {
        for bus in 0..8 {
            for chip in 0..8 {
                for page in 0..PAGES {
                    v.push(FlashAddr { card, bus, chip, block: 0, page });
                }
            }
        }
    }
    v
}

fn topology() -> Topology {
    Topology::line(NODES, 1, 8).unwrap()
}

/// `NODES` bluedbm devices, their raw partitions programmed with `addrs()`, joined `via`.
fn appliance(dir: &std::path::Path, via: crate::Via) -> Vec<Served> {
    let dirs: Vec<_> = (0..NODES).map(|n| dir.join(format!("dev{n}"))).collect();
    for (n, d) in dirs.iter().enumerate() {
        let dev = Device::format(d, n as u32, Profile::load("bluedbm").unwrap(), 256 << 20).unwrap();
        let client = insitu_device::transport::in_process(dev);
        let pages: Vec<_> = addrs().into_iter().map(|a| (a, spare(n as u32, &a))).collect();
        let data = addrs().iter().flat_map(|a| page(n as u32, a)).collect();
        client.call(RawWrite { pages, data }).unwrap();
        client.close().unwrap();
    }
    joined(dir, &dirs, via)
}

/// What one simulation of all nodes gives for `reads` submitted at once from node 0: the time from the
/// submission to the last byte.
fn cluster_time(dir: &std::path::Path, blocks_per_chip: u64, access: Access, reads: &[GlobalPage]) -> u64 {
    cluster_time_missing(dir, blocks_per_chip, access, reads, &[])
}

/// [`cluster_time`] with the reads at `misses` through the remote host's flash (H-RH-F) instead.
fn cluster_time_missing(
    dir: &std::path::Path,
    blocks_per_chip: u64,
    access: Access,
    reads: &[GlobalPage],
    misses: &[u32],
) -> u64 {
    let profile = Profile::load("bluedbm").unwrap();
    let geo = Geometry { blocks_per_chip, ..profile.base_geometry() };
    let media = (0..NODES)
        .map(|n| {
            let d = dir.join(format!("sim{n}"));
            std::fs::create_dir_all(&d).unwrap();
            Nand::open(&d, geo).unwrap()
        })
        .collect();
    let mut c = Cluster::new(ClusterConfig::from_profile(&profile).unwrap(), &topology(), media).unwrap();
    for n in 0..NODES {
        for a in addrs() {
            c.write(n, a, 0, &page(n, &a)).unwrap();
        }
    }
    if access == Access::HostRemoteDram {
        for n in 0..NODES {
            for a in addrs() {
                c.put_dram(n, a, page(n, &a));
            }
        }
    }
    let start = c.now();
    for (i, p) in reads.iter().enumerate() {
        let access = if misses.contains(&(i as u32)) { Access::HostRemoteHost } else { access };
        c.submit(Read { origin: 0, access, node: p.node, addr: p.addr }).unwrap();
    }
    let mut last = start;
    while let Some(d) = c.next_done() {
        assert!(d.data == page(d.read.node, &d.read.addr));
        last = last.max(d.done_ps);
    }
    last - start
}

#[test]
fn global_reads_return_every_page_at_the_time_the_whole_cluster_simulation_gives() {
    let mut rng = SmallRng::seed_from_u64(4);
    let all = addrs();
    // More reads than a card has tags, from every node, some of the same page.
    let reads: Vec<GlobalPage> = (0..400)
        .map(|_| GlobalPage { node: rng.gen_range(0..NODES), addr: all[rng.gen_range(0..all.len())] })
        .collect();
    let want: Vec<u8> = reads.iter().flat_map(|p| page(p.node, &p.addr)).collect();
    let heads: Vec<u32> = reads.iter().map(|p| head_len(&page(p.node, &p.addr)) as u32).collect();
    assert!(heads.contains(&0) && heads.iter().any(|&h| h > 0 && h < 8192), "pages with zero tails");
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let nodes = appliance(dir.path(), via);
        let blocks = nodes[0].dev.call(RawIdentify).unwrap().blocks_per_chip;
        for access in [Access::IspFlash, Access::HostFlash] {
            let req = GlobalRead { access, topology: topology(), pages: reads.clone(), misses: vec![] };
            let got = nodes[0].dev.call(req).unwrap();
            assert!(whole(&got) == want, "{via:?} {access:?}: the pages differ from those written");
            assert_eq!(got.heads, heads, "{via:?} {access:?}: each page travels without its zero tail");
            assert_eq!(got.pages, 400);
            assert!(got.spares.iter().zip(&reads).all(|(s, p)| *s == spare(p.node, &p.addr)));
            assert_eq!(got.local_pages, reads.iter().filter(|p| p.node == 0).count() as u64);
            let sim = cluster_time(dir.path(), blocks, access, &reads);
            assert_eq!(
                got.modeled_ps, sim,
                "{via:?} {access:?}: the devices and the one simulation disagree"
            );
            // Requests and answers both cross the network, a node 2 page over 2 hops each way.
            let hops: u64 = reads.iter().map(|p| 2 * p.node as u64).sum();
            assert_eq!(got.hops, hops);
            assert_eq!(got.pcie_up_bytes, if access == Access::HostFlash { want.len() as u64 } else { 0 });
        }
        // Through the pages' hosts (H-RH-F, H-D); the reader's own pages from its flash or its memory.
        let own = reads.iter().filter(|p| p.node == 0).count() as u64 * 8192;
        for access in [Access::HostRemoteHost, Access::HostRemoteDram] {
            let req = GlobalRead { access, topology: topology(), pages: reads.clone(), misses: vec![] };
            let got = nodes[0].dev.call(req).unwrap();
            assert!(whole(&got) == want, "{via:?} {access:?}: the pages differ from those written");
            assert_eq!(got.heads, heads, "{via:?} {access:?}: each page travels without its zero tail");
            assert!(got.spares.iter().zip(&reads).all(|(s, p)| *s == spare(p.node, &p.addr)));
            let sim = cluster_time(dir.path(), blocks, access, &reads);
            assert_eq!(
                got.modeled_ps, sim,
                "{via:?} {access:?}: the devices and the one simulation disagree"
            );
            let dram = access == Access::HostRemoteDram;
            assert_eq!(got.pcie_up_bytes, want.len() as u64 - if dram { own } else { 0 });
        }
        // DRAM with a third of the pages missing it, read from their hosts' flash (own ones too).
        let misses: Vec<u32> = (0..reads.len() as u32).filter(|i| i % 3 == 1).collect();
        let req = GlobalRead {
            access: Access::HostRemoteDram,
            topology: topology(),
            pages: reads.clone(),
            misses: misses.clone(),
        };
        let got = nodes[0].dev.call(req).unwrap();
        assert!(whole(&got) == want, "{via:?}: DRAM with misses read other pages");
        let sim = cluster_time_missing(dir.path(), blocks, Access::HostRemoteDram, &reads, &misses) as f64;
        // Within 1%: the remote device takes its host's links in the order of the interrupts, then the
        // pages read from flash, where the one simulation interleaves them all in time.
        let ratio = got.modeled_ps as f64 / sim;
        assert!(
            (ratio - 1.0).abs() < 0.01,
            "{via:?}: DRAM with misses: {} ps against {sim} ps",
            got.modeled_ps
        );
        // A batch as large as the file system's (4096 pages): H-D still to the picosecond; H-RH-F within
        // 1%, as the remote device takes every descriptor over its PCIe link before the pages' slices,
        // where the one simulation takes them in time order.
        if matches!(via, crate::Via::InProcess) {
            let big: Vec<GlobalPage> = (0..4096)
                .map(|_| GlobalPage { node: rng.gen_range(1..NODES), addr: all[rng.gen_range(0..all.len())] })
                .collect();
            for access in [Access::HostRemoteHost, Access::HostRemoteDram] {
                let req = GlobalRead { access, topology: topology(), pages: big.clone(), misses: vec![] };
                let got = nodes[0].dev.call(req).unwrap().modeled_ps as f64;
                let sim = cluster_time(dir.path(), blocks, access, &big) as f64;
                let tolerance = if access == Access::HostRemoteDram { 0.0 } else { 0.01 };
                assert!((got / sim - 1.0).abs() <= tolerance, "{access:?}: {got} ps against {sim} ps");
            }
        }
        // One page each way, and this node's own pages from its host's memory: no PCIe, no time.
        let one = |access, node| {
            let p = GlobalPage { node, addr: all[3] };
            let got = nodes[0]
                .dev
                .call(GlobalRead { access, topology: topology(), pages: vec![p], misses: vec![] })
                .unwrap();
            assert!(whole(&got) == page(node, &all[3]));
            got
        };
        let (isp, hf, rh, hd) = (
            one(Access::IspFlash, 2).modeled_ps,
            one(Access::HostFlash, 2).modeled_ps,
            one(Access::HostRemoteHost, 2).modeled_ps,
            one(Access::HostRemoteDram, 2).modeled_ps,
        );
        assert!(isp < hf && hf < rh && hd < rh, "ISP-F {isp} < H-F {hf} < H-RH-F {rh}; H-D {hd} < H-RH-F");
        let own = one(Access::HostRemoteDram, 0);
        assert_eq!((own.modeled_ps, own.pcie_up_bytes, own.pcie_down_bytes), (0, 0, 0));
        // A remote node reading the first node's pages at the same time as the first reads its pages.
        std::thread::scope(|s| {
            let one = |origin: usize, node: u32| {
                let nodes = &nodes;
                let pages = all.iter().map(|a| GlobalPage { node, addr: *a }).collect();
                let req =
                    GlobalRead { access: Access::IspFlash, topology: topology(), pages, misses: vec![] };
                let want: Vec<u8> = all.iter().flat_map(|a| page(node, a)).collect();
                move || assert!(whole(&nodes[origin].dev.call(req).unwrap()) == want)
            };
            s.spawn(one(0, 2));
            s.spawn(one(2, 0));
        });
    }
}

#[test]
fn bad_global_reads_are_refused_by_name_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = appliance(dir.path(), crate::Via::InProcess);
    let a = addrs()[5];
    let read = |access, node, addr| GlobalRead {
        access,
        topology: topology(),
        pages: vec![GlobalPage { node, addr }],
        misses: vec![],
    };
    let err = |r: GlobalRead| nodes[1].dev.call(r).unwrap_err();
    assert!(
        matches!(err(read(Access::IspFlash, 3, a)), DeviceError::StorageNetwork(m) if m.contains("node 3"))
    );
    // Misses are pages not in a host's memory: only H-D has any, and only of its own pages.
    let misses = |access, misses| GlobalRead { misses, ..read(access, 2, a) };
    let e = err(misses(Access::IspFlash, vec![0]));
    assert!(matches!(&e, DeviceError::StorageNetwork(m) if m.contains("misses")), "{e}");
    let e = err(misses(Access::HostRemoteDram, vec![1]));
    assert!(matches!(&e, DeviceError::StorageNetwork(m) if m.contains("miss 1")), "{e}");
    let past = FlashAddr { chip: 8, ..a };
    assert!(matches!(err(read(Access::IspFlash, 2, past)), DeviceError::RawFlash(_)));
    let erased = FlashAddr { page: PAGES, ..a };
    assert!(matches!(err(read(Access::IspFlash, 0, erased)), DeviceError::RawFlash(_)));
    // A topology smaller than the appliance, with this device outside it.
    let small = GlobalRead {
        access: Access::IspFlash,
        topology: Topology::line(1, 1, 8).unwrap(),
        pages: vec![],
        misses: vec![],
    };
    assert!(matches!(nodes[1].dev.call(small).unwrap_err(), DeviceError::StorageNetwork(_)));
    // Everything still reads back.
    for n in 0..NODES {
        let got = nodes[n as usize].dev.call(RawRead { addrs: addrs(), recheck: false }).unwrap();
        let want: Vec<u8> = addrs().iter().flat_map(|a| page(n, a)).collect();
        assert!(got[..want.len()] == want[..]);
    }
    assert!(whole(&nodes[1].dev.call(read(Access::IspFlash, 0, a)).unwrap()) == page(0, &a));
}
