//! Host-side metadata of an array: its configuration and the catalog of objects. Both are small JSON files
//! behind a checksum line, replaced atomically. The catalog is the commit point of multi-device writes: an
//! object exists once its entry is in the catalog, and device parts without an entry are leftovers of an
//! interrupted write, removed at the next open.

use std::collections::BTreeMap;
use std::path::Path;

use insitu_device::{Profile, StripeLayout};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::error::{HostError, Result};

pub const ARRAY_FORMAT: u32 = 1;

/// How the array was created.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArrayConfig {
    pub format: u32,
    pub devices: u32,
    pub capacity_bytes: u64,
    /// Bytes per stripe when objects are spread over all devices.
    pub stripe_unit: u64,
    pub profile: Profile,
}

/// One object of the array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectEntry {
    pub name: String,
    pub kind: String,
    pub size: u64,
    pub stripe_unit: u64,
    /// The devices holding its parts, in stripe order (part `i` is on `devices[i]`).
    pub devices: Vec<u32>,
    /// For tables: schema, key column and the encoding of each part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<crate::table::TableInfo>,
    /// For shuffle outputs (PSACS): the partitioning and how to rebuild rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle: Option<crate::psacs::ShuffleInfo>,
    /// For ID lists (list intersection): the entry size and count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<crate::intersect::lists::ListInfo>,
}

impl ObjectEntry {
    /// Names of the device objects that make up part `i` (a blob part is one object named like the
    /// entry; a table part is several, `NAME#key`, `NAME#rows`, ...).
    pub fn device_objects(&self, i: usize) -> Vec<String> {
        match (&self.table, &self.shuffle) {
            (Some(t), _) => t.parts[i].objects(&self.name),
            (None, Some(_)) => vec![format!("{}#data", self.name), format!("{}#index", self.name)],
            (None, None) => vec![self.name.clone()],
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

/// All objects of the array, by name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Catalog {
    pub objects: BTreeMap<String, ObjectEntry>,
}

fn save_checked<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    let body = serde_json::to_vec_pretty(v).expect("plain data serializes");
    let mut out = format!("insitu v{ARRAY_FORMAT} crc32={:08x}\n", crc32fast::hash(&body)).into_bytes();
    out.extend_from_slice(&body);
    insitu_flash::persist::write_atomic(path, &out)?;
    Ok(())
}

fn load_checked<T: DeserializeOwned>(path: &Path, what: &'static str) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| HostError::io(path, e))?;
    let corrupt = |detail: String| HostError::Corrupt { what, path: path.to_path_buf(), detail };
    let nl = bytes.iter().position(|b| *b == b'\n').ok_or_else(|| corrupt("no header line".into()))?;
    let header = std::str::from_utf8(&bytes[..nl]).map_err(|_| corrupt("unreadable header".into()))?;
    let body = &bytes[nl + 1..];
    let want = header
        .strip_prefix(&format!("insitu v{ARRAY_FORMAT} crc32="))
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or_else(|| corrupt(format!("bad header {header:?}")))?;
    if crc32fast::hash(body) != want {
        return Err(corrupt("checksum mismatch".into()));
    }
    serde_json::from_slice(body).map_err(|e| corrupt(format!("undecodable: {e}")))
}

impl ArrayConfig {
    pub fn save(&self, dir: &Path) -> Result<()> {
        save_checked(&dir.join("array.json"), self)
    }

    pub fn load(dir: &Path) -> Result<ArrayConfig> {
        let c: ArrayConfig = load_checked(&dir.join("array.json"), "array configuration")?;
        c.profile.validate()?;
        Ok(c)
    }
}

impl Catalog {
    pub fn save(&self, dir: &Path) -> Result<()> {
        save_checked(&dir.join("catalog.json"), self)
    }

    pub fn load(dir: &Path) -> Result<Catalog> {
        load_checked(&dir.join("catalog.json"), "catalog")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_follow_the_stripes() {
        let e = ObjectEntry {
            name: "o".into(),
            kind: "blob".into(),
            size: 25,
            stripe_unit: 10,
            devices: vec![3, 1],
            table: None,
            shuffle: None,
            list: None,
        };
        assert_eq!(e.pieces(100), vec![(0, 0, 0, 10), (1, 0, 10, 10), (0, 10, 20, 5)]);
        assert_eq!(e.pieces(4)[..3], [(0, 0, 0, 4), (0, 4, 4, 4), (0, 8, 8, 2)]);
        let single = ObjectEntry { devices: vec![2], ..e };
        assert_eq!(single.pieces(10), vec![(0, 0, 0, 10), (0, 10, 10, 10), (0, 20, 20, 5)]);
    }

    #[test]
    fn a_corrupted_catalog_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Catalog::default();
        c.objects.insert(
            "x".into(),
            ObjectEntry {
                name: "x".into(),
                kind: "blob".into(),
                size: 1,
                stripe_unit: 1,
                devices: vec![0],
                table: None,
                shuffle: None,
                list: None,
            },
        );
        c.save(dir.path()).unwrap();
        assert_eq!(Catalog::load(dir.path()).unwrap().objects.len(), 1);
        let p = dir.path().join("catalog.json");
        let s = std::fs::read_to_string(&p).unwrap().replace("\"x\"", "\"y\"");
        std::fs::write(&p, s).unwrap();
        let err = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("catalog") && err.contains("checksum"), "{err}");
    }
}
