//! The message transport: a device reached through any request/response channel that carries bytes (a
//! Ray actor call, an RPC), not a stream. Commands travel as the process transport's frames
//! ([`crate::transport::wire`]), batched: the host side ([`MessageTransport`]) keeps one message in flight
//! per device, holding every command submitted meanwhile for the next one, so commands reach the device in
//! the order they were submitted whatever the channel does with concurrent calls. The device side
//! ([`MessageServer`]) submits a message's commands in order, then answers with all their replies.
//!
//! A device served this way reaches its peers (device-to-device copies) through the same kind of channel,
//! given to [`MessageServer::set_peers`].

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::completion::{CommandId, Completions, Reply, ReplyTo, WireSink};
use crate::device::Device;
use crate::error::{DeviceError, Result};
use crate::protocol::{Command, Payload};
use crate::transport::client::{admit, DeviceClient, Transport};
use crate::transport::fabric::PeerFabric;
use crate::transport::local::LocalTransport;
use crate::transport::wire::{
    decode_command, encode_command, read_frame, reply_of, write_frame, write_reply, Kind,
};

/// A request/response channel to one device: one message of request frames out, the message of their
/// reply frames back. An error says why the channel failed (the device's server went away); it ends the
/// transport.
pub trait Exchange: Send + Sync + std::fmt::Debug {
    fn exchange(&self, request: Vec<u8>) -> std::result::Result<Vec<u8>, String>;
}

/// Frames waiting for the next message.
#[derive(Debug, Default)]
struct Outbox {
    frames: Vec<u8>,
    stop: bool,
}

#[derive(Debug, Default)]
struct Queue {
    outbox: Mutex<Outbox>,
    ready: Condvar,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A device behind an [`Exchange`], host side.
#[derive(Debug)]
pub struct MessageTransport {
    id: u32,
    completions: Arc<Completions>,
    next_id: AtomicU64,
    queue: Arc<Queue>,
    sender: Mutex<Option<JoinHandle<()>>>,
    closed: AtomicBool,
}

/// What completions say once the device has closed.
const CLOSED: &str = "the device was closed";

impl MessageTransport {
    /// A transport to device `id` over `channel`.
    pub fn new(id: u32, channel: Arc<dyn Exchange>) -> Result<MessageTransport> {
        let completions = Arc::new(Completions::default());
        let queue = Arc::new(Queue::default());
        let sender = {
            let (completions, queue) = (completions.clone(), queue.clone());
            std::thread::Builder::new()
                .name(format!("dev{id}-messages"))
                .spawn(move || send_messages(&*channel, &queue, &completions))
                .map_err(|e| DeviceError::io("message thread", e))?
        };
        Ok(MessageTransport {
            id,
            completions,
            next_id: AtomicU64::new(1),
            queue,
            sender: Mutex::new(Some(sender)),
            closed: AtomicBool::new(false),
        })
    }

    /// A client of this transport.
    pub fn into_client(self) -> DeviceClient {
        DeviceClient::new(Arc::new(self))
    }

    fn push(&self, kind: Kind, id: u64, p: &Payload) {
        let mut out = self.queue.lock();
        // Writing to a Vec cannot fail.
        let _ = write_frame(&mut out.frames, kind, id, &p.header, &p.bulk);
        drop(out);
        self.queue.ready.notify_all();
    }

    fn stop(&self) {
        self.queue.lock().stop = true;
        self.queue.ready.notify_all();
        if let Some(h) = self.sender.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
    }
}

/// The sender thread: one message at a time, holding what is submitted meanwhile for the next; replies
/// into the completion table. Ends when stopped with nothing left to send, or when the channel fails.
fn send_messages(channel: &dyn Exchange, queue: &Queue, completions: &Completions) {
    loop {
        let message = {
            let mut out = queue.lock();
            while out.frames.is_empty() && !out.stop {
                out = queue.ready.wait(out).unwrap_or_else(|p| p.into_inner());
            }
            if out.frames.is_empty() {
                return;
            }
            std::mem::take(&mut out.frames)
        };
        // A channel that panics (a Python callback at interpreter shutdown) fails like one that errs:
        // waiters are told, never left waiting.
        let sent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| channel.exchange(message)));
        let replies = match sent {
            Ok(Ok(r)) => r,
            Ok(Err(why)) => return completions.lose(why),
            Err(_) => return completions.lose("the channel to the device panicked".into()),
        };
        let mut rd = &replies[..];
        loop {
            match read_frame(&mut rd) {
                Ok(Some(f)) if f.kind == Kind::Closed => return completions.lose(CLOSED.into()),
                Ok(Some(f)) if f.kind == Kind::Broken => {
                    let why = String::from_utf8_lossy(&f.payload.header).into_owned();
                    return completions.lose(format!("the device could not read a message: {why}"));
                }
                Ok(Some(f)) => {
                    let id = f.id;
                    completions.complete(id, Reply::Remote(reply_of(f)));
                }
                Ok(None) => break,
                Err(e) => return completions.lose(format!("a broken reply message: {e}")),
            }
        }
    }
}

impl Transport for MessageTransport {
    fn device_id(&self) -> u32 {
        self.id
    }

    fn submit(&self, cmd: Command) -> Result<CommandId> {
        admit(&self.closed, &self.completions, self.id)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.push(Kind::Request, id, &encode_command(cmd)?);
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
        self.push(Kind::Close, 0, &Payload::default());
        self.stop();
        match self.completions.lost() {
            Some(why) if why == CLOSED => Ok(()),
            Some(why) => Err(DeviceError::Disconnected(why)),
            None => Err(DeviceError::Protocol("the device did not confirm its close".into())),
        }
    }
}

impl Drop for MessageTransport {
    fn drop(&mut self) {
        // Without a close the device stays open where it is served; what was submitted is still sent.
        self.stop();
    }
}

/// Replies of one message, collected as the device delivers them.
#[derive(Debug, Default)]
struct Collect {
    replies: Mutex<Vec<(CommandId, Result<Payload>)>>,
    arrived: Condvar,
}

impl WireSink for Collect {
    fn send(&self, id: CommandId, reply: Result<Payload>) {
        self.replies.lock().unwrap_or_else(|p| p.into_inner()).push((id, reply));
        self.arrived.notify_all();
    }
}

/// A device served through messages, device side.
#[derive(Debug)]
pub struct MessageServer {
    local: Arc<LocalTransport>,
}

impl MessageServer {
    /// Opens (and recovers) the device in `dir`, waiting while a previous server still holds it.
    pub fn open(dir: &Path) -> Result<MessageServer> {
        let device = crate::transport::server::open_patiently(dir)?;
        let local = Arc::new(LocalTransport::new(device));
        let server = MessageServer { local };
        server.set_peers(Vec::new());
        Ok(server)
    }

    /// The device served.
    pub fn device(&self) -> &Device {
        self.local.device()
    }

    /// The device's peers for device-to-device copies: each reached through its own channel, connected
    /// on first use.
    pub fn set_peers(&self, peers: Vec<(u32, Arc<dyn Exchange>)>) {
        let fabric = Arc::new(PeerFabric::new());
        let this: Arc<dyn Transport> = self.local.clone();
        fabric.attach(self.device().id(), &this);
        for (peer, channel) in peers {
            fabric.attach_lazy(peer, move || {
                MessageTransport::new(peer, channel.clone()).map(MessageTransport::into_client)
            });
        }
        self.device().set_fabric(fabric);
    }

    /// Serves one message: submits its commands in order, waits for all their replies, and returns them
    /// as one message. A close checkpoints and stops the device and answers `Closed`.
    pub fn handle(&self, message: &[u8]) -> Vec<u8> {
        let sink = Arc::new(Collect::default());
        let reply_to = ReplyTo::Wire(sink.clone());
        let mut out = Vec::new();
        let (mut submitted, mut closed) = (0usize, false);
        let mut rd = message;
        loop {
            match read_frame(&mut rd) {
                Ok(Some(f)) if f.kind == Kind::Request => {
                    let id = f.id;
                    submitted += 1;
                    let sent = decode_command(f.payload)
                        .and_then(|c| self.device().submit_to(id, c, reply_to.clone()));
                    if let Err(e) = sent {
                        sink.send(id, Err(e));
                    }
                }
                Ok(Some(f)) if f.kind == Kind::Close => {
                    closed = true;
                    break;
                }
                Ok(Some(f)) => {
                    let e = DeviceError::Protocol(format!("unexpected frame {:?} from the host", f.kind));
                    let _ = write_reply(&mut out, f.id, Err(e));
                }
                Ok(None) => break,
                Err(e) => {
                    // The rest of the message cannot be read: the host is told the channel broke (its
                    // waiters fail) rather than left waiting for replies that will not come.
                    let _ = write_frame(&mut out, Kind::Broken, 0, e.to_string().as_bytes(), &[]);
                    break;
                }
            }
        }
        let mut replies = sink.replies.lock().unwrap_or_else(|p| p.into_inner());
        while replies.len() < submitted {
            replies = sink.arrived.wait(replies).unwrap_or_else(|p| p.into_inner());
        }
        for (id, reply) in replies.drain(..) {
            let _ = write_reply(&mut out, id, reply);
        }
        drop(replies);
        if closed {
            let _ = self.device().close();
            let _ = write_frame(&mut out, Kind::Closed, 0, &[], &[]);
        }
        out
    }

    /// Checkpoints and stops the device.
    pub fn close(&self) -> Result<()> {
        self.device().close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Append, Commit, CreateObject, Identify, Read, Stat};

    /// A channel straight to a server in this process.
    #[derive(Debug)]
    struct Direct(Arc<MessageServer>);

    impl Exchange for Direct {
        fn exchange(&self, request: Vec<u8>) -> std::result::Result<Vec<u8>, String> {
            Ok(self.0.handle(&request))
        }
    }

    #[derive(Debug)]
    struct Broken;

    impl Exchange for Broken {
        fn exchange(&self, _: Vec<u8>) -> std::result::Result<Vec<u8>, String> {
            Err("device 3 on node n1: the actor died".into())
        }
    }

    fn device(dir: &Path) -> Arc<MessageServer> {
        let p = crate::Profile::load("tiny").unwrap();
        Device::format(dir, 3, p, 8 << 20).unwrap().close().unwrap();
        Arc::new(MessageServer::open(dir).unwrap())
    }

    #[test]
    fn commands_and_replies_cross_as_messages_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let server = device(tmp.path());
        let client = MessageTransport::new(3, Arc::new(Direct(server.clone()))).unwrap().into_client();
        assert_eq!(client.call(Identify).unwrap().device_id, 3);
        // Many submitted before any is taken: they reach the device in order and all come back.
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let create = CreateObject {
            name: "x".into(),
            kind: "blob".into(),
            attrs: Default::default(),
            expected_size: Some(data.len() as u64),
        };
        let txn = client.call(create).unwrap();
        let pending: Vec<_> =
            data.chunks(10_000).map(|c| client.submit(Append { txn, data: c.to_vec() }).unwrap()).collect();
        for p in pending {
            p.wait().unwrap();
        }
        client.call(Commit { txn }).unwrap();
        assert_eq!(client.call(Stat { name: "x".into() }).unwrap().size, data.len() as u64);
        let back = client
            .call(Read { name: "x".into(), offset: 0, len: data.len() as u64, buf: Vec::new() })
            .unwrap();
        assert_eq!(back, data);
        // Errors come back typed.
        assert!(matches!(client.call(Stat { name: "nope".into() }), Err(DeviceError::Flash(_))));
        client.close().unwrap();
        assert!(matches!(client.call(Identify), Err(DeviceError::ShutDown(3))));
        assert!(server.device().close().is_ok());
    }

    #[test]
    fn a_failed_channel_fails_what_waits_and_what_comes_after() {
        let client = MessageTransport::new(3, Arc::new(Broken)).unwrap().into_client();
        let e = client.call(Identify).unwrap_err().to_string();
        assert!(e.contains("device 3 on node n1: the actor died"), "{e}");
        assert!(matches!(client.call(Identify), Err(DeviceError::Disconnected(_))));
    }
}
