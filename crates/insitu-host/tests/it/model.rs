//! The model is a simulation: the same run gives the same modeled figures to the last digit (nothing
//! measured enters it), every unit of work an operator counts has a price on the built-in profiles, and
//! a modeled figure can be recomputed by hand from the counters and the profile.

use insitu_device::work;
use insitu_device::Profile;
use insitu_host::blob::{self, Placement};
use insitu_host::intersect::lists::{gen_lists, put_list};
use insitu_host::intersect::model::{predict, Workload};
use insitu_host::intersect::operator::{intersect, IntersectPlacement, Output};
use insitu_host::model::device_busy;
use insitu_host::nascent::sort::{sort_table, SortOptions, SortPlacement};
use insitu_host::psacs::{shuffle_table, ShuffleOptions, ShufflePlacement};
use insitu_host::search::{search, SearchPlacement};
use insitu_host::table::import::{put_table, PutTable};
use insitu_host::table::info::Partitioning;
use insitu_host::{Array, OpenOptions, Report};
use insitu_kernels::keys::SortAlgo;
use insitu_kernels::partition::PartitionHash;
use insitu_kernels::shuffle::ChunkLayout;

use crate::tables::{table, write_parquet};

fn array(dir: &std::path::Path, profile: &str, devices: u32) -> Array {
    Array::init(&dir.join("a"), devices, Profile::load(profile).unwrap(), Some(256 << 20), None).unwrap();
    Array::open(&dir.join("a"), OpenOptions::default()).unwrap()
}

fn load_table(a: &mut Array, dir: &std::path::Path, rows: usize, dict: bool) {
    let src = dir.join("t.parquet");
    write_parquet(&src, &table(rows, 7));
    let opts = PutTable {
        name: "t".into(),
        key: Some("k".into()),
        partition: Partitioning::RoundRobin,
        dict: dict.then(|| "k".to_string()),
    };
    put_table(a, &src, &opts).unwrap();
}

fn sort(a: &mut Array, placement: SortPlacement, out: &str) -> Report {
    let o = SortOptions {
        key: "k".into(),
        placement,
        algo: SortAlgo::Fast,
        out: Some(out.into()),
        merge: None,
        memory_budget: None,
    };
    sort_table(a, "t", &o).unwrap()
}

fn shuffle(a: &mut Array, placement: ShufflePlacement, out: &str) -> Report {
    let o = ShuffleOptions {
        keys: vec!["k".into()],
        partitions: 64,
        placement,
        threads: 2,
        hash: PartitionHash::ZigzagFold,
        layout: ChunkLayout::Column,
        codec: Default::default(),
        out: Some(out.into()),
        memory_budget: None,
    };
    shuffle_table(a, "t", &o).unwrap()
}

/// Two reports of the same work: identical modeled figures, all work priced.
fn same(what: &str, a: &Report, b: &Report) {
    assert!(a.modeled.unpriced.is_empty(), "{what}: unpriced work {:?}", a.modeled.unpriced);
    assert!(a.modeled.time_s > 0.0, "{what}");
    let (x, y) = (serde_json::to_value(&a.modeled).unwrap(), serde_json::to_value(&b.modeled).unwrap());
    assert_eq!(x, y, "{what}: two runs of the same work modeled differently");
}

#[test]
fn every_operator_models_the_same_twice_and_prices_all_its_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "smartssd", 2);
    load_table(&mut a, dir.path(), 20_000, true);
    for (i, p) in
        [SortPlacement::Device, SortPlacement::Host, SortPlacement::HostAccel].into_iter().enumerate()
    {
        let (r1, r2) = (sort(&mut a, p, &format!("s{i}a")), sort(&mut a, p, &format!("s{i}b")));
        same(&format!("sort {p:?}"), &r1, &r2);
    }
    for (i, p) in [ShufflePlacement::Device, ShufflePlacement::HostSort, ShufflePlacement::HostBucket]
        .into_iter()
        .enumerate()
    {
        let (r1, r2) = (shuffle(&mut a, p, &format!("h{i}a")), shuffle(&mut a, p, &format!("h{i}b")));
        same(&format!("shuffle {p:?}"), &r1, &r2);
    }
    let f = dir.path().join("text");
    std::fs::write(&f, "needle in a haystack ".repeat(20_000)).unwrap();
    blob::put(&mut a, &f, "o", Placement::Striped, &blob::no_progress).unwrap();
    for p in [SearchPlacement::Device, SearchPlacement::Host] {
        let (r1, r2) =
            (search(&a, "o", b"hay", p, false).unwrap(), search(&a, "o", b"hay", p, false).unwrap());
        same(&format!("search {p:?}"), &r1, &r2);
    }
    a.close().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "smartssd-2016", 1);
    let (p1, p2) = (dir.path().join("1.bin"), dir.path().join("2.bin"));
    gen_lists(3_000, 90_000, 0.2, 1, &p1, &p2).unwrap();
    put_list(&mut a, &p1, None, "l1", 16, 0).unwrap();
    put_list(&mut a, &p2, None, "l2", 16, 0).unwrap();
    let names = vec!["l1".to_string(), "l2".to_string()];
    for p in [IntersectPlacement::Device, IntersectPlacement::Host] {
        let run = || intersect(&a, &names, p, Output::Ids).unwrap().0;
        same(&format!("intersect {p:?}"), &run(), &run());
    }
    a.close().unwrap();
}

/// The phase whose devices did work `item`, and device 0's counters in it.
fn counters_with(r: &Report, item: &str) -> insitu_device::DeviceCounters {
    r.phases
        .iter()
        .flat_map(|ph| ph.devices.iter())
        .find(|c| c.work.keys().any(|k| k.starts_with(item)))
        .unwrap_or_else(|| {
            panic!("no phase did {item}: {:?}", r.phases.iter().map(|p| &p.name).collect::<Vec<_>>())
        })
        .clone()
}

#[test]
fn nascents_sort_kernel_by_hand() {
    // One SmartSSD, 65536 rows keyed by a 64-bit column: 12-byte (key, index) elements, 5.33 a cycle
    // through the 512-bit port; on chip 512 KiB / 8 = 65536 keys, so one chunk: 2 x 65536 / 5.33 =
    // 24576 cycles in and out, 1024 sorted arrays of P = 64 -> 10 steps, 55 sub-steps of 512 cycles
    // (28160). 52736 cycles at 221 MHz.
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "smartssd", 1);
    load_table(&mut a, dir.path(), 65_536, false);
    let r = sort(&mut a, SortPlacement::Device, "s");
    let c = counters_with(&r, "sort.");
    assert_eq!(c.work["sort.b64.n16.keys"], 65_536);
    let b = device_busy(a.profile(), &c);
    let want = 52_736.0 / 2.21e8;
    assert!((b.compute_stages["sort"] - want).abs() < 1e-12, "{} vs {want}", b.compute_stages["sort"]);
    a.close().unwrap();
}

#[test]
fn a_device_search_spreads_its_scan_over_the_compute_units_by_hand() {
    // A search is data-parallel (BlueDBM §7.3: engines scan their own segments): its pages split among the
    // device's compute units, so its scan takes the work over all of them, on the profile it is priced
    // on. Each segment after the first also scans the `len - 1` bytes before it. An object of one page
    // keeps one unit busy.
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "smartssd", 1);
    let (page, units) = (a.profile().nand.page_size as u64, a.profile().device.compute_units as u64);
    assert_eq!(units, 4, "the test assumes smartssd's 4 units");
    for (name, size) in [("big", 40 * page + 17), ("small", 100)] {
        let f = dir.path().join(name);
        std::fs::write(
            &f,
            &"needle in a haystack ".repeat(size as usize / 21 + 1).as_bytes()[..size as usize],
        )
        .unwrap();
        blob::put(&mut a, &f, name, Placement::Striped, &blob::no_progress).unwrap();
        let r = search(&a, name, b"haystack", SearchPlacement::Device, false).unwrap();
        let c = counters_with(&r, work::SEARCH_BYTES);
        let pieces = size.div_ceil(page);
        assert_eq!(c.programs["search"].pieces, pieces, "{name}");
        let used = pieces.min(units);
        assert_eq!(c.work[work::SEARCH_BYTES], size + (used - 1) * 7, "{name}");
        for p in [a.profile().clone(), Profile::load("bluedbm").unwrap(), Profile::load("jasmine").unwrap()] {
            let b = device_busy(&p, &c);
            let on = pieces.min(p.device.compute_units as u64) as f64;
            let want = c.work[work::SEARCH_BYTES] as f64 * p.kernels.cycles[work::SEARCH_BYTES]
                / p.kernels.clock_hz
                / on;
            assert!(
                (b.compute_s - want).abs() <= 1e-12 * want,
                "{name} on {}: {} vs {want}",
                p.name,
                b.compute_s
            );
        }
    }
    a.close().unwrap();
}

#[test]
fn the_intersection_on_the_device_is_the_papers_copy_and_intersect_stages() {
    // DaMoN '16 §4: copy = D/s x tau, intersect = N_m (t' + 3/(c' f')). The device program counts the
    // entries through its copy stage and the accesses of its SvS; priced by smartssd-2016's ARM core they
    // must give exactly the analytical model's stages for the same two lists.
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "smartssd-2016", 1);
    let (p1, p2) = (dir.path().join("1.bin"), dir.path().join("2.bin"));
    gen_lists(10_000, 640_000, 0.1, 3, &p1, &p2).unwrap();
    put_list(&mut a, &p1, None, "l1", 4, 0).unwrap();
    put_list(&mut a, &p2, None, "l2", 4, 0).unwrap();
    let names = vec!["l1".to_string(), "l2".to_string()];
    let (r, _) = intersect(&a, &names, IntersectPlacement::Device, Output::Count).unwrap();
    let c = counters_with(&r, work::INTERSECT_ACCESSES);
    assert_eq!(c.work[work::INTERSECT_ENTRIES], 650_000);
    let b = device_busy(a.profile(), &c);
    let copy_intersect_s =
        b.compute_stages[work::INTERSECT_ENTRIES] + b.compute_stages[work::INTERSECT_ACCESSES];
    let w = Workload::from_sizes(40_000.0, 2_560_000.0, 4.0, 0.1, 4.0).unwrap();
    let p = predict(a.profile(), &w).unwrap();
    let stage = |n: &str| p.stages.iter().find(|s| s.name == n).unwrap().device_ms.unwrap();
    let paper_s = (stage("copy") + stage("intersect")) * 1e-3;
    // The count of accesses is whole (the paper's `2 |L1| log2 |L2|` is not): at most one access apart.
    let one_access = 8.7 / 0.4e9;
    assert!((copy_intersect_s - paper_s).abs() <= one_access, "{copy_intersect_s} vs {paper_s}");
    a.close().unwrap();
}

#[test]
fn psacs_stages_by_hand_from_the_counters() {
    // A device shuffle on one SmartSSD: each stage line is the counted work at the profile's cycles and
    // clock (over the compute units the programs kept busy), and the flash line is the bytes read and
    // programmed at the profile's internal rates: recomputed here from the counters alone.
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), "smartssd", 1);
    load_table(&mut a, dir.path(), 20_000, false);
    let r = shuffle(&mut a, ShufflePlacement::Device, "s");
    let p = a.profile().clone();
    let lines = insitu_host::model::stage_lines(&p, &r.phases, &r.modeled);
    let c = counters_with(&r, work::SHUFFLE_HASH_ROWS);
    let ph = r.phases.iter().position(|ph| ph.devices.iter().any(|d| d.work == c.work)).unwrap();
    let runs: u64 = c.programs.values().filter(|s| s.kernel_class != "transfer").map(|s| s.runs).sum();
    let units = (p.device.compute_units as u64).min(runs.max(1)) as f64;
    let line = |stage: &str| {
        lines
            .iter()
            .find(|l| l.phase == r.phases[ph].name && l.stage == stage)
            .unwrap_or_else(|| panic!("no {stage} in {lines:#?}"))
    };
    for item in [work::SHUFFLE_HASH_ROWS, work::SHUFFLE_GATHER_ROWS, work::ENCODE_BYTES] {
        let want = c.work[item] as f64 * p.kernels.cycles[item] / p.kernels.clock_hz / units;
        let got = line(&format!("device 0 compute {item}"));
        assert!((got.seconds - want).abs() <= 1e-12 * want, "{item}: {} vs {want}", got.seconds);
        assert!(got.from.contains(&format!("{item} = {}", c.work[item])), "{}", got.from);
    }
    // The compute lines add up to the phase's compute time.
    let b = device_busy(&p, &c);
    let sum: f64 = lines
        .iter()
        .filter(|l| l.phase == r.phases[ph].name && l.stage.starts_with("device 0 compute "))
        .map(|l| l.seconds)
        .sum();
    assert!((sum - b.compute_s).abs() <= 1e-9 * b.compute_s, "{sum} vs {}", b.compute_s);
    let flash = (c.flash_read_bytes + c.flash_read_conflict_bytes) as f64 / p.device.internal_read_bw
        + c.flash_program_bytes as f64 / p.device.internal_write_bw
        + c.flash_erase_blocks as f64 * p.nand.erase_latency_us * 1e-6
            / (p.nand.channels * p.nand.chips_per_channel) as f64;
    assert!((line("device 0 flash").seconds - flash).abs() <= 1e-12 * flash);
    a.close().unwrap();
}

#[test]
fn psacs_counts_the_tiles_its_scratchpad_holds() {
    // PSACS §IV-B: the kernel shuffles tiles of records that fit its scratchpad (2.25 MiB on `smartssd`),
    // and the Merger concatenates each partition across them (Fig. 8). About 6 MB of records take 3
    // tiles: 3 sorts of a third of the pairs each, and one more pass over the records; a small part
    // takes one tile and no merge.
    let scratch = Profile::load("smartssd").unwrap().kernels.shuffle_scratchpad_bytes.unwrap();
    for rows in [2_000u64, 120_000] {
        let dir = tempfile::tempdir().unwrap();
        let mut a = array(dir.path(), "smartssd", 1);
        load_table(&mut a, dir.path(), rows as usize, false);
        let r = shuffle(&mut a, ShufflePlacement::Device, "s");
        let c = counters_with(&r, work::SHUFFLE_HASH_ROWS);
        let bytes = c.work[work::SHUFFLE_GATHER_BYTES];
        let tiles = bytes.div_ceil(scratch);
        assert_eq!(tiles > 1, rows > 100_000, "{rows} rows: {bytes} bytes of records");
        let sorts = work::SortClass::all(&c.work, work::SHUFFLE_SORT);
        let keys: u64 = sorts.iter().map(|s| s.1).sum();
        let calls: u64 = sorts.iter().map(|s| s.2).sum();
        assert_eq!((keys, calls), (rows, tiles), "{sorts:?}");
        let most = rows.div_ceil(tiles);
        assert!(sorts.iter().all(|(class, _, _)| 1u64 << class.log2n >= most), "{sorts:?}");
        let merged = c.work.get(work::SHUFFLE_MERGE_BYTES).copied().unwrap_or(0);
        assert_eq!(merged, if tiles > 1 { bytes } else { 0 });
        a.close().unwrap();
    }
}

#[test]
fn self_sorts_table_1_write_by_hand() {
    // Table I's "write" of MergeSort: 64 records of 16 KB programmed into the drive's flash at jasmine's
    // internal write bandwidth, plus one SATA command latency; the host's storage stack (requests of
    // 512 KiB, 32 in flight) waits less than the flash takes.
    use insitu_host::selfsort::repro::{run, ReproOptions};
    let dir = tempfile::tempdir().unwrap();
    let p = Profile::load("jasmine").unwrap();
    let opts = ReproOptions {
        records: 64,
        presorted: false,
        runs: 2,
        request_bytes: 1 << 20,
        seed: 7,
        profile: p.clone(),
        workdir: dir.path().join("w"),
    };
    let r = run(&opts, &|_| {}).unwrap();
    let m = r.results.iter().find(|m| m.label == "MergeSort").unwrap();
    let w = m.phases.iter().find(|ph| ph.name == "write").unwrap();
    let bytes = 64.0 * 16384.0;
    let want = bytes / p.device.internal_write_bw + p.host_link.latency_us * 1e-6;
    assert!((w.modeled_s - want).abs() < 1e-9 * want, "{} vs {want} ({})", w.modeled_s, w.bottleneck);
    // Table I's figure is that phase's bandwidth in MiB/s.
    assert!((bytes / (1 << 20) as f64 / w.modeled_s - 36.8).abs() < 0.1, "{}", bytes / w.modeled_s);
}
