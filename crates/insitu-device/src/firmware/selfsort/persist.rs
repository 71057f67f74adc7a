//! Where Self-Sort keeps itself (§III-C: the index "resides in the DRAM memory, however in order to
//! guarantee durability it is possible to flush this information into non-volatile flash memory").
//!
//! The top of the device's logical pages is the firmware's area, hidden from the host:
//! ```text
//! host LBAs 0 .. H-1          data; LBA H-1 is the command LBA (command block in, status out)
//! H, H+1                      header slots (one page each, written alternately)
//! H+2 ..                      image slot 0, then image slot 1 (S pages each)
//! ```
//! A header names the state's generation, whether the indexes match the saved image (`clean`), which
//! image slot holds that image, and every index's configuration. A flush writes the image to the slot
//! not in use, then a clean header (the switch); before the first change of indexed records after a
//! flush, a dirty header goes out first. At open, the newest valid header decides: clean, the image is
//! loaded; dirty (the device stopped without a flush), the indexes are rebuilt from the records. So after
//! a kill at any point an index either matches the data or is rebuilt: never a wrong order.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::firmware::selfsort::index::fail;
use crate::firmware::FirmwareContext;
use crate::protocol::IndexConfig;
use insitu_kernels::btree::BTree;
use insitu_kernels::le;

const HEADER_MAGIC: &[u8; 8] = b"ISSSHDR1";

/// The firmware's area of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Area {
    pub host_lbas: u64,
    pub start: u64,
    pub slot_pages: u64,
}

impl Area {
    /// The area of a device of `logical_pages` pages with `memory_bytes` of device memory: image slots as
    /// large as device memory (no index outgrows it), but together at most a sixteenth of the device.
    pub fn for_device(logical_pages: u64, page_size: u32, memory_bytes: u64) -> Area {
        let ps = page_size as u64;
        let slot_pages = (memory_bytes / ps).min(logical_pages / 32).max(1);
        let start = logical_pages.saturating_sub(2 + 2 * slot_pages);
        Area { host_lbas: start, start, slot_pages }
    }

    pub fn command_lba(&self) -> u64 {
        self.host_lbas - 1
    }

    pub fn pages(&self) -> u64 {
        2 + 2 * self.slot_pages
    }

    fn header_lba(&self, slot: u64) -> u64 {
        self.start + slot
    }

    pub fn image_lba(&self, slot: u32) -> u64 {
        self.start + 2 + slot as u64 * self.slot_pages
    }
}

/// What a header says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Header {
    pub generation: u64,
    /// The indexes match the image in `image_slot` (nothing changed since it was written).
    pub clean: bool,
    pub image_slot: u32,
    pub image_bytes: u64,
    pub image_crc: u32,
    pub indexes: Vec<SavedIndex>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SavedIndex {
    pub config: IndexConfig,
    pub generated: u64,
}

/// The start of an image: its format. Images saved before it (postcard, ids as varints) are still read.
const IMAGE_MAGIC: &[u8; 8] = b"ISSSIMG3";

/// A saved index: its entries in key order, the keys (`key_size` bytes each) and then the record ids
/// (`id_width` bytes each, little-endian: [`id_width`] of its record count). Read back, both stay in the
/// image's bytes: an index of 8 M 10-byte keys is 104 MB that opening a device need not copy or decode.
#[derive(Debug)]
pub(crate) struct IndexImage<'a> {
    pub id: u32,
    pub keys: Cow<'a, [u8]>,
    pub ids: Cow<'a, [u8]>,
    pub id_width: usize,
}

/// Bytes a saved record id of an index of `records` records takes: the fewest that hold `records - 1`
/// (never more than the varint the earlier format used).
pub(crate) fn id_width(records: u64) -> usize {
    (64 - records.saturating_sub(1).leading_zeros() as usize).div_ceil(8).max(1)
}

/// An image as saved before [`IMAGE_MAGIC`]: postcard, the keys one byte string, the ids varints.
#[derive(Debug, Serialize, Deserialize)]
struct LegacyImage<'a> {
    id: u32,
    #[serde(borrow, serialize_with = "as_bytes")]
    keys: Cow<'a, [u8]>,
    ids: Vec<u64>,
}

fn as_bytes<S: serde::Serializer>(v: &[u8], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_bytes(v)
}

/// Reads the newest valid header, if any.
pub(crate) fn read_header(fw: &FirmwareContext<'_>, area: &Area) -> Result<Option<Header>> {
    let ps = fw.page_size() as usize;
    let mut best: Option<Header> = None;
    for slot in 0..2 {
        let lba = area.header_lba(slot);
        if !fw.is_mapped(lba) {
            continue;
        }
        let mut page = vec![0u8; ps];
        fw.read_lba(lba, &mut page)?;
        if let Some(h) = parse_header(&page) {
            if best.as_ref().is_none_or(|b| h.generation > b.generation) {
                best = Some(h);
            }
        }
    }
    Ok(best)
}

fn parse_header(page: &[u8]) -> Option<Header> {
    if page.len() < 16 || &page[..8] != HEADER_MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(page[8..12].try_into().ok()?) as usize;
    let body = page.get(12..12 + len)?;
    let crc = u32::from_le_bytes(page.get(12 + len..16 + len)?.try_into().ok()?);
    (crc32fast::hash(body) == crc).then(|| postcard::from_bytes(body).ok()).flatten()
}

/// Writes `h` to its header slot (by generation).
pub(crate) fn write_header(fw: &FirmwareContext<'_>, area: &Area, h: &Header) -> Result<()> {
    let ps = fw.page_size() as usize;
    let body = postcard::to_stdvec(h).map_err(|e| fail(format!("encoding the header: {e}")))?;
    if 16 + body.len() > ps {
        return Err(fail(format!(
            "the configuration of {} indexes ({} bytes) does not fit one {ps}-byte page",
            h.indexes.len(),
            body.len()
        )));
    }
    let mut page = vec![0u8; ps];
    page[..8].copy_from_slice(HEADER_MAGIC);
    page[8..12].copy_from_slice(&(body.len() as u32).to_le_bytes());
    page[12..12 + body.len()].copy_from_slice(&body);
    page[12 + body.len()..16 + body.len()].copy_from_slice(&crc32fast::hash(&body).to_le_bytes());
    fw.write_lba(area.header_lba(h.generation % 2), &page)
}

/// An index's entries as an image takes them: its built tree, or the entries it was restored from and has
/// not built a tree of yet (keys, then ids of `id_width` bytes, in key order), copied as they are.
pub(crate) enum Entries<'a> {
    Tree(&'a BTree),
    Saved { keys: &'a [u8], ids: &'a [u8], id_width: usize },
}

impl Entries<'_> {
    fn len(&self) -> usize {
        match self {
            Entries::Tree(t) => t.len() as usize,
            Entries::Saved { ids, id_width, .. } => ids.len() / id_width,
        }
    }

    /// Writes the keys into `keys` and the ids, `w` bytes each, into `ids`.
    fn write(&self, keys: &mut [u8], ids: &mut [u8], w: usize) {
        match self {
            Entries::Tree(t) => t.export_into(keys, ids, w),
            Entries::Saved { keys: k, ids: i, id_width } => {
                keys.copy_from_slice(k);
                if *id_width == w {
                    ids.copy_from_slice(i);
                } else {
                    // An image of the earlier format (8-byte ids): each id in the width the format takes now.
                    for (to, from) in ids.chunks_exact_mut(w).zip(i.chunks_exact(*id_width)) {
                        to.copy_from_slice(&le::uint(from).to_le_bytes()[..w]);
                    }
                }
            }
        }
    }
}

/// Writes `indexes` (`(id, record count, key size, entries)`) as an image into slot `slot`; returns its
/// length and checksum. The layout: [`IMAGE_MAGIC`], the number of indexes (`u32`), then each index as its
/// id (`u32`), key size (`u32`), entries `n` (`u64`), id width `w` (`u8`, [`id_width`] of its record
/// count), the `n` keys and the `n` ids of `w` bytes (all little-endian).
pub(crate) fn write_image(
    fw: &FirmwareContext<'_>,
    area: &Area,
    slot: u32,
    indexes: &[(u32, u64, usize, Entries<'_>)],
) -> Result<(u64, u32)> {
    let ps = fw.page_size() as usize;
    let len = IMAGE_MAGIC.len()
        + 4
        + indexes.iter().map(|(_, r, ks, e)| 17 + e.len() * (ks + id_width(*r))).sum::<usize>();
    let pages = len.div_ceil(ps) as u64;
    if pages > area.slot_pages {
        return Err(fail(format!(
            "the indexes take {len} bytes saved, more than the firmware area's {} bytes a slot",
            area.slot_pages * ps as u64
        )));
    }
    let mut bytes = vec![0u8; pages as usize * ps];
    bytes[..8].copy_from_slice(IMAGE_MAGIC);
    bytes[8..12].copy_from_slice(&(indexes.len() as u32).to_le_bytes());
    let mut at = 12;
    for (id, records, ks, entries) in indexes {
        let (n, ks, w) = (entries.len(), *ks, id_width(*records));
        bytes[at..at + 4].copy_from_slice(&id.to_le_bytes());
        bytes[at + 4..at + 8].copy_from_slice(&(ks as u32).to_le_bytes());
        bytes[at + 8..at + 16].copy_from_slice(&(n as u64).to_le_bytes());
        bytes[at + 16] = w as u8;
        at += 17;
        let (keys, rest) = bytes[at..].split_at_mut(n * ks);
        entries.write(keys, &mut rest[..n * w], w);
        at += n * (ks + w);
    }
    debug_assert_eq!(at, len);
    let crc = crc32fast::hash(&bytes[..len]);
    for (i, chunk) in bytes.chunks(4 << 20).enumerate() {
        fw.write_lba(area.image_lba(slot) + (i * (4 << 20) / ps) as u64, chunk)?;
    }
    Ok((len as u64, crc))
}

/// Reads the image a clean header names, checked against its checksum; `None` if it is unreadable (then
/// the indexes are rebuilt). [`decode_image`] gives its indexes.
pub(crate) fn read_image(fw: &FirmwareContext<'_>, area: &Area, h: &Header) -> Result<Option<Vec<u8>>> {
    let ps = fw.page_size() as u64;
    let pages = h.image_bytes.div_ceil(ps);
    if pages > area.slot_pages {
        return Ok(None);
    }
    let mut bytes = vec![0u8; (pages * ps) as usize];
    for (i, chunk) in bytes.chunks_mut(4 << 20).enumerate() {
        if fw.read_lba(area.image_lba(h.image_slot) + (i * (4 << 20)) as u64 / ps, chunk).is_err() {
            return Ok(None);
        }
    }
    bytes.truncate(h.image_bytes as usize);
    if crc32fast::hash(&bytes) != h.image_crc {
        return Ok(None);
    }
    Ok(Some(bytes))
}

/// The indexes of an image [`read_image`] read, their keys and ids left in its bytes (an image of the
/// earlier format: its ids decoded, 8 bytes each); `None` if it does not decode.
pub(crate) fn decode_image(bytes: &[u8]) -> Option<Vec<IndexImage<'_>>> {
    let Some(body) = bytes.strip_prefix(IMAGE_MAGIC) else {
        // Another format of ours (an image of this layout's first draft, `ISSSIMG2`) is not postcard: read
        // as such, its bytes would make plausible varints. And a postcard image is all of the bytes.
        if bytes.starts_with(&IMAGE_MAGIC[..7]) {
            return None;
        }
        let (legacy, rest): (Vec<LegacyImage>, _) = postcard::take_from_bytes(bytes).ok()?;
        if !rest.is_empty() {
            return None;
        }
        return Some(
            legacy
                .into_iter()
                .map(|l| IndexImage {
                    id: l.id,
                    keys: l.keys,
                    ids: Cow::Owned(le::encode_u64s(&l.ids)),
                    id_width: 8,
                })
                .collect(),
        );
    };
    let u32_at = |b: &[u8], at: usize| Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?));
    let count = u32_at(body, 0)?;
    let mut at = 4usize;
    let mut out = Vec::new();
    for _ in 0..count {
        let id = u32_at(body, at)?;
        let ks = u32_at(body, at + 4)? as usize;
        let n = usize::try_from(u64::from_le_bytes(body.get(at + 8..at + 16)?.try_into().ok()?)).ok()?;
        let w = *body.get(at + 16)? as usize;
        if !(1..=8).contains(&w) {
            return None;
        }
        at += 17;
        let keys_end = at.checked_add(n.checked_mul(ks)?)?;
        let ids_end = keys_end.checked_add(n.checked_mul(w)?)?;
        out.push(IndexImage {
            id,
            keys: Cow::Borrowed(body.get(at..keys_end)?),
            ids: Cow::Borrowed(body.get(keys_end..ids_end)?),
            id_width: w,
        });
        at = ids_end;
    }
    (at == body.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids_of(img: &IndexImage<'_>) -> Vec<u64> {
        img.ids.chunks_exact(img.id_width).map(le::uint).collect()
    }

    /// An image saved before the current format (postcard: the keys one byte string, the ids varints)
    /// still reads, with the same entries, its keys not copied.
    #[test]
    fn images_of_the_earlier_format_still_read() {
        let keys: Vec<u8> = (0..=255u8).chain(0..40).collect();
        let ids: Vec<u64> = vec![0, 1, 300, u64::MAX];
        let before =
            postcard::to_stdvec(&vec![LegacyImage { id: 3, keys: Cow::Borrowed(&keys), ids: ids.clone() }])
                .unwrap();
        let back = decode_image(&before).unwrap();
        assert_eq!((back[0].id, &back[0].keys[..], ids_of(&back[0])), (3, &keys[..], ids));
        assert!(matches!(back[0].keys, Cow::Borrowed(_)), "the keys are not copied");
    }

    /// The current format: what is written reads back (keys and ids borrowed), and a cut or lengthened
    /// image does not decode.
    #[test]
    fn images_read_back_and_refuse_wrong_lengths() {
        let mut tree = BTree::new(10, 8);
        for i in 0..500u64 {
            let mut k = [0u8; 10];
            k[..8].copy_from_slice(&(i * 7919 % 500).to_be_bytes());
            k[9] = i as u8;
            tree.insert(&k, i);
        }
        let (n, ks, w) = (tree.len() as usize, 10, id_width(500));
        assert_eq!(w, 2);
        let mut bytes = IMAGE_MAGIC.to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&4u32.to_le_bytes());
        bytes.extend_from_slice(&(ks as u32).to_le_bytes());
        bytes.extend_from_slice(&(n as u64).to_le_bytes());
        bytes.push(w as u8);
        let at = bytes.len();
        bytes.resize(at + n * (ks + w), 0);
        let (keys, ids) = bytes[at..].split_at_mut(n * ks);
        tree.export_into(keys, ids, w);
        let back = decode_image(&bytes).unwrap();
        assert_eq!(back.len(), 1);
        assert!(matches!((&back[0].keys, &back[0].ids), (Cow::Borrowed(_), Cow::Borrowed(_))));
        let want: Vec<(Vec<u8>, u64)> = tree.iter_from(0).map(|(k, id)| (k.to_vec(), id)).collect();
        let got: Vec<(Vec<u8>, u64)> =
            back[0].keys.chunks(ks).map(<[u8]>::to_vec).zip(ids_of(&back[0])).collect();
        assert_eq!((back[0].id, got), (4, want));
        assert!(decode_image(&bytes[..bytes.len() - 1]).is_none(), "a cut image");
        bytes.push(0);
        assert!(decode_image(&bytes).is_none(), "bytes past the last index");
        // Another version of the format, or a postcard image with bytes after it, is not read as postcard.
        bytes[7] = b'2';
        assert!(decode_image(&bytes).is_none(), "an image of another version");
        let mut legacy =
            postcard::to_stdvec(&vec![LegacyImage { id: 3, keys: Cow::Borrowed(&[1, 2]), ids: vec![7] }])
                .unwrap();
        assert!(decode_image(&legacy).is_some());
        legacy.push(0);
        assert!(decode_image(&legacy).is_none(), "bytes past a postcard image");
    }

    /// Entries restored and never built are written as the tree they would make writes them, from ids of
    /// their own width (an image of the earlier format: 8 bytes) or the same.
    #[test]
    fn saved_entries_write_as_their_tree_does() {
        let mut tree = BTree::new(3, 4);
        for i in 0..300u64 {
            tree.insert(&[(i * 37 % 256) as u8, 0, i as u8], i);
        }
        let n = tree.len() as usize;
        let export = |w: usize| {
            let (mut k, mut i) = (vec![0u8; n * 3], vec![0u8; n * w]);
            tree.export_into(&mut k, &mut i, w);
            (k, i)
        };
        let (keys, wide) = export(8);
        for (from, ids) in [(8, &wide), (2, &export(2).1)] {
            let saved = Entries::Saved { keys: &keys, ids, id_width: from };
            let (mut k, mut i) = (vec![0u8; n * 3], vec![0u8; n * 2]);
            saved.write(&mut k, &mut i, 2);
            assert_eq!((saved.len(), (k, i)), (n, export(2)), "ids {from} bytes wide");
        }
    }

    #[test]
    fn ids_take_the_fewest_bytes_that_hold_the_last_record() {
        for (records, w) in
            [(0, 1), (1, 1), (256, 1), (257, 2), (65_536, 2), (8_000_000, 3), (1 << 32, 4), (u64::MAX, 8)]
        {
            assert_eq!(id_width(records), w, "{records} records");
        }
    }
}
