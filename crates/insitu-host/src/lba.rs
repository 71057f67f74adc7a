//! The block interface of one device: write a file (or bytes) at an LBA, read bytes from an LBA, trim (NVMe write,
//! read, dataset management). One LBA is one flash page of the device's profile. Writes and reads stream
//! in pieces with a few commands in flight; the last block of a write is padded with zeros. Like a disk,
//! a multi-block write that fails part way leaves the blocks before the failure written.

use std::collections::VecDeque;
use std::io::{Read, Write};

use insitu_device::protocol::{Identify, ReadLba, TrimLba, WriteLba};
use insitu_device::transport::Pending;
use serde_json::json;

use crate::array::Array;
use crate::blob::Progress;
use crate::error::{HostError, Result};
use crate::input::Input;
use crate::report::{Measure, Report};
use crate::units::human_bytes;

/// Bytes per block command.
pub const PIECE_BYTES: u64 = 1 << 20;
/// Block commands in flight.
const WINDOW: usize = 4;

/// A device's block geometry: blocks the host may address, and bytes per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocks {
    pub count: u64,
    pub size: u32,
}

impl Blocks {
    pub fn of(array: &Array, device: u32) -> Result<Blocks> {
        let p = array.device(device)?.call(Identify).map_err(HostError::device(device))?;
        Ok(Blocks { count: p.lba_blocks, size: p.lba_block_size })
    }

    /// Blocks that hold `bytes` bytes.
    pub fn blocks_for(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.size as u64)
    }

    /// Fails unless blocks `lba..lba + n` exist.
    pub fn check(&self, lba: u64, n: u64) -> Result<()> {
        if lba.checked_add(n).is_none_or(|e| e > self.count) {
            return Err(HostError::InvalidArgument(format!(
                "LBAs {lba}..{} are past the device's {} blocks of {} bytes",
                lba.saturating_add(n),
                self.count,
                self.size
            )));
        }
        Ok(())
    }

    /// Bytes per command: a whole number of blocks near `bytes`.
    fn piece(&self, bytes: u64) -> u64 {
        (bytes / self.size as u64).max(1) * self.size as u64
    }
}

/// Writes `size` bytes from `src` at block `lba` of `device` (the last block zero-padded), in commands of
/// about `request_bytes`.
pub fn write_stream(
    array: &Array,
    device: u32,
    lba: u64,
    src: &mut dyn Read,
    size: u64,
    request_bytes: u64,
    progress: Progress<'_>,
) -> Result<()> {
    let blocks = Blocks::of(array, device)?;
    blocks.check(lba, blocks.blocks_for(size))?;
    let dev = array.device(device)?;
    let piece = blocks.piece(request_bytes);
    let mut inflight: VecDeque<Pending<'_, WriteLba>> = VecDeque::new();
    let (mut done, mut at) = (0u64, lba);
    while done < size {
        let len = piece.min(size - done);
        let mut data = vec![0u8; blocks.blocks_for(len) as usize * blocks.size as usize];
        src.read_exact(&mut data[..len as usize]).map_err(|e| HostError::io("input", e))?;
        if inflight.len() >= WINDOW {
            inflight.pop_front().expect("window is not empty").wait().map_err(HostError::device(device))?;
        }
        let n = data.len() as u64 / blocks.size as u64;
        inflight.push_back(dev.submit(WriteLba { lba: at, data }).map_err(HostError::device(device))?);
        at += n;
        done += len;
        progress(done, size)?;
        array.faults.hit("lba-write-piece");
    }
    while let Some(p) = inflight.pop_front() {
        p.wait().map_err(HostError::device(device))?;
    }
    Ok(())
}

/// Reads `len` bytes from block `lba` of `device` into `out`.
pub fn read_stream(
    array: &Array,
    device: u32,
    lba: u64,
    len: u64,
    out: &mut dyn Write,
    progress: Progress<'_>,
) -> Result<()> {
    read_stream_in(array, device, lba, len, out, progress, PIECE_BYTES)
}

/// [`read_stream`] in requests of about `request_bytes` (whole blocks) each.
pub fn read_stream_in(
    array: &Array,
    device: u32,
    lba: u64,
    len: u64,
    out: &mut dyn Write,
    progress: Progress<'_>,
    request_bytes: u64,
) -> Result<()> {
    let blocks = Blocks::of(array, device)?;
    blocks.check(lba, blocks.blocks_for(len))?;
    let dev = array.device(device)?;
    let piece = blocks.piece(request_bytes);
    let mut inflight: VecDeque<(Pending<'_, ReadLba>, u64)> = VecDeque::new();
    let (mut issued, mut done, mut at) = (0u64, 0u64, lba);
    while done < len {
        while issued < len && inflight.len() < WINDOW {
            let want = piece.min(len - issued);
            let n = blocks.blocks_for(want);
            inflight.push_back((
                dev.submit(ReadLba { lba: at, blocks: n }).map_err(HostError::device(device))?,
                want,
            ));
            at += n;
            issued += want;
        }
        let (p, want) = inflight.pop_front().expect("something is in flight");
        let data = p.wait().map_err(HostError::device(device))?;
        out.write_all(&data[..want as usize]).map_err(|e| HostError::io("output", e))?;
        done += want;
        progress(done, len)?;
    }
    Ok(())
}

/// `insitu lba write`: the input's bytes at block `lba`.
pub fn write(
    array: &Array,
    device: u32,
    lba: u64,
    input: Input<'_>,
    progress: Progress<'_>,
) -> Result<Report> {
    let size = input.size()?;
    let mut src = input.reader()?;
    let measure = Measure::start("lba-write", array)?;
    write_stream(array, device, lba, &mut src, size, PIECE_BYTES, progress)?;
    let blocks = Blocks::of(array, device)?;
    let n = blocks.blocks_for(size);
    let headline = format!("wrote {} to device {device} at LBA {lba} ({n} blocks)", human_bytes(size));
    measure.finish(array, headline, json!({ "device": device, "lba": lba, "bytes": size, "blocks": n }))
}

/// `insitu lba read`: `len` bytes from block `lba`.
pub fn read(
    array: &Array,
    device: u32,
    lba: u64,
    len: u64,
    out: &mut dyn Write,
    progress: Progress<'_>,
) -> Result<Report> {
    let measure = Measure::start("lba-read", array)?;
    read_stream(array, device, lba, len, out, progress)?;
    out.flush().map_err(|e| HostError::io("output", e))?;
    let headline = format!("read {} from device {device} at LBA {lba}", human_bytes(len));
    measure.finish(array, headline, json!({ "device": device, "lba": lba, "bytes": len }))
}

/// `insitu lba trim`: `len` bytes (whole blocks) from block `lba` read as zeros from now on.
pub fn trim(array: &Array, device: u32, lba: u64, len: u64) -> Result<Report> {
    let blocks = Blocks::of(array, device)?;
    if !len.is_multiple_of(blocks.size as u64) {
        return Err(HostError::InvalidArgument(format!(
            "a trim is whole blocks: {len} bytes is not a multiple of {} bytes",
            blocks.size
        )));
    }
    let n = len / blocks.size as u64;
    blocks.check(lba, n)?;
    let measure = Measure::start("lba-trim", array)?;
    array.device(device)?.call(TrimLba { lba, blocks: n }).map_err(HostError::device(device))?;
    let headline = format!("trimmed {n} blocks of device {device} from LBA {lba}");
    measure.finish(array, headline, json!({ "device": device, "lba": lba, "blocks": n }))
}
