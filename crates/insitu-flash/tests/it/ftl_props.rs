use std::collections::HashMap;

use insitu_flash::{Flash, Geometry};
use proptest::prelude::*;

fn small_geometry() -> Geometry {
    Geometry { channels: 2, chips_per_channel: 1, blocks_per_chip: 1, pages_per_block: 8, page_size: 512 }
}

#[derive(Debug, Clone)]
enum Op {
    Write {
        lba: u64,
        pages: u64,
        seed: u8,
    },
    Trim {
        lba: u64,
        pages: u64,
    },
    /// Clean restart (close) or crash (the process vanishes: nothing is flushed or checkpointed).
    Restart {
        crash: bool,
    },
}

fn op(logical: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..logical, 1u64..12, any::<u8>()).prop_map(|(lba, pages, seed)| Op::Write { lba, pages, seed }),
        2 => (0..logical, 1u64..6).prop_map(|(lba, pages)| Op::Trim { lba, pages }),
        1 => any::<bool>().prop_map(|crash| Op::Restart { crash }),
    ]
}

fn page(lba: u64, seed: u8, ps: usize) -> Vec<u8> {
    (0..ps).map(|i| (i as u64).wrapping_mul(31).wrapping_add(lba * 7 + seed as u64) as u8).collect()
}

fn check(flash: &Flash, model: &HashMap<u64, Vec<u8>>, logical: u64) -> Result<(), TestCaseError> {
    let ps = flash.page_size() as usize;
    let problems = flash.ftl().check_invariants();
    prop_assert!(problems.is_empty(), "FTL invariants: {problems:?}");
    prop_assert_eq!(flash.ftl().map().mapped(), model.len() as u64);
    let mut buf = vec![0u8; ps];
    for lba in 0..logical {
        flash.lba_read(lba, &mut buf).unwrap();
        match model.get(&lba) {
            Some(want) => prop_assert_eq!(&buf, want, "lba {}", lba),
            None => prop_assert!(buf.iter().all(|b| *b == 0), "trimmed lba {} reads non-zero", lba),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every logical page maps to exactly one valid physical page and reads return the last write, through
    /// overwrites, trims, garbage collection, clean restarts and crashes.
    #[test]
    fn ftl_reads_return_the_last_write(ops in proptest::collection::vec(op(96), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let mut flash = Flash::format(dir.path(), small_geometry(), 96 * 512).unwrap();
        let logical = flash.geometry().logical_pages();
        let ps = flash.page_size() as usize;
        let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
        for op in ops {
            match op {
                Op::Write { lba, pages, seed } => {
                    let pages = pages.min(logical - lba);
                    let mut data = Vec::new();
                    for l in lba..lba + pages {
                        data.extend(page(l, seed, ps));
                    }
                    flash.lba_write(lba, &data).unwrap();
                    for l in lba..lba + pages {
                        model.insert(l, page(l, seed, ps));
                    }
                }
                Op::Trim { lba, pages } => {
                    let pages = pages.min(logical - lba);
                    flash.lba_trim(lba, pages).unwrap();
                    for l in lba..lba + pages {
                        model.remove(&l);
                    }
                }
                Op::Restart { crash } => {
                    if crash {
                        // Leak the handles as a killed process would: buffers are not flushed by us.
                        std::mem::forget(flash);
                    } else {
                        flash.close().unwrap();
                    }
                    flash = Flash::open(dir.path()).unwrap();
                }
            }
            check(&flash, &model, logical)?;
        }
        let report = flash.fsck();
        prop_assert!(report.problems.is_empty(), "fsck: {:?}", report.problems);
    }
}

#[test]
fn garbage_collection_runs_and_write_amplification_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), small_geometry(), 64 * 512).unwrap();
    let logical = flash.geometry().logical_pages();
    let ps = flash.page_size() as usize;
    let mut x = 12345u64;
    for round in 0..4000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let lba = (x >> 33) % logical;
        flash.lba_write(lba, &page(lba, round as u8, ps)).unwrap();
    }
    let st = flash.stats();
    assert!(st.ftl.gc_runs > 0 && st.ftl.blocks_reclaimed > 0, "{st:?}");
    assert!(st.write_amplification > 1.0, "{st:?}");
    assert!(st.wear.max_erase_count >= 1);
    assert!(flash.ftl().check_invariants().is_empty());
    assert!(flash.fsck().problems.is_empty());
}

/// A page read (and so checked) once, then changed behind the array's lock, is checked again when garbage
/// collection would move it: it stays where it is, its block set aside, so it still fails its checksum when
/// read and fsck names it (moved, it would have been programmed again under a fresh checksum, and no read or
/// fsck could tell). Writes to other pages go on.
#[test]
fn garbage_collection_checks_the_pages_it_moves_again_and_leaves_a_damaged_one() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), small_geometry(), 64 * 512).unwrap();
    let logical = flash.geometry().logical_pages();
    let ps = flash.page_size() as usize;
    flash.lba_write(0, &page(0, 1, ps)).unwrap();
    let mut buf = vec![0u8; ps];
    flash.lba_read(0, &mut buf).unwrap();
    let ppn = flash.lba_locations(0, 1).unwrap()[0].unwrap();
    let image = std::fs::OpenOptions::new().write(true).open(dir.path().join("nand.img")).unwrap();
    image.write_all_at(&[buf[100] ^ 0xff], ppn * ps as u64 + 100).unwrap();
    let mut x = 777u64;
    let mut model = HashMap::new();
    for round in 0..4000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let lba = 1 + (x >> 33) % (logical - 1);
        let data = page(lba, round as u8, ps);
        flash.lba_write(lba, &data).unwrap();
        model.insert(lba, data);
    }
    let st = flash.stats();
    assert!(st.ftl.gc_runs > 0 && st.ftl.blocks_set_aside > 0, "{st:?}");
    assert_eq!(flash.lba_locations(0, 1).unwrap()[0], Some(ppn), "the damaged page did not move");
    let e = flash.lba_read(0, &mut buf).unwrap_err().to_string();
    assert!(e.contains("checksum"), "{e}");
    for (lba, data) in &model {
        flash.lba_read(*lba, &mut buf).unwrap();
        assert_eq!(&buf, data, "lba {lba}");
    }
    let problems = flash.fsck().problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("checksum"), "{problems:?}");
    // Once the damaged page is written again, its block is a victim like any other.
    flash.lba_write(0, &page(0, 2, ps)).unwrap();
    for round in 0..2000u64 {
        let lba = 1 + round % (logical - 1);
        flash.lba_write(lba, &page(lba, 9, ps)).unwrap();
    }
    flash.lba_read(0, &mut buf).unwrap();
    assert_eq!(buf, page(0, 2, ps));
    assert!(flash.fsck().problems.is_empty());
}
