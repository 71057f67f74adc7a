//! Opening an array's devices over the chosen transport: in this process (the embedded default), each
//! in its own `insitu serve-device` process reached over a Unix socket, or each served elsewhere and
//! reached through messages (a Ray actor per device: [`Connector`]). Every device gets a fabric that
//! reaches the others, for device-to-device copies (a served device gets its own from its server).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use insitu_device::protocol::Identify;
pub use insitu_device::transport::{Exchange, MessageServer, ServeOptions};
use insitu_device::transport::{LocalTransport, MessageTransport, PeerFabric, ProcessTransport, Transport};
use insitu_device::{Device, DeviceClient};

use crate::error::{HostError, Result};

/// How the host reaches its devices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DeviceTransport {
    /// Devices run in this process.
    #[default]
    InProcess,
    /// Each device runs in a child process: `program args... DIR --socket ...` (the `insitu` binary's
    /// `serve-device` command), stopped when the array closes.
    Process { program: PathBuf, args: Vec<OsString> },
    /// Each device is served elsewhere ([`MessageServer`], in a Ray actor, say) and reached through
    /// messages over the channels `Served` opens.
    Message(Served),
}

/// Opens channels to an array's devices for the message transport.
pub trait Connector: Send + Sync + std::fmt::Debug {
    /// A channel to device `device`, or why there is none.
    fn connect(&self, device: u32) -> std::result::Result<Arc<dyn Exchange>, String>;
}

/// The [`Connector`] of a message transport (transports compare equal when they share one).
#[derive(Debug, Clone)]
pub struct Served(pub Arc<dyn Connector>);

impl PartialEq for Served {
    fn eq(&self, other: &Served) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Served {}

/// A client of device `i` through the message transport.
fn served(connector: &Served, i: u32) -> Result<DeviceClient> {
    let channel = connector.0.connect(i).map_err(|why| HostError::Offline { device: i, detail: why })?;
    MessageTransport::new(i, channel).map(MessageTransport::into_client).map_err(HostError::device(i))
}

impl DeviceTransport {
    /// The process transport, served by `program serve-device`.
    pub fn process(program: PathBuf) -> DeviceTransport {
        DeviceTransport::Process { program, args: vec!["serve-device".into()] }
    }
}

/// A private directory (the device servers' sockets, a simulation's NAND images), removed when dropped.
#[derive(Debug)]
pub(crate) struct ScratchDir(PathBuf);

impl ScratchDir {
    pub(crate) fn new() -> Result<ScratchDir> {
        Self::new_in(&std::env::temp_dir())
    }

    /// A scratch directory inside `parent` (where those of insitu processes that are gone are removed
    /// first: see [`sweep_scratch`]).
    pub(crate) fn new_in(parent: &Path) -> Result<ScratchDir> {
        use std::os::unix::fs::DirBuilderExt;
        sweep_scratch(parent);
        let stamp =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = parent.join(format!("insitu-{}-{stamp}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| HostError::io(&dir, e))?;
        Ok(ScratchDir(dir))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    fn socket(&self, device: u32) -> PathBuf {
        self.0.join(format!("dev{device}.sock"))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes the scratch directories (`insitu-PID-STAMP`) in `parent` whose process no longer runs: one
/// killed (a crash test's SIGKILL, an out-of-memory kill) cannot remove its own, and they piled up. A
/// directory whose PID runs is kept, whatever process holds the PID now; without `/proc` nothing is removed.
fn sweep_scratch(parent: &Path) {
    let proc = Path::new("/proc");
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    if !proc.join("self").exists() {
        return;
    }
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((pid, stamp)) = name.to_str().and_then(|n| n.strip_prefix("insitu-")?.split_once('-'))
        else {
            continue;
        };
        let numbers = pid.parse::<u32>().is_ok() && stamp.parse::<u128>().is_ok();
        if numbers && !proc.join(pid).exists() && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The directory of device `i` of the array in `dir`.
pub(crate) fn device_dir(dir: &Path, i: u32) -> PathBuf {
    dir.join(format!("dev{i}"))
}

/// Devices opened for an array (each, or why it did not open), with what keeps their transport alive.
#[derive(Debug)]
pub(crate) struct Opened {
    pub clients: Vec<Result<DeviceClient>>,
    pub sockets: Option<ScratchDir>,
}

/// Joins already-made devices of this process by a fabric and wraps them in clients.
pub(crate) fn in_process(devices: Vec<Device>) -> Vec<DeviceClient> {
    let fabric = Arc::new(PeerFabric::new());
    devices.into_iter().map(|d| attach(d, &fabric)).collect()
}

fn attach(d: Device, fabric: &Arc<PeerFabric>) -> DeviceClient {
    d.set_fabric(fabric.clone());
    let id = d.id();
    let t: Arc<dyn Transport> = Arc::new(LocalTransport::new(d));
    fabric.attach(id, &t);
    DeviceClient::new(t)
}

/// Runs `f(i)` for every device at once (opening recovers each device: worth doing in parallel). A
/// device whose opening panicked is that device's failure, offline, not the array's: one bad device does
/// not take the array down.
fn each<T: Send>(count: u32, f: impl Fn(u32) -> Result<T> + Sync) -> Vec<Result<T>> {
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..count).map(|i| (i, s.spawn(move || f(i)))).collect();
        handles
            .into_iter()
            .map(|(i, h)| {
                h.join().unwrap_or_else(|panic| {
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".into());
                    Err(HostError::Offline { device: i, detail: format!("its opening failed: {why}") })
                })
            })
            .collect()
    })
}

/// Checks that device `i` of the array is the device it says it is (directories swapped or copied
/// between arrays would otherwise mix parts up silently).
fn check_identity(dir: &Path, i: u32, client: &DeviceClient) -> Result<()> {
    let found = client.call(Identify).map_err(HostError::device(i))?.device_id;
    if found != i {
        return Err(HostError::Corrupt {
            what: "device directory",
            path: device_dir(dir, i),
            detail: format!("it holds device {found} of an array, not device {i}"),
        });
    }
    Ok(())
}

/// How long a device held by another process is waited for at least, whatever the host's `--wait`: the
/// servers of the command before may still be checkpointing (they finish their queued work first when
/// their host went away without closing them).
const DEVICE_SETTLE: Duration = Duration::from_secs(2);

/// Opens the `count` devices of the array in `dir` over `transport`, waiting up to `wait` (at least
/// [`DEVICE_SETTLE`]) for one another process holds.
/// A device that does not open (or is not the device it should be) comes back as its error.
pub(crate) fn open(dir: &Path, count: u32, transport: &DeviceTransport, wait: Duration) -> Result<Opened> {
    let mut opened = open_all(dir, count, transport, wait.max(DEVICE_SETTLE))?;
    for (i, c) in opened.clients.iter_mut().enumerate() {
        if let Ok(client) = c {
            if let Err(e) = check_identity(dir, i as u32, client) {
                *c = Err(e);
            }
        }
    }
    Ok(opened)
}

fn open_all(dir: &Path, count: u32, transport: &DeviceTransport, patience: Duration) -> Result<Opened> {
    match transport {
        DeviceTransport::InProcess => {
            let devices = each(count, |i| {
                Device::open_within(&device_dir(dir, i), patience).map_err(HostError::device(i))
            });
            let fabric = Arc::new(PeerFabric::new());
            let clients = devices.into_iter().map(|d| d.map(|d| attach(d, &fabric))).collect();
            Ok(Opened { clients, sockets: None })
        }
        DeviceTransport::Process { program, args } => {
            let sockets = ScratchDir::new()?;
            let clients = each(count, |i| {
                let opts = ServeOptions {
                    dir: device_dir(dir, i),
                    socket: sockets.socket(i),
                    peers: (0..count).filter(|j| *j != i).map(|j| (j, sockets.socket(j))).collect(),
                    exit_with_owner: true,
                    lock_wait: patience,
                };
                ProcessTransport::spawn(program, args, &opts, i)
                    .map(ProcessTransport::into_client)
                    .map_err(HostError::device(i))
            });
            Ok(Opened { clients, sockets: Some(sockets) })
        }
        DeviceTransport::Message(connector) => {
            Ok(Opened { clients: each(count, |i| served(connector, i)), sockets: None })
        }
    }
}

/// Opens device `i` alone (to diagnose an array that does not open), waiting up to `patience` while
/// another process holds it.
pub(crate) fn open_one(
    dir: &Path,
    i: u32,
    transport: &DeviceTransport,
    patience: Duration,
) -> Result<(DeviceClient, Option<ScratchDir>)> {
    match transport {
        DeviceTransport::InProcess => {
            let d = Device::open_within(&device_dir(dir, i), patience).map_err(HostError::device(i))?;
            Ok((insitu_device::transport::in_process(d), None))
        }
        DeviceTransport::Process { program, args } => {
            let sockets = ScratchDir::new()?;
            let opts = ServeOptions {
                dir: device_dir(dir, i),
                socket: sockets.socket(i),
                peers: Vec::new(),
                exit_with_owner: true,
                lock_wait: patience,
            };
            let t = ProcessTransport::spawn(program, args, &opts, i).map_err(HostError::device(i))?;
            Ok((t.into_client(), Some(sockets)))
        }
        DeviceTransport::Message(connector) => Ok((served(connector, i)?, None)),
    }
}

/// Formats the directory of device `id` where it is served (by a [`MessageServer`]: a Ray backend's
/// device actor formats its own directory), for [`crate::Array::init_served`] to make an array of.
pub fn format_device(
    dir: &Path,
    id: u32,
    profile: insitu_device::Profile,
    capacity_bytes: Option<u64>,
) -> Result<()> {
    let capacity = capacity_bytes.unwrap_or(profile.default_capacity_bytes);
    Device::format(dir, id, profile, capacity).and_then(|d| d.close()).map_err(HostError::device(id))
}

/// Serves one device directory to a host in another process until that host closes it (the device side
/// of [`DeviceTransport::Process`]; `insitu serve-device`).
pub fn serve_device(opts: &ServeOptions) -> Result<()> {
    insitu_device::transport::serve(opts).map_err(HostError::DeviceSetup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_directories_of_processes_that_are_gone_are_swept() {
        let parent = tempfile::tempdir().unwrap();
        let gone = parent.path().join(format!("insitu-{}-17", u32::MAX));
        let mine = parent.path().join(format!("insitu-{}-18", std::process::id()));
        let other = parent.path().join(format!("insitu-{}-data", u32::MAX));
        for d in [&gone, &mine, &other] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(gone.join("dev0.sock"), b"").unwrap();
        let scratch = ScratchDir::new_in(parent.path()).unwrap();
        assert!(!gone.exists(), "a dead process's directory is removed");
        assert!(mine.exists() && other.exists(), "a live process's, and names not of the pattern, are kept");
        assert!(scratch.path().exists());
    }
}
