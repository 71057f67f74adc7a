//! The namespace: named objects made of extents of logical pages (BlueDBM §4's file system that maps files
//! to flash pages, at page granularity). The data structures live here; the operations that touch the FTL
//! are on [`crate::Flash`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{FlashError, Result};
use crate::geometry::Lpn;

/// Longest object name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// A run of consecutive logical pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub lpn: Lpn,
    pub pages: u64,
}

/// A committed object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    pub name: String,
    /// What the bytes are (`blob`, `stripe`, later `table-part`, `list`...).
    pub kind: String,
    /// Size in bytes (the last page is padded with zeros).
    pub size: u64,
    pub extents: Vec<Extent>,
    /// Free-form metadata of the layer above (stripe geometry, schema...).
    pub attrs: BTreeMap<String, String>,
    /// The write transaction that created it: a device numbers its transactions in the order they
    /// begin, so the layer above can tell objects made before a point from those made after it.
    pub txn: u64,
}

impl ObjectMeta {
    /// Total pages of the extents.
    pub fn pages(&self) -> u64 {
        self.extents.iter().map(|e| e.pages).sum()
    }

    /// The logical page holding page `index` of the object.
    pub fn lpn_of(&self, mut index: u64) -> Option<Lpn> {
        for e in &self.extents {
            if index < e.pages {
                return Some(e.lpn + index);
            }
            index -= e.pages;
        }
        None
    }

    /// Logical runs `(lpn, pages)` covering object pages `first..first + count`, in object order.
    pub fn runs(&self, first: u64, count: u64) -> Vec<(Lpn, u64)> {
        runs(&self.extents, first, count)
    }
}

/// Logical runs `(lpn, pages)` covering pages `first..first + count` of a list of extents.
pub(crate) fn runs(extents: &[Extent], first: u64, count: u64) -> Vec<(Lpn, u64)> {
    let mut out = Vec::new();
    let (mut skip, mut left) = (first, count);
    for e in extents {
        if left == 0 {
            break;
        }
        if skip >= e.pages {
            skip -= e.pages;
            continue;
        }
        let n = (e.pages - skip).min(left);
        out.push((e.lpn + skip, n));
        left -= n;
        skip = 0;
    }
    out
}

/// Checks an object name: non-empty, at most [`MAX_NAME_BYTES`], no `/`, no `..`, no NUL or other control
/// characters (names become parts of paths and messages further up).
pub fn validate_name(name: &str) -> Result<()> {
    let bad = |why: &'static str| Err(FlashError::InvalidName { name: name.to_string(), why: why.into() });
    if name.is_empty() {
        return bad("the name is empty");
    }
    if name.chars().all(char::is_whitespace) {
        return bad("the name is blank (only spaces)");
    }
    if name.len() > MAX_NAME_BYTES {
        return bad("the name is longer than 255 bytes");
    }
    if name.contains('/') || name.contains('\\') {
        return bad("the name contains a path separator");
    }
    if name.contains("..") {
        return bad("the name contains '..'");
    }
    if name.contains('\0') {
        return bad("the name contains a NUL byte");
    }
    if name.chars().any(char::is_control) {
        return bad("the name contains a control character");
    }
    if name == "." {
        return bad("'.' is not a name");
    }
    Ok(())
}

/// An object being written: its reserved logical pages and how many of them hold data.
#[derive(Debug, Clone)]
pub(crate) struct Txn {
    pub name: String,
    pub kind: String,
    pub attrs: BTreeMap<String, String>,
    pub reserved: Vec<Extent>,
    pub written_pages: u64,
    pub size: u64,
    pub tail: Vec<u8>,
}

impl Txn {
    pub fn new(name: &str, kind: &str, attrs: BTreeMap<String, String>) -> Txn {
        Txn {
            name: name.to_string(),
            kind: kind.to_string(),
            attrs,
            reserved: Vec::new(),
            written_pages: 0,
            size: 0,
            tail: Vec::new(),
        }
    }

    pub fn reserved_pages(&self) -> u64 {
        self.reserved.iter().map(|e| e.pages).sum()
    }

    /// Extents covering the first `pages` reserved pages.
    pub fn written_extents(&self, pages: u64) -> Vec<Extent> {
        let mut out = Vec::new();
        let mut left = pages;
        for e in &self.reserved {
            if left == 0 {
                break;
            }
            let n = e.pages.min(left);
            out.push(Extent { lpn: e.lpn, pages: n });
            left -= n;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_refused_with_a_reason() {
        for (name, why) in [
            ("", "empty"),
            ("a/b", "separator"),
            ("..", "'..'"),
            ("x..y", "'..'"),
            ("a\0b", "NUL"),
            ("tab\there", "control"),
            (" ", "blank"),
            ("\u{3000} ", "blank"),
        ] {
            let err = validate_name(name).unwrap_err().to_string();
            assert!(err.contains(why), "{name:?}: {err}");
        }
        assert!(validate_name(&"n".repeat(256)).is_err());
        assert!(validate_name("lineitem.part-3").is_ok());
        assert!(validate_name("a name with spaces").is_ok());
    }

    #[test]
    fn runs_follow_extents() {
        let m = ObjectMeta {
            name: "o".into(),
            kind: "blob".into(),
            size: 0,
            extents: vec![Extent { lpn: 10, pages: 3 }, Extent { lpn: 100, pages: 5 }],
            attrs: BTreeMap::new(),
            txn: 0,
        };
        assert_eq!(m.runs(2, 3), vec![(12, 1), (100, 2)]);
        assert_eq!(m.lpn_of(3), Some(100));
        assert_eq!(m.lpn_of(8), None);
    }
}
