//! The process transport, device side: `serve` opens a device directory and serves it on a Unix socket,
//! one thread per connection (the host that started it, and peers delivering device-to-device copies).
//! Commands go to the device's queues in arrival order; replies are written back as they complete.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::completion::{CommandId, ReplyTo, WireSink};
use crate::device::Device;
use crate::error::{DeviceError, Result};
use crate::fault::FaultPlan;
use crate::protocol::Payload;
use crate::transport::client::Transport;
use crate::transport::fabric::PeerFabric;
use crate::transport::local::LocalTransport;
use crate::transport::process::{ProcessTransport, ServeOptions};
use crate::transport::wire::{decode_command, read_frame, write_frame, write_reply, Kind, NoSignal};

/// How long a message server (a Ray actor) waits for the previous server of the same device to let go of
/// it. A process server waits as long as its host says ([`ServeOptions::lock_wait`]).
const LOCK_PATIENCE: Duration = Duration::from_secs(20);

/// Writes replies on one connection.
#[derive(Debug)]
struct Sink(Mutex<UnixStream>);

impl WireSink for Sink {
    fn send(&self, id: CommandId, reply: Result<Payload>) {
        let w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A host that went away gets no reply; the device goes on.
        let _ = write_reply(&mut NoSignal(&w), id, reply);
    }
}

/// Takes `SOCKET.lock`, held while the server serves: a second server asked for a socket path a live
/// one serves on is refused (found by the lock, not by connecting: a server started `--exit-with-owner`
/// would take that connection for its owner's, and stop when it closed).
fn lock_socket(path: &std::path::Path) -> Result<(std::fs::File, std::path::PathBuf)> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock = std::path::PathBuf::from(name);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|e| DeviceError::io(&lock, e))?;
    if !crate::sys::try_lock_exclusive(&f).map_err(|e| DeviceError::io(&lock, e))? {
        return Err(DeviceError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::AddrInUse, "another server serves on this socket"),
        ));
    }
    Ok((f, lock))
}

/// Makes room for the socket (its lock held): a stale socket of an earlier server is removed, anything
/// else is left alone (and binding then fails, naming the path).
fn clear_socket(path: &std::path::Path) {
    use std::os::unix::fs::FileTypeExt;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}

/// Opens the device in `dir`, waiting while a previous server still holds it.
pub(crate) fn open_patiently(dir: &std::path::Path) -> Result<Device> {
    Device::open_within(dir, LOCK_PATIENCE)
}

/// Serves the device in `opts.dir` until told to close (or, with `exit_with_owner`, until the first
/// connection ends), then checkpoints it and returns. Prints `ready` on stdout once it accepts
/// connections, or `error JSON` (the typed error) and returns it if it cannot start.
pub fn serve(opts: &ServeOptions) -> Result<()> {
    let started = Device::open_within(&opts.dir, opts.lock_wait).and_then(|device| {
        let socket_lock = lock_socket(&opts.socket)?;
        clear_socket(&opts.socket);
        let listener = UnixListener::bind(&opts.socket).map_err(|e| DeviceError::io(&opts.socket, e))?;
        // Accepting polls, so that the server stops promptly however its host went away.
        listener.set_nonblocking(true).map_err(|e| DeviceError::io(&opts.socket, e))?;
        Ok((device, listener, socket_lock))
    });
    let mut out = std::io::stdout();
    let (device, listener, (socket_lock, socket_lock_path)) = match started {
        Ok(x) => x,
        Err(e) => {
            let json = serde_json::to_string(&e)
                .or_else(|_| serde_json::to_string(&DeviceError::Protocol(e.to_string())))
                .unwrap_or_default();
            let _ = writeln!(out, "error {json}");
            let _ = out.flush();
            return Err(e);
        }
    };
    let id = device.id();
    let local = Arc::new(LocalTransport::new(device));
    // The fabric: this device itself, and its peers through their own servers' sockets.
    let fabric = Arc::new(PeerFabric::new());
    let this: Arc<dyn Transport> = local.clone();
    fabric.attach(id, &this);
    for (peer, socket) in &opts.peers {
        let (peer, socket) = (*peer, socket.clone());
        fabric.attach_lazy(peer, move || {
            ProcessTransport::connect(&socket, peer).map(ProcessTransport::into_client)
        });
    }
    local.device().set_fabric(fabric);
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    let faults = Arc::new(FaultPlan::from_env());
    let done = Arc::new(AtomicBool::new(false));
    // Closes the device (once, however many threads ask) and stops the accept loop.
    let finish = {
        let (local, done) = (local.clone(), done.clone());
        move || {
            let _ = local.device().close();
            done.store(true, Ordering::Release);
        }
    };
    if opts.exit_with_owner {
        // The host that started us keeps our stdin open: its end closing (also when it is killed, even before
        // it connects) is the host going away.
        let finish = finish.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            finish();
        });
    }
    let mut first = true;
    while !done.load(Ordering::Acquire) {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(_) => continue,
        };
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        let owner = std::mem::take(&mut first) && opts.exit_with_owner;
        let (local, faults, finish) = (local.clone(), faults.clone(), finish.clone());
        std::thread::spawn(move || {
            let told = serve_connection(stream, local.device(), &faults);
            if told || owner {
                finish();
            }
        });
    }
    // Our socket goes with us, then its lock.
    drop(listener);
    clear_socket(&opts.socket);
    let _ = std::fs::remove_file(&socket_lock_path);
    drop(socket_lock);
    Ok(())
}

/// Serves one connection until it ends; returns true if the host asked the device to close (the device
/// is then closed and the host told so).
fn serve_connection(stream: UnixStream, device: &Device, faults: &FaultPlan) -> bool {
    let Ok(write) = stream.try_clone() else { return false };
    let sink = Arc::new(Sink(Mutex::new(write)));
    let reply = ReplyTo::Wire(sink.clone());
    let point = format!("dev{}-command", device.id());
    let mut read = stream;
    loop {
        let frame = match read_frame(&mut read) {
            Ok(Some(f)) => f,
            Ok(None) | Err(_) => return false,
        };
        match frame.kind {
            Kind::Request => {
                faults.hit(&point);
                let id = frame.id;
                let submitted =
                    decode_command(frame.payload).and_then(|cmd| device.submit_to(id, cmd, reply.clone()));
                if let Err(e) = submitted {
                    sink.send(id, Err(e));
                }
            }
            Kind::Close => {
                let _ = device.close();
                sink.closed();
                return true;
            }
            _ => return false,
        }
    }
}

impl Sink {
    /// Tells the host the device is closed.
    fn closed(&self) {
        let w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let _ = write_frame(&mut NoSignal(&w), Kind::Closed, 0, &[], &[]);
    }
}
