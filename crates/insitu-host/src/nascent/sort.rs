//! The NASCENT sort operator: `insitu sort T --key COL [--placement device|host|host-accel] [--algo
//! fast|bitonic]`.
//!
//! - `device`: every device sorts its own part at once (SSD-level parallelism, §3.2): the `sort` program
//!   turns the key column into sorted indices (out of core through flash when device memory is short),
//!   then `gather` programs, several at a time on the compute units (§3.5), shuffle the rows and the key
//!   column into the output part; only commands and a few offsets cross the host link.
//! - `host`: the conventional system: every part crosses the host link, the host CPU sorts and shuffles
//!   it, and the sorted part crosses back.
//! - `host-accel`: one accelerator beside the host (NASCENT's FPGA baseline), serving one device at a time.
//!
//! All write the output table `--out` (default `T.sorted`) part by part, and the same table. With
//! `--merge`, the sorted parts are k-way merged at the host into one globally sorted Parquet file.

use insitu_kernels::keys::SortAlgo;
use serde::Serialize;
use serde_json::json;

use crate::array::{validate_table_name, Array};
use crate::catalog::{EntryKind, ObjectEntry};
use crate::error::Result;
use insitu_device::work::{self, Ledger};

use crate::model::HostWork;
use crate::nascent::job::SortJob;
use crate::report::{Measure, Report};
use crate::table::TableInfo;

/// Where the sort runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SortPlacement {
    Device,
    Host,
    /// One accelerator beside the host (NASCENT's FPGA baseline): each device's part crosses the shared
    /// bus to it and back, one device at a time. The work is measured here and priced as the accelerator.
    HostAccel,
}

impl SortPlacement {
    pub fn name(self) -> &'static str {
        match self {
            SortPlacement::Device => "device",
            SortPlacement::Host => "host",
            SortPlacement::HostAccel => "host-accel",
        }
    }
}

/// Options of `sort`.
#[derive(Debug, Clone)]
pub struct SortOptions {
    pub key: String,
    pub placement: SortPlacement,
    pub algo: SortAlgo,
    pub out: Option<String>,
    /// Write the globally merged table here.
    pub merge: Option<std::path::PathBuf>,
    /// Cap on the device memory the sort program may use (to exercise out-of-core sorting).
    pub memory_budget: Option<u64>,
}

/// Sorts table `name`.
pub fn sort_table(array: &mut Array, name: &str, opts: &SortOptions) -> Result<Report> {
    let (entry, info) = array.table_entry(name)?;
    let (entry, info) = (entry.clone(), info.clone());
    // A column other than the stored key is pulled out of the rows first (`extract-key`), and costs one
    // more pass over them; the output keeps the input's layout and records the column it is sorted by.
    let column = info.schema.index_of(&opts.key)?;
    let by = match column == info.key {
        true => None,
        false => Some(crate::table::layout::field_key(&info.schema, info.key, column)?),
    };
    let out = opts.out.clone().unwrap_or_else(|| format!("{name}.sorted"));
    validate_table_name(&out)?;
    array.check_free(&out)?;
    if let Some(path) = &opts.merge {
        crate::table::export::ParquetFile::check_path(path)?;
    }
    let op = format!("sort ({})", opts.placement.name());
    let mut measure = Measure::start(&op, array)?;
    let sorted_by = by.is_some().then_some(column);
    let out_kind = EntryKind::Table(TableInfo { parts: Vec::new(), sorted: true, sorted_by, ..info.clone() });
    let job = SortJob {
        table: name,
        out: &out,
        devices: &entry.devices,
        info: &info,
        algo: opts.algo,
        by: by.as_ref(),
        out_kind: &out_kind,
    };
    let parts = match opts.placement {
        SortPlacement::Device => {
            crate::nascent::device::sort_on_devices(array, &job, opts.memory_budget, &mut measure)
        }
        SortPlacement::Host => crate::nascent::host::sort_on_host(array, &job, false, &mut measure),
        SortPlacement::HostAccel => crate::nascent::host::sort_on_host(array, &job, true, &mut measure),
    };
    let parts = match parts {
        Ok(p) => p,
        Err(e) => {
            cleanup(array, &entry.devices, &out);
            return Err(e);
        }
    };
    let rows: u64 = parts.iter().map(|p| p.rows).sum();
    array.commit_entry(ObjectEntry {
        name: out.clone(),
        size: entry.size,
        stripe_unit: 0,
        devices: entry.devices.clone(),
        kind: EntryKind::Table(TableInfo { parts, sorted: true, sorted_by, ..info.clone() }),
        commits: Vec::new(),
    })?;
    let mut result = json!({
        "table": name, "out": out, "key": opts.key, "placement": opts.placement, "algo": opts.algo, "rows": rows,
    });
    let mut headline =
        format!("{op}: {rows} rows of {name} by {} ({}) into {out}", opts.key, opts.algo.name());
    if by.is_some() {
        let stored = &info.schema.columns[info.key].name;
        headline.push_str(&format!(
            "\n  {} is stored row-wise (the key column is {stored}): its values were pulled out of every row \
             first (phase extract), nulls sort last",
            opts.key
        ));
        result["extracted"] = json!(true);
    }
    let warning = array.memory_budget_warning(opts.memory_budget, opts.placement == SortPlacement::Device);
    if let Some(w) = &warning {
        result["warning"] = json!(w);
    }
    if let Some(path) = &opts.merge {
        let merged = match crate::nascent::merge::merge_to_parquet(array, &out, path) {
            Ok(m) => m,
            Err(e) => {
                // The command failed: the sorted table it stored goes too, so a retry starts clean. Its
                // parts go only once the catalog no longer lists it.
                if array.remove_entry(&out).is_ok() {
                    cleanup(array, &entry.devices, &out);
                }
                return Err(e);
            }
        };
        // A k-way merge of the devices' parts, every row moved once into the merged order.
        let mut work = Ledger::new();
        work::count_merge(&mut work, entry.devices.len() as u64, merged);
        work::add(&mut work, work::GATHER_ROWS, merged);
        work::add(&mut work, work::GATHER_BYTES, entry.size);
        measure.phase("merge", array, HostWork::counted(work))?;
        result["merged"] = json!({ "output": path, "rows": merged });
        headline.push_str(&format!("\n  merged {merged} rows into {}", path.display()));
    } else if entry.devices.len() > 1 {
        headline.push_str(&format!(
            "\n  each device's part is sorted; `insitu get-table {out} --merged -o FILE` writes one globally \
             sorted file"
        ));
    }
    let mut report = measure.finish(array, headline, result)?;
    report.warnings.extend(warning);
    Ok(report)
}

/// Removes whatever a failed sort left of its output.
fn cleanup(array: &Array, devices: &[u32], out: &str) {
    for dev in devices {
        if let Ok(d) = array.device(*dev) {
            if let Ok(objs) = d.call(insitu_device::protocol::List) {
                let prefix = format!("{out}#");
                let names = objs.into_iter().filter(|o| o.name.starts_with(&prefix)).map(|o| o.name);
                crate::table::store::delete_quietly(array, *dev, names);
            }
        }
    }
}
