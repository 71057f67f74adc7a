//! Device integration tests: the command set end to end on a real (temporary) device, in this process and
//! over the process transport (a server thread on a Unix socket), which must answer alike.
#![allow(clippy::unwrap_used)]

mod cluster;
mod firmware;
mod global;
mod nascent;
mod network;
mod rawflash;
mod selfsort;

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use insitu_device::protocol::{
    AllocMemory, Append, Commit, CopyToPeer, CreateObject, Flush, Fsck, List, LoadObject, PhysicalPages,
    Read, ReadLba, ReadMemory, ReadPages, Search, SearchArgs, Stat, StoreToObject, TrimLba, WriteLba,
    WriteMemory,
};
use insitu_device::transport::{self, LocalTransport, PeerFabric, ProcessTransport, ServeOptions, Transport};
use insitu_device::{Device, DeviceClient, DeviceError, Profile, StripeLayout};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// How a test reaches its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    InProcess,
    Socket,
}

pub const BOTH: [Via; 2] = [Via::InProcess, Via::Socket];

/// A device and, over a socket, the thread serving it.
#[derive(Debug)]
pub struct Served {
    pub dev: DeviceClient,
    server: Option<JoinHandle<()>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.dev.close();
        if let Some(s) = self.server.take() {
            s.join().unwrap();
        }
    }
}

pub fn format(dir: &Path, id: u32) -> Device {
    Device::format(dir, id, Profile::load("tiny").unwrap(), 8 << 20).unwrap()
}

/// A tiny-profile device in this process.
pub fn tiny(dir: &Path, id: u32) -> DeviceClient {
    transport::in_process(format(dir, id))
}

/// Starts a server thread for the device in `dir` on `socket`; returns once it accepts connections. It
/// serves until a client closes the device.
fn spawn_server(dir: &Path, socket: &Path, peers: Vec<(u32, std::path::PathBuf)>) -> JoinHandle<()> {
    let opts = ServeOptions {
        dir: dir.into(),
        socket: socket.into(),
        peers,
        exit_with_owner: false,
        lock_wait: std::time::Duration::from_secs(20),
    };
    let server = std::thread::spawn(move || transport::serve(&opts).unwrap());
    for _ in 0..1000 {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return server;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the server of {} did not start", dir.display());
}

/// The device already formatted in `dev_dir`, reached `via` (sockets go in `tmp`).
pub fn serve(dev_dir: &Path, tmp: &Path, via: Via) -> Served {
    match via {
        Via::InProcess => Served { dev: transport::in_process(Device::open(dev_dir).unwrap()), server: None },
        Via::Socket => {
            let socket = tmp.join("dev.sock");
            let server = spawn_server(dev_dir, &socket, vec![]);
            Served { dev: ProcessTransport::connect(&socket, 0).unwrap().into_client(), server: Some(server) }
        }
    }
}

/// A fresh tiny device reached `via`.
pub fn device(dir: &Path, via: Via) -> Served {
    match via {
        Via::InProcess => Served { dev: tiny(&dir.join("dev"), 0), server: None },
        Via::Socket => {
            drop(format(&dir.join("dev"), 0));
            let socket = dir.join("dev.sock");
            let server = spawn_server(&dir.join("dev"), &socket, vec![]);
            Served { dev: ProcessTransport::connect(&socket, 0).unwrap().into_client(), server: Some(server) }
        }
    }
}

pub fn create(dev: &DeviceClient, name: &str, expected_size: Option<u64>) -> u64 {
    dev.call(CreateObject {
        name: name.into(),
        kind: "blob".into(),
        attrs: Default::default(),
        expected_size,
    })
    .unwrap()
}

pub fn put(dev: &DeviceClient, name: &str, data: &[u8]) {
    let txn = create(dev, name, Some(data.len() as u64));
    dev.call(Append { txn, data: data.to_vec() }).unwrap();
    dev.call(Commit { txn }).unwrap();
}

pub fn read_all(dev: &DeviceClient, name: &str) -> Vec<u8> {
    let size = dev.call(Stat { name: name.into() }).unwrap().size;
    dev.call(Read { name: name.into(), offset: 0, len: size, buf: vec![] }).unwrap()
}

#[test]
fn device_memory_is_bounded_by_the_profile() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        let a = dev.call(AllocMemory { bytes: 6 << 20 }).unwrap();
        let err = dev.call(AllocMemory { bytes: 4 << 20 }).unwrap_err();
        assert!(matches!(err, DeviceError::MemoryExhausted { .. }), "{via:?}: {err}");
        dev.call(insitu_device::protocol::FreeMemory { handle: a }).unwrap();
        dev.call(AllocMemory { bytes: 8 << 20 }).unwrap();
    }
}

#[test]
fn internal_path_host_link_and_peer_copies_are_metered() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let (sa, sb) = pair(dir.path(), via);
        let (a, b) = (&sa.dev, &sb.dev);
        let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
        put(a, "obj", &data);
        let before = a.counters().unwrap();
        let h = a.call(AllocMemory { bytes: 1000 }).unwrap();
        a.call(LoadObject { name: "obj".into(), offset: 100, len: 1000, dst: h, dst_offset: 0 }).unwrap();
        let hb = b.call(AllocMemory { bytes: 1000 }).unwrap();
        // Only `len` bytes cross: a copy of part of a buffer.
        a.call(CopyToPeer { src: h, offset: 0, len: 600, peer: 1, dst: hb, dst_offset: 0 }).unwrap();
        a.call(CopyToPeer { src: h, offset: 600, len: 400, peer: 1, dst: hb, dst_offset: 600 }).unwrap();
        let got = b.call(ReadMemory { src: hb, offset: 0, len: 1000 }).unwrap();
        assert_eq!(got, data[100..1100], "{via:?}");
        let d = a.counters().unwrap().since(&before);
        assert_eq!(d.flash_to_device_mem, 1000);
        assert_eq!((d.device_to_device_out, d.device_to_device_hops_out), (1000, 2));
        assert!(d.flash_read_bytes >= 1000);
        let cb = b.counters().unwrap();
        assert_eq!((cb.device_to_device_in, cb.device_to_device_hops_in), (1000, 2));
        assert_eq!(cb.device_to_host, 1000);
        assert!(matches!(
            a.call(ReadMemory { src: h, offset: 900, len: 200 }),
            Err(DeviceError::OutOfBounds { .. })
        ));
        assert!(matches!(
            a.call(CopyToPeer { src: h, offset: 0, len: 10, peer: 7, dst: hb, dst_offset: 0 }),
            Err(DeviceError::NoPeer(7))
        ));
    }
}

/// Two devices (ids 0 and 1) joined by a fabric: in this process, or each served on its own socket.
fn pair(dir: &Path, via: Via) -> (Served, Served) {
    let (da, db) = (dir.join("a"), dir.join("b"));
    drop(format(&da, 0));
    drop(format(&db, 1));
    let mut served = joined(dir, &[da, db], via);
    let b = served.pop().unwrap();
    (served.pop().unwrap(), b)
}

/// The devices already formatted in `dirs` (device `i` in `dirs[i]`) joined by a fabric: in this
/// process, or each served on its own socket (in `tmp`) with the others as its peers.
pub fn joined(tmp: &Path, dirs: &[std::path::PathBuf], via: Via) -> Vec<Served> {
    match via {
        Via::InProcess => {
            let fabric = Arc::new(PeerFabric::new());
            let mut served = Vec::new();
            for (id, d) in dirs.iter().enumerate() {
                let local = Arc::new(LocalTransport::new(Device::open(d).unwrap()));
                local.device().set_fabric(fabric.clone());
                let t: Arc<dyn Transport> = local;
                fabric.attach(id as u32, &t);
                served.push(Served { dev: DeviceClient::new(t), server: None });
            }
            served
        }
        Via::Socket => {
            let sockets: Vec<_> = (0..dirs.len()).map(|i| tmp.join(format!("{i}.sock"))).collect();
            let servers: Vec<_> = dirs
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let peers = (0..dirs.len()).filter(|j| *j != i).map(|j| (j as u32, sockets[j].clone()));
                    spawn_server(d, &sockets[i], peers.collect())
                })
                .collect();
            servers
                .into_iter()
                .enumerate()
                .map(|(i, server)| Served {
                    dev: ProcessTransport::connect(&sockets[i], i as u32).unwrap().into_client(),
                    server: Some(server),
                })
                .collect()
        }
    }
}

#[test]
fn search_program_agrees_with_a_naive_scan_and_records_stats() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        let mut rng = SmallRng::seed_from_u64(7);
        let data: Vec<u8> = (0..3_000_000).map(|_| b"abc"[rng.gen_range(0..3)]).collect();
        put(dev, "hay", &data);
        let pattern = b"abcab".to_vec();
        let args = SearchArgs {
            object: "hay".into(),
            pattern: pattern.clone(),
            offsets: true,
            layout: StripeLayout::single(data.len() as u64),
            halo: None,
        };
        let out = dev.execute::<Search>(args).unwrap();
        let want = insitu_kernels::search::naive_offsets(&data, &pattern);
        assert_eq!(out.count, want.len() as u64, "{via:?}");
        assert_eq!(out.offsets.unwrap(), want);
        let stats = dev.counters().unwrap();
        let p = &stats.programs["search"];
        assert_eq!((p.runs, p.bytes_in), (1, data.len() as u64));
        assert!(stats.cpu_ns_by_class.contains_key("search"));
    }
}

#[test]
fn commands_complete_as_polled_events_in_fifo_order() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        let txn = create(dev, "seq", None);
        let pending: Vec<_> =
            (0..50u8).map(|i| dev.submit(Append { txn, data: vec![i; 1000] }).unwrap()).collect();
        for mut p in pending {
            loop {
                match p.poll() {
                    Ok(r) => break r.unwrap(),
                    Err(still) => {
                        p = still;
                        std::thread::yield_now();
                    }
                }
            }
        }
        dev.call(Commit { txn }).unwrap();
        let all = dev.call(Read { name: "seq".into(), offset: 0, len: 50_000, buf: vec![7; 10] }).unwrap();
        for (i, chunk) in all.chunks(1000).enumerate() {
            assert!(chunk.iter().all(|b| *b == i as u8), "{via:?}: appends ran out of order");
        }
    }
}

#[test]
fn bad_arguments_get_named_errors_across_every_transport() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        let args = SearchArgs {
            object: "missing".into(),
            pattern: b"x".to_vec(),
            offsets: false,
            layout: StripeLayout::single(1),
            halo: None,
        };
        let err = dev.execute::<Search>(args.clone()).unwrap_err();
        assert!(
            matches!(&err, DeviceError::Flash(insitu_device::FlashError::NotFound(n)) if n == "missing"),
            "{via:?}: {err}"
        );
        put(dev, "x", b"abcdef");
        let striped = SearchArgs {
            object: "x".into(),
            layout: StripeLayout { unit: 4, index: 3, count: 2, total_size: 6 },
            ..args
        };
        let err = dev.execute::<Search>(striped).unwrap_err();
        assert!(err.to_string().contains("search") && err.to_string().contains("device_index"), "{err}");
    }
}

#[test]
fn search_needs_device_memory_for_a_tile() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        put(dev, "x", &[b'a'; 10_000]);
        let _hog = dev.call(AllocMemory { bytes: (8 << 20) - 1000 }).unwrap();
        let args = SearchArgs {
            object: "x".into(),
            pattern: b"a".to_vec(),
            offsets: false,
            layout: StripeLayout::single(10_000),
            halo: None,
        };
        let err = dev.execute::<Search>(args).unwrap_err();
        assert!(matches!(err, DeviceError::MemoryExhausted { .. }), "{err}");
    }
}

#[test]
fn device_memory_round_trips_to_storage_over_the_internal_path() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        let h = dev.call(AllocMemory { bytes: 10_000 }).unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        dev.call(WriteMemory { dst: h, offset: 0, data: data.clone() }).unwrap();
        let txn = create(dev, "out", None);
        dev.call(StoreToObject { src: h, offset: 1000, len: 9000, txn }).unwrap();
        dev.call(Commit { txn }).unwrap();
        let c = dev.counters().unwrap();
        assert_eq!((c.host_to_device, c.device_mem_to_flash), (10_000, 9000));
        let back = dev.call(Read { name: "out".into(), offset: 0, len: 9000, buf: Vec::new() }).unwrap();
        assert_eq!(back, data[1000..], "{via:?}");
    }
}

#[test]
fn block_commands_read_write_trim_and_flush() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        dev.call(WriteLba { lba: 10, data: vec![3u8; 8192] }).unwrap();
        dev.call(Flush).unwrap();
        let d = dev.call(ReadLba { lba: 9, blocks: 4 }).unwrap();
        assert!(d[..4096].iter().all(|b| *b == 0) && d[4096..12288].iter().all(|b| *b == 3));
        dev.call(TrimLba { lba: 10, blocks: 1 }).unwrap();
        let d = dev.call(ReadLba { lba: 10, blocks: 2 }).unwrap();
        assert!(d[..4096].iter().all(|b| *b == 0) && d[4096..].iter().all(|b| *b == 3));
        let r = dev.call(Fsck).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}

#[test]
fn physical_pages_read_raw_below_the_ftl_match_the_object() {
    for via in BOTH {
        let dir = tempfile::tempdir().unwrap();
        let s = device(dir.path(), via);
        let dev = &s.dev;
        let data: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i * 13 % 256) as u8).collect();
        put(dev, "o", &data);
        let pages = dev.call(PhysicalPages { name: "o".into() }).unwrap();
        assert_eq!(pages.len(), 4);
        let mut raw = Vec::new();
        for (_, p) in &pages {
            raw.extend(dev.call(ReadPages { start: *p, count: 1 }).unwrap());
        }
        assert_eq!(&raw[..data.len()], &data[..], "{via:?}");
        let bad = insitu_device::PhysicalPage { channel: 99, ..pages[0].1 };
        assert!(dev.call(ReadPages { start: bad, count: 1 }).is_err());
    }
}

#[test]
fn a_served_device_is_locked_and_reopens_after_close() {
    let dir = tempfile::tempdir().unwrap();
    let s = device(dir.path(), Via::Socket);
    put(&s.dev, "kept", b"survives the server");
    let err = Device::open(&dir.path().join("dev")).unwrap_err();
    assert!(matches!(err, DeviceError::InUse(_)), "a second opener must be refused: {err}");
    drop(s);
    let dev = transport::in_process(Device::open(&dir.path().join("dev")).unwrap());
    assert_eq!(read_all(&dev, "kept"), b"survives the server");
    assert_eq!(dev.call(List).unwrap().len(), 1);
}
