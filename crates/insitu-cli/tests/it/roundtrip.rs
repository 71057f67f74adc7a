use insitu_kernels::search::naive_offsets;

use crate::{s, text, Env};

#[test]
fn put_get_ls_rm_round_trip_striped_and_on_one_device() {
    let env = Env::new();
    env.init(&["--devices", "3", "--profile", "tiny", "--stripe-unit", "4KiB"]);
    let data = text(100_003, 1, b"abcdefgh");
    let f = env.write("in.bin", &data);
    let put = env.json(&["put", s(&f), "--name", "striped"]);
    assert_eq!(put["result"]["devices"], serde_json::json!([0, 1, 2]));
    assert_eq!(put["bytes"]["host_to_device"], 100_003);
    env.ok(&["put", s(&f), "--name", "single", "--device", "2"]);
    for name in ["striped", "single"] {
        let out = env.path(&format!("{name}.out"));
        let get = env.json(&["get", name, "-o", s(&out)]);
        assert_eq!(std::fs::read(&out).unwrap(), data, "{name}");
        assert_eq!(get["bytes"]["device_to_host"], 100_003);
    }
    // A destination that is not a regular file is written as it is, never replaced.
    env.ok(&["get", "striped", "-o", "/dev/null"]);
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    // get to stdout writes the bytes and nothing else there.
    let o = env.run(&["get", "striped"]);
    assert!(o.status.success());
    assert_eq!(o.stdout, data);
    let ls = env.json(&["ls"]);
    let names: Vec<_> =
        ls["result"]["objects"].as_array().unwrap().iter().map(|o| o["name"].clone()).collect();
    assert_eq!(names, vec!["single", "striped"]);
    env.ok(&["rm", "striped"]);
    assert!(env.fails(&["get", "striped"]).contains("no object named \"striped\""));
    let fsck = env.json(&["fsck"]);
    assert_eq!(fsck["result"]["ok"], true);
}

#[test]
fn every_report_has_result_measured_and_modeled_cost() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let f = env.write("x", &text(50_000, 2, b"ab"));
    env.ok(&["put", s(&f)]);
    for args in [
        vec!["search", "x", "abba"],
        vec!["search", "x", "abba", "--placement", "host"],
        vec!["ls"],
        vec!["rm", "x"],
    ] {
        let r = env.json(&args);
        for key in ["result", "wall_s", "host_cpu_s", "device_cpu_s", "bytes", "modeled"] {
            assert!(r.get(key).is_some(), "{args:?}: no {key} in {r}");
        }
        for path in [
            "flash_read",
            "flash_program",
            "flash_to_device_mem",
            "device_mem_to_flash",
            "host_to_device",
            "device_to_host",
            "device_to_device",
        ] {
            assert!(r["bytes"][path].is_u64(), "{args:?}: bytes.{path}");
        }
        assert_eq!(r["modeled"]["profile"], "tiny");
        assert!(r["modeled"]["time_s"].is_f64() && r["modeled"]["energy_j"].is_f64());
    }
}

#[test]
fn search_placements_agree_with_a_naive_scan_across_stripe_boundaries() {
    let env = Env::new();
    env.init(&["--devices", "4", "--profile", "tiny", "--stripe-unit", "4KiB"]);
    // A small alphabet makes matches frequent, so many straddle the 4 KiB stripe boundaries.
    let data = text(200_001, 3, b"abc");
    let f = env.write("hay", &data);
    env.ok(&["put", s(&f)]);
    for pattern in ["a", "abc", "cabca", "abcabcabcab"] {
        let want = naive_offsets(&data, pattern.as_bytes());
        let dev = env.json(&["search", "hay", pattern, "--offsets"]);
        let host = env.json(&["search", "hay", pattern, "--offsets", "--placement", "host"]);
        assert_eq!(dev["result"]["count"], want.len() as u64, "device count of {pattern}");
        assert_eq!(host["result"]["count"], want.len() as u64, "host count of {pattern}");
        let offsets: Vec<u64> = serde_json::from_value(dev["result"]["offsets"].clone()).unwrap();
        assert_eq!(offsets, want, "device offsets of {pattern}");
        let offsets: Vec<u64> = serde_json::from_value(host["result"]["offsets"].clone()).unwrap();
        assert_eq!(offsets, want, "host offsets of {pattern}");
        // Only results cross the host link on the device path (the offsets, 8 bytes each); everything does
        // on the host path.
        assert_eq!(dev["bytes"]["device_to_host"], 8 * want.len() as u64);
        assert_eq!(host["bytes"]["device_to_host"], 200_001);
        if pattern.len() > 1 {
            assert!(dev["bytes"]["device_to_device"].as_u64().unwrap() > 0, "halos travel between devices");
        }
    }
    // Counting without offsets gives the same count.
    let dev = env.json(&["search", "hay", "cabca"]);
    assert_eq!(dev["result"]["count"], naive_offsets(&data, b"cabca").len() as u64);
    assert_eq!(dev["bytes"]["device_to_host"], 0, "a count alone crosses with the completion");
}

#[test]
fn stats_and_profiles_describe_the_array() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let st = env.json(&["stats"]);
    assert_eq!(st["result"]["devices"].as_array().unwrap().len(), 2);
    let text = env.ok(&["stats"]);
    assert!(text.contains("WA"));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "a line for the array, one per device, one for the disk: {text}");
    assert!(lines[1].starts_with("dev0:") && lines[2].starts_with("dev1:"), "{text}");
    assert!(lines[3].starts_with("on disk:") && lines[3].contains("sparse"), "{text}");
    let (disk, apparent) =
        (st["result"]["disk_bytes"].as_u64().unwrap(), st["result"]["apparent_bytes"].as_u64().unwrap());
    assert!(disk < apparent / 10, "an empty array's images take little room: {disk} of {apparent}");
    let p = env.json(&["profiles"]);
    let names = |what: &str| -> Vec<String> {
        p["result"][what]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap().to_string())
            .collect()
    };
    for want in ["smartssd", "smartssd-2016", "jasmine", "bluedbm", "tiny"] {
        assert!(names("devices").contains(&want.to_string()), "{p}");
    }
    for want in ["i7-8700", "skylake-sp-44", "i7-2016", "core-i5-jasmine", "xeon-bluedbm"] {
        assert!(names("hosts").contains(&want.to_string()), "{p}");
    }
}

#[test]
fn host_work_is_modeled_on_the_host_asked_for() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let data = env.write("in.txt", "a needle in a haystack ".repeat(50_000).as_bytes());
    env.json(&["put", s(&data), "--name", "o"]);
    let host_s = |host: Option<&str>| {
        let mut args = vec!["search", "o", "hay", "--placement", "host"];
        if let Some(h) = host {
            args.extend(["--host-profile", h]);
        }
        let ph = &env.json(&args)["modeled"]["phases"][0];
        (ph["host_s"].as_f64().unwrap(), ph["host_requests"].as_u64().unwrap())
    };
    // tiny's own host scans a byte a cycle at 1 GHz (its storage stack costs no CPU); the i7-8700 at 0.46
    // cycles a byte at 4.6 GHz, plus its storage stack's 18,400 cycles a request and 0.38 a byte read.
    let ((own, _), (i7, requests)) = (host_s(None), host_s(Some("i7-8700")));
    assert!((own - 1_150_000e-9).abs() < 1e-12, "{own}");
    assert!(requests >= 1_150_000 / 131_072, "{requests}");
    let want = (1_150_000.0 * 0.46 + requests as f64 * 18_400.0 + 1_150_000.0 * 0.38) / 4.6e9;
    assert!((i7 - want).abs() < 1e-12, "{i7} vs {want}");
    let err = env.fails(&["search", "o", "hay", "--host-profile", "pentium"]);
    assert!(err.contains("pentium") && err.contains("i7-8700"), "{err}");
}

#[test]
fn a_four_terabyte_smartssd_can_be_declared() {
    let env = Env::new();
    env.init(&["--devices", "1", "--profile", "smartssd", "--capacity", "4TB"]);
    let st = env.json(&["stats"]);
    let cap = st["result"]["devices"][0]["properties"]["flash"]["capacity_bytes"].as_u64().unwrap();
    assert_eq!(cap, 4_000_000_000_000);
    let f = env.write("small", b"hello");
    env.ok(&["put", s(&f)]);
    assert_eq!(env.run(&["get", "small"]).stdout, b"hello");
}

#[test]
fn demo_runs_end_to_end() {
    let env = Env::new();
    // A folder the demo did not make is left alone, whatever it holds.
    std::fs::create_dir_all(env.path("notes/sub")).unwrap();
    std::fs::write(env.path("notes/thesis.txt"), b"precious").unwrap();
    let err = env.fails(&[
        "demo",
        "--size",
        "1MiB",
        "--devices",
        "1",
        "--profile",
        "tiny",
        "--data",
        s(&env.path("notes")),
    ]);
    assert!(err.contains("the demo did not make"), "{err}");
    assert_eq!(std::fs::read(env.path("notes/thesis.txt")).unwrap(), b"precious");
    assert!(env.path("notes/sub").is_dir());
    let out = env.ok(&[
        "demo",
        "--size",
        "8MiB",
        "--devices",
        "2",
        "--profile",
        "tiny",
        "--data",
        s(&env.path("demo")),
    ]);
    assert!(out.contains("matches either way") && out.contains("fsck: clean"), "{out}");
    // The closing hint names a command that runs: this binary, by its path (it is not on PATH here).
    let hint = out.lines().find(|l| l.contains("the array stays at")).unwrap();
    let cmd = hint.split('`').nth(1).unwrap();
    let exe = cmd.split_whitespace().next().unwrap();
    assert_eq!(
        std::path::Path::new(exe).canonicalize().unwrap(),
        std::path::Path::new(env!("CARGO_BIN_EXE_insitu")).canonicalize().unwrap(),
        "{hint}"
    );
}

#[test]
fn a_closed_pipe_ends_the_process_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let env = Env::new();
    env.init(&["--devices", "1", "--profile", "tiny"]);
    let f = env.write("big", &text(3 << 20, 9, b"xyz"));
    env.ok(&["put", s(&f)]);
    let mut child =
        env.cmd().args(["get", "big"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap(); // then the pipe closes
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    child.wait().unwrap();
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn the_intersection_model_reproduces_the_papers_numbers_from_the_cli() {
    let env = Env::new();
    let m = env.json(&["model", "intersect", "--size1", "0.1MB", "--size2", "100MB", "--entry-size", "256"]);
    let r = &m["result"];
    assert_eq!(r["method"], "binary");
    let load = &r["stages"][0];
    assert!((load["host_ms"].as_f64().unwrap() - 182.0).abs() < 1.0, "{load}");
    assert!((r["stages"][1]["device_ms"].as_f64().unwrap() - 58.6).abs() < 0.5);
    assert_eq!(r["faster"], "device");
    let err = env.fails(&["model", "intersect", "--size1", "1MB", "--size2", "1MB", "--entry-size", "6"]);
    assert!(err.contains("multiple of 4"), "{err}");
    // The lists given longer first are the same workload, and the answer says it took them shorter first.
    let swapped =
        env.json(&["model", "intersect", "--size1", "100MB", "--size2", "0.1MB", "--entry-size", "256"]);
    assert_eq!(swapped["result"]["stages"], r["stages"]);
    assert!(swapped["result"]["note"].as_str().unwrap().contains("--size2's as L1"), "{swapped}");
    for bad in ["0", "257"] {
        let err = env.fails(&[
            "model",
            "intersect",
            "--size1",
            "1MB",
            "--size2",
            "2MB",
            "--result-entry-size",
            bad,
        ]);
        assert!(err.contains("a result entry is 1 to 256 bytes"), "{err}");
    }
    // Any profile whose engines price the intersection's work predicts: the SmartSSD's FPGA kernels too.
    let fpga = env.json(&[
        "model",
        "intersect",
        "--size1",
        "0.1MB",
        "--size2",
        "100MB",
        "--entry-size",
        "256",
        "--profile",
        "smartssd",
    ]);
    assert!(fpga["result"]["device_ms"].as_f64().unwrap() < r["device_ms"].as_f64().unwrap(), "{fpga}");
}

/// `intersect --placement auto` on `lists`: the same count, and the modeled times it weighs are those the
/// device and host runs reported (`device_ms`, `host_ms`), so it takes the faster.
fn auto_agrees_with_the_runs(env: &Env, lists: &[&str], device_ms: f64, host_ms: f64, common: u64) {
    let mut args = vec!["intersect"];
    args.extend_from_slice(lists);
    args.extend_from_slice(&["--placement", "auto", "--count-only"]);
    let r = env.json(&args);
    assert_eq!(r["result"]["count"], common, "{r}");
    let (h, d) = (
        r["result"]["auto"]["host_ms"].as_f64().unwrap(),
        r["result"]["auto"]["device_ms"].as_f64().unwrap(),
    );
    let close = |got: f64, want: f64| (got - want).abs() <= 0.02 * want;
    assert!(
        close(h, host_ms) && close(d, device_ms),
        "auto weighed host {h} device {d}, the runs: host {host_ms} device {device_ms}"
    );
    let faster = if device_ms < host_ms { "device" } else { "host" };
    assert_eq!(r["result"]["placement"], faster, "{r}");
    assert!(
        (r["modeled"]["time_s"].as_f64().unwrap() * 1e3 - device_ms.min(host_ms)).abs()
            <= 0.02 * device_ms.min(host_ms)
    );
}

/// Little-endian u32 IDs.
fn le_ids(ids: &[u32]) -> Vec<u8> {
    ids.iter().flat_map(|i| i.to_le_bytes()).collect()
}

#[test]
fn auto_weighs_what_each_run_reports_and_a_device_short_of_memory_splits_only_the_common_span() {
    // `tiny` devices have 8 MiB of memory: 800,000 IDs (12 bytes each in device DRAM) need several passes.
    // They sit in a narrow band of the ID space, [3e9, 3e9 + 8e6), which the passes split, not the whole
    // 2^32 IDs (where every ID fell in one pass of 1/k of the space until k passed about 500).
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny", "--capacity", "64MiB"]);
    let base = 3_000_000_000u32;
    let a: Vec<u32> = (0..800_000).map(|i| base + i * 10).collect();
    let b: Vec<u32> = (0..1_000).map(|i| base + 1 + i * 7_993 - (i % 3)).collect();
    let c: Vec<u32> = (0..300_000).map(|i| base + i * 25).collect();
    let set: std::collections::BTreeSet<u32> = a.iter().copied().collect();
    let common_ab = b.iter().filter(|x| set.contains(x)).count() as u64;
    let common_ac = c.iter().filter(|x| set.contains(x)).count() as u64;
    assert!(common_ab > 50 && common_ac > 50_000);
    for (name, ids, dev) in [("a", &a, "0"), ("b", &b, "0"), ("c", &c, "0"), ("d", &c, "1")] {
        let f = env.write(&format!("{name}.bin"), &le_ids(ids));
        env.ok(&["put-list", f.to_str().unwrap(), "--name", name, "--device", dev]);
    }
    for (lists, common) in [(["a", "b"], common_ab), (["a", "c"], common_ac)] {
        let mut ms = Vec::new();
        for placement in ["device", "host"] {
            let r = env.json(&["intersect", lists[0], lists[1], "--placement", placement, "--count-only"]);
            assert_eq!(r["result"]["count"], common, "{placement} {lists:?}");
            if placement == "device" {
                let parts = r["result"]["partitions"].as_u64().unwrap();
                assert!((2..=8).contains(&parts), "{parts} passes over the common span: {r}");
            }
            ms.push(r["modeled"]["time_s"].as_f64().unwrap() * 1e3);
        }
        auto_agrees_with_the_runs(&env, &lists, ms[0], ms[1], common);
    }
    // Whole entries without -o: what reached the host is said, and how to keep it.
    let text = env.ok(&["intersect", "a", "c", "--placement", "device"]);
    assert!(text.contains("whole entries:") && text.contains("-o FILE writes them"), "{text}");
    // The IDs come back whole across the passes, in order.
    let r = env.json(&["intersect", "a", "c", "--placement", "device", "--ids-only"]);
    let got: Vec<u64> = r["result"]["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let want: Vec<u64> = c.iter().filter(|x| set.contains(x)).map(|&x| x as u64).collect();
    assert_eq!(got, want);
    // Lists on two devices meet only on the host: auto says so and goes there.
    let r = env.json(&["intersect", "a", "d", "--placement", "auto", "--count-only"]);
    assert_eq!(
        (r["result"]["placement"].as_str(), r["result"]["count"].as_u64()),
        (Some("host"), Some(common_ac))
    );
    assert!(r["result"]["auto"]["device_ms"].is_null(), "{r}");
    let text = env.ok(&["intersect", "a", "d", "--placement", "auto", "--count-only"]);
    assert!(
        text.contains("they are on different devices, or its memory is too small), so the host"),
        "{text}"
    );
    // IDs back rather than a count: auto prices 4 bytes a common ID (not an entry read again), as the runs.
    let mut ms = Vec::new();
    for placement in ["device", "host"] {
        let r = env.json(&["intersect", "a", "b", "--placement", placement, "--ids-only"]);
        ms.push(r["modeled"]["time_s"].as_f64().unwrap() * 1e3);
    }
    let r = env.json(&["intersect", "a", "b", "--placement", "auto", "--ids-only"]);
    let (h, d) = (
        r["result"]["auto"]["host_ms"].as_f64().unwrap(),
        r["result"]["auto"]["device_ms"].as_f64().unwrap(),
    );
    assert!(
        (d - ms[0]).abs() <= 0.02 * ms[0] && (h - ms[1]).abs() <= 0.02 * ms[1],
        "auto {d} {h}, runs {ms:?}"
    );
    // Lists whose ends leave no common span take no pass, and auto says so: one ID past every other.
    let top = env.write("top.bin", &le_ids(&[u32::MAX]));
    env.ok(&["put-list", s(&top), "--name", "top", "--device", "0"]);
    let r = env.json(&["intersect", "a", "c", "top", "--placement", "device", "--count-only"]);
    assert_eq!(
        (r["result"]["count"].as_u64(), r["result"]["partitions"].as_u64()),
        (Some(0), Some(0)),
        "{r}"
    );
    let dev_ms = r["modeled"]["time_s"].as_f64().unwrap() * 1e3;
    let r = env.json(&["intersect", "a", "c", "top", "--placement", "auto", "--count-only"]);
    let d = r["result"]["auto"]["device_ms"].as_f64().unwrap();
    assert!((d - dev_ms).abs() <= 0.02 * dev_ms, "auto {d}, the run {dev_ms}: {r}");
    assert_eq!(r["result"]["auto"]["device_partitions"], 0);
}

#[test]
fn auto_takes_the_host_when_the_device_has_too_little_memory_for_the_lists() {
    // 40,000 entries of 256 bytes back whole need up to 10 MB of results in a `tiny` device's 8 MiB: the
    // device placement refuses by name before any work, and auto takes the host (it predicted a device
    // run that could not start). IDs alone fit, and there auto weighs both.
    let env = Env::new();
    env.init(&["--devices", "1", "--profile", "tiny", "--capacity", "64MiB"]);
    let a: Vec<u32> = (0..40_000).map(|i| i * 3).collect();
    let b: Vec<u32> = (0..40_000).map(|i| i * 5).collect();
    let common = a.iter().filter(|x| *x % 5 == 0).count() as u64;
    for (name, ids) in [("a", &a), ("b", &b)] {
        let f = env.write(&format!("{name}.bin"), &le_ids(ids));
        env.ok(&["put-list", s(&f), "--name", name, "--entry-size", "256"]);
    }
    let out = env.path("out");
    let err = env.fails(&["intersect", "a", "b", "--placement", "device", "-o", s(&out)]);
    assert!(err.contains("the results of these lists may take") && err.contains("--placement host"), "{err}");
    let r = env.json(&["intersect", "a", "b", "--placement", "auto", "-o", s(&out)]);
    assert_eq!(
        (r["result"]["placement"].as_str(), r["result"]["count"].as_u64()),
        (Some("host"), Some(common))
    );
    assert!(r["result"]["auto"]["device_ms"].is_null(), "{r}");
    assert_eq!(std::fs::metadata(&out).unwrap().len(), common * 256);
    let r = env.json(&["intersect", "a", "b", "--placement", "auto", "--ids-only"]);
    assert!(r["result"]["auto"]["device_ms"].is_number(), "{r}");
}

#[test]
fn lists_are_stored_and_intersected_from_the_cli() {
    let env = Env::new();
    env.init(&["--devices", "1", "--profile", "smartssd-2016", "--capacity", "64MiB"]);
    let (a, b) = (env.path("a.bin"), env.path("b.bin"));
    let g = env.json(&[
        "gen",
        "lists",
        "--size1",
        "1000",
        "--size2",
        "50000",
        "--ratio",
        "0.5",
        "--out1",
        s(&a),
        "--out2",
        s(&b),
    ]);
    let common = g["result"]["common"].as_u64().unwrap();
    assert!(common >= 500);
    env.ok(&["put-list", s(&a), "--entry-size", "64"]);
    env.ok(&["put-list", s(&b), "--entry-size", "64"]);
    // `ls` says what each object is.
    let ls = env.ok(&["ls"]);
    assert!(ls.contains("list, 1000 x 64 B") && ls.contains("list, 50000 x 64 B"), "{ls}");
    let objects = env.json(&["ls"])["result"]["objects"].clone();
    let a_list = objects.as_array().unwrap().iter().find(|o| o["name"] == "a").unwrap();
    assert_eq!(
        (&a_list["entries"], &a_list["entry_size"]),
        (&serde_json::json!(1000), &serde_json::json!(64))
    );
    let mut modeled_ms = Vec::new();
    for placement in ["device", "host"] {
        let r = env.json(&["intersect", "a", "b", "--placement", placement, "--count-only"]);
        assert_eq!(r["result"]["count"], common, "{placement}");
        assert!(r["result"]["auto"].is_null());
        modeled_ms.push(r["modeled"]["time_s"].as_f64().unwrap() * 1e3);
    }
    // Auto says why: each placement's modeled cost, which is what the runs of each then report.
    auto_agrees_with_the_runs(&env, &["a", "b"], modeled_ms[0], modeled_ms[1], common);
    let r = env.json(&["intersect", "a", "b", "--ids-only"]);
    assert_eq!(r["result"]["ids"].as_array().unwrap().len() as u64, common);
    let ids: Vec<u32> =
        r["result"]["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
    // The IDs to a file, as text or binary; a head of them on the terminal.
    let (txt, bin) = (env.path("common.txt"), env.path("common.bin"));
    let shown = env.ok(&["intersect", "a", "b", "--ids-only", "-o", s(&txt)]);
    assert!(
        shown.contains(&format!("common IDs: {}, {}", ids[0], ids[1])) && shown.contains("more"),
        "{shown}"
    );
    let text: Vec<u32> = std::fs::read_to_string(&txt).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(text, ids);
    env.ok(&["intersect", "a", "b", "--ids-only", "-o", s(&bin)]);
    let raw = std::fs::read(&bin).unwrap();
    assert_eq!(raw.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>(), ids);
    // Whole entries of the first list: 64 bytes each, the ID first.
    let entries = env.path("entries.out");
    let shown = env.ok(&["intersect", "a", "b"]);
    assert!(shown.contains(&format!("whole entries: {common} (")), "{shown}");
    env.ok(&["intersect", "a", "b", "-o", s(&entries)]);
    let e = std::fs::read(&entries).unwrap();
    assert_eq!(e.len() as u64, common * 64);
    assert_eq!(u32::from_le_bytes(e[64..68].try_into().unwrap()), ids[1]);
    assert!(env
        .fails(&["intersect", "a", "b", "--ids-only", "-o", s(&env.path("x.dat"))])
        .contains("--format"));
    assert_eq!(r["bytes"]["device_to_host"], common * 4, "only the result crosses the host link");
    let bad = env.write("bad.txt", b"3\n2\n");
    assert!(env.fails(&["put-list", s(&bad)]).contains("position 1"));
    assert!(env.fails(&["put-list", s(&a), "--name", "x", "--entry-size", "6"]).contains("multiple of 4"));
    // An entry size past any sensible one is refused by name, not by an aborted allocation.
    let err = env.fails(&["put-list", s(&a), "--name", "x", "--entry-size", "4294967292"]);
    assert!(err.contains("--entry-size must be a multiple of 4 from 4 to"), "{err}");
    assert!(env.fails(&["intersect", "a", "a"]).contains("given twice"));
}

#[test]
fn put_list_reads_the_format_it_is_told_and_never_guesses() {
    let env = Env::new();
    env.init(&["--devices", "1", "--profile", "tiny"]);
    let ids = |name: &str| -> Vec<u64> {
        let r = env.json(&["intersect", name, "all", "--ids-only"]);
        r["result"]["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect()
    };
    let all = env.write("all.txt", (0..100).map(|i| i.to_string()).collect::<Vec<_>>().join("\n").as_bytes());
    env.ok(&["put-list", s(&all)]);
    // A stray word in a text file is an error naming its line, not a reason to read the file as binary.
    let stray = env.write("l.txt", b"1\n2\nfoo\n");
    let err = env.fails(&["put-list", s(&stray)]);
    assert!(err.contains("line 3") && err.contains("\"foo\" is not an ID"), "{err}");
    let header = env.write("h.csv", b"id\n1\n2\n");
    let err = env.fails(&["put-list", s(&header)]);
    assert!(err.contains("line 1 looks like a header"), "{err}");
    // An extension that names no format needs --format; with it, the same bytes read either way.
    let plain = env.write("ids.dat", b"10 11,12\n13\n");
    assert!(env.fails(&["put-list", s(&plain)]).contains("give --format u32le"));
    env.ok(&["put-list", s(&plain), "--format", "text", "--name", "t"]);
    assert_eq!(ids("t"), vec![10, 11, 12, 13]);
    let le: Vec<u8> = [20u32, 30, 40].iter().flat_map(|v| v.to_le_bytes()).collect();
    let bin = env.write("ids.lst", &le);
    env.ok(&["put-list", s(&bin), "--format", "u32le", "--name", "b"]);
    assert_eq!(ids("b"), vec![20, 30, 40]);
    let r = env.json(&["intersect", "b", "t", "--ids-only"]);
    assert_eq!(r["result"]["ids"], serde_json::json!([]));
    // A text file told to be binary is read as binary: 4 bytes "1\n2\n" make one ID.
    let four = env.write("four.txt", b"1\n2\n");
    env.ok(&["put-list", s(&four), "--format", "u32le", "--name", "raw"]);
    let r = env.json(&["ls"]);
    let raw = r["result"]["objects"].as_array().unwrap().iter().find(|o| o["name"] == "raw").unwrap().clone();
    assert_eq!(raw["size"], 4, "{raw}");
    let names: Vec<_> =
        r["result"]["objects"].as_array().unwrap().iter().map(|o| o["name"].clone()).collect();
    assert!(
        !names.contains(&serde_json::json!("l")) && !names.contains(&serde_json::json!("h")),
        "{names:?}"
    );
}

/// Runs `insitu ARGS` with `input` on its standard input; returns the output.
fn with_stdin(env: &Env, args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = env
        .cmd()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    // A command that refuses its arguments exits without reading its input: the writer then finds the
    // pipe closed, which is no failure of the test (it raced the exit before).
    match writer.join().unwrap() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing the input: {e}"),
        _ => {}
    }
    out
}

#[test]
fn put_reads_pipes_fifos_proc_files_and_stdin_to_their_end() {
    let env = Env::new();
    env.init(&["--devices", "3", "--profile", "tiny", "--stripe-unit", "4KiB"]);
    let back = |name: &str| {
        let out = env.path(&format!("{name}.out"));
        env.ok(&["get", name, "-o", s(&out)]);
        std::fs::read(&out).unwrap()
    };
    // Standard input as `-`: an odd size, an exact number of stripes, and nothing at all.
    for (name, n) in [("odd", 100_003), ("stripes", 5 * 4096), ("empty", 0)] {
        let data = text(n, n as u64, b"pipe");
        let o = with_stdin(&env, &["--json", "put", "-", "--name", name], &data);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let put: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(put["result"]["size"], n, "{name}");
        assert_eq!(back(name), data, "{name}");
    }
    let err = String::from_utf8(with_stdin(&env, &["put", "-"], b"x").stderr).unwrap();
    assert!(err.contains("needs --name"), "{err}");
    // A FIFO, written by another thread while insitu reads it.
    let fifo = env.path("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let data = text(70_001, 7, b"fifo");
    let writer = {
        let (fifo, data) = (fifo.clone(), data.clone());
        std::thread::spawn(move || std::fs::write(fifo, data).unwrap())
    };
    env.ok(&["put", s(&fifo), "--name", "fifo"]);
    writer.join().unwrap();
    assert_eq!(back("fifo"), data);
    // A /proc file says it holds 0 bytes and has more.
    let version = std::fs::read("/proc/version").unwrap();
    assert!(!version.is_empty());
    env.ok(&["put", "/proc/version", "--name", "version", "--device", "1"]);
    assert_eq!(back("version"), version);
    // A /sys file says 4096 bytes and holds fewer.
    let sys = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled");
    if let Ok(want) = std::fs::read(sys) {
        env.ok(&["put", s(sys), "--name", "thp"]);
        assert_eq!(back("thp"), want);
    }
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

#[test]
fn init_warns_when_the_devices_could_outgrow_the_disk_and_is_quiet_otherwise() {
    let env = Env::new();
    // Flash images are sparse: 15 TB of declared flash costs nothing until written, but it is more than
    // any disk a test runs on has free.
    let o = env.run(&["init", "--devices", "1", "--profile", "smartssd", "--capacity", "15TB"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("warning:") && err.contains("No space left on device"), "{err}");
    assert!(err.contains("13.64 TiB") && err.contains("is free where"), "{err}");

    let small = Env::new();
    let o = small.run(&["init", "--devices", "2", "--profile", "tiny"]);
    assert!(o.status.success() && o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A small file system of a test's own (tmpfs), unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    /// `None` where this process may not mount one (not root, no CAP_SYS_ADMIN).
    fn mount(at: std::path::PathBuf, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(&at).ok()?;
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then(|| SmallDisk(at))
    }
}

impl SmallDisk {
    /// Fills what is left of the disk with a file of its own.
    fn fill(&self) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.0.join("filler")).unwrap();
        while filler.write_all(&[7u8; 4096]).is_ok() {}
    }

    /// Bytes still free on the disk.
    fn free(&self) -> u64 {
        insitu_host::free_bytes(&self.0).unwrap()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_host_disk_fails_the_write_by_name_keeps_what_is_stored_and_recovers_by_removing() {
    let env = Env::new();
    let Some(disk) = SmallDisk::mount(env.path("small"), "48m") else {
        eprintln!("skipped: this process cannot mount a tmpfs (it takes root)");
        return;
    };
    let data = disk.0.join("array");
    let run = |args: &[&str]| env.cmd().env("INSITU_DATA", &data).args(args).output().unwrap();
    assert!(run(&["init", "--devices", "1", "--profile", "smartssd", "--capacity", "1GiB"]).status.success());
    // Bytes that do not compress, 20 MB an object: the third does not fit on 48 MB.
    let mut stored: Vec<(String, Vec<u8>)> = Vec::new();
    let mut refused = None;
    for i in 0..4u64 {
        let bytes = text(20 << 20, 7 + i, &(0..=255).collect::<Vec<u8>>());
        let file = env.write(&format!("o{i}"), &bytes);
        let o = run(&["put", s(&file), "--name", &format!("o{i}")]);
        if o.status.success() {
            stored.push((format!("o{i}"), bytes));
        } else {
            refused = Some(String::from_utf8_lossy(&o.stderr).to_string());
            break;
        }
    }
    let err = refused.expect("the disk fills");
    assert!(err.contains("No space left on device") && !err.contains("panicked"), "{err}");
    assert!(!stored.is_empty());
    // With the disk still full, reading works: a command's closing checkpoint that does not fit is left to
    // the journal, which already holds everything (before, every command failed at its end, `ls` included).
    let o = run(&["--json", "ls"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> =
        listed["result"]["objects"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        stored.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        "the refused put left nothing"
    );
    for (name, bytes) in &stored {
        let back = env.path("back");
        assert!(run(&["get", name, "-o", s(&back)]).status.success());
        assert!(std::fs::read(&back).unwrap() == *bytes, "{name} reads back as written");
    }
    let o = run(&["--json", "fsck"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["result"]["ok"], true);
    // No half-written copy of a catalog or checkpoint holds on to the space.
    let mut tmp = Vec::new();
    for d in [data.clone(), data.join("dev0")] {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            if e.file_name().to_string_lossy().ends_with(".tmp") {
                tmp.push(e.path());
            }
        }
    }
    assert!(tmp.is_empty(), "{tmp:?}");

    // Whatever room the refused put left, something else takes: the disk is completely full.
    disk.fill();
    let free = || disk.free();
    assert_eq!(free(), 0);
    // Removing an object on the full disk commits (the array's reserve makes room for the catalog) and
    // gives the object's image space back to the disk, so a new object fits where it was.
    let before = free();
    let (gone, _) = stored.remove(0);
    let o = run(&["rm", &gone]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(free() >= before + (15 << 20), "rm gave back {} bytes", free() - before);
    let bytes = text(12 << 20, 99, &(0..=255).collect::<Vec<u8>>());
    let file = env.write("new", &bytes);
    let o = run(&["put", s(&file), "--name", "new"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    stored.push(("new".into(), bytes));
    for (name, bytes) in &stored {
        let back = env.path("back");
        assert!(run(&["get", name, "-o", s(&back)]).status.success());
        assert!(std::fs::read(&back).unwrap() == *bytes, "{name} reads back as written");
    }
    let o = run(&["--json", "fsck"]);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["result"]["ok"], true);
}

#[test]
fn an_appliance_on_a_full_tmpfs_opens_refuses_by_name_and_recovers_by_removing() {
    let env = Env::new();
    let Some(disk) = SmallDisk::mount(env.path("small"), "48m") else {
        eprintln!("skipped: this process cannot mount a tmpfs (it takes root)");
        return;
    };
    let data = disk.0.join("appliance");
    let run = |args: &[&str]| env.cmd().env("INSITU_DATA", &data).args(args).output().unwrap();
    // Nodes of the profile's full 64 GiB: opening one read every block's spare area through the map,
    // which on tmpfs allocated the whole spare-area file (128 MiB a node: the process died of SIGBUS).
    let o = run(&["init", "--nodes", "2", "--topology", "ring", "--profile", "bluedbm"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut stored: Vec<(String, Vec<u8>)> = Vec::new();
    let mut refused = None;
    for i in 0..5u64 {
        let bytes = text(12 << 20, 3 + i, &(0..=255).collect::<Vec<u8>>());
        let file = env.write(&format!("f{i}"), &bytes);
        let o = run(&["fs", "put", s(&file), "--name", &format!("f{i}")]);
        if o.status.success() {
            stored.push((format!("f{i}"), bytes));
        } else {
            refused = Some(String::from_utf8_lossy(&o.stderr).to_string());
            break;
        }
    }
    let err = refused.expect("the disk fills");
    assert!(err.contains("No space left on device") && !err.contains("panicked"), "{err}");
    assert!(stored.len() >= 2, "{} stored", stored.len());
    let read_back = |stored: &[(String, Vec<u8>)]| {
        let o = run(&["--json", "fs", "ls"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut names: Vec<String> = listed["result"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        let mut want: Vec<String> = stored.iter().map(|(n, _)| n.clone()).collect();
        want.sort();
        assert_eq!(names, want, "the refused put left nothing");
        for (name, bytes) in stored {
            let back = env.path("back");
            let o = run(&["fs", "get", name, "-o", s(&back)]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert!(std::fs::read(&back).unwrap() == *bytes, "{name} reads back as written");
        }
    };
    read_back(&stored);

    // Whatever room is left, something else takes.
    disk.fill();
    let free = || disk.free();
    assert_eq!(free(), 0);
    // Files share blocks (a file's pages go one per chip in turn), so no block of a removed file is all
    // dead: removing gives its pages' space back though they stay programmed.
    let (gone, _) = stored.remove(0);
    let o = run(&["fs", "rm", &gone]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(free() >= 11 << 20, "rm gave back {} bytes", free());
    let bytes = text(10 << 20, 99, &(0..=255).collect::<Vec<u8>>());
    let file = env.write("new", &bytes);
    let o = run(&["fs", "put", s(&file), "--name", "new"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    stored.push(("new".into(), bytes));
    read_back(&stored);
    // gc gives back the space of every dead page beside live ones (the removed file's, the refused put's).
    let o = run(&["--json", "fs", "gc"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let gc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(gc["result"]["discarded_pages"].as_u64().unwrap() > 0, "{gc}");
    read_back(&stored);
}

/// A search pattern is bytes, not only UTF-8 text: one that is not valid UTF-8 is found where a naive scan
/// finds it, in the devices and on the host, across a stripe boundary too.
#[test]
fn search_takes_any_bytes_as_its_pattern() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny", "--stripe-unit", "4KiB"]);
    let pattern = [0xffu8, 0xfe, 0x80];
    let mut data = text(50_000, 9, b"ab");
    for at in [100, 4095, 30_000] {
        data[at..at + 3].copy_from_slice(&pattern);
    }
    let want: Vec<u64> =
        (0..data.len() - 2).filter(|&i| data[i..i + 3] == pattern).map(|i| i as u64).collect();
    assert_eq!(want.len(), 3);
    env.ok(&["put", s(&env.write("x", &data))]);
    for placement in ["device", "host"] {
        let o = env
            .cmd()
            .args(["--json", "search", "x"])
            .arg(std::ffi::OsStr::from_bytes(&pattern))
            .args(["--offsets", "--placement", placement])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let got: Vec<u64> =
            r["result"]["offsets"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(got, want, "{placement}");
    }
}
