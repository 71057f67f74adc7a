//! The command block (§III-E): "required information is written by the host to a pre-defined LBA as a
//! normal write request"; the status is read back from the same LBA. Both are one logical page,
//! little-endian, zero-padded:
//!
//! Command block:
//! ```text
//! offset size field
//!  0      8   magic "ISSORT01"
//!  8      4   version (1)
//! 12      4   opcode: 1 configure, 2 generate, 3 drop, 4 flush, 5 set flags, 6 resize
//! 16      4   index id (1..=16)
//! 20      4   flags: bit 0 sort-on-write, bit 1 active read (configure, set flags)
//! 24      8   base LBA                                      (configure)
//! 32      8   records (configure; resize)
//! 40      4   record size in bytes                          (configure)
//! 44      4   key offset in the record                      (configure)
//! 48      4   key size (1..=64)                             (configure)
//! 52      4   fanout (0: the paper's 128)                   (configure)
//! 56      8   records per generate command (0: 65,536)     (generate)
//! 64      4   kind: 0 B+tree, 1 sorted runs (ActiveSort)    (configure)
//! 68      4   runs n (kind 1)
//! 72   16*n   runs: LBA (8), records (8)
//! ```
//! Status page:
//! ```text
//!  0      8   magic "ISSTAT01"
//!  8      4   version (1)
//! 12      4   opcode of the last command block (0: none yet)
//! 16      4   its result: 0 done, 1 refused or failed
//! 20      4   indexes n
//! 24      8   command LBA
//! 32      8   host LBAs
//! 40      8   generate: records done     (after a generate)
//! 48      8   generate: records in all
//! 56    200   message (UTF-8, zero-padded)
//! 256  64*n   per index (as many as fit the page): id (4), flags (4), base LBA (8), records (8),
//!             indexed (8), generated (8), memory bytes (8), record size (4), key offset (4),
//!             key size (4), tree height (4)
//! ```

use super::{IndexConfig, IndexKind, RunExtent, SelfSortStatus, DEFAULT_FANOUT, MAX_RUNS};

pub const COMMAND_MAGIC: &[u8; 8] = b"ISSORT01";
pub const STATUS_MAGIC: &[u8; 8] = b"ISSTAT01";
pub const VERSION: u32 = 1;

const MESSAGE_AT: usize = 56;
const MESSAGE_BYTES: usize = 200;
const INDEXES_AT: usize = 256;
const INDEX_BYTES: usize = 64;

/// What a command block asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockCommand {
    Configure(IndexConfig),
    Generate { index: u32, chunk_records: u64 },
    Drop { index: u32 },
    Flush,
    SetFlags { index: u32, sort_on_write: bool, active_read: bool },
    Resize { index: u32, records: u64 },
}

impl BlockCommand {
    pub fn opcode(&self) -> u32 {
        match self {
            BlockCommand::Configure(_) => 1,
            BlockCommand::Generate { .. } => 2,
            BlockCommand::Drop { .. } => 3,
            BlockCommand::Flush => 4,
            BlockCommand::SetFlags { .. } => 5,
            BlockCommand::Resize { .. } => 6,
        }
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn flags(sort_on_write: bool, active_read: bool) -> u32 {
    sort_on_write as u32 | (active_read as u32) << 1
}

/// Encodes a command block into a page of `page_size` bytes (fails if the runs do not fit the page).
pub fn encode(cmd: &BlockCommand, page_size: u32) -> Result<Vec<u8>, String> {
    let mut b = vec![0u8; page_size as usize];
    b[..8].copy_from_slice(COMMAND_MAGIC);
    put_u32(&mut b, 8, VERSION);
    put_u32(&mut b, 12, cmd.opcode());
    match cmd {
        BlockCommand::Configure(c) => {
            put_u32(&mut b, 16, c.id);
            put_u32(&mut b, 20, flags(c.sort_on_write, c.active_read));
            put_u64(&mut b, 24, c.base_lba);
            put_u64(&mut b, 32, c.records);
            put_u32(&mut b, 40, c.record_size);
            put_u32(&mut b, 44, c.key_offset);
            put_u32(&mut b, 48, c.key_size);
            put_u32(&mut b, 52, c.fanout);
            if let IndexKind::Runs(runs) = &c.kind {
                if 72 + 16 * runs.len() > b.len() {
                    return Err(format!("{} runs do not fit a {page_size}-byte command block", runs.len()));
                }
                put_u32(&mut b, 64, 1);
                put_u32(&mut b, 68, runs.len() as u32);
                for (i, r) in runs.iter().enumerate() {
                    put_u64(&mut b, 72 + 16 * i, r.lba);
                    put_u64(&mut b, 80 + 16 * i, r.records);
                }
            }
        }
        BlockCommand::Generate { index, chunk_records } => {
            put_u32(&mut b, 16, *index);
            put_u64(&mut b, 56, *chunk_records);
        }
        BlockCommand::Drop { index } => put_u32(&mut b, 16, *index),
        BlockCommand::Flush => {}
        BlockCommand::SetFlags { index, sort_on_write, active_read } => {
            put_u32(&mut b, 16, *index);
            put_u32(&mut b, 20, flags(*sort_on_write, *active_read));
        }
        BlockCommand::Resize { index, records } => {
            put_u32(&mut b, 16, *index);
            put_u64(&mut b, 32, *records);
        }
    }
    Ok(b)
}

/// Decodes a command block; the error names what is wrong with it.
pub fn decode(b: &[u8]) -> Result<BlockCommand, String> {
    if b.len() < 72 {
        return Err(format!("a command block is one page of at least 72 bytes, got {}", b.len()));
    }
    if &b[..8] != COMMAND_MAGIC {
        return Err(format!(
            "bad magic {:02x?} (a command block starts with \"{}\")",
            &b[..8],
            String::from_utf8_lossy(COMMAND_MAGIC)
        ));
    }
    let version = u32_at(b, 8);
    if version != VERSION {
        return Err(format!("command block version {version} (this firmware speaks version {VERSION})"));
    }
    let index = u32_at(b, 16);
    let fl = u32_at(b, 20);
    if fl & !3 != 0 {
        return Err(format!("unknown flags {fl:#x} (bit 0: sort-on-write, bit 1: active read)"));
    }
    let (sort_on_write, active_read) = (fl & 1 != 0, fl & 2 != 0);
    Ok(match u32_at(b, 12) {
        1 => {
            let kind = match u32_at(b, 64) {
                0 => IndexKind::Tree,
                1 => {
                    let n = u32_at(b, 68) as usize;
                    if n > MAX_RUNS || 72 + 16 * n > b.len() {
                        return Err(format!("{n} runs: at most {MAX_RUNS}, within the page"));
                    }
                    IndexKind::Runs(
                        (0..n)
                            .map(|i| RunExtent {
                                lba: u64_at(b, 72 + 16 * i),
                                records: u64_at(b, 80 + 16 * i),
                            })
                            .collect(),
                    )
                }
                k => return Err(format!("unknown index kind {k} (0: B+tree, 1: sorted runs)")),
            };
            let fanout = match u32_at(b, 52) {
                0 => DEFAULT_FANOUT,
                f => f,
            };
            BlockCommand::Configure(IndexConfig {
                id: index,
                base_lba: u64_at(b, 24),
                records: u64_at(b, 32),
                record_size: u32_at(b, 40),
                key_offset: u32_at(b, 44),
                key_size: u32_at(b, 48),
                sort_on_write,
                active_read,
                fanout,
                kind,
            })
        }
        2 => BlockCommand::Generate { index, chunk_records: u64_at(b, 56) },
        3 => BlockCommand::Drop { index },
        4 => BlockCommand::Flush,
        5 => BlockCommand::SetFlags { index, sort_on_write, active_read },
        6 => BlockCommand::Resize { index, records: u64_at(b, 32) },
        op => return Err(format!("unknown opcode {op} (1 configure .. 6 resize)")),
    })
}

/// The outcome of the last command block, as the status page reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastCommand {
    pub opcode: u32,
    pub ok: bool,
    pub message: String,
    /// After a generate: records done and in all.
    pub progress: (u64, u64),
}

/// The status page.
pub fn encode_status(status: &SelfSortStatus, last: &LastCommand, page_size: u32) -> Vec<u8> {
    let mut b = vec![0u8; page_size as usize];
    b[..8].copy_from_slice(STATUS_MAGIC);
    put_u32(&mut b, 8, VERSION);
    put_u32(&mut b, 12, last.opcode);
    let none_yet = last.opcode == 0 && last.message.is_empty();
    put_u32(&mut b, 16, (!last.ok && !none_yet) as u32);
    let fit = (b.len().saturating_sub(INDEXES_AT) / INDEX_BYTES).min(status.indexes.len());
    put_u32(&mut b, 20, fit as u32);
    put_u64(&mut b, 24, status.command_lba);
    put_u64(&mut b, 32, status.host_lbas);
    put_u64(&mut b, 40, last.progress.0);
    put_u64(&mut b, 48, last.progress.1);
    // A message cut at a character boundary.
    let mut m = last.message.as_str();
    while m.len() > MESSAGE_BYTES {
        let mut end = MESSAGE_BYTES;
        while !m.is_char_boundary(end) {
            end -= 1;
        }
        m = &m[..end];
    }
    b[MESSAGE_AT..MESSAGE_AT + m.len()].copy_from_slice(m.as_bytes());
    for (i, ix) in status.indexes.iter().take(fit).enumerate() {
        let at = INDEXES_AT + i * INDEX_BYTES;
        let c = &ix.config;
        put_u32(&mut b, at, c.id);
        put_u32(&mut b, at + 4, flags(c.sort_on_write, c.active_read) | ((!ix.complete) as u32) << 8);
        put_u64(&mut b, at + 8, c.base_lba);
        put_u64(&mut b, at + 16, c.records);
        put_u64(&mut b, at + 24, ix.indexed);
        put_u64(&mut b, at + 32, ix.generated);
        put_u64(&mut b, at + 40, ix.memory_bytes);
        put_u32(&mut b, at + 48, c.record_size);
        put_u32(&mut b, at + 52, c.key_offset);
        put_u32(&mut b, at + 56, c.key_size);
        put_u32(&mut b, at + 60, ix.height);
    }
    b
}

/// A status page as the host reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusPage {
    pub last: LastCommand,
    pub command_lba: u64,
    pub host_lbas: u64,
    /// Per index: (id, records, indexed, complete).
    pub indexes: Vec<(u32, u64, u64, bool)>,
}

/// Decodes a status page.
pub fn decode_status(b: &[u8]) -> Result<StatusPage, String> {
    if b.len() < INDEXES_AT || &b[..8] != STATUS_MAGIC {
        return Err("not a self-sort status page (bad magic)".into());
    }
    let n = u32_at(b, 20) as usize;
    let msg = &b[MESSAGE_AT..MESSAGE_AT + MESSAGE_BYTES];
    let end = msg.iter().position(|&c| c == 0).unwrap_or(MESSAGE_BYTES);
    let opcode = u32_at(b, 12);
    Ok(StatusPage {
        last: LastCommand {
            opcode,
            ok: u32_at(b, 16) == 0,
            message: String::from_utf8_lossy(&msg[..end]).into_owned(),
            progress: (u64_at(b, 40), u64_at(b, 48)),
        },
        command_lba: u64_at(b, 24),
        host_lbas: u64_at(b, 32),
        indexes: (0..n)
            .filter(|i| INDEXES_AT + (i + 1) * INDEX_BYTES <= b.len())
            .map(|i| {
                let at = INDEXES_AT + i * INDEX_BYTES;
                (u32_at(b, at), u64_at(b, at + 16), u64_at(b, at + 24), u32_at(b, at + 4) & 0x100 == 0)
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_survives_the_block() {
        let mut runs = IndexConfig::tree(3, 100, 16384, 0, 10);
        runs.kind =
            IndexKind::Runs(vec![RunExtent { lba: 7, records: 9 }, RunExtent { lba: 70, records: 1 }]);
        runs.sort_on_write = true;
        runs.records = 10;
        let cmds = [
            BlockCommand::Configure(IndexConfig::tree(1, 5, 100, 3, 10)),
            BlockCommand::Configure(runs),
            BlockCommand::Generate { index: 2, chunk_records: 1000 },
            BlockCommand::Drop { index: 4 },
            BlockCommand::Flush,
            BlockCommand::SetFlags { index: 1, sort_on_write: true, active_read: false },
            BlockCommand::Resize { index: 1, records: 1 << 40 },
        ];
        for c in cmds {
            assert_eq!(decode(&encode(&c, 4096).unwrap()).unwrap(), c);
        }
    }

    #[test]
    fn bad_blocks_are_named() {
        let good = encode(&BlockCommand::Flush, 512).unwrap();
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(decode(&bad).unwrap_err().contains("magic"));
        let mut bad = good.clone();
        bad[8] = 9;
        assert!(decode(&bad).unwrap_err().contains("version 9"));
        let mut bad = good.clone();
        bad[12] = 77;
        assert!(decode(&bad).unwrap_err().contains("opcode 77"));
        let mut bad = good;
        bad[20] = 0x10;
        assert!(decode(&bad).unwrap_err().contains("flags"));
        assert!(decode(&[0u8; 10]).is_err());
    }
}
