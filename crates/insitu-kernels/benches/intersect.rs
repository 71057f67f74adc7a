//! Linear merge vs galloping as the size ratio grows (the rule behind `GALLOP_RATIO`), and the two cases
//! of the benchmark: 10M x 10M with 1% common, 10K x 10M.
//!
//! `cargo bench -p insitu-kernels --bench intersect`

use std::time::Instant;

use insitu_kernels::intersect::{intersect2, intersect_gallop, intersect_linear};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn list(n: usize, seed: u64, universe: u64) -> Vec<u32> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut v: Vec<u32> = (0..n).map(|_| rng.gen_range(0..universe) as u32).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn best(mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut b = f64::MAX;
    let mut r = 0;
    for _ in 0..5 {
        let t = Instant::now();
        r = f();
        b = b.min(t.elapsed().as_secs_f64());
    }
    (b, r)
}

fn read_u32(path: &str) -> Vec<u32> {
    insitu_kernels::le::decode_u32s(&std::fs::read(path).expect("list file"))
}

fn main() {
    // With two file arguments: time the kernel on those lists (for the side-by-side benchmark).
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.len() == 2 {
        let (a, b) = (read_u32(&args[0]), read_u32(&args[1]));
        let (t, n) = best(|| intersect2(&a, &b).len());
        println!("{{\"kernel_s\": {t:.6}, \"common\": {n}}}");
        return;
    }
    let large = list(4_000_000, 7, 1 << 32);
    println!("| ratio | linear ms | gallop ms |");
    println!("|---:|---:|---:|");
    for ratio in [1usize, 2, 4, 8, 16, 32, 64, 256] {
        let small = list(large.len() / ratio, 11 + ratio as u64, 1 << 32);
        let (l, _) = best(|| {
            let mut o = Vec::new();
            intersect_linear(&small, &large, &mut o);
            o.len()
        });
        let (g, _) = best(|| {
            let mut o = Vec::new();
            intersect_gallop(&small, &large, &mut o);
            o.len()
        });
        println!("| {ratio} | {:.2} | {:.2} |", l * 1e3, g * 1e3);
    }
    // The cases: 10M x 10M with 1% common, and 10K x 10M.
    let a = list(10_000_000, 21, 1 << 32);
    let mut b = list(9_900_000, 22, 1 << 32);
    b.extend(a.iter().step_by(100).copied());
    b.sort_unstable();
    b.dedup();
    let (t1, n1) = best(|| intersect2(&a, &b).len());
    let c = list(10_000, 23, 1 << 32);
    let (t2, n2) = best(|| intersect2(&c, &b).len());
    println!("{{\"10Mx10M_s\": {t1:.5}, \"10Mx10M_common\": {n1}, \"10Kx10M_s\": {t2:.6}, \"10Kx10M_common\": {n2}}}");
}
