//! The Self-Sort index: N random 10-byte keys inserted one by one into the B+tree (fanout 128, split in
//! half, §IV-B), then every entry walked in order, and N random ranks looked up.
//!
//! `cargo bench -p insitu-kernels --bench btree -- [N]`: prints one JSON line of timings.

use std::time::Instant;

use insitu_kernels::btree::{BTree, PAPER_FANOUT};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let n: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1 << 22);
    let mut rng = SmallRng::seed_from_u64(0x5e1f_5047);
    let keys: Vec<[u8; 10]> = (0..n).map(|_| rng.gen()).collect();
    let t0 = Instant::now();
    let mut tree = BTree::new(10, PAPER_FANOUT);
    for (i, k) in keys.iter().enumerate() {
        tree.insert(k, i as u64);
    }
    let insert_s = t0.elapsed().as_secs_f64();
    let work = tree.take_work();
    // The same keys in batches of 8,192 (a 1 MiB write of 128-byte records) and of 65,536 (a generate
    // chunk), each sorted first, as the index inserts them.
    let in_batches = |size: usize| {
        let t = Instant::now();
        let mut tree = BTree::new(10, PAPER_FANOUT);
        let mut order: Vec<u32> = Vec::new();
        for (b, chunk) in keys.chunks(size).enumerate() {
            order.clear();
            order.extend(0..chunk.len() as u32);
            order.sort_unstable_by_key(|&i| chunk[i as usize]);
            for &i in &order {
                tree.insert(&chunk[i as usize], (b * size) as u64 + i as u64);
            }
        }
        (t.elapsed().as_secs_f64(), tree)
    };
    let (batched_s, batched) = in_batches(8192);
    let batched_work = batched.take_work();
    let (chunk_s, chunked) = in_batches(65536);
    drop(chunked);
    let t1 = Instant::now();
    let walked = tree.iter_from(0).fold(0u64, |acc, (_, id)| acc.wrapping_add(id));
    let walk_s = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let mut probe = 0u64;
    for _ in 0..n {
        probe = probe.wrapping_add(tree.nth(rng.gen_range(0..n)).map_or(0, |(_, id)| id));
    }
    let nth_s = t2.elapsed().as_secs_f64();
    let (leaves, internals) = tree.nodes();
    println!(
        "{{\"n\": {n}, \"insert_s\": {insert_s:.4}, \"batched_insert_s\": {batched_s:.4}, \"chunk_insert_s\": {chunk_s:.4}, \"walk_s\": {walk_s:.4}, \"random_nth_s\": {nth_s:.4}, \"ns_per_insert\": {:.1}, \"height\": {}, \"leaves\": {leaves}, \"internals\": {internals}, \"footprint_bytes\": {}, \"work\": \"{work:?}\", \"batched_work\": \"{batched_work:?}\", \"batched_nodes\": \"{:?}\", \"check\": {}}}",
        insert_s * 1e9 / n as f64,
        tree.height(),
        tree.footprint_bytes(),
        batched.nodes(),
        walked.wrapping_add(probe) % 7
    );
}
