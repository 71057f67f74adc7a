//! Tables from the command line: generate, load, sort in every placement, read back, reproduce Fig. 13.

use arrow::array::AsArray;

use crate::{s, Env};

#[test]
fn tables_sort_identically_in_every_placement_from_the_cli() {
    let env = Env::new();
    env.init(&["--devices", "3", "--profile", "tiny", "--capacity", "64MiB"]);
    let src = env.path("ol.parquet");
    let g = env.json(&[
        "gen",
        "synthetic",
        "--rows",
        "3000",
        "--columns",
        "8",
        "--distinct",
        "500",
        "-o",
        s(&src),
    ]);
    assert_eq!(g["result"]["rows"], 3000);
    // Shapes the generator cannot make are refused before anything is written (4 billion columns
    // asked for 480 GB at once; a 2^33 distinct count was cut to 32 bits).
    for (flag, value, want) in
        [("--columns", "4294967295", "at most 4096"), ("--distinct", "8589934592", "at most 2^32 values")]
    {
        let err =
            env.fails(&["gen", "synthetic", "--rows", "10", flag, value, "-o", s(&env.path("x.parquet"))]);
        assert!(err.contains(want), "{flag}: {err}");
        assert!(!env.path("x.parquet").exists());
    }
    let put = env.json(&["put-table", s(&src), "--name", "t", "--key", "c0", "--dict", "c0"]);
    assert_eq!(put["result"]["rows_per_device"], serde_json::json!([1000, 1000, 1000]));
    assert_eq!(put["result"]["key_encoding"], serde_json::json!(["dict", "dict", "dict"]));
    let mut outputs = Vec::new();
    for (placement, algo) in
        [("device", "fast"), ("device", "bitonic"), ("host", "fast"), ("host-accel", "fast")]
    {
        let out = format!("t-{placement}-{algo}");
        let r =
            env.json(&["sort", "t", "--key", "c0", "--placement", placement, "--algo", algo, "--out", &out]);
        assert_eq!(r["result"]["rows"], 3000);
        assert!(r["modeled"]["time_s"].as_f64().unwrap() > 0.0);
        if placement == "device" {
            assert_eq!(r["bytes"]["device_to_host"], 0, "only commands cross the host link");
        } else {
            assert!(
                r["bytes"]["device_to_host"].as_u64().unwrap() > 3000 * 32,
                "every part crosses the host link"
            );
        }
        let file = env.path(&format!("{out}.parquet"));
        env.ok(&["get-table", &out, "-o", s(&file)]);
        outputs.push(std::fs::read(&file).unwrap());
    }
    assert!(outputs.windows(2).all(|w| w[0] == w[1]), "every placement and algorithm writes the same table");
    let merged = env.path("m.parquet");
    let r = env.json(&["sort", "t", "--key", "c0", "--out", "m", "--merge", "-o", s(&merged)]);
    assert_eq!(r["result"]["merged"]["rows"], 3000);
    // The same global order from get-table of a sort's output; a table never sorted has none to give.
    let again = env.path("m2.parquet");
    let said = env.ok(&["get-table", "t-device-fast", "-o", s(&again)]);
    assert!(said.contains("--merged"), "{said}");
    env.ok(&["get-table", "m", "--merged", "-o", s(&again)]);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&merged).unwrap());
    assert!(env.fails(&["get-table", "t", "--merged", "-o", s(&again)]).contains("not a sort's output"));
    // Any column sorts: one stored row-wise is pulled out of the rows inside the devices first, and the
    // placements still agree; the output is sorted by that column, merged or not.
    let mut by_c3 = Vec::new();
    for placement in ["device", "host"] {
        let out = format!("c3-{placement}");
        let r = env.json(&["sort", "t", "--key", "c3", "--placement", placement, "--out", &out]);
        assert_eq!(r["result"]["extracted"], true);
        if placement == "device" {
            assert_eq!(r["bytes"]["device_to_host"], 0, "the extraction stays inside the devices");
            let phases = r["measured_phases"].to_string();
            assert!(phases.contains("\"extract\""), "{phases}");
        }
        let file = env.path(&format!("{out}.parquet"));
        env.ok(&["get-table", &out, "-o", s(&file)]);
        by_c3.push(std::fs::read(&file).unwrap());
    }
    assert_eq!(by_c3[0], by_c3[1], "device and host sort by a row-wise column alike");
    let human = env.ok(&["sort", "t", "--key", "c3", "--out", "c3-told"]);
    assert!(human.contains("stored row-wise"), "{human}");
    let c3 = env.path("c3.parquet");
    env.ok(&["get-table", "c3-device", "--merged", "-o", s(&c3)]);
    let merged = insitu_host::table::import::read_table_file(&c3).unwrap();
    let values = merged.column_by_name("c3").unwrap().as_primitive::<arrow::datatypes::UInt32Type>().values();
    assert_eq!(values.len(), 3000);
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "merged by c3");
    // Bad input: an unknown key column, a taken output name.
    assert!(env.fails(&["sort", "t", "--key", "zz"]).contains("no column \"zz\""));
    assert!(env.fails(&["sort", "t", "--key", "c0", "--out", "m"]).contains("already exists"));
    assert!(env.fails(&["get", "t"]).contains("is a table"));
    // A file named for another format is refused before any work (it would hold Parquet), and -o
    // without --merge is refused rather than ignored.
    let err = env.fails(&["sort", "t", "--key", "c0", "--out", "o5", "--merge", "-o", s(&env.path("x.csv"))]);
    assert!(err.contains("tables are written as Parquet, not .csv"), "{err}");
    let err = env.fails(&["sort", "t", "--key", "c0", "--out", "o5", "-o", s(&env.path("x.parquet"))]);
    assert!(err.contains("--merge"), "{err}");
    assert!(!env.json(&["ls"])["result"]["objects"].to_string().contains("\"o5\""));
    // A merge output that cannot be written is refused before any work, and stores nothing.
    let err =
        env.fails(&["sort", "t", "--key", "c0", "--out", "o6", "--merge", "-o", "/nonexistent/x.parquet"]);
    assert!(err.contains("/nonexistent does not exist"), "{err}");
    // One that fails late (it replaces a file, and the name it takes beside it first is a directory's)
    // takes its sorted table along, and leaves the file it would have replaced as it was.
    std::fs::write(env.path("late.parquet"), b"earlier").unwrap();
    std::fs::create_dir(env.path(".late.parquet.partial")).unwrap();
    env.fails(&["sort", "t", "--key", "c0", "--out", "o7", "--merge", "-o", s(&env.path("late.parquet"))]);
    let names = env.json(&["ls"])["result"]["objects"].to_string();
    assert!(!names.contains("\"o6\"") && !names.contains("\"o7\""), "{names}");
    assert_eq!(std::fs::read(env.path("late.parquet")).unwrap(), b"earlier");
    env.ok(&["sort", "t", "--key", "c0", "--out", "o7"]);
    env.ok(&["rm", "o7"]);
    env.ok(&["rm", "m"]);
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}

#[test]
fn a_killed_put_table_leaves_no_half_table() {
    let env = Env::new();
    env.init(&["--devices", "3", "--profile", "tiny", "--capacity", "64MiB"]);
    let src = env.path("t.parquet");
    env.ok(&["gen", "synthetic", "--rows", "2000", "--columns", "4", "-o", s(&src)]);
    // A file of three loader batches, killed after the second: parts half written on every device.
    let big = env.path("big.parquet");
    env.ok(&["gen", "synthetic", "--rows", "150000", "--columns", "4", "-o", s(&big)]);
    for (point, file, exists) in [
        ("put-table-batch:2", &big, false),
        ("put-table-part:2", &src, false),
        ("put-table-catalog:1", &src, true),
    ] {
        let name = format!("t{}", point.len());
        let o = env
            .cmd()
            .args(["put-table", s(file), "--name", &name])
            .env("INSITU_CRASH_AT", point)
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(o.status.signal(), Some(9), "{point}");
        let ls = env.json(&["ls"]);
        let found = ls["result"]["objects"].as_array().unwrap().iter().any(|o| o["name"] == name.as_str());
        assert_eq!(found, exists, "{point}");
        assert_eq!(env.json(&["fsck"])["result"]["ok"], true, "{point}");
    }
}

#[test]
fn tpcc_orderline_loads_and_repro_nascent_runs() {
    let env = Env::new();
    let ol = env.path("ol.parquet");
    let g = env.json(&["gen", "tpcc-orderline", "--warehouses", "1", "-o", s(&ol)]);
    assert!(g["result"]["rows"].as_u64().unwrap() > 250_000);
    let r = env.json(&[
        "repro",
        "nascent",
        "--quick",
        "--tpcc",
        "0",
        "--devices",
        "1,2",
        "--profile",
        "tiny",
        "--work",
        s(&env.path("work")),
    ]);
    let rows = r["result"]["data"]["fig13"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|x| x["speedup_vs_accel"].as_f64().unwrap() > 0.0));
    // Energy as the paper counts it: the sorting processors' power over each run (tiny: 5 W a device's
    // engine, the host's 50 W, the accelerator's 5 W), not the whole system's.
    for x in rows {
        let (t, j) = (&x["modeled_s"], &x["modeled_energy_j"]);
        let devices = x["devices"].as_f64().unwrap();
        for (i, watts) in [(0, 5.0 * devices), (1, 50.0), (2, 5.0)] {
            let want = watts * t[i].as_f64().unwrap();
            assert!((j[i].as_f64().unwrap() - want).abs() <= 1e-9 * want, "{i}: {x}");
        }
    }
    // Fig. 13 as a figure: four rows per device count, none with a paper value (the paper's are at 12).
    let fig = &r["result"]["figures"]["fig13"];
    assert_eq!(fig["rows"].as_array().unwrap().len(), 8);
    assert!(fig["rows"].as_array().unwrap().iter().all(|x| x["paper"].is_null() && x["modeled"].is_f64()));
    assert_eq!(fig["verdict"]["within"], serde_json::Value::Null);
    assert!(env.path("repro-out/nascent/fig13.svg").is_file());
    // Fig. 9: the same sorts from storage take longer on both sides than Fig. 8's in memory.
    let points = r["result"]["data"]["fig8"].as_array().unwrap();
    assert_eq!(points.len(), 14);
    for p in points {
        for i in 0..2 {
            let (mem, storage) = (p["modeled_s"][i].as_f64().unwrap(), p["storage_s"][i].as_f64().unwrap());
            assert!(storage > mem && mem > 0.0, "{p}");
        }
    }
    let fig9 = r["result"]["figures"]["fig9"]["rows"].as_array().unwrap();
    assert_eq!(fig9.len(), 28);
    assert_eq!(fig9.iter().filter(|x| x["paper"].is_f64()).count(), 4, "1K and 8M, time and energy");
    // The same run again gives the same modeled figures, to the last digit, into another folder.
    let again = env.json(&[
        "repro",
        "nascent",
        "--quick",
        "--tpcc",
        "0",
        "--devices",
        "1,2",
        "--profile",
        "tiny",
        "--work",
        s(&env.path("work")),
        "--out",
        s(&env.path("second")),
    ]);
    let modeled = |v: &serde_json::Value| -> Vec<f64> {
        v["result"]["figures"]["fig13"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["modeled"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(modeled(&r), modeled(&again));
    assert!(env.path("second/REPORT.md").is_file());
}

/// A table's or a shuffle's parts are device objects named `NAME#...`: a name too long for the longest
/// of them is refused by its own length, before anything is stored (it was refused half-way, naming an
/// internal part), while a blob may take the whole 255 bytes. The longest are an out-of-core sort's runs
/// (`NAME#order.run10`) and a shuffle's batches parked on flash (`NAME.batch10#rec`): a name of the most
/// bytes allowed sorts and shuffles through more than 10 of them (a name 9 bytes shorter was refused half
/// way through both).
#[test]
fn a_table_name_too_long_for_its_parts_is_refused_by_name_first() {
    let env = Env::new();
    env.init(&["--devices", "2", "--profile", "tiny"]);
    let csv = env.write("t.csv", b"k,v\n3,a\n1,b\n2,c\n");
    let long = "t".repeat(236);
    let err = env.fails(&["put-table", s(&csv), "--name", &long, "--key", "k"]);
    assert!(
        err.contains("a table's or a shuffle's name is at most 235 bytes") && err.contains("is 236"),
        "{err}"
    );
    let mut rows = String::from("k,v\n");
    for i in 0..20_000u64 {
        rows.push_str(&format!("{},xyyyyyyyyyyyyyyyyyyyy\n", i.wrapping_mul(2_654_435_761) % 1_000_000_007));
    }
    let big = env.write("big.csv", rows.as_bytes());
    env.ok(&["put-table", s(&big), "--name", "t", "--key", "k"]);
    for args in [
        &["sort", "t", "--key", "v", "--out", &long][..],
        &["shuffle", "t", "--key", "v", "--partitions", "2", "--out", &long],
    ] {
        let err = env.fails(args);
        assert!(err.contains("at most 235 bytes"), "{args:?}: {err}");
    }
    let most = "o".repeat(235);
    let sorted = env.json(&["sort", "t", "--key", "k", "--out", &most, "--memory-budget", "64KiB"]);
    assert_eq!(sorted["result"]["rows"], 20_000, "{sorted}");
    let shuffled = env.json(&[
        "shuffle",
        "t",
        "--key",
        "k",
        "--partitions",
        "4",
        "--out",
        &format!("s{}", &most[1..]),
        "--memory-budget",
        "64KiB",
    ]);
    assert_eq!(shuffled["result"]["rows"], 20_000, "{shuffled}");
    env.ok(&["put", s(&csv), "--name", &"b".repeat(255)]);
    assert_eq!(env.json(&["fsck"])["result"]["ok"], true);
}
