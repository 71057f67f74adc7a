//! List intersection: placements agree with a naive intersection, partitions, sessions, bad input.

use insitu_device::Profile;
use insitu_host::intersect::lists::{entries, gen_lists, put_list};
use insitu_host::intersect::operator::{intersect, IntersectPlacement, Output};
use insitu_host::intersect::session::Session;
use insitu_host::{Array, OpenOptions};
use insitu_kernels::intersect::intersect_naive;

fn array(dir: &std::path::Path, profile: &str, devices: u32) -> Array {
    Array::init(&dir.join("a"), devices, Profile::load(profile).unwrap(), Some(256 << 20), None).unwrap();
    Array::open(&dir.join("a"), OpenOptions::default()).unwrap()
}

fn read_u32(p: &std::path::Path) -> Vec<u32> {
    insitu_kernels::le::decode_u32s(&std::fs::read(p).unwrap())
}

#[test]
fn placements_agree_with_a_naive_intersection() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "tiny", 1);
    let (p1, p2, p3) = (dir.path().join("1.bin"), dir.path().join("2.bin"), dir.path().join("3.bin"));
    gen_lists(2_000, 200_000, 0.3, 1, &p1, &p2).unwrap();
    gen_lists(50_000, 60_000, 0.5, 2, &p3, &dir.path().join("x.bin")).unwrap();
    let (l1, l2) = (read_u32(&p1), read_u32(&p2));
    for (p, n) in [(&p1, "l1"), (&p2, "l2")] {
        put_list(&mut a, p, None, n, 16, 0).unwrap();
    }
    let want = intersect_naive(&[&l1, &l2]);
    assert!(want.len() >= 600, "the planted fraction is there");
    let names = vec!["l1".to_string(), "l2".to_string()];
    let mut got = Vec::new();
    for placement in [IntersectPlacement::Device, IntersectPlacement::Host, IntersectPlacement::Auto] {
        let (r, ids) = intersect(&a, &names, placement, Output::Ids).unwrap();
        assert_eq!(ids.ids, want, "{placement:?}");
        assert_eq!(r.result["count"], want.len() as u64);
        let (re, e) = intersect(&a, &names, placement, Output::Entries).unwrap();
        got.push(e.entries);
        if placement == IntersectPlacement::Device {
            // The entries are read back a page once, however many of a page's entries match: no more
            // than the first list's pages (2,000 entries of 16 bytes) over what the IDs alone read.
            let extra = re.bytes.flash_read - r.bytes.flash_read;
            assert!(
                extra <= (2_000 * 16u64).div_ceil(4096) * 4096,
                "{extra} bytes read back for the entries"
            );
        }
        let (_, c) = intersect(&a, &names, placement, Output::Count).unwrap();
        assert_eq!(c.count, want.len() as u64);
    }
    assert_eq!(got[0], entries(&want, 16), "whole entries of the first list come back");
    assert!(got.iter().all(|g| *g == got[0]));
    // Three lists, shortest first.
    put_list(&mut a, &p3, None, "l3", 16, 0).unwrap();
    let l3 = read_u32(&p3);
    let names3 = vec!["l2".to_string(), "l3".to_string(), "l1".to_string()];
    let (_, r) = intersect(&a, &names3, IntersectPlacement::Device, Output::Ids).unwrap();
    let mut w3 = intersect_naive(&[&l1, &l2, &l3]);
    w3.sort_unstable();
    assert_eq!(r.ids, w3);
    // Lists of equal length (the one SvS takes last is the last of them), counted and listed.
    put_list(&mut a, &p2, None, "l2b", 16, 0).unwrap();
    let twice = vec!["l2".to_string(), "l2b".to_string()];
    let (_, r) = intersect(&a, &twice, IntersectPlacement::Device, Output::Ids).unwrap();
    assert_eq!(r.ids, l2);
    let (_, c) = intersect(&a, &twice, IntersectPlacement::Device, Output::Count).unwrap();
    assert_eq!(c.count, l2.len() as u64);
}

#[test]
fn lists_larger_than_session_memory_are_split_on_id_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "tiny", 1); // 8 MiB of device memory
    let (p1, p2) = (dir.path().join("1.bin"), dir.path().join("2.bin"));
    gen_lists(400_000, 600_000, 0.1, 3, &p1, &p2).unwrap(); // 12 MB of IDs and positions
    put_list(&mut a, &p1, None, "a", 4, 0).unwrap();
    put_list(&mut a, &p2, None, "b", 4, 0).unwrap();
    let (r, got) = intersect(&a, &["a".into(), "b".into()], IntersectPlacement::Device, Output::Ids).unwrap();
    assert!(r.result["partitions"].as_u64().unwrap() >= 2, "{}", r.result);
    // A hash-set reference: the quadratic naive one is too slow for lists this long.
    let set: std::collections::HashSet<u32> = read_u32(&p2).into_iter().collect();
    let want: Vec<u32> = read_u32(&p1).into_iter().filter(|x| set.contains(x)).collect();
    assert!(want.len() > 30_000);
    assert_eq!(got.ids, want);
}

#[test]
fn a_long_list_streams_to_the_host_in_chunks_with_entries_across_their_edges() {
    // 400,000 entries of 12 bytes (4.8 MB): the host placement reads the longest list in chunks of about
    // 4 MiB, which no whole number of entries fills, so entries straddle every chunk's edge.
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "tiny", 1);
    let (p1, p2) = (dir.path().join("1.bin"), dir.path().join("2.bin"));
    gen_lists(3_000, 400_000, 0.3, 5, &p1, &p2).unwrap();
    put_list(&mut a, &p1, None, "short", 12, 0).unwrap();
    put_list(&mut a, &p2, None, "long", 12, 0).unwrap();
    let set: std::collections::HashSet<u32> = read_u32(&p2).into_iter().collect();
    let want: Vec<u32> = read_u32(&p1).into_iter().filter(|x| set.contains(x)).collect();
    assert!(want.len() >= 900, "the planted fraction is there");
    let names = vec!["short".to_string(), "long".to_string()];
    for placement in [IntersectPlacement::Host, IntersectPlacement::Device] {
        let (_, ids) = intersect(&a, &names, placement, Output::Ids).unwrap();
        assert_eq!(ids.ids, want, "{placement:?}");
        let (_, c) = intersect(&a, &names, placement, Output::Count).unwrap();
        assert_eq!(c.count, want.len() as u64, "{placement:?}");
    }
    // The long list against itself: every entry counts, those across the chunks' edges too.
    put_list(&mut a, &p2, None, "again", 12, 0).unwrap();
    let (_, all) =
        intersect(&a, &["long".into(), "again".into()], IntersectPlacement::Host, Output::Ids).unwrap();
    assert_eq!(all.ids, read_u32(&p2));
}

#[test]
fn bad_lists_and_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "tiny", 2);
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "1 4 9 9 12").unwrap();
    let err = put_list(&mut a, &bad, None, "bad", 4, 0).unwrap_err().to_string();
    assert!(err.contains("position 3") && err.contains("duplicate"), "{err}");
    std::fs::write(&bad, "1\n4\n2\n").unwrap();
    let err = put_list(&mut a, &bad, None, "bad", 4, 0).unwrap_err().to_string();
    assert!(err.contains("position 2") && err.contains("smaller"), "{err}");
    assert!(a.catalog().objects.is_empty(), "nothing is stored");
    let good = dir.path().join("good.txt");
    std::fs::write(&good, "1 2 3 10").unwrap();
    for s in [0u32, 2, 6] {
        assert!(put_list(&mut a, &good, None, "g", s, 0).unwrap_err().to_string().contains("multiple of 4"));
    }
    put_list(&mut a, &good, None, "g", 8, 0).unwrap();
    put_list(&mut a, &good, None, "h", 8, 1).unwrap();
    let err = intersect(&a, &["g".into(), "g".into()], IntersectPlacement::Device, Output::Ids)
        .unwrap_err()
        .to_string();
    assert!(err.contains("given twice"), "{err}");
    assert!(intersect(&a, &["g".into(), "nope".into()], IntersectPlacement::Host, Output::Ids)
        .unwrap_err()
        .to_string()
        .contains("nope"));
    let err = intersect(&a, &["g".into(), "h".into()], IntersectPlacement::Device, Output::Ids)
        .unwrap_err()
        .to_string();
    assert!(err.contains("on one device"), "{err}");
    let (_, r) = intersect(&a, &["g".into(), "h".into()], IntersectPlacement::Host, Output::Ids).unwrap();
    assert_eq!(r.ids, vec![1, 2, 3, 10], "the host placement reads lists from any device");
    // OPEN beyond the device's session memory.
    let err = Session::open(&a, 0, 64 << 20, 0).unwrap_err().to_string();
    assert!(err.contains("OPEN needs"), "{err}");
}

#[test]
fn a_session_left_open_by_a_killed_client_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let a = array(dir.path(), "tiny", 1);
    let d = a.device(0).unwrap();
    let free = d.call(insitu_device::protocol::Identify).unwrap().memory_available;
    let s = Session::open(&a, 0, 4096, 0).unwrap();
    assert!(
        d.call(insitu_device::protocol::Identify).unwrap().memory_available < free,
        "OPEN reserves memory"
    );
    std::mem::forget(s); // the client dies without CLOSE
    a.close().unwrap();
    let a = Array::open(&dir.path().join("a"), OpenOptions::default()).unwrap();
    assert!(a.open_report().removed_orphans.is_empty(), "{:?}", a.open_report().removed_orphans);
    assert!(a.fsck().unwrap().is_empty());
    let d = a.device(0).unwrap();
    assert_eq!(d.call(insitu_device::protocol::Identify).unwrap().memory_available, free);
}

/// Every file of the array's folder, by path, with its bytes.
fn files(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn an_intersection_on_the_device_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "tiny", 1);
    let (p1, p2) = (dir.path().join("1.bin"), dir.path().join("2.bin"));
    gen_lists(1_000, 50_000, 0.3, 7, &p1, &p2).unwrap();
    put_list(&mut a, &p1, None, "l1", 16, 0).unwrap();
    put_list(&mut a, &p2, None, "l2", 16, 0).unwrap();
    a.close().unwrap();
    // Opened and closed once with nothing done, so what open and close write themselves is in `before`.
    Array::open(&dir.path().join("a"), OpenOptions::default()).unwrap().close().unwrap();
    let before = files(&dir.path().join("a"));
    let a = Array::open(&dir.path().join("a"), OpenOptions::default()).unwrap();
    let names = vec!["l1".to_string(), "l2".to_string()];
    let want = intersect_naive(&[&read_u32(&p1), &read_u32(&p2)]);
    for output in [Output::Ids, Output::Entries, Output::Count] {
        let (_, r) = intersect(&a, &names, IntersectPlacement::Device, output).unwrap();
        assert_eq!(r.count, want.len() as u64, "{output:?}");
    }
    a.close().unwrap();
    let after = files(&dir.path().join("a"));
    assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>());
    for (p, b) in &before {
        assert!(after[p] == *b, "{} changed", p.display());
    }
}

#[test]
fn a_text_corpus_becomes_posting_lists_that_intersect_like_sets() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "tiny", 1);
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(corpus.join("sub")).unwrap();
    std::fs::write(corpus.join("a.txt"), "The cat sat. The dog ran.").unwrap();
    std::fs::write(corpus.join("b.txt"), "A dog and a cat").unwrap();
    std::fs::write(corpus.join("sub/c.txt"), "the dog, the end").unwrap();
    let r = insitu_host::intersect::lists::index_text(&mut a, &corpus, "ix", 4, 0, 100).unwrap();
    assert_eq!(r.result["documents"], 3);
    // Documents in path order: a.txt = 0, b.txt = 1, sub/c.txt = 2.
    let ids = |n: &str| {
        intersect(&a, &[format!("ix.{n}"), "ix.dog".into()], IntersectPlacement::Device, Output::Ids)
            .unwrap()
            .1
            .ids
    };
    assert_eq!(ids("cat"), vec![0, 1]);
    assert_eq!(ids("the"), vec![0, 2]);
    assert!(a.entry("ix.sat").is_err(), "terms in one document get no list");
    assert!(
        insitu_host::intersect::lists::index_text(&mut a, &corpus, "ix", 4, 0, 100).is_err(),
        "names are taken"
    );
}

#[test]
fn generated_lists_have_exactly_the_sizes_asked_and_impossible_sizes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2) = (dir.path().join("1.bin"), dir.path().join("2.bin"));
    for (n1, n2, ratio) in [(1000, 300_000, 1.0), (200_000, 777, 0.5), (0, 10, 0.3), (50_000, 50_000, 0.01)] {
        let (l1, l2, common) = gen_lists(n1, n2, ratio, 9, &p1, &p2).unwrap();
        assert_eq!((l1, l2), (n1, n2), "sizes asked");
        let (a, b) = (read_u32(&p1), read_u32(&p2));
        assert_eq!((a.len() as u64, b.len() as u64), (n1, n2));
        for l in [&a, &b] {
            assert!(l.windows(2).all(|w| w[0] < w[1]), "sorted without duplicates");
        }
        let set: std::collections::HashSet<u32> = b.iter().copied().collect();
        assert_eq!(a.iter().filter(|x| set.contains(x)).count() as u64, common);
        let planted = (n1.min(n2) as f64 * ratio).round() as u64;
        assert!(common >= planted, "{common} common, {planted} planted");
    }
    // The IDs stay spread over the whole range: the largest of 300,000 is near the top.
    gen_lists(10, 300_000, 0.0, 4, &p1, &p2).unwrap();
    assert!(*read_u32(&p2).last().unwrap() > u32::MAX - (u32::MAX / 1000));
    let err = gen_lists(5_000_000_000, 10, 0.1, 1, &p1, &p2).unwrap_err().to_string();
    assert!(err.contains("--size1 5000000000") && err.contains("distinct"), "{err}");
}
