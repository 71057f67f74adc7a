//! Tables (NASCENT): load, sort on the devices and on the host, read back, merge; bad input.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, AsArray, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, Float32Array,
    Float64Array, Int16Array, Int64Array, StringArray, TimestampMicrosecondArray, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use insitu_device::Profile;
use insitu_host::nascent::sort::{sort_table, SortOptions, SortPlacement};
use insitu_host::table::export::get_table;
use insitu_host::table::import::{put_table, read_table_file, PutTable};
use insitu_host::table::info::Partitioning;
use insitu_host::{Array as InsituArray, OpenOptions};
use insitu_kernels::keys::SortAlgo;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A lineitem-like table: int key with many ties, strings, decimals, dates, nullable floats.
pub fn table(n: usize, seed: u64) -> RecordBatch {
    let mut r = SmallRng::seed_from_u64(seed);
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("comment", DataType::Utf8, false),
        Field::new("price", DataType::Decimal128(15, 2), false),
        Field::new("ship", DataType::Date32, false),
        Field::new("tax", DataType::Float64, true),
    ]);
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from((0..n).map(|_| r.gen_range(-250..250i64)).collect::<Vec<_>>())),
        Arc::new(StringArray::from(
            (0..n).map(|i| format!("c{}-{}", i, "x".repeat(i % 7))).collect::<Vec<_>>(),
        )),
        Arc::new(
            Decimal128Array::from((0..n).map(|_| r.gen_range(0..100_000i128)).collect::<Vec<_>>())
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
        Arc::new(Date32Array::from((0..n).map(|_| r.gen_range(0..3000i32)).collect::<Vec<_>>())),
        Arc::new(Float64Array::from(
            (0..n).map(|i| if i % 11 == 0 { None } else { Some(i as f64 / 3.0) }).collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(Arc::new(schema), cols).unwrap()
}

pub fn write_parquet(path: &Path, b: &RecordBatch) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, b.schema(), None).unwrap();
    w.write(b).unwrap();
    w.close().unwrap();
}

pub fn array(dir: &Path, devices: u32) -> InsituArray {
    InsituArray::init(&dir.join("a"), devices, Profile::load("tiny").unwrap(), Some(64 << 20), None).unwrap();
    InsituArray::open(&dir.join("a"), OpenOptions::default()).unwrap()
}

fn put(a: &mut InsituArray, path: &Path, name: &str, key: &str, dict: bool) -> insitu_host::Report {
    let opts = PutTable {
        name: name.into(),
        key: Some(key.into()),
        partition: Partitioning::RoundRobin,
        dict: dict.then(|| key.to_string()),
    };
    put_table(a, path, &opts).unwrap()
}

fn sort(a: &mut InsituArray, name: &str, key: &str, placement: SortPlacement, algo: SortAlgo, out: &str) {
    let opts = SortOptions {
        key: key.into(),
        placement,
        algo,
        out: Some(out.into()),
        merge: None,
        memory_budget: None,
    };
    sort_table(a, name, &opts).unwrap();
}

/// Rows as strings, for multiset comparisons.
pub fn row_strings(b: &RecordBatch) -> Vec<String> {
    let cols: Vec<_> = b
        .columns()
        .iter()
        .map(|c| arrow::util::display::ArrayFormatter::try_new(c.as_ref(), &Default::default()).unwrap())
        .collect();
    (0..b.num_rows())
        .map(|i| cols.iter().map(|c| c.value(i).to_string()).collect::<Vec<_>>().join("|"))
        .collect()
}

#[test]
fn device_and_host_sorts_give_identical_tables_and_every_part_is_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 3);
    let input = table(4000, 1);
    let src = dir.path().join("t.parquet");
    write_parquet(&src, &input);
    for (name, key, dict) in
        [("t", "k", false), ("td", "k", true), ("ts", "comment", false), ("tdate", "ship", true)]
    {
        put(&mut a, &src, name, key, dict);
        let mut outs = Vec::new();
        for (placement, algo) in [
            (SortPlacement::Device, SortAlgo::Fast),
            (SortPlacement::Device, SortAlgo::Bitonic),
            (SortPlacement::Host, SortAlgo::Fast),
            (SortPlacement::HostAccel, SortAlgo::Fast),
            (SortPlacement::Host, SortAlgo::Bitonic),
        ] {
            let out = format!("{name}.{placement:?}.{algo:?}");
            sort(&mut a, name, key, placement, algo, &out);
            let path = dir.path().join(format!("{out}.parquet"));
            get_table(&a, &out, &path).unwrap();
            outs.push(read_table_file(&path).unwrap());
        }
        assert_eq!(outs[0], outs[1], "{name}: fast vs bitonic on the device");
        assert_eq!(outs[0], outs[2], "{name}: device vs host");
        assert_eq!(outs[0], outs[3], "{name}: device vs host-accel");
        assert_eq!(outs[0], outs[4], "{name}: device vs the host's bitonic network");
        let mut got = row_strings(&outs[0]);
        let mut want = row_strings(&input);
        got.sort();
        want.sort();
        assert_eq!(got, want, "{name}: the sorted table holds the same rows");
        // Each device part is sorted by the key; parts are in device order with 4000/3 rows each.
        let kc = input.schema().index_of(key).unwrap();
        let conv = arrow::row::RowConverter::new(vec![arrow::row::SortField::new(
            outs[0].column(kc).data_type().clone(),
        )])
        .unwrap();
        let rows = conv.convert_columns(&[outs[0].column(kc).clone()]).unwrap();
        for (lo, hi) in [(0, 1334), (1334, 2667), (2667, 4000)] {
            for i in lo + 1..hi {
                assert!(rows.row(i - 1) <= rows.row(i), "{name}: part rows {} and {i} out of order", i - 1);
            }
        }
    }
    assert!(a.fsck().unwrap().is_empty());
}

#[test]
fn merge_gives_one_globally_sorted_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 4);
    let input = table(3000, 2);
    let src = dir.path().join("t.parquet");
    write_parquet(&src, &input);
    put(&mut a, &src, "t", "k", false);
    let merged = dir.path().join("m.parquet");
    let opts = SortOptions {
        key: "k".into(),
        placement: SortPlacement::Device,
        algo: SortAlgo::Fast,
        out: None,
        merge: Some(merged.clone()),
        memory_budget: None,
    };
    let r = sort_table(&mut a, "t", &opts).unwrap();
    assert_eq!(r.result["merged"]["rows"], 3000);
    let m = read_table_file(&merged).unwrap();
    let k = m.column(0).as_primitive::<Int64Type>();
    assert!(k.values().windows(2).all(|w| w[0] <= w[1]));
    let (mut got, mut want) = (row_strings(&m), row_strings(&input));
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert!(a.entry("t.sorted").is_ok(), "the default output name is T.sorted");
    // Removing a table removes every part object on every device.
    insitu_host::blob::rm(&mut a, "t.sorted").unwrap();
    for d in a.devices() {
        let objs = d.call(insitu_device::protocol::List).unwrap();
        assert!(
            objs.iter().all(|o| o.name.starts_with("t#")),
            "{:?}",
            objs.iter().map(|o| &o.name).collect::<Vec<_>>()
        );
    }
    assert!(a.fsck().unwrap().is_empty());
}

#[test]
fn schema_and_field_metadata_come_back_with_the_table_and_its_sorted_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 2);
    let input = table(500, 3);
    let meta = |pairs: &[(&str, &str)]| {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::HashMap<_, _>>()
    };
    // What pandas writes (its index and dtypes), and a field's own.
    let schema_meta = meta(&[("pandas", r#"{"index_columns": [], "columns": []}"#), ("origin", "test")]);
    let fields: Vec<Field> = input
        .schema()
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "comment" => f.as_ref().clone().with_metadata(meta(&[("unit", "text")])),
            "k" => f.as_ref().clone().with_metadata(meta(&[("role", "key")])),
            _ => f.as_ref().clone(),
        })
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(fields, schema_meta));
    let input = RecordBatch::try_new(schema.clone(), input.columns().to_vec()).unwrap();
    let src = dir.path().join("t.parquet");
    write_parquet(&src, &input);
    put(&mut a, &src, "t", "k", false);
    sort(&mut a, "t", "k", SortPlacement::Device, SortAlgo::Fast, "t.dev");
    sort(&mut a, "t", "ship", SortPlacement::Host, SortAlgo::Fast, "t.host");
    for name in ["t", "t.dev", "t.host"] {
        let out = dir.path().join(format!("{name}.parquet"));
        get_table(&a, name, &out).unwrap();
        let got = read_table_file(&out).unwrap();
        assert_eq!(got.schema(), schema, "{name}");
        let (batches, _) = insitu_host::table::export::read_table(&a, name).unwrap();
        assert!(batches.iter().all(|b| b.schema() == schema), "{name}");
    }

    // Metadata past what the catalog keeps is refused by name, and nothing is stored.
    let big = meta(&[("blob", &"x".repeat(100 << 10))]);
    let b = RecordBatch::try_new(
        Arc::new(input.schema().as_ref().clone().with_metadata(big)),
        input.columns().to_vec(),
    )
    .unwrap();
    let src = dir.path().join("big.parquet");
    write_parquet(&src, &b);
    let opts = PutTable {
        name: "big".into(),
        key: Some("k".into()),
        partition: Partitioning::RoundRobin,
        dict: None,
    };
    let e = put_table(&mut a, &src, &opts).unwrap_err().to_string();
    assert!(e.contains("schema metadata") && e.contains("bytes"), "{e}");
    assert!(a.entry("big").is_err());
}

#[test]
fn a_date64_column_is_written_out_as_a_parquet_date() {
    // Parquet has no 64-bit date: written as it is, other readers (pyarrow) took it for int64 milliseconds.
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 1);
    let days = [19_000i64, 19_001, 18_999];
    let schema =
        Schema::new(vec![Field::new("d", DataType::Date64, false), Field::new("v", DataType::Int32, false)]);
    let cols: Vec<ArrayRef> = vec![
        Arc::new(arrow::array::Date64Array::from(days.iter().map(|d| d * 86_400_000).collect::<Vec<_>>())),
        Arc::new(arrow::array::Int32Array::from(vec![1, 2, 3])),
    ];
    let input = RecordBatch::try_new(Arc::new(schema), cols).unwrap();
    let src = dir.path().join("d.parquet");
    write_parquet(&src, &input);
    put(&mut a, &src, "t", "d", false);
    let out = dir.path().join("out.parquet");
    get_table(&a, "t", &out).unwrap();
    let reader =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
    let column =
        parquet::file::reader::FileReader::metadata(&reader).file_metadata().schema_descr().column(0);
    assert_eq!(column.logical_type_ref(), Some(&parquet::basic::LogicalType::Date), "{column:?}");
    // Read back by Arrow, the values are the days put in, in any order of the parts.
    let got = read_table_file(&out).unwrap();
    let mut want = row_strings(&input);
    let mut got = row_strings(
        &arrow::compute::cast(got.column(0), &DataType::Date64)
            .map(|d| RecordBatch::try_new(input.schema(), vec![d, got.column(1).clone()]).unwrap())
            .unwrap(),
    );
    want.sort();
    got.sort();
    assert_eq!(got, want);
}

/// A table with a column of every kind a sort takes, nulls in some, ties in all; `k` is the stored key.
fn mixed_table(n: usize, seed: u64) -> RecordBatch {
    let mut r = SmallRng::seed_from_u64(seed);
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("g", DataType::Int16, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("x", DataType::Float64, false),
        Field::new("b", DataType::Boolean, false),
        Field::new("u", DataType::UInt8, false),
        Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("fb", DataType::FixedSizeBinary(3), false),
        Field::new("f", DataType::Float32, true),
    ]);
    let specials = [f64::NAN, -0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, -1.5];
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from((0..n as i64).collect::<Vec<_>>())),
        Arc::new(Int16Array::from(
            (0..n).map(|_| r.gen_bool(0.8).then(|| r.gen_range(-300..300i16))).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            (0..n)
                .map(|_| {
                    r.gen_bool(0.9).then(|| "ab".repeat(r.gen_range(0..4)) + &"z".repeat(r.gen_range(0..2)))
                })
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            (0..n)
                .map(|i| {
                    if i % 13 == 0 {
                        specials[i / 13 % specials.len()]
                    } else {
                        r.gen_range(-9.0..9.0f64).round()
                    }
                })
                .collect::<Vec<_>>(),
        )),
        Arc::new(BooleanArray::from((0..n).map(|_| r.gen_bool(0.5)).collect::<Vec<_>>())),
        Arc::new(UInt8Array::from((0..n).map(|_| r.gen_range(0..=255u8)).collect::<Vec<_>>())),
        Arc::new(TimestampMicrosecondArray::from(
            (0..n).map(|_| r.gen_bool(0.7).then(|| r.gen_range(-5..5i64) * 1_000_000)).collect::<Vec<_>>(),
        )),
        Arc::new(
            FixedSizeBinaryArray::try_from_iter(
                (0..n).map(|_| [r.gen_range(0..3u8), 0xff, r.gen_range(0..2u8)]),
            )
            .unwrap(),
        ),
        Arc::new(Float32Array::from(
            (0..n).map(|i| (i % 5 != 0).then(|| r.gen_range(-2..2i32) as f32 * 0.5)).collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(Arc::new(schema), cols).unwrap()
}

/// `b` sorted by column `c` as the devices sort: ascending, nulls last, ties in row order (Arrow's
/// comparison, a stable sort: independent of the devices' key encoding and sorters).
fn stable_sort_by(b: &RecordBatch, c: usize) -> RecordBatch {
    let opts = arrow::compute::SortOptions { descending: false, nulls_first: false };
    let conv = arrow::row::RowConverter::new(vec![arrow::row::SortField::new_with_options(
        b.column(c).data_type().clone(),
        opts,
    )])
    .unwrap();
    let rows = conv.convert_columns(&[b.column(c).clone()]).unwrap();
    let mut order: Vec<u32> = (0..b.num_rows() as u32).collect();
    order.sort_by(|x, y| rows.row(*x as usize).cmp(&rows.row(*y as usize)));
    arrow::compute::take_record_batch(b, &arrow::array::UInt32Array::from(order)).unwrap()
}

fn parts_of(a: &InsituArray, name: &str) -> Vec<RecordBatch> {
    let mut parts = Vec::new();
    insitu_host::table::store::each_part(a, name, &mut |p| {
        parts.push(p);
        Ok(())
    })
    .unwrap();
    parts
}

#[test]
fn sorting_by_a_column_stored_row_wise_agrees_with_arrow_in_every_placement() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 3);
    let input = mixed_table(3000, 5);
    let src = dir.path().join("m.parquet");
    write_parquet(&src, &input);
    put(&mut a, &src, "t", "k", false);
    // A second table with no nullable column: its rows carry no null bitmap.
    let plain = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, false),
            Field::new("v", DataType::UInt32, false),
        ])),
        vec![
            Arc::new(arrow::array::Int32Array::from((0..2000).collect::<Vec<i32>>())),
            Arc::new(StringArray::from(
                (0..2000).map(|i| format!("n{}", (i * 7919) % 97)).collect::<Vec<_>>(),
            )),
            Arc::new(arrow::array::UInt32Array::from(
                (0..2000u32).map(|i| i.wrapping_mul(2654435761) >> 22).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    let src2 = dir.path().join("p.parquet");
    write_parquet(&src2, &plain);
    put(&mut a, &src2, "p", "id", true);
    let cases = ["g", "s", "x", "b", "u", "t", "fb", "f"]
        .map(|c| ("t", c))
        .into_iter()
        .chain([("p", "name"), ("p", "v")]);
    for (table, col) in cases {
        let stored = parts_of(&a, table);
        let c = stored[0].schema().index_of(col).unwrap();
        let mut outs = Vec::new();
        for placement in [SortPlacement::Device, SortPlacement::Host] {
            let out = format!("{table}.{col}.{placement:?}");
            sort(&mut a, table, col, placement, SortAlgo::Fast, &out);
            outs.push(parts_of(&a, &out));
        }
        assert_eq!(outs[0], outs[1], "{table} by {col}: device and host agree");
        for (i, (got, part)) in outs[0].iter().zip(&stored).enumerate() {
            assert_eq!(*got, stable_sort_by(part, c), "{table} by {col}: part {i}");
        }
        // The output is a sort's output by that column: merged, it is one order of the same rows.
        let out = format!("{table}.{col}.Device");
        let (merged, _) = insitu_host::nascent::merge::read_table_merged(&a, &out).unwrap();
        let merged = arrow::compute::concat_batches(&merged[0].schema(), &merged).unwrap();
        let whole = arrow::compute::concat_batches(&stored[0].schema(), &stored).unwrap();
        let want = stable_sort_by(&whole, c);
        assert_eq!(
            row_strings(&merged.project(&[c]).unwrap()),
            row_strings(&want.project(&[c]).unwrap()),
            "{col}"
        );
        let (mut got, mut all) = (row_strings(&merged), row_strings(&whole));
        got.sort();
        all.sort();
        assert_eq!(got, all, "{table} by {col}: the same rows");
    }
    // The progress count a front shows: rows loaded, then every gather range of the last device sort.
    put(&mut a, &src, "again", "k", false);
    assert_eq!(a.progress().get(), ("load".to_string(), 3000, None));
    sort(&mut a, "again", "s", SortPlacement::Device, SortAlgo::Fast, "again.s");
    let (stage, done, total) = a.progress().get();
    assert!(stage == "shuffle" && Some(done) == total && done >= 6, "{stage} {done} {total:?}");
    // Nothing of the extraction is left on the devices.
    for d in a.devices() {
        let objs = d.call(insitu_device::protocol::List).unwrap();
        assert!(
            objs.iter().all(|o| !o.name.contains("#sortkey")),
            "{:?}",
            objs.iter().map(|o| &o.name).collect::<Vec<_>>()
        );
    }
    assert!(a.fsck().unwrap().is_empty());
}

#[test]
fn a_part_larger_than_a_gather_tile_is_gathered_tile_by_tile_and_matches_the_host() {
    // One smartssd (4 GB of device memory, so memory does not cut the gather) and a part of about 12 MiB:
    // its long string column spans two 8 MiB gather tiles, whose offsets are stitched together.
    let dir = tempfile::tempdir().unwrap();
    InsituArray::init(&dir.path().join("a"), 1, Profile::load("smartssd").unwrap(), Some(256 << 20), None)
        .unwrap();
    let mut a = InsituArray::open(&dir.path().join("a"), OpenOptions::default()).unwrap();
    let mut r = SmallRng::seed_from_u64(4);
    let n = 12_000;
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("text", DataType::Utf8, false),
        ])),
        vec![
            Arc::new(Int64Array::from((0..n).map(|_| r.gen_range(0..5000i64)).collect::<Vec<_>>())),
            Arc::new(StringArray::from(
                (0..n).map(|i| format!("{i}:{}", "y".repeat(900 + i % 200))).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    let src = dir.path().join("t.parquet");
    write_parquet(&src, &batch);
    put(&mut a, &src, "t", "k", false);
    sort(&mut a, "t", "k", SortPlacement::Device, SortAlgo::Fast, "t.dev");
    // Two gathers (one a column), of which the text column's takes two tiles at least.
    let (stage, done, total) = a.progress().get();
    assert!(stage == "shuffle" && Some(done) == total && done >= 3, "{stage} {done} {total:?}");
    sort(&mut a, "t", "k", SortPlacement::Host, SortAlgo::Fast, "t.host");
    let (dev, host) = (parts_of(&a, "t.dev"), parts_of(&a, "t.host"));
    assert_eq!(dev, host, "device and host agree");
    assert_eq!(dev[0], stable_sort_by(&batch, 0));
    assert!(a.fsck().unwrap().is_empty());
}

#[test]
fn long_rows_are_pulled_out_in_blocks_that_fit_device_memory() {
    // 600 rows of ~30 KB over 3 devices of 8 MiB memory: each device's rows are several blocks.
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 3);
    let mut r = SmallRng::seed_from_u64(9);
    let n = 600;
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("text", DataType::Utf8, false),
            Field::new("v", DataType::Int16, true),
        ])),
        vec![
            Arc::new(Int64Array::from((0..n as i64).collect::<Vec<_>>())),
            Arc::new(StringArray::from(
                (0..n).map(|i| format!("{i}:").repeat(r.gen_range(5000..7000))).collect::<Vec<_>>(),
            )),
            Arc::new(Int16Array::from(
                (0..n).map(|_| r.gen_bool(0.9).then(|| r.gen_range(-50..50i16))).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    let src = dir.path().join("long.parquet");
    write_parquet(&src, &batch);
    put(&mut a, &src, "t", "id", false);
    let stored = parts_of(&a, "t");
    let mut outs = Vec::new();
    for placement in [SortPlacement::Device, SortPlacement::Host] {
        let out = format!("t.v.{placement:?}");
        sort(&mut a, "t", "v", placement, SortAlgo::Fast, &out);
        outs.push(parts_of(&a, &out));
    }
    assert_eq!(outs[0], outs[1]);
    for (got, part) in outs[0].iter().zip(&stored) {
        assert_eq!(*got, stable_sort_by(part, 2));
    }
}

#[test]
fn a_table_larger_than_device_memory_is_sorted_out_of_core() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 2);
    let input = table(20_000, 3);
    let src = dir.path().join("t.parquet");
    write_parquet(&src, &input);
    put(&mut a, &src, "t", "k", false);
    sort(&mut a, "t", "k", SortPlacement::Host, SortAlgo::Fast, "host");
    let opts = SortOptions {
        key: "k".into(),
        placement: SortPlacement::Device,
        algo: SortAlgo::Fast,
        out: Some("dev".into()),
        merge: None,
        memory_budget: Some(60_000), // 10,000 rows a device at 40 bytes a row: several runs
    };
    // A budget below one chunk is named as the budget, not as the device's memory.
    let tiny = SortOptions { memory_budget: Some(1), out: Some("tiny".into()), ..opts.clone() };
    let err = sort_table(&mut a, "t", &tiny).unwrap_err().to_string();
    assert!(
        err.contains("the memory budget of 1 bytes is too small") && err.contains("--memory-budget"),
        "{err}"
    );
    assert!(!a.catalog().objects.contains_key("tiny"));
    sort_table(&mut a, "t", &opts).unwrap();
    let (p1, p2) = (dir.path().join("h.parquet"), dir.path().join("d.parquet"));
    get_table(&a, "host", &p1).unwrap();
    get_table(&a, "dev", &p2).unwrap();
    assert_eq!(read_table_file(&p1).unwrap(), read_table_file(&p2).unwrap());
    // String keys are sorted in device memory alone: a budget below what that takes is refused by name
    // (it was ignored), and nothing is stored.
    put(&mut a, &src, "s", "comment", false);
    let strings = SortOptions { key: "comment".into(), out: Some("s.tiny".into()), ..tiny };
    let err = sort_table(&mut a, "s", &strings).unwrap_err().to_string();
    assert!(
        err.contains("the memory budget of 1 bytes is too small") && err.contains("string keys"),
        "{err}"
    );
    assert!(!a.catalog().objects.contains_key("s.tiny"));
    sort_table(&mut a, "s", &SortOptions { memory_budget: None, out: Some("s.dev".into()), ..strings })
        .unwrap();
}

#[test]
fn bad_tables_and_arguments_are_refused_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 2);
    let src = dir.path().join("t.parquet");
    write_parquet(&src, &table(100, 4));
    let opts = |key: &str| PutTable {
        name: "t".into(),
        key: Some(key.into()),
        partition: Partitioning::RoundRobin,
        dict: None,
    };
    let err = put_table(&mut a, &src, &opts("nope")).unwrap_err().to_string();
    assert!(err.contains("no column \"nope\"") && err.contains("comment"), "{err}");
    let err = put_table(&mut a, &src, &opts("price")).unwrap_err().to_string();
    assert!(err.contains("128-bit decimal"), "{err}");
    // Ragged and badly typed CSV: the error names the line; nothing is stored.
    let csv = dir.path().join("bad.csv");
    std::fs::write(&csv, "a,b\n1,2\n3\n").unwrap();
    let err = put_table(
        &mut a,
        &csv,
        &PutTable { name: "c".into(), key: None, partition: Partitioning::RoundRobin, dict: None },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("line"), "{err}");
    let csv2 = dir.path().join("bad2.csv");
    let mut text = String::from("a,b\n");
    for i in 0..20_000 {
        text.push_str(&format!("{i},{i}\n"));
    }
    text.push_str("oops,5\n");
    std::fs::write(&csv2, text).unwrap();
    let err = put_table(
        &mut a,
        &csv2,
        &PutTable { name: "c".into(), key: None, partition: Partitioning::RoundRobin, dict: None },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("oops") && err.contains("line"), "{err}");
    assert!(a.catalog().objects.is_empty(), "nothing is stored after a failed load");
    // Too many distinct values for a dictionary: stored plain, and the report says so.
    let big = dir.path().join("big.parquet");
    let keys: Vec<i64> = (0..140_000).collect();
    let b = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)])),
        vec![Arc::new(Int64Array::from(keys)) as ArrayRef],
    )
    .unwrap();
    write_parquet(&big, &b);
    let r = put(&mut a, &big, "big", "k", true);
    assert!(r.result["note"].as_str().unwrap().contains("65,536"), "{}", r.result);
    // Empty table.
    let empty = dir.path().join("empty.parquet");
    write_parquet(&empty, &table(0, 5));
    put(&mut a, &empty, "empty", "k", false);
    sort(&mut a, "empty", "k", SortPlacement::Device, SortAlgo::Fast, "empty.s");
    let p = dir.path().join("e.parquet");
    get_table(&a, "empty.s", &p).unwrap();
    assert_eq!(read_table_file(&p).unwrap().num_rows(), 0);
    // Sorting by a column no sorter takes, and an output name already taken.
    put(&mut a, &src, "t", "k", false);
    let err = sort_table(
        &mut a,
        "t",
        &SortOptions {
            key: "price".into(),
            placement: SortPlacement::Device,
            algo: SortAlgo::Fast,
            out: None,
            merge: None,
            memory_budget: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("128-bit decimal"), "{err}");
    assert!(a.entry("t.sorted").is_err(), "a refused sort stores nothing");
    let err = sort_table(
        &mut a,
        "t",
        &SortOptions {
            key: "k".into(),
            placement: SortPlacement::Device,
            algo: SortAlgo::Fast,
            out: Some("big".into()),
            merge: None,
            memory_budget: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("already exists"), "{err}");
    assert!(a.fsck().unwrap().is_empty());
}

#[test]
fn csv_headers_alone_make_an_empty_text_table_and_repeated_column_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 2);
    let header_only = dir.path().join("h.csv");
    std::fs::write(&header_only, "id,name\n").unwrap();
    put(&mut a, &header_only, "h", "id", false);
    let out = dir.path().join("h.parquet");
    get_table(&a, "h", &out).unwrap();
    let back = read_table_file(&out).unwrap();
    assert_eq!(back.num_rows(), 0);
    let types: Vec<_> =
        back.schema().fields().iter().map(|f| (f.name().clone(), f.data_type().clone())).collect();
    assert_eq!(types, vec![("id".into(), DataType::Utf8), ("name".into(), DataType::Utf8)]);
    // A column empty in every row is text too, beside the ones with values.
    let sparse = dir.path().join("s.csv");
    std::fs::write(&sparse, "k,note\n3,\n1,\n2,\n").unwrap();
    put(&mut a, &sparse, "s", "k", false);
    let twice = dir.path().join("d.csv");
    std::fs::write(&twice, "a,b,a\n1,2,3\n").unwrap();
    let opts =
        PutTable { name: "d".into(), key: Some("b".into()), partition: Partitioning::RoundRobin, dict: None };
    let err = put_table(&mut a, &twice, &opts).unwrap_err().to_string();
    assert!(err.contains("column name \"a\" is used twice (columns 1 and 3)"), "{err}");
    assert!(!a.catalog().objects.contains_key("d"));
    assert!(a.fsck().unwrap().is_empty());
}

#[test]
fn a_table_of_many_batches_is_dealt_and_stored_row_for_row() {
    // More rows than one loader slice (64 Ki), so parts are written in several appends whose offsets
    // and round-robin turns carry over from slice to slice.
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 3);
    let n = 150_000;
    let b = table(n, 7);
    let src = dir.path().join("t.parquet");
    // Its strings written as views (as tpchgen-cli writes them), which the loader reads as plain strings.
    let mut cols = b.columns().to_vec();
    cols[1] = arrow::compute::cast(&cols[1], &DataType::Utf8View).unwrap();
    let mut fields: Vec<Field> = b.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[1] = fields[1].clone().with_data_type(DataType::Utf8View);
    write_parquet(&src, &RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap());
    let want = row_strings(&b);
    for (name, key, dict, partition) in [
        ("rr", "k", false, Partitioning::RoundRobin),
        ("dict", "k", true, Partitioning::RoundRobin),
        ("text", "comment", false, Partitioning::RoundRobin),
        ("hash", "k", false, Partitioning::Hash { column: "ship".into() }),
    ] {
        let opts = PutTable {
            name: name.into(),
            key: Some(key.into()),
            partition: partition.clone(),
            dict: dict.then(|| key.into()),
        };
        let r = put_table(&mut a, &src, &opts).unwrap();
        assert_eq!(r.result["rows"], n as u64, "{name}");
        let mut parts: Vec<Vec<String>> = Vec::new();
        insitu_host::table::store::each_part(&a, name, &mut |p| {
            parts.push(row_strings(&p));
            Ok(())
        })
        .unwrap();
        assert_eq!(parts.len(), 3);
        match partition {
            // Row i is on device i % 3, in the file's order.
            Partitioning::RoundRobin => {
                for (d, part) in parts.iter().enumerate() {
                    let dealt: Vec<&String> = want.iter().skip(d).step_by(3).collect();
                    assert_eq!(part.iter().collect::<Vec<_>>(), dealt, "{name}: device {d}");
                }
            }
            // Every row once; rows with the same ship date on one device.
            Partitioning::Hash { .. } => {
                let mut all: Vec<&String> = parts.iter().flatten().collect();
                all.sort();
                let mut sorted: Vec<&String> = want.iter().collect();
                sorted.sort();
                assert_eq!(all, sorted, "{name}");
                let ship = |r: &String| r.split('|').nth(3).unwrap().to_string();
                for (d, part) in parts.iter().enumerate() {
                    for other in parts.iter().skip(d + 1) {
                        let here: std::collections::HashSet<String> = part.iter().map(ship).collect();
                        assert!(
                            other.iter().all(|r| !here.contains(&ship(r))),
                            "{name}: a date on two devices"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn parts_stream_back_in_chunks_with_rows_across_their_edges() {
    // Parts of ~6 MiB, read back in chunks of about 4 MiB of pages: rows of every length straddle the
    // chunks' edges, one row (5 MiB) is longer than a chunk, and nullable columns go through the rows'
    // null bitmaps. Each part must be the source's rows dealt round-robin, value for value.
    let dir = tempfile::tempdir().unwrap();
    let mut a = array(dir.path(), 2);
    let mut r = SmallRng::seed_from_u64(21);
    let n = 3000;
    let text = (0..n)
        .map(|i| match i {
            1234 => Some("long row ".repeat(5 << 17)),
            _ if i % 17 == 0 => None,
            _ => Some("t".repeat(r.gen_range(0..4000))),
        })
        .collect::<Vec<_>>();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("text", DataType::Utf8, true),
            Field::new("v", DataType::Int16, true),
            Field::new("flag", DataType::Boolean, false),
        ])),
        vec![
            Arc::new(Int64Array::from((0..n as i64).collect::<Vec<_>>())),
            Arc::new(StringArray::from(text)),
            Arc::new(Int16Array::from(
                (0..n).map(|_| r.gen_bool(0.9).then(|| r.gen_range(-50..50i16))).collect::<Vec<_>>(),
            )),
            Arc::new(BooleanArray::from((0..n).map(|_| r.gen_bool(0.5)).collect::<Vec<_>>())),
        ],
    )
    .unwrap();
    let src = dir.path().join("rows.parquet");
    write_parquet(&src, &batch);
    put(&mut a, &src, "t", "id", false);
    let parts = parts_of(&a, "t");
    assert_eq!(parts.len(), 2);
    for (d, part) in parts.iter().enumerate() {
        let dealt = arrow::array::UInt32Array::from((d as u32..n as u32).step_by(2).collect::<Vec<_>>());
        assert_eq!(*part, arrow::compute::take_record_batch(&batch, &dealt).unwrap(), "device {d}");
    }
    let (whole, _) = insitu_host::table::export::read_table(&a, "t").unwrap();
    assert_eq!(whole, parts);
}
