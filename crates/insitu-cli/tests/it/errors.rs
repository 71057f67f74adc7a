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
fn bad_names_and_duplicates_are_refused() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let f = env.write("x", b"data");
    for (name, why) in
        [("", "empty"), ("a/b", "separator"), ("..", "'..'"), ("../etc", "separator"), ("x..y", "'..'")]
    {
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
    env.init(&["--devices", "2", "--profile", "tiny"]);
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
    let err = env.fails(&["ls"]);
    assert!(err.contains("in use by another insitu process"), "{err}");
    held.close().unwrap();
    env.ok(&["ls"]);
}

#[test]
fn deleting_files_in_the_data_directory_does_not_let_a_second_writer_in() {
    use std::io::Write;
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    // A put from a FIFO holds the array open for as long as its writer keeps the FIFO open.
    let fifo = env.path("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let mut first = env.cmd().args(["put", s(&fifo), "--name", "slow"]).spawn().unwrap();
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    w.write_all(&text(50_000, 1, b"ab")).unwrap();
    // Whatever lock file a user might remove, the second writer is still refused.
    let _ = std::fs::remove_file(env.data().join("LOCK"));
    let other = env.write("other", b"other bytes");
    let err = env.fails(&["put", s(&other)]);
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

#[test]
fn corrupted_metadata_is_named_without_a_panic() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let f = env.write("x", &text(10_000, 7, b"ab"));
    env.ok(&["put", s(&f)]);
    for file in ["dev0/checkpoint", "dev1/superblock", "catalog.json"] {
        let p = env.data().join(file);
        let good = std::fs::read(&p).unwrap();
        let mut bad = good.clone();
        let i = bad.len() - 2;
        bad[i] ^= 0x21;
        std::fs::write(&p, &bad).unwrap();
        let err = env.fails(&["ls"]);
        assert!(err.contains("corrupted") && err.contains("checksum"), "{file}: {err}");
        let o = env.run(&["fsck"]);
        let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{file}: fsck must fail");
        assert!(out.contains("checksum") && !out.contains("panicked"), "{file}: {out}");
        std::fs::write(&p, &good).unwrap();
    }
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

#[test]
fn a_failed_init_leaves_nothing_it_made_and_keeps_what_was_there() {
    let env = Env::new();
    let err = env.fails(&["init", "--devices", "2", "--profile", "tiny", "--capacity", "4KiB"]);
    assert!(err.contains("smaller than one erase block"), "{err}");
    assert!(!env.data().exists(), "the directory init made is gone");
    // Device 1's place is taken by a user's file: device 0, formatted first, is removed again.
    std::fs::create_dir_all(env.data()).unwrap();
    std::fs::write(env.data().join("dev1"), b"mine").unwrap();
    let err = env.fails(&["init", "--devices", "2", "--profile", "tiny"]);
    assert!(err.contains("device 1"), "{err}");
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
}
