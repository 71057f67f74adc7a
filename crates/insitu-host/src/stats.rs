//! `stats`: space, wear, write amplification, device memory and counters of every device.

use insitu_device::protocol::{Identify, RawIdentify};
use serde_json::{json, Value};

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::units::human_bytes;

/// Per-device figures as JSON, and as text.
pub fn stats(array: &Array) -> Result<(Value, String)> {
    let mut devices = Vec::new();
    let mut text = format!(
        "array {}: {} x {} ({} each), stripe unit {}\n",
        array.dir().display(),
        array.device_count(),
        array.profile().name,
        human_bytes(array.config().capacity_bytes),
        human_bytes(array.config().stripe_unit)
    );
    for (i, why) in array.offline() {
        text.push_str(&format!("dev{i}: offline: {why}\n"));
        devices.push(json!({ "device": i, "offline": why }));
    }
    for d in array.devices() {
        let p = d.call(Identify).map_err(HostError::device(d.id()))?;
        let c = d.counters().map_err(HostError::device(d.id()))?;
        let f = &p.flash;
        let ps = f.geometry.page_size as u64;
        // Pages the block view holds (written through `lba`, an index's records) and those firmware keeps
        // for itself (the Self-Sorting SSD's area, its command LBA) are used too, but by no object.
        let block_view = match f.raw_pages {
            0 => String::new(),
            n => format!(" + {} for the block view and firmware", human_bytes(n * ps)),
        };
        text.push_str(&format!(
            "dev{}: {} used of {} ({} in {}{block_view}), {} free blocks, WA {:.3}, erase counts min/mean/max {}/{:.2}/{}, device memory {}\n",
            d.id(),
            human_bytes((f.object_pages + f.raw_pages) * ps),
            human_bytes(f.logical_pages * ps),
            human_bytes(f.object_pages * ps),
            crate::units::count(f.objects, "object"),
            f.free_blocks,
            f.write_amplification,
            f.wear.min_erase_count,
            f.wear.mean_erase_count,
            f.wear.max_erase_count,
            human_bytes(p.memory_bytes),
        ));
        // An appliance node's raw partition (BlueDBM's file system, `insitu fs`), beside its FTL.
        let raw = match d.call(RawIdentify) {
            Ok(r) => {
                let total = r.cards as u64
                    * r.buses_per_card as u64
                    * r.chips_per_bus as u64
                    * r.blocks_per_chip
                    * r.pages_per_block as u64;
                let programmed: u64 = r.written.iter().map(|(_, n)| *n as u64).sum();
                let ps = r.page_size as u64;
                text.push_str(&format!(
                    "dev{} raw flash (file system): {} programmed of {} ({} of {} blocks written), {} erases\n",
                    d.id(),
                    human_bytes(programmed * ps),
                    human_bytes(total * ps),
                    r.written.len(),
                    total / r.pages_per_block as u64,
                    r.erases
                ));
                json!({ "programmed_pages": programmed, "pages": total, "page_size": ps,
                        "written_blocks": r.written.len(), "erases": r.erases })
            }
            Err(_) => serde_json::Value::Null,
        };
        devices.push(json!({ "device": d.id(), "properties": p, "counters": c, "raw_flash": raw }));
    }
    let (disk, apparent) = disk_use(array.dir());
    text.push_str(&format!(
        "on disk: {} ({} apparent: the NAND images are sparse files, only written pages take space)\n",
        human_bytes(disk),
        human_bytes(apparent)
    ));
    Ok((
        json!({ "devices": devices, "disk_bytes": disk, "apparent_bytes": apparent }),
        text.trim_end().to_string(),
    ))
}

/// Bytes the files under `dir` take on disk, and their apparent size (sparse files take less).
pub fn disk_use(dir: &std::path::Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut disk, mut apparent) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                disk += m.blocks() * 512;
                apparent += m.len();
            }
        }
    }
    (disk, apparent)
}
