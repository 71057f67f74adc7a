//! NASCENT programs on a device: sort (both algorithms, in memory and out of core, plain and dictionary
//! keys), dict-decode and gather, each against the kernels' naive references.

use insitu_device::protocol::{
    AllocMemory, DictDecode, DictDecodeArgs, FreeMemory, Gather, GatherArgs, Identify, KeyColumn, List,
    LoadObject, ReadMemory, RowShape, Sort, SortArgs, Stat, Statistics,
};
use insitu_device::{DeviceClient, DeviceError};
use insitu_kernels::dict::{self, Decoded};
use insitu_kernels::gather::{gather_fixed, gather_var};
use insitu_kernels::keys::{IndexLayout, KeyType, SortAlgo};
use insitu_kernels::le;
use insitu_kernels::sort::{argsort_naive, RadixKey};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{put, read_all, tiny};

fn sorted_rows(dev: &DeviceClient, name: &str, kt: KeyType) -> Vec<u32> {
    IndexLayout::for_key(kt).decode(&read_all(dev, name)).rows()
}

fn sort_args(key: &str, key_type: KeyType, algo: SortAlgo, out: &str) -> SortArgs {
    SortArgs {
        key: KeyColumn::Plain { object: key.into(), key_type },
        algo,
        out: out.into(),
        memory_budget: None,
    }
}

fn check_sort<K: RadixKey>(keys: &[K], bytes: Vec<u8>, key_type: KeyType) {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    put(&dev, "k", &bytes);
    let want = argsort_naive(keys, 0);
    for algo in [SortAlgo::Fast, SortAlgo::Bitonic] {
        let out = format!("sorted-{}", algo.name());
        let r = dev.execute::<Sort>(sort_args("k", key_type, algo, &out)).unwrap();
        assert_eq!(r.runs, 1);
        assert_eq!(sorted_rows(&dev, &out, key_type), want, "{key_type:?} {algo:?}");
    }
}

#[test]
fn sort_program_agrees_with_naive_for_every_key_type() {
    let mut r = SmallRng::seed_from_u64(1);
    let u: Vec<u32> = (0..5000).map(|_| r.gen_range(0..1000)).collect();
    check_sort(&u, le::encode_u32s(&u), KeyType::U32);
    let i: Vec<i64> = (0..3000).map(|_| r.gen()).collect();
    check_sort(&i, i.iter().flat_map(|x| x.to_le_bytes()).collect(), KeyType::I64);
    let f: Vec<f64> = (0..3000).map(|_| (r.gen::<i64>() as f64) / 1e6).collect();
    check_sort(&f, f.iter().flat_map(|x| x.to_le_bytes()).collect(), KeyType::F64);
    let g: Vec<f32> = (0..3000).map(|_| (r.gen::<i32>() as f32) / 7.0).collect();
    check_sort(&g, g.iter().flat_map(|x| x.to_le_bytes()).collect(), KeyType::F32);
}

#[test]
fn sort_larger_than_device_memory_runs_out_of_core_through_flash() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let mut r = SmallRng::seed_from_u64(2);
    let keys: Vec<i32> = (0..50_000).map(|_| r.gen_range(-3500..3500)).collect();
    put(&dev, "k", &keys.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
    for algo in [SortAlgo::Fast, SortAlgo::Bitonic] {
        let before = dev.counters().unwrap();
        let out = format!("s-{}", algo.name());
        let args = SortArgs { memory_budget: Some(200_000), ..sort_args("k", KeyType::I32, algo, &out) };
        let r = dev.execute::<Sort>(args).unwrap();
        assert_eq!(r.runs, 5, "10,000 rows fit 200 KB at 20 bytes a row");
        assert_eq!(sorted_rows(&dev, &out, KeyType::I32), argsort_naive(&keys, 0), "{algo:?}");
        let d = dev.counters().unwrap().since(&before);
        assert!(d.flash_program_bytes >= 2 * 50_000 * 8, "runs and output both go to flash");
    }
    let objs = dev.call(List).unwrap();
    let names: Vec<_> = objs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, vec!["k", "s-bitonic", "s-fast"], "temporary runs are deleted");
}

#[test]
fn dictionary_keys_sort_like_plain_ones_and_decode_at_every_width() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let mut r = SmallRng::seed_from_u64(3);
    let keys: Vec<u32> = (0..20_000).map(|_| r.gen_range(0..300) * 1009).collect();
    let enc = dict::encode(&keys.iter().map(|k| *k as u64).collect::<Vec<_>>()).unwrap();
    assert_eq!(enc.codes.bits(), 16, "300 distinct values need 16-bit codes");
    put(&dev, "dict", &le::encode_u64s(&enc.dictionary));
    put(&dev, "codes", &enc.codes.to_bytes());
    let key =
        KeyColumn::Dict { dict: "dict".into(), codes: "codes".into(), code_bits: 16, key_type: KeyType::U32 };
    dev.execute::<Sort>(SortArgs { key, algo: SortAlgo::Fast, out: "s".into(), memory_budget: None })
        .unwrap();
    assert_eq!(sorted_rows(&dev, "s", KeyType::U32), argsort_naive(&keys, 0));
    for bits in [32u64, 64] {
        let before = dev.counters().unwrap();
        let h = dev.call(AllocMemory { bytes: 20_000 * bits / 8 }).unwrap();
        let args = DictDecodeArgs {
            dict: "dict".into(),
            codes: "codes".into(),
            code_bits: 16,
            out_bits: bits as u32,
            out: h,
        };
        dev.execute::<DictDecode>(args).unwrap();
        let d = dev.call(ReadMemory { src: h, offset: 0, len: 20_000 * bits / 8 }).unwrap();
        let want = dict::decode(&enc.dictionary, &enc.codes, bits as u32).unwrap();
        let got = match bits {
            32 => Decoded::U32(le::decode_u32s(&d)),
            _ => Decoded::U64(le::decode_u64s(&d)),
        };
        assert_eq!(got, want);
        // The decoder's output is counted at the width it leaves at.
        let work = dev.counters().unwrap().since(&before).work;
        assert_eq!(work.get("decode.out_bytes"), Some(&(20_000 * bits / 8)), "{bits}-bit output");
    }
    // 16-bit outputs, from values that fit them, are counted at 2 bytes each.
    let small: Vec<u64> = keys.iter().map(|k| (*k / 1009) as u64).collect();
    let enc = dict::encode(&small).unwrap();
    put(&dev, "dict16", &le::encode_u64s(&enc.dictionary));
    put(&dev, "codes16", &enc.codes.to_bytes());
    let before = dev.counters().unwrap();
    let h = dev.call(AllocMemory { bytes: 40_000 }).unwrap();
    let args = DictDecodeArgs {
        dict: "dict16".into(),
        codes: "codes16".into(),
        code_bits: enc.codes.bits() as u32,
        out_bits: 16,
        out: h,
    };
    dev.execute::<DictDecode>(args).unwrap();
    let d = dev.call(ReadMemory { src: h, offset: 0, len: 40_000 }).unwrap();
    let got: Vec<u64> = d.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as u64).collect();
    assert_eq!(got, small);
    assert_eq!(dev.counters().unwrap().since(&before).work.get("decode.out_bytes"), Some(&40_000));
}

fn gather_args(source: &str, shape: RowShape, start: u64, count: Option<u64>, out: u64) -> GatherArgs {
    GatherArgs {
        source: source.into(),
        shape,
        order: "order".into(),
        start,
        count,
        out,
        source_in_memory: None,
        offsets_in_memory: None,
    }
}

/// What the gather tests gather: 3000 random keys sorted into `order` on the device, and the same rows as
/// 40-byte `rows` and as variable `vrows` with offsets `voff` (row 7 `long_row` bytes long when not 0).
struct GatherData {
    order: Vec<u32>,
    rows: Vec<u8>,
    data: Vec<u8>,
    offs: Vec<u64>,
}

fn gather_data(dev: &DeviceClient, seed: u64, long_row: usize) -> GatherData {
    let mut r = SmallRng::seed_from_u64(seed);
    let n = 3000usize;
    let keys: Vec<u32> = (0..n).map(|_| r.gen_range(0..500)).collect();
    put(dev, "k", &le::encode_u32s(&keys));
    dev.execute::<Sort>(sort_args("k", KeyType::U32, SortAlgo::Fast, "order")).unwrap();
    let rows: Vec<u8> = (0..n * 40).map(|i| (i % 251) as u8).collect();
    put(dev, "rows", &rows);
    let mut data = Vec::new();
    let mut offs = vec![0u64];
    for i in 0..n {
        let len = if i == 7 && long_row > 0 { long_row } else { i % 17 };
        data.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
        offs.push(data.len() as u64);
    }
    put(dev, "vrows", &data);
    put(dev, "voff", &le::encode_u64s(&offs));
    GatherData { order: argsort_naive(&keys, 0), rows, data, offs }
}

#[test]
fn gather_reorders_fixed_and_variable_rows() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let GatherData { order, rows, data, offs } = gather_data(&dev, 4, 0);
    let n = order.len();
    // Fixed 40-byte rows, gathered in two ranges as two shuffle workers would.
    let mut got = Vec::new();
    for (start, count) in [(0u64, 1234u64), (1234, (n - 1234) as u64)] {
        let h = dev.call(AllocMemory { bytes: count * 40 }).unwrap();
        dev.execute::<Gather>(gather_args("rows", RowShape::Fixed { size: 40 }, start, Some(count), h))
            .unwrap();
        got.extend(dev.call(ReadMemory { src: h, offset: 0, len: count * 40 }).unwrap());
    }
    assert_eq!(got, gather_fixed(&rows, 40, &order));
    // Variable rows with an offsets object.
    let h = dev.call(AllocMemory { bytes: data.len() as u64 }).unwrap();
    let out = dev
        .execute::<Gather>(gather_args("vrows", RowShape::Var { offsets: "voff".into() }, 0, None, h))
        .unwrap();
    let (want, want_offs) = gather_var(&data, &offs, &order);
    let d = dev.call(ReadMemory { src: h, offset: 0, len: want.len() as u64 }).unwrap();
    assert_eq!(d, want);
    assert_eq!(out.offsets.unwrap(), want_offs);
}

#[test]
fn gathers_from_device_memory_and_from_flash_agree_with_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let GatherData { order, rows, data, offs } = gather_data(&dev, 5, 5000);
    let load = |name: &str, len: u64| {
        let h = dev.call(AllocMemory { bytes: len }).unwrap();
        dev.call(LoadObject { name: name.into(), offset: 0, len, dst: h, dst_offset: 0 }).unwrap();
        h
    };
    let (rows_mem, vrows_mem) = (load("rows", rows.len() as u64), load("vrows", data.len() as u64));
    let voff_mem = load("voff", offs.len() as u64 * 8);
    // One gather takes every item (several batches of them), from flash and from device memory.
    let fixed_want = gather_fixed(&rows, 40, &order);
    for in_memory in [None, Some(rows_mem)] {
        let h = dev.call(AllocMemory { bytes: rows.len() as u64 }).unwrap();
        let mut args = gather_args("rows", RowShape::Fixed { size: 40 }, 0, None, h);
        args.source_in_memory = in_memory;
        let out = dev.execute::<Gather>(args).unwrap();
        assert_eq!(out.bytes, rows.len() as u64);
        let got = dev.call(ReadMemory { src: h, offset: 0, len: rows.len() as u64 }).unwrap();
        assert!(got == fixed_want, "fixed rows, source in memory: {}", in_memory.is_some());
        dev.call(FreeMemory { handle: h }).unwrap();
    }
    let (var_want, var_offs) = gather_var(&data, &offs, &order);
    for (rows_in, offs_in) in
        [(None, None), (Some(vrows_mem), None), (None, Some(voff_mem)), (Some(vrows_mem), Some(voff_mem))]
    {
        let h = dev.call(AllocMemory { bytes: data.len() as u64 }).unwrap();
        let mut args = gather_args("vrows", RowShape::Var { offsets: "voff".into() }, 0, None, h);
        args.source_in_memory = rows_in;
        args.offsets_in_memory = offs_in;
        let out = dev.execute::<Gather>(args).unwrap();
        let got = dev.call(ReadMemory { src: h, offset: 0, len: data.len() as u64 }).unwrap();
        let which =
            format!("rows in memory: {}, offsets in memory: {}", rows_in.is_some(), offs_in.is_some());
        assert!(got == var_want, "{which}");
        assert_eq!(out.offsets.as_ref(), Some(&var_offs), "{which}");
        dev.call(FreeMemory { handle: h }).unwrap();
    }
}

#[test]
fn a_gather_from_flash_of_many_batches_reads_each_row_where_it_is() {
    // More rows than a flash batch takes (16384), in a random order: each batch's reads go in the order
    // of their offsets, and every row must still land in its own place.
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let n = 40_000usize;
    let mut r = SmallRng::seed_from_u64(9);
    let keys: Vec<u32> = (0..n).map(|_| r.gen()).collect();
    put(&dev, "k", &le::encode_u32s(&keys));
    dev.execute::<Sort>(sort_args("k", KeyType::U32, SortAlgo::Fast, "order")).unwrap();
    let order = argsort_naive(&keys, 0);
    let rows: Vec<u8> = (0..n as u32).flat_map(|i| [i.to_le_bytes(), (!i).to_le_bytes()].concat()).collect();
    put(&dev, "rows", &rows);
    let mut data = Vec::new();
    let mut offs = vec![0u64];
    for i in 0..n {
        data.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, i % 61));
        data.extend_from_slice(&(i as u32).to_le_bytes());
        offs.push(data.len() as u64);
    }
    put(&dev, "vrows", &data);
    put(&dev, "voff", &le::encode_u64s(&offs));
    let before = dev.call(Statistics).unwrap().flash_read_pages;
    let h = dev.call(AllocMemory { bytes: rows.len() as u64 }).unwrap();
    dev.execute::<Gather>(gather_args("rows", RowShape::Fixed { size: 8 }, 0, None, h)).unwrap();
    let got = dev.call(ReadMemory { src: h, offset: 0, len: rows.len() as u64 }).unwrap();
    assert!(got == gather_fixed(&rows, 8, &order), "fixed rows");
    dev.call(FreeMemory { handle: h }).unwrap();
    let h = dev.call(AllocMemory { bytes: data.len() as u64 }).unwrap();
    let args = gather_args("vrows", RowShape::Var { offsets: "voff".into() }, 0, None, h);
    let out = dev.execute::<Gather>(args).unwrap();
    let (want, want_offs) = gather_var(&data, &offs, &order);
    let got = dev.call(ReadMemory { src: h, offset: 0, len: data.len() as u64 }).unwrap();
    assert!(got == want, "variable rows");
    assert_eq!(out.offsets.unwrap(), want_offs);
    // Every page a range touches, counted once for the range, as in the order given: the sorted order,
    // batches and pieces read exactly those (plus the sorted indices, read whole by each gather).
    let read = dev.call(Statistics).unwrap().flash_read_pages - before;
    let ps = dev.call(Identify).unwrap().flash.geometry.page_size as u64;
    let pages = |offset: u64, len: u64| if len == 0 { 0 } else { (offset + len - 1) / ps - offset / ps + 1 };
    let order_bytes = dev.call(Stat { name: "order".into() }).unwrap().size;
    let want = 2 * pages(0, order_bytes)
        + (0..n as u64).map(|i| pages(i * 8, 8) + pages(i * 8, 16)).sum::<u64>()
        + (0..n).map(|i| pages(offs[i], offs[i + 1] - offs[i])).sum::<u64>();
    assert_eq!(read, want, "pages read for {n} rows gathered twice");
}

#[test]
fn sort_without_device_memory_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    put(&dev, "k", &vec![1u8; 40_000]);
    let _hog = dev.call(AllocMemory { bytes: (8 << 20) - 10_000 }).unwrap();
    let err = dev.execute::<Sort>(sort_args("k", KeyType::U32, SortAlgo::Fast, "s")).unwrap_err();
    assert!(matches!(err, DeviceError::MemoryExhausted { .. }), "{err}");
    put(&dev, "odd", &[1u8; 10]);
    let err = dev.execute::<Sort>(sort_args("odd", KeyType::U64, SortAlgo::Fast, "s")).unwrap_err();
    assert!(err.to_string().contains("not a whole number of u64 keys"), "{err}");
}
