//! The Self-Sorting SSD (Cavazos Quero, Lee, Kim, 2015) as resident firmware on every device's I/O path.
//!
//! The host configures an index over fixed-size records packed from an LBA (§III-E: by writing a command
//! block to the command LBA, [`crate::protocol::block`], or by the typed vendor commands of
//! [`crate::protocol::ConfigureIndex`] and its siblings), writes the records through the ordinary block
//! interface, and reads the same LBAs back in key order (§III-D). The index is a B+tree in device memory
//! ([`insitu_kernels::btree`], §III-C, fanout 128), built as records are written (sort-on-write) or by
//! generate commands the host repeats, each indexing a chunk of stored records (sort-on-command,
//! §III-B). Queries (min, max, key ranges, ranks) run against it; secondary indexes are indexes over the
//! same range on another field. The indexes survive restarts (module `persist`). ActiveSort's on-the-fly merge
//! of sorted runs, the paper's baseline, is an index kind too (module `runs`).
//!
//! The FTL and the namespace know nothing of this: the firmware sees host reads, writes and trims before
//! the FTL does and carries out those that touch its ranges itself, through the FTL. Its work (records
//! parsed, tree nodes visited, keys compared, entries moved, bytes copied) is counted for the model.

mod index;
mod io;
mod ops;
mod persist;
mod read;
mod records;
mod runs;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::Result;
use crate::firmware::selfsort::index::{refuse, Index, Saved};
use crate::firmware::selfsort::persist::{Area, Header, SavedIndex};
use crate::firmware::{Decision, Firmware, FirmwareContext, Io};
use crate::memory::MemReservation;
use crate::protocol::block::LastCommand;

/// The Self-Sort firmware of one device.
#[derive(Debug, Default)]
pub struct SelfSort {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    area: Option<Area>,
    indexes: BTreeMap<u32, Index>,
    /// Generation of the newest header on flash, the image slot it names, and that image.
    generation: u64,
    image_slot: u32,
    image_bytes: u64,
    image_crc: u32,
    /// The newest header on flash says the indexes match its image.
    saved_clean: bool,
    /// The indexes changed since the image was written.
    changed: bool,
    last: LastCommand,
    /// The FTL map (where it lives in device memory) and the I/O buffers.
    firmware_memory: Option<MemReservation>,
}

impl State {
    fn area(&self) -> Result<Area> {
        self.area.ok_or_else(|| refuse("the firmware is not running"))
    }

    fn index(&mut self, id: u32) -> Result<&mut Index> {
        let known = self.indexes.keys().map(u32::to_string).collect::<Vec<_>>().join(", ");
        self.indexes.get_mut(&id).ok_or_else(|| {
            refuse(format!(
                "no index {id} on this device (configured: {})",
                if known.is_empty() { "none".to_string() } else { known }
            ))
        })
    }

    /// Writes a header saying the indexes no longer match the saved image (with every index's
    /// configuration), so a stop before the next flush is detected at open.
    fn save_dirty(&mut self, fw: &FirmwareContext<'_>) -> Result<()> {
        let area = self.area()?;
        let h = Header {
            generation: self.generation + 1,
            clean: false,
            image_slot: self.image_slot,
            image_bytes: self.image_bytes,
            image_crc: self.image_crc,
            indexes: self.saved_indexes(),
        };
        persist::write_header(fw, &area, &h)?;
        self.generation += 1;
        self.saved_clean = false;
        self.changed = true;
        Ok(())
    }

    /// Before records of an indexed range change: the first change after a flush marks the header dirty.
    fn before_change(&mut self, fw: &FirmwareContext<'_>) -> Result<()> {
        if self.saved_clean {
            self.save_dirty(fw)?;
        }
        self.changed = true;
        Ok(())
    }

    fn saved_indexes(&self) -> Vec<SavedIndex> {
        self.indexes
            .values()
            .map(|ix| SavedIndex { config: ix.config.clone(), generated: ix.generated })
            .collect()
    }

    /// Writes every index to the firmware area and a clean header naming it.
    fn flush(&mut self, fw: &FirmwareContext<'_>) -> Result<()> {
        if !self.changed && (self.saved_clean || self.generation == 0) {
            return Ok(());
        }
        let area = self.area()?;
        // An index restored and never used is saved from the entries it was restored from, not built.
        let trees: Vec<(u32, u64, usize, persist::Entries)> = self
            .indexes
            .values()
            .filter(|ix| ix.is_tree())
            .map(|ix| {
                let entries = match ix.saved() {
                    Some(s) => persist::Entries::Saved {
                        keys: &s.bytes[s.keys.clone()],
                        ids: &s.bytes[s.ids.clone()],
                        id_width: s.id_width,
                    },
                    None => persist::Entries::Tree(ix.built_tree()),
                };
                (ix.config.id, ix.config.records, ix.config.key_size as usize, entries)
            })
            .collect();
        let old = self.image_slot;
        let slot = if self.generation == 0 { 0 } else { 1 - old };
        let (len, crc) = persist::write_image(fw, &area, slot, &trees)?;
        fw.sync()?;
        let h = Header {
            generation: self.generation + 1,
            clean: true,
            image_slot: slot,
            image_bytes: len,
            image_crc: crc,
            indexes: self.saved_indexes(),
        };
        persist::write_header(fw, &area, &h)?;
        fw.sync()?;
        self.generation += 1;
        (self.image_slot, self.image_bytes, self.image_crc) = (slot, len, crc);
        self.saved_clean = true;
        self.changed = false;
        if slot != old {
            // The old image's pages are garbage now; trimming gives them back to the FTL (and the trim
            // returns them to free space, so they are set aside again).
            fw.trim_lba(area.image_lba(old), area.slot_pages)?;
            fw.set_aside(area.image_lba(old), area.slot_pages)?;
        }
        Ok(())
    }
}

impl SelfSort {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the firmware on a device being opened: takes its area and its memory, then loads the
    /// indexes saved at the last flush, or rebuilds them from the records if the device stopped without
    /// one.
    pub(crate) fn mount(&self, fw: &FirmwareContext<'_>) -> Result<()> {
        let mut st = self.lock();
        let lp = fw.logical_pages();
        let area = Area::for_device(lp, fw.page_size(), fw.memory_capacity());
        if area.host_lbas < 2 {
            return Err(refuse(format!("a device of {lp} pages has no room for the firmware's area")));
        }
        let need = fw.profile().firmware_memory_bytes(lp);
        st.firmware_memory = Some(fw.reserve(need).map_err(|_| {
            refuse(format!(
                "the FTL's page map and I/O buffers take {need} bytes, more than the device's {} bytes of memory \
                 (profile {}: a smaller capacity fits)",
                fw.memory_capacity(),
                fw.profile().name
            ))
        })?);
        fw.set_aside(area.start, area.pages())?;
        fw.set_aside(area.command_lba(), 1)?;
        st.area = Some(area);
        let Some(h) = persist::read_header(fw, &area)? else {
            return Ok(());
        };
        (st.generation, st.image_slot, st.image_bytes, st.image_crc) =
            (h.generation, h.image_slot, h.image_bytes, h.image_crc);
        for saved in &h.indexes {
            let mut ix = Index::new(saved.config.clone(), fw)?;
            ix.generated = saved.generated;
            ops::set_aside_ranges(fw, &ix.config)?;
            st.indexes.insert(saved.config.id, ix);
        }
        let raw = if h.clean { persist::read_image(fw, &area, &h)?.map(Arc::new) } else { None };
        let images = raw.as_deref().and_then(|r| persist::decode_image(r));
        st.saved_clean = h.clean && images.is_some();
        st.changed = !st.saved_clean;
        let why = if !h.clean {
            "rebuilt from the records: the device stopped without saving its indexes"
        } else {
            "rebuilt from the records: the saved image is unreadable"
        };
        let mut images: BTreeMap<u32, persist::IndexImage> =
            images.unwrap_or_default().into_iter().map(|i| (i.id, i)).collect();
        let saved_clean = st.saved_clean;
        let mut rebuilt = false;
        for ix in st.indexes.values_mut().filter(|ix| ix.is_tree()) {
            let restored = match (saved_clean, images.remove(&ix.config.id)) {
                (true, Some(img)) => {
                    Some(ix.restore(fw, saved_entries(raw.as_ref().expect("decoded"), &img)))
                }
                _ => None,
            };
            let why = match &restored {
                Some(Ok(())) => {
                    ix.notes
                        .push(format!("loaded from flash (generation {}): matches the data", h.generation));
                    continue;
                }
                Some(Err(e)) => {
                    format!("rebuilt from the records: its saved entries could not be loaded ({e})")
                }
                None if saved_clean => {
                    "rebuilt from the records: the saved image does not hold it".to_string()
                }
                None => why.to_string(),
            };
            // The image no longer says what the indexes hold: the next flush saves them.
            rebuilt = true;
            let note = match ops::rebuild(ix, fw) {
                Ok(n) => format!("{why} (generation {}): {n} records indexed", h.generation),
                Err(e) => format!("{why}, and the rebuild stopped: {e}"),
            };
            ix.charge_work(fw);
            ix.notes.push(note);
        }
        st.changed |= rebuilt;
        Ok(())
    }

    /// LBAs the host may use (the command LBA is the last of them).
    pub(crate) fn host_lbas(&self) -> Option<u64> {
        self.lock().area.map(|a| a.host_lbas)
    }

    /// Saves the indexes if they changed (at a flush command and when the device closes).
    pub(crate) fn flush(&self, fw: &FirmwareContext<'_>) -> Result<()> {
        self.lock().flush(fw)
    }

    /// Runs `f` on the state (the typed commands).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut State) -> Result<T>) -> Result<T> {
        f(&mut self.lock())
    }
}

/// An index's entries in an image read at open: where they lie in its bytes (an image of the earlier
/// format, whose ids were decoded: a copy of its own).
fn saved_entries(raw: &Arc<Vec<u8>>, img: &persist::IndexImage<'_>) -> Saved {
    let within = |part: &[u8]| {
        let at = part.as_ptr() as usize - raw.as_ptr() as usize;
        debug_assert!(at + part.len() <= raw.len(), "a part of the image lies in it");
        at..at + part.len()
    };
    match (&img.keys, &img.ids) {
        (Cow::Borrowed(k), Cow::Borrowed(i)) => {
            Saved { bytes: Arc::clone(raw), keys: within(k), ids: within(i), id_width: img.id_width }
        }
        _ => {
            let mut b = img.keys.to_vec();
            let keys = 0..b.len();
            b.extend_from_slice(&img.ids);
            Saved {
                bytes: Arc::new(b),
                ids: keys.end..keys.end + img.ids.len(),
                keys,
                id_width: img.id_width,
            }
        }
    }
}

impl Firmware for SelfSort {
    fn name(&self) -> &str {
        "self-sort"
    }

    fn before(&self, fw: &FirmwareContext<'_>, io: &Io<'_>) -> Result<Decision> {
        let mut st = self.lock();
        if st.area.is_none() {
            return Ok(Decision::Pass);
        }
        match *io {
            Io::WriteLba { lba, data } => io::write(&mut st, fw, lba, data),
            Io::ReadLba { lba, blocks } => io::read(&mut st, fw, lba, blocks),
            Io::TrimLba { lba, blocks } => io::trim(&mut st, fw, lba, blocks),
            _ => Ok(Decision::Pass),
        }
    }
}
