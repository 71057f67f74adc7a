//! Host-layer integration tests: operators on a real array, placements against each other and a naive
//! reference, and resource hygiene.
#![allow(clippy::unwrap_used)]

mod intersect;
mod layering;
mod message;
mod model;
mod psacs;
mod tables;

use insitu_device::protocol::Identify;
use insitu_device::Profile;
use insitu_host::blob::{self, Placement};
use insitu_host::search::{search, SearchPlacement};
use insitu_host::{Array, OpenOptions};
use insitu_kernels::search::naive_offsets;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn bytes(n: usize, seed: u64, alphabet: &[u8]) -> Vec<u8> {
    let mut r = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| alphabet[r.gen_range(0..alphabet.len())]).collect()
}

fn array(dir: &std::path::Path, devices: u32, unit: u64) -> Array {
    Array::init(dir, devices, Profile::load("tiny").unwrap(), Some(8 << 20), Some(unit)).unwrap();
    Array::open(dir, OpenOptions::default()).unwrap()
}

#[test]
fn placements_agree_with_a_naive_scan_for_many_layouts() {
    for (devices, unit, size, seed) in
        [(1, 4096, 50_000, 1), (2, 4096, 8191, 2), (3, 8192, 100_000, 3), (5, 4096, 77_777, 4)]
    {
        let dir = tempfile::tempdir().unwrap();
        let mut a = array(&dir.path().join("a"), devices, unit);
        let data = bytes(size, seed, b"xyz");
        let f = dir.path().join("in");
        std::fs::write(&f, &data).unwrap();
        blob::put(&mut a, &f, "o", Placement::Striped, &blob::no_progress).unwrap();
        for pat in ["x", "xy", "zyxzy", "xyzxyzx"] {
            let want = naive_offsets(&data, pat.as_bytes());
            for p in [SearchPlacement::Device, SearchPlacement::Host] {
                let r = search(&a, "o", pat.as_bytes(), p, true).unwrap();
                let got: Vec<u64> = serde_json::from_value(r.result["offsets"].clone()).unwrap();
                assert_eq!(got, want, "{devices} devices, unit {unit}, pattern {pat}, {p:?}");
                assert_eq!(r.result["count"], want.len() as u64);
            }
        }
        a.close().unwrap();
    }
}

#[test]
fn search_returns_every_byte_of_device_memory_it_borrowed() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 3, 4096);
    let f = dir.path().join("in");
    std::fs::write(&f, bytes(60_000, 9, b"ab")).unwrap();
    blob::put(&mut a, &f, "o", Placement::Striped, &blob::no_progress).unwrap();
    search(&a, "o", b"abba", SearchPlacement::Device, false).unwrap();
    // A failing search (pattern longer than a stripe) frees what it took too.
    assert!(search(&a, "o", &[b'a'; 5000], SearchPlacement::Device, false).is_err());
    for d in a.devices() {
        let p = d.call(Identify).unwrap();
        assert_eq!(p.memory_available, p.memory_bytes, "device {} leaked device memory", d.id());
    }
}

#[test]
fn objects_on_one_device_and_striped_read_back_identically() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 4, 4096);
    let data = bytes(123_456, 5, b"0123456789");
    let f = dir.path().join("in");
    std::fs::write(&f, &data).unwrap();
    blob::put(&mut a, &f, "s", Placement::Striped, &blob::no_progress).unwrap();
    blob::put(&mut a, &f, "one", Placement::Device(3), &blob::no_progress).unwrap();
    for name in ["s", "one"] {
        let mut out = Vec::new();
        blob::get(&a, name, &mut out, &blob::no_progress).unwrap();
        assert_eq!(out, data, "{name}");
    }
    assert_eq!(a.entry("one").unwrap().devices, vec![3]);
    assert!(a.fsck().unwrap().is_empty());
}

#[test]
fn an_input_that_is_not_the_size_it_said_is_refused_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(&dir.path().join("a"), 3, 4096);
    let data = bytes(20_000, 5, b"ab");
    let label = std::path::Path::new("changing");
    for said in [19_999, 20_001, 40_000] {
        let e = blob::put_reader(
            &mut a,
            &mut &data[..],
            Some(said),
            label,
            "o",
            Placement::Striped,
            &blob::no_progress,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("changing changed while being read") && e.contains("nothing was stored"), "{e}");
        assert!(a.catalog().objects.is_empty());
    }
    // The name is free, and no part was left on any device.
    blob::put_reader(&mut a, &mut &data[..], None, label, "o", Placement::Striped, &blob::no_progress)
        .unwrap();
    let mut back = Vec::new();
    blob::get(&a, "o", &mut back, &blob::no_progress).unwrap();
    assert_eq!(back, data);
    assert_eq!(a.fsck().unwrap(), Vec::<String>::new());
}

#[test]
fn a_catalog_changed_under_a_writer_refuses_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a");
    let mut a = array(&path, 2, 4096);
    let f = dir.path().join("in");
    std::fs::write(&f, bytes(10_000, 3, b"ab")).unwrap();
    blob::put(&mut a, &f, "first", Placement::Striped, &blob::no_progress).unwrap();
    // Another writer (which the lock should have kept out) writes the catalog meanwhile.
    let mut other = insitu_host::catalog::Catalog::load(&path).unwrap();
    other.generation += 1;
    other.save(&path).unwrap();
    let err =
        blob::put(&mut a, &f, "second", Placement::Striped, &blob::no_progress).unwrap_err().to_string();
    assert!(err.contains("changed under this process") && err.contains("Nothing was committed"), "{err}");
    let on_disk = insitu_host::catalog::Catalog::load(&path).unwrap();
    assert!(!on_disk.objects.contains_key("second"));
    assert!(on_disk.objects.contains_key("first"));
}

#[test]
fn init_never_overwrites_a_catalog_that_lists_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    let mut a = array(&dir, 2, 4096);
    let file = tmp.path().join("f");
    std::fs::write(&file, b"kept").unwrap();
    blob::put(&mut a, &file, "f", Placement::Striped, &blob::no_progress).unwrap();
    a.close().unwrap();
    // The configuration is lost: creating an array there would replace the catalog that lists "f".
    std::fs::remove_file(dir.join("array.json")).unwrap();
    std::fs::remove_file(dir.join("array.b.json")).unwrap();
    let before = std::fs::read(dir.join("catalog.json")).unwrap();
    let err =
        Array::init(&dir, 2, Profile::load("tiny").unwrap(), Some(8 << 20), None).unwrap_err().to_string();
    assert!(err.contains("catalog.json but no array.json"), "{err}");
    assert_eq!(std::fs::read(dir.join("catalog.json")).unwrap(), before);
    // An init cut off after writing its (empty) catalog leaves one that a new init writes anew.
    let fresh = tmp.path().join("b");
    std::fs::create_dir_all(&fresh).unwrap();
    insitu_host::catalog::Catalog::default().save(&fresh).unwrap();
    Array::init(&fresh, 2, Profile::load("tiny").unwrap(), Some(8 << 20), None).unwrap().close().unwrap();
}

/// `rm` removes the catalog entry first (its commit point), then the parts: a part already gone (a
/// device journal cut by `fsck --repair`) is what was asked, not a failure of an rm that did its work.
#[test]
fn rm_of_an_object_whose_part_is_already_gone_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 2, 4096);
    let f = dir.path().join("f");
    std::fs::write(&f, bytes(20_000, 3, b"rm")).unwrap();
    blob::put(&mut a, &f, "o", Placement::Striped, &blob::no_progress).unwrap();
    blob::put(&mut a, &f, "kept", Placement::Striped, &blob::no_progress).unwrap();
    a.device(0).unwrap().call(insitu_device::protocol::Delete { name: "o".into() }).unwrap();
    let r = blob::rm(&mut a, "o").unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert!(!a.catalog().objects.contains_key("o"));
    assert!(a.fsck().unwrap().is_empty());
    let mut out = Vec::new();
    blob::get(&a, "kept", &mut out, &blob::no_progress).unwrap();
    assert_eq!(out, bytes(20_000, 3, b"rm"));
    a.close().unwrap();
}

/// A striped object starts on the device holding the fewest bytes: objects smaller than a stripe unit
/// spread over the devices, where they all went to device 0 (which filled up while the others stayed
/// empty). Every object reads back whole.
#[test]
fn small_striped_objects_spread_over_the_devices() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 3, 8192);
    let mut want = Vec::new();
    for k in 0..9u64 {
        let data = bytes(5_000 + 100 * k as usize, k, b"spread");
        let f = dir.path().join(format!("f{k}"));
        std::fs::write(&f, &data).unwrap();
        blob::put(&mut a, &f, &format!("o{k}"), Placement::Striped, &blob::no_progress).unwrap();
        want.push(data);
    }
    let first: Vec<u32> = (0..9).map(|k| a.catalog().objects[&format!("o{k}")].devices[0]).collect();
    assert_eq!(first, [0, 1, 2, 0, 1, 2, 0, 1, 2], "each object starts where the fewest bytes are");
    for (k, data) in want.iter().enumerate() {
        let mut out = Vec::new();
        blob::get(&a, &format!("o{k}"), &mut out, &blob::no_progress).unwrap();
        assert_eq!(&out, data, "o{k}");
    }
    assert!(a.fsck().unwrap().is_empty());
    a.close().unwrap();
}
