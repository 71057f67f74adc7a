//! FTL write amplification under uniform random overwrites at several fill levels.
//!
//! A device is filled to F% of its logical capacity through the block view, then pages of that working set
//! are overwritten uniformly at random until 4x the device's capacity has been written by the host. Greedy
//! GC's steady-state WA under uniform traffic grows sharply with fill (theory for greedy with spare factor
//! s: roughly 1 / (2 * s_eff) at high fill); we report the measured value and the erase-count spread.
//!
//! `cargo bench -p insitu-flash --bench write_amplification` (release build).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

use insitu_flash::{Flash, Geometry};

fn main() {
    let geo = Geometry {
        channels: 4,
        chips_per_channel: 2,
        blocks_per_chip: 1,
        pages_per_block: 64,
        page_size: 4096,
    };
    let capacity: u64 = 256 << 20; // 64 Ki pages, 1024 logical blocks
    println!("| fill | host pages written | GC pages written | write amplification | erases | erase count min/mean/max | time |");
    println!("|---:|---:|---:|---:|---:|---|---:|");
    for fill in [0.5, 0.8, 0.9] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut flash = Flash::format(dir.path(), geo, capacity).expect("format");
        let logical = flash.geometry().logical_pages();
        let working = (logical as f64 * fill) as u64;
        let page = vec![0xA5u8; 4096];
        // Fill sequentially in runs of 64 pages.
        let run = vec![0x5Au8; 4096 * 64];
        let mut lba = 0;
        while lba < working {
            let n = (working - lba).min(64);
            flash.lba_write(lba, &run[..n as usize * 4096]).expect("fill");
            lba += n;
        }
        let before = flash.stats();
        let mut rng = SmallRng::seed_from_u64(0x2545F4914F6CDD1D);
        let writes = logical * 4;
        let t0 = Instant::now();
        for _ in 0..writes {
            flash.lba_write(rng.gen_range(0..working), &page).expect("overwrite");
        }
        let secs = t0.elapsed().as_secs_f64();
        let after = flash.stats();
        let host = after.ftl.host_pages_written - before.ftl.host_pages_written;
        let gc = after.ftl.gc_pages_written - before.ftl.gc_pages_written;
        let erases = after.nand.blocks_erased - before.nand.blocks_erased;
        assert!(flash.ftl().check_invariants().is_empty());
        println!(
            "| {:.0}% | {host} | {gc} | {:.3} | {erases} | {}/{:.2}/{} | {secs:.1} s |",
            fill * 100.0,
            (host + gc) as f64 / host as f64,
            after.wear.min_erase_count,
            after.wear.mean_erase_count,
            after.wear.max_erase_count,
        );
    }
}
