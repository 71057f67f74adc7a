//! Frames of the process transport: a 21-byte prefix (kind, command id, header length, bulk length), a
//! postcard header, then the bulk bytes exactly as they are (data never goes through the serializer).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use insitu_kernels::le;

use crate::error::{DeviceError, Result};
use crate::protocol::{Command, Payload};

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// Host -> device: a command (header: the command, bulk: its data).
    Request = 1,
    /// Device -> host: a response (header and bulk as the request type encodes them).
    Ok = 2,
    /// Device -> host: a typed error (header: the `DeviceError`).
    Err = 3,
    /// Host -> device: finish queued work, checkpoint, exit.
    Close = 4,
    /// Device -> host: closed.
    Closed = 5,
    /// Device -> host (message transport): the rest of a message could not be read (header: why).
    Broken = 6,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Request,
            2 => Kind::Ok,
            3 => Kind::Err,
            4 => Kind::Close,
            5 => Kind::Closed,
            6 => Kind::Broken,
            _ => return None,
        })
    }
}

const PREFIX: usize = 21;
/// Headers are small (commands, program arguments and results); anything larger is refused as a command
/// or reply of its own, and read as a broken stream.
const MAX_HEADER: u64 = 1 << 30;
const MAX_BULK: u64 = 1 << 36;
/// What a reader sets aside before the bytes arrive (more is grown as they do).
const PREALLOC: u64 = 64 << 20;

/// Fails when a payload cannot travel in one frame.
fn check_size(p: &Payload) -> Result<()> {
    if p.header.len() as u64 > MAX_HEADER || p.bulk.len() as u64 > MAX_BULK {
        return Err(DeviceError::Protocol(format!(
            "a message of {} + {} bytes is larger than a frame carries ({MAX_HEADER} + {MAX_BULK})",
            p.header.len(),
            p.bulk.len()
        )));
    }
    Ok(())
}

/// A socket written with `MSG_NOSIGNAL` (a vanished peer is an error, not a SIGPIPE).
pub(crate) struct NoSignal<'a>(pub &'a UnixStream);

impl Write for NoSignal<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        crate::sys::send_all(self.0, buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[derive(Debug)]
pub(crate) struct Frame {
    pub kind: Kind,
    pub id: u64,
    pub payload: Payload,
}

/// Writes one frame.
pub(crate) fn write_frame(
    w: &mut impl Write,
    kind: Kind,
    id: u64,
    header: &[u8],
    bulk: &[u8],
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(PREFIX + header.len());
    head.push(kind as u8);
    head.extend_from_slice(&id.to_le_bytes());
    head.extend_from_slice(&(header.len() as u32).to_le_bytes());
    head.extend_from_slice(&(bulk.len() as u64).to_le_bytes());
    head.extend_from_slice(header);
    w.write_all(&head)?;
    if !bulk.is_empty() {
        w.write_all(bulk)?;
    }
    w.flush()
}

/// Reads one frame; `None` at a clean end of stream.
pub(crate) fn read_frame(r: &mut impl Read) -> Result<Option<Frame>> {
    let broken = |what: String| DeviceError::Protocol(format!("broken frame: {what}"));
    let mut prefix = [0u8; PREFIX];
    match r.read(&mut prefix[..1]) {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(broken(e.to_string())),
    }
    r.read_exact(&mut prefix[1..]).map_err(|e| broken(e.to_string()))?;
    let kind = Kind::from_u8(prefix[0]).ok_or_else(|| broken(format!("unknown kind {}", prefix[0])))?;
    let (id, hlen, blen) =
        (le::u64_at(&prefix[1..]), le::u32_at(&prefix[9..]) as u64, le::u64_at(&prefix[13..]));
    if hlen > MAX_HEADER || blen > MAX_BULK {
        return Err(broken(format!("header {hlen} / bulk {blen} bytes")));
    }
    let mut header = Vec::with_capacity(hlen.min(PREALLOC) as usize);
    r.by_ref().take(hlen).read_to_end(&mut header).map_err(|e| broken(e.to_string()))?;
    // The bulk is read straight into its final buffer (no zero-fill, no second copy).
    let mut bulk = Vec::with_capacity(blen.min(PREALLOC) as usize);
    r.by_ref().take(blen).read_to_end(&mut bulk).map_err(|e| broken(e.to_string()))?;
    if header.len() as u64 != hlen || bulk.len() as u64 != blen {
        return Err(broken("cut short".into()));
    }
    Ok(Some(Frame { kind, id, payload: Payload { header, bulk } }))
}

/// A command as a payload: its bulk taken out, the rest encoded.
pub(crate) fn encode_command(mut cmd: Command) -> Result<Payload> {
    let bulk = cmd.take_bulk();
    let mut p = Payload::encode(&cmd)?;
    p.bulk = bulk;
    check_size(&p)?;
    Ok(p)
}

/// The command a payload holds.
pub(crate) fn decode_command(p: Payload) -> Result<Command> {
    let mut cmd: Command = p.decode()?;
    cmd.put_bulk(p.bulk);
    Ok(cmd)
}

/// Writes a reply frame: the response, or the typed error (one that cannot be encoded, such as a path
/// that is not UTF-8, travels as its message).
pub(crate) fn write_reply(w: &mut impl Write, id: u64, reply: Result<Payload>) -> std::io::Result<()> {
    match reply.and_then(|p| check_size(&p).map(|()| p)) {
        Ok(p) => write_frame(w, Kind::Ok, id, &p.header, &p.bulk),
        Err(e) => {
            let header = postcard::to_stdvec(&e)
                .or_else(|_| postcard::to_stdvec(&DeviceError::Protocol(e.to_string())))
                .unwrap_or_default();
            write_frame(w, Kind::Err, id, &header, &[])
        }
    }
}

/// The reply a frame carries.
pub(crate) fn reply_of(f: Frame) -> Result<Payload> {
    match f.kind {
        Kind::Ok => Ok(f.payload),
        _ => Err(f.payload.decode::<DeviceError>().unwrap_or_else(|e| e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Append, Read};

    #[test]
    fn commands_and_their_bulk_cross_a_stream_intact() {
        let mut buf = Vec::new();
        let p = encode_command(Append { txn: 7, data: vec![1, 2, 3] }.into()).unwrap();
        assert_eq!(p.bulk, vec![1, 2, 3], "the data travels as bulk");
        write_frame(&mut buf, Kind::Request, 42, &p.header, &p.bulk).unwrap();
        let r = Read { name: "x".into(), offset: 1, len: 2, buf: vec![9; 100] };
        let p = encode_command(r.into()).unwrap();
        assert!(p.bulk.is_empty(), "a read's recycled buffer stays with the host");
        write_frame(&mut buf, Kind::Request, 43, &p.header, &p.bulk).unwrap();
        let mut rd = &buf[..];
        let f = read_frame(&mut rd).unwrap().unwrap();
        assert_eq!((f.kind, f.id), (Kind::Request, 42));
        match decode_command(f.payload).unwrap() {
            Command::Append(a) => assert_eq!((a.txn, a.data), (7, vec![1, 2, 3])),
            other => panic!("{other:?}"),
        }
        let f = read_frame(&mut rd).unwrap().unwrap();
        assert!(matches!(decode_command(f.payload).unwrap(), Command::Read(Read { offset: 1, len: 2, .. })));
        assert!(read_frame(&mut rd).unwrap().is_none());
        assert!(read_frame(&mut &buf[..10]).is_err(), "a cut frame is an error, not an end");
    }

    #[test]
    fn every_command_carrying_data_keeps_it_across_a_stream() {
        use crate::protocol::{PeerWrite, WriteLba, WriteMemory};
        let data = vec![7u8; 5000];
        let cmds: Vec<Command> = vec![
            Append { txn: 1, data: data.clone() }.into(),
            WriteMemory { dst: 2, offset: 3, data: data.clone() }.into(),
            WriteLba { lba: 4, data: data.clone() }.into(),
            PeerWrite { dst: 5, offset: 6, hops: 1, data: data.clone() }.into(),
        ];
        for cmd in cmds {
            let name = cmd.name();
            let p = encode_command(cmd).unwrap();
            assert_eq!(p.bulk, data, "{name}: the data travels as bulk");
            let mut back = decode_command(p).unwrap();
            assert_eq!(back.take_bulk(), data, "{name}: and comes back in place");
        }
    }

    #[test]
    fn errors_cross_as_typed_values() {
        let mut buf = Vec::new();
        let e = DeviceError::MemoryExhausted { requested: 5, available: 1, capacity: 4 };
        write_reply(&mut buf, 1, Err(e)).unwrap();
        let f = read_frame(&mut &buf[..]).unwrap().unwrap();
        assert!(matches!(reply_of(f), Err(DeviceError::MemoryExhausted { requested: 5, .. })));
    }
}
