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

/// A saved index: its entries in key order. Read back, the keys stay in the image's bytes (`Cow::Borrowed`):
/// an index of 8 M 10-byte keys is 80 MB that opening a device need not copy.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct IndexImage<'a> {
    pub id: u32,
    /// Written as one byte string, which postcard lays out exactly as the sequence of bytes it was
    /// before (a varint length, then the bytes: a test says so), in one copy, not a call per byte.
    #[serde(borrow, serialize_with = "as_bytes")]
    pub keys: Cow<'a, [u8]>,
    pub ids: Vec<u64>,
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

/// Writes an image into slot `slot`; returns its length and checksum.
pub(crate) fn write_image(
    fw: &FirmwareContext<'_>,
    area: &Area,
    slot: u32,
    images: &[IndexImage],
) -> Result<(u64, u32)> {
    let ps = fw.page_size() as usize;
    let mut bytes = postcard::to_stdvec(images).map_err(|e| fail(format!("encoding the indexes: {e}")))?;
    let (len, crc) = (bytes.len() as u64, crc32fast::hash(&bytes));
    let pages = bytes.len().div_ceil(ps) as u64;
    if pages > area.slot_pages {
        return Err(fail(format!(
            "the indexes take {len} bytes saved, more than the firmware area's {} bytes a slot",
            area.slot_pages * ps as u64
        )));
    }
    bytes.resize(pages as usize * ps, 0);
    for (i, chunk) in bytes.chunks(4 << 20).enumerate() {
        fw.write_lba(area.image_lba(slot) + (i * (4 << 20) / ps) as u64, chunk)?;
    }
    Ok((len, crc))
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

/// The indexes of an image [`read_image`] read, their keys left in its bytes; `None` if it does not decode.
pub(crate) fn decode_image(bytes: &[u8]) -> Option<Vec<IndexImage<'_>>> {
    postcard::from_bytes(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The image as it was saved before its keys were written as one byte string.
    #[derive(Serialize)]
    struct ImageBefore {
        id: u32,
        keys: Vec<u8>,
        ids: Vec<u64>,
    }

    #[test]
    fn images_read_the_same_whichever_way_their_keys_were_written() {
        let keys: Vec<u8> = (0..=255u8).chain(0..40).collect();
        let ids: Vec<u64> = vec![0, 1, 300, u64::MAX];
        let before =
            postcard::to_stdvec(&vec![ImageBefore { id: 3, keys: keys.clone(), ids: ids.clone() }]).unwrap();
        let now =
            postcard::to_stdvec(&vec![IndexImage { id: 3, keys: Cow::Borrowed(&keys), ids: ids.clone() }])
                .unwrap();
        assert_eq!(before, now, "the same bytes on flash");
        let back = decode_image(&before).unwrap();
        assert_eq!((back[0].id, &back[0].keys[..], &back[0].ids), (3, &keys[..], &ids));
        assert!(matches!(back[0].keys, Cow::Borrowed(_)), "the keys are not copied");
    }
}
