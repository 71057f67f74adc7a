//! The process transport, host side: a device served by another process (`insitu serve-device DIR`), over
//! a Unix socket, in frames whose data travels as it is ([`crate::transport::wire`]). A reader thread
//! files replies in a completion table; if the server dies, every waiter gets an error that says how.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command as Process, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::completion::{CommandId, Completions, Reply};
use crate::error::{DeviceError, Result};
use crate::protocol::Command;
use crate::transport::client::{admit, DeviceClient, Transport};
use crate::transport::wire::{encode_command, read_frame, reply_of, write_frame, Kind, NoSignal};

/// How a device server is started: its directory, its socket, and the sockets of its peers (for
/// device-to-device copies).
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub peers: Vec<(u32, PathBuf)>,
    /// Exit when the host that started the server goes away: its connection (the first) ends, or the
    /// server's stdin, which that host holds open, closes.
    pub exit_with_owner: bool,
    /// How long to wait while another process holds the device (its host's `--wait`).
    pub lock_wait: Duration,
}

impl ServeOptions {
    /// The command-line arguments of `insitu serve-device` for these options.
    /// The directory comes last, after `--`: a path that starts with `-` is not taken for an option.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["--socket".into(), self.socket.clone().into()];
        for (id, p) in &self.peers {
            let mut s = OsString::from(format!("{id}="));
            s.push(p);
            a.push("--peer".into());
            a.push(s);
        }
        if self.exit_with_owner {
            a.push("--exit-with-owner".into());
        }
        a.extend(["--wait".into(), self.lock_wait.as_secs_f64().to_string().into()]);
        a.extend(["--".into(), self.dir.clone().into()]);
        a
    }
}

/// The server process this client started.
#[derive(Debug)]
struct Server {
    child: Child,
    _stdout: BufReader<ChildStdout>,
    /// The server's lifeline: it exits when this closes (with us, however we end).
    stdin: Option<ChildStdin>,
}

impl Server {
    /// Waits up to `patience` for the process to end, then kills it; reaps it either way.
    fn stop_within(&mut self, patience: Duration) {
        self.stdin.take();
        if self.status(patience).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// How the process ended, waiting up to `patience` for it to end.
    fn status(&mut self, patience: Duration) -> Option<std::process::ExitStatus> {
        let t0 = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) if t0.elapsed() < patience => std::thread::sleep(Duration::from_millis(5)),
                _ => return None,
            }
        }
    }
}

/// How a server process ended, for errors: `pid 12 was killed (SIGKILL)`.
fn describe(pid: u32, status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("pid {pid} exited with status {c}"),
            (_, Some(9)) => format!("pid {pid} was killed (SIGKILL)"),
            (_, Some(sig)) => format!("pid {pid} was killed by signal {sig}"),
            _ => format!("pid {pid} exited"),
        },
        None => format!("the connection to pid {pid} closed"),
    }
}

/// A device in another process.
#[derive(Debug)]
pub struct ProcessTransport {
    id: u32,
    writer: Mutex<UnixStream>,
    completions: Arc<Completions>,
    next_id: AtomicU64,
    reader: Mutex<Option<JoinHandle<()>>>,
    server: Arc<Mutex<Option<Server>>>,
    closed: AtomicBool,
}

impl ProcessTransport {
    /// Connects to the server of device `id` listening on `socket`.
    pub fn connect(socket: &Path, id: u32) -> Result<ProcessTransport> {
        let stream = UnixStream::connect(socket).map_err(|e| DeviceError::io(socket, e))?;
        Self::over(stream, id, None)
    }

    /// Starts `program ARGS... DIR --socket ...` (the `serve-device` command of the `insitu` binary) for
    /// device `id`, waits until it serves, and connects.
    pub fn spawn(
        program: &Path,
        args: &[OsString],
        opts: &ServeOptions,
        id: u32,
    ) -> Result<ProcessTransport> {
        let mut child = Process::new(program)
            .args(args)
            .args(opts.to_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| DeviceError::io(program, e))?;
        let stdout =
            child.stdout.take().ok_or_else(|| DeviceError::Protocol("no stdout from the server".into()))?;
        let stdin =
            child.stdin.take().ok_or_else(|| DeviceError::Protocol("no stdin to the server".into()))?;
        let mut stdout = BufReader::new(stdout);
        // The server says `ready` once it serves, or `error JSON` with the typed reason it cannot.
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let mut server = Server { child, _stdout: stdout, stdin: Some(stdin) };
        if let Some(json) = line.strip_prefix("error ") {
            server.stop_within(Duration::from_secs(5));
            return Err(serde_json::from_str::<DeviceError>(json.trim())
                .unwrap_or_else(|_| DeviceError::Protocol(json.trim().to_string())));
        }
        if line.trim() != "ready" {
            let pid = server.child.id();
            let how = describe(pid, server.status(Duration::from_secs(5)));
            server.stop_within(Duration::ZERO);
            return Err(DeviceError::Disconnected(format!(
                "the server of {} did not start: {how}",
                opts.dir.display()
            )));
        }
        let stream = match UnixStream::connect(&opts.socket) {
            Ok(s) => s,
            Err(e) => {
                server.stop_within(Duration::ZERO);
                return Err(DeviceError::io(&opts.socket, e));
            }
        };
        Self::over(stream, id, Some(server))
    }

    fn over(stream: UnixStream, id: u32, server: Option<Server>) -> Result<ProcessTransport> {
        let read = stream.try_clone().map_err(|e| DeviceError::io("device socket", e))?;
        let completions = Arc::new(Completions::default());
        let server = Arc::new(Mutex::new(server));
        let reader = {
            let (completions, server) = (completions.clone(), server.clone());
            std::thread::Builder::new()
                .name(format!("dev{id}-client"))
                .spawn(move || read_replies(read, &completions, &server))
                .map_err(|e| DeviceError::io("reader thread", e))?
        };
        Ok(ProcessTransport {
            id,
            writer: Mutex::new(stream),
            completions,
            next_id: AtomicU64::new(1),
            reader: Mutex::new(Some(reader)),
            server,
            closed: AtomicBool::new(false),
        })
    }

    /// A client of this transport.
    pub fn into_client(self) -> DeviceClient {
        DeviceClient::new(Arc::new(self))
    }

    fn send(&self, kind: Kind, id: u64, header: &[u8], bulk: &[u8]) -> Result<()> {
        let written = {
            let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            write_frame(&mut NoSignal(&w), kind, id, header, bulk)
        };
        written.map_err(|e| {
            // The stream broke: the reader sees it too, and finds out how the server ended.
            self.join_reader();
            DeviceError::Disconnected(self.completions.lost().unwrap_or_else(|| e.to_string()))
        })
    }

    fn join_reader(&self) {
        if let Some(h) = self.reader.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
    }
}

/// The reader thread: replies into the table until the stream ends; then says why to every waiter.
fn read_replies(mut stream: UnixStream, completions: &Completions, server: &Mutex<Option<Server>>) {
    let why = loop {
        match read_frame(&mut stream) {
            Ok(Some(f)) if f.kind == Kind::Closed => break "the device was closed".to_string(),
            Ok(Some(f)) => {
                let id = f.id;
                completions.complete(id, Reply::Remote(reply_of(f)));
            }
            end => {
                let mut s = server.lock().unwrap_or_else(|p| p.into_inner());
                let how = match s.as_mut() {
                    Some(srv) => describe(srv.child.id(), srv.status(Duration::from_secs(1))),
                    None => "the connection closed".to_string(),
                };
                break match end {
                    Err(e) => format!("{how} ({e})"),
                    _ => how,
                };
            }
        }
    };
    completions.lose(why);
}

impl Transport for ProcessTransport {
    fn device_id(&self) -> u32 {
        self.id
    }

    fn submit(&self, cmd: Command) -> Result<CommandId> {
        admit(&self.closed, &self.completions, self.id)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let p = encode_command(cmd)?;
        self.send(Kind::Request, id, &p.header, &p.bulk)?;
        Ok(id)
    }

    fn poll(&self, id: CommandId) -> Option<Reply> {
        self.completions.poll(id)
    }

    fn wait(&self, id: CommandId) -> Reply {
        self.completions.wait(id)
    }

    fn abandon(&self, id: CommandId) {
        self.completions.abandon(id);
    }

    fn in_process(&self) -> bool {
        false
    }

    fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(why) = self.completions.lost() {
            return Err(DeviceError::Disconnected(why));
        }
        self.send(Kind::Close, 0, &[], &[])?;
        self.join_reader();
        if let Some(mut s) = self.server.lock().unwrap_or_else(|p| p.into_inner()).take() {
            s.stop_within(Duration::from_secs(60));
        }
        match self.completions.lost() {
            Some(why) if why != "the device was closed" => Err(DeviceError::Disconnected(why)),
            _ => Ok(()),
        }
    }
}

impl Drop for ProcessTransport {
    fn drop(&mut self) {
        // Without a close, the server sees its host go (the connection and its lifeline end, as when the
        // host dies): it finishes its queued work, checkpoints and exits on its own. It is reaped in the
        // background, so dropping many devices after an error does not wait for each in turn.
        let _ = self.writer.lock().unwrap_or_else(|p| p.into_inner()).shutdown(std::net::Shutdown::Both);
        self.join_reader();
        if let Some(mut s) = self.server.lock().unwrap_or_else(|p| p.into_inner()).take() {
            s.stdin.take();
            std::thread::spawn(move || {
                let _ = s.child.wait();
            });
        }
    }
}
