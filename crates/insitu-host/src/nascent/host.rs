//! NASCENT's baselines: the host CPU (every part crosses the host link, the host sorts and shuffles it,
//! the sorted part crosses back) and one accelerator beside the host serving the devices one at a time
//! (the paper's FPGA baseline; its work is measured here and priced as the accelerator). Both run the same
//! kernels as the devices, with the algorithm asked for.

use insitu_kernels::gather::{gather_fixed, gather_var};
use insitu_kernels::keys::{sort_byte_keys, sort_key_bytes};
use insitu_kernels::le;
use insitu_kernels::rowkey::{FieldKey, KeyForm};

use insitu_device::work::{self, Ledger, SortClass};

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::model::HostWork;
use crate::nascent::job::SortJob;
use crate::report::Measure;
use crate::table::info::PartInfo;
use crate::table::store::{read_key, read_rows, write_object_with, HostKey};

/// Sorts one part on the host: the objects of the sorted part, by name suffix.
fn sort_part(
    job: &SortJob<'_>,
    p: &PartInfo,
    key: &HostKey,
    rows: &[u8],
    offsets: &[u64],
    work: &mut Ledger,
) -> Result<Vec<(&'static str, Vec<u8>)>> {
    let order: Vec<u32> = match job.by {
        Some(field) => sort_by_field(field, job, rows, offsets, work)?,
        None => sort_stored_key(job, p, key, work)?,
    };
    let mut objects: Vec<(&'static str, Vec<u8>)> = Vec::new();
    match p.row_size {
        Some(rs) => objects.push(("rows", gather_fixed(rows, rs as usize, &order))),
        None => {
            let (d, o) = gather_var(rows, offsets, &order);
            objects.push(("rows", d));
            objects.push(("rowoff", le::encode_u64s(&o)));
        }
    }
    match key {
        HostKey::Plain(k) => objects.push(("key", gather_fixed(k, p.key_width(), &order))),
        HostKey::Dict { dictionary, codes } => {
            let cw = codes.bits() as usize / 8;
            objects.push(("dict", le::encode_u64s(dictionary)));
            objects.push(("codes", gather_fixed(&codes.to_bytes(), cw, &order)));
        }
        HostKey::Bytes { data, offsets } => {
            let (d, offs) = gather_var(data, offsets, &order);
            objects.push(("key", d));
            objects.push(("keyoff", le::encode_u64s(&offs)));
        }
    }
    // The shuffle, counted as the device counts its `gather` calls: the rows, then the key column, each
    // gathered by the sorted order (offsets are written in sequence and the dictionary is copied whole).
    let gathered: u64 = objects
        .iter()
        .filter(|(s, _)| matches!(*s, "rows" | "key" | "codes"))
        .map(|(_, d)| d.len() as u64)
        .sum();
    work::add(work, work::GATHER_ROWS, 2 * order.len() as u64);
    work::add(work, work::GATHER_BYTES, gathered);
    Ok(objects)
}
/// The sorted order of a part by a field of its rows: the field pulled out of every row as the device's
/// `extract-key` does (and counted as it counts it), then sorted.
fn sort_by_field(
    field: &FieldKey,
    job: &SortJob<'_>,
    rows: &[u8],
    offsets: &[u64],
    work: &mut Ledger,
) -> Result<Vec<u32>> {
    let damaged = |detail: String| HostError::Damaged { name: job.table.into(), detail };
    field.validate().map_err(|e| HostError::InvalidArgument(e.to_string()))?;
    let mut data = Vec::new();
    let mut ends = vec![0u64];
    for (i, w) in offsets.windows(2).enumerate() {
        let row = rows
            .get(w[0] as usize..w[1] as usize)
            .ok_or_else(|| damaged(format!("row {i} is past the rows")))?;
        field.push(row, &mut data).map_err(|e| damaged(format!("row {i}: {e}")))?;
        ends.push(data.len() as u64);
    }
    let n = ends.len() as u64 - 1;
    work::add(work, work::GATHER_ROWS, n);
    work::add(work, work::GATHER_BYTES, data.len() as u64);
    Ok(match field.form() {
        KeyForm::Plain(kt) => {
            SortClass::count(work, work::SORT, kt.width() as u32 * 8, n);
            sort_key_bytes(&data, kt, 0, job.algo).rows()
        }
        KeyForm::Bytes => {
            let keys: Vec<&[u8]> = ends.windows(2).map(|w| &data[w[0] as usize..w[1] as usize]).collect();
            SortClass::count(work, work::SORT, 64, n);
            sort_byte_keys(&keys, 0, job.algo)
        }
    })
}

/// The sorted order of a part by its stored key column.
fn sort_stored_key(job: &SortJob<'_>, p: &PartInfo, key: &HostKey, work: &mut Ledger) -> Result<Vec<u32>> {
    let damaged = |detail: String| HostError::Damaged { name: job.table.into(), detail };
    Ok(match key {
        HostKey::Bytes { data, offsets } => {
            let keys: Vec<&[u8]> = offsets.windows(2).map(|w| &data[w[0] as usize..w[1] as usize]).collect();
            SortClass::count(work, work::SORT, 64, keys.len() as u64);
            sort_byte_keys(&keys, 0, job.algo)
        }
        HostKey::Plain(bytes) => {
            let kt = p.key.key_type().ok_or_else(|| damaged("a plain key without a type".into()))?;
            SortClass::count(work, work::SORT, kt.width() as u32 * 8, (bytes.len() / kt.width()) as u64);
            sort_key_bytes(bytes, kt, 0, job.algo).rows()
        }
        HostKey::Dict { dictionary, codes } => {
            let kt = p.key.key_type().ok_or_else(|| damaged("a dictionary key without a type".into()))?;
            let bytes = kt.decode_dict(dictionary, codes).map_err(|e| damaged(e.to_string()))?;
            work::add(work, work::DECODE_CODES, codes.len() as u64);
            work::add(work, work::DECODE_OUT_BYTES, bytes.len() as u64);
            SortClass::count(work, work::SORT, kt.width() as u32 * 8, codes.len() as u64);
            sort_key_bytes(&bytes, kt, 0, job.algo).rows()
        }
    })
}

/// Host (or accelerator) placement. Both serve one device after another, as this loop does and as the
/// paper's baselines did ("not able to parallelize the operations on different SSDs", §4.3), and for each
/// device read its part, sort and shuffle it, and write it back one step after the other: three phases a
/// device.
pub(crate) fn sort_on_host(
    array: &Array,
    job: &SortJob<'_>,
    accel: bool,
    measure: &mut Measure,
) -> Result<Vec<PartInfo>> {
    if accel && array.profile().host.accelerator.is_none() {
        let host = &array.profile().host.name;
        return Err(HostError::InvalidArgument(format!(
            "host {host} has no accelerator beside it (its profile has no [accelerator]): the host-accel \
             placement needs one; i7-8700 has NASCENT's Alveo U250"
        )));
    }
    array.progress().stage("sort", Some(job.devices.len() as u64), "parts");
    for (i, dev) in job.devices.iter().enumerate() {
        let (p, dev) = (&job.info.parts[i], *dev);
        let (rows, offsets) = read_rows(array, dev, job.table, p)?;
        let key = read_key(array, dev, job.table, p)?;
        // The accelerator's host program reads and writes the part (its own storage stack, if any).
        let io = || if accel { HostWork::default().on_accelerator(0) } else { HostWork::default() };
        measure.phase(&format!("dev{dev} read"), array, io())?;
        let mut part_work = Ledger::new();
        let objects = sort_part(job, p, &key, &rows, &offsets, &mut part_work)?;
        let moved: u64 = objects.iter().map(|(_, d)| d.len() as u64).sum::<u64>() * 2;
        let mut on = HostWork::counted(part_work);
        if accel {
            on = on.on_accelerator(moved);
        }
        measure.phase(&format!("dev{dev} sort"), array, on)?;
        for (suffix, data) in &objects {
            let attrs = match *suffix {
                "rows" => {
                    crate::catalog::part_attrs(job.out_kind, i, job.devices, array.catalog().generation)
                }
                _ => Default::default(),
            };
            write_object_with(array, dev, &format!("{}#{suffix}", job.out), "table-part", data, attrs)?;
        }
        measure.phase(&format!("dev{dev} write"), array, io())?;
        array.progress().add(1);
    }
    Ok(job.info.parts.clone())
}
