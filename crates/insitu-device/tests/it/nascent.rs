//! NASCENT programs on a device: sort (both algorithms, in memory and out of core, plain and dictionary
//! keys), dict-decode and gather, each against the kernels' naive references.

use insitu_device::programs::nascent::sorted_from_bytes;
use insitu_device::{Args, Command, Device, DeviceError, Response, Value};
use insitu_kernels::dict::{self, Decoded};
use insitu_kernels::gather::{gather_fixed, gather_var};
use insitu_kernels::sort::{argsort_naive, RadixKey};

use crate::{handle, put, tiny};

fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

fn exec(dev: &Device, program: &str, args: Args, buffers: Vec<u64>) -> Result<Args, DeviceError> {
    match dev.call(Command::Execute { program: program.into(), args, buffers })? {
        Response::Output(o) => Ok(o),
        other => panic!("unexpected {other:?}"),
    }
}

fn read_all(dev: &Device, name: &str) -> Vec<u8> {
    let Response::Object(o) = dev.call(Command::Stat { name: name.into() }).unwrap() else { panic!() };
    let Response::Data(d) =
        dev.call(Command::Read { name: name.into(), offset: 0, len: o.size, buf: vec![] }).unwrap()
    else {
        panic!()
    };
    d
}

fn sorted_rows(dev: &Device, name: &str, narrow: bool) -> Vec<u32> {
    sorted_from_bytes(&read_all(dev, name), narrow).rows()
}

fn sort_args(key: &str, key_type: &str, algo: &str, out: &str) -> Args {
    Args::new()
        .with("key", Value::Str(key.into()))
        .with("key_type", Value::Str(key_type.into()))
        .with("algo", Value::Str(algo.into()))
        .with("out", Value::Str(out.into()))
}

fn check_sort<K: RadixKey>(keys: &[K], bytes: Vec<u8>, key_type: &str, narrow: bool) {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    put(&dev, "k", &bytes);
    let want = argsort_naive(keys, 0);
    for algo in ["fast", "bitonic"] {
        let out = format!("sorted-{algo}");
        let r = exec(&dev, "sort", sort_args("k", key_type, algo, &out), vec![]).unwrap();
        assert_eq!(r.u64("runs"), Some(1));
        assert_eq!(sorted_rows(&dev, &out, narrow), want, "{key_type} {algo}");
    }
}

#[test]
fn sort_program_agrees_with_naive_for_every_key_type() {
    let mut r = rng(1);
    let u: Vec<u32> = (0..5000).map(|_| (r() % 1000) as u32).collect();
    check_sort(&u, u.iter().flat_map(|x| x.to_le_bytes()).collect(), "u32", true);
    let i: Vec<i64> = (0..3000).map(|_| r() as i64).collect();
    check_sort(&i, i.iter().flat_map(|x| x.to_le_bytes()).collect(), "i64", false);
    let f: Vec<f64> = (0..3000).map(|_| (r() as i64 as f64) / 1e6).collect();
    check_sort(&f, f.iter().flat_map(|x| x.to_le_bytes()).collect(), "f64", false);
    let g: Vec<f32> = (0..3000).map(|_| (r() as i32 as f32) / 7.0).collect();
    check_sort(&g, g.iter().flat_map(|x| x.to_le_bytes()).collect(), "f32", true);
}

#[test]
fn sort_larger_than_device_memory_runs_out_of_core_through_flash() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let mut r = rng(2);
    let keys: Vec<i32> = (0..50_000).map(|_| (r() % 7000) as i32 - 3500).collect();
    put(&dev, "k", &keys.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
    for algo in ["fast", "bitonic"] {
        let before = dev.counters();
        let args =
            sort_args("k", "i32", algo, &format!("s-{algo}")).with("memory_budget", Value::U64(200_000));
        let out = exec(&dev, "sort", args, vec![]).unwrap();
        assert_eq!(out.u64("runs"), Some(5), "10,000 rows fit 200 KB at 20 bytes a row");
        assert_eq!(sorted_rows(&dev, &format!("s-{algo}"), true), argsort_naive(&keys, 0), "{algo}");
        let d = dev.counters().since(&before);
        assert!(d.flash_program_bytes >= 2 * 50_000 * 8, "runs and output both go to flash");
    }
    let Response::Objects(objs) = dev.call(Command::List).unwrap() else { panic!() };
    let names: Vec<_> = objs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, vec!["k", "s-bitonic", "s-fast"], "temporary runs are deleted");
}

#[test]
fn dictionary_keys_sort_like_plain_ones_and_decode_at_every_width() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let mut r = rng(3);
    let keys: Vec<u32> = (0..20_000).map(|_| ((r() % 300) * 1009) as u32).collect();
    let enc = dict::encode(&keys.iter().map(|k| *k as u64).collect::<Vec<_>>()).unwrap();
    assert_eq!(enc.codes.bits(), 16, "300 distinct values need 16-bit codes");
    put(&dev, "dict", &enc.dictionary.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
    put(&dev, "codes", &enc.codes.to_bytes());
    let args = Args::new()
        .with("encoding", Value::Str("dict".into()))
        .with("dict", Value::Str("dict".into()))
        .with("codes", Value::Str("codes".into()))
        .with("code_bits", Value::U64(16))
        .with("key_type", Value::Str("u32".into()))
        .with("out", Value::Str("s".into()));
    exec(&dev, "sort", args, vec![]).unwrap();
    assert_eq!(sorted_rows(&dev, "s", true), argsort_naive(&keys, 0));
    for bits in [32u64, 64] {
        let h = handle(dev.call(Command::AllocMemory { bytes: 20_000 * bits / 8 }).unwrap());
        let args = Args::new()
            .with("dict", Value::Str("dict".into()))
            .with("codes", Value::Str("codes".into()))
            .with("code_bits", Value::U64(16))
            .with("out_bits", Value::U64(bits));
        exec(&dev, "dict-decode", args, vec![h]).unwrap();
        let Response::Data(d) =
            dev.call(Command::ReadMemory { src: h, offset: 0, len: 20_000 * bits / 8 }).unwrap()
        else {
            panic!()
        };
        let want = dict::decode(&enc.dictionary, &enc.codes, bits as u32).unwrap();
        let got = match bits {
            32 => {
                Decoded::U32(d.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect())
            }
            _ => Decoded::U64(d.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()),
        };
        assert_eq!(got, want);
    }
}

#[test]
fn gather_reorders_fixed_and_variable_rows() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let mut r = rng(4);
    let n = 3000usize;
    let keys: Vec<u32> = (0..n).map(|_| (r() % 500) as u32).collect();
    put(&dev, "k", &keys.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>());
    exec(&dev, "sort", sort_args("k", "u32", "fast", "order"), vec![]).unwrap();
    let order = argsort_naive(&keys, 0);
    // Fixed 40-byte rows, gathered in two ranges as two shuffle workers would.
    let rows: Vec<u8> = (0..n * 40).map(|i| (i % 251) as u8).collect();
    put(&dev, "rows", &rows);
    let mut got = Vec::new();
    for (start, count) in [(0u64, 1234u64), (1234, (n - 1234) as u64)] {
        let h = handle(dev.call(Command::AllocMemory { bytes: count * 40 }).unwrap());
        let args = Args::new()
            .with("rows", Value::Str("rows".into()))
            .with("row_size", Value::U64(40))
            .with("order", Value::Str("order".into()))
            .with("start", Value::U64(start))
            .with("count", Value::U64(count));
        exec(&dev, "gather", args, vec![h]).unwrap();
        let Response::Data(d) = dev.call(Command::ReadMemory { src: h, offset: 0, len: count * 40 }).unwrap()
        else {
            panic!()
        };
        got.extend(d);
    }
    assert_eq!(got, gather_fixed(&rows, 40, &order));
    // Variable rows with an offsets object.
    let mut data = Vec::new();
    let mut offs = vec![0u64];
    for i in 0..n {
        data.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, i % 17));
        offs.push(data.len() as u64);
    }
    put(&dev, "vrows", &data);
    put(&dev, "voff", &offs.iter().flat_map(|o| o.to_le_bytes()).collect::<Vec<_>>());
    let h = handle(dev.call(Command::AllocMemory { bytes: data.len() as u64 }).unwrap());
    let args = Args::new()
        .with("rows", Value::Str("vrows".into()))
        .with("rowoff", Value::Str("voff".into()))
        .with("order", Value::Str("order".into()));
    let out = exec(&dev, "gather", args, vec![h]).unwrap();
    let (want, want_offs) = gather_var(&data, &offs, &order);
    let Response::Data(d) =
        dev.call(Command::ReadMemory { src: h, offset: 0, len: want.len() as u64 }).unwrap()
    else {
        panic!()
    };
    assert_eq!(d, want);
    assert_eq!(out.u64_list("offsets").unwrap(), &want_offs[..]);
}

#[test]
fn sort_without_device_memory_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    put(&dev, "k", &vec![1u8; 40_000]);
    let _hog = handle(dev.call(Command::AllocMemory { bytes: (8 << 20) - 10_000 }).unwrap());
    let err = exec(&dev, "sort", sort_args("k", "u32", "fast", "s"), vec![]).unwrap_err();
    assert!(matches!(err, DeviceError::MemoryExhausted { .. }), "{err}");
    let err = exec(&dev, "sort", sort_args("k", "u16", "fast", "s"), vec![]).unwrap_err();
    assert!(err.to_string().contains("key_type"), "{err}");
}
