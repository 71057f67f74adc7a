//! PSACS's software baselines (§V): every part crosses the host link, N host threads group its records by
//! sorting (PID, RowID) pairs (Spark's SortShuffleWriter) or by appending them to P buckets
//! (BypassMergeSortShuffleWriter), encode the partitions, and the partitions cross back.

use insitu_kernels::partition::partition_of;
use insitu_kernels::shuffle::{
    compose_records, encode_partition, group_records, index_entry, record_format, record_key, Codec, Grouped,
    ShuffleError, ShuffleSpec, StoredKey,
};

use insitu_device::work::{self, Ledger, SortClass};

use crate::array::Array;
use crate::error::{HostError, Result};
use crate::model::HostWork;
use crate::psacs::job::ShuffleJob;
use crate::psacs::options::ShufflePlacement;
use crate::report::Measure;
use crate::table::info::PartInfo;
use crate::table::store::{read_key, read_rows, write_object, write_object_with, HostKey};

/// Runs `f(0..threads)` on scoped threads and collects the results in thread order.
fn on_threads<T: Send>(threads: usize, f: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..threads).map(|t| s.spawn(move || f(t))).collect();
        handles.into_iter().map(|h| h.join().expect("shuffle thread panicked")).collect()
    })
}

/// A failure of a shared shuffle step run on the host (a record that does not match its format).
fn host_step(table: &str) -> impl Fn(ShuffleError) -> HostError + '_ {
    move |e| HostError::Damaged { name: table.into(), detail: e.to_string() }
}

/// The part's key column as the Reader takes it.
fn stored_key(p: &PartInfo, key: HostKey) -> StoredKey {
    let width = p.key_width();
    match key {
        HostKey::Plain(data) => StoredKey::Plain { data, width },
        HostKey::Dict { dictionary, codes } => StoredKey::Dict { dictionary, codes, width },
        HostKey::Bytes { data, offsets } => StoredKey::Bytes { data, offsets },
    }
}

/// An encoded partition: its rows, its compressed chunks, its bytes before compression.
type EncodedPartition = (u64, Vec<Vec<u8>>, u64);

/// Bucket-based grouping: one growing buffer per partition (memory grows with P).
fn bucket_group(
    records: &[u8],
    offsets: &[u64],
    spec: &ShuffleSpec,
) -> std::result::Result<Grouped, ShuffleError> {
    let mut buckets: Vec<(Vec<u8>, Vec<u64>)> = vec![(Vec::new(), Vec::new()); spec.partitions as usize];
    let (mut key, mut ranges) = (Vec::new(), Vec::new());
    for w in offsets.windows(2) {
        let rec = &records[w[0] as usize..w[1] as usize];
        record_key(rec, spec, &mut key, &mut ranges)?;
        let b = &mut buckets[partition_of(spec.hash, &key, spec.partitions) as usize];
        b.0.extend_from_slice(rec);
        b.1.push(b.0.len() as u64);
    }
    let mut g =
        Grouped { records: Vec::with_capacity(records.len()), offsets: vec![0u64], extents: vec![0u64] };
    for (d, o) in buckets {
        let base = g.records.len() as u64;
        g.records.extend_from_slice(&d);
        g.offsets.extend(o.iter().map(|x| x + base));
        g.extents.push(g.offsets.len() as u64 - 1);
    }
    Ok(g)
}

/// Runs the baseline asked for with `threads` host threads; returns (bytes stored, bytes before
/// compression).
pub(crate) fn shuffle_on_host(
    array: &Array,
    job: &ShuffleJob<'_>,
    threads: usize,
    measure: &mut Measure,
) -> Result<(u64, u64)> {
    let ShuffleJob { table, out, devices, info, rf, fields, float_fields, opts, out_kind } = *job;
    let (mut stored, mut raw) = (0u64, 0u64);
    let mut work = Ledger::new();
    array.progress().stage("shuffle", Some(devices.len() as u64), "parts");
    for (i, dev) in devices.iter().enumerate() {
        let p = &info.parts[i];
        let key = stored_key(p, read_key(array, *dev, table, p)?);
        let spec = ShuffleSpec {
            partitions: opts.partitions,
            hash: opts.hash,
            layout: opts.layout,
            codec: opts.codec,
            format: record_format(rf, key.field_kind()),
            key_fields: fields.to_vec(),
            float_fields: float_fields.to_vec(),
        };
        // The Reader, on the host.
        let (rows, offs) = read_rows(array, *dev, table, p)?;
        let (records, offsets) = compose_records(&rows, &offs, rf.bitmap, &key).map_err(host_step(table))?;
        drop(rows);
        let n = offsets.len() - 1;
        let per = n.div_ceil(threads).max(1);
        // The work, as the device counts it: a dictionary key decoded by the Reader; per thread, keys
        // hashed, (PID, RowID) pairs sorted (sort-based grouping) and records gathered; partitions
        // concatenated across threads and encoded.
        if matches!(key, StoredKey::Dict { .. }) {
            work::add(&mut work, work::DECODE_CODES, n as u64);
        }
        for t in 0..threads {
            let share = (((t + 1) * per).min(n) - (t * per).min(n)) as u64;
            work::add(&mut work, work::SHUFFLE_HASH_ROWS, share);
            if opts.placement != ShufflePlacement::HostBucket {
                SortClass::count(&mut work, work::SHUFFLE_SORT, 64, share);
            }
        }
        work::add(&mut work, work::SHUFFLE_GATHER_ROWS, n as u64);
        work::add(&mut work, work::SHUFFLE_GATHER_BYTES, records.len() as u64);
        if threads > 1 {
            // Each partition is concatenated from every thread's share (the device's Merger does this
            // across batches, and counts it the same way).
            work::add(&mut work, work::SHUFFLE_MERGE_BYTES, records.len() as u64);
        }
        if opts.codec != Codec::None {
            work::add(&mut work, work::ENCODE_BYTES, records.len() as u64);
        }
        // Each thread groups its share of the records.
        let grouped: Vec<Grouped> = on_threads(threads, |t| {
            let (lo, hi) = ((t * per).min(n), ((t + 1) * per).min(n));
            let base = offsets[lo];
            let o: Vec<u64> = offsets[lo..=hi].iter().map(|x| x - base).collect();
            let r = &records[base as usize..offsets[hi] as usize];
            match opts.placement {
                ShufflePlacement::HostBucket => bucket_group(r, &o, &spec),
                _ => group_records(r, &o, &spec),
            }
            .map_err(host_step(table))
        })?;
        // Each thread then encodes a range of partitions, concatenating every thread's share of them.
        let parts_per = (opts.partitions as usize).div_ceil(threads).max(1);
        let encoded: Vec<Vec<EncodedPartition>> = on_threads(threads, |t| {
            let lo = (t * parts_per).min(spec.partitions as usize);
            let hi = ((t + 1) * parts_per).min(spec.partitions as usize);
            (lo..hi)
                .map(|p| {
                    let mut recs = Vec::new();
                    let mut offs = vec![0u64];
                    for g in &grouped {
                        g.append_partition(p, &mut recs, &mut offs);
                    }
                    let chunks = encode_partition(&recs, &offs, &spec).map_err(host_step(table))?;
                    Ok((offs.len() as u64 - 1, chunks, recs.len() as u64))
                })
                .collect()
        })?;
        let mut data = Vec::new();
        let mut index = Vec::new();
        for (rows, chunks, r) in encoded.into_iter().flatten() {
            index_entry(&mut index, rows, data.len() as u64, &chunks);
            for c in &chunks {
                data.extend_from_slice(c);
            }
            raw += r;
        }
        stored += data.len() as u64;
        let attrs = crate::catalog::part_attrs(out_kind, i, devices, array.catalog().generation);
        write_object_with(array, *dev, &format!("{out}#data"), "shuffle-data", &data, attrs)?;
        write_object(array, *dev, &format!("{out}#index"), "shuffle-index", &index)?;
        array.progress().add(1);
    }
    measure.phase("shuffle", array, HostWork::counted(work).on_threads(threads as u32))?;
    Ok((stored, raw))
}
