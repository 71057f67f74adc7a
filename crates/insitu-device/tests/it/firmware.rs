//! The I/O-path extension point: a resident firmware extension observes host writes and redirects host
//! reads, and the FTL underneath never knows (a toy Self-Sorting SSD: pages are records whose first 8
//! bytes are a key; reads of the indexed range return the records in key order).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use insitu_device::firmware::{Decision, Firmware, FirmwareContext, Io};
use insitu_device::memory::MemReservation;
use insitu_device::protocol::{Append, Commit, CreateObject, Fsck, Identify, Read, ReadLba, WriteLba};
use insitu_device::{transport, Device, Result};

use crate::format;

/// (key, lba) of every record written into the range, and the device memory the index takes.
#[derive(Debug, Default)]
struct Index(BTreeMap<(u64, u64), ()>, Vec<MemReservation>);

#[derive(Debug, Default)]
struct SortedView {
    index: Mutex<Index>,
    objects_seen: Mutex<Vec<(String, u64, usize)>>,
}

const BASE: u64 = 100;
const RECORDS: u64 = 5;

impl Firmware for SortedView {
    fn name(&self) -> &str {
        "sorted-view"
    }

    fn before(&self, fw: &FirmwareContext<'_>, io: &Io<'_>) -> Result<Decision> {
        let ps = fw.page_size() as usize;
        Ok(match *io {
            Io::ReadLba { lba: BASE, blocks: RECORDS } => {
                let index = self.index.lock().unwrap();
                let mut out = vec![0u8; RECORDS as usize * ps];
                for (i, ((_, lba), _)) in index.0.iter().enumerate().take(RECORDS as usize) {
                    fw.read_lba(*lba, &mut out[i * ps..(i + 1) * ps])?;
                }
                Decision::Done(out)
            }
            _ => Decision::Pass,
        })
    }

    fn after(&self, fw: &FirmwareContext<'_>, io: &Io<'_>) -> Result<()> {
        match *io {
            Io::WriteLba { lba, data } if (BASE..BASE + RECORDS).contains(&lba) => {
                let mut index = self.index.lock().unwrap();
                for (i, page) in data.chunks(fw.page_size() as usize).enumerate() {
                    let key = u64::from_le_bytes(page[..8].try_into().unwrap());
                    index.0.insert((key, lba + i as u64), ());
                    index.1.push(fw.reserve(16)?);
                }
            }
            Io::Append { object, offset, data } => {
                self.objects_seen.lock().unwrap().push((object.to_string(), offset, data.len()));
            }
            _ => {}
        }
        Ok(())
    }
}

fn record(key: u64, fill: u8) -> Vec<u8> {
    let mut page = vec![fill; 4096];
    page[..8].copy_from_slice(&key.to_le_bytes());
    page
}

#[test]
fn an_extension_observes_writes_and_redirects_reads_without_the_ftl_knowing() {
    let dir = tempfile::tempdir().unwrap();
    let device = format(dir.path(), 0);
    let view = Arc::new(SortedView::default());
    device.install_firmware(view.clone());
    let dev = transport::in_process(device);
    let free = dev.call(Identify).unwrap().memory_available;
    let keys = [40u64, 10, 50, 20, 30];
    for (i, k) in keys.iter().enumerate() {
        dev.call(WriteLba { lba: BASE + i as u64, data: record(*k, i as u8) }).unwrap();
    }
    let props = dev.call(Identify).unwrap();
    assert_eq!(props.firmware, vec!["self-sort", "sorted-view"], "after the resident Self-Sort");
    assert_eq!(props.memory_available, free - 5 * 16, "the index lives in device memory");
    // The indexed range reads back in key order; its neighbours read as stored.
    let sorted = dev.call(ReadLba { lba: BASE, blocks: RECORDS }).unwrap();
    let got: Vec<u64> = sorted.chunks(4096).map(|p| u64::from_le_bytes(p[..8].try_into().unwrap())).collect();
    assert_eq!(got, vec![10, 20, 30, 40, 50]);
    let one = dev.call(ReadLba { lba: BASE, blocks: 1 }).unwrap();
    assert_eq!(one, record(40, 0), "other reads pass to the FTL");
    // Object writes pass through it too.
    let txn = dev
        .call(CreateObject {
            name: "o".into(),
            kind: "blob".into(),
            attrs: Default::default(),
            expected_size: None,
        })
        .unwrap();
    dev.call(Append { txn, data: vec![1; 5000] }).unwrap();
    dev.call(Append { txn, data: vec![2; 3000] }).unwrap();
    dev.call(Commit { txn }).unwrap();
    assert_eq!(*view.objects_seen.lock().unwrap(), vec![("o".into(), 0, 5000), ("o".into(), 5000, 3000)]);
    assert_eq!(dev.call(Read { name: "o".into(), offset: 4999, len: 2, buf: vec![] }).unwrap(), vec![1, 2]);
    assert!(dev.call(Fsck).unwrap().problems.is_empty());
    dev.close().unwrap();
    drop(dev);
    // The FTL stored the records where the host wrote them: without the extension, they read as written.
    let plain = transport::in_process(Device::open(dir.path()).unwrap());
    let raw = plain.call(ReadLba { lba: BASE, blocks: RECORDS }).unwrap();
    let got: Vec<u64> = raw.chunks(4096).map(|p| u64::from_le_bytes(p[..8].try_into().unwrap())).collect();
    assert_eq!(got, keys);
}
