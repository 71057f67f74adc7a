//! The PSACS shuffle operator: `insitu shuffle T --key COL[,COL] --partitions P [--placement
//! device|host-sort|host-bucket] [--threads N] [--hash zigzag-fold|xxh3] [--layout column|row] [--out S]`
//! writes, on every device, the device's rows grouped into P partitions (`S#data` + `S#index`).
//!
//! - `device`: the `psacs-shuffle` program on every device at once; only commands cross the host link.
//! - `host-sort` / `host-bucket`: the software baselines of §V (Spark's SortShuffleWriter and
//!   BypassMergeSortShuffleWriter): every part crosses the host link, N host threads partition it by
//!   sorting (PID, RowID) pairs or by appending records to P buckets, and the partitions cross back.
//!
//! All placements produce the same multiset of rows in every partition; the steps are
//! `insitu_kernels::shuffle`'s, so the bytes are computed by the same code.

use insitu_kernels::columnar::{FieldKind, RecordFormat};
use insitu_kernels::shuffle::Codec;
use serde_json::json;

use crate::array::{validate_table_name, Array};
use crate::catalog::{EntryKind, ObjectEntry};
use crate::error::{HostError, Result};
use crate::psacs::info::ShuffleInfo;
use crate::psacs::job::ShuffleJob;
use crate::psacs::options::{ShuffleOptions, ShufflePlacement};
use crate::report::{Measure, Report};
use crate::table::schema::{ColType, TableSchema};
use crate::units::human_bytes;

/// The row format of a table part, as `b?,f?,v,...` (see `insitu_kernels::columnar`).
pub fn row_format(schema: &TableSchema, key: usize) -> RecordFormat {
    let cols: Vec<usize> = (0..schema.columns.len()).filter(|c| *c != key).collect();
    let bitmap = if cols.iter().any(|c| schema.columns[*c].nullable) { cols.len().div_ceil(8) } else { 0 };
    RecordFormat {
        bitmap,
        fields: cols
            .iter()
            .map(|c| schema.columns[*c].ty.fixed_width().map_or(FieldKind::Var, FieldKind::Fixed))
            .collect(),
    }
}

/// Record fields of the shuffle key columns: the table's key column is field 0, the others follow in
/// schema order.
fn key_fields(schema: &TableSchema, key: usize, names: &[String]) -> Result<Vec<usize>> {
    names
        .iter()
        .map(|n| {
            let c = schema.index_of(n)?;
            Ok(if c == key {
                0
            } else {
                1 + (0..schema.columns.len()).filter(|x| *x != key && *x < c).count()
            })
        })
        .collect()
}

/// Shuffles table `name`.
pub fn shuffle_table(array: &mut Array, name: &str, opts: &ShuffleOptions) -> Result<Report> {
    let (entry, info) = array.table_entry(name)?;
    let (entry, info) = (entry.clone(), info.clone());
    if opts.partitions == 0 || opts.partitions > 1 << 24 {
        return Err(HostError::InvalidArgument(format!(
            "--partitions must be 1 to 2^24 (16,777,216), not {}",
            opts.partitions
        )));
    }
    if opts.keys.is_empty() {
        return Err(HostError::InvalidArgument("--key needs at least one column".into()));
    }
    if let Some((i, k)) = opts.keys.iter().enumerate().find(|(i, k)| opts.keys[..*i].contains(k)) {
        // A column twice adds nothing to a key, and the zigzag fold XORs its bytes away: every row would
        // land in one partition.
        return Err(HostError::InvalidArgument(format!(
            "--key names column {k:?} twice (positions {} and {}): name each key column once",
            opts.keys.iter().position(|x| x == k).unwrap_or(0) + 1,
            i + 1
        )));
    }
    let fields = key_fields(&info.schema, info.key, &opts.keys)?;
    let float_fields: Vec<usize> = opts
        .keys
        .iter()
        .zip(&fields)
        .filter(|(n, _)| {
            let c = info.schema.index_of(n).expect("a key column, found above");
            matches!(info.schema.columns[c].ty, ColType::F32 | ColType::F64)
        })
        .map(|(_, f)| *f)
        .collect();
    let out = opts.out.clone().unwrap_or_else(|| format!("{name}.shuffled"));
    validate_table_name(&out)?;
    array.check_free(&out)?;
    let rf = row_format(&info.schema, info.key);
    if !(1..=256).contains(&opts.threads) {
        return Err(HostError::InvalidArgument(format!("--threads must be 1 to 256, not {}", opts.threads)));
    }
    let threads = opts.threads;
    let op = format!("shuffle ({})", opts.placement.name());
    let mut measure = Measure::start(&op, array)?;
    let sinfo = ShuffleInfo {
        source: name.into(),
        schema: info.schema.clone(),
        key: info.key,
        parts: info.parts.clone(),
        record_format: rf.clone(),
        partitions: opts.partitions,
        layout: opts.layout,
        codec: opts.codec,
        hash: opts.hash,
        keys: opts.keys.clone(),
    };
    let out_kind = EntryKind::Shuffle(sinfo);
    let job = ShuffleJob {
        table: name,
        out: &out,
        devices: &entry.devices,
        info: &info,
        rf: &rf,
        fields: &fields,
        float_fields: &float_fields,
        opts,
        out_kind: &out_kind,
    };
    let result = match opts.placement {
        ShufflePlacement::Device => crate::psacs::device::shuffle_on_devices(array, &job),
        _ => crate::psacs::host::shuffle_on_host(array, &job, threads, &mut measure),
    };
    let (stored, raw) = match result {
        Ok(x) => x,
        Err(e) => {
            for d in &entry.devices {
                crate::table::store::delete_quietly(
                    array,
                    *d,
                    ["data", "index"].map(|s| format!("{out}#{s}")),
                );
            }
            return Err(e);
        }
    };
    array.faults.hit("shuffle-before-catalog");
    array.commit_entry(ObjectEntry {
        name: out.clone(),
        size: stored,
        stripe_unit: 0,
        devices: entry.devices.clone(),
        kind: out_kind,
        commits: Vec::new(),
    })?;
    let rows: u64 = info.parts.iter().map(|p| p.rows).sum();
    let ratio = raw as f64 / stored.max(1) as f64;
    // More partitions than rows leaves most of them empty and costs an index entry each.
    let mut warnings = Vec::new();
    if opts.partitions as u64 > rows.max(1) {
        warnings.push(format!(
            "{} partitions for {rows} rows: most are empty (each still costs index space and merge work)",
            opts.partitions
        ));
    }
    // An option the placement does not use is said, not refused: a script may run every placement alike.
    let device = opts.placement == ShufflePlacement::Device;
    if device && threads != 1 {
        warnings.push(format!(
            "threads ({threads}) are the host baselines' (host-sort, host-bucket), unused here: each device shuffles its own part"
        ));
    }
    warnings.extend(array.memory_budget_warning(opts.memory_budget, device));
    let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
    let result = json!({
        "table": name, "out": out, "keys": opts.keys, "partitions": opts.partitions, "placement": opts.placement,
        "threads": (!device).then_some(threads), "hash": opts.hash.name(), "rows": rows, "stored_bytes": stored, "raw_bytes": raw,
        "compression": opts.codec.name(), "compression_ratio": ratio, "warning": warning,
    });
    let headline = format!(
        "{op}: {rows} rows of {name} into {} partitions by {} ({}), {} stored ({}) as {out}",
        opts.partitions,
        json!(opts.keys),
        opts.hash.name(),
        human_bytes(stored),
        match opts.codec {
            Codec::Lz4 => format!("LZ4, {ratio:.2}x compression"),
            Codec::None => "uncompressed".into(),
        },
    );
    let mut report = measure.finish(array, headline, result)?;
    report.warnings.extend(warnings);
    // A part tiled into small batches has each batch's piece of a partition smaller than a flash page, and
    // the merge reads a page for each: say so, with the way out, when it reads far more than it moves.
    let b = &report.bytes;
    if device && opts.memory_budget.is_some() && b.flash_read > 2 * b.flash_to_device_mem.max(1) {
        let w = format!(
            "the memory budget cut the parts into batches whose pieces of a partition are smaller than a flash \
             page: {} of pages read for {} of data; a larger --memory-budget reads less",
            human_bytes(b.flash_read),
            human_bytes(b.flash_to_device_mem)
        );
        report.result["warning"] = json!(match report.result["warning"].as_str() {
            Some(earlier) => format!("{earlier}; {w}"),
            None => w.clone(),
        });
        report.warnings.push(w);
    }
    Ok(report)
}
