//! The message transport (what the Ray backend's device actors serve): devices formatted and served
//! "elsewhere" (servers in this process reached only through byte messages), an array made around them,
//! every operator giving the answers of the embedded array, restart recovery, and a lost channel failing
//! cleanly.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use insitu_device::Profile;
use insitu_host::blob::{self, Placement};
use insitu_host::search::{search, SearchPlacement};
use insitu_host::{
    format_device, Array, Connector, DeviceTransport, Exchange, MessageServer, OpenOptions, Served,
};

/// A channel to one server; it fails once `cut` is set (its actor died), or once the server is gone.
/// It holds the server weakly, so servers holding channels to each other do not keep each other alive.
#[derive(Debug)]
struct Channel {
    server: Weak<MessageServer>,
    cut: Arc<AtomicBool>,
    id: u32,
}

impl Exchange for Channel {
    fn exchange(&self, request: Vec<u8>) -> Result<Vec<u8>, String> {
        match self.server.upgrade() {
            Some(s) if !self.cut.load(Ordering::Acquire) => Ok(s.handle(&request)),
            _ => Err(format!("device {} on node test-node: the actor died", self.id)),
        }
    }
}

/// Servers of every device, in this process, reached only through messages.
#[derive(Debug)]
struct Servers {
    servers: Vec<Arc<MessageServer>>,
    cut: Vec<Arc<AtomicBool>>,
    connects: Mutex<u32>,
}

impl Servers {
    fn start(dirs: &[PathBuf]) -> Arc<Servers> {
        let servers: Vec<_> = dirs.iter().map(|d| Arc::new(MessageServer::open(d).unwrap())).collect();
        let cut: Vec<_> = dirs.iter().map(|_| Arc::new(AtomicBool::new(false))).collect();
        let s = Arc::new(Servers { servers, cut, connects: Mutex::new(0) });
        for (i, server) in s.servers.iter().enumerate() {
            let peers =
                (0..s.servers.len() as u32).filter(|j| *j as usize != i).map(|j| (j, s.channel(j))).collect();
            server.set_peers(peers);
        }
        s
    }

    fn channel(&self, i: u32) -> Arc<dyn Exchange> {
        Arc::new(Channel {
            server: Arc::downgrade(&self.servers[i as usize]),
            cut: self.cut[i as usize].clone(),
            id: i,
        })
    }
}

impl Connector for Servers {
    fn connect(&self, device: u32) -> Result<Arc<dyn Exchange>, String> {
        *self.connects.lock().unwrap() += 1;
        if device as usize >= self.servers.len() {
            return Err(format!("no actor for device {device}"));
        }
        Ok(self.channel(device))
    }
}

fn dirs(root: &Path, n: u32) -> Vec<PathBuf> {
    (0..n).map(|i| root.join(format!("dev{i}"))).collect()
}

fn served(servers: &Arc<Servers>) -> DeviceTransport {
    DeviceTransport::Message(Served(servers.clone()))
}

#[test]
fn an_array_served_through_messages_answers_as_the_embedded_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, embedded) = (tmp.path().join("served"), tmp.path().join("embedded"));
    let tiny = || Profile::load("tiny").unwrap();
    let ds = dirs(&root, 3);
    for (i, d) in ds.iter().enumerate() {
        format_device(d, i as u32, tiny(), Some(8 << 20)).unwrap();
    }
    let servers = Servers::start(&ds);
    let mut a = Array::init_served(&root, 3, tiny(), Some(8 << 20), Some(4096), served(&servers)).unwrap();
    let mut e = Array::init(&embedded, 3, tiny(), Some(8 << 20), Some(4096)).unwrap();
    let text: Vec<u8> =
        (0..300_000u32).map(|i| if i % 1009 < 3 { b'x' } else { b'a' + (i % 23) as u8 }).collect();
    let file = tmp.path().join("t.txt");
    std::fs::write(&file, &text).unwrap();
    for arr in [&mut a, &mut e] {
        blob::put(arr, &file, "t", Placement::Striped, &blob::no_progress).unwrap();
    }
    // Search crosses stripe boundaries with device-to-device copies: through the servers' own peers here.
    for p in [SearchPlacement::Device, SearchPlacement::Host] {
        let (x, y) = (search(&a, "t", b"xxx", p, true).unwrap(), search(&e, "t", b"xxx", p, true).unwrap());
        assert_eq!(x.result["count"], y.result["count"]);
        assert_eq!(x.result["offsets"], y.result["offsets"]);
        assert_eq!(x.bytes, y.bytes, "the same work on the same paths, whatever carries the commands");
        if p == SearchPlacement::Device {
            assert!(x.bytes.device_to_device > 0, "stripe heads went device to device");
        }
    }
    let mut got = Vec::new();
    blob::get(&a, "t", &mut got, &blob::no_progress).unwrap();
    assert_eq!(got, text);
    blob::put(&mut a, &file, "u", Placement::Striped, &blob::no_progress).unwrap();
    e.close().unwrap();
    // Host and servers go without a close (a crash): new servers recover the devices from their journals.
    drop(a);
    drop(servers);
    let again = Servers::start(&ds);
    let a = Array::open(&root, OpenOptions { transport: served(&again), ..OpenOptions::default() }).unwrap();
    for name in ["t", "u"] {
        let mut got = Vec::new();
        blob::get(&a, name, &mut got, &blob::no_progress).unwrap();
        assert_eq!(got, text, "{name}");
    }
    // A channel that fails (its actor died) fails the operation with a reason, and no hang.
    again.cut[1].store(true, Ordering::Release);
    let err = blob::get(&a, "t", &mut Vec::new(), &blob::no_progress).unwrap_err().to_string();
    assert!(err.contains("device 1 on node test-node: the actor died"), "{err}");
    drop(a);
}

#[test]
fn init_served_leaves_nothing_when_a_device_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("a");
    let ds = dirs(&root, 2);
    for (i, d) in ds.iter().enumerate() {
        format_device(d, i as u32, Profile::load("tiny").unwrap(), Some(8 << 20)).unwrap();
    }
    let servers = Servers::start(&ds);
    let err =
        Array::init_served(&root, 3, Profile::load("tiny").unwrap(), Some(8 << 20), None, served(&servers))
            .unwrap_err()
            .to_string();
    assert!(err.contains("no actor for device 2"), "{err}");
    for f in ["array.json", "array.b.json", "catalog.json", "catalog.b.json"] {
        assert!(!root.join(f).exists(), "{f} is left");
    }
    // Devices swapped between slots are refused by identity.
    for s in &servers.servers {
        s.close().unwrap();
    }
    let swapped = Servers::start(&[ds[1].clone(), ds[0].clone()]);
    let err =
        Array::init_served(&root, 2, Profile::load("tiny").unwrap(), Some(8 << 20), None, served(&swapped))
            .unwrap_err()
            .to_string();
    assert!(err.contains("holds device 1 of an array, not device 0"), "{err}");
}

#[test]
fn an_array_served_records_the_capacity_its_geometry_holds_as_the_embedded_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, embedded) = (tmp.path().join("served"), tmp.path().join("embedded"));
    let bluedbm = || Profile::load("bluedbm").unwrap();
    let ds = dirs(&root, 1);
    format_device(&ds[0], 0, bluedbm(), Some(8 << 20)).unwrap();
    let servers = Servers::start(&ds);
    let a = Array::init_served(&root, 1, bluedbm(), Some(8 << 20), None, served(&servers)).unwrap();
    let e = Array::init(&embedded, 1, bluedbm(), Some(8 << 20), None).unwrap();
    // 128 chips of whole 2 MiB blocks: far above the 8 MiB asked, and said so by both.
    assert!(e.config().capacity_bytes > 200 << 20, "{}", e.config().capacity_bytes);
    assert_eq!(a.config().capacity_bytes, e.config().capacity_bytes);
}
