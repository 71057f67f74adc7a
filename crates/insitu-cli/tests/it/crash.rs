//! Processes killed with SIGKILL in the middle of writes: after restart every object is whole or absent,
//! earlier objects are intact and fsck is clean.

use std::time::Duration;

use crate::{s, text, Env};

fn setup() -> (Env, Vec<u8>) {
    let env = Env::new();
    env.init(&["--devices", "3", "--profile", "tiny", "--capacity", "32MiB", "--stripe-unit", "64KiB"]);
    let earlier = text(200_000, 10, b"earlier");
    let f = env.write("earlier", &earlier);
    env.ok(&["put", s(&f)]);
    (env, earlier)
}

fn killed(o: &std::process::Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    o.status.signal() == Some(9)
}

fn check_after_restart(
    env: &Env,
    earlier: &[u8],
    victim: &str,
    victim_data: &[u8],
    must_exist: Option<bool>,
) {
    let ls = env.json(&["ls"]);
    let names: Vec<String> = ls["result"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"earlier".to_string()), "{names:?}");
    assert_eq!(env.run(&["get", "earlier"]).stdout, earlier, "the earlier object is intact");
    let exists = names.contains(&victim.to_string());
    if let Some(want) = must_exist {
        assert_eq!(exists, want, "{victim}: {names:?}");
    }
    if exists {
        assert_eq!(env.run(&["get", victim]).stdout, victim_data, "{victim} is whole");
    }
    let fsck = env.json(&["fsck"]);
    assert_eq!(fsck["result"]["ok"], true, "{fsck}");
    // The array takes new writes after recovery.
    let f = env.write("after", b"after the crash");
    let name = format!("after-{victim}");
    env.ok(&["put", s(&f), "--name", &name]);
    env.ok(&["rm", &name]);
}

#[test]
fn sigkill_at_several_points_of_put_leaves_objects_whole_or_absent() {
    let data = text(1_000_000, 11, b"victim");
    for (point, exists) in [
        ("put-stripe:1", false),
        ("put-stripe:7", false),
        ("put-part-committed:1", false),
        ("put-part-committed:3", false), // every part committed, catalog not yet written
        ("put-catalog:1", true),         // the catalog entry is the commit point
    ] {
        let (env, earlier) = setup();
        let f = env.write("victim", &data);
        let o = env.cmd().args(["put", s(&f)]).env("INSITU_CRASH_AT", point).output().unwrap();
        assert!(killed(&o), "{point}: the process should have been killed: {o:?}");
        check_after_restart(&env, &earlier, "victim", &data, Some(exists));
    }
}

#[test]
fn sigkill_during_rm_leaves_no_half_object() {
    let (env, earlier) = setup();
    let data = text(300_000, 12, b"gone");
    let f = env.write("gone", &data);
    env.ok(&["put", s(&f)]);
    let o = env.cmd().args(["rm", "gone"]).env("INSITU_CRASH_AT", "rm-catalog:1").output().unwrap();
    assert!(killed(&o));
    check_after_restart(&env, &earlier, "gone", &data, Some(false));
}

#[test]
fn sigkill_from_outside_at_random_moments_of_a_large_put() {
    let (env, earlier) = setup();
    let data = text(24 << 20, 13, b"big");
    let f = env.write("big", &data);
    for (i, delay_ms) in [3u64, 10, 20, 35].into_iter().enumerate() {
        let mut child = env
            .cmd()
            .args(["put", s(&f), "--name", &format!("big{i}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        check_after_restart(&env, &earlier, &format!("big{i}"), &data, None);
    }
}

/// A device server killed in the middle of an operator: the command fails naming the device and how its
/// server ended, and the next command recovers the array.
#[test]
fn a_killed_device_server_is_named_and_the_array_recovers() {
    let (env, earlier) = setup();
    let data = text(2_000_000, 11, b"victim");
    let f = env.write("victim", &data);
    // The 6th command device 1's server receives kills it, half-way through the put.
    let o = env
        .cmd()
        .args(["--transport", "process", "put", s(&f)])
        .env("INSITU_CRASH_AT", "dev1-command:6")
        .output()
        .unwrap();
    assert!(!o.status.success(), "the put must fail");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("device 1") && err.contains("device server") && err.contains("SIGKILL"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    check_after_restart(&env, &earlier, "victim", &data, Some(false));
    env.ok(&["--transport", "process", "put", s(&f)]);
    assert_eq!(env.run(&["--transport", "process", "get", "victim"]).stdout, data);
}

#[test]
fn a_journal_damaged_inside_takes_its_device_offline_until_fsck_repair_cuts_it() {
    let (env, earlier) = setup();
    let data = text(200_000, 21, b"late");
    let f = env.write("late", &data);
    // Killed right after the catalog write: the new object lives only in the devices' journals. (In this
    // process: device servers of the process transport would checkpoint as their host goes.)
    let o = env
        .cmd()
        .args(["--transport", "in-process", "put", s(&f)])
        .env("INSITU_CRASH_AT", "put-catalog:1")
        .output()
        .unwrap();
    assert!(killed(&o));
    let journal = env.data().join("dev0/journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    assert!(bytes.len() > 60, "the journal holds the put's records: {} bytes", bytes.len());
    // Inside the first record's payload (after the 16-byte header and its 8-byte frame): others follow.
    bytes[16 + 8 + 1] ^= 0x08;
    std::fs::write(&journal, &bytes).unwrap();
    let o = env.run(&["ls"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("device 0 is offline") && err.contains("is damaged"), "{err}");
    assert_eq!(std::fs::read(&journal).unwrap(), bytes, "nothing changed without the user's word");
    let o = env.run(&["fsck", "--repair"]);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("device 0: journal cut at its damaged record"), "{said}");
    let kept: Vec<_> = std::fs::read_dir(env.data().join("dev0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("journal.damaged-at-"))
        .collect();
    assert_eq!(kept.len(), 1, "the whole journal is kept");
    // The device is back; what the dropped records held is reported, earlier objects are whole.
    let o = env.run(&["ls"]);
    assert!(o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("offline"));
    assert_eq!(env.run(&["get", "earlier"]).stdout, earlier);
    let o = env.run(&["fsck"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.code() == Some(2) && out.contains("\"late\""), "the lost part is named: {out}");
}

/// A device another process holds (a server started by hand, or the servers of the command before still
/// checkpointing) is waited for as long as `--wait` says, over either transport: with 0 the array opens
/// without it (naming it offline); a holder that lets go within the wait is waited for. A second server
/// on a socket one still listens on is refused, and a data directory whose name starts with `-` is
/// served too.
#[test]
fn a_held_device_is_waited_for_as_wait_says_and_a_live_socket_is_not_taken_over() {
    use std::io::BufRead;
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let (dev0, dev1, sock) = (env.data().join("dev0"), env.data().join("dev1"), env.path("s.sock"));
    // Served by hand as a host would (it stops when its owner's connection or its stdin ends).
    let mut holder = env
        .cmd()
        .args(["serve-device", "--exit-with-owner", "--socket", s(&sock), s(&dev0)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready");
    for transport in ["in-process", "process"] {
        let o = env.run(&["--transport", transport, "--wait", "0", "ls"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && err.contains("device 0 is offline") && err.contains("in use"), "{err}");
        // Said once, by the host, with the device's number (not again by its server first).
        assert!(!err.lines().any(|l| l.starts_with("error")), "{err}");
    }
    let err = env.fails(&["serve-device", "--socket", s(&sock), s(&dev1)]);
    assert!(err.contains("another server serves on this socket"), "{err}");
    // Finding it out did not stop the server that serves there.
    assert!(holder.try_wait().unwrap().is_none(), "the first server stopped");
    assert!(env.run(&["--wait", "0", "ls"]).stderr.windows(17).any(|w| w == b"device 0 is offli"));
    let gone = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let _ = holder.kill();
        let _ = holder.wait();
    });
    for transport in ["process", "in-process"] {
        let o = env.run(&["--transport", transport, "--wait", "60", "ls"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && !err.contains("offline"), "{transport}: {err}");
    }
    gone.join().unwrap();
    // `-arr` in the test's folder: the servers are started with the directory after `--`.
    let o = env.cmd().args(["--data=-arr", "init", "--devices", "2", "--profile", "tiny"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = env.write("x", b"a small object");
    let o = env.cmd().args(["--data=-arr", "--transport", "process", "put", s(&f)]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = env.cmd().args(["--data=-arr", "--transport", "process", "get", "x"]).output().unwrap();
    assert_eq!(o.stdout, b"a small object");
}

/// An init cut off (SIGKILL) leaves devices and its mark but no array.json: the next init clears them and
/// makes the array. Devices without the mark (an array that lost its configuration) are never
/// formatted over, and the error names them.
#[test]
fn an_init_cut_off_is_made_again_and_devices_without_its_mark_are_kept() {
    let env = Env::new();
    // What a cut-off init leaves: its mark, device 0 formatted, device 1 half made.
    let whole = env.path("whole");
    let o = env
        .cmd()
        .args(["--data", s(&whole), "init", "--devices", "1", "--profile", "tiny"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let cut = env.path("cut");
    std::fs::create_dir_all(cut.join("dev1")).unwrap();
    std::fs::rename(whole.join("dev0"), cut.join("dev0")).unwrap();
    std::fs::write(cut.join("init.incomplete"), b"").unwrap();
    let o =
        env.cmd().args(["--data", s(&cut), "init", "--devices", "2", "--profile", "tiny"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!cut.join("init.incomplete").exists(), "a made array has no mark");
    let f = env.write("x", b"kept");
    let o = env.cmd().args(["--data", s(&cut), "put", s(&f)]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The same devices without the mark: refused by name, untouched.
    std::fs::remove_file(cut.join("array.json")).unwrap();
    std::fs::remove_file(cut.join("array.b.json")).unwrap();
    let before = std::fs::read(cut.join("dev0/superblock")).unwrap();
    let o =
        env.cmd().args(["--data", s(&cut), "init", "--devices", "2", "--profile", "tiny"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && (err.contains("dev0") || err.contains("catalog.json")), "{err}");
    assert_eq!(std::fs::read(cut.join("dev0/superblock")).unwrap(), before);
    // Not even with an init's mark beside them: a device holding an object is no cut-off init's.
    for f in ["catalog.json", "catalog.b.json"] {
        std::fs::remove_file(cut.join(f)).unwrap();
    }
    std::fs::write(cut.join("init.incomplete"), b"").unwrap();
    let o =
        env.cmd().args(["--data", s(&cut), "init", "--devices", "2", "--profile", "tiny"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("object(s): not a cut-off init's"), "{err}");
    assert_eq!(std::fs::read(cut.join("dev0/superblock")).unwrap(), before);
    assert!(cut.join("dev1").exists() && cut.join("init.incomplete").exists(), "nothing removed");
}
