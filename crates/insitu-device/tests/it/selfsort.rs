//! The Self-Sorting SSD firmware end to end, through the command set (in this process and over a socket):
//! records written through the block interface read back in key order, checked against a stable sort of
//! the same records; sort-on-command, queries, secondary indexes, the command block, device memory
//! limits, persistence across a clean and an unclean stop, ActiveSort's merge, and refused requests.

use insitu_device::protocol::block::{self, BlockCommand};
use insitu_device::protocol::{
    ConfigureIndex, DropIndex, FlushIndexes, Fsck, GenerateIndex, IndexConfig, IndexKind, IndexQuery,
    IndexStatus, QueryIndex, ReadLba, ResizeIndex, RunExtent, SetIndexFlags, Statistics, TrimLba, WriteLba,
};
use insitu_device::{transport, Device, DeviceClient, Profile};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{device, Via, BOTH};

const PS: usize = 4096;

/// `n` records of `size` bytes; the key (bytes `off..off + ks`) drawn from a small alphabet so keys repeat.
fn records(n: usize, size: usize, off: usize, ks: usize, seed: u64) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut v = vec![0u8; n * size];
    for (i, r) in v.chunks_mut(size).enumerate() {
        rng.fill(r);
        for b in &mut r[off..off + ks] {
            *b = b'a' + rng.gen_range(0..4);
        }
        // A record's tail names it, so a wrong record cannot pass for a right one.
        let tail = size.saturating_sub(4);
        if size >= off + ks + 4 && tail >= off + ks {
            r[tail..].copy_from_slice(&(i as u32).to_le_bytes()[..size - tail]);
        }
    }
    v
}

/// The records in key order, equal keys in record order.
fn sorted(data: &[u8], size: usize, off: usize, ks: usize) -> Vec<u8> {
    let mut recs: Vec<&[u8]> = data.chunks(size).collect();
    recs.sort_by(|a, b| a[off..off + ks].cmp(&b[off..off + ks]));
    recs.concat()
}

/// Writes `data` from LBA `lba` in whole pages (the last one zero-padded), in pieces of `piece` pages.
fn write(dev: &DeviceClient, lba: u64, data: &[u8], piece: usize) {
    let mut padded = data.to_vec();
    padded.resize(data.len().div_ceil(PS) * PS, 0);
    for (i, chunk) in padded.chunks(piece * PS).enumerate() {
        dev.call(WriteLba { lba: lba + (i * piece) as u64, data: chunk.to_vec() }).unwrap();
    }
}

/// Reads `bytes` bytes from LBA `lba`.
fn read(dev: &DeviceClient, lba: u64, bytes: usize) -> Vec<u8> {
    let mut v = dev.call(ReadLba { lba, blocks: bytes.div_ceil(PS) as u64 }).unwrap();
    v.truncate(bytes);
    v
}

fn tree(id: u32, base: u64, size: u32, off: u32, ks: u32, n: u64, on_write: bool) -> IndexConfig {
    IndexConfig { records: n, sort_on_write: on_write, ..IndexConfig::tree(id, base, size, off, ks) }
}

#[test]
fn records_written_in_any_order_read_back_sorted_and_follow_rewrites() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        // 100-byte records straddle 4 KB pages; keys at offset 3.
        let (n, size, off, ks) = (500usize, 100usize, 3usize, 4usize);
        let data = records(n, size, off, ks, 1);
        dev.call(ConfigureIndex { config: tree(1, 10, size as u32, off as u32, ks as u32, n as u64, true) })
            .unwrap();
        // Pages in reverse order, so records complete only when their second page arrives.
        let mut padded = data.clone();
        padded.resize(data.len().div_ceil(PS) * PS, 0);
        for (i, page) in padded.chunks(PS).enumerate().rev() {
            dev.call(WriteLba { lba: 10 + i as u64, data: page.to_vec() }).unwrap();
        }
        let want = sorted(&data, size, off, ks);
        assert_eq!(read(dev, 10, data.len()), want, "{via:?}");
        // Any page of the range, alone, is the same slice of the sorted records.
        for p in [0usize, 3, 7, 12] {
            let got = dev.call(ReadLba { lba: 10 + p as u64, blocks: 1 }).unwrap();
            let end = ((p + 1) * PS).min(want.len());
            assert_eq!(&got[..end - p * PS], &want[p * PS..end], "page {p} {via:?}");
        }
        // Rewrite page 2 with new keys: the records it touches move.
        let mut data2 = data.clone();
        let fresh = records(n, size, off, ks, 2);
        data2[2 * PS..3 * PS].copy_from_slice(&fresh[2 * PS..3 * PS]);
        dev.call(WriteLba { lba: 12, data: data2[2 * PS..3 * PS].to_vec() }).unwrap();
        assert_eq!(read(dev, 10, data.len()), sorted(&data2, size, off, ks), "after a rewrite {via:?}");
        // Active read off: the range reads as stored.
        dev.call(SetIndexFlags { index: 1, sort_on_write: true, active_read: false }).unwrap();
        assert_eq!(read(dev, 10, data.len()), data2);
        dev.call(SetIndexFlags { index: 1, sort_on_write: true, active_read: true }).unwrap();
        // A trim unindexes the records it cuts; reads in key order are refused until they are back.
        dev.call(TrimLba { lba: 11, blocks: 1 }).unwrap();
        let err = dev.call(ReadLba { lba: 10, blocks: 1 }).unwrap_err().to_string();
        assert!(err.contains("holds") && err.contains("of its 500 records"), "{err}");
        dev.call(WriteLba { lba: 11, data: data2[PS..2 * PS].to_vec() }).unwrap();
        assert_eq!(read(dev, 10, data.len()), sorted(&data2, size, off, ks));
        let report = dev.call(Fsck).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(
            report.notes.iter().any(|n| n.contains("every entry matches its record")),
            "{:?}",
            report.notes
        );
    }
}

/// Records that divide the page: every page of the range starts at a record, so reads are served
/// straight into the reply; the last page ends in zeros; a read that also covers pages outside the range
/// gets them as stored.
#[test]
fn page_aligned_records_read_back_sorted_page_by_page_and_beside_stored_pages() {
    for via in BOTH {
        page_aligned_records_via(via);
    }
}

fn page_aligned_records_via(via: Via) {
    let dir = tempfile::tempdir().unwrap();
    let s = device(dir.path(), via);
    let dev = &s.dev;
    let (n, size, off, ks) = (1000usize, 128usize, 0usize, 10usize);
    let data = records(n, size, off, ks, 11);
    let outside = vec![0xA5u8; 2 * PS];
    dev.call(WriteLba { lba: 8, data: outside.clone() }).unwrap();
    dev.call(ConfigureIndex { config: tree(1, 10, size as u32, off as u32, ks as u32, n as u64, true) })
        .unwrap();
    write(dev, 10, &data, 5);
    let mut want = sorted(&data, size, off, ks);
    want.resize(data.len().div_ceil(PS) * PS, 0);
    let pages = want.len() / PS;
    assert_eq!(read(dev, 10, want.len()), want);
    for p in 0..pages {
        let got = dev.call(ReadLba { lba: 10 + p as u64, blocks: 1 }).unwrap();
        assert_eq!(got, want[p * PS..(p + 1) * PS], "page {p} {via:?}");
    }
    let got = dev.call(ReadLba { lba: 8, blocks: pages as u64 + 3 }).unwrap();
    assert_eq!(got[..2 * PS], outside[..]);
    assert_eq!(got[2 * PS..2 * PS + want.len()], want[..]);
    assert!(got[2 * PS + want.len()..].iter().all(|&b| b == 0), "the unwritten page after the range");
}

/// A scan in key order holds the range in device memory from its first page to its last. Between them,
/// writes elsewhere make the FTL collect garbage, which moves the range's pages (they share blocks with
/// the pages overwritten) and erases and reprograms the blocks they were in: the scan still returns the
/// records, not what now lies where they were.
#[test]
fn a_scan_in_key_order_follows_pages_that_garbage_collection_moves() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        // 100-byte records straddle pages; 24 pages of them.
        let (n, size, off, ks) = (960usize, 100usize, 3usize, 4usize);
        let data = records(n, size, off, ks, 21);
        dev.call(ConfigureIndex { config: tree(1, 0, size as u32, off as u32, ks as u32, n as u64, true) })
            .unwrap();
        let mut padded = data.clone();
        padded.resize(data.len().div_ceil(PS) * PS, 0);
        let pages = padded.len() / PS;
        // Each page of the range beside a page of filler, so they share flash blocks.
        let filler = |round: u8, lba: u64| vec![round ^ (lba as u8); PS];
        for (i, page) in padded.chunks(PS).enumerate() {
            dev.call(WriteLba { lba: i as u64, data: page.to_vec() }).unwrap();
            dev.call(WriteLba { lba: 100 + i as u64, data: filler(0, 100 + i as u64) }).unwrap();
        }
        let want = {
            let mut w = sorted(&data, size, off, ks);
            w.resize(padded.len(), 0);
            w
        };
        let erased = |dev: &DeviceClient| dev.call(Statistics).unwrap().flash_erase_blocks;
        let before = erased(dev);
        assert_eq!(dev.call(ReadLba { lba: 0, blocks: 1 }).unwrap(), want[..PS], "{via:?}");
        // Fill most of the device, then overwrite pieces of it at random, several times over: the
        // collector then has no block to take but partly valid ones, the range's among them.
        let mut rng = SmallRng::seed_from_u64(22);
        let mut last = vec![1u8; 1600];
        for at in (100..1600u64).step_by(32) {
            let data: Vec<u8> = (at..at + 32).flat_map(|l| filler(1, l)).collect();
            dev.call(WriteLba { lba: at, data }).unwrap();
        }
        for i in 0..2000u32 {
            let (at, round) = (rng.gen_range(100..1596u64), (i % 251) as u8);
            let data: Vec<u8> = (at..at + 4).flat_map(|l| filler(round, l)).collect();
            dev.call(WriteLba { lba: at, data }).unwrap();
            last[at as usize..at as usize + 4].fill(round);
        }
        assert!(erased(dev) > before + 128, "the writes erased every block on average {via:?}");
        for p in 1..pages {
            let got = dev.call(ReadLba { lba: p as u64, blocks: 1 }).unwrap();
            assert_eq!(got, want[p * PS..(p + 1) * PS], "page {p} {via:?}");
        }
        let others = read(dev, 100, 1500 * PS);
        for (l, page) in (100..1600u64).zip(others.chunks(PS)) {
            assert_eq!(page, filler(last[l as usize], l), "LBA {l} {via:?}");
        }
    }
}

/// A device whose pages come through a flash controller (BlueDBM's, which cannot hand them over in
/// place) holds the range for a scan in key order as a copy; it reads the same sorted records as a device
/// that leaves them in place.
#[test]
fn a_scan_in_key_order_reads_alike_from_a_copy_and_in_place() {
    let (n, size, off, ks) = (3000usize, 64usize, 5usize, 6usize);
    let data = records(n, size, off, ks, 24);
    let want = sorted(&data, size, off, ks);
    for (profile, name) in [("bluedbm", "a copy"), ("tiny", "in place")] {
        let dir = tempfile::tempdir().unwrap();
        let dev = transport::in_process(
            Device::format(&dir.path().join("d"), 0, Profile::load(profile).unwrap(), 64 << 20).unwrap(),
        );
        let ps = dev.call(IndexStatus).unwrap().page_size as usize;
        dev.call(ConfigureIndex { config: tree(1, 0, size as u32, off as u32, ks as u32, n as u64, true) })
            .unwrap();
        let mut padded = data.clone();
        padded.resize(data.len().div_ceil(ps) * ps, 0);
        dev.call(WriteLba { lba: 0, data: padded.clone() }).unwrap();
        // Page by page: the first read loads the range, the others are served from what it holds.
        let pages = padded.len() / ps;
        let got: Vec<u8> =
            (0..pages as u64).flat_map(|p| dev.call(ReadLba { lba: p, blocks: 1 }).unwrap()).collect();
        assert_eq!(&got[..want.len()], &want[..], "{name}");
        assert!(got[want.len()..].iter().all(|&b| b == 0), "{name}");
        dev.close().unwrap();
    }
}

#[test]
fn sort_on_command_generates_in_chunks_and_refuses_an_empty_range() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        let (n, size) = (300usize, 64usize);
        let data = records(n, size, 0, 10, 3);
        dev.call(ConfigureIndex { config: tree(2, 0, size as u32, 0, 10, n as u64, false) }).unwrap();
        let err = dev.call(GenerateIndex { index: 2, max_records: 100 }).unwrap_err().to_string();
        assert!(err.contains("nothing to generate"), "{err}");
        write(dev, 0, &data, 2);
        let err = dev.call(ReadLba { lba: 0, blocks: 1 }).unwrap_err().to_string();
        assert!(err.contains("run generate"), "{err}");
        let mut steps = Vec::new();
        loop {
            let p = dev.call(GenerateIndex { index: 2, max_records: 128 }).unwrap();
            steps.push(p.done);
            if p.done == p.total {
                break;
            }
        }
        assert_eq!(steps, vec![128, 256, 300]);
        assert_eq!(read(dev, 0, data.len()), sorted(&data, size, 0, 10), "{via:?}");
        let st = dev.call(IndexStatus).unwrap();
        assert_eq!((st.indexes[0].indexed, st.indexes[0].generated), (300, 300));
        assert!(st.indexes[0].memory_bytes >= 2060, "nodes count in device memory");
    }
}

#[test]
fn queries_answer_from_the_index_and_secondary_indexes_use_another_field() {
    let dir = tempfile::tempdir().unwrap();
    let s = device(dir.path(), crate::Via::InProcess);
    let dev = &s.dev;
    let (n, size) = (400usize, 32usize);
    let data = records(n, size, 0, 2, 4);
    dev.call(ConfigureIndex { config: tree(1, 0, size as u32, 0, 2, n as u64, true) }).unwrap();
    dev.call(ConfigureIndex {
        config: IndexConfig { active_read: false, ..tree(2, 0, size as u32, 8, 3, 0, true) },
    })
    .unwrap();
    write(dev, 0, &data, 1);
    let recs: Vec<&[u8]> = data.chunks(size).collect();
    let q = |index: u32, query: IndexQuery, count_only: bool| {
        dev.call(QueryIndex { index, query, skip: 0, limit: u64::MAX, count_only }).unwrap()
    };
    let min_key = recs.iter().map(|r| &r[..2]).min().unwrap();
    let min = q(1, IndexQuery::Min, false);
    assert_eq!(min.count as usize, recs.iter().filter(|r| &r[..2] == min_key).count());
    assert_eq!(min.records, sorted(&data, size, 0, 2)[..min.count as usize * size]);
    let max_key = recs.iter().map(|r| &r[..2]).max().unwrap();
    assert_eq!(
        q(1, IndexQuery::Max, true).count as usize,
        recs.iter().filter(|r| &r[..2] == max_key).count()
    );
    let range = q(1, IndexQuery::Range { lo: b"ab".to_vec(), hi: b"bc".to_vec() }, false);
    let want: Vec<&[u8]> = {
        let mut w: Vec<&[u8]> =
            recs.iter().copied().filter(|r| r[..2] >= b"ab"[..] && r[..2] <= b"bc"[..]).collect();
        w.sort_by(|a, b| a[..2].cmp(&b[..2]));
        w
    };
    assert_eq!(range.count as usize, want.len());
    assert_eq!(range.records, want.concat());
    // Paging through an answer gives the same records.
    let page = dev
        .call(QueryIndex {
            index: 1,
            query: IndexQuery::Range { lo: b"ab".to_vec(), hi: b"bc".to_vec() },
            skip: 5,
            limit: 7,
            count_only: false,
        })
        .unwrap();
    assert_eq!(page.records, want[5..12].concat());
    // The secondary index on bytes 8..11 (reads of the range stay in the primary's order).
    let sel = q(2, IndexQuery::Range { lo: b"abc".to_vec(), hi: b"abc".to_vec() }, true);
    assert_eq!(sel.count as usize, recs.iter().filter(|r| &r[8..11] == b"abc").count());
    assert_eq!(read(dev, 0, data.len()), sorted(&data, size, 0, 2));
    let err = dev.call(QueryIndex { index: 1, query: IndexQuery::Min, skip: 0, limit: 1, count_only: false });
    assert!(err.is_ok());
    let err = dev
        .call(QueryIndex {
            index: 1,
            query: IndexQuery::Range { lo: b"a".to_vec(), hi: b"b".to_vec() },
            skip: 0,
            limit: 1,
            count_only: true,
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("1 bytes, the index's keys 2"), "{err}");
    let err = dev
        .call(QueryIndex { index: 9, query: IndexQuery::Min, skip: 0, limit: 1, count_only: true })
        .unwrap_err();
    assert!(err.to_string().contains("no index 9"), "{err}");
}

#[test]
fn the_command_block_configures_and_the_status_page_reports() {
    let dir = tempfile::tempdir().unwrap();
    let s = device(dir.path(), crate::Via::Socket);
    let dev = &s.dev;
    let st = dev.call(IndexStatus).unwrap();
    let cmd = st.command_lba;
    let block = block::encode(&BlockCommand::Configure(tree(3, 0, 50, 0, 8, 80, true)), PS as u32).unwrap();
    dev.call(WriteLba { lba: cmd, data: block }).unwrap();
    let status = block::decode_status(&dev.call(ReadLba { lba: cmd, blocks: 1 }).unwrap()).unwrap();
    assert!(status.last.ok && status.last.opcode == 1, "{status:?}");
    assert_eq!(status.indexes, vec![(3, 80, 0, false)]);
    let data = records(80, 50, 0, 8, 5);
    write(dev, 0, &data, 1);
    assert_eq!(read(dev, 0, data.len()), sorted(&data, 50, 0, 8));
    // A block with a bad magic is refused, and the status page says so.
    let mut bad = block::encode(&BlockCommand::Flush, PS as u32).unwrap();
    bad[..8].copy_from_slice(b"NOTSORT!");
    let err = dev.call(WriteLba { lba: cmd, data: bad }).unwrap_err().to_string();
    assert!(err.contains("bad magic"), "{err}");
    let status = block::decode_status(&dev.call(ReadLba { lba: cmd, blocks: 1 }).unwrap()).unwrap();
    assert!(!status.last.ok && status.last.message.contains("bad magic"), "{status:?}");
    let mut old = block::encode(&BlockCommand::Flush, PS as u32).unwrap();
    old[8] = 2;
    assert!(dev.call(WriteLba { lba: cmd, data: old }).unwrap_err().to_string().contains("version 2"));
    // The command LBA is one page; nothing past it is the host's.
    let two = vec![0u8; 2 * PS];
    assert!(dev.call(WriteLba { lba: cmd - 1, data: two }).unwrap_err().to_string().contains("command LBA"));
    let past = dev.call(ReadLba { lba: cmd + 1, blocks: 1 }).unwrap_err().to_string();
    assert!(past.contains("outside the device's 1948"), "{past}");
}

#[test]
fn bad_configurations_and_straddling_writes_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = device(dir.path(), crate::Via::InProcess);
    let dev = &s.dev;
    let refuse = |c: IndexConfig, what: &str| {
        let e = dev.call(ConfigureIndex { config: c }).unwrap_err().to_string();
        assert!(e.contains(what), "{what}: {e}");
    };
    refuse(tree(1, 0, 0, 0, 0, 10, true), "at least 1 byte");
    refuse(tree(1, 0, 16, 10, 8, 10, true), "ends past the 16-byte record");
    refuse(tree(1, 0, 16, 0, 99, 10, true), "key size must be");
    refuse(tree(1, 0, 1 << 30, 0, 8, 10, true), "does not fit the device's data LBAs");
    refuse(tree(0, 0, 16, 0, 8, 10, true), "index ids");
    // Runs whose sizes overflow 64 bits, alone or summed, are refused (they wrapped to a small index).
    for (runs, what) in [
        (vec![RunExtent { lba: 100, records: u64::MAX / 50 }], "does not fit the device's data LBAs"),
        (
            vec![RunExtent { lba: 100, records: 1 << 63 }, RunExtent { lba: 200, records: 1 << 63 }],
            "overflow 64 bits",
        ),
    ] {
        let mut c = tree(3, 20, 100, 0, 8, 0, false);
        c.kind = IndexKind::Runs(runs);
        refuse(c, what);
    }
    dev.call(ConfigureIndex { config: tree(1, 4, 100, 0, 8, 100, true) }).unwrap(); // LBAs 4..7
    refuse(tree(2, 6, 100, 0, 8, 100, true), "overlaps index 1");
    refuse(tree(2, 4, 50, 0, 8, 0, true), "share its record size");
    refuse(tree(2, 4, 100, 8, 8, 0, true), "already serves reads");
    dev.call(SetIndexFlags { index: 1, sort_on_write: true, active_read: false }).unwrap();
    let before = read(dev, 0, 10 * PS);
    let err = dev.call(WriteLba { lba: 2, data: vec![7u8; 3 * PS] }).unwrap_err().to_string();
    assert!(err.contains("straddles index 1's range (LBAs 4..7)"), "{err}");
    let err = dev.call(WriteLba { lba: 6, data: vec![7u8; 2 * PS] }).unwrap_err().to_string();
    assert!(err.contains("straddles"), "{err}");
    assert_eq!(read(dev, 0, 10 * PS), before, "a refused write changes nothing");
    let err = dev.call(GenerateIndex { index: 7, max_records: 1 }).unwrap_err().to_string();
    assert!(err.contains("no index 7") && err.contains("configured: 1"), "{err}");
    dev.call(DropIndex { index: 1 }).unwrap();
    dev.call(WriteLba { lba: 2, data: vec![7u8; 3 * PS] }).unwrap();
}

#[test]
fn an_index_that_outgrows_device_memory_fails_clearly_and_the_data_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let text = Profile::load("tiny").unwrap();
    let mut p = text.clone();
    p.device.memory_bytes = 1 << 20;
    // 64 MiB: an image slot (1/32 of the capacity) large enough for the saved index.
    let dev = transport::in_process(Device::format(&dir.path().join("d"), 0, p, 64 << 20).unwrap());
    let (n, size) = (60_000usize, 16usize);
    let mut data = vec![0u8; n * size];
    let mut rng = SmallRng::seed_from_u64(9);
    rng.fill(&mut data[..]);
    dev.call(ConfigureIndex { config: tree(1, 0, size as u32, 0, 8, n as u64, true) }).unwrap();
    let mut padded = data.clone();
    padded.resize(data.len().div_ceil(PS) * PS, 0);
    let mut failed = None;
    for (i, chunk) in padded.chunks(16 * PS).enumerate() {
        if let Err(e) = dev.call(WriteLba { lba: (i * 16) as u64, data: chunk.to_vec() }) {
            failed.get_or_insert(e.to_string());
        }
    }
    let err = failed.expect("the tree outgrows 1 MiB");
    assert!(err.contains("device memory exhausted") && err.contains("stay stored and readable"), "{err}");
    let err = dev.call(ReadLba { lba: 0, blocks: 1 }).unwrap_err().to_string();
    assert!(err.contains("of its 60000 records"), "{err}");
    // The index as far as memory took it loads again at the next open, whole: its tree, built by inserts
    // up to the memory's end, has fuller leaves than a restored tree's two-thirds (it did not load, and a
    // rebuild lost a quarter of its records at every open).
    let indexed = dev.call(IndexStatus).unwrap().indexes[0].indexed;
    assert!(indexed > 10_000 && indexed < n as u64, "{indexed}");
    dev.close().unwrap();
    let dev = transport::in_process(Device::open(&dir.path().join("d")).unwrap());
    let st = dev.call(IndexStatus).unwrap();
    assert_eq!(st.indexes[0].indexed, indexed, "{:?}", st.indexes[0].notes);
    assert!(st.indexes[0].notes.iter().any(|n| n.contains("loaded from flash")), "{:?}", st.indexes[0].notes);
    dev.call(SetIndexFlags { index: 1, sort_on_write: false, active_read: false }).unwrap();
    assert_eq!(read(&dev, 0, data.len()), data, "every record is stored");
    dev.call(DropIndex { index: 1 }).unwrap();
    dev.close().unwrap();
}

/// A write of many records is indexed at once (two threads insert below different children of the
/// root): the index takes the device memory, and counts the work, of inserting them one by one in key
/// order, growing in steps of 64 nodes whenever the tree, with room for one more insert, needs more than
/// it holds. The reference here inserts them so into a tree of its own and follows that rule.
#[test]
fn an_index_takes_the_memory_of_one_by_one_inserts_when_a_write_is_indexed_at_once() {
    use insitu_kernels::btree::{node_bytes, BTree};
    let dir = tempfile::tempdir().unwrap();
    let mut p = Profile::load("tiny").unwrap();
    p.device.memory_bytes = 64 << 20;
    let dev = transport::in_process(Device::format(&dir.path().join("d"), 0, p, 64 << 20).unwrap());
    // 10-byte keys whose first 8 bytes take two values: the batch's order comes from the last two.
    let (n, size, ks) = (40_000usize, 16usize, 10usize);
    let mut data = vec![0u8; n * size];
    SmallRng::seed_from_u64(23).fill(&mut data[..]);
    for r in data.chunks_mut(size) {
        r[0] &= 1;
        r[1..8].fill(0);
    }
    // A first write makes the tree a few levels deep; the second is indexed at once.
    let first = 8_192usize;
    let available = |dev: &DeviceClient| dev.call(IndexStatus).unwrap().memory_available;
    let before = available(&dev);
    let config = tree(1, 0, size as u32, 0, ks as u32, n as u64, true);
    dev.call(ConfigureIndex { config: config.clone() }).unwrap();
    let held0 = before - available(&dev);
    write(&dev, 0, &data[..first * size], first * size / PS);
    write(&dev, (first * size / PS) as u64, &data[first * size..], (n - first) * size / PS + 1);
    let held = before - available(&dev);
    let work = dev.call(Statistics).unwrap().work;

    let fanout = config.fanout as usize;
    let step = 64 * node_bytes(ks, fanout, true);
    let bitmap = (n as u64).div_ceil(64) * 8;
    let (mut t, mut reserved) = (BTree::new(ks, fanout), held0);
    for range in [0..first, first..n] {
        let mut batch: Vec<(&[u8], u64)> =
            range.map(|i| (&data[i * size..i * size + ks], i as u64)).collect();
        batch.sort();
        for (k, id) in batch {
            let need = bitmap + t.footprint_bytes() + t.growth_bound_bytes(1);
            if need > reserved {
                reserved += (need - reserved).max(step);
            }
            t.insert(k, id);
        }
    }
    assert!(t.height() >= 3, "the second write goes below internal children of the root");
    assert_eq!(held, reserved);
    // The work counted is that of inserts one by one in key order.
    let w = t.take_work();
    let counted = |name: &str| work.get(name).copied().unwrap_or(0);
    assert_eq!(
        (counted("index.visit"), counted("index.compare"), counted("index.move_byte")),
        (w.visits, w.compares, w.moved_bytes)
    );
    let st = dev.call(IndexStatus).unwrap();
    assert_eq!(
        (st.indexes[0].height, st.indexes[0].leaves, st.indexes[0].internal_nodes),
        (t.height(), t.nodes().0, t.nodes().1)
    );
    assert_eq!(read(&dev, 0, n * size), sorted(&data, size, 0, ks));
}

#[test]
fn indexes_are_loaded_after_a_clean_stop_and_rebuilt_after_an_unclean_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    let (n, size) = (700usize, 40usize);
    let data = records(n, size, 5, 3, 6);
    {
        let dev =
            transport::in_process(Device::format(&d, 0, Profile::load("tiny").unwrap(), 8 << 20).unwrap());
        dev.call(ConfigureIndex { config: tree(1, 3, size as u32, 5, 3, 0, true) }).unwrap();
        dev.call(ResizeIndex { index: 1, records: n as u64 }).unwrap();
        write(&dev, 3, &data, 3);
        dev.close().unwrap();
    }
    let dev = transport::in_process(Device::open(&d).unwrap());
    let st = dev.call(IndexStatus).unwrap();
    assert!(st.indexes[0].notes[0].contains("loaded from flash"), "{:?}", st.indexes[0].notes);
    assert_eq!(read(&dev, 3, data.len()), sorted(&data, size, 5, 3));
    // Change records after the save, then stop without closing (the flush never happens).
    let mut data2 = data.clone();
    data2[..PS].copy_from_slice(&records(n, size, 5, 3, 7)[..PS]);
    dev.call(WriteLba { lba: 3, data: data2[..PS].to_vec() }).unwrap();
    dev.call(FlushIndexes).unwrap();
    dev.call(WriteLba { lba: 4, data: data[PS..2 * PS].iter().map(|b| b ^ 1).collect() }).unwrap();
    data2[PS..2 * PS].iter_mut().for_each(|b| *b ^= 1);
    drop(dev);
    let dev = transport::in_process(Device::open(&d).unwrap());
    let st = dev.call(IndexStatus).unwrap();
    assert!(st.indexes[0].notes[0].contains("rebuilt from the records"), "{:?}", st.indexes[0].notes);
    assert_eq!(read(&dev, 3, data.len()), sorted(&data2, size, 5, 3));
    let report = dev.call(Fsck).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(report.notes.iter().any(|n| n.contains("rebuilt")), "{:?}", report.notes);
    dev.close().unwrap();
}

/// A clean stop's index is built from its image only when first used: until then its status (entries,
/// height, nodes, device memory) is what the built tree has; a query builds it with the same answer; an
/// index dropped unused gives its memory back; a write into a restored index re-inserts as before.
#[test]
fn a_restored_index_is_built_on_first_use_and_reports_the_same_before() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    let (n, size) = (5000usize, 40usize);
    let data = records(n, size, 5, 3, 8);
    let open = || transport::in_process(Device::open(&d).unwrap());
    let empty_memory;
    {
        let dev =
            transport::in_process(Device::format(&d, 0, Profile::load("tiny").unwrap(), 8 << 20).unwrap());
        empty_memory = dev.call(IndexStatus).unwrap().memory_available;
        for id in [1, 2] {
            let base = if id == 1 { 3 } else { 200 };
            dev.call(ConfigureIndex { config: tree(id, base, size as u32, 5, 3, n as u64, true) }).unwrap();
            write(&dev, base, &data, 7);
        }
        dev.close().unwrap();
    }
    let min = QueryIndex { index: 1, query: IndexQuery::Min, skip: 0, limit: 10, count_only: false };
    let dev = open();
    let before = dev.call(IndexStatus).unwrap();
    assert!(before
        .indexes
        .iter()
        .all(|i| i.indexed == n as u64 && i.complete && i.height == 2 && i.leaves > 1));
    let rows = dev.call(min.clone()).unwrap();
    let after = dev.call(IndexStatus).unwrap();
    assert_eq!(after.indexes, before.indexes, "status before and after the tree is built");
    assert_eq!(after.memory_available, before.memory_available);
    let want = sorted(&data, size, 5, 3);
    assert_eq!(&rows.records[..size], &want[..size]);
    assert_eq!(read(&dev, 3, data.len()), want);
    dev.close().unwrap();
    // Index 2 dropped without being used: its memory comes back; index 1, unused in this run, is saved
    // again by the flush the drop leads to, and reads back sorted.
    let dev = open();
    dev.call(DropIndex { index: 2 }).unwrap();
    let st = dev.call(IndexStatus).unwrap();
    assert_eq!(st.memory_available, empty_memory - st.indexes[0].memory_bytes);
    dev.close().unwrap();
    let dev = open();
    assert!(dev.call(IndexStatus).unwrap().indexes[0].notes[0].contains("loaded from flash"));
    let mut data2 = data.clone();
    data2[..PS].copy_from_slice(&records(n, size, 5, 3, 9)[..PS]);
    dev.call(WriteLba { lba: 3, data: data2[..PS].to_vec() }).unwrap();
    assert_eq!(read(&dev, 3, data.len()), sorted(&data2, size, 5, 3));
    let report = dev.call(Fsck).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    dev.close().unwrap();
}

/// A rebuild indexes the records that are stored, past a gap of unwritten pages in the middle of what it
/// reads at once, with their own keys (fsck compares every entry with its record); writing the gap makes
/// the index whole.
#[test]
fn a_rebuild_indexes_the_records_around_unwritten_pages() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    let (n, size, off, ks) = (700usize, 40usize, 5usize, 3usize);
    let data = records(n, size, off, ks, 8);
    let mut padded = data.clone();
    padded.resize(data.len().div_ceil(PS) * PS, 0);
    let gap = 2..4; // pages not written
    {
        let dev =
            transport::in_process(Device::format(&d, 0, Profile::load("tiny").unwrap(), 8 << 20).unwrap());
        dev.call(ConfigureIndex { config: tree(1, 0, size as u32, off as u32, ks as u32, n as u64, true) })
            .unwrap();
        for (p, page) in padded.chunks(PS).enumerate().filter(|(p, _)| !gap.contains(p)) {
            dev.call(WriteLba { lba: p as u64, data: page.to_vec() }).unwrap();
        }
        // Stops without saving its index: the next open rebuilds it from the records.
    }
    let dev = transport::in_process(Device::open(&d).unwrap());
    let stored =
        (0..n).filter(|r| (r * size / PS..=((r + 1) * size - 1) / PS).all(|p| !gap.contains(&p))).count();
    let st = dev.call(IndexStatus).unwrap();
    assert!(st.indexes[0].notes[0].contains("rebuilt from the records"), "{:?}", st.indexes[0].notes);
    assert_eq!(st.indexes[0].indexed, stored as u64);
    let report = dev.call(Fsck).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    for p in gap.clone() {
        dev.call(WriteLba { lba: p as u64, data: padded[p * PS..(p + 1) * PS].to_vec() }).unwrap();
    }
    assert_eq!(read(&dev, 0, data.len()), sorted(&data, size, off, ks));
    dev.close().unwrap();
}

#[test]
fn activesort_merges_sorted_runs_on_the_fly() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        let (n, size) = (600usize, 100usize);
        let data = records(n, size, 0, 3, 8);
        // Three runs of 200 records, each sorted, each on its own LBA region.
        let mut runs = Vec::new();
        for (i, part) in data.chunks(200 * size).enumerate() {
            let lba = 100 + 10 * i as u64;
            write(dev, lba, &sorted(part, size, 0, 3), 4);
            runs.push(RunExtent { lba, records: 200 });
        }
        let mut c = tree(4, 20, size as u32, 0, 3, 0, false);
        c.kind = IndexKind::Runs(runs);
        let info = dev.call(ConfigureIndex { config: c }).unwrap();
        assert_eq!(info.config.records, 600);
        let want = sorted(&data, size, 0, 3);
        assert_eq!(read(dev, 20, want.len()), want, "{via:?}");
        // Sequential reads in pieces, then one out of order (the merge starts again).
        let mut got = Vec::new();
        for p in 0..want.len().div_ceil(PS) {
            got.extend(dev.call(ReadLba { lba: 20 + p as u64, blocks: 1 }).unwrap());
        }
        got.truncate(want.len());
        assert_eq!(got, want);
        let p5 = dev.call(ReadLba { lba: 25, blocks: 1 }).unwrap();
        assert_eq!(&p5[..], &want[5 * PS..6 * PS]);
    }
}
