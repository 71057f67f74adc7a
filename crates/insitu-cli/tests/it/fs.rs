//! BlueDBM's file system from the command line, on a small appliance: files round-trip byte for byte,
//! their physical pages are listed and spread over nodes and buses, bad input is refused by name with
//! nothing half-done, cleaning reclaims space without losing a byte, and processes killed at every step
//! of a put or a cleaning leave files whole or absent.

use crate::{s, text, Env};

/// The bluedbm profile with a small geometry (2 cards x 2 buses x 2 chips, 16 pages of 8 KiB a block),
/// so that tests fill the raw flash in a few MiB.
fn small_profile(env: &Env) -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles/bluedbm.toml"))
        .unwrap()
        .replace("channels = 16 ", "channels = 4 ")
        .replace("chips_per_channel = 8 ", "chips_per_channel = 2 ")
        .replace("pages_per_block = 256 ", "pages_per_block = 16 ");
    let p = env.write("small.toml", text.as_bytes());
    s(&p).to_string()
}

/// A 3-node line appliance with `capacity` of raw flash a node.
pub fn appliance(capacity: &str) -> Env {
    let env = Env::new();
    let profile = small_profile(&env);
    env.init(&["--nodes", "3", "--topology", "line", "--profile", &profile, "--capacity", capacity]);
    env
}

fn get(env: &Env, name: &str) -> Vec<u8> {
    let out = env.path("got");
    env.ok(&["fs", "get", name, "-o", s(&out)]);
    std::fs::read(out).unwrap()
}

fn names(env: &Env) -> Vec<String> {
    env.json(&["fs", "ls"])["result"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn files_round_trip_and_their_pages_spread_over_nodes_and_buses() {
    let env = appliance("8MiB");
    let sizes = [0usize, 1, 8192, 8193, 3_000_000];
    for (i, n) in sizes.iter().enumerate() {
        let f = env.write(&format!("f{i}"), &text(*n, i as u64, b"abcdefgh"));
        env.ok(&["fs", "put", s(&f)]);
    }
    for (i, n) in sizes.iter().enumerate() {
        assert_eq!(get(&env, &format!("f{i}")), text(*n, i as u64, b"abcdefgh"), "f{i}");
    }
    // Without -o the bytes go to standard output, as `insitu get`'s do.
    assert_eq!(env.run(&["fs", "get", "f3"]).stdout, text(sizes[3], 3, b"abcdefgh"));
    // One physical address per line: node card bus chip block page; a striped file uses every node and
    // every bus.
    let pages = env.ok(&["fs", "pages", "f4"]);
    let rows: Vec<Vec<u64>> =
        pages.lines().map(|l| l.split(' ').map(|v| v.parse().unwrap()).collect()).collect();
    assert_eq!(rows.len(), 3_000_000usize.div_ceil(8192));
    assert!(rows.iter().all(|r| r.len() == 6));
    let nodes: std::collections::BTreeSet<u64> = rows.iter().map(|r| r[0]).collect();
    let buses: std::collections::BTreeSet<(u64, u64, u64)> =
        rows.iter().map(|r| (r[0], r[1], r[2])).collect();
    assert_eq!(nodes.len(), 3);
    assert_eq!(buses.len(), 3 * 2 * 2);
    let mut distinct = rows.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), rows.len(), "no page is used twice");
    // --node keeps a file on one node.
    let f = env.write("local", &text(100_000, 9, b"xy"));
    let r = env.json(&["fs", "put", s(&f), "--name", "on-one", "--node", "1"]);
    assert_eq!(r["result"]["nodes"], serde_json::json!([1]));
    // A put reports what it cost, as every command does: each of its 13 pages programmed once, over the
    // host link, modeled on the profile's watts.
    assert_eq!(
        (r["bytes"]["flash_program"].as_u64(), r["bytes"]["host_to_device"].as_u64()),
        (Some(13 * 8192), Some(13 * 8192))
    );
    assert!(
        r["modeled"]["time_s"].as_f64().unwrap() > 0.0 && r["modeled"]["energy_j"].as_f64().unwrap() > 0.0
    );
    let back = env.path("on-one.back");
    let g = env.json(&["fs", "get", "on-one", "-o", s(&back)]);
    assert_eq!(g["bytes"]["flash_read"].as_u64(), Some(13 * 8192), "{g}");
    assert!(env.ok(&["fs", "pages", "on-one"]).lines().all(|l| l.starts_with("1 ")));
    assert_eq!(get(&env, "on-one"), text(100_000, 9, b"xy"));
    // Standard input, named.
    let piped = text(50_000, 4, b"in");
    let mut child = env
        .cmd()
        .args(["fs", "put", "-", "--name", "piped"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &piped).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(get(&env, "piped"), piped);
    assert!(env.fails(&["fs", "put", "-"]).contains("needs --name"));
    env.ok(&["fs", "rm", "piped"]);
    // Existing commands still work on an appliance.
    let obj = env.write("obj", b"an object through the FTL");
    env.ok(&["put", s(&obj)]);
    assert_eq!(env.run(&["get", "obj"]).stdout, b"an object through the FTL");
    // ls and rm.
    let ls = env.json(&["fs", "ls"]);
    assert_eq!(ls["result"]["stats"]["files"], 6);
    env.ok(&["fs", "rm", "f4"]);
    assert!(!names(&env).contains(&"f4".to_string()));
    assert_eq!(get(&env, "f3"), text(8193, 3, b"abcdefgh"));
}

#[test]
fn bad_input_is_refused_by_name_and_changes_nothing() {
    let env = appliance("8MiB");
    let f = env.write("a", &text(50_000, 1, b"ab"));
    env.ok(&["fs", "put", s(&f)]);
    let before = env.json(&["fs", "ls"])["result"].clone();
    let (missing, out) = (env.path("missing"), env.path("out"));
    let cases: [(&[&str], &str); 12] = [
        (&["fs", "put", s(&f)], "already exists"),
        // A file of the file system is not an object: the error says which command reads it.
        (
            &["search", "a", "ab"],
            "\"a\" is a file of this appliance's file system (`insitu fs ls`): `insitu bluedbm search`",
        ),
        (&["get", "a"], "`insitu fs get` reads it"),
        (&["fs", "put", s(&f), "--name", "b", "--node", "7"], "no node 7: the appliance has"),
        (&["fs", "get", "a", "--via", "isp", "--from", "7"], "no node 7"),
        // A node past the appliance is refused whatever the placement, even one that does not use it.
        (&["bluedbm", "search", "a", "ab", "--node", "7"], "no node 7"),
        (&["bluedbm", "search", "a", "ab", "--node", "7", "--placement", "host"], "no node 7"),
        (&["bluedbm", "bfs", "a", "--from", "0", "--node", "7"], "no node 7"),
        (&["fs", "put", s(&f), "--name", "../up"], "invalid"),
        (&["fs", "put", s(&missing)], "cannot open"),
        (&["fs", "get", "nope", "-o", s(&out)], "no file named \"nope\" in the file system"),
        (&["fs", "rm", "nope"], "no file named \"nope\""),
    ];
    for (args, want) in cases {
        let err = env.fails(args);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert!(!env.path("out").exists(), "a failed get leaves no file");
    assert_eq!(env.json(&["fs", "ls"])["result"], before);
    // A file larger than the flash left: refused, and the file system is as it was.
    let big = env.write("big", &text(30_000_000, 2, b"cd"));
    let err = env.fails(&["fs", "put", s(&big)]);
    assert!(err.contains("full"), "{err}");
    assert_eq!(names(&env), vec!["a"]);
    assert_eq!(get(&env, "a"), text(50_000, 1, b"ab"));
    env.ok(&["fs", "gc"]);
    let f2 = env.write("c", &text(1_000_000, 3, b"ef"));
    env.ok(&["fs", "put", s(&f2)]);
    assert_eq!(get(&env, "c"), text(1_000_000, 3, b"ef"));

    // Appliances: --nodes needs a topology; a topology needs a profile with a storage network; a bad
    // topology leaves no array behind.
    let other = Env::new();
    assert!(other.fails(&["init", "--nodes", "3"]).contains("--topology"));
    let err = other.fails(&["init", "--nodes", "3", "--topology", "ring", "--profile", "tiny"]);
    assert!(err.contains("no storage network"), "{err}");
    let topo = other.write("t.toml", b"nodes = 3\n[[link]]\na = 0\nb = 1\n");
    let err = other.fails(&["init", "--topology", s(&topo), "--profile", "bluedbm"]);
    assert!(err.contains("no route"), "{err}");
    assert!(!other.data().join("array.json").exists());
    // A device without a raw partition has no file system.
    other.init(&["--devices", "2", "--profile", "tiny", "--capacity", "8MiB"]);
    assert!(other.fails(&["fs", "ls"]).contains("no raw flash partition"));
}

#[test]
fn cleaning_reclaims_space_without_losing_a_byte() {
    // 8 MiB of raw flash a node, 24 MiB in all: write 60 MiB through it, keeping at most ~12 MiB.
    let env = appliance("8MiB");
    let mut kept: Vec<(String, usize)> = Vec::new();
    for i in 0..30 {
        let name = format!("g{i}");
        let n = 1_000_000 + i * 37_000;
        let f = env.write("g", &text(n, 100 + i as u64, b"0123456789"));
        env.ok(&["fs", "put", s(&f), "--name", &name]);
        kept.push((name, n));
        if kept.len() > 6 {
            // Remove every other file, so segments are left half live and must be cleaned, not just erased.
            let (old, _) = kept.remove(kept.len() % 3);
            env.ok(&["fs", "rm", &old]);
        }
    }
    for (name, n) in &kept {
        let i: u64 = name[1..].parse().unwrap();
        assert_eq!(get(&env, name).len(), *n);
        assert!(get(&env, name) == text(*n, 100 + i, b"0123456789"), "{name} changed");
    }
    let ls = env.json(&["fs", "ls"]);
    assert_eq!(ls["result"]["stats"]["files"], kept.len());
}

fn killed(o: &std::process::Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    o.status.signal() == Some(9)
}

#[test]
fn sigkill_during_put_or_cleaning_leaves_files_whole_or_absent() {
    let earlier = text(700_000, 1, b"earlier");
    let victim = text(5_000_000, 2, b"victim");
    for (point, exists) in [("fs-put-pages:1", false), ("fs-put-pages:2", false), ("fs-put-journal:1", true)]
    {
        let env = appliance("8MiB");
        let e = env.write("earlier", &earlier);
        env.ok(&["fs", "put", s(&e)]);
        let v = env.write("victim", &victim);
        let o = env.cmd().args(["fs", "put", s(&v)]).env("INSITU_CRASH_AT", point).output().unwrap();
        assert!(killed(&o), "{point}: {o:?}");
        // The torn segment: pages programmed for a file no journal record names are dead.
        let ls = env.json(&["fs", "ls"]);
        assert_eq!(names(&env).contains(&"victim".to_string()), exists, "{point}: {ls}");
        if !exists {
            assert!(ls["result"]["stats"]["dead_pages"].as_u64().unwrap() > 0, "{point}: {ls}");
        } else {
            assert_eq!(get(&env, "victim"), victim, "{point}");
        }
        assert_eq!(get(&env, "earlier"), earlier, "{point}");
        // Writes go on after the dead pages, and cleaning reclaims them.
        let after = text(2_000_000, 3, b"after");
        let a = env.write("after", &after);
        env.ok(&["fs", "put", s(&a)]);
        env.ok(&["fs", "gc"]);
        assert_eq!(get(&env, "after"), after, "{point}");
        assert_eq!(get(&env, "earlier"), earlier, "{point}");
    }
    // Killed while cleaning: after the moved pages are written but before they are journaled, and after
    // they are journaled but before the old block is erased. Small files kept at ~75% of the flash, the
    // middle one removed each time, leave no block all dead: cleaning must move live pages.
    for point in ["fs-gc-moved:1", "fs-gc-erase:3"] {
        let env = appliance("2MiB");
        let mut kept: Vec<(String, Vec<u8>)> = Vec::new();
        let mut crashed = None;
        for i in 0..150u64 {
            let data = text(50_000, 10 + i, b"klmnop");
            let f = env.write("x", &data);
            let name = format!("x{i}");
            let o = env
                .cmd()
                .args(["fs", "put", s(&f), "--name", &name])
                .env("INSITU_CRASH_AT", point)
                .output()
                .unwrap();
            if killed(&o) {
                crashed = Some((name, data));
                break;
            }
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            kept.push((name, data));
            if kept.len() > 80 {
                let (old, _) = kept.remove(kept.len() / 2);
                env.ok(&["fs", "rm", &old]);
            }
        }
        let (victim, data) = crashed.unwrap_or_else(|| panic!("{point}: cleaning never moved a page"));
        // The bus whose cleaning was cut short takes writes again at once (cleaning first, on its own).
        let small = env.write("small", &text(20_000, 7, b"q"));
        env.ok(&["fs", "put", s(&small), "--name", "small"]);
        assert_eq!(get(&env, "small"), text(20_000, 7, b"q"));
        if names(&env).contains(&victim) {
            assert!(get(&env, &victim) == data, "{point}: {victim} is not whole");
        }
        for (name, data) in &kept {
            assert!(get(&env, name) == *data, "{point}: {name} changed");
        }
        // Space comes back: remove a few files, put a larger one.
        for (name, _) in kept.drain(..10) {
            env.ok(&["fs", "rm", &name]);
        }
        let f = env.write("y", &text(300_000, 99, b"z"));
        env.ok(&["fs", "put", s(&f), "--name", "after"]);
        assert_eq!(get(&env, "after"), text(300_000, 99, b"z"));
    }
    // A torn record at the journal's end is cut off on open, and said so.
    let env = appliance("8MiB");
    let e = env.write("earlier", &earlier);
    env.ok(&["fs", "put", s(&e)]);
    let journal = env.data().join("fs").join("journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    bytes.extend_from_slice(b"0badc0de {\"Put\":{\"id\":9,\"na");
    std::fs::write(&journal, bytes).unwrap();
    let o = env.run(&["fs", "ls"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("torn record"), "{o:?}");
    assert_eq!(get(&env, "earlier"), earlier);
}

/// Damage to the file system's journal is not taken for a record cut off by a crash: a damaged record
/// with good ones after it, a whole last record that fails its checksum, or a journal gone is refused by
/// name by every command (nothing cut, no file dropped, cleaning does not erase their pages), until
/// `fsck --repair` drops only the damaged records (the whole journal kept beside it) or starts an empty
/// journal. The files the good records name read back whole.
#[test]
fn a_damaged_or_missing_journal_is_refused_until_fsck_repair_and_loses_only_its_damaged_records() {
    let files: Vec<(String, Vec<u8>)> =
        (0..3).map(|i| (format!("f{i}"), text(40_000 + 9_000 * i, 30 + i as u64, b"jrnl"))).collect();
    let put_all = |env: &Env| {
        for (name, data) in &files {
            let f = env.write(name, data);
            env.ok(&["fs", "put", s(&f)]);
        }
    };
    let journal = |env: &Env| env.data().join("fs").join("journal");
    // Each record is one line; the line of file k starts after the first k.
    let line_starts = |bytes: &[u8]| -> Vec<usize> {
        let mut at = vec![0];
        at.extend(bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1));
        at.pop();
        at
    };
    for (case, hit) in [("first record", 0usize), ("last record", 2)] {
        let env = appliance("8MiB");
        put_all(&env);
        let mut bytes = std::fs::read(journal(&env)).unwrap();
        let starts = line_starts(&bytes);
        assert_eq!(starts.len(), 3, "{case}: one record a put");
        bytes[starts[hit] + 20] ^= 0x10;
        std::fs::write(journal(&env), &bytes).unwrap();
        for cmd in [
            &["fs", "ls"][..],
            &["fs", "gc"],
            &["fs", "get", "f1"],
            &["fs", "put", s(&env.write("n", b"new"))],
        ] {
            let err = env.fails(cmd);
            assert!(
                err.contains("damage inside the journal") && err.contains("fsck --repair"),
                "{case} {cmd:?}: {err}"
            );
        }
        assert_eq!(
            std::fs::read(journal(&env)).unwrap(),
            bytes,
            "{case}: nothing changed without the user's word"
        );
        let o = env.run(&["fsck"]);
        assert_eq!(o.status.code(), Some(2), "{case}: {o:?}");
        let o = env.run(&["fsck", "--repair"]);
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && said.contains("dropped 1 damaged record(s)"), "{case}: {said}");
        let kept = env.data().join("fs").join(format!("journal.damaged-at-{}", starts[hit]));
        assert_eq!(std::fs::read(&kept).unwrap(), bytes, "{case}: the whole journal is kept");
        // The lost file's pages are dead: cleaning takes them, the others stay whole.
        env.ok(&["fs", "gc"]);
        for (k, (name, data)) in files.iter().enumerate() {
            if k == hit {
                env.fails(&["fs", "get", name]);
            } else {
                assert!(get(&env, name) == *data, "{case}: {name} is whole");
            }
        }
    }
    // Damage at the end that is more than one cut-off record: the last two records damaged, or every
    // line's end changed (CRLF), is refused, not cut as a torn tail.
    for (case, edit) in [("two last records", 0), ("CRLF", 1)] {
        let env = appliance("8MiB");
        put_all(&env);
        let bytes = std::fs::read(journal(&env)).unwrap();
        let damaged: Vec<u8> = if edit == 0 {
            let starts = line_starts(&bytes);
            let mut b = bytes.clone();
            b[starts[1] + 20] ^= 0x10;
            b[starts[2] + 20] ^= 0x10;
            b
        } else {
            bytes.iter().flat_map(|&c| if c == b'\n' { vec![b'\r', b'\n'] } else { vec![c] }).collect()
        };
        std::fs::write(journal(&env), &damaged).unwrap();
        let err = env.fails(&["fs", "ls"]);
        assert!(err.contains("damage inside the journal"), "{case}: {err}");
        assert_eq!(std::fs::read(journal(&env)).unwrap(), damaged, "{case}: nothing cut");
    }
    // The whole fs/ folder gone, with files' pages on the nodes: refused, not taken for a new file system
    // whose cleaning would erase them.
    let env = appliance("8MiB");
    put_all(&env);
    std::fs::remove_dir_all(env.data().join("fs")).unwrap();
    for cmd in [&["fs", "ls"][..], &["fs", "gc"]] {
        let err = env.fails(cmd);
        assert!(err.contains("the journal is missing"), "{cmd:?}: {err}");
    }
    let o = env.run(&["fsck", "--repair"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("started an empty one"), "{o:?}");
    assert!(env.ok(&["fs", "ls"]).contains("0 file(s)"));
    // A journal gone from a file system with files: refused, then started empty with the user's word.
    let env = appliance("8MiB");
    put_all(&env);
    std::fs::remove_file(journal(&env)).unwrap();
    for cmd in [&["fs", "ls"][..], &["fs", "gc"]] {
        let err = env.fails(cmd);
        assert!(err.contains("the journal is missing"), "{cmd:?}: {err}");
    }
    assert!(!journal(&env).exists(), "nothing made without the user's word");
    let o = env.run(&["fsck", "--repair"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("started an empty one"), "{o:?}");
    assert!(env.ok(&["fs", "ls"]).contains("0 file(s)"));
}

/// A node that does not open keeps only its own pages from being read: a file wholly on the other nodes
/// reads back, one with pages on it fails naming it, and changes are refused by name until it is back
/// (its blocks are not known). Its files are not called damaged. Once it opens, all is as before.
#[test]
fn a_node_offline_keeps_only_its_own_pages_from_being_read() {
    let env = appliance("8MiB");
    let on1 = text(20_000, 41, b"one");
    let striped = text(90_000, 42, b"all");
    env.ok(&["fs", "put", s(&env.write("on1", &on1)), "--node", "1"]);
    env.ok(&["fs", "put", s(&env.write("striped", &striped))]);
    let geometry = env.data().join("dev0").join("raw").join("geometry.json");
    let good = std::fs::read(&geometry).unwrap();
    std::fs::write(&geometry, b"{ damaged").unwrap();
    assert!(get(&env, "on1") == on1);
    let err = env.fails(&["fs", "get", "striped"]);
    assert!(err.contains("device 0 is offline"), "{err}");
    let err = env.fails(&["fs", "put", s(&env.write("new", b"new")), "--node", "1"]);
    assert!(err.contains("takes no change while a node is offline"), "{err}");
    let err = env.fails(&["fs", "rm", "on1"]);
    assert!(err.contains("takes no change while a node is offline"), "{err}");
    let o = env.run(&["fs", "ls"]);
    assert!(o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("damaged"), "{o:?}");
    std::fs::write(&geometry, &good).unwrap();
    assert!(get(&env, "striped") == striped && get(&env, "on1") == on1);
    env.ok(&["fs", "put", s(&env.write("new", b"new"))]);
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

/// A flipped digit in a node's device.json (its card count) or in its raw partition's geometry.json took
/// the node's flash at other addresses: `fs gc` then erased live pages, and a smaller geometry cut the
/// image. Now device.json is mended from its second copy (the damaged one kept beside it), and a
/// geometry.json that is not the profile's and the capacity's (damaged under its checksum, or written
/// without one, as an older insitu did) takes the node offline: changes are refused, nothing is cut, and
/// once the file is back every file reads as before.
#[test]
fn a_flipped_digit_in_a_nodes_configuration_is_mended_or_takes_it_offline_and_erases_nothing() {
    let env = appliance("8MiB");
    let data = text(90_000, 43, b"all");
    env.ok(&["fs", "put", s(&env.write("striped", &data))]);
    let dev0 = env.data().join("dev0");
    let image = dev0.join("raw").join("nand.img");
    let image_len = std::fs::metadata(&image).unwrap().len();

    let config = dev0.join("device.json");
    let good = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, good.replacen("\"cards\": 2", "\"cards\": 4", 1)).unwrap();
    env.ok(&["fs", "gc"]);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), good, "mended from its second copy");
    assert!(dev0.join("device.json.damaged").exists());
    assert!(get(&env, "striped") == data);
    let said = env.ok(&["fsck"]);
    assert!(said.contains("dev0: device.json was damaged and mended from its second copy"), "{said}");

    let path = dev0.join("raw/geometry.json");
    let good = std::fs::read_to_string(&path).unwrap();
    let number = |key: &str| -> u64 {
        let at = good.find(key).unwrap() + key.len();
        good[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
    };
    let (blocks, channels) = (number("\"blocks_per_chip\": "), number("\"channels\": "));
    let with =
        |key: &str, from: u64, to: u64| good.replacen(&format!("{key}: {from}"), &format!("{key}: {to}"), 1);
    let unchecked = |text: String| text.split_once('\n').unwrap().1.to_string();
    for (what, bad) in [
        ("a flipped digit", with("\"channels\"", channels, channels + 10)),
        ("another channel count, unchecked", unchecked(with("\"channels\"", channels, channels + 10))),
        ("fewer blocks, unchecked", unchecked(with("\"blocks_per_chip\"", blocks, blocks - 1))),
        ("more blocks, unchecked", unchecked(with("\"blocks_per_chip\"", blocks, blocks + 1))),
    ] {
        assert_ne!(bad, good, "{what}");
        std::fs::write(&path, bad).unwrap();
        let err = env.fails(&["fs", "gc"]);
        assert!(err.contains("takes no change while a node is offline"), "{what}: {err}");
        let err = env.fails(&["fs", "get", "striped", "-o", s(&env.path("x"))]);
        assert!(err.contains("device 0 is offline"), "{what}: {err}");
        assert_eq!(std::fs::metadata(&image).unwrap().len(), image_len, "{what}: the image changed size");
        std::fs::write(&path, &good).unwrap();
        assert!(get(&env, "striped") == data, "{what}");
    }
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

/// `fs get --via`: one node's in-store processor or host reads a file's pages from every node over the
/// storage network. The bytes are the file's; the modeled bandwidth is what the hardware allows: a
/// node's own flash at its cards' rate (2 x 1.2 GB/s, 1.6 GB/s over PCIe to a host), another node's
/// through the one 8.2 Gb/s cable of a line (about 1 GB/s); a host's read moves the file over its PCIe.
/// Pages that end in zeros (two of them all zeros, one from its middle, the last past the file's end)
/// cross without those zeros, and come back whole.
#[test]
fn one_node_reads_files_anywhere_over_the_storage_network() {
    let env = Env::new();
    env.init(&["--nodes", "3", "--topology", "line", "--profile", "bluedbm", "--capacity", "256MiB"]);
    let mut data = text((12 << 20) + 100, 3, b"0123456789abcdef");
    data[5 * 8192..7 * 8192].fill(0);
    data[9 * 8192 + 50..10 * 8192].fill(0);
    let f = env.write("f", &data);
    env.ok(&["fs", "put", s(&f), "--name", "striped"]);
    env.ok(&["fs", "put", s(&f), "--name", "on1", "--node", "1"]);
    let via = |name: &str, how: &str, from: &str| {
        let out = env.path(&format!("{name}-{how}-{from}"));
        let r = env.json(&["fs", "get", name, "-o", s(&out), "--via", how, "--from", from]);
        assert!(std::fs::read(&out).unwrap() == data, "{name} read by node {from}'s {how} differs");
        let r = r["result"]["via"].clone();
        assert_eq!(r["bytes"], data.len() as u64);
        let gbps = data.len() as f64 / r["modeled_s"].as_f64().unwrap() / 1e9;
        (r, gbps)
    };
    let (local, isp_local) = via("on1", "isp", "1");
    assert_eq!(local["local_pages"], local["pages"]);
    assert_eq!(local["network_bytes"], 0);
    assert!((2.0..2.5).contains(&isp_local), "ISP-Local at {isp_local} GB/s");
    let (remote, isp_remote) = via("on1", "isp", "0");
    assert_eq!(remote["local_pages"], 0);
    assert_eq!(remote["hops"], 2 * remote["pages"].as_u64().unwrap());
    assert!((0.8..1.03).contains(&isp_remote), "ISP-F over one cable at {isp_remote} GB/s");
    let (host, host_local) = via("on1", "host", "1");
    assert_eq!(host["pcie_up_bytes"], data.len().div_ceil(8192) as u64 * 8192, "whole pages, zeros too");
    assert!((1.3..1.61).contains(&host_local), "Host-Local at {host_local} GB/s");
    // A striped file read from the middle of the line: a third local, two cables in.
    let (mid, isp_mid) = via("striped", "isp", "1");
    let third = mid["pages"].as_u64().unwrap() / 3;
    assert!(mid["local_pages"].as_u64().unwrap().abs_diff(third) <= 1);
    assert!(isp_mid > isp_remote, "two cables and the local flash beat one cable ({isp_mid} GB/s)");
    via("striped", "host", "2");
    // Modeled figures are the same on every run, and with every device in its own process (the remote
    // pages then cross between device servers' sockets).
    assert_eq!(via("striped", "isp", "1").0["modeled_s"], mid["modeled_s"]);
    let out = env.path("over-sockets");
    let r = env.json(&[
        "--transport",
        "process",
        "fs",
        "get",
        "striped",
        "-o",
        s(&out),
        "--via",
        "isp",
        "--from",
        "1",
    ]);
    assert!(std::fs::read(&out).unwrap() == data);
    assert_eq!(r["result"]["via"]["modeled_s"], mid["modeled_s"]);

    // Refused by name: a node past the appliance, --from without --via, an array with no network.
    assert!(env.fails(&["fs", "get", "striped", "-o", "-", "--via", "isp", "--from", "3"]).contains("3"));
    assert!(env.fails(&["fs", "get", "striped", "-o", "-", "--from", "1"]).contains("--via"));
    assert!(env.fails(&["fs", "get", "nope", "-o", "-", "--via", "isp"]).contains("nope"));
}

#[test]
fn put_graph_stores_a_vertex_a_page_with_its_neighbours() {
    let env = appliance("64MiB");
    let edges = env.path("g.txt");
    env.ok(&["gen", "graph500", "--scale", "7", "--edge-factor", "4", "-o", s(&edges)]);
    let r = env.json(&["bluedbm", "put-graph", s(&edges), "--name", "g", "--vertices", "128"]);
    assert_eq!((r["result"]["vertices"].as_u64(), r["result"]["pages"].as_u64()), (Some(128), Some(128)));
    // Each vertex's page holds its neighbours, both ways, sorted, once, without self-loops: against a
    // set built here from the edge file.
    let mut want = vec![std::collections::BTreeSet::new(); 128];
    for line in std::fs::read_to_string(&edges).unwrap().lines() {
        let mut it = line.split(' ').map(|x| x.parse::<u32>().unwrap());
        let (u, v) = (it.next().unwrap(), it.next().unwrap());
        if u != v {
            want[u as usize].insert(v);
            want[v as usize].insert(u);
        }
    }
    let bytes = get(&env, "g");
    assert_eq!(bytes.len(), 128 * 8192);
    for (v, page) in bytes.chunks(8192).enumerate() {
        let w = |i: usize| u32::from_le_bytes(page[4 * i..4 * i + 4].try_into().unwrap());
        let nb: Vec<u32> = (0..w(2) as usize).map(|i| w(4 + i)).collect();
        assert_eq!((w(0), w(1) as usize, w(3)), (v as u32, want[v].len(), u32::MAX));
        assert_eq!(nb, want[v].iter().copied().collect::<Vec<_>>(), "vertex {v}");
    }
    // BFS by node 1's in-store processor, by node 2's host through its device, through the pages' hosts,
    // and from their memory (30% of accesses to their flash): the same levels as a naive BFS here.
    let mut level = vec![u32::MAX; 128];
    let mut queue = std::collections::VecDeque::from([5u32]);
    level[5] = 0;
    while let Some(u) = queue.pop_front() {
        for &v in &want[u as usize] {
            if level[v as usize] == u32::MAX {
                level[v as usize] = level[u as usize] + 1;
                queue.push_back(v);
            }
        }
    }
    let expect: serde_json::Map<String, serde_json::Value> = (0..128)
        .filter(|v| level[*v] != u32::MAX)
        .map(|v| (v.to_string(), serde_json::json!(level[v])))
        .collect();
    let mut modeled = Vec::new();
    let runs = [("isp", "1", "0"), ("host", "2", "0"), ("remote-host", "2", "0"), ("host-dram", "2", "0.3")];
    for (placement, node, share) in runs {
        let b = env.json(&[
            "bluedbm",
            "bfs",
            "g",
            "--from",
            "5",
            "--levels",
            "--placement",
            placement,
            "--node",
            node,
            "--flash-share",
            share,
        ]);
        assert_eq!(b["result"]["reached"].as_u64().unwrap() as usize, expect.len());
        assert_eq!(b["result"]["levels"].as_object().unwrap(), &expect, "{placement}");
        assert!(b["result"]["modeled_s"].as_f64().unwrap() > 0.0);
        modeled.push(b["result"]["modeled_s"].as_f64().unwrap());
    }
    assert!(modeled[1] > modeled[0], "the host's reads cross its PCIe link too: {modeled:?}");
    assert!(modeled[2] > modeled[1], "through the remote hosts, two more PCIe crossings: {modeled:?}");
    // Random walks: every step follows an edge of the file, and every placement takes the same walks.
    let mut walks = Vec::new();
    for placement in ["isp", "host", "remote-host", "host-dram"] {
        let w = env.json(&[
            "bluedbm",
            "walk",
            "g",
            "--from",
            "5",
            "--walks",
            "4",
            "--length",
            "10",
            "--placement",
            placement,
        ]);
        let paths: Vec<Vec<u64>> = w["result"]["walks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect())
            .collect();
        assert_eq!(paths.len(), 4);
        for p in &paths {
            assert_eq!((p.len(), p[0]), (11, 5), "{p:?}");
            for e in p.windows(2) {
                assert!(want[e[0] as usize].contains(&(e[1] as u32)), "{e:?} is no edge");
            }
        }
        assert_eq!(w["result"]["rounds"].as_u64(), Some(10));
        walks.push(paths);
    }
    assert!(walks.iter().all(|w| *w == walks[0]), "the placements took different walks");
    // A flash share is a host-DRAM traversal's, and a share; both refused by name otherwise.
    let err = env.fails(&["bluedbm", "walk", "g", "--placement", "host", "--flash-share", "0.5"]);
    assert!(err.contains("use the host-dram placement"), "{err}");
    let err =
        env.fails(&["bluedbm", "bfs", "g", "--from", "5", "--placement", "host-dram", "--flash-share", "2"]);
    assert!(err.contains("must be 0 to 1"), "{err}");
    // Walks that hold nothing, or more paths than a call keeps, are refused before a page is read.
    for (walks, length, want) in [
        ("0", "3", "at least one walk"),
        ("2", "0", "at least one step"),
        ("2000000", "10", "at most 16777216"),
    ] {
        let err = env.fails(&["bluedbm", "walk", "g", "--walks", walks, "--length", length]);
        assert!(err.contains(want), "{walks} x {length}: {err}");
    }
    // A node whose device server dies in the middle of a traversal: the command fails naming node 1,
    // with no partial answer, and the same walk afterwards gives the same vertices.
    for (what, point) in [("walk", "dev1-command:4"), ("bfs", "dev1-command:3")] {
        let mut args = vec!["--transport", "process", "bluedbm", what, "g", "--from", "5"];
        if what == "walk" {
            args.extend(["--walks", "4", "--length", "10"]);
        }
        let o = env.cmd().args(&args).env("INSITU_CRASH_AT", point).output().unwrap();
        assert!(!o.status.success() && o.stdout.is_empty(), "{what} must fail without an answer");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("node 1") || err.contains("device 1"), "{what}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let w = env.json(&["bluedbm", "walk", "g", "--from", "5", "--walks", "4", "--length", "10"]);
    assert_eq!(w["result"]["walks"].as_array().unwrap().len(), 4);
    assert_eq!(
        w["result"]["walks"][0].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect::<Vec<_>>(),
        walks[0][0]
    );
    let err = env.fails(&["bluedbm", "bfs", "g", "--from", "500"]);
    assert!(err.contains("no vertex 500"), "{err}");
    // A file that is not a stored graph (here the edge list itself) is refused as such, by name.
    env.ok(&["fs", "put", s(&edges), "--name", "edges"]);
    for what in ["bfs", "walk"] {
        let err = env.fails(&["bluedbm", what, "edges", "--from", "0"]);
        assert!(err.contains("edges is not a graph stored by `insitu bluedbm put-graph`"), "{what}: {err}");
    }
    // Ids past --vertices are refused by name, and nothing is stored.
    let err = env.fails(&["bluedbm", "put-graph", s(&edges), "--name", "g2", "--vertices", "100"]);
    assert!(err.contains("past the graph's 100 vertices"), "{err}");
    assert!(!names(&env).contains(&"g2".to_string()));
}

#[test]
fn a_hub_spills_into_more_pages_and_bfs_follows_them() {
    let env = appliance("64MiB");
    // Vertex 0 has 3,000 neighbours: an 8 KiB page holds 2,044, the rest go to a spill page.
    let star: String = (1..=3000).map(|v| format!("0 {v}\n")).collect();
    let edges = env.write("star.txt", star.as_bytes());
    let r = env.json(&["bluedbm", "put-graph", s(&edges), "--name", "star"]);
    assert_eq!((r["result"]["pages"].as_u64(), r["result"]["spill_pages"].as_u64()), (Some(3002), Some(1)));
    let b = env.json(&["bluedbm", "bfs", "star", "--from", "7", "--levels"]);
    assert_eq!((b["result"]["reached"].as_u64(), b["result"]["depth"].as_u64()), (Some(3001), Some(2)));
    let levels = b["result"]["levels"].as_object().unwrap();
    assert_eq!(
        (levels["0"].as_u64(), levels["2999"].as_u64(), levels["7"].as_u64()),
        (Some(1), Some(2), Some(0))
    );
    // Rounds: 7's page; 0's page, then its spill page; the leaves' pages.
    assert_eq!(b["result"]["rounds"].as_u64(), Some(4));
    // Page 3001 is the hub's spill page, not a vertex: refused as such, not as damage.
    for what in ["bfs", "walk"] {
        let err = env.fails(&["bluedbm", what, "star", "--from", "3001"]);
        assert!(err.contains("no vertex 3001") && !err.contains("damaged"), "{err}");
    }
    // Walks through the hub pick neighbours on its spill page too (a round more for those steps): each
    // step alternates between the hub and a leaf, as the star has it.
    let w = env.json(&["bluedbm", "walk", "star", "--from", "7", "--walks", "20", "--length", "3"]);
    let paths = w["result"]["walks"].as_array().unwrap();
    let mut far = 0;
    for p in paths {
        let p: Vec<u64> = p.as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!((p[0], p[1], p[3]), (7, 0, 0), "{p:?}");
        assert!((1..=3000).contains(&p[2]), "{p:?}");
        far += (p[2] > 2044) as u32;
    }
    assert!(far > 0, "some pick lies on the spill page");
    assert_eq!(
        w["result"]["rounds"].as_u64(),
        Some(4),
        "the hub's step needs its spill page: one round more"
    );
    // A page whose next spill page is itself or one before it (a loop; put-graph's spill pages only go
    // forward) is damage, named, where it was followed for ever.
    for (name, next) in [("self", 0u32), ("back", 1)] {
        let mut page = vec![0u8; 8192];
        let words = |p: &mut Vec<u8>, at: usize, ws: &[u32]| {
            for (i, w) in ws.iter().enumerate() {
                p[at + 4 * i..at + 4 * i + 4].copy_from_slice(&w.to_le_bytes());
            }
        };
        // Two pages: vertex 0 (degree 3, none here) spills to page 1, which goes on to `next`.
        words(&mut page, 0, &[0, 3, 0, 1]);
        let mut spill = vec![0u8; 8192];
        words(&mut spill, 0, &[0, 3, 1, next, 1]);
        page.extend(spill);
        let f = env.write(name, &page);
        env.ok(&["fs", "put", s(&f)]);
        for what in ["bfs", "walk"] {
            let err = env.fails(&["bluedbm", what, name, "--from", "0"]);
            assert!(err.contains("spill pages only go forward"), "{name} {what}: {err}");
        }
    }
}

/// Bytes the flash images of the appliance hold on the host's disk.
fn image_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        if m.is_dir() {
            n += image_bytes(&e.path());
        } else if e.file_name() == "nand.img" {
            n += m.blocks() * 512;
        }
    }
    n
}

#[test]
fn collecting_a_removed_files_blocks_lets_the_next_writes_reuse_their_disk_space() {
    let env = appliance("8MiB");
    // The blocks a file's pages are in: (node, card, bus, chip, block).
    let blocks = |name: &str| -> std::collections::BTreeSet<Vec<u64>> {
        let r = env.json(&["fs", "pages", name]);
        let field = |p: &serde_json::Value, k: &str| p[k].as_u64().unwrap();
        r["result"]["pages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| ["node", "card", "bus", "chip", "block"].iter().map(|k| field(p, k)).collect())
            .collect()
    };
    // A few pages a chip: every block the file touches is still a write point when it is removed.
    let f = env.write("f", &text(400_000, 4, b"gh"));
    env.ok(&["fs", "put", s(&f)]);
    let first = blocks("f");
    let held = image_bytes(&env.data());
    env.ok(&["fs", "rm", "f"]);
    let gc = env.json(&["fs", "gc"]);
    assert_eq!(gc["result"]["erased_blocks"].as_u64().unwrap(), first.len() as u64, "{gc}");
    assert_eq!(gc["result"]["stats"]["dead_pages"], 0, "{gc}");
    // The erases are counted (the report's flash work) and their counts outlive the process (wear).
    assert_eq!(gc["ops"]["flash_erase_blocks"].as_u64(), Some(first.len() as u64), "{gc}");
    let stats = env.json(&["stats"]);
    let erases: u64 = stats["result"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["raw_flash"]["erases"].as_u64().unwrap())
        .sum();
    assert_eq!(erases, first.len() as u64, "erase counts kept across processes");
    // The next file goes to the erased blocks, in the space the images already hold.
    let g = env.write("g", &text(400_000, 5, b"ij"));
    env.ok(&["fs", "put", s(&g)]);
    assert!(blocks("g").is_subset(&first), "the erased blocks are taken first");
    // Its pages fall a little differently over the chips (a page or two past where the first file's ended
    // in a block), but the images do not grow by the file: it lands on disk space they already held.
    let grew = image_bytes(&env.data()) - held;
    assert!(grew < 400_000 / 10, "the images grew by {grew} bytes for a file of 400000");
    assert_eq!(get(&env, "g"), text(400_000, 5, b"ij"));
}

#[test]
fn removing_gives_back_the_disk_space_of_a_files_pages_in_blocks_it_shares() {
    let env = appliance("8MiB");
    // Two files a few pages a chip each: the second's pages follow the first's in the same blocks.
    let (f, g) = (text(300_000, 6, b"kl"), text(300_000, 7, b"mn"));
    env.ok(&["fs", "put", s(&env.write("f", &f))]);
    env.ok(&["fs", "put", s(&env.write("g", &g))]);
    let pages = env.json(&["fs", "pages", "f"])["result"]["pages"].as_array().unwrap().len() as u64;
    let held = image_bytes(&env.data());
    env.ok(&["fs", "rm", "f"]);
    // No block is all dead (g lives in each), so none can be erased: removing gives f's pages' space back.
    let freed = held - image_bytes(&env.data());
    assert!(freed >= pages * 8192, "gave back {freed} bytes for {pages} pages");
    let gc = env.json(&["fs", "gc"]);
    assert_eq!(gc["result"]["erased_blocks"], 0, "{gc}");
    assert_eq!(gc["result"]["discarded_pages"].as_u64().unwrap(), pages, "{gc}");
    assert_eq!(gc["result"]["stats"]["dead_pages"].as_u64().unwrap(), pages, "still programmed: {gc}");
    assert_eq!(get(&env, "g"), g);
    // Those pages stay out of everything read, and cleaning still works around them.
    env.ok(&["fs", "rm", "g"]);
    let gc = env.json(&["fs", "gc"]);
    assert!(gc["result"]["erased_blocks"].as_u64().unwrap() > 0, "{gc}");
    assert_eq!(gc["result"]["stats"]["dead_pages"], 0, "{gc}");
    env.ok(&["fs", "put", s(&env.write("h", &f)), "--name", "h"]);
    assert_eq!(get(&env, "h"), f);
}

/// Flips a byte of whichever node's raw image holds `slice` (bytes of one file page); returns the node.
fn damage(env: &Env, slice: &[u8]) -> u32 {
    for node in 0..3 {
        let path = env.data().join(format!("dev{node}/raw/nand.img"));
        let mut image = std::fs::read(&path).unwrap();
        if let Some(at) = image.windows(slice.len()).position(|w| w == slice) {
            image[at + 10] ^= 0xff;
            std::fs::write(&path, image).unwrap();
            return node;
        }
    }
    panic!("no image holds the slice")
}

#[test]
fn fsck_reads_every_page_of_every_file_and_names_a_damaged_one() {
    let env = appliance("8MiB");
    let (a, b) = (text(200_000, 1, b"alpha"), text(300_000, 2, b"beta"));
    env.ok(&["fs", "put", s(&env.write("a", &a))]);
    env.ok(&["fs", "put", s(&env.write("b", &b))]);
    let clean = env.ok(&["fsck"]);
    assert!(
        clean.contains("clean") && clean.contains("file system: 2 file(s), 62 page(s) read back"),
        "{clean}"
    );
    // A byte of b's changed on its node's flash: fsck names the file, the page and the node (exit 2).
    let node = damage(&env, &b[100_000..104_000]);
    let o = env.run(&["fsck"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("1 problem(s)") && out.contains("file \"b\" is damaged: page 12"), "{out}");
    assert!(out.contains(&format!("on node {node}")) && out.contains("`insitu fs rm b` removes it"), "{out}");
    // Reads name it too, whoever reads; the other file reads whole.
    for args in [&["fs", "get", "b"][..], &["fs", "get", "b", "--via", "isp", "--from", "0"]] {
        let err = env.fails(args);
        assert!(
            err.contains("file \"b\" is damaged: page 12") && err.contains(&format!("on node {node}")),
            "{err}"
        );
    }
    assert_eq!(get(&env, "a"), a);
    env.ok(&["fs", "rm", "b"]);
    assert!(env.ok(&["fsck"]).contains("clean"));
    // A node's raw partition gone is said so (not that the profile lacks a raw interface).
    std::fs::remove_dir_all(env.data().join("dev1/raw")).unwrap();
    let o = env.run(&["fsck"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("raw flash partition") && out.contains("is missing"), "{out}");
    let err = env.fails(&["fs", "ls"]);
    assert!(err.contains("is missing") && !err.contains("no raw flash interface"), "{err}");
}

#[test]
fn a_put_that_cannot_fit_is_refused_before_it_writes() {
    let env = appliance("2MiB");
    let before = env.json(&["fs", "ls"])["result"].clone();
    let big = env.write("big", &text(40 << 20, 3, b"xy"));
    let err = env.fails(&["fs", "put", s(&big)]);
    assert!(err.contains("the file system is full") && err.contains("needs 5120 page(s)"), "{err}");
    assert_eq!(env.json(&["fs", "ls"])["result"], before, "nothing written");
    let edges = env.write("edges", b"0 1\n1 2\n");
    let err = env.fails(&["bluedbm", "put-graph", s(&edges), "--name", "g", "--vertices", "2000000"]);
    assert!(err.contains("the file system is full"), "{err}");
    assert_eq!(env.json(&["fs", "ls"])["result"], before, "nothing written");
}

#[test]
fn the_appliance_says_what_it_holds_and_what_was_wrong() {
    // A capacity below a block a chip is rounded up by the geometry, and said so; stats shows each node's
    // raw flash beside its FTL.
    let env = Env::new();
    let o = env.run(&[
        "init",
        "--nodes",
        "2",
        "--topology",
        "line",
        "--profile",
        "bluedbm",
        "--capacity",
        "8MiB",
    ]);
    assert!(o.status.success());
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("of 238.00 MiB each"), "{out}");
    assert!(err.contains("8.00 MiB asked, 238.00 MiB a device") && err.contains("128 chips"), "{err}");
    let hay = env.write("hay", &text(100_000, 4, b"ab\xff\n"));
    env.ok(&["fs", "put", s(&hay)]);
    let stats = env.ok(&["stats"]);
    assert!(stats.contains("dev1 raw flash (file system): ") && stats.contains("of 256.00 MiB"), "{stats}");
    // A needle of any bytes; the count is a naive scan's.
    let bytes = text(100_000, 4, b"ab\xff\n");
    let want = bytes.windows(2).filter(|w| *w == b"\xffa").count();
    use std::os::unix::ffi::OsStrExt;
    let needle = std::ffi::OsStr::from_bytes(b"\xffa");
    let o = env.cmd().args(["--json", "bluedbm", "search", "hay"]).arg(needle).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["result"]["count"].as_u64(), Some(want as u64));
    // fs get to stdout with --json: the data on stdout, its JSON on stderr, reads named in kebab case.
    let o = env.cmd().args(["--json", "fs", "get", "hay", "--via", "isp"]).output().unwrap();
    assert_eq!(o.stdout, bytes);
    let r: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(
        (r["result"]["size"].as_u64(), r["result"]["via"]["access"].as_str()),
        (Some(100_000), Some("isp-flash"))
    );
    // Arguments refused by what they are.
    let bin = env.write("bin", &[1, 0, 0, 0, 2, 0, 0, 0]);
    for (args, want) in [
        (&["bluedbm", "put-graph", s(&bin), "--name", "g"][..], "--format u32le"),
        (&["bluedbm", "search", "hay", "ab", "--threads", "0"], "0 is not in 1..=1024"),
        (&["bluedbm", "search", "hay", "ab", "--throttle", "0.5"], "--throttle 0.5 reads as 1 B a second"),
        (&["fs", "get", "hay", "-o", "/nonexistent/x"], "/nonexistent does not exist"),
    ] {
        let err = env.fails(args);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn the_listing_and_page_table_need_no_node_and_reads_need_only_their_own() {
    let env = appliance("8MiB");
    for (name, node) in [("here", "0"), ("there", "2")] {
        let f = env.write(name, &text(20_000, 3, b"xy"));
        env.ok(&["fs", "put", s(&f), "--node", node]);
    }
    let pages = env.ok(&["fs", "pages", "there"]);
    let fs_files = || -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(env.data().join("fs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = fs_files();
    let node2 = env.data().join("dev2");
    let away = env.path("dev2.away");
    std::fs::rename(&node2, &away).unwrap();
    let r = env.json(&["fs", "ls"]);
    assert_eq!(r["result"]["offline"], serde_json::json!([2]));
    assert!(r["result"]["stats"].is_null());
    let listed: Vec<&str> =
        r["result"]["files"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(listed, ["here", "there"]);
    let text = env.ok(&["fs", "ls"]);
    assert!(text.contains("there  (pages on offline node 2)") && text.contains(" here\n"), "{text}");
    assert_eq!(env.ok(&["fs", "pages", "there"]), pages);
    let err = env.fails(&["fs", "pages", "nope"]);
    assert!(err.contains("nope"), "{err}");
    assert!(fs_files() == before, "listing without the nodes wrote to the file system's index or journal");
    // A file on the nodes that are up reads back; one with pages on the node that is down, or a change,
    // is refused naming it.
    env.ok(&["fs", "get", "here", "-o", s(&env.path("out"))]);
    assert_eq!(std::fs::read(env.path("out")).unwrap(), crate::text(20_000, 3, b"xy"));
    let err = env.fails(&["fs", "get", "there", "-o", s(&env.path("out2"))]);
    assert!(err.contains("device 2"), "{err}");
    let err = env.fails(&["fs", "put", s(&env.path("here")), "--name", "more", "--node", "0"]);
    assert!(err.contains("device 2") && err.contains("no change"), "{err}");
    std::fs::rename(&away, &node2).unwrap();
    assert_eq!(names(&env), ["here", "there"]);
    let r = env.json(&["fs", "ls"]);
    assert!(
        r["result"]["stats"]["files"].as_u64() == Some(2) && r["result"]["offline"] == serde_json::json!([])
    );
    env.ok(&["fsck"]);
}

/// `fs gc` cleans the closed blocks at least half dead (§4's segment cleaning, run by hand): their live
/// pages move to their bus's write points and the blocks are erased, so the flash of removed files comes
/// back without waiting for a put to need it. Blocks mostly live, and write points, are left.
#[test]
fn gc_cleans_blocks_at_least_half_dead_and_keeps_every_live_byte() {
    let env = appliance("8MiB");
    // Four files a page a chip in turn: every closed block holds pages of each.
    let files: Vec<Vec<u8>> = (0..4).map(|i| text(1_000_000, 60 + i, b"0123456789")).collect();
    for (i, f) in files.iter().enumerate() {
        env.ok(&["fs", "put", s(&env.write("f", f)), "--name", &format!("f{i}")]);
    }
    let stats = |env: &Env| env.json(&["fs", "ls"])["result"]["stats"].clone();
    // One removed: its blocks are a quarter dead, none is cleaned.
    env.ok(&["fs", "rm", "f0"]);
    let gc = env.json(&["fs", "gc"]);
    assert_eq!(gc["result"]["cleaned_blocks"], 0, "{gc}");
    // Three removed: three quarters dead, cleaned.
    env.ok(&["fs", "rm", "f1"]);
    env.ok(&["fs", "rm", "f2"]);
    let before = stats(&env);
    let gc = env.json(&["fs", "gc"]);
    let (cleaned, moved) =
        (gc["result"]["cleaned_blocks"].as_u64().unwrap(), gc["result"]["moved_pages"].as_u64().unwrap());
    assert!(cleaned > 0 && moved > 0, "{gc}");
    let after = stats(&env);
    let dead = |s: &serde_json::Value| s["dead_pages"].as_u64().unwrap();
    let free = |s: &serde_json::Value| s["free_blocks"].as_u64().unwrap();
    assert!(dead(&after) < dead(&before), "{before} -> {after}");
    assert!(free(&after) > free(&before), "{before} -> {after}");
    // Each cleaned block held at most half its pages live.
    assert!(moved * 2 <= cleaned * 16, "{gc}");
    assert_eq!(get(&env, "f3"), files[3]);
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}
