//! Argsort of N random u32 keys (value + row index out), `fast` (radix) and `bitonic`.
//!
//! `cargo bench -p insitu-kernels --bench argsort -- [N] [KEYS_OUT]`: prints one JSON line of timings; with
//! KEYS_OUT, also writes the keys (little-endian u32) so peers (numpy, polars, pyarrow) sort the same data.

use std::io::Write;
use std::time::Instant;

use insitu_kernels::sort::{argsort_bitonic, argsort_fast, BitonicConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let n: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1 << 24);
    let mut rng = SmallRng::seed_from_u64(0x9E37_79B9_7F4A_7C15);
    let keys: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
    if let Some(path) = args.get(1) {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create keys file"));
        for k in &keys {
            f.write_all(&k.to_le_bytes()).expect("write keys");
        }
    }
    let mut fast = f64::MAX;
    let mut check = 0u64;
    for _ in 0..5 {
        let t = Instant::now();
        let s = argsort_fast(&keys, 0);
        fast = fast.min(t.elapsed().as_secs_f64());
        check = check.wrapping_add(s.row(n / 2) as u64);
    }
    let t = Instant::now();
    let b = argsort_bitonic(&keys, 0, BitonicConfig::default());
    let bitonic = t.elapsed().as_secs_f64();
    assert_eq!(b, argsort_fast(&keys, 0), "paths disagree");
    println!("{{\"n\": {n}, \"fast_s\": {fast:.4}, \"bitonic_s\": {bitonic:.4}, \"check\": {check}}}");
}
