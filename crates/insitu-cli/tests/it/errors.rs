use std::os::unix::fs::FileExt;

use insitu_host::{Array, OpenOptions};

use crate::{s, text, Env};

#[test]
fn missing_unreadable_and_directory_inputs_are_named() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let err = env.fails(&["put", s(&env.path("nope.bin"))]);
    assert!(err.contains("nope.bin") && err.contains("No such file"), "{err}");
    let err = env.fails(&["put", s(env.dir.path()), "--name", "d"]);
    assert!(err.contains("is a directory"), "{err}");
    let f = env.write("secret", b"x");
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    if std::fs::read(&f).is_err() {
        // (root can read anything; the check only means something for other users)
        let err = env.fails(&["put", s(&f)]);
        assert!(err.contains("secret"), "{err}");
    }
}

#[test]
fn an_output_inside_the_array_is_refused_and_its_devices_keep_their_data() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let big = text(200 << 10, 3, b"abc");
    let f = env.write("big", &big);
    env.ok(&["put", s(&f)]);
    for inside in ["dev0/nand.img", "dev1/nand.oob", "catalog.json", "new.bin"] {
        let err = env.fails(&["get", "big", "-o", s(&env.data().join(inside))]);
        assert!(err.contains("inside the array"), "{inside}: {err}");
    }
    // Generators' outputs too.
    let img = env.data().join("dev1/nand.img");
    let err = env.fails(&["gen", "text", "--size", "1KB", "-o", s(&img)]);
    assert!(err.contains("inside the array"), "{err}");
    let oob = env.data().join("dev1/nand.oob");
    let err = env.fails(&[
        "gen",
        "lists",
        "--size1",
        "100",
        "--size2",
        "1000",
        "--out1",
        s(&img),
        "--out2",
        s(&oob),
    ]);
    assert!(err.contains("inside the array"), "{err}");
    assert_eq!(env.run(&["get", "big"]).stdout, big);
    assert!(env.ok(&["fsck"]).contains("clean"));
}

#[test]
fn bad_names_and_duplicates_are_refused() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let f = env.write("x", b"data");
    for (name, why) in [
        ("", "empty"),
        (" ", "blank"),
        ("a/b", "separator"),
        ("..", "'..'"),
        ("../etc", "separator"),
        ("x..y", "'..'"),
    ] {
        let err = env.fails(&["put", s(&f), "--name", name]);
        assert!(err.contains(why), "{name:?}: {err}");
    }
    let long = "n".repeat(300);
    assert!(env.fails(&["put", s(&f), "--name", &long]).contains("longer than 255"));
    env.ok(&["put", s(&f), "--name", "x"]);
    assert!(env.fails(&["put", s(&f), "--name", "x"]).contains("already exists"));
    assert_eq!(env.run(&["get", "x"]).stdout, b"data", "the first object is untouched");
}

#[test]
fn unknown_objects_devices_profiles_and_arrays_are_named() {
    let env = Env::new();
    let err = env.fails(&["ls"]);
    assert!(err.contains("no array") && err.contains("insitu init"), "{err}");
    let err = env.fails(&["init", "--profile", "nosuch"]);
    assert!(err.contains("nosuch") && err.contains("smartssd"), "{err}");
    let bad = env.write("bad.toml", b"name = \"bad\"\n");
    assert!(env.fails(&["init", "--profile", s(&bad)]).contains("invalid profile"));
    let broken =
        include_str!("../../../../profiles/tiny.toml").replace("memory_bw = 10.0e9", "memory_bw = 0.0");
    let p = env.write("broken.toml", broken.as_bytes());
    assert!(env.fails(&["init", "--profile", s(&p)]).contains("device.memory_bw"));
    // A directory holding other files: the array goes beside them, and init says so.
    std::fs::create_dir_all(env.data()).unwrap();
    std::fs::write(env.data().join("notes.txt"), b"mine").unwrap();
    let o = env.run(&["init", "--devices", "2", "--profile", "tiny"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("held 1 other entry (notes.txt)"), "{err}");
    assert_eq!(std::fs::read(env.data().join("notes.txt")).unwrap(), b"mine");
    assert!(env.fails(&["init", "--profile", "tiny"]).contains("already exists"));
    assert!(env.fails(&["get", "ghost"]).contains("no object named \"ghost\""));
    assert!(env.fails(&["search", "ghost", "x"]).contains("ghost"));
    assert!(env.fails(&["rm", "ghost"]).contains("ghost"));
    let f = env.write("x", b"data");
    let err = env.fails(&["put", s(&f), "--device", "7"]);
    assert!(err.contains("no device 7"), "{err}");
    assert!(
        env.fails(&["search", "x", ""]).contains("no object")
            || env.fails(&["search", "x", ""]).contains("empty")
    );
    env.ok(&["put", s(&f)]);
    assert!(env.fails(&["search", "x", ""]).contains("empty"));
}

#[test]
fn a_full_device_fails_clearly_and_keeps_earlier_objects() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny", "--capacity", "2MiB"]);
    let first = text(1_500_000, 4, b"xyz");
    let f1 = env.write("first", &first);
    env.ok(&["put", s(&f1)]);
    let f2 = env.write("second", &text(3_000_000, 5, b"xyz"));
    let err = env.fails(&["put", s(&f2)]);
    assert!(err.contains("device full"), "{err}");
    assert_eq!(env.run(&["get", "first"]).stdout, first);
    assert_eq!(env.json(&["ls"])["result"]["objects"].as_array().unwrap().len(), 1);
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

#[test]
fn a_second_process_is_refused_while_the_array_is_open() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let held = Array::open(&env.data(), OpenOptions::default()).unwrap();
    let err = env.fails(&["ls", "--wait", "0"]);
    assert!(err.contains("in use by another insitu process"), "{err}");
    // A script can tell "busy, try again" (exit 75, kind "locked") from a failure.
    let o = env.run(&["--json", "ls", "--wait", "0"]);
    let e: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((o.status.code(), e["kind"].as_str()), (Some(75), Some("locked")), "{e}");
    // By default a command waits a while for the other process, saying so.
    let mut waiting =
        env.cmd().args(["ls", "--wait", "20"]).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let mut said = String::new();
    let mut err = std::io::BufReader::new(waiting.stderr.take().unwrap());
    std::io::BufRead::read_line(&mut err, &mut said).unwrap();
    assert!(said.contains("waiting up to 20 s"), "{said}");
    held.close().unwrap();
    assert!(waiting.wait().unwrap().success());
    env.ok(&["ls"]);
}

#[test]
fn deleting_files_in_the_data_directory_does_not_let_a_second_writer_in() {
    use std::io::Write;
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    // A put from a FIFO waits for its writer's first bytes with the array closed (a writer that has not
    // started keeps no one out), then holds the array open for as long as its writer keeps the FIFO open.
    let fifo = env.path("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let mut first = env.cmd().args(["put", s(&fifo), "--name", "slow"]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    env.ok(&["ls", "--wait", "0"]);
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    w.write_all(&text(50_000, 1, b"ab")).unwrap();
    // Once it has the bytes it takes the array.
    let taken = (0..1000).any(|_| {
        let o = env.run(&["ls", "--wait", "0"]);
        std::thread::sleep(std::time::Duration::from_millis(10));
        !o.status.success()
    });
    assert!(taken, "the put never took the array");
    // Whatever lock file a user might remove, the second writer is still refused.
    let _ = std::fs::remove_file(env.data().join("LOCK"));
    let other = env.write("other", b"other bytes");
    let err = env.fails(&["put", s(&other), "--wait", "0.2"]);
    assert!(err.contains("in use by another insitu process"), "{err}");
    w.write_all(&text(50_000, 2, b"ab")).unwrap();
    drop(w);
    assert!(first.wait().unwrap().success());
    let mut want = text(50_000, 1, b"ab");
    want.extend(text(50_000, 2, b"ab"));
    assert_eq!(env.run(&["get", "slow"]).stdout, want);
    env.ok(&["put", s(&other)]);
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

#[test]
fn a_corrupted_image_page_is_named_by_fsck_and_get_fails_cleanly() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let f = env.write("victim", &text(300_000, 6, b"abcdef"));
    env.ok(&["put", s(&f)]);
    // Flip bytes in the first programmed block of device 0 (a 300 KB object fits in its first 4 MiB stripe).
    let img = std::fs::OpenOptions::new().write(true).open(env.data().join("dev0/nand.img")).unwrap();
    img.write_all_at(b"garbage!", 5000).unwrap();
    let o = env.run(&["fsck"]);
    assert_eq!(o.status.code(), Some(2));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("dev0") && out.contains("checksum"), "{out}");
    // The failed get leaves the file it would have replaced as it was, and no partial file beside it.
    let out = env.write("out", b"an earlier file");
    let err = env.fails(&["get", "victim", "-o", s(&out)]);
    assert!(err.contains("corrupted data") && err.contains("checksum"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"an earlier file");
    let mut names: Vec<_> = std::fs::read_dir(env.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["array", "out", "victim"]);
}

/// A raw read takes a page's head alone (the bytes up to its last nonzero 64); the FTL's reads and `fsck`
/// check pages whole, on a profile whose FTL runs on the raw interface too: a byte changed after a page's
/// head is found and named, and the get fails cleanly.
#[test]
fn a_byte_changed_after_a_pages_head_is_found_by_fsck_on_the_raw_interface() {
    let env = Env::new();
    env.init(&["--devices", "1", "--profile", "bluedbm", "--capacity", "256MiB"]);
    // 300,000 bytes: the last 8 KiB page holds 5,088 of them, its head 5,120.
    let f = env.write("victim", &text(300_000, 6, b"abcdef"));
    env.ok(&["put", s(&f)]);
    let oob = std::fs::read(env.data().join("dev0/nand.oob")).unwrap();
    let heads: Vec<(usize, usize)> = oob
        .chunks_exact(16)
        .enumerate()
        .filter(|(_, r)| &r[14..16] == b"B2")
        .map(|(p, r)| (p, u16::from_le_bytes([r[12], r[13]]) as usize * 64))
        .filter(|&(_, h)| h < 8192)
        .collect();
    assert_eq!(heads.iter().map(|h| h.1).collect::<Vec<_>>(), vec![5120], "{heads:?}");
    let img = std::fs::OpenOptions::new().write(true).open(env.data().join("dev0/nand.img")).unwrap();
    img.write_all_at(b"garbage!", heads[0].0 as u64 * 8192 + 8000).unwrap();
    let o = env.run(&["fsck"]);
    assert_eq!(o.status.code(), Some(2));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("dev0") && out.contains("checksum"), "{out}");
    let err = env.fails(&["get", "victim", "-o", s(&env.path("out"))]);
    assert!(err.contains("checksum"), "{err}");
    assert!(!env.path("out").exists());
}

#[test]
fn corrupted_metadata_is_named_without_a_panic_and_takes_only_its_device_offline() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny", "--stripe-unit", "4KiB"]);
    let data = text(10_000, 7, b"ab");
    let f = env.write("x", &data);
    env.ok(&["put", s(&f)]);
    env.ok(&["put", s(&f), "--name", "on0", "--device", "0"]);
    env.ok(&["put", s(&f), "--name", "on1", "--device", "1"]);
    let flip = |file: &str| {
        let p = env.data().join(file);
        let good = std::fs::read(&p).unwrap();
        let mut bad = good.clone();
        let i = bad.len() - 2;
        bad[i] ^= 0x21;
        std::fs::write(&p, &bad).unwrap();
        (p, good)
    };
    // One copy of a device's checkpoint: the other stands in and the damaged one is rewritten.
    let (p, good) = flip("dev0/checkpoint");
    let o = env.run(&["ls"]);
    assert!(o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("offline"));
    assert_eq!(std::fs::read(&p).unwrap(), good, "mended from its copy");
    // So is one copy of the array's catalog or configuration (the damaged file kept beside it), or one
    // gone: the array opens whole, and says what it mended.
    for file in ["catalog.json", "array.json"] {
        let (p, good) = flip(file);
        let o = env.run(&["ls"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && err.contains("restored from its second copy"), "{file}: {err}");
        assert_eq!(std::fs::read(&p).unwrap(), good, "{file}: mended from its copy");
        assert!(env.data().join(format!("{file}.damaged")).exists(), "{file}: the damaged file is kept");
        assert_eq!(env.run(&["get", "on0"]).stdout, data, "{file}");
        std::fs::remove_file(&p).unwrap();
        let o = env.run(&["ls"]);
        assert!(o.status.success() && String::from_utf8_lossy(&o.stderr).contains("No such file"), "{file}");
        assert_eq!(std::fs::read(&p).unwrap(), good, "{file}: made again from its copy");
    }
    for (files, dev) in [
        (&["dev0/checkpoint", "dev0/checkpoint.b"][..], Some(0)),
        (&["dev1/superblock", "dev1/superblock.b"], Some(1)),
        (&["catalog.json", "catalog.b.json"], None),
    ] {
        let file = files[0];
        let saved: Vec<_> = files.iter().map(|f| flip(f)).collect();
        match dev {
            // One bad device: the array opens without it, reads what does not need it, names it.
            Some(d) => {
                let o = env.run(&["ls"]);
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(o.status.success(), "{file}: {err}");
                assert!(
                    err.contains(&format!("device {d} is offline")) && err.contains("checksum"),
                    "{file}: {err}"
                );
                let healthy = if d == 0 { "on1" } else { "on0" };
                assert_eq!(env.run(&["get", healthy]).stdout, data, "{file}");
                let err = env.fails(&["get", "x"]);
                assert!(err.contains(&format!("device {d} is offline")), "{file}: {err}");
            }
            None => {
                let err = env.fails(&["ls"]);
                assert!(err.contains("corrupted") && err.contains("checksum"), "{file}: {err}");
                assert!(err.contains("its second copy"), "{file}: both copies are named: {err}");
            }
        }
        let o = env.run(&["fsck"]);
        let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{file}: fsck must fail");
        assert!(out.contains("checksum") && !out.contains("panicked"), "{file}: {out}");
        for (p, good) in saved {
            std::fs::write(&p, &good).unwrap();
        }
    }
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

#[test]
fn a_failed_init_leaves_nothing_it_made_and_keeps_what_was_there() {
    let env = Env::new();
    let err = env.fails(&["init", "--devices", "2", "--profile", "tiny", "--capacity", "4KiB"]);
    assert!(err.contains("smaller than one erase block"), "{err}");
    assert!(!env.data().exists(), "the directory init made is gone");
    // Device 1's place is taken by a user's file: refused by name before any device is formatted.
    std::fs::create_dir_all(env.data()).unwrap();
    std::fs::write(env.data().join("dev1"), b"mine").unwrap();
    let err = env.fails(&["init", "--devices", "2", "--profile", "tiny"]);
    assert!(err.contains("already holds") && err.contains("dev1"), "{err}");
    let mut left: Vec<_> = std::fs::read_dir(env.data())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, vec!["dev1"]);
    assert_eq!(std::fs::read(env.data().join("dev1")).unwrap(), b"mine");
    std::fs::remove_file(env.data().join("dev1")).unwrap();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
    // An array in a device's directory, or below it, would mix its files with the device's.
    let dev0 = env.data().join("dev0");
    for (dir, want) in
        [(dev0.clone(), "is a device's directory"), (dev0.join("sub"), "inside the device directory")]
    {
        let err = env.fails(&["--data", s(&dir), "init", "--devices", "1", "--profile", "tiny"]);
        assert!(err.contains(want), "{err}");
    }
    assert!(!dev0.join("array.json").exists() && !dev0.join("sub").exists());
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

/// Copies directory `from` to `to` (as a user restoring a backup would).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    let _ = std::fs::remove_dir_all(to);
    assert!(std::process::Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap().success());
}

#[test]
fn an_older_catalog_keeps_the_parts_it_does_not_know_in_quarantine_instead_of_deleting_them() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny", "--stripe-unit", "4KiB"]);
    let a = text(30_000, 1, b"ab");
    env.ok(&["put", s(&env.write("a", &a)), "--name", "a"]);
    let old = env.path("catalog.old");
    std::fs::copy(env.data().join("catalog.json"), &old).unwrap();
    let b = text(30_000, 2, b"cd");
    env.ok(&["put", s(&env.write("b", &b)), "--name", "b"]);
    std::fs::copy(&old, env.data().join("catalog.json")).unwrap();
    // The next command says what it found and deletes nothing.
    let o = env.run(&["ls"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("catalog.json is older than the devices"), "{err}");
    assert!(err.contains("kept 2 part(s)") && err.contains("dev0:b") && err.contains("dev1:b"), "{err}");
    let o = env.run(&["--json", "fsck"]);
    assert_eq!(o.status.code(), Some(2));
    let fsck: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let problems = fsck["result"]["problems"].to_string();
    assert!(problems.contains("kept in quarantine") && problems.contains("\\\"b\\\""), "{problems}");
    // The parts are still on the devices, and their name is not handed out again by mistake.
    let err = env.fails(&["put", s(&env.path("a")), "--name", "b"]);
    assert!(err.contains("quarantine"), "{err}");
    assert_eq!(env.run(&["get", "a"]).stdout, a);
    // With the user's word, repair puts back what its parts describe whole: a blob, a table, a sort's
    // output (sorted by a column stored row-wise) and a shuffle's, each part carrying its description;
    // parts that describe nothing whole are removed.
    let before_table = env.path("catalog.old2");
    std::fs::copy(env.data().join("catalog.json"), &before_table).unwrap();
    let csv = b"k,v,w\n1,x,3\n2,y,\n3,z,1\n4,,2\n";
    env.ok(&["put-table", s(&env.write("t.csv", csv)), "--name", "t", "--key", "k"]);
    env.ok(&["sort", "t", "--key", "w", "--out", "t.w"]);
    env.ok(&["shuffle", "t", "--key", "v", "--partitions", "3", "--out", "t.sh"]);
    let want = |args: &[&str]| env.run(args).stdout;
    let t_before = want(&["--json", "get-table", "t.w", "--merged", "-o", s(&env.path("w1.parquet"))]);
    let sh_before = want(&["shuffle-read", "t.sh", "--partition", "1", "-o", s(&env.path("p1.parquet"))]);
    assert!(!t_before.is_empty() && !sh_before.is_empty());
    env.ok(&["put", s(&env.write("orphan", b"lone")), "--name", "lone", "--device", "1"]);
    std::fs::copy(&before_table, env.data().join("catalog.json")).unwrap();
    env.ok(&["ls"]);
    let o = env.run(&["fsck", "--repair"]);
    let said = String::from_utf8_lossy(&o.stderr);
    // b went over the devices from device 1, the one holding fewer bytes (a lies first on device 0).
    assert!(said.contains("restored object b (blob, 30000 bytes on device(s) [1, 0])"), "{said}");
    for (name, kind) in [("t", "table"), ("t.w", "table"), ("t.sh", "shuffle")] {
        assert!(said.contains(&format!("restored object {name} ({kind}, ")), "{name}: {said}");
    }
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
    assert_eq!(env.run(&["get", "b"]).stdout, b);
    assert_eq!(env.run(&["get", "a"]).stdout, a);
    assert_eq!(env.run(&["get", "lone"]).stdout, b"lone");
    // The restored tables read back as they were written.
    env.ok(&["get-table", "t.w", "--merged", "-o", s(&env.path("w2.parquet"))]);
    assert_eq!(
        std::fs::read(env.path("w1.parquet")).unwrap(),
        std::fs::read(env.path("w2.parquet")).unwrap()
    );
    env.ok(&["shuffle-read", "t.sh", "--partition", "1", "-o", s(&env.path("p2.parquet"))]);
    assert_eq!(
        std::fs::read(env.path("p1.parquet")).unwrap(),
        std::fs::read(env.path("p2.parquet")).unwrap()
    );
    env.ok(&["get-table", "t", "-o", s(&env.path("t.parquet"))]);
    env.ok(&["sort", "t", "--key", "k", "--out", "t.k"]);
}

#[test]
fn an_older_catalog_never_serves_an_object_rewritten_under_the_same_name() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny", "--stripe-unit", "4KiB"]);
    let (v1, v2) = (text(30_000, 5, b"v1"), text(50_000, 6, b"v2"));
    env.ok(&["put", s(&env.write("v1", &v1)), "--name", "x"]);
    let old = env.path("catalog.old");
    std::fs::copy(env.data().join("catalog.json"), &old).unwrap();
    // The same name, written again with other bytes and another size; then the catalog goes back.
    env.ok(&["rm", "x"]);
    env.ok(&["put", s(&env.write("v2", &v2)), "--name", "x"]);
    std::fs::copy(&old, env.data().join("catalog.json")).unwrap();
    // The old entry would read the new parts with the old size: it is refused, naming why.
    let err = env.fails(&["get", "x"]);
    assert!(err.contains("does not match its parts") && err.contains("write transaction"), "{err}");
    let o = env.run(&["fsck"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.code() == Some(2) && out.contains("does not match its parts"), "{out}");
    // Repair lists the object again from what its parts describe: the bytes written last.
    let o = env.run(&["fsck", "--repair"]);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("x did not match its parts") && said.contains("restored object x (blob, 50000 bytes"),
        "{said}"
    );
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
    assert_eq!(env.run(&["get", "x"]).stdout, v2);
    // A list's parts do not describe it (its entry does): repair leaves it refused, and rm removes it.
    env.ok(&["put-list", s(&env.write("l1.txt", b"1\n2\n3\n")), "--name", "l"]);
    std::fs::copy(env.data().join("catalog.json"), &old).unwrap();
    env.ok(&["rm", "l"]);
    env.ok(&["put-list", s(&env.write("l2.txt", b"5\n6\n")), "--name", "l"]);
    std::fs::copy(&old, env.data().join("catalog.json")).unwrap();
    assert!(env.fails(&["intersect", "l", "l"]).contains("does not match its parts"));
    let o = env.run(&["fsck", "--repair"]);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("l does not match its parts, and they do not describe an object whole"), "{said}");
    assert!(env.fails(&["intersect", "l", "l"]).contains("does not match its parts"));
    env.ok(&["rm", "l"]);
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
    assert_eq!(env.run(&["get", "x"]).stdout, v2);
}

#[test]
fn a_device_folder_restored_from_an_older_copy_is_taken_offline_and_nothing_is_changed() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny", "--stripe-unit", "4KiB"]);
    let a = text(30_000, 3, b"ab");
    env.ok(&["put", s(&env.write("a", &a)), "--name", "a"]);
    let (dev1, saved, current) = (env.data().join("dev1"), env.path("dev1.old"), env.path("dev1.now"));
    copy_dir(&dev1, &saved);
    env.ok(&["put", s(&env.write("b", &text(30_000, 4, b"cd"))), "--name", "b"]);
    env.ok(&["rm", "a"]);
    copy_dir(&dev1, &current);
    copy_dir(&saved, &dev1);
    // The device is taken offline, named; what does not need it still works, what does fails.
    let o = env.run(&["ls"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("device 1 is offline") && err.contains("older copy"), "{err}");
    let err = env.fails(&["get", "b"]);
    assert!(err.contains("device 1 is offline") && err.contains("older copy"), "{err}");
    assert!(env.fails(&["rm", "b"]).contains("device 1 is offline"));
    let o = env.run(&["fsck"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.code() == Some(2) && out.contains("dev1: offline") && out.contains("older copy"),
        "{out}"
    );
    copy_dir(&current, &dev1);
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
    assert_eq!(env.run(&["get", "b"]).stdout, text(30_000, 4, b"cd"));
}

#[test]
fn repro_checks_its_inputs_first_and_leaves_no_empty_work_directory() {
    let env = Env::new();
    let tpch = env.path("tpch");
    std::fs::create_dir(&tpch).unwrap();
    std::fs::write(tpch.join("lineitem.parquet"), b"not checked yet").unwrap();
    let o =
        env.cmd().current_dir(env.dir.path()).args(["repro", "psacs", "--tpch", s(&tpch)]).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("partsupp.parquet") && err.contains("customer.parquet"),
        "every missing table: {err}"
    );
    assert!(!err.contains("lineitem.parquet,"), "{err}");
    assert!(!env.path("target").exists(), "no empty target/insitu-repro left behind");
    // Nor after a run that works (the Self-Sort repro kept an empty target/insitu-repro/selfsort).
    let o = env
        .cmd()
        .current_dir(env.dir.path())
        .args(["repro", "selfsort", "--quick", "--size", "16MB", "--out", s(&env.path("out"))])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!env.path("target").exists(), "no empty target/insitu-repro/selfsort left behind");
    // Without --tpch, the tables come from the cache or tpchgen-cli; with neither, the message says so.
    let o = env
        .cmd()
        .args(["repro", "psacs"])
        .env("PATH", "/nonexistent")
        .env("XDG_CACHE_HOME", env.path("cache"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("tpchgen-cli is not installed") && err.contains("--tpch"),
        "{err}"
    );
    assert!(!env.path("repro-out").exists(), "a failed repro writes no report");
}

#[test]
fn an_output_that_cannot_be_written_is_named_as_given() {
    let env = Env::new();
    env.init(&["--devices", "1", "--profile", "tiny"]);
    let f = env.write("small", b"some bytes");
    env.ok(&["put", s(&f)]);
    let missing = env.path("no/such/dir/out");
    let err = env.fails(&["get", "small", "-o", s(&missing)]);
    assert!(
        err.contains(&format!("{}: cannot be written", missing.display())) && !err.contains("partial"),
        "{err}"
    );
    let err = env.fails(&["get", "small", "-o", s(env.dir.path())]);
    assert!(err.contains("it is a directory"), "{err}");
    // `-o -` is standard output where a command writes there, and refused where it does not (it made a
    // file named `-`); `./-` names such a file.
    let csv = env.write("t.csv", b"k,v\n2,a\n1,b\n");
    env.ok(&["put-table", s(&csv), "--name", "t", "--key", "k"]);
    for args in [
        &["gen", "text", "--size", "1KiB", "-o", "-"][..],
        &["get-table", "t", "-o", "-"],
        &["sort", "t", "--key", "k", "--out", "t2", "--merge", "-o", "-"],
    ] {
        let err = env.fails(args);
        assert!(err.contains("- (standard output) cannot be written here"), "{args:?}: {err}");
    }
    assert!(!env.path("-").exists());
    env.ok(&["gen", "text", "--size", "1KiB", "-o", "./-"]);
    assert_eq!(std::fs::metadata(env.path("-")).unwrap().len(), 1024);
    assert_eq!(env.ok(&["get", "small", "-o", "-"]).as_bytes(), b"some bytes");
}

/// With `--json`, an error is one JSON object on standard output, unless the command's data owns it
/// (`get` without -o, `-o -`): then it goes to standard error, and what a script saves stays empty.
#[test]
fn a_json_error_keeps_off_standard_output_that_carries_data() {
    let env = Env::new();
    env.init(&["--devices", "1", "--profile", "tiny"]);
    // Each with what its error names; the last two fail on their options, before they reach their output.
    for (args, named) in [
        (&["--json", "get", "nosuch"][..], "nosuch"),
        (&["--json", "get", "nosuch", "-o", "-"], "nosuch"),
        (&["--json", "lba", "read", "7", "--at", "0", "--len", "4096"], "7"),
        (&["--json", "selfsort", "range", "--lo", "zz", "--hi", "00", "-o", "-"], "zz"),
        (&["--json", "selfsort", "sort", "r.bin", "-o", "-", "--format", "bogus"], "bogus"),
    ] {
        let o = env.run(args);
        assert!(
            !o.status.success() && o.stdout.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        let err: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
        assert!(err["error"].as_str().unwrap().contains(named), "{args:?}: {err}");
    }
    let o = env.run(&["--json", "get", "nosuch", "-o", s(&env.path("out"))]);
    let err: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(err["error"].as_str().unwrap().contains("nosuch"), "{err}");
    assert_eq!((o.status.code(), err["kind"].as_str()), (Some(1), Some("not_found")));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error: "));
    // A value clap refuses is an error object too, of kind "usage", with clap's exit status.
    let o = env.run(&["--json", "bluedbm", "knn", "items", "q", "--k", "0"]);
    let err: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((o.status.code(), err["kind"].as_str()), (Some(2), Some("usage")), "{err}");
    assert!(err["error"].as_str().unwrap().contains("--k"), "{err}");
}

/// With no copy of the catalog readable, the array does not open; `fsck --repair` starts an empty catalog
/// that deletes nothing, keeps every part in quarantine at the open, and restores every object its parts
/// describe whole: blobs and tables read back as they were.
#[test]
fn fsck_repair_rebuilds_a_catalog_lost_in_both_copies_from_the_devices_parts() {
    let env = Env::new();
    env.init(&["--devices", "3", "--profile", "tiny", "--stripe-unit", "4KiB"]);
    let a = text(30_000, 7, b"ab");
    env.ok(&["put", s(&env.write("a", &a)), "--name", "a"]);
    env.ok(&["put-table", s(&env.write("t.csv", b"k,v\n3,x\n1,y\n2,z\n")), "--name", "t", "--key", "k"]);
    env.ok(&["sort", "t", "--key", "v", "--out", "t.v"]);
    let before = env.run(&["--json", "get-table", "t.v", "--merged", "-o", s(&env.path("before.parquet"))]);
    assert!(before.status.success());
    for name in ["catalog.json", "catalog.b.json"] {
        std::fs::write(env.data().join(name), b"insitu v2 crc32=00000000\n{}").unwrap();
    }
    let err = env.fails(&["ls"]);
    assert!(err.contains("its second copy"), "{err}");
    let o = env.run(&["fsck", "--repair"]);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && said.contains("started an empty one"), "{said}");
    for name in ["a", "t", "t.v"] {
        assert!(said.contains(&format!("restored object {name} (")), "{name}: {said}");
    }
    assert_eq!(env.run(&["get", "a"]).stdout, a);
    env.ok(&["get-table", "t.v", "--merged", "-o", s(&env.path("after.parquet"))]);
    assert_eq!(
        std::fs::read(env.path("after.parquet")).unwrap(),
        std::fs::read(env.path("before.parquet")).unwrap()
    );
    assert!(env.data().join("catalog.json.damaged").exists());
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}
