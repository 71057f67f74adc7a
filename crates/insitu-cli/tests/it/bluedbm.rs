//! BlueDBM from the command line: the reproduction of §6.3-6.5 (Figs. 11-13) and the network's routes.

use crate::Env;

#[test]
fn repro_bluedbm_net_gives_figs_11_to_13_beside_the_paper() {
    let env = Env::new();
    let out = env.json(&["repro", "bluedbm-net"]);
    let figs = &out["result"]["figures"];
    let rows = figs["fig11"]["rows"].as_array().unwrap();
    assert!(rows.len() >= 12);
    for r in rows {
        assert!(r["paper"].is_f64() && r["modeled"].is_f64(), "{r}");
        assert!(r.get("measured").is_some(), "{r}");
        let (paper, modeled) = (r["paper"].as_f64().unwrap(), r["modeled"].as_f64().unwrap());
        // Everything within 10% of the paper: 8.02 vs 8.2 Gb/s is the largest gap (the packet format).
        assert!((modeled / paper - 1.0).abs() < 0.1, "{r}");
    }
    // Fig. 12: four paths, each split in four parts and a total; Fig. 13: four bandwidths, within 5% of
    // the paper (6.28 vs 6.5 GB/s for three nodes is the largest gap: 8.03 vs 8.2 Gb/s links).
    let fig12 = figs["fig12"]["rows"].as_array().unwrap();
    assert_eq!(fig12.len(), 20);
    assert!(fig12.iter().any(|r| r["label"] == "H-RH-F: storage"));
    let fig13 = figs["fig13"]["rows"].as_array().unwrap();
    assert_eq!(fig13.len(), 4);
    for r in fig13 {
        let (paper, modeled) = (r["paper"].as_f64().unwrap(), r["modeled"].as_f64().unwrap());
        assert!((modeled / paper - 1.0).abs() < 0.05, "{r}");
        assert!(r["measured"].as_f64().unwrap() > 0.0, "{r}");
    }
    // Figs. 11 and 13 are within 10% everywhere, so their verdicts say so; Fig. 12's names the part the
    // profile does not price (the host software of the paper's H-F path).
    for id in ["fig11", "fig13"] {
        assert_eq!(figs[id]["verdict"]["within"], true, "{}", figs[id]["verdict"]);
    }
    let v = figs["fig12"]["verdict"]["line"].as_str().unwrap();
    assert!(v.contains("H-F: software") && v.contains("does not price"), "{v}");
    let text = env.ok(&["repro", "bluedbm-net"]);
    assert!(text.contains("| one stream, 8 hops | Gb/s | 8.200 |"), "{text}");
    assert!(text.contains("ISP-F: total") && text.contains("ISP-3Nodes"), "{text}");
    assert!(text.contains("**Verdict:** within +-20% of the paper: all 16 value(s)"), "{text}");
    // Written into ./repro-out: a table and a plot per figure, and the report.
    for f in ["fig11.md", "fig12.svg", "fig13.png", "figures.json"] {
        assert!(env.path("repro-out/bluedbm-net").join(f).is_file(), "{f}");
    }
    let report = std::fs::read_to_string(env.path("repro-out/REPORT.md")).unwrap();
    assert!(report.contains("![BlueDBM (ISCA '15) fig12](bluedbm-net/fig12.svg)"), "{report}");
    let err = env.fails(&["repro", "bluedbm-net", "--profile", "smartssd"]);
    assert!(err.contains("no storage network"), "{err}");
}

#[test]
fn net_routes_checks_topologies_and_refuses_bad_files_by_name() {
    let env = Env::new();
    let r = env.json(&["net", "routes", "--topology", "ring", "--nodes", "20", "--lanes", "4"]);
    assert_eq!(r["result"]["cables"], 80);
    assert_eq!(r["result"]["diameter"], 10);
    let pair = &r["result"]["pairs"][0];
    assert_eq!(
        (pair["src"].as_u64(), pair["dst"].as_u64(), pair["distinct"].as_u64()),
        (Some(0), Some(1), Some(4))
    );
    assert_eq!(r["result"]["pairs"].as_array().unwrap().len(), 20 * 19);
    // A large topology lists node 0's routes only (all pairs' took gigabytes at 256 nodes); its diameter
    // and mean hops still cover every pair: on a line of n nodes, (n + 1) / 3.
    let r = env.json(&["net", "routes", "--topology", "line", "--nodes", "200"]);
    assert_eq!(
        (r["result"]["pairs"].as_array().unwrap().len(), r["result"]["pairs_from"].as_u64()),
        (199, Some(0))
    );
    assert_eq!(r["result"]["diameter"], 199);
    assert!((r["result"]["mean_hops"].as_f64().unwrap() - 201.0 / 3.0).abs() < 1e-9);
    let file = env.path("star.toml");
    std::fs::write(
        &file,
        "nodes = 3\n[[link]]\na = 0\nb = 1\nlanes = 2\n[[link]]\na = 0\nb = 2\nlanes = 2\n",
    )
    .unwrap();
    let r = env.json(&["net", "routes", "--topology", file.to_str().unwrap()]);
    assert_eq!((r["result"]["nodes"].as_u64(), r["result"]["cables"].as_u64()), (Some(3), Some(4)));
    let bad = [
        ("nodes = 2\n[[link]]\na = 0\nb = 2\n", "names node 2"),
        (
            "nodes = 3\n[[link]]\na = 0\na_port = 1\nb = 1\n[[link]]\na = 0\na_port = 1\nb = 2\n",
            "node 0 port 1 is used twice",
        ),
        ("nodes = 2\n[[link]]\na = 0\nb = 1\nlanes = 9\n", "needs 9 ports"),
        ("nodes = 4\n[[link]]\na = 0\nb = 1\n[[link]]\na = 2\nb = 3\n", "no route from node 0 to node 2"),
        ("nodes = 2\n[[links]]\na = 0\nb = 1\n", "unknown field"),
    ];
    for (text, want) in bad {
        std::fs::write(&file, text).unwrap();
        let err = env.fails(&["net", "routes", "--topology", file.to_str().unwrap()]);
        assert!(err.contains(want) && !err.contains("panicked"), "{text}: {err}");
    }
    let err = env.fails(&["net", "routes", "--topology", "torus"]);
    assert!(err.contains("unknown shape"), "{err}");
    let err = env.fails(&["net", "routes", "--topology", env.path("missing.toml").to_str().unwrap()]);
    assert!(err.contains("cannot read it"), "{err}");
}

#[test]
fn gen_graph500_writes_the_edges_asked_for_in_either_format() {
    let env = Env::new();
    let text = env.path("g.txt");
    let r = env.json(&["gen", "graph500", "--scale", "8", "--edge-factor", "4", "-o", crate::s(&text)]);
    assert_eq!((r["result"]["vertices"].as_u64(), r["result"]["edges"].as_u64()), (Some(256), Some(1024)));
    let lines: Vec<(u32, u32)> = std::fs::read_to_string(&text)
        .unwrap()
        .lines()
        .map(|l| {
            let mut it = l.split(' ').map(|x| x.parse::<u32>().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect();
    assert_eq!(lines.len(), 1024);
    assert!(lines.iter().all(|(u, v)| *u < 256 && *v < 256));
    // The same graph as little-endian u32 pairs, by extension.
    let bin = env.path("g.bin");
    let r = env.json(&["gen", "graph500", "--scale", "8", "--edge-factor", "4", "-o", crate::s(&bin)]);
    assert_eq!(r["result"]["format"], "u32le");
    let bytes = std::fs::read(&bin).unwrap();
    let pairs: Vec<(u32, u32)> = bytes
        .chunks_exact(8)
        .map(|e| {
            (u32::from_le_bytes(e[..4].try_into().unwrap()), u32::from_le_bytes(e[4..].try_into().unwrap()))
        })
        .collect();
    assert_eq!(pairs, lines);
    let err = env.fails(&["gen", "graph500", "--scale", "0", "-o", crate::s(&text)]);
    assert!(err.contains("--scale must be 1 to 32"), "{err}");
    let err = env.fails(&["gen", "graph500", "--scale", "4", "--format", "csv", "-o", crate::s(&text)]);
    assert!(err.contains("text or u32le"), "{err}");
}

#[test]
fn repro_bluedbm_apps_gives_figs_16_to_21_beside_the_paper() {
    let env = Env::new();
    let work = env.path("work");
    let out = env.json(&["repro", "bluedbm-apps", "--quick", "--work", work.to_str().unwrap()]);
    let figs = &out["result"]["figures"];
    for id in ["fig16", "fig17", "fig18", "fig19", "fig20", "fig21"] {
        let rows = figs[id]["rows"].as_array().unwrap_or_else(|| panic!("{id}: {out}"));
        assert!(!rows.is_empty(), "{id}");
        for r in rows {
            assert!(r["modeled"].as_f64().unwrap() >= 0.0, "{id}: {r}");
            assert!(r.get("paper").is_some() && r.get("measured").is_some(), "{id}: {r}");
        }
        assert!(figs[id]["verdict"]["line"].as_str().is_some());
    }
    // Fig. 21: the engine sweep on one card, within 20% of the paper's 508, 770 and 1060 MB/s.
    let f21 = figs["fig21"]["rows"].as_array().unwrap();
    for r in &f21[..3] {
        let (p, m) = (r["paper"].as_f64().unwrap(), r["modeled"].as_f64().unwrap());
        assert!((m / p - 1.0).abs() < 0.2, "{r}");
    }
    // Fig. 20: the in-store processor's traversal within 20% of the paper's, and the fastest flash path.
    let f20 = figs["fig20"]["rows"].as_array().unwrap();
    assert_eq!(f20[0]["label"], "ISP-F");
    assert!((f20[0]["modeled"].as_f64().unwrap() / 7692.0 - 1.0).abs() < 0.2, "{}", f20[0]);
    assert!(f20[0]["modeled"].as_f64() > f20[1]["modeled"].as_f64());
    for f in ["fig16.svg", "fig20.md", "figures.json"] {
        assert!(env.path("repro-out/bluedbm-apps").join(f).is_file(), "{f}");
    }
    // The appliance goes with the run.
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "the appliance was left in {}", work.display());
}

#[test]
fn net_bench_reads_by_every_path_and_refuses_what_it_cannot_run() {
    let env = Env::new();
    let work = env.path("work");
    let w = work.to_str().unwrap();
    let args = ["net", "bench", "--nodes", "2", "--topology", "line", "--size", "16MiB", "--reads", "300"];
    let r = env.json(&[&args[..], &["--work", w]].concat())["result"].clone();
    let rows: Vec<(String, u64, f64)> = r["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["path"].as_str().unwrap().to_string(),
                x["reads"].as_u64().unwrap(),
                x["modeled_gb_s"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert!(rows.iter().all(|(_, reads, gbps)| *reads == 300 && *gbps > 0.0), "{rows:?}");
    let modeled = |path: &str| rows.iter().find(|(p, ..)| p.starts_with(path)).unwrap().2;
    // The host's reads cross PCIe to it (1.6 GB/s on the profile, BlueDBM §5); the ISP's do not (Fig. 13).
    assert!(modeled("Host-local") <= 1.6 + 1e-9, "{rows:?}");
    assert!(modeled("ISP-local") > modeled("Host-local"), "{rows:?}");
    // The same reads again: the same simulated bandwidths.
    let again = env.json(&[&args[..], &["--work", w]].concat())["result"].clone();
    assert_eq!(
        again["rows"].as_array().unwrap().iter().map(|x| x["modeled_gb_s"].clone()).collect::<Vec<_>>(),
        r["rows"].as_array().unwrap().iter().map(|x| x["modeled_gb_s"].clone()).collect::<Vec<_>>()
    );
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "the NAND images go with the run");
    // Without --work, the default folder it made under the current one goes too.
    env.ok(&["net", "bench", "--nodes", "2", "--topology", "line", "--size", "8MiB", "--reads", "20"]);
    assert!(!env.path("target").exists(), "target/insitu-bench left behind");
    for (extra, why) in [
        (vec!["--reads", "0"], "--reads must be at least 1"),
        (vec!["--size", "0"], "less than a page a node"),
        (vec!["--size", "1PB"], "more than the flash of 2 bluedbm nodes"),
        (vec!["--profile", "smartssd"], "no storage network"),
        (vec!["--topology", "nope"], "unknown shape"),
    ] {
        let mut a = vec![
            "net",
            "bench",
            "--nodes",
            "2",
            "--topology",
            "line",
            "--size",
            "16MiB",
            "--reads",
            "10",
            "--work",
            w,
        ];
        // The options above, one of them changed.
        match a.iter().position(|x| *x == extra[0]) {
            Some(k) => a[k + 1] = extra[1],
            None => a.extend(extra),
        }
        let err = env.fails(&a);
        assert!(err.contains(why), "{a:?}: {err}");
    }
}
