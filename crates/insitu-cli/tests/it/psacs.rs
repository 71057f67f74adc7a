//! PSACS from the command line: shuffle, shuffle-read, placements agree, a killed shuffle leaves nothing.

use crate::{s, Env};

fn setup() -> Env {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny", "--capacity", "64MiB"]);
    let src = env.path("t.parquet");
    env.ok(&["gen", "synthetic", "--rows", "4000", "--columns", "6", "--distinct", "3000", "-o", s(&src)]);
    env.ok(&["put-table", s(&src), "--name", "t", "--key", "c0"]);
    env
}

#[test]
fn shuffle_and_shuffle_read_agree_across_placements() {
    let env = setup();
    let mut files = Vec::new();
    for (placement, extra) in [
        ("device", vec!["--threads", "2", "--memory-budget", "1TiB"]),
        ("host-sort", vec!["--threads", "2", "--memory-budget", "1MiB"]),
        ("host-bucket", vec!["--threads", "2"]),
    ] {
        let out = format!("s-{placement}");
        let mut args = vec![
            "shuffle",
            "t",
            "--key",
            "c0,c3",
            "--partitions",
            "32",
            "--placement",
            placement,
            "--out",
            &out,
        ];
        args.extend(extra);
        let r = env.json(&args);
        assert_eq!(r["result"]["rows"], 4000);
        assert!(r["result"]["compression_ratio"].as_f64().unwrap() > 0.5);
        if placement == "device" {
            assert_eq!(r["bytes"]["device_to_host"], 0, "only commands cross the host link");
        }
        // An option the placement does not use is said, and not reported as used.
        let (threads, warning) = (&r["result"]["threads"], r["result"]["warning"].as_str().unwrap_or(""));
        match placement {
            "device" => {
                assert!(threads.is_null() && warning.contains("threads (2) are the host baselines'"), "{r}");
                assert!(warning.contains("memory budget (1.00 TiB) is more than a device's memory"), "{r}")
            }
            "host-sort" => {
                assert!(threads == 2 && warning.contains("memory budget is the device placement's"), "{r}")
            }
            _ => assert!(threads == 2 && warning.is_empty(), "{r}"),
        }
        let f = env.path(&format!("{out}-p5.parquet"));
        let rr = env.json(&["shuffle-read", &out, "--partition", "5", "-o", s(&f)]);
        files.push((rr["result"]["rows"].as_u64().unwrap(), std::fs::read(&f).unwrap()));
    }
    // Same rows in partition 5; the device and host-sort paths even write them in the same order.
    assert!(
        files.iter().all(|f| f.0 == files[0].0 && f.0 > 0),
        "{:?}",
        files.iter().map(|f| f.0).collect::<Vec<_>>()
    );
    assert_eq!(files[0].1, files[1].1);
    // The sort says the same of a memory budget it cannot use whole, or at all.
    for (placement, budget, said) in [
        ("device", "1TiB", "is more than a device's memory"),
        ("device", "4MiB", ""),
        ("host", "64MiB", "the device placement's, unused here"),
    ] {
        let out = format!("t-{placement}-{budget}");
        let args =
            ["sort", "t", "--key", "c0", "--placement", placement, "--memory-budget", budget, "--out", &out];
        let r = env.json(&args);
        let warning = r["result"]["warning"].as_str().unwrap_or("");
        assert!(if said.is_empty() { warning.is_empty() } else { warning.contains(said) }, "{r}");
        assert_eq!(r["warnings"].as_array().map_or(0, Vec::len), usize::from(!said.is_empty()), "{r}");
    }
    // For people, a warning is said on standard error; standard output has the report alone.
    let o = env.run(&[
        "sort",
        "t",
        "--key",
        "c0",
        "--placement",
        "host",
        "--memory-budget",
        "64MiB",
        "--out",
        "w",
    ]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(
        !out.contains("warning") && err.contains("warning: ") && err.contains("unused here"),
        "{out}\n{err}"
    );
    assert!(env
        .fails(&["shuffle-read", "s-device", "--partition", "32", "-o", s(&env.path("x"))])
        .contains("partitions 0 to 31"));
    assert!(env.fails(&["shuffle", "t", "--key", "c0", "--partitions", "0"]).contains("--partitions"));
    assert!(env.fails(&["shuffle", "t", "--key", "zz"]).contains("no column \"zz\""));
    // A column twice would fold its bytes away into one partition for every row.
    let e = env.fails(&["shuffle", "t", "--key", "c0,c1,c0", "--partitions", "4"]);
    assert!(e.contains("names column \"c0\" twice (positions 1 and 3)"), "{e}");
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

#[test]
fn a_killed_shuffle_leaves_no_output_and_the_table_intact() {
    let env = setup();
    let before = env.path("before.parquet");
    env.ok(&["get-table", "t", "-o", s(&before)]);
    let o = env
        .cmd()
        .args(["shuffle", "t", "--key", "c0", "--partitions", "64", "--out", "s"])
        .env("INSITU_CRASH_AT", "shuffle-before-catalog:1")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(o.status.signal(), Some(9));
    let ls = env.json(&["ls"]);
    let names: Vec<_> = ls["result"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["t"], "no partial shuffle output is visible");
    let after = env.path("after.parquet");
    env.ok(&["get-table", "t", "-o", s(&after)]);
    assert_eq!(std::fs::read(before).unwrap(), std::fs::read(after).unwrap(), "the source table is intact");
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
    env.ok(&["shuffle", "t", "--key", "c0", "--partitions", "64", "--out", "s"]);
}

#[test]
fn a_float_key_puts_zero_and_negative_zero_in_one_partition_on_every_placement() {
    // SQL's equality, as Spark normalizes join and grouping keys: 0.0 = -0.0. 100 rows of each and 50 of
    // 1.5 over 16 partitions: one partition holds the 200 zeros, or the hash split them (it did: the
    // zigzag fold turns the sign bit into one bit of the partition, always another one).
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny", "--capacity", "64MiB"]);
    let mut csv = String::from("id,f\n");
    for i in 0..250 {
        csv.push_str(&format!("{i},{}\n", ["0.0", "-0.0", "1.5", "-0.0", "0.0"][i % 5]));
    }
    let f = env.write("t.csv", csv.as_bytes());
    env.ok(&["put-table", s(&f), "--name", "byid", "--key", "id"]);
    env.ok(&["put-table", s(&f), "--name", "byf", "--key", "f"]);
    for table in ["byid", "byf"] {
        for placement in ["device", "host-sort", "host-bucket"] {
            let out = format!("{table}-{placement}");
            env.ok(&[
                "shuffle",
                table,
                "--key",
                "f",
                "--partitions",
                "16",
                "--placement",
                placement,
                "--out",
                &out,
            ]);
            let rows: Vec<u64> = (0..16)
                .map(|p| {
                    let o = env.path("p.parquet");
                    let r = env.json(&["shuffle-read", &out, "--partition", &p.to_string(), "-o", s(&o)]);
                    r["result"]["rows"].as_u64().unwrap()
                })
                .collect();
            assert_eq!(rows.iter().sum::<u64>(), 250, "{out}");
            assert_eq!(rows.iter().max(), Some(&200), "{out}: {rows:?}");
        }
    }
}
