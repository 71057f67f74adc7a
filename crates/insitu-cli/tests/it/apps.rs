//! BlueDBM's applications from the command line (§7): string search by the in-store processors and by
//! host software, against a naive scan and ripgrep; nearest-neighbour search against a naive reference.

use crate::fs::appliance;
use crate::{s, text, Env};

/// Lines (split at `\n`) in which at least one occurrence of `needle` starts.
fn naive_lines(hay: &[u8], needle: &[u8]) -> u64 {
    let mut line_of = Vec::with_capacity(hay.len());
    let mut line = 0usize;
    for c in hay {
        line_of.push(line);
        line += (*c == b'\n') as usize;
    }
    let mut lines: Vec<usize> = naive_offsets(hay, needle).iter().map(|o| line_of[*o]).collect();
    lines.dedup();
    lines.len() as u64
}

fn naive_offsets(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    (0..=hay.len().saturating_sub(needle.len())).filter(|&i| hay[i..].starts_with(needle)).collect()
}

#[test]
fn string_search_agrees_on_every_placement_with_a_naive_scan_and_ripgrep() {
    let env = appliance("64MiB");
    // A small alphabet, so that occurrences are many and straddle pages; 300 KB over 37 pages on 3 nodes.
    let mut hay = text(300_000, 11, b"ab\n");
    // A 1,024-byte needle planted across the boundary of pages 9 and 10 (and once more elsewhere).
    let long: Vec<u8> = text(1024, 12, b"xyz");
    hay[10 * 8192 - 500..10 * 8192 + 524].copy_from_slice(&long);
    hay[200_000..201_024].copy_from_slice(&long);
    let file = env.write("hay.txt", &hay);
    env.ok(&["fs", "put", s(&file), "--name", "hay"]);
    let long = String::from_utf8(long).unwrap();
    for needle in ["abab", "a", "b\na", "bbbbbbbbb", long.as_str()] {
        let want = naive_offsets(&hay, needle.as_bytes());
        assert!(!want.is_empty(), "{needle:?} should occur");
        let mut modeled = Vec::new();
        for placement in ["isp", "host", "remote-host", "host-dram"] {
            let r = env.json(&[
                "bluedbm",
                "search",
                "hay",
                needle,
                "--offsets",
                "--placement",
                placement,
                "--node",
                "1",
            ]);
            let r = &r["result"];
            let got: Vec<usize> =
                r["offsets"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
            assert_eq!(got, want, "{needle:?} on {placement}");
            assert_eq!(r["count"].as_u64(), Some(want.len() as u64));
            match needle.contains('\n') {
                true => assert!(r["lines"].is_null()),
                false => {
                    assert_eq!(r["lines"].as_u64(), Some(naive_lines(&hay, needle.as_bytes())), "{needle:?}")
                }
            }
            modeled.push(r["cost"]["modeled_s"].as_f64().unwrap());
        }
        assert!(modeled.iter().all(|m| *m > 0.0), "{modeled:?}");
    }
    // The in-store search sends only results over PCIe: far less than the file.
    let r = env.json(&["bluedbm", "search", "hay", "bbbbbbbbb"]);
    let pcie = r["result"]["cost"]["pcie_bytes"].as_u64().unwrap();
    assert!(pcie < hay.len() as u64 / 20, "{pcie}");
    assert!(r["result"]["cost"]["jobs"].as_u64().unwrap() >= 3, "a job on each node");
    // ripgrep, where it is installed, counts the same lines and (for a needle that cannot overlap itself)
    // the same occurrences.
    if let Ok(o) = std::process::Command::new("rg").args(["-F", "-c", "abab", s(&file)]).output() {
        let lines: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        assert_eq!(r_lines(&env, "abab"), lines);
        let o = std::process::Command::new("rg")
            .args(["-F", "--count-matches", "aab", s(&file)])
            .output()
            .unwrap();
        let n: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
        let r = env.json(&["bluedbm", "search", "hay", "aab"]);
        assert_eq!(r["result"]["count"].as_u64(), Some(n));
    }
    // Bad needles and files are refused by name.
    let err = env.fails(&["bluedbm", "search", "hay", ""]);
    assert!(err.contains("empty"), "{err}");
    let err = env.fails(&["bluedbm", "search", "hay", &"x".repeat(1025)]);
    assert!(err.contains("1025") && err.contains("1024"), "{err}");
    let err = env.fails(&["bluedbm", "search", "nope", "x"]);
    assert!(err.contains("nope"), "{err}");
}

fn r_lines(env: &Env, needle: &str) -> u64 {
    env.json(&["bluedbm", "search", "hay", needle])["result"]["lines"].as_u64().unwrap()
}

/// The `k` nearest items (index, distance), closest first, ties to the lowest index: a naive scan.
fn naive_nearest(items: &[u8], query: &[u8], k: usize) -> Vec<(u64, u64)> {
    let mut all: Vec<(u64, u64)> = items
        .chunks(query.len())
        .enumerate()
        .map(|(i, it)| (it.iter().zip(query).map(|(a, b)| (a ^ b).count_ones() as u64).sum(), i as u64))
        .collect();
    all.sort_unstable();
    all.into_iter().take(k).map(|(d, i)| (i, d)).collect()
}

fn pairs(v: &serde_json::Value) -> Vec<(u64, u64)> {
    let i = v["indices"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap());
    i.zip(v["distances"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap())).collect()
}

#[test]
fn nearest_neighbours_agree_on_every_placement_with_a_naive_scan() {
    let env = appliance("64MiB");
    // 300 items of 8 KiB: pages of a text, with repeated items so that distances tie.
    let mut items = text(300 * 8192, 21, b"abcdefgh \n");
    items.copy_within(0..8192, 9 * 8192);
    let file = env.write("items.bin", &items);
    env.ok(&["fs", "put", s(&file), "--name", "items"]);
    // Queries: item 42 with 40 bytes changed (a near duplicate), and item 0 (tied with item 9).
    let mut q = items[42 * 8192..43 * 8192].to_vec();
    for i in (0..8192).step_by(200) {
        q[i] ^= 0x21;
    }
    q.extend_from_slice(&items[..8192]);
    let qfile = env.write("q.bin", &q);
    let want: Vec<Vec<(u64, u64)>> = q.chunks(8192).map(|x| naive_nearest(&items, x, 5)).collect();
    assert_eq!((want[0][0].0, want[1][0], want[1][1]), (42, (0, 0), (9, 0)));
    for placement in ["isp", "host", "remote-host", "host-dram"] {
        let r = env.json(&[
            "bluedbm",
            "knn",
            "items",
            s(&qfile),
            "--k",
            "5",
            "--placement",
            placement,
            "--threads",
            "2",
        ]);
        let got: Vec<Vec<(u64, u64)>> =
            r["result"]["queries"].as_array().unwrap().iter().map(pairs).collect();
        assert_eq!(got, want, "{placement}");
        // Several queries: the top-level lists are a list a query.
        let top: Vec<Vec<(u64, u64)>> = (0..2)
            .map(|q| {
                pairs(&serde_json::json!({ "indices": r["result"]["indices"][q],
                                           "distances": r["result"]["distances"][q] }))
            })
            .collect();
        assert_eq!(top, want, "{placement}");
        assert_eq!(r["result"]["compared"].as_u64(), Some(600));
        // With LSH, only the near duplicates' buckets are compared, and they are found.
        let r = env.json(&["bluedbm", "knn", "items", s(&qfile), "--lsh", "8", "--placement", placement]);
        let got: Vec<Vec<(u64, u64)>> =
            r["result"]["queries"].as_array().unwrap().iter().map(pairs).collect();
        assert_eq!(got, vec![vec![want[0][0]], vec![want[1][0]]], "{placement} with LSH");
        assert!(r["result"]["compared"].as_u64().unwrap() < 60, "{}", r["result"]["compared"]);
    }
    // The buckets are built once, on first use.
    let r = env.json(&["bluedbm", "knn", "items", s(&qfile), "--lsh", "8"]);
    assert_eq!(r["result"]["lsh_built"], false);
    let first = r["result"]["queries"].clone();
    // Kept with a checksum: a flipped bit in them is found, and they are built again, the answer the same.
    let lsh = std::fs::read_dir(env.data().join("fs/lsh")).unwrap().next().unwrap().unwrap().path();
    let mut kept = std::fs::read(&lsh).unwrap();
    let last = kept.len() - 3;
    kept[last] ^= 0x10;
    std::fs::write(&lsh, &kept).unwrap();
    let r = env.json(&["bluedbm", "knn", "items", s(&qfile), "--lsh", "8"]);
    assert_eq!((&r["result"]["lsh_built"], &r["result"]["queries"]), (&serde_json::json!(true), &first));
    // Fewer candidates than --k share the queries' buckets: said, not left to be noticed.
    let r = env.json(&["bluedbm", "knn", "items", s(&qfile), "--lsh", "8", "--k", "50"]);
    let w = r["result"]["warning"].as_str().unwrap_or("");
    assert!(w.contains("queries [0, 1] got fewer than --k 50 items"), "{r}");
    assert!(r["result"]["compared"].as_u64().unwrap() < 100, "{r}");
    let text = env.ok(&["bluedbm", "knn", "items", s(&qfile), "--lsh", "8", "--k", "50"]);
    assert!(text.contains(" of the --k 50: no more items share an LSH bucket"), "{text}");
    // Without LSH every item is a candidate: k of them, and nothing to say.
    let r = env.json(&["bluedbm", "knn", "items", s(&qfile), "--k", "50"]);
    assert!(r["result"]["warning"].is_null(), "{r}");

    // One query: its indices and distances at the top.
    let one = env.write("one.bin", &q[..8192]);
    let r = env.json(&["bluedbm", "knn", "items", s(&one), "--k", "2"]);
    assert_eq!(pairs(&r["result"]), want[0][..2].to_vec());
    // Bad input, refused by name.
    let odd = env.write("odd.bin", &items[..8192 * 3 + 100]);
    env.ok(&["fs", "put", s(&odd), "--name", "odd"]);
    let err = env.fails(&["bluedbm", "knn", "odd", s(&one)]);
    assert!(err.contains("not a whole number of 8192-byte items") && err.contains("refused"), "{err}");
    let short = env.write("short.bin", &q[..100]);
    let err = env.fails(&["bluedbm", "knn", "items", s(&short)]);
    assert!(err.contains("100 bytes") && err.contains("8192-byte item"), "{err}");
    let err = env.fails(&["bluedbm", "knn", "items", s(&one), "--k", "0"]);
    assert!(err.contains("0 is not in 1..=4294967295"), "{err}");
    let err = env.fails(&["bluedbm", "knn", "items", "/nonexistent/q.bin"]);
    assert!(err.contains("/nonexistent/q.bin"), "{err}");
    let err = env.fails(&["bluedbm", "knn", "items", s(&one), "--lsh", "0"]);
    assert!(err.contains("1 to 1024 bands"), "{err}");
    let err = env.fails(&["bluedbm", "knn", "items", s(&one), "--lsh", "100000"]);
    assert!(err.contains("1 to 1024 bands") && err.contains("100000 bands"), "{err}");
    let err = env.fails(&["bluedbm", "knn", "items", s(&one), "--engines", "0"]);
    assert!(err.contains("--engines must be at least 1"), "{err}");
    let err = env.fails(&["bluedbm", "knn", "items", s(&one), "--engines", "268435456"]);
    assert!(err.contains("1 to 128 engines"), "{err}");
    let err = env.fails(&["bluedbm", "search", "items", "ab", "--throttle", "100"]);
    assert!(err.contains("at least a page"), "{err}");
    // An option the placement does not use is said, not silently dropped (nor refused: a script may run
    // every placement with the same options).
    for (args, want) in [
        (&["--threads", "2"][..], "note: --threads is the host placements'"),
        (&["--placement", "host", "--throttle", "600MB"], "note: --throttle is the in-store processors'"),
    ] {
        let o = env.run(&[&["bluedbm", "knn", "items", s(&one)][..], args].concat());
        assert!(o.status.success() && String::from_utf8_lossy(&o.stderr).contains(want), "{o:?}");
    }
    // A k past the items gives every item, in order.
    let r = env.json(&["bluedbm", "knn", "items", s(&one), "--k", "4294967295"]);
    assert_eq!(pairs(&r["result"]), naive_nearest(&items, &q[..8192], 300));
    // Throttled flash (§7.1's 600 MB/s) slows the in-store engines to the throttle, and fewer engines
    // change nothing here (the cards bound them): the same answer either way.
    let modeled = |extra: &[&str]| {
        let mut args = vec!["bluedbm", "knn", "items", s(&one), "--k", "2"];
        args.extend_from_slice(extra);
        let r = env.json(&args);
        assert_eq!(pairs(&r["result"]), want[0][..2].to_vec());
        r["result"]["cost"]["modeled_s"].as_f64().unwrap()
    };
    let (free, slow) = (modeled(&[]), modeled(&["--throttle", "100MB/s"]));
    // Each node reads its 100 items at the throttle.
    assert!(slow > 2.0 * free && slow >= 0.99 * 100.0 * 8192.0 / 100e6, "{free} vs {slow}");
    let r = env.json(&["bluedbm", "knn", "items", s(&one), "--throttle", "100MB/s"]);
    let bound = r["result"]["cost"]["bound"].as_str().unwrap();
    assert!(bound.contains("flash reads throttled to"), "{bound}");
    // DRAM with a tenth of the items on flash, or a twentieth on disk (§7.1): the same answer, the misses
    // read (flash) or waited for (disk), and slower than all in DRAM.
    let dram = |extra: &[&str]| {
        let mut args = vec!["bluedbm", "knn", "items", s(&one), "--k", "2", "--placement", "host-dram"];
        args.extend_from_slice(extra);
        let r = env.json(&args);
        assert_eq!(pairs(&r["result"]), want[0][..2].to_vec(), "{extra:?}");
        (r["result"]["cost"]["modeled_s"].as_f64().unwrap(), r["result"]["cost"]["pages"].as_u64().unwrap())
    };
    let (all, flash, disk) = (dram(&[]), dram(&["--flash-share", "0.1"]), dram(&["--disk-share", "0.05"]));
    assert_eq!((all.1, disk.1), (0, 0));
    assert!(flash.1 > 10 && flash.1 < 60, "{flash:?}");
    assert!(flash.0 > 5.0 * all.0 && disk.0 > flash.0, "{all:?} {flash:?} {disk:?}");
    let err = env.fails(&["bluedbm", "knn", "items", s(&one), "--flash-share", "0.1"]);
    assert!(err.contains("use the host-dram placement"), "{err}");
    let err =
        env.fails(&["bluedbm", "knn", "items", s(&one), "--placement", "host-dram", "--flash-share", "1.5"]);
    assert!(err.contains("must be 0 to 1"), "{err}");
    // The buckets go when the file goes.
    let lsh = env.data().join("fs/lsh");
    assert_eq!(std::fs::read_dir(&lsh).unwrap().count(), 1);
    env.ok(&["fs", "rm", "items"]);
    assert_eq!(std::fs::read_dir(&lsh).unwrap().count(), 0);
}

/// Joules of `nodes` nodes over `time_s`, each device and host busy as `busy` says (node number -> s):
/// the profile's active watts while busy, idle watts otherwise; worked out here from the profile.
fn joules(p: &insitu_device::Profile, time_s: f64, busy: &serde_json::Value, nodes: u32) -> (f64, f64) {
    let part = |what: &str, active: f64, idle: f64| -> f64 {
        (0..nodes)
            .map(|n| {
                let b = busy[what][n.to_string()].as_f64().unwrap_or(0.0).min(time_s);
                active * b + idle * (time_s - b)
            })
            .sum()
    };
    let hosts = part("hosts", p.host.active_w, p.host.idle_w);
    (hosts, part("devices", p.power.device_active_w, p.power.device_idle_w))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn every_application_reports_its_modeled_time_and_energy() {
    let env = appliance("64MiB");
    let p = insitu_device::Profile::load(s(&env.path("small.toml"))).unwrap();
    let hay = text(300_000, 31, b"ab\n");
    let file = env.write("hay.txt", &hay);
    env.ok(&["fs", "put", s(&file), "--name", "hay"]);
    // Which node holds each page, from the page table.
    let nodes_of: Vec<u32> = env
        .ok(&["fs", "pages", "hay"])
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    let pages = nodes_of.len() as f64;
    let holders: std::collections::BTreeSet<String> = nodes_of.iter().map(|n| n.to_string()).collect();
    let keys = |v: &serde_json::Value| -> std::collections::BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    };
    for placement in ["isp", "host", "remote-host", "host-dram"] {
        let r = env.json(&["bluedbm", "search", "hay", "abba", "--placement", placement, "--node", "1"]);
        let (m, c) = (&r["result"]["modeled"], &r["result"]["cost"]);
        assert_eq!(m, &c["modeled"], "{placement}");
        assert_eq!((m["profile"].as_str(), m["nodes"].as_u64()), (Some("bluedbm"), Some(3)));
        let t = m["time_s"].as_f64().unwrap();
        assert!(t > 0.0 && t == c["modeled_s"].as_f64().unwrap(), "{placement}: {m}");
        let (hosts, devices) = joules(&p, t, &c["busy"], 3);
        assert!(close(m["host_energy_j"].as_f64().unwrap(), hosts), "{placement}: {m} vs {hosts}");
        assert!(close(m["device_energy_j"].as_f64().unwrap(), devices), "{placement}: {m} vs {devices}");
        assert!(close(m["energy_j"].as_f64().unwrap(), hosts + devices), "{placement}: {m}");
        let busy = &c["busy"];
        let each: Vec<f64> = ["devices", "hosts"]
            .iter()
            .flat_map(|k| busy[k].as_object().unwrap().values().map(|v| v.as_f64().unwrap()))
            .collect();
        assert!(
            each.iter().all(|b| *b > 0.0 && *b <= t * (1.0 + 1e-9)),
            "{placement}: busy within the run: {busy}"
        );
        let flash_s: f64 = busy["devices"].as_object().unwrap().values().map(|v| v.as_f64().unwrap()).sum();
        match placement {
            // Only the engines of the nodes holding pages work; no host does.
            "isp" => {
                assert!(c["device_cpu_s"].as_f64().unwrap() > 0.0, "measured: the devices worked: {c}");
                assert_eq!(keys(&busy["devices"]), holders);
                assert!(keys(&busy["hosts"]).is_empty(), "{busy}");
                assert!(close(hosts, 3.0 * t * p.host.idle_w));
            }
            // Every page read once from its node's flash, and node 1's host busy with its CPU; through
            // the pages' hosts, each other holder's host serves its pages.
            "host" | "remote-host" => {
                assert!(close(flash_s, pages * 8192.0 / p.device.internal_read_bw), "{placement}: {busy}");
                assert!(busy["hosts"]["1"].as_f64() >= c["modeled_host_cpu_s"].as_f64(), "{busy}");
                let mut want: std::collections::BTreeSet<String> = ["1".to_string()].into();
                if placement == "remote-host" {
                    want.extend(holders.iter().filter(|n| *n != "1").cloned());
                }
                assert_eq!(keys(&busy["hosts"]), want, "{placement}");
            }
            // The file in DRAM: no flash read.
            _ => {
                assert!(keys(&busy["devices"]).is_empty(), "{busy}");
                assert!(close(devices, 3.0 * t * p.power.device_idle_w));
            }
        }
    }
    // A host that bounds the run is busy all of it: its cores (one thread), or its memory (24 threads).
    for (threads, bound) in [("1", "host cpu"), ("24", "host memory")] {
        let r =
            env.json(&["bluedbm", "search", "hay", "abba", "--placement", "host-dram", "--threads", threads]);
        let c = &r["result"]["cost"];
        assert_eq!(c["bound"], bound, "{threads} thread(s)");
        assert!(close(c["busy"]["hosts"]["0"].as_f64().unwrap(), c["modeled_s"].as_f64().unwrap()), "{c}");
    }
    // Nearest neighbours and a traversal model theirs the same way.
    let items = env.write("items.bin", &text(20 * 8192, 5, b"abcd"));
    env.ok(&["fs", "put", s(&items), "--name", "items"]);
    let q = env.write("q.bin", &text(8192, 6, b"abcd"));
    let r = env.json(&["bluedbm", "knn", "items", s(&q), "--placement", "host"]);
    let (m, c) = (&r["result"]["modeled"], &r["result"]["cost"]);
    let (hosts, devices) = joules(&p, m["time_s"].as_f64().unwrap(), &c["busy"], 3);
    assert!(close(m["energy_j"].as_f64().unwrap(), hosts + devices) && hosts > 0.0, "{m}");
    let edges = env.write("edges.txt", b"0 1\n1 2\n2 3\n3 4\n0 5\n");
    env.ok(&["bluedbm", "put-graph", s(&edges), "--name", "g"]);
    for placement in ["isp", "remote-host"] {
        let r = env.json(&["bluedbm", "bfs", "g", "--from", "0", "--placement", placement]);
        assert!(r["result"]["device_cpu_s"].as_f64().unwrap() > 0.0 && r["result"]["host_cpu_s"].is_f64());
        let m = &r["result"]["modeled"];
        let t = m["time_s"].as_f64().unwrap();
        assert!(t > 0.0 && t == r["result"]["modeled_s"].as_f64().unwrap(), "{m}");
        let (hosts, devices) = joules(&p, t, &r["result"]["busy"], 3);
        assert!(close(m["energy_j"].as_f64().unwrap(), hosts + devices), "{placement}: {m}");
        let flash_s: f64 =
            r["result"]["busy"]["devices"].as_object().unwrap().values().map(|v| v.as_f64().unwrap()).sum();
        assert!(close(flash_s, 6.0 * 8192.0 / p.device.internal_read_bw), "{placement}: six vertex pages");
    }
    // A read over the storage network too.
    let r = env.json(&["fs", "get", "hay", "--via", "host", "--from", "2", "-o", s(&env.path("back"))]);
    let m = &r["result"]["modeled"];
    assert!(m["time_s"].as_f64() == r["result"]["via"]["modeled_s"].as_f64(), "{m}");
    let t = m["time_s"].as_f64().unwrap();
    assert!(m["energy_j"].as_f64().unwrap() > 3.0 * t * (p.host.idle_w + p.power.device_idle_w), "{m}");
    // The text says it too.
    let out = env.ok(&["bluedbm", "search", "hay", "abba"]);
    assert!(out.contains(" J (3 node(s): hosts "), "{out}");
}
