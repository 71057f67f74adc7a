//! The storage network simulation (BlueDBM §3.2) against what must hold of it: latency linear in hops,
//! one stream at the link's payload rate, FIFO order per (endpoint, destination), nothing lost under
//! saturation, back-pressure reaching the sender, determinism, and end-to-end flow control keeping a
//! stalled receiver from blocking other traffic.

use insitu_device::network::{NetConfig, NetError, Network, Topology};
use insitu_device::Profile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn cfg() -> NetConfig {
    NetConfig::from_profile(&Profile::load("bluedbm").unwrap()).unwrap()
}

#[test]
fn latency_is_linear_in_hops() {
    let c = cfg();
    for hops in 1..=7u32 {
        let mut net = Network::new(&Topology::line(hops + 1, 1, 8).unwrap(), c.clone());
        net.send(0, 0, hops, vec![1; 16]).unwrap();
        net.run();
        let d = net.receive(hops, 0).unwrap();
        let flits = c.flits(16) as f64;
        let want = hops as u64 * c.hop_latency_ps + (flits * c.flit_ps).round() as u64;
        assert_eq!((d.hops, d.delivered_ps), (hops, want), "{hops} hops");
    }
}

#[test]
fn one_stream_runs_at_the_links_payload_rate_over_any_hops() {
    let c = cfg();
    let bw = Profile::load("bluedbm").unwrap().network.storage.unwrap().payload_bw();
    for hops in [1u32, 3, 6] {
        let mut net = Network::new(&Topology::line(hops + 1, 1, 8).unwrap(), c.clone());
        let (pages, page) = (2000usize, 8192usize);
        let mut sent = 0;
        while sent < pages {
            match net.send(0, 0, hops, vec![(sent % 251) as u8; page]) {
                Ok(()) => sent += 1,
                Err(NetError::Full { .. }) => {
                    let t = net.next_event().unwrap();
                    net.run_until(t);
                }
                Err(e) => panic!("{e}"),
            }
        }
        let end = net.run();
        let mut got = 0;
        while let Some(d) = net.receive(hops, 0) {
            assert_eq!(d.data, vec![(got % 251) as u8; page], "FIFO, intact");
            got += 1;
        }
        assert_eq!(got, pages);
        let rate = (pages * page) as f64 / (end as f64 * 1e-12);
        assert!((rate / bw - 1.0).abs() < 0.01, "{hops} hops: {rate} vs {bw}");
    }
}

/// Random traffic between every node of a mesh on every endpoint: (src, ep, dst, data) in send order.
fn random_traffic(
    net: &mut Network,
    nodes: u32,
    seed: u64,
    messages: usize,
) -> Vec<(u32, u32, u32, Vec<u8>)> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut sent = Vec::new();
    while sent.len() < messages {
        let (src, dst, ep) = (rng.gen_range(0..nodes), rng.gen_range(0..nodes), rng.gen_range(0..4));
        let len = rng.gen_range(0..3000);
        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        match net.send(src, ep, dst, data.clone()) {
            Ok(()) => sent.push((src, ep, dst, data)),
            Err(NetError::Full { .. }) => {
                if rng.gen_bool(0.5) {
                    let Some(t) = net.next_event() else {
                        panic!("deadlock: {} units waiting and nothing left to happen", net.units_waiting());
                    };
                    net.run_until(t);
                }
            }
            Err(e) => panic!("{e}"),
        }
        if rng.gen_bool(0.05) {
            let t = net.now() + rng.gen_range(0..2_000_000);
            net.run_until(t);
        }
    }
    sent
}

#[test]
fn every_message_arrives_whole_in_fifo_order_per_endpoint_and_destination() {
    let nodes = 9;
    let mut net = Network::new(&Topology::mesh(nodes, 2, 8).unwrap(), cfg());
    let sent = random_traffic(&mut net, nodes, 1, 3000);
    net.run();
    assert_eq!((net.in_flight(), net.units_waiting()), (0, 0));
    let mut got = Vec::new();
    while let Some(d) = net.receive_any() {
        assert!(d.delivered_ps >= d.sent_ps + d.hops as u64 * cfg().hop_latency_ps);
        got.push((d.src, d.ep, d.dst, d.data));
    }
    assert_eq!(got.len(), sent.len());
    for src in 0..nodes {
        for ep in 0..4 {
            for dst in 0..nodes {
                let key = |m: &&(u32, u32, u32, Vec<u8>)| m.0 == src && m.1 == ep && m.2 == dst;
                let a: Vec<_> = sent.iter().filter(key).collect();
                let b: Vec<_> = got.iter().filter(key).collect();
                assert_eq!(a, b, "{src} -> {dst} on endpoint {ep}");
            }
        }
    }
}

#[test]
fn the_same_traffic_gives_the_same_times() {
    let run = || {
        let mut net = Network::new(&Topology::ring(6, 2, 8).unwrap(), cfg());
        random_traffic(&mut net, 6, 7, 1500);
        net.run();
        std::iter::from_fn(|| net.receive_any()).map(|d| (d.seq, d.delivered_ps)).collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn a_stalled_receiver_back_pressures_the_sender_and_loses_nothing() {
    let mut net = Network::new(&Topology::line(3, 1, 8).unwrap(), cfg());
    net.pause(2, 0, true);
    let mut sent = 0u32;
    let mut full = false;
    for _ in 0..10_000 {
        match net.send(0, 0, 2, sent.to_le_bytes().repeat(256)) {
            Ok(()) => sent += 1,
            Err(NetError::Full { node: 0, ep: 0 }) => {
                full = true;
                match net.next_event() {
                    Some(t) => net.run_until(t),
                    None => break,
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(full, "the sender must feel the stalled receiver");
    net.run();
    assert!(net.in_flight() > 0 && net.receive(2, 0).is_none(), "nothing delivered while paused");
    net.pause(2, 0, false);
    net.run();
    let got: Vec<u32> = std::iter::from_fn(|| net.receive(2, 0))
        .map(|d| u32::from_le_bytes(d.data[..4].try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..sent).collect::<Vec<_>>());
}

#[test]
fn end_to_end_flow_control_keeps_a_stalled_endpoint_from_blocking_the_links() {
    // Endpoint 0 of node 2 stops; endpoint 1 shares the same single cable path 0 -> 1 -> 2.
    let stalled_first = |end_to_end: u64| {
        let mut c = cfg();
        c.endpoints = 2;
        c.end_to_end = end_to_end;
        let mut net = Network::new(&Topology::line(3, 1, 8).unwrap(), c);
        net.pause(2, 0, true);
        for i in 0..400u32 {
            let _ = net.send(0, 0, 2, vec![0; 2048]);
            net.run_until(net.now() + 2_000_000);
            let _ = net.send(0, 1, 2, i.to_le_bytes().to_vec());
        }
        net.run();
        std::iter::from_fn(|| net.receive(2, 1)).count()
    };
    assert_eq!(stalled_first(0b01), 400, "with end-to-end control the other endpoint flows");
    assert!(stalled_first(0) < 50, "without it, the stalled endpoint's packets fill the links");
}

#[test]
fn eight_ports_move_eight_links_worth_in_each_direction() {
    let c = cfg();
    let bw = Profile::load("bluedbm").unwrap().network.storage.unwrap().payload_bw();
    let pairs: Vec<(u32, u32)> = (1..=8).map(|n| (0, n)).collect();
    let mut net = Network::new(&Topology::from_pairs(9, 8, &pairs).unwrap(), c);
    let (pages, page) = (300usize, 8192usize);
    let mut queued: Vec<(u32, u32)> = Vec::new();
    for _ in 0..pages {
        for n in 1..=8 {
            queued.push((0, n));
            queued.push((n, 0));
        }
    }
    let mut i = 0;
    while i < queued.len() {
        let (s, d) = queued[i];
        // One endpoint per neighbour, so that one full send queue does not hold up the others.
        match net.send(s, s.max(d) - 1, d, vec![0; page]) {
            Ok(()) => i += 1,
            Err(NetError::Full { .. }) => {
                let t = net.next_event().unwrap();
                net.run_until(t);
            }
            Err(e) => panic!("{e}"),
        }
    }
    let end = net.run() as f64 * 1e-12;
    let each_way = (8 * pages * page) as f64 / end;
    assert!(each_way > 7.5 * bw && each_way < 8.0 * bw * 1.001, "{each_way} vs 8 x {bw}");
}
