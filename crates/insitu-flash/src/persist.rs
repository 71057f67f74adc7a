//! On-disk metadata: the superblock, the checkpoint and the journal. All three are checksummed.
//!
//! - `superblock`: format version and geometry, written once at format time.
//! - `checkpoint`: the whole FTL + namespace state at some generation `g` (written to a temporary file,
//!   fsynced, then renamed over the old one).
//! - `journal`: records since the checkpoint of the same generation, each `len | crc32 | postcard payload`.
//!   Replay stops at the first record that is short or fails its checksum: that is the torn tail of a write
//!   cut off by a crash, and it is truncated away. A killed process cuts only the end, but a power cut
//!   during a sync may land that sync's pages in any order, leaving a bad record with good ones after
//!   it. So after every sync the journal notes how far it is durable (`Record::Durable`): a bad record
//!   that such a note after it says was durable is damage inside the journal, and the scan refuses,
//!   naming the offset, rather than drop committed records and let the next checkpoint erase the
//!   evidence; one that no later note covers belongs to the last, unfinished sync and is a torn tail.
//!   A journal whose generation differs from the checkpoint's was already folded into it and is ignored.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::error::{FlashError, Result};
use crate::geometry::{BlockId, Geometry, Lpn, Ppn};
use crate::namespace::ObjectMeta;
use crate::raw::BlockState;

/// 2: objects carry the transaction that made them; devices record the array's catalog generation.
/// 3: a page's spare-area record may cover its head alone ([`crate::raw::Oob::head`]). A device of format
/// 2 is read as it is and marked 3 when opened, so that a build that cannot read such records refuses it
/// by its version rather than find its pages unreadable.
pub const FORMAT_VERSION: u32 = 3;
/// The oldest format this build reads.
const OLDEST_FORMAT: u32 = 2;
/// The journal's own format: 3 notes after every sync how far it is durable (`Record::Durable`). A
/// journal of format 2 has no such notes: any bad record with valid ones after it is damage there.
pub const JOURNAL_VERSION: u32 = 3;
const SUPER_MAGIC: &[u8; 4] = b"INSB";
const CKPT_MAGIC: &[u8; 4] = b"INSC";
const JOURNAL_MAGIC: &[u8; 4] = b"INSJ";

/// Immutable facts about a device, fixed at format time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Superblock {
    pub version: u32,
    pub geometry: Geometry,
    /// Logical capacity requested at `init`, in bytes.
    pub capacity_bytes: u64,
}

/// One journaled change.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Record {
    /// Logical pages `lpn..lpn+count` were programmed at `ppn..ppn+count` (one block).
    Program {
        lpn: Lpn,
        ppn: Ppn,
        count: u32,
    },
    /// Garbage collection moved the listed logical pages to `ppn..` (one block).
    Relocate {
        ppn: Ppn,
        lpns: Vec<Lpn>,
    },
    Trim {
        lpn: Lpn,
        count: u64,
    },
    Erase {
        block: BlockId,
    },
    /// A write transaction started creating object `name`.
    Begin {
        txn: u64,
        name: String,
    },
    /// A write transaction reserved logical pages for a new object.
    Reserve {
        txn: u64,
        lpn: Lpn,
        count: u64,
    },
    /// The transaction's object is complete and visible. The commit point of object creation.
    Commit {
        txn: u64,
        object: ObjectMeta,
    },
    Abort {
        txn: u64,
    },
    Delete {
        name: String,
    },
    /// The array's catalog reached this generation.
    ArrayGeneration {
        generation: u64,
    },
    /// The journal's first `len` bytes were made durable (written after the sync that did it returned):
    /// evidence that a damaged record before `len` is damage, not a write cut off by a power cut.
    Durable {
        len: u64,
    },
}

/// The state a checkpoint holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CheckpointState {
    pub generation: u64,
    pub next_txn: u64,
    /// The array catalog's generation the device last recorded.
    pub array_generation: u64,
    pub blocks: Vec<(BlockId, BlockState)>,
    /// `(lpn, ppn, len)` runs.
    pub map: Vec<(Lpn, Ppn, u64)>,
    pub objects: Vec<ObjectMeta>,
}

fn frame(magic: &[u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 16);
    out.extend_from_slice(magic);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn unframe<'a>(magic: &[u8; 4], what: &'static str, path: &Path, bytes: &'a [u8]) -> Result<&'a [u8]> {
    let corrupt = |detail: &str| FlashError::Corrupt {
        what: what.into(),
        path: path.to_path_buf(),
        detail: detail.into(),
    };
    if bytes.len() < 20 || &bytes[0..4] != magic {
        return Err(corrupt("bad magic or truncated header"));
    }
    let version = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if !(OLDEST_FORMAT..=FORMAT_VERSION).contains(&version) {
        return Err(FlashError::Version {
            path: path.to_path_buf(),
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")) as usize;
    let crc = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    let payload = bytes.get(20..20usize.saturating_add(len)).ok_or_else(|| corrupt("truncated payload"))?;
    if crc32fast::hash(payload) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    Ok(payload)
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_stdvec(v).expect("serializing plain data to memory cannot fail")
}

fn decode<T: DeserializeOwned>(what: &'static str, path: &Path, b: &[u8]) -> Result<T> {
    postcard::from_bytes(b).map_err(|e| FlashError::Corrupt {
        what: what.into(),
        path: path.to_path_buf(),
        detail: format!("undecodable: {e}"),
    })
}

/// Writes `bytes` to `path` atomically: temporary file, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        // A half-written copy would hold on to the very space a full disk lacks.
        let _ = std::fs::remove_file(&tmp);
        return Err(FlashError::io(&tmp, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| FlashError::io(path, e))?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// `body` after a line `HEADER` + its CRC-32 in hex: a small text file (JSON) that a flipped byte cannot
/// turn into another valid one unnoticed. [`checked_body`] reads it back.
pub fn with_checksum(header: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!("{header}{:08x}\n", crc32fast::hash(body)).into_bytes();
    out.extend_from_slice(body);
    out
}

/// The body of a file [`with_checksum`] wrote with `header`, checked; a file without the header line
/// (written before there was one) is its own body. The error says what is wrong, for the caller to name
/// the file.
pub fn checked_body<'a>(header: &str, bytes: &'a [u8]) -> std::result::Result<&'a [u8], String> {
    let Some(rest) = bytes.strip_prefix(header.as_bytes()) else { return Ok(bytes) };
    let nl = rest.iter().position(|b| *b == b'\n').ok_or("no end to its checksum line")?;
    let crc = std::str::from_utf8(&rest[..nl])
        .ok()
        .and_then(|c| u32::from_str_radix(c, 16).ok())
        .ok_or("a checksum line that is not one")?;
    let body = &rest[nl + 1..];
    if crc32fast::hash(body) != crc {
        return Err("checksum mismatch (the file changed after it was written)".into());
    }
    Ok(body)
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| FlashError::io(path, e))
}

/// The superblock and the checkpoint are each kept twice (A and B): a torn or flipped copy is survived
/// with the other. Copies are written one after the other, each atomically.
const SUPERBLOCK_COPIES: [&str; 2] = ["superblock", "superblock.b"];
const CHECKPOINT_COPIES: [&str; 2] = ["checkpoint", "checkpoint.b"];

/// What reading a pair of copies found: the state, and the copies that were damaged or missing.
#[derive(Debug)]
pub struct Copies<T> {
    pub state: T,
    pub damaged: Vec<String>,
}

/// Reads both copies of a pair; the newest valid one wins (`newer` says which of two is). Fails with the
/// first copy's error when neither is valid.
fn read_copies<T: DeserializeOwned>(
    dir: &Path,
    names: [&str; 2],
    magic: &[u8; 4],
    what: &'static str,
    newer: impl Fn(&T, &T) -> bool,
) -> Result<Copies<T>> {
    let mut valid: Vec<(&str, T)> = Vec::new();
    let mut errors = Vec::new();
    for name in names {
        let path = dir.join(name);
        match read_file(&path).and_then(|b| decode(what, &path, unframe(magic, what, &path, &b)?)) {
            Ok(v) => valid.push((name, v)),
            Err(e) => errors.push((name.to_string(), e)),
        }
    }
    let Some(best) = (0..valid.len()).reduce(|b, i| if newer(&valid[i].1, &valid[b].1) { i } else { b })
    else {
        return Err(errors.into_iter().next().expect("two copies were tried").1);
    };
    let mut damaged: Vec<String> = errors.into_iter().map(|(n, e)| format!("{n}: {e}")).collect();
    // A valid copy older than the chosen one (a crash between the two writes) is mended too: were the
    // newer one damaged later, it must not stand in with old state.
    for (i, (name, v)) in valid.iter().enumerate() {
        if i != best && newer(&valid[best].1, v) {
            damaged.push(format!("{name}: an older {what}"));
        }
    }
    let state = valid.swap_remove(best).1;
    Ok(Copies { state, damaged })
}

pub fn write_superblock(dir: &Path, sb: &Superblock) -> Result<()> {
    let bytes = frame(SUPER_MAGIC, &encode(sb));
    for name in SUPERBLOCK_COPIES {
        write_atomic(&dir.join(name), &bytes)?;
    }
    Ok(())
}

/// A copy of an older format than the other is the older one (a crash between the two writes of an
/// upgrade), mended with the newer.
pub fn read_superblock_copies(dir: &Path) -> Result<Copies<Superblock>> {
    read_copies(dir, SUPERBLOCK_COPIES, SUPER_MAGIC, "superblock", |a: &Superblock, b| a.version > b.version)
}

pub fn write_checkpoint(dir: &Path, st: &CheckpointState) -> Result<()> {
    let bytes = frame(CKPT_MAGIC, &encode(st));
    for name in CHECKPOINT_COPIES {
        write_atomic(&dir.join(name), &bytes)?;
    }
    Ok(())
}

/// The newest valid checkpoint copy. A crash between the two writes leaves one copy a generation
/// behind; its journal was already folded into the newer one, so the newer one is complete.
pub fn read_checkpoint(dir: &Path) -> Result<CheckpointState> {
    Ok(read_checkpoint_copies(dir)?.state)
}

pub fn read_checkpoint_copies(dir: &Path) -> Result<Copies<CheckpointState>> {
    read_copies(dir, CHECKPOINT_COPIES, CKPT_MAGIC, "checkpoint", |a: &CheckpointState, b| {
        a.generation > b.generation
    })
}

/// What a journal replay found.
#[derive(Debug, Default, Clone)]
pub struct JournalScan {
    pub records: Vec<Record>,
    /// Bytes of the valid prefix (header included).
    pub valid_len: u64,
    /// Bytes after the valid prefix: a torn tail left by a crash.
    pub torn_bytes: u64,
    /// The journal belongs to an older generation and was ignored.
    pub stale: bool,
    /// Its format (see [`JOURNAL_VERSION`]).
    pub version: u32,
}

/// The records of a journal up to the first that is short, fails its checksum or does not decode, and
/// where that one starts.
fn valid_prefix(bytes: &[u8]) -> (Vec<Record>, usize) {
    valid_prefix_from(bytes, JOURNAL_HEADER as usize)
}

/// [`valid_prefix`] from byte `pos` on.
fn valid_prefix_from(bytes: &[u8], mut pos: usize) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    while pos + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().expect("4 bytes"));
        let Some(payload) = bytes.get(pos + 8..pos + 8 + len) else { break };
        if crc32fast::hash(payload) != crc {
            break;
        }
        let Ok(rec) = postcard::from_bytes::<Record>(payload) else { break };
        records.push(rec);
        pos += 8 + len;
    }
    (records, pos)
}

/// Where a whole, valid record starts after the one at `bad` that replay stopped at, if anywhere:
/// first where `bad`'s length field says, then at every byte (its length field may be the damage).
fn valid_record_after(bytes: &[u8], bad: usize) -> Option<usize> {
    let valid_at = |at: usize| -> bool {
        let Some(head) = bytes.get(at..at + 8) else { return false };
        let len = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
        // Empty payloads are not records (and zeros, as a file system may leave after a crash, match them).
        len > 0
            && bytes
                .get(at + 8..at + 8 + len)
                .is_some_and(|p| crc32fast::hash(p) == crc && postcard::from_bytes::<Record>(p).is_ok())
    };
    let declared = bytes
        .get(bad..bad + 4)
        .map(|h| bad + 8 + u32::from_le_bytes(h.try_into().expect("4 bytes")) as usize);
    if let Some(next) = declared.filter(|&n| n < bytes.len() && valid_at(n)) {
        return Some(next);
    }
    (bad + 1..bytes.len().saturating_sub(8)).find(|&at| valid_at(at))
}

/// Whether a valid record after the bad one at `bad` (the first at `next`) says the journal was durable
/// past `bad`: then `bad` is damage, not a sync cut off by a power cut. Every valid record after `bad` is
/// looked at (more damage may come between them, as pages of an unfinished sync land in any order).
fn durable_past(bytes: &[u8], bad: usize, next: usize) -> bool {
    let mut at = Some(next);
    while let Some(from) = at {
        let (records, end) = valid_prefix_from(bytes, from);
        if records.iter().any(|r| matches!(r, Record::Durable { len } if *len > bad as u64)) {
            return true;
        }
        at = valid_record_after(bytes, end);
    }
    false
}

/// Where the valid record after a damaged one at `bad` starts, when that damage is damage inside the
/// journal (see [`durable_past`]; in a journal of format 2, which has no notes, any valid record after).
fn damage(bytes: &[u8], bad: usize, version: u32) -> Option<usize> {
    valid_record_after(bytes, bad).filter(|&next| version < 3 || durable_past(bytes, bad, next))
}

/// The append side of the journal.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    out: BufWriter<File>,
    len: u64,
    /// Bytes the last `Record::Durable` covered.
    marked: u64,
    /// Whether its format takes `Record::Durable` notes (a journal of format 2 kept going gets none).
    notes: bool,
}

const JOURNAL_HEADER: u64 = 16;

/// The name of the copy of a whole journal kept when it was cut at its damage, before the offset.
const DAMAGED_JOURNAL_PREFIX: &str = "journal.damaged-at-";

impl Journal {
    /// Starts an empty journal for `generation` (atomically replacing any old one).
    pub fn create(dir: &Path, generation: u64) -> Result<Journal> {
        let path = dir.join("journal");
        let mut header = Vec::with_capacity(16);
        header.extend_from_slice(JOURNAL_MAGIC);
        header.extend_from_slice(&JOURNAL_VERSION.to_le_bytes());
        header.extend_from_slice(&generation.to_le_bytes());
        write_atomic(&path, &header)?;
        Self::open_append(&path, JOURNAL_HEADER, JOURNAL_VERSION)
    }

    fn open_append(path: &Path, valid_len: u64, version: u32) -> Result<Journal> {
        let f = OpenOptions::new().write(true).open(path).map_err(|e| FlashError::io(path, e))?;
        f.set_len(valid_len).map_err(|e| FlashError::io(path, e))?;
        let mut out = BufWriter::with_capacity(1 << 16, f);
        std::io::Seek::seek(&mut out, std::io::SeekFrom::Start(valid_len))
            .map_err(|e| FlashError::io(path, e))?;
        Ok(Journal { path: path.to_path_buf(), out, len: valid_len, marked: valid_len, notes: version >= 3 })
    }

    /// Reads the journal of `dir` for `generation`.
    pub fn scan(dir: &Path, generation: u64) -> Result<JournalScan> {
        let path = dir.join("journal");
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes).map_err(|e| FlashError::io(&path, e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(JournalScan { stale: true, ..Default::default() })
            }
            Err(e) => return Err(FlashError::io(&path, e)),
        }
        if bytes.len() < JOURNAL_HEADER as usize || &bytes[0..4] != JOURNAL_MAGIC {
            return Err(FlashError::Corrupt { what: "journal".into(), path, detail: "bad header".into() });
        }
        let version = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
        if !(2..=JOURNAL_VERSION).contains(&version) {
            return Err(FlashError::Version { path, found: version, expected: JOURNAL_VERSION });
        }
        let gen = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
        if gen != generation {
            return Ok(JournalScan { stale: true, ..Default::default() });
        }
        let (records, pos) = valid_prefix(&bytes);
        if let Some(next) = damage(&bytes, pos, version) {
            return Err(FlashError::Corrupt {
                what: "journal".into(),
                path,
                detail: format!(
                    "the record at byte {pos} is damaged and a valid record follows at byte {next}: damage \
                     inside the journal, not a write cut off at its end. The device was not opened and nothing \
                     was changed; `insitu fsck --repair` cuts the journal there (the records after it are \
                     lost) and keeps the whole journal beside it"
                ),
            });
        }
        Ok(JournalScan {
            records,
            valid_len: pos as u64,
            torn_bytes: (bytes.len() - pos) as u64,
            stale: false,
            version,
        })
    }

    /// Whether a journal of `dir` was ever cut at its damage ([`Journal::cut_at_damage`]): its whole copy
    /// is kept beside it.
    pub fn was_cut(dir: &Path) -> bool {
        std::fs::read_dir(dir).is_ok_and(|d| {
            d.flatten().any(|e| e.file_name().to_string_lossy().starts_with(DAMAGED_JOURNAL_PREFIX))
        })
    }

    /// With the user's consent (`fsck --repair`): cuts a journal damaged inside (see [`Journal::scan`])
    /// at its damaged record, dropping the records after it, after keeping the whole journal beside it
    /// as `journal.damaged-at-OFFSET`. Returns the offset and that copy; `None` if there was no such damage.
    pub fn cut_at_damage(dir: &Path, generation: u64) -> Result<Option<(u64, PathBuf)>> {
        let path = dir.join("journal");
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(FlashError::io(&path, e)),
        };
        if bytes.len() < JOURNAL_HEADER as usize
            || &bytes[0..4] != JOURNAL_MAGIC
            || u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")) != generation
        {
            return Ok(None);
        }
        let version = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
        let (_, pos) = valid_prefix(&bytes);
        if damage(&bytes, pos, version).is_none() {
            return Ok(None);
        }
        let kept = dir.join(format!("{DAMAGED_JOURNAL_PREFIX}{pos}"));
        write_atomic(&kept, &bytes)?;
        let f = OpenOptions::new().write(true).open(&path).map_err(|e| FlashError::io(&path, e))?;
        f.set_len(pos as u64).map_err(|e| FlashError::io(&path, e))?;
        f.sync_all().map_err(|e| FlashError::io(&path, e))?;
        Ok(Some((pos as u64, kept)))
    }

    /// Reopens for appending after a scan (of a journal of format `version`), cutting off the torn tail.
    pub fn reopen(dir: &Path, valid_len: u64, version: u32) -> Result<Journal> {
        Self::open_append(&dir.join("journal"), valid_len, version)
    }

    /// Appends one record (buffered until [`Journal::sync`]).
    pub fn append(&mut self, rec: &Record) -> Result<()> {
        let payload = encode(rec);
        let mut head = [0u8; 8];
        head[0..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        head[4..8].copy_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        self.out.write_all(&head).map_err(|e| FlashError::io(&self.path, e))?;
        self.out.write_all(&payload).map_err(|e| FlashError::io(&self.path, e))?;
        self.len += 8 + payload.len() as u64;
        Ok(())
    }

    /// Flushes buffered records and makes them durable, then notes so in the journal (handed to the OS,
    /// made durable by the next sync): the evidence a scan after a power cut needs (see the module).
    pub fn sync(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| FlashError::io(&self.path, e))?;
        self.out.get_ref().sync_data().map_err(|e| FlashError::io(&self.path, e))?;
        if self.notes && self.len > self.marked {
            self.append(&Record::Durable { len: self.len })?;
            self.marked = self.len;
            self.out.flush().map_err(|e| FlashError::io(&self.path, e))?;
        }
        Ok(())
    }

    /// Hands buffered records to the OS without waiting for the disk (enough to survive a killed process).
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().map_err(|e| FlashError::io(&self.path, e))
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len <= JOURNAL_HEADER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_tail_is_cut_and_earlier_records_survive() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path(), 3).unwrap();
        j.append(&Record::Trim { lpn: 1, count: 2 }).unwrap();
        j.append(&Record::Erase { block: 9 }).unwrap();
        j.flush().unwrap();
        let full = std::fs::metadata(dir.path().join("journal")).unwrap().len();
        // Cut the last record in half, as a crash in the middle of a write would.
        let f = OpenOptions::new().write(true).open(dir.path().join("journal")).unwrap();
        f.set_len(full - 2).unwrap();
        let scan = Journal::scan(dir.path(), 3).unwrap();
        assert_eq!(scan.records, vec![Record::Trim { lpn: 1, count: 2 }]);
        assert!(scan.torn_bytes > 0);
        assert!(Journal::scan(dir.path(), 4).unwrap().stale);
    }

    /// A journal of `n` records, synced (so a `Durable` note follows them); returns it and where each
    /// record starts, the note's start last.
    fn journal_of(dir: &Path, n: u64) -> (Vec<u8>, Vec<usize>) {
        let mut j = Journal::create(dir, 1).unwrap();
        let mut starts = Vec::new();
        for i in 0..n {
            starts.push(j.len() as usize);
            j.append(&Record::Trim { lpn: i, count: i + 1 }).unwrap();
        }
        starts.push(j.len() as usize);
        j.sync().unwrap();
        (std::fs::read(dir.join("journal")).unwrap(), starts)
    }

    fn trims(records: &[Record]) -> usize {
        records.iter().filter(|r| matches!(r, Record::Trim { .. })).count()
    }

    #[test]
    fn a_device_of_format_2_is_read_and_marked_3_and_a_later_format_is_refused() {
        use crate::raw::{Oob, OOB_BYTES};
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let geo = Geometry {
            channels: 2,
            chips_per_channel: 1,
            blocks_per_chip: 2,
            pages_per_block: 8,
            page_size: 4096,
        };
        let mut flash = crate::Flash::format(dir.path(), geo, 1 << 20).unwrap();
        // A page and a fifth: the second page is mostly zeros, so its record covers its head alone.
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8 | 1).collect();
        let txn = flash.create_object("x", "blob", Default::default(), Some(5000)).unwrap();
        flash.append(txn, &data).unwrap();
        flash.commit(txn).unwrap();
        flash.close().unwrap();
        // Made as format 2 made it: every record over its whole page, the metadata's frames marked 2.
        let img = std::fs::read(dir.path().join("nand.img")).unwrap();
        let oob =
            std::fs::OpenOptions::new().read(true).write(true).open(dir.path().join("nand.oob")).unwrap();
        let mut heads = 0;
        for p in 0..geo.total_pages() as usize {
            let mut area = [0u8; OOB_BYTES];
            oob.read_exact_at(&mut area, (p * OOB_BYTES) as u64).unwrap();
            let Some(rec) = Oob::decode(&area) else { continue };
            heads += usize::from(rec.head_len(4096) < 4096);
            let page = &img[p * 4096..(p + 1) * 4096];
            Oob { crc: crc32fast::hash(page), head: None, ..rec }.encode(&mut area);
            oob.write_all_at(&area, (p * OOB_BYTES) as u64).unwrap();
        }
        assert!(heads > 0, "a page was recorded by its head");
        let sb = read_superblock_copies(dir.path()).unwrap().state;
        write_superblock(dir.path(), &Superblock { version: 2, ..sb.clone() }).unwrap();
        let mark = |name: &str, version: u32| {
            let p = dir.path().join(name);
            let mut b = std::fs::read(&p).unwrap();
            b[4..8].copy_from_slice(&version.to_le_bytes());
            std::fs::write(&p, b).unwrap();
        };
        for name in ["superblock", "superblock.b", "checkpoint", "checkpoint.b"] {
            mark(name, 2);
        }
        // Read as it is, and marked 3 before anything else.
        let flash = crate::Flash::open(dir.path()).unwrap();
        let mut back = vec![0u8; 5000];
        flash.read("x", 0, &mut back).unwrap();
        assert_eq!(back, data);
        assert!(flash.recovery().mended_copies.is_empty());
        flash.close().unwrap();
        assert_eq!(read_superblock_copies(dir.path()).unwrap().state.version, 3);
        for name in ["superblock", "superblock.b"] {
            let b = std::fs::read(dir.path().join(name)).unwrap();
            assert_eq!(b[4..8], 3u32.to_le_bytes(), "{name}");
        }
        // A crash between the two writes of the upgrade: the copy left at 2 is mended, not kept.
        let upgraded = std::fs::read(dir.path().join("superblock")).unwrap();
        write_superblock(dir.path(), &Superblock { version: 2, ..sb }).unwrap();
        mark("superblock.b", 2);
        std::fs::write(dir.path().join("superblock"), &upgraded).unwrap();
        let copies = read_superblock_copies(dir.path()).unwrap();
        assert_eq!(std::fs::read(dir.path().join("superblock")).unwrap()[4..8], 3u32.to_le_bytes());
        assert_eq!((copies.state.version, copies.damaged.len()), (3, 1), "{:?}", copies.damaged);
        let flash = crate::Flash::open(dir.path()).unwrap();
        assert_eq!(flash.recovery().mended_copies.len(), 1);
        flash.close().unwrap();
        for name in ["superblock", "superblock.b"] {
            let b = std::fs::read(dir.path().join(name)).unwrap();
            assert_eq!(b[4..8], 3u32.to_le_bytes(), "{name} after the crash");
        }
        // A format past this build's is refused by its number, not read.
        for name in ["superblock", "superblock.b"] {
            mark(name, 4);
        }
        let err = crate::Flash::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("format version 4") && err.contains("reads 3"), "{err}");
    }

    #[test]
    fn a_journal_of_format_2_without_notes_keeps_refusing_damage_inside() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal");
        let mut j = Journal::create(dir.path(), 1).unwrap();
        let mut starts = Vec::new();
        for i in 0..4 {
            starts.push(j.len() as usize);
            j.append(&Record::Trim { lpn: i, count: 1 }).unwrap();
        }
        j.flush().unwrap();
        let mut b = std::fs::read(&p).unwrap();
        b[4..8].copy_from_slice(&2u32.to_le_bytes());
        std::fs::write(&p, &b).unwrap();
        assert_eq!(trims(&Journal::scan(dir.path(), 1).unwrap().records), 4, "format 2 still reads");
        b[starts[1] + 9] ^= 0x10;
        std::fs::write(&p, &b).unwrap();
        let err = Journal::scan(dir.path(), 1).unwrap_err().to_string();
        assert!(err.contains("is damaged and a valid record follows"), "{err}");
        assert!(Journal::cut_at_damage(dir.path(), 1).unwrap().is_some(), "repair cuts it");
        b[4..8].copy_from_slice(&4u32.to_le_bytes());
        std::fs::write(&p, &b).unwrap();
        assert!(Journal::scan(dir.path(), 1).unwrap_err().to_string().contains("version"));
    }

    #[test]
    fn a_power_cut_that_lands_an_unfinished_sync_out_of_order_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal");
        let mut j = Journal::create(dir.path(), 1).unwrap();
        for i in 0..3 {
            j.append(&Record::Trim { lpn: i, count: 1 }).unwrap();
        }
        j.sync().unwrap();
        // The next sync's records reach the file, but a power cut lands one of its pages as zeros.
        let second = j.len() as usize;
        for i in 3..6 {
            j.append(&Record::Trim { lpn: i, count: 1 }).unwrap();
        }
        j.flush().unwrap();
        let mut b = std::fs::read(&p).unwrap();
        b[second + 4] ^= 0xff;
        std::fs::write(&p, &b).unwrap();
        let scan = Journal::scan(dir.path(), 1).unwrap();
        assert_eq!((trims(&scan.records), scan.valid_len), (3, second as u64), "the unfinished sync is cut");
        assert_eq!(Journal::cut_at_damage(dir.path(), 1).unwrap(), None, "no damage to cut");
        // Once a later sync noted the journal durable past the same record, it is damage.
        let mut j = Journal::create(dir.path(), 2).unwrap();
        for i in 0..6 {
            j.append(&Record::Trim { lpn: i, count: 1 }).unwrap();
            if i == 2 || i == 5 {
                j.sync().unwrap();
            }
        }
        let mut b = std::fs::read(&p).unwrap();
        b[second + 4] ^= 0xff;
        std::fs::write(&p, &b).unwrap();
        let err = Journal::scan(dir.path(), 2).unwrap_err().to_string();
        assert!(err.contains("is damaged and a valid record follows"), "{err}");
    }

    #[test]
    fn damage_inside_the_journal_is_refused_by_offset_and_a_torn_tail_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal");
        let (clean, starts) = journal_of(dir.path(), 5);
        // A flipped bit in the payload, the checksum or the length of the third record, valid ones after.
        for at in [starts[2] + 9, starts[2] + 5, starts[2]] {
            let mut b = clean.clone();
            b[at] ^= 0x10;
            std::fs::write(&p, &b).unwrap();
            let err = Journal::scan(dir.path(), 1).unwrap_err().to_string();
            let want = format!("the record at byte {} is damaged and a valid record follows", starts[2]);
            assert!(err.contains(&want) && err.contains("journal"), "flip at {at}: {err}");
            assert_eq!(std::fs::read(&p).unwrap(), b, "the scan changes nothing");
        }
        // The last record cut short, or the tail zero-filled as after a power cut: a torn tail.
        std::fs::write(&p, &clean[..starts[5] - 3]).unwrap();
        let scan = Journal::scan(dir.path(), 1).unwrap();
        assert_eq!((trims(&scan.records), scan.valid_len), (4, starts[4] as u64));
        let mut zeros = clean.clone();
        zeros.extend_from_slice(&[0u8; 4096]);
        std::fs::write(&p, &zeros).unwrap();
        let scan = Journal::scan(dir.path(), 1).unwrap();
        assert_eq!((trims(&scan.records), scan.torn_bytes), (5, 4096));
    }

    #[test]
    fn corrupted_checkpoint_is_named() {
        let dir = tempfile::tempdir().unwrap();
        write_checkpoint(dir.path(), &CheckpointState { generation: 2, ..Default::default() }).unwrap();
        for name in CHECKPOINT_COPIES {
            let p = dir.path().join(name);
            let mut b = std::fs::read(&p).unwrap();
            let last = b.len() - 1;
            b[last] ^= 0xFF;
            std::fs::write(&p, &b).unwrap();
            if name == "checkpoint" {
                // One copy damaged: the other stands in, and says which one to mend.
                let c = read_checkpoint_copies(dir.path()).unwrap();
                assert_eq!((c.state.generation, c.damaged.len()), (2, 1));
            }
        }
        let err = read_checkpoint(dir.path()).unwrap_err().to_string();
        assert!(err.contains("corrupted checkpoint") && err.contains("checksum"), "{err}");
    }
}
