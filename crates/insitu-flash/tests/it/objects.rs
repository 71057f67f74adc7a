use std::collections::BTreeMap;

use insitu_flash::raw::RawFlash;
use insitu_flash::{Flash, FlashError, Geometry};

fn geometry() -> Geometry {
    Geometry { channels: 2, chips_per_channel: 2, blocks_per_chip: 1, pages_per_block: 16, page_size: 4096 }
}

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

fn put(flash: &mut Flash, name: &str, data: &[u8]) {
    let txn = flash.create_object(name, "blob", BTreeMap::new(), Some(data.len() as u64)).unwrap();
    for chunk in data.chunks(10_000) {
        flash.append(txn, chunk).unwrap();
    }
    flash.commit(txn).unwrap();
}

fn get(flash: &Flash, name: &str) -> Vec<u8> {
    let size = flash.stat(name).unwrap().size;
    let mut buf = vec![0u8; size as usize];
    flash.read(name, 0, &mut buf).unwrap();
    buf
}

#[test]
fn objects_round_trip_across_restarts_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 4 << 20).unwrap();
    let a = bytes(123_457, 1);
    let b = bytes(4096 * 3, 2);
    put(&mut flash, "a", &a);
    put(&mut flash, "b", &b);
    assert_eq!(get(&flash, "a"), a);
    let mut part = vec![0u8; 10_000];
    flash.read("a", 4000, &mut part).unwrap();
    assert_eq!(part, a[4000..14_000]);
    flash.close().unwrap();
    let mut flash = Flash::open(dir.path()).unwrap();
    assert_eq!(get(&flash, "a"), a);
    assert_eq!(get(&flash, "b"), b);
    flash.delete("a").unwrap();
    std::mem::forget(flash); // crash right after the delete returned
    let flash = Flash::open(dir.path()).unwrap();
    assert!(matches!(flash.stat("a"), Err(FlashError::NotFound(_))));
    assert_eq!(get(&flash, "b"), b);
    assert!(flash.fsck().problems.is_empty());
    assert_eq!(flash.physical_pages("b").unwrap().len(), 3);
}

#[test]
fn an_object_cut_off_before_commit_is_absent_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 4 << 20).unwrap();
    put(&mut flash, "kept", &bytes(50_000, 3));
    let txn = flash.create_object("cut", "blob", BTreeMap::new(), None).unwrap();
    flash.append(txn, &bytes(300_000, 4)).unwrap();
    flash.sync().unwrap(); // its pages and reservations are durable, but there is no commit record
    std::mem::forget(flash);
    let flash = Flash::open(dir.path()).unwrap();
    assert_eq!(flash.recovery().rolled_back, vec!["cut".to_string()]);
    assert!(flash.stat("cut").is_err());
    assert_eq!(get(&flash, "kept"), bytes(50_000, 3));
    let st = flash.stats();
    assert_eq!(st.mapped_pages, st.object_pages, "the rolled-back pages are trimmed");
    assert!(flash.fsck().problems.is_empty());
}

#[test]
fn a_full_device_refuses_with_a_clear_error_and_keeps_earlier_objects() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 1 << 20).unwrap();
    let first = bytes(600_000, 5);
    put(&mut flash, "first", &first);
    let err = flash.create_object("second", "blob", BTreeMap::new(), Some(900_000)).unwrap_err();
    assert!(matches!(err, FlashError::DeviceFull { .. }), "{err}");
    assert!(err.to_string().contains("device full"));
    // Without a size hint the failure comes mid-write; aborting leaves the device as it was.
    let txn = flash.create_object("third", "blob", BTreeMap::new(), None).unwrap();
    let err = flash.append(txn, &bytes(900_000, 6)).unwrap_err();
    assert!(matches!(err, FlashError::DeviceFull { .. }), "{err}");
    flash.abort(txn).unwrap();
    assert_eq!(get(&flash, "first"), first);
    put(&mut flash, "small", &bytes(1000, 7));
    assert!(flash.fsck().problems.is_empty());
}

#[test]
fn names_are_validated_and_unique() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 1 << 20).unwrap();
    for bad in ["", "../etc", "a/b", "nul\0"] {
        assert!(matches!(
            flash.create_object(bad, "blob", BTreeMap::new(), None),
            Err(FlashError::InvalidName { .. })
        ));
    }
    put(&mut flash, "x", b"1");
    assert!(matches!(
        flash.create_object("x", "blob", BTreeMap::new(), None),
        Err(FlashError::AlreadyExists(_))
    ));
}

#[test]
fn the_block_view_cannot_overwrite_objects() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 1 << 20).unwrap();
    put(&mut flash, "obj", &bytes(8192, 8));
    let lpn = flash.stat("obj").unwrap().extents[0].lpn;
    let err = flash.lba_write(lpn, &[0u8; 4096]).unwrap_err();
    assert!(err.to_string().contains("obj"), "{err}");
    let mut buf = vec![0u8; 8192];
    flash.lba_read(lpn, &mut buf).unwrap();
    assert_eq!(buf, bytes(8192, 8), "objects are readable through the block view");
    let free_lba = flash.geometry().logical_pages() - 1;
    flash.lba_write(free_lba, &[7u8; 4096]).unwrap();
    // Raw blocks are not handed to new objects.
    put(&mut flash, "big", &bytes(200_000, 9));
    flash.lba_read(free_lba, &mut buf[..4096]).unwrap();
    assert!(buf[..4096].iter().all(|b| *b == 7));
    assert!(flash.lba_write(flash.geometry().logical_pages(), &[0u8; 4096]).is_err());
    // Setting aside a range of free pages and block-view pages works; one that reaches an object is
    // refused at the object's first page in it.
    flash.set_aside(free_lba - 10, 11).unwrap();
    let e = flash.stat("big").unwrap().extents[0];
    let last = e.lpn + e.pages - 1;
    match flash.set_aside(last - 1, 4) {
        Err(FlashError::LbaOwned { lba, owner }) => assert_eq!((lba, owner.as_str()), (last - 1, "big")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(flash.lba_trim(lpn, 1), Err(FlashError::LbaOwned { lba, .. }) if lba == lpn));
}

#[test]
fn corrupted_image_pages_are_named_by_fsck_and_reads_fail_cleanly() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 1 << 20).unwrap();
    put(&mut flash, "victim", &bytes(20_000, 10));
    let ppn = flash.ftl().map().get(flash.stat("victim").unwrap().extents[0].lpn).unwrap();
    flash.close().unwrap();
    let img = std::fs::OpenOptions::new().write(true).open(dir.path().join("nand.img")).unwrap();
    img.write_all_at(b"XXXX", ppn * 4096 + 17).unwrap();
    let flash = Flash::open(dir.path()).unwrap();
    let report = flash.fsck();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let p = &report.problems[0];
    assert!(p.contains("object \"victim\": 1 damaged page(s)") && p.contains("checksum"), "{p}");
    let mut buf = vec![0u8; 100];
    assert!(matches!(flash.read("victim", 0, &mut buf), Err(FlashError::CorruptPage { .. })));
    // A truncated image: every page past the cut is damaged, and fsck says so in one line an owner.
    drop(flash);
    img.set_len(ppn * 4096 + 4096).unwrap();
    let flash = Flash::open(dir.path()).unwrap();
    let report = flash.fsck();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].starts_with("object \"victim\": 5 damaged page(s); the first:"),
        "{:?}",
        report.problems
    );
}

#[test]
fn corrupted_metadata_is_detected_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 1 << 20).unwrap();
    put(&mut flash, "x", &bytes(5000, 11));
    flash.close().unwrap();
    // Both copies of one: nothing to stand in (one copy alone is survived: see the test below).
    for file in ["superblock", "checkpoint"] {
        let copies = [dir.path().join(file), dir.path().join(format!("{file}.b"))];
        let good = std::fs::read(&copies[0]).unwrap();
        let mut bad = good.clone();
        let i = bad.len() - 3;
        bad[i] ^= 0x5A;
        for p in &copies {
            std::fs::write(p, &bad).unwrap();
        }
        let err = Flash::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains(file) && err.contains("checksum"), "{file}: {err}");
        for p in &copies {
            std::fs::write(p, &good).unwrap();
        }
    }
    assert_eq!(get(&Flash::open(dir.path()).unwrap(), "x"), bytes(5000, 11));
}

#[test]
fn a_damaged_journal_record_with_committed_records_after_it_stops_the_open_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 4 << 20).unwrap();
    put(&mut flash, "first", &bytes(20_000, 5));
    put(&mut flash, "second", &bytes(20_000, 6));
    flash.sync().unwrap();
    std::mem::forget(flash); // a crash: both objects live only in the journal
    let journal = dir.path().join("journal");
    let clean = std::fs::read(&journal).unwrap();
    // Flip a bit a third of the way in: records of "first", then all of "second", follow the damage.
    let mut damaged = clean.clone();
    damaged[clean.len() / 3] ^= 0x04;
    std::fs::write(&journal, &damaged).unwrap();
    let err = Flash::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("journal") && err.contains("is damaged and a valid record follows"), "{err}");
    assert_eq!(std::fs::read(&journal).unwrap(), damaged, "the journal is left as it was found");
    // Put back, both objects are there: the refusal lost nothing.
    std::fs::write(&journal, &clean).unwrap();
    let flash = Flash::open(dir.path()).unwrap();
    assert_eq!(get(&flash, "first"), bytes(20_000, 5));
    assert_eq!(get(&flash, "second"), bytes(20_000, 6));
}

#[test]
fn a_damaged_copy_of_the_superblock_or_checkpoint_is_survived_and_mended() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 4 << 20).unwrap();
    put(&mut flash, "a", &bytes(30_000, 8));
    flash.close().unwrap();
    let flip = |name: &str| {
        let p = dir.path().join(name);
        let mut b = std::fs::read(&p).unwrap();
        let i = b.len() - 3;
        b[i] ^= 0x40;
        std::fs::write(&p, b).unwrap();
    };
    for (damaged, other) in [("checkpoint", "checkpoint.b"), ("superblock.b", "superblock")] {
        flip(damaged);
        let flash = Flash::open(dir.path()).unwrap();
        assert_eq!(get(&flash, "a"), bytes(30_000, 8), "{damaged}");
        let mended = &flash.recovery().mended_copies;
        assert!(
            mended.len() == 1 && mended[0].starts_with(damaged) && mended[0].contains("checksum"),
            "{mended:?}"
        );
        flash.close().unwrap();
        assert_eq!(
            std::fs::read(dir.path().join(damaged)).unwrap(),
            std::fs::read(dir.path().join(other)).unwrap()
        );
        assert!(
            Flash::open(dir.path()).unwrap().recovery().mended_copies.is_empty(),
            "{damaged} was rewritten"
        );
    }
    // A copy a generation behind (a crash between the two writes) is never chosen, and is mended.
    let old = std::fs::read(dir.path().join("checkpoint.b")).unwrap();
    let mut flash = Flash::open(dir.path()).unwrap();
    put(&mut flash, "b", &bytes(20_000, 9));
    flash.close().unwrap();
    std::fs::write(dir.path().join("checkpoint.b"), &old).unwrap();
    let flash = Flash::open(dir.path()).unwrap();
    assert_eq!(get(&flash, "b"), bytes(20_000, 9));
    assert!(flash.recovery().mended_copies[0].contains("an older checkpoint"), "{:?}", flash.recovery());
    flash.close().unwrap();
    // Both copies damaged: the open fails, naming the checkpoint.
    flip("checkpoint");
    flip("checkpoint.b");
    let err = Flash::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("corrupted checkpoint") && err.contains("checksum"), "{err}");
}

#[test]
fn objects_written_side_by_side_share_a_nearly_full_device() {
    // Four objects written at once, a little at a time (a table's parts), fill most of the device: none
    // may take the free space the others need for what it might write next.
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 1 << 20).unwrap();
    let names = ["rows", "rowoff", "key", "keyoff"];
    let data: Vec<Vec<u8>> = (0..4).map(|i| bytes(200_000, 20 + i)).collect();
    let txns: Vec<_> =
        names.iter().map(|n| flash.create_object(n, "table-part", BTreeMap::new(), None).unwrap()).collect();
    for at in (0..200_000).step_by(10_000) {
        for (t, d) in txns.iter().zip(&data) {
            flash.append(*t, &d[at..at + 10_000]).unwrap();
        }
    }
    for t in txns {
        flash.commit(t).unwrap();
    }
    for (n, d) in names.iter().zip(&data) {
        assert_eq!(&get(&flash, n), d, "{n}");
    }
    assert!(flash.fsck().problems.is_empty());
}

/// A device of 256 blocks of 64 KB (12 MB logical): room for many rounds of writes without GC.
fn roomy_flash() -> (tempfile::TempDir, Flash) {
    let dir = tempfile::tempdir().unwrap();
    let geo = Geometry {
        channels: 2,
        chips_per_channel: 2,
        blocks_per_chip: 64,
        pages_per_block: 16,
        page_size: 4096,
    };
    let flash = Flash::format(dir.path(), geo, 12 << 20).unwrap();
    (dir, flash)
}

/// Bytes the NAND image in `dir` takes on the host's disk.
fn image_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir.join("nand.img")).unwrap().blocks() * 512
}

#[test]
fn deleting_erases_the_emptied_blocks_and_the_next_writes_reuse_them_before_fresh_ones() {
    let (dir, mut flash) = roomy_flash();
    let keep = bytes(50_000, 9);
    put(&mut flash, "keep", &keep);
    let image = || image_bytes(dir.path());
    let mut held = Vec::new();
    for round in 0..6u64 {
        let data = bytes(600_000, round);
        put(&mut flash, "churn", &data);
        assert_eq!(get(&flash, "churn"), data);
        held.push(image());
        let erased = flash.stats().nand.blocks_erased;
        flash.delete("churn").unwrap();
        // 600 KB over 64 KB blocks: at least 8 blocks hold nothing else.
        assert!(
            flash.stats().nand.blocks_erased >= erased + 8,
            "round {round}: the delete erased its blocks"
        );
    }
    // The device has 256 blocks of 64 KB: without reuse, each round would take 600 KB of fresh blocks. With
    // it, the image grows by a block or two while the blocks shared with "keep" and the active block settle,
    // then stops.
    assert!(held[2..].iter().all(|h| *h == held[2]) && held[2] - held[0] < 200_000, "{held:?}");
    assert!(flash.stats().wear.max_erase_count >= 5);
    assert_eq!(get(&flash, "keep"), keep);
    assert!(flash.fsck().problems.is_empty());
    // The erases are journaled: a crash right after a delete loses nothing and frees the same blocks.
    put(&mut flash, "churn", &bytes(600_000, 7));
    flash.delete("churn").unwrap();
    let free = flash.stats().free_blocks;
    std::mem::forget(flash);
    let flash = Flash::open(dir.path()).unwrap();
    assert_eq!(flash.stats().free_blocks, free);
    assert_eq!(get(&flash, "keep"), keep);
    assert!(flash.fsck().problems.is_empty());
}

#[test]
fn blocks_the_block_view_overwrote_are_erased_at_the_flush_and_written_again() {
    let (dir, mut flash) = roomy_flash();
    let image = || image_bytes(dir.path());
    let mut held = Vec::new();
    for round in 0..5u64 {
        // 160 pages at LBA 100, the same range each round, then a flush.
        let data = bytes(160 * 4096, round);
        flash.lba_write(100, &data).unwrap();
        flash.sync().unwrap();
        let mut back = vec![0u8; data.len()];
        flash.lba_read(100, &mut back).unwrap();
        assert!(back == data, "round {round}");
        held.push(image());
    }
    // Without the erase at the flush, each round would take 640 KB of fresh blocks. With it, the image
    // holds two copies (a round writes its copy before the flush erases the last one's), then stops.
    assert!(held[2..].iter().all(|h| *h == held[2]) && held[2] <= 2 * held[0] + (128 << 10), "{held:?}");
    // A trim empties the range; the flush erases its blocks.
    let erased = flash.stats().nand.blocks_erased;
    flash.lba_trim(100, 160).unwrap();
    flash.sync().unwrap();
    assert!(flash.stats().nand.blocks_erased >= erased + 8);
    assert!(flash.fsck().problems.is_empty());
}

#[test]
fn long_reads_come_from_the_image_file_with_every_check_of_a_read_in_place() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 4 << 20).unwrap();
    let data = bytes(200_000, 7);
    put(&mut flash, "long", &data);
    // Whole-page runs of 64 KiB (a block of this geometry) are read from the file; the partial pages at
    // the ends, and short runs, through the map: any range gives the object's bytes.
    for (offset, len) in
        [(0usize, 200_000usize), (5_000, 150_000), (4_096, 65_536), (100, 9_000), (199_999, 1)]
    {
        let mut buf = vec![0u8; len];
        flash.read("long", offset as u64, &mut buf).unwrap();
        assert!(buf == data[offset..offset + len], "{offset}+{len}");
    }
    // A range past the object, or past any offset, is refused, not read.
    let mut buf = vec![0u8; 100_000];
    for offset in [150_000, u64::MAX - 10] {
        let err = flash.read("long", offset, &mut buf).unwrap_err();
        assert!(matches!(err, FlashError::ReadPastEnd { .. }), "{err}");
    }
    // A damaged page inside a long run is found by the read that covers it, and by it only.
    let page = 20u64; // object page 20: bytes 81,920..86,016
    let ppn = flash.ftl().map().get(flash.stat("long").unwrap().extents[0].lpn + page).unwrap();
    flash.close().unwrap();
    let img = std::fs::OpenOptions::new().write(true).open(dir.path().join("nand.img")).unwrap();
    img.write_all_at(b"XXXX", ppn * 4096 + 100).unwrap();
    let flash = Flash::open(dir.path()).unwrap();
    let mut buf = vec![0u8; 200_000];
    let err = flash.read("long", 0, &mut buf).unwrap_err();
    assert!(matches!(err, FlashError::CorruptPage { ppn: p, .. } if p == ppn), "{err}");
    let mut buf = vec![0u8; 70_000];
    assert!(matches!(flash.read("long", 20_000, &mut buf), Err(FlashError::CorruptPage { .. })));
    flash.read("long", 90_000, &mut buf).unwrap();
    assert!(buf == data[90_000..160_000]);
}

#[test]
fn ranges_read_in_any_order_give_what_reads_one_by_one_give_and_count_the_same_pages() {
    let dir = tempfile::tempdir().unwrap();
    let mut flash = Flash::format(dir.path(), geometry(), 4 << 20).unwrap();
    let data = bytes(200_000, 3);
    put(&mut flash, "obj", &data);
    // Short ranges inside a page and across two, empty ones, whole pages and a long run, out of order.
    let ranges: Vec<(u64, usize)> = vec![
        (150_000, 16),
        (4_090, 12),
        (0, 0),
        (70_000, 100_000),
        (8_192, 4_096),
        (199_990, 10),
        (3, 5),
        (150_000, 16),
    ];
    let pages = |f: &Flash| f.ftl().nand().stats().pages_read;
    let p0 = pages(&flash);
    let one_by_one: Vec<Vec<u8>> = ranges
        .iter()
        .map(|&(offset, len)| {
            let mut b = vec![0u8; len];
            flash.read("obj", offset, &mut b).unwrap();
            b
        })
        .collect();
    let p1 = pages(&flash);
    let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|&(_, len)| vec![0u8; len]).collect();
    let mut places: Vec<(u64, &mut [u8])> =
        ranges.iter().zip(bufs.iter_mut()).map(|(&(offset, _), b)| (offset, &mut b[..])).collect();
    flash.read_ranges("obj", &mut places).unwrap();
    assert_eq!(pages(&flash) - p1, p1 - p0);
    for ((offset, len), b) in ranges.iter().zip(&bufs) {
        assert!(b[..] == data[*offset as usize..*offset as usize + len], "{offset}+{len}");
    }
    assert_eq!(bufs, one_by_one);
    // A range past the object, or of an object that is not there, is refused.
    let mut b = [0u8; 20];
    let (head, tail) = b.split_at_mut(4);
    let err = flash.read_ranges("obj", &mut [(0, head), (199_990, tail)]).unwrap_err();
    assert!(matches!(err, FlashError::ReadPastEnd { .. }), "{err}");
    let err = flash.read_ranges("nothing", &mut [(0, &mut b[..])]).unwrap_err();
    assert!(matches!(err, FlashError::NotFound(_)), "{err}");
}
