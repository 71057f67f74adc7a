//! Host-side metadata of an array: its configuration and the catalog of objects. Both are small JSON files
//! behind a header line (format version and checksum), replaced atomically. The catalog is the commit point
//! of multi-device writes: an object exists once its entry is in the catalog, and device parts without an
//! entry are leftovers of an interrupted write, removed at the next open.

use std::collections::BTreeMap;
use std::path::Path;

use insitu_device::{Profile, StripeLayout};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::error::{HostError, Result};
use crate::intersect::info::ListInfo;
use crate::psacs::info::ShuffleInfo;
use crate::table::info::TableInfo;

/// Version of `array.json` and `catalog.json`. 2: catalog entries typed by kind.
pub const ARRAY_FORMAT: u32 = 2;

/// How the array was created.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArrayConfig {
    pub format: u32,
    pub devices: u32,
    pub capacity_bytes: u64,
    /// Bytes per stripe when objects are spread over all devices.
    pub stripe_unit: u64,
    pub profile: Profile,
    /// An appliance's storage network between its devices (BlueDBM: `init --nodes N --topology T`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<insitu_device::network::Topology>,
}

/// What kind of object an entry is, with what only that kind has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "info", rename_all = "kebab-case")]
pub enum EntryKind {
    /// Plain bytes, striped or on one device.
    Blob,
    /// A table in NASCENT's hybrid layout.
    Table(TableInfo),
    /// A shuffle output (PSACS).
    Shuffle(ShuffleInfo),
    /// A sorted ID list (list intersection).
    List(ListInfo),
    /// An inverted index's term table (JSON bytes on one device).
    Index,
}

impl EntryKind {
    pub fn name(&self) -> &'static str {
        match self {
            EntryKind::Blob => "blob",
            EntryKind::Table(_) => "table",
            EntryKind::Shuffle(_) => "shuffle",
            EntryKind::List(_) => "list",
            EntryKind::Index => "index",
        }
    }

    /// Whether the object is bytes stored under its own name (readable with `get`).
    pub fn is_bytes(&self) -> bool {
        matches!(self, EntryKind::Blob | EntryKind::List(_) | EntryKind::Index)
    }
}

/// One object of the array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectEntry {
    pub name: String,
    pub size: u64,
    pub stripe_unit: u64,
    /// The devices holding its parts, in stripe order (part `i` is on `devices[i]`).
    pub devices: Vec<u32>,
    #[serde(flatten)]
    pub kind: EntryKind,
    /// Per part (as `devices`), the write transaction that made each of its device objects (as
    /// [`ObjectEntry::device_objects`]), recorded when the entry is committed. It ties the entry to the
    /// very parts it was made with: a part replaced or rolled back under the catalog is found at open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commits: Vec<Vec<u64>>,
}

impl ObjectEntry {
    /// Names of the device objects that make up part `i` (a blob part is one object named like the
    /// entry; a table part is several, `NAME#key`, `NAME#rows`, ...).
    pub fn device_objects(&self, i: usize) -> Vec<String> {
        match &self.kind {
            EntryKind::Table(t) => t.parts[i].objects(&self.name),
            EntryKind::Shuffle(_) => vec![format!("{}#data", self.name), format!("{}#index", self.name)],
            EntryKind::Blob | EntryKind::List(_) | EntryKind::Index => vec![self.name.clone()],
        }
    }

    /// The layout of the part on `devices[i]`.
    pub fn layout(&self, i: usize) -> StripeLayout {
        if self.devices.len() == 1 {
            StripeLayout::single(self.size)
        } else {
            StripeLayout {
                unit: self.stripe_unit,
                index: i as u32,
                count: self.devices.len() as u32,
                total_size: self.size,
            }
        }
    }

    /// The object's bytes as pieces in global order: `(part index, offset in the part, global offset,
    /// len)`, each at most `max_piece` bytes and within one stripe.
    pub fn pieces(&self, max_piece: u64) -> Vec<(usize, u64, u64, u64)> {
        // Entries whose objects are not striped may carry a stripe unit of 0; never make empty pieces.
        let max_piece = max_piece.max(1);
        let n = self.devices.len();
        let mut out = Vec::new();
        let mut g = 0u64;
        while g < self.size {
            let (part, local, room) = if n == 1 {
                (0, g, self.size - g)
            } else {
                let s = g / self.stripe_unit;
                let within = g % self.stripe_unit;
                let local = (s / n as u64) * self.stripe_unit + within;
                (s as usize % n, local, self.stripe_unit - within)
            };
            let len = room.min(max_piece).min(self.size - g);
            out.push((part, local, g, len));
            g += len;
        }
        out
    }
}

/// What a part says of the object it belongs to, on its first device object (a table part's `#rows`, a
/// shuffle part's `#data`): the description the catalog keeps (a table's parts left out: each part's
/// own objects say how it is stored), which part of how many it is, on which devices the others are,
/// and which write made it (`write`: the catalog's generation when the write began, so parts of two
/// writes of one name are never taken for one object). With it `fsck --repair` lists the object again
/// from its parts when the catalog lost it (`Array::restore_quarantined`).
pub(crate) fn part_attrs(
    kind: &EntryKind,
    index: usize,
    devices: &[u32],
    write: u64,
) -> BTreeMap<String, String> {
    let mut attrs = BTreeMap::new();
    let (key, head) = match kind {
        EntryKind::Table(t) => {
            ("table", serde_json::to_string(&TableInfo { parts: Vec::new(), ..t.clone() }))
        }
        EntryKind::Shuffle(s) => ("shuffle", serde_json::to_string(s)),
        _ => return attrs,
    };
    attrs.insert(key.to_string(), head.expect("catalog entries serialize"));
    attrs.insert("part".to_string(), format!("{index}/{}", devices.len()));
    attrs.insert("devices".to_string(), serde_json::to_string(devices).expect("a list serializes"));
    attrs.insert("write".to_string(), write.to_string());
    attrs
}

/// All objects of the array, by name, and what ties this catalog to the devices' state.
///
/// Each write of the catalog is a new `generation`, which every device then records; with it the
/// catalog keeps each device's next transaction id. At open, a device that recorded a newer generation
/// means this catalog is an older copy; a device whose next transaction id is below the recorded one is
/// an older copy of that device. A part no entry lists is removed only when its story is known: made
/// by a write that never reached the catalog (its transaction is not below the recorded id) or left by
/// a removal that was cut off (`removing`). Any other is kept in `quarantine`, never deleted unasked.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Catalog {
    pub objects: BTreeMap<String, ObjectEntry>,
    #[serde(default)]
    pub generation: u64,
    /// Per device: its next transaction id when this catalog was written.
    #[serde(default)]
    pub next_txns: Vec<u64>,
    /// Parts whose entry this write removed; they may still be on their devices if the removal was cut off.
    #[serde(default)]
    pub removing: Vec<(u32, String)>,
    /// Parts on the devices that no entry lists and no interrupted write explains, kept for `fsck --repair`.
    #[serde(default)]
    pub quarantine: Vec<QuarantinedPart>,
    /// Started empty by `fsck --repair` because no copy could be read: the next open keeps every part it
    /// finds in quarantine (none is taken for a write cut off), whatever the devices' generations.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebuilt: bool,
}

/// A part kept because the catalog does not know it and nothing says it may go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantinedPart {
    pub device: u32,
    pub name: String,
    pub kind: String,
    pub size: u64,
    /// Why it was kept.
    pub why: String,
}

impl QuarantinedPart {
    /// Whether this part belongs to object `name` (its own name, or a table part `name#...`).
    pub fn belongs_to(&self, name: &str) -> bool {
        self.name == name || self.name.strip_prefix(name).is_some_and(|r| r.starts_with('#'))
    }
}

/// The second copy of a metadata file (`catalog.json` -> `catalog.b.json`): what the array is read from
/// when the first is damaged or gone on the host's disk (the devices keep their superblock twice too).
pub fn second_copy(path: &Path) -> std::path::PathBuf {
    path.with_extension("b.json")
}

/// Writes `v` to `path` (atomically), then its second copy. The first copy is what commits a change: a
/// second copy that cannot be written is left as it was (one change behind), and the change stands.
fn save_checked<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    let body = serde_json::to_vec_pretty(v).expect("plain data serializes");
    let mut out = format!("insitu v{ARRAY_FORMAT} crc32={:08x}\n", crc32fast::hash(&body)).into_bytes();
    out.extend_from_slice(&body);
    insitu_device::write_atomic(path, &out)?;
    let _ = insitu_device::write_atomic(&second_copy(path), &out);
    Ok(())
}

/// Mends the first copy `path`, which could not be read (`why`), from its [`second_copy`] (read and
/// checked already); the damaged file is kept beside it as `NAME.damaged`. The caller holds the array's
/// lock. Says what it did.
pub(crate) fn restore_first_copy(path: &Path, why: &str) -> Result<String> {
    let name =
        path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let kept = path.with_file_name(format!("{name}.damaged"));
    let kept_note = if path.exists() {
        std::fs::rename(path, &kept).map_err(|e| HostError::io(path, e))?;
        format!("; the damaged file is kept as {}", kept.display())
    } else {
        String::new()
    };
    let copy = second_copy(path);
    let bytes = std::fs::read(&copy).map_err(|e| HostError::io(&copy, e))?;
    insitu_device::write_atomic(path, &bytes)?;
    Ok(format!(
        "{name} could not be read ({why}): restored from its second copy, {}{kept_note}",
        copy.display()
    ))
}

/// Whether a metadata file could not be read because it is damaged or gone (not for a permission or an
/// I/O error, which say nothing of its content).
pub(crate) fn damaged_or_gone(e: &HostError) -> bool {
    match e {
        HostError::Corrupt { .. } => true,
        HostError::Io { error, .. } => error.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

/// Reads `path`, or its [`second_copy`] when `path` is damaged or gone; with the copy, also why the
/// first could not be read. The first copy's error when neither can be read.
fn load_either<T: DeserializeOwned>(path: &Path, what: &'static str) -> Result<(T, Option<String>)> {
    match load_checked(path, what) {
        Ok(v) => Ok((v, None)),
        // Only a first copy that is damaged or gone is replaced by the second: any other error (a
        // permission, an I/O error) is the first copy's, which may be the newer.
        Err(first) if !damaged_or_gone(&first) => Err(first),
        Err(first) => match load_checked(&second_copy(path), what) {
            Ok(v) => Ok((v, Some(first.to_string()))),
            Err(_) if !second_copy(path).exists() => Err(first),
            Err(second) => {
                let why = |e: HostError| match e {
                    HostError::Corrupt { detail, .. } => detail,
                    e => e.to_string(),
                };
                let copy = second_copy(path);
                Err(HostError::Corrupt {
                    what,
                    path: path.to_path_buf(),
                    detail: format!(
                        "{}; its second copy {} too: {}",
                        why(first),
                        copy.display(),
                        why(second)
                    ),
                })
            }
        },
    }
}

fn load_checked<T: DeserializeOwned>(path: &Path, what: &'static str) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| HostError::io(path, e))?;
    let corrupt = |detail: String| HostError::Corrupt { what, path: path.to_path_buf(), detail };
    let nl = bytes.iter().position(|b| *b == b'\n').ok_or_else(|| corrupt("no header line".into()))?;
    let header = std::str::from_utf8(&bytes[..nl]).map_err(|_| corrupt("unreadable header".into()))?;
    let body = &bytes[nl + 1..];
    let (version, crc) = header
        .strip_prefix("insitu v")
        .and_then(|h| h.split_once(" crc32="))
        .and_then(|(v, c)| Some((v.parse::<u32>().ok()?, u32::from_str_radix(c, 16).ok()?)))
        .ok_or_else(|| corrupt(format!("bad header {header:?}")))?;
    if version != ARRAY_FORMAT {
        return Err(corrupt(format!(
            "written in array format {version}, this build reads format {ARRAY_FORMAT} (re-create the array \
             with `insitu init` and load its data again)"
        )));
    }
    if crc32fast::hash(body) != crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    serde_json::from_slice(body).map_err(|e| corrupt(format!("undecodable: {e}")))
}

impl ArrayConfig {
    /// A new array's configuration; `capacity_bytes` per device, the profile's when not given.
    pub fn new(devices: u32, profile: Profile, capacity_bytes: Option<u64>, stripe_unit: u64) -> ArrayConfig {
        let capacity_bytes = capacity_bytes.unwrap_or(profile.default_capacity_bytes);
        ArrayConfig { format: ARRAY_FORMAT, devices, capacity_bytes, stripe_unit, profile, topology: None }
    }

    pub fn save(&self, dir: &Path) -> Result<()> {
        save_checked(&dir.join("array.json"), self)
    }

    /// The array's configuration, from `array.json` or its second copy (see [`ArrayConfig::load_noted`]).
    pub fn load(dir: &Path) -> Result<ArrayConfig> {
        Ok(Self::load_noted(dir)?.0)
    }

    /// [`ArrayConfig::load`], and why `array.json` could not be read when its second copy was.
    pub fn load_noted(dir: &Path) -> Result<(ArrayConfig, Option<String>)> {
        let (c, note): (ArrayConfig, _) = load_either(&dir.join("array.json"), "array configuration")?;
        c.profile.validate()?;
        Ok((c, note))
    }
}

impl Catalog {
    pub fn save(&self, dir: &Path) -> Result<()> {
        save_checked(&dir.join("catalog.json"), self)
    }

    /// The catalog, from `catalog.json` or its second copy (see [`Catalog::load_noted`]).
    pub fn load(dir: &Path) -> Result<Catalog> {
        Ok(Self::load_noted(dir)?.0)
    }

    /// [`Catalog::load`], and why `catalog.json` could not be read when its second copy was. A copy one
    /// change behind (its write cut off) is an older catalog: opening the array keeps the parts it does
    /// not list in quarantine, for `fsck --repair` to restore.
    pub fn load_noted(dir: &Path) -> Result<(Catalog, Option<String>)> {
        load_either(&dir.join("catalog.json"), "catalog")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(name: &str, size: u64, stripe_unit: u64, devices: Vec<u32>) -> ObjectEntry {
        ObjectEntry {
            name: name.into(),
            size,
            stripe_unit,
            devices,
            kind: EntryKind::Blob,
            commits: Vec::new(),
        }
    }

    #[test]
    fn pieces_follow_the_stripes() {
        let e = blob("o", 25, 10, vec![3, 1]);
        assert_eq!(e.pieces(100), vec![(0, 0, 0, 10), (1, 0, 10, 10), (0, 10, 20, 5)]);
        assert_eq!(e.pieces(4)[..3], [(0, 0, 0, 4), (0, 4, 4, 4), (0, 8, 8, 2)]);
        let single = ObjectEntry { devices: vec![2], ..e };
        assert_eq!(single.pieces(10), vec![(0, 0, 0, 10), (0, 10, 10, 10), (0, 20, 20, 5)]);
    }

    #[test]
    fn a_corrupted_catalog_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Catalog::default();
        c.objects.insert("x".into(), blob("x", 1, 1, vec![0]));
        c.objects.insert(
            "l".into(),
            ObjectEntry {
                kind: EntryKind::List(ListInfo { entry_size: 8, entries: 2 }),
                ..blob("l", 16, 1, vec![0])
            },
        );
        c.save(dir.path()).unwrap();
        let back = Catalog::load(dir.path()).unwrap();
        assert_eq!(back.objects, c.objects, "entries of every kind round-trip");
        let p = dir.path().join("catalog.json");
        let copy = dir.path().join("catalog.b.json");
        assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&copy).unwrap(), "two equal copies");
        // One damaged copy: the other is read, and why the first was not is said.
        let s = std::fs::read_to_string(&p).unwrap().replace("\"x\"", "\"y\"");
        std::fs::write(&p, &s).unwrap();
        let (back, why) = Catalog::load_noted(dir.path()).unwrap();
        assert_eq!(back.objects, c.objects);
        assert!(why.is_some_and(|w| w.contains("checksum")));
        // Both: named.
        std::fs::write(&copy, &s).unwrap();
        let err = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("catalog") && err.contains("checksum") && err.contains("second copy"), "{err}");
        for f in [&p, &copy] {
            let old = std::fs::read_to_string(f).unwrap().replacen("insitu v2", "insitu v1", 1);
            std::fs::write(f, old).unwrap();
        }
        let err = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("format 1") && err.contains("insitu init"), "{err}");
    }
}
