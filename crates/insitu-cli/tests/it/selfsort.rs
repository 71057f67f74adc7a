//! The Self-Sorting SSD from the command line: records written through the block interface come back in
//! key order, by each of the paper's four methods, byte for byte as a plain sort of the file on the host;
//! queries agree with a scan of the file; bad configurations and inputs are refused by name; and the
//! indexes survive a process killed mid-generate or mid-write.

use crate::{s, Env};

/// `n` records of `size` bytes with a random `key` bytes at `off` (seeded; keys distinct in practice).
fn records(n: usize, size: usize, off: usize, key: usize, seed: u64) -> Vec<u8> {
    use rand::{Rng, SeedableRng};
    let mut r = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut v = vec![0u8; n * size];
    for (i, rec) in v.chunks_mut(size).enumerate() {
        r.fill(rec);
        // A readable trailer so that a record torn or mixed with another shows in a diff.
        let tag = format!("#{i:07}");
        let at = size.saturating_sub(tag.len());
        if at >= off + key {
            rec[at..].copy_from_slice(&tag.as_bytes()[..size - at]);
        }
    }
    v
}

/// The host's answer: records stably sorted by their key bytes.
fn reference(data: &[u8], size: usize, off: usize, key: usize) -> Vec<u8> {
    let mut recs: Vec<&[u8]> = data.chunks(size).collect();
    recs.sort_by_key(|r| &r[off..off + key]);
    recs.concat()
}

fn init_tiny(env: &Env) {
    env.init(&["--devices", "1", "--profile", "tiny", "--capacity", "32MiB"]);
}

#[test]
fn the_four_methods_return_the_records_byte_identical_to_a_host_sort() {
    let env = Env::new();
    init_tiny(&env);
    let out = env.path("in.gensort");
    let g = env.json(&["gen", "records", "--format", "gensort", "--count", "3000", "-o", s(&out)]);
    assert_eq!(g["result"]["record_size"], 100);
    let data = std::fs::read(&out).unwrap();
    let want = reference(&data, 100, 0, 10);
    assert_ne!(data, want, "the generated records are not already sorted");
    let mut first = serde_json::Value::Null;
    for method in ["self-sort-write", "self-sort-command", "merge-sort", "active-sort"] {
        let sorted = env.path(&format!("{method}.out"));
        let r = env.json(&["selfsort", "sort", s(&out), "-o", s(&sorted), "--method", method]);
        if first.is_null() {
            first = r["modeled"]["time_s"].clone();
        }
        assert_eq!(r["result"]["count"], 3000, "{method}: {r}");
        assert!(std::fs::read(&sorted).unwrap() == want, "{method}: output differs from the host's sort");
        assert!(r["modeled"]["time_s"].as_f64().unwrap() > 0.0, "{method}: {r}");
    }
    // The same sort twice gives the same modeled figures (the model counts work, it is no stopwatch).
    let modeled = |m: &str| {
        let o = env.path("again.out");
        env.json(&["selfsort", "sort", s(&out), "-o", s(&o), "--method", m])["modeled"]["time_s"].clone()
    };
    assert_eq!(modeled("self-sort-command"), modeled("self-sort-command"));
    // Sort-on-write over a range the earlier jobs filled costs what it did on the empty device: the job
    // empties its range first (configuring sort-on-write indexes every record stored there, and each write
    // then replaced an indexed record: 2.5x the work).
    assert_eq!(modeled("self-sort-write"), first);
}

#[test]
fn paper_records_fixed_layouts_and_table_rows_sort_correctly() {
    let env = Env::new();
    init_tiny(&env);
    // The paper's 16 KB records (keys of 10 bytes), presorted and random.
    for presorted in [false, true] {
        let f = env.path("paper");
        let mut args = vec!["gen", "records", "--format", "paper", "--count", "60", "-o", s(&f)];
        if presorted {
            args.push("--presorted");
        }
        env.ok(&args);
        let data = std::fs::read(&f).unwrap();
        assert_eq!(data.len(), 60 * 16384);
        let o = env.path("paper.out");
        env.ok(&[
            "selfsort",
            "sort",
            s(&f),
            "-o",
            s(&o),
            "--format",
            "paper",
            "--method",
            "self-sort-command",
        ]);
        assert!(std::fs::read(&o).unwrap() == reference(&data, 16384, 0, 10), "presorted={presorted}");
    }
    // A record size that does not divide the page, its key in the middle of it.
    let data = records(2500, 37, 5, 6, 3);
    let f = env.write("fixed", &data);
    let o = env.path("fixed.out");
    let fixed = ["--format", "fixed", "--record-size", "37", "--key-offset", "5", "--key-size", "6"];
    let mut args = vec!["selfsort", "sort", s(&f), "-o", s(&o)];
    args.extend_from_slice(&fixed);
    env.ok(&args);
    assert!(std::fs::read(&o).unwrap() == reference(&data, 37, 5, 6));

    // Rows of a CSV table keyed by a signed integer column: negative keys first.
    let mut csv = String::from("id,score,name\n");
    let mut want: Vec<(i64, String)> = Vec::new();
    for i in 0..400i64 {
        let score = (i * 7919) % 1000 - 500;
        let name = format!("row{i}");
        csv.push_str(&format!("{i},{score},{name}\n"));
        want.push((score, format!("{i}|{score}|{name}")));
    }
    let t = env.write("t.csv", csv.as_bytes());
    let rf = env.path("t.records");
    let g =
        env.json(&["gen", "records", "--format", "table", "--table", s(&t), "--key", "score", "-o", s(&rf)]);
    let (size, off, key) = (
        g["result"]["record_size"].as_u64().unwrap().to_string(),
        g["result"]["key_offset"].as_u64().unwrap().to_string(),
        g["result"]["key_size"].as_u64().unwrap().to_string(),
    );
    let o = env.path("t.out");
    let args = [
        "selfsort",
        "sort",
        s(&rf),
        "-o",
        s(&o),
        "--format",
        "fixed",
        "--record-size",
        &size,
        "--key-offset",
        &off,
    ];
    let mut args = args.to_vec();
    args.extend_from_slice(&["--key-size", &key, "--method", "self-sort-write"]);
    env.ok(&args);
    let size: usize = size.parse().unwrap();
    let key: usize = key.parse().unwrap();
    let got: Vec<String> = std::fs::read(&o)
        .unwrap()
        .chunks(size)
        .map(|r| String::from_utf8_lossy(&r[key..]).trim_end().to_string())
        .collect();
    let scores: Vec<i64> = got.iter().map(|r| r.split('|').nth(1).unwrap().parse().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] <= w[1]), "not in score order: {scores:?}");
    let mut rows = got.clone();
    rows.sort();
    let mut expected: Vec<String> = want.into_iter().map(|(_, r)| r).collect();
    expected.sort();
    assert_eq!(rows, expected, "the sorted records are the table's rows");
}

#[test]
fn queries_and_secondary_indexes_agree_with_a_scan_of_the_file() {
    let env = Env::new();
    init_tiny(&env);
    // 64-byte records: primary key at 0 (8 bytes), a second field at 8 (2 bytes, many duplicates).
    let mut data = records(3000, 64, 0, 10, 5);
    for (i, r) in data.chunks_mut(64).enumerate() {
        r[8..10].copy_from_slice(&((i * 37 % 50) as u16).to_be_bytes());
    }
    let f = env.write("recs", &data);
    for via in ["block", "vendor"] {
        env.ok(&[
            "selfsort",
            "config",
            "--index",
            "1",
            "--record-size",
            "64",
            "--key-size",
            "8",
            "--sort-on-write",
            "--via",
            via,
        ]);
        env.ok(&["selfsort", "write", s(&f), "--via", via]);
        let st = env.json(&["selfsort", "stats"]);
        let ix = &st["result"]["indexes"][0];
        assert_eq!(ix["indexed"], 3000, "{st}");
        assert_eq!(ix["complete"], true, "{st}");
    }
    let out = env.path("sorted");
    env.ok(&["selfsort", "read", "-o", s(&out)]);
    assert!(std::fs::read(&out).unwrap() == reference(&data, 64, 0, 8));

    let recs: Vec<&[u8]> = data.chunks(64).collect();
    let min = recs.iter().min_by_key(|r| &r[..8]).unwrap();
    let max = recs.iter().max_by_key(|r| &r[..8]).unwrap();
    let m = env.path("min");
    env.ok(&["selfsort", "min", "-o", s(&m)]);
    assert_eq!(std::fs::read(&m).unwrap(), min.to_vec());
    env.ok(&["selfsort", "max", "-o", s(&m)]);
    assert_eq!(std::fs::read(&m).unwrap(), max.to_vec());
    // A range with prefix bounds: 4-byte bounds cover every key starting within them.
    let (lo, hi) = ([0x20u8, 0, 0, 0], [0x5fu8, 0xff, 0xff, 0xff]);
    let want: Vec<&[u8]> = recs.iter().copied().filter(|r| r[..4] >= lo[..] && r[..4] <= hi[..]).collect();
    let q = env.json(&["selfsort", "range", "--lo", "20000000", "--hi", "5fffffff", "--count"]);
    assert_eq!(q["result"]["count"], want.len() as u64, "{q}");
    env.ok(&["selfsort", "range", "--lo", "20000000", "--hi", "5fffffff", "-o", s(&m)]);
    let mut want_sorted = want.clone();
    want_sorted.sort_by_key(|r| &r[..8]);
    assert!(std::fs::read(&m).unwrap() == want_sorted.concat());

    // A secondary index over the same range on the 2-byte field; the primary still reads in its order.
    env.ok(&[
        "selfsort",
        "config",
        "--index",
        "2",
        "--record-size",
        "64",
        "--key-offset",
        "8",
        "--key-size",
        "2",
        "--no-active-read",
    ]);
    env.ok(&["selfsort", "generate", "--index", "2"]);
    let want = recs.iter().filter(|r| r[8..10] == [0, 7]).count() as u64;
    let q = env.json(&["selfsort", "select", "--index", "2", "--key", "0007", "--count"]);
    assert_eq!(q["result"]["count"], want, "{q}");
    let q = env.json(&["selfsort", "range", "--index", "2", "--lo", "0000", "--hi", "0009", "--count"]);
    let want = recs.iter().filter(|r| r[8..10] <= [0, 9][..]).count() as u64;
    assert_eq!(q["result"]["count"], want, "{q}");
    env.ok(&["selfsort", "read", "-o", s(&out)]);
    assert!(std::fs::read(&out).unwrap() == reference(&data, 64, 0, 8), "index 1 still orders the reads");
    // The range read through plain LBAs with the secondary index's active read off: as stored.
    let raw = env.path("raw");
    env.ok(&["selfsort", "drop", "--index", "1"]);
    env.ok(&["lba", "read", "0", "--at", "0", "--len", &(3000 * 64).to_string(), "-o", s(&raw)]);
    assert!(
        std::fs::read(&raw).unwrap() == data,
        "without the primary index, reads return the records as stored"
    );

    // The indexes survive a restart: loaded, not rebuilt.
    let st = env.json(&["selfsort", "stats"]);
    assert_eq!(st["result"]["saved_clean"], true, "{st}");
    let notes = st["result"]["indexes"][0]["notes"].to_string();
    assert!(notes.contains("loaded from flash"), "{st}");
}

#[test]
fn bad_configurations_and_inputs_are_refused_by_name() {
    let env = Env::new();
    init_tiny(&env);
    let err = env.fails(&["selfsort", "config", "--record-size", "0", "--key-size", "4"]);
    assert!(err.contains("record size"), "{err}");
    let err =
        env.fails(&["selfsort", "config", "--record-size", "16", "--key-size", "8", "--key-offset", "12"]);
    assert!(err.contains("key"), "{err}");
    let err = env.fails(&["selfsort", "range", "--index", "4", "--lo", "00", "--hi", "ff"]);
    assert!(err.contains("index 4") && err.contains("selfsort config"), "{err}");
    let err = env.fails(&["selfsort", "read", "--index", "9", "-o", s(&env.path("nothing"))]);
    assert!(err.contains("index 9"), "{err}");
    assert!(!env.path("nothing").exists(), "no output file from a failed read");
    let err = env.fails(&[
        "selfsort",
        "config",
        "--record-size",
        "4000000000",
        "--key-size",
        "4",
        "--records",
        "2",
    ]);
    assert!(err.contains("past") || err.contains("LBA") || err.contains("record size"), "{err}");
    // An index whose saved image could not fit the firmware area is refused before any work.
    let err = env.fails(&[
        "selfsort",
        "config",
        "--index",
        "5",
        "--base-lba",
        "4000",
        "--record-size",
        "8",
        "--key-size",
        "8",
        "--records",
        "100000",
    ]);
    assert!(err.contains("image slot"), "{err}");
    let err = env.fails(&["selfsort", "range", "--lo", "zz", "--hi", "ff"]);
    assert!(err.contains("hex") || err.contains("no index"), "{err}");

    env.ok(&["selfsort", "config", "--record-size", "100", "--key-size", "10"]);
    let err = env.fails(&["selfsort", "generate"]);
    assert!(err.contains("no records"), "{err}");
    let ragged = env.write("ragged", &[7u8; 250]);
    let err = env.fails(&["selfsort", "write", s(&ragged)]);
    assert!(err.contains("not a whole") && err.contains("100-byte"), "{err}");
    let err = env.fails(&["selfsort", "write", s(&env.path("missing"))]);
    assert!(err.contains("missing"), "{err}");
    let err = env.fails(&["selfsort", "range", "--lo", "ff", "--hi", "00"]);
    assert!(err.contains("low key ff is above its high key 00"), "{err}");
    // A layout given with a named format is refused, not ignored (gensort's records are 100 bytes).
    let err = env.fails(&["selfsort", "sort", s(&ragged), "-o", s(&env.path("o")), "--record-size", "50"]);
    assert!(err.contains("another layout is the fixed format") && err.contains("gensort"), "{err}");
    assert!(!env.path("o").exists());

    // Records stored, an index configured: a block write straddling the range's end is refused and
    // the stored records stay as they were.
    let data = records(200, 100, 0, 10, 9);
    let f = env.write("recs", &data);
    env.ok(&["selfsort", "write", s(&f)]);
    let straddle = env.write("straddle", &vec![0xeeu8; 3 * 4096]);
    let err = env.fails(&["lba", "write", "0", s(&straddle), "--at", "3"]);
    assert!(err.contains("straddl") || err.contains("range"), "{err}");
    env.ok(&["selfsort", "generate"]);
    let out = env.path("out");
    env.ok(&["selfsort", "read", "-o", s(&out)]);
    assert!(std::fs::read(&out).unwrap() == reference(&data, 100, 0, 10));

    // A command block that is not one: the status names the bad magic, nothing changes.
    let st = env.json(&["selfsort", "stats"]);
    let cmd_lba = st["result"]["command_lba"].as_u64().unwrap().to_string();
    let junk = env.write("junk", &[0x41u8; 4096]);
    let err = env.fails(&["lba", "write", "0", s(&junk), "--at", &cmd_lba]);
    assert!(err.to_lowercase().contains("magic"), "{err}");
    let mut future = vec![0u8; 4096];
    future[..8].copy_from_slice(b"ISSORT01");
    future[8..12].copy_from_slice(&9u32.to_le_bytes());
    future[12..16].copy_from_slice(&4u32.to_le_bytes());
    let future = env.write("future", &future);
    let err = env.fails(&["lba", "write", "0", s(&future), "--at", &cmd_lba]);
    assert!(err.contains("version 9"), "{err}");
    let err = env.fails(&[
        "lba",
        "write",
        "0",
        s(&junk),
        "--at",
        &(st["result"]["host_lbas"].as_u64().unwrap()).to_string(),
    ]);
    assert!(err.contains("past"), "{err}");
    env.ok(&["selfsort", "read", "-o", s(&out)]);
    assert!(std::fs::read(&out).unwrap() == reference(&data, 100, 0, 10));
    let fsck = env.json(&["fsck"]);
    assert_eq!(fsck["result"]["ok"], true, "{fsck}");
}

#[test]
fn an_index_larger_than_device_memory_is_refused_and_the_records_stay() {
    let env = Env::new();
    // The tiny profile with 1 MiB of device memory: 15 000 keys of 64 bytes fit a saved image (about 1 MB)
    // but not a B+tree (half-full leaves after random inserts).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles/tiny.toml");
    let tiny = std::fs::read_to_string(root).unwrap();
    let small = tiny
        .replace("memory_bytes = 8388608", "memory_bytes = 1048576")
        .replace("name = \"tiny\"", "name = \"small\"");
    assert_ne!(tiny, small);
    let p = env.write("small.toml", small.as_bytes());
    env.init(&["--devices", "1", "--profile", s(&p), "--capacity", "32MiB"]);
    let data = records(15_000, 80, 0, 64, 11);
    let f = env.write("recs", &data);
    env.ok(&["selfsort", "config", "--record-size", "80", "--key-size", "64"]);
    env.ok(&["selfsort", "write", s(&f)]);
    let err = env.fails(&["selfsort", "generate"]);
    assert!(err.contains("device memory"), "{err}");
    // The records are intact and readable as stored; the index says how far it got.
    env.ok(&["selfsort", "config", "--record-size", "80", "--key-size", "64", "--no-active-read"]);
    let raw = env.path("raw");
    env.ok(&["lba", "read", "0", "--at", "0", "--len", &data.len().to_string(), "-o", s(&raw)]);
    assert!(std::fs::read(&raw).unwrap() == data);
    let fsck = env.json(&["fsck"]);
    assert_eq!(fsck["result"]["ok"], true, "{fsck}");
}

fn killed(o: &std::process::Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    o.status.signal() == Some(9)
}

#[test]
fn a_process_killed_mid_generate_leaves_an_index_that_picks_up_where_it_was() {
    let env = Env::new();
    init_tiny(&env);
    let data = records(6000, 100, 0, 10, 13);
    let f = env.write("recs", &data);
    env.ok(&["selfsort", "config", "--record-size", "100", "--key-size", "10"]);
    env.ok(&["selfsort", "write", s(&f)]);
    let o = env
        .cmd()
        .args(["selfsort", "generate", "--chunk", "1000"])
        .env("INSITU_CRASH_AT", "selfsort-generate-chunk:3")
        .output()
        .unwrap();
    assert!(killed(&o), "the crash point was reached: {}", String::from_utf8_lossy(&o.stderr));
    let st = env.json(&["selfsort", "stats"]);
    let ix = &st["result"]["indexes"][0];
    let generated = ix["generated"].as_u64().unwrap();
    assert!(generated < 6000, "{st}");
    assert_eq!(ix["indexed"].as_u64().unwrap(), generated, "{st}");
    assert_eq!(ix["complete"], false, "{st}");
    // Reads before the index is complete are refused by name, not answered in a partial order.
    let out = env.path("out");
    let err = env.fails(&["selfsort", "read", "-o", s(&out)]);
    assert!(err.contains("generate") || err.contains("incomplete") || err.contains("not complete"), "{err}");
    env.ok(&["selfsort", "generate"]);
    env.ok(&["selfsort", "read", "-o", s(&out)]);
    assert!(std::fs::read(&out).unwrap() == reference(&data, 100, 0, 10));
    let fsck = env.json(&["fsck"]);
    assert_eq!(fsck["result"]["ok"], true, "{fsck}");
}

#[test]
fn a_process_killed_mid_write_leaves_a_sort_on_write_index_over_what_was_stored() {
    let env = Env::new();
    env.init(&["--devices", "1", "--profile", "tiny", "--capacity", "128MiB"]);
    // 200 000 records of 100 bytes: three write commands of 8 MiB.
    let data = records(200_000, 100, 0, 10, 17);
    let f = env.write("recs", &data);
    env.ok(&["selfsort", "config", "--record-size", "100", "--key-size", "10", "--sort-on-write"]);
    let o = env
        .cmd()
        .args(["selfsort", "write", s(&f)])
        .env("INSITU_CRASH_AT", "lba-write-piece:2")
        .output()
        .unwrap();
    assert!(killed(&o), "the crash point was reached: {}", String::from_utf8_lossy(&o.stderr));
    // After the restart the index holds exactly the records wholly stored, and says it is incomplete.
    let st = env.json(&["selfsort", "stats"]);
    let ix = &st["result"]["indexes"][0];
    let indexed = ix["indexed"].as_u64().unwrap();
    assert!(indexed < 200_000, "{st}");
    assert_eq!(ix["complete"], false, "{st}");
    let out = env.path("out");
    let err = env.fails(&["selfsort", "read", "-o", s(&out)]);
    assert!(err.contains("write the rest"), "{err}");
    env.ok(&["selfsort", "drop"]);
    let raw = env.path("raw");
    env.ok(&["lba", "read", "0", "--at", "0", "--len", &data.len().to_string(), "-o", s(&raw)]);
    let stored = std::fs::read(&raw).unwrap();
    let whole = stored.chunks(100).zip(data.chunks(100)).filter(|(a, b)| a == b).count() as u64;
    assert_eq!(whole, indexed, "the index holds the records whose bytes all reached the flash");
    let fsck = env.json(&["fsck"]);
    assert_eq!(fsck["result"]["ok"], true, "{fsck}");
    // Configuring the index again and writing the file again finishes the job.
    env.ok(&["selfsort", "config", "--record-size", "100", "--key-size", "10", "--sort-on-write"]);
    env.ok(&["selfsort", "write", s(&f)]);
    env.ok(&["selfsort", "read", "-o", s(&out)]);
    assert!(std::fs::read(&out).unwrap() == reference(&data, 100, 0, 10));
}

#[test]
fn block_writes_read_back_and_trimmed_blocks_read_as_zeros() {
    let env = Env::new();
    init_tiny(&env);
    // 5.5 blocks at block 10: the last block is zero-padded.
    let data = records(1, 4096 * 5 + 2048, 0, 0, 21);
    let f = env.write("blocks", &data);
    env.ok(&["lba", "write", "0", s(&f), "--at", "10"]);
    let out = env.path("out");
    env.ok(&["lba", "read", "0", "--at", "10", "--len", &(6 * 4096).to_string(), "-o", s(&out)]);
    let got = std::fs::read(&out).unwrap();
    assert!(got[..data.len()] == data[..]);
    assert!(got[data.len()..].iter().all(|&b| b == 0));
    env.ok(&["lba", "trim", "0", "--at", "11", "--len", "8192"]);
    env.ok(&["lba", "read", "0", "--at", "10", "--len", &(4 * 4096).to_string(), "-o", s(&out)]);
    let got = std::fs::read(&out).unwrap();
    assert!(got[..4096] == data[..4096]);
    assert!(got[4096..3 * 4096].iter().all(|&b| b == 0), "trimmed blocks read as zeros");
    assert!(got[3 * 4096..] == data[3 * 4096..4 * 4096]);
    let err = env.fails(&["lba", "read", "0", "--at", "100000", "--len", "4096", "-o", s(&out)]);
    assert!(err.contains("past the device"), "{err}");
}

#[test]
fn an_index_over_an_objects_pages_is_refused_when_configured() {
    // An object's pages are not the block view's: an index over them is refused when configured, even
    // before a write sizes its range (it used to be configured, its first write then failed, and reads of
    // it gave 0 records, exit 0).
    let env = Env::new();
    init_tiny(&env);
    let data = records(100, 100, 0, 4, 3);
    let obj = env.write("obj", &data);
    env.ok(&["put", s(&obj), "--name", "obj", "--device", "0"]);
    let err = env.fails(&["selfsort", "config", "--record-size", "100", "--key-size", "4"]);
    assert!(err.contains("LBA 0 belongs to object \"obj\""), "{err}");
    let st = env.json(&["selfsort", "stats"]);
    assert!(st["result"]["indexes"].as_array().unwrap().is_empty(), "nothing configured: {st}");
    assert_eq!(env.run(&["get", "obj"]).stdout, data, "the object is intact");
    // Past the object's pages the same index is taken.
    env.ok(&["selfsort", "config", "--record-size", "100", "--key-size", "4", "--base-lba", "1000"]);
}

#[test]
fn an_index_configured_again_keeps_its_records_and_a_sort_never_takes_another_index_range() {
    let env = Env::new();
    init_tiny(&env);
    let data = records(1000, 100, 0, 10, 41);
    let f = env.write("a.dat", &data);
    let cfg = ["selfsort", "config", "--record-size", "100", "--key-size", "10", "--sort-on-write"];
    env.ok(&cfg);
    env.ok(&["selfsort", "write", s(&f)]);
    // The same configuration again: the records stay indexed (it used to leave an empty index, and a
    // read of 0 records that succeeded).
    env.ok(&cfg);
    let read = |name: &str| {
        let o = env.path(name);
        env.ok(&["selfsort", "read", "-o", s(&o)]);
        std::fs::read(o).unwrap()
    };
    assert_eq!(read("r1"), reference(&data, 100, 0, 10));
    // `-o -` is standard output (the report goes to standard error), not a file named `-`.
    let o = env.run(&["selfsort", "read", "-o", "-"]);
    assert!(o.status.success() && o.stdout == reference(&data, 100, 0, 10), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("in key order"));
    // A sort whose range would cover index 1's records is refused by name before anything changes, and
    // leaves no output; by default it uses its own index (16), so index 1 is never its scratch.
    let c = env.write("c.dat", &records(5000, 100, 0, 10, 42));
    let out = env.path("sorted");
    let err = env.fails(&["selfsort", "sort", s(&c), "-o", s(&out), "--method", "merge-sort"]);
    assert!(err.contains("where index 1 keeps its records") && err.contains("--base-lba"), "{err}");
    assert!(!out.exists());
    assert_eq!(read("r2"), reference(&data, 100, 0, 10), "index 1 intact after the refused sort");
    let r =
        env.json(&["selfsort", "sort", s(&c), "-o", s(&out), "--method", "merge-sort", "--base-lba", "100"]);
    assert_eq!(r["result"]["count"], 5000);
    assert_eq!(read("r3"), reference(&data, 100, 0, 10), "index 1 intact after a sort beside it");
    // An empty key would select every record: refused, as a scan is `range`'s.
    let err = env.fails(&["selfsort", "select", "--key", "", "--count"]);
    assert!(err.contains("an empty key selects every record"), "{err}");
    // A write past the range's end would leave records never written, indexed as zeros: refused.
    let err = env.fails(&["selfsort", "write", s(&f), "--at-record", "1100"]);
    assert!(err.contains("past the end of index 1's range (1000 records)"), "{err}");
    assert_eq!(read("r4"), reference(&data, 100, 0, 10));
    // A record number past any device is refused by name (it used to wrap, or panic a debug build).
    let err = env.fails(&["selfsort", "write", s(&f), "--at-record", "18446744073709551615"]);
    assert!(err.contains("past the end") || err.contains("past any device"), "{err}");
    let err = env.fails(
        &[&cfg[..], &["--index", "3", "--base-lba", "5000", "--records", "18446744073709551615"]].concat(),
    );
    assert!(err.contains("does not fit the device"), "{err}");
    // drop takes --via as the other firmware commands do.
    env.ok(&["selfsort", "drop", "--via", "vendor"]);
    let err = env.fails(&["selfsort", "read", "-o", s(&env.path("gone"))]);
    assert!(err.contains("no self-sort index 1"), "{err}");
}

#[test]
fn active_sort_reads_its_runs_once_when_records_straddle_pages() {
    // 100-byte records do not fill pages: a read of the merged runs ends inside a record, and the next
    // starts at it. The merge goes on from there; it used to start over from the first record, so its
    // flash reads grew with the square of the records (22x the input at 200,000 records).
    let env = Env::new();
    init_tiny(&env);
    let data = records(20_000, 100, 0, 10, 43);
    let f = env.write("g.dat", &data);
    let out = env.path("o.dat");
    let r = env.json(&["selfsort", "sort", s(&f), "-o", s(&out), "--method", "active-sort"]);
    assert_eq!(std::fs::read(&out).unwrap(), reference(&data, 100, 0, 10));
    let read = r["bytes"]["flash_read"].as_u64().unwrap();
    // Written once, each run read into the host and written back, then the runs merged once.
    assert!(
        read <= 4 * data.len() as u64,
        "active sort read {read} bytes of flash for {} of records",
        data.len()
    );
}

#[test]
fn an_unsized_index_whose_first_page_an_object_took_still_opens() {
    // An index configured before a write sizes its range holds only its first page, and only while the
    // device that configured it runs (as an earlier build kept none): an object stored after a restart
    // may take that page. The device must still open (every command failed on it), and the index's
    // write refuses the page by name.
    let env = Env::new();
    init_tiny(&env);
    env.ok(&["selfsort", "config", "--record-size", "100", "--key-size", "4", "--base-lba", "100"]);
    let data = records(8000, 100, 0, 4, 5);
    let big = env.write("big", &data);
    env.ok(&["put", s(&big), "--name", "big", "--device", "0"]);
    let ls = env.ok(&["ls"]);
    assert!(ls.contains("big"), "{ls}");
    env.ok(&["fsck"]);
    let recs = env.write("recs", &records(10, 100, 0, 4, 6));
    let err = env.fails(&["selfsort", "write", s(&recs)]);
    assert!(err.contains("belongs to object \"big\""), "{err}");
    assert_eq!(env.run(&["get", "big"]).stdout, data, "the object is intact");
}
