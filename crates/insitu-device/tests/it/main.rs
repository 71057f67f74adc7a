//! Device integration tests: the command set end to end on a real (temporary) device.
#![allow(clippy::unwrap_used)]

mod nascent;

use insitu_device::{Args, Command, Device, DeviceError, Profile, Response, Value};

pub fn tiny(dir: &std::path::Path, id: u32) -> Device {
    Device::format(dir, id, Profile::load("tiny").unwrap(), 8 << 20).unwrap()
}

fn create(dev: &Device, name: &str, expected_size: Option<u64>) -> u64 {
    let cmd = Command::CreateObject {
        name: name.into(),
        kind: "blob".into(),
        attrs: Default::default(),
        expected_size,
    };
    match dev.call(cmd).unwrap() {
        Response::Txn(txn) => txn,
        other => panic!("expected a txn, got {other:?}"),
    }
}

pub fn put(dev: &Device, name: &str, data: &[u8]) {
    let txn = create(dev, name, Some(data.len() as u64));
    dev.call(Command::Append { txn, data: data.to_vec() }).unwrap();
    dev.call(Command::Commit { txn }).unwrap();
}

pub fn handle(r: Response) -> u64 {
    match r {
        Response::Handle(h) => h,
        other => panic!("expected a handle, got {other:?}"),
    }
}

#[test]
fn device_memory_is_bounded_by_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let a = handle(dev.call(Command::AllocMemory { bytes: 6 << 20 }).unwrap());
    let err = dev.call(Command::AllocMemory { bytes: 4 << 20 }).unwrap_err();
    assert!(matches!(err, DeviceError::MemoryExhausted { .. }), "{err}");
    dev.call(Command::FreeMemory { handle: a }).unwrap();
    handle(dev.call(Command::AllocMemory { bytes: 8 << 20 }).unwrap());
}

#[test]
fn internal_path_host_link_and_peer_copies_are_metered() {
    let dir = tempfile::tempdir().unwrap();
    let a = tiny(&dir.path().join("a"), 0);
    let b = tiny(&dir.path().join("b"), 1);
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
    put(&a, "obj", &data);
    let before = a.counters();
    let h = handle(a.call(Command::AllocMemory { bytes: 1000 }).unwrap());
    a.call(Command::LoadObject { name: "obj".into(), offset: 100, len: 1000, dst: h, dst_offset: 0 })
        .unwrap();
    let hb = handle(b.call(Command::AllocMemory { bytes: 1000 }).unwrap());
    a.call(Command::CopyToPeer { src: h, offset: 0, len: 1000, peer: b.peer(), dst: hb, dst_offset: 0 })
        .unwrap();
    let Response::Data(got) = b.call(Command::ReadMemory { src: hb, offset: 0, len: 1000 }).unwrap() else {
        panic!()
    };
    assert_eq!(got, data[100..1100]);
    let d = a.counters().since(&before);
    assert_eq!(d.flash_to_device_mem, 1000);
    assert_eq!(d.device_to_device_out, 1000);
    assert!(d.flash_read_bytes >= 1000);
    assert_eq!(b.counters().device_to_device_in, 1000);
    assert_eq!(b.counters().device_to_host, 1000);
    assert!(matches!(
        a.call(Command::ReadMemory { src: h, offset: 900, len: 200 }),
        Err(DeviceError::OutOfBounds { .. })
    ));
}

#[test]
fn search_program_agrees_with_a_naive_scan_and_records_stats() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let mut x = 7u64;
    let data: Vec<u8> = (0..3_000_000)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            b"abc"[(x >> 62) as usize % 3]
        })
        .collect();
    put(&dev, "hay", &data);
    let pattern = b"abcab".to_vec();
    let args = Args::new()
        .with("object", Value::Str("hay".into()))
        .with("pattern", Value::Bytes(pattern.clone()))
        .with("offsets", Value::Bool(true))
        .with("total_size", Value::U64(data.len() as u64));
    let Response::Output(out) =
        dev.call(Command::Execute { program: "search".into(), args, buffers: vec![] }).unwrap()
    else {
        panic!()
    };
    let want = insitu_kernels::search::naive_offsets(&data, &pattern);
    assert_eq!(out.u64("count"), Some(want.len() as u64));
    assert_eq!(out.u64_list("offsets").unwrap(), &want[..]);
    let stats = dev.counters();
    let p = &stats.programs["search"];
    assert_eq!((p.runs, p.bytes_in), (1, data.len() as u64));
    assert!(stats.cpu_ns_by_class.contains_key("search"));
}

#[test]
fn commands_complete_as_polled_events_in_fifo_order() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let txn = create(&dev, "seq", None);
    let ids =
        dev.submit_batch((0..50u8).map(|i| Command::Append { txn, data: vec![i; 1000] }).collect()).unwrap();
    for id in ids {
        let mut c = dev.poll(id);
        while c.is_none() {
            std::thread::yield_now();
            c = dev.poll(id);
        }
        c.unwrap().result.unwrap();
    }
    dev.call(Command::Commit { txn }).unwrap();
    let Response::Data(all) =
        dev.call(Command::Read { name: "seq".into(), offset: 0, len: 50_000, buf: vec![7; 10] }).unwrap()
    else {
        panic!()
    };
    for (i, chunk) in all.chunks(1000).enumerate() {
        assert!(chunk.iter().all(|b| *b == i as u8), "appends ran out of order");
    }
}

#[test]
fn bad_programs_and_arguments_get_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let err = dev
        .call(Command::Execute { program: "nope".into(), args: Args::new(), buffers: vec![] })
        .unwrap_err();
    assert!(err.to_string().contains("nope"));
    let err = dev
        .call(Command::Execute { program: "search".into(), args: Args::new(), buffers: vec![] })
        .unwrap_err();
    assert!(err.to_string().contains("search") && err.to_string().contains("object"), "{err}");
    let args = Args::new()
        .with("object", Value::Str("missing".into()))
        .with("pattern", Value::Bytes(b"x".to_vec()))
        .with("total_size", Value::U64(1));
    let err = dev.call(Command::Execute { program: "search".into(), args, buffers: vec![] }).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn search_needs_device_memory_for_a_tile() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    put(&dev, "x", &[b'a'; 10_000]);
    let _hog = handle(dev.call(Command::AllocMemory { bytes: (8 << 20) - 1000 }).unwrap());
    let args = Args::new()
        .with("object", Value::Str("x".into()))
        .with("pattern", Value::Bytes(b"a".to_vec()))
        .with("total_size", Value::U64(10_000));
    let err = dev.call(Command::Execute { program: "search".into(), args, buffers: vec![] }).unwrap_err();
    assert!(matches!(err, DeviceError::MemoryExhausted { .. }), "{err}");
}

#[test]
fn device_memory_round_trips_to_storage_over_the_internal_path() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    let h = handle(dev.call(Command::AllocMemory { bytes: 10_000 }).unwrap());
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    dev.call(Command::WriteMemory { dst: h, offset: 0, data: data.clone() }).unwrap();
    let txn = create(&dev, "out", None);
    dev.call(Command::StoreToObject { src: h, offset: 1000, len: 9000, txn }).unwrap();
    dev.call(Command::Commit { txn }).unwrap();
    let c = dev.counters();
    assert_eq!((c.host_to_device, c.device_mem_to_flash), (10_000, 9000));
    let Response::Data(back) =
        dev.call(Command::Read { name: "out".into(), offset: 0, len: 9000, buf: Vec::new() }).unwrap()
    else {
        panic!()
    };
    assert_eq!(back, data[1000..]);
}

#[test]
fn block_commands_read_write_trim_and_flush() {
    let dir = tempfile::tempdir().unwrap();
    let dev = tiny(dir.path(), 0);
    dev.call(Command::WriteLba { lba: 10, data: vec![3u8; 8192] }).unwrap();
    dev.call(Command::Flush).unwrap();
    let Response::Data(d) = dev.call(Command::ReadLba { lba: 9, blocks: 4 }).unwrap() else { panic!() };
    assert!(d[..4096].iter().all(|b| *b == 0) && d[4096..12288].iter().all(|b| *b == 3));
    dev.call(Command::TrimLba { lba: 10, blocks: 1 }).unwrap();
    let Response::Data(d) = dev.call(Command::ReadLba { lba: 10, blocks: 2 }).unwrap() else { panic!() };
    assert!(d[..4096].iter().all(|b| *b == 0) && d[4096..].iter().all(|b| *b == 3));
    let Response::Fsck(r) = dev.call(Command::Fsck).unwrap() else { panic!() };
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}
