//! How results are shown: one JSON object with `--json`, a short readable summary otherwise.

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use insitu_device::{Command, Response};
use insitu_host::units::human_bytes;
use insitu_host::{Array, Report};
use serde_json::{json, Value};

/// Transfers smaller than this show no progress bar.
const PROGRESS_MIN_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub json: bool,
}

impl Output {
    /// A result without measured cost (init, stats, fsck...).
    pub fn plain(&self, op: &str, result: Value, text: &str) {
        if self.json {
            println!("{}", json!({ "op": op, "result": result }));
        } else {
            println!("{text}");
        }
    }

    pub fn report(&self, r: &Report) {
        if self.json {
            println!("{}", serde_json::to_string(r).expect("reports serialize"));
        } else {
            println!("{}", summary(r));
        }
    }

    /// For `get` to stdout: the data owns stdout.
    pub fn report_to_stderr(&self, r: &Report) {
        if self.json {
            eprintln!("{}", serde_json::to_string(r).expect("reports serialize"));
        } else {
            eprintln!("{}", summary(r));
        }
    }

    pub fn listing(&self, r: &Report) {
        if self.json {
            return self.report(r);
        }
        let objs = r.result["objects"].as_array().cloned().unwrap_or_default();
        if objs.is_empty() {
            println!("(no objects)");
        }
        for o in objs {
            println!(
                "{:<32} {:>12}  devices {}",
                o["name"].as_str().unwrap_or("?"),
                human_bytes(o["size"].as_u64().unwrap_or(0)),
                o["devices"]
            );
        }
    }
}

/// A progress bar on stderr (hidden when stderr is not a terminal or the transfer is small).
pub fn progress(total: u64, what: &str) -> ProgressBar {
    if total < PROGRESS_MIN_BYTES {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

fn headline(r: &Report) -> String {
    let res = &r.result;
    match r.op.as_str() {
        "put" => format!(
            "put {} ({}) on device(s) {}",
            res["name"].as_str().unwrap_or("?"),
            human_bytes(res["size"].as_u64().unwrap_or(0)),
            res["devices"]
        ),
        "get" => format!(
            "got {} ({})",
            res["name"].as_str().unwrap_or("?"),
            human_bytes(res["size"].as_u64().unwrap_or(0))
        ),
        "rm" => format!("removed {}", res["removed"].as_str().unwrap_or("?")),
        "put-table" => {
            let mut s = format!(
                "put-table {}: {} rows, {} columns, key {} ({}), rows per device {}",
                res["name"].as_str().unwrap_or("?"),
                res["rows"],
                res["columns"],
                res["key"].as_str().unwrap_or("?"),
                res["key_encoding"],
                res["rows_per_device"]
            );
            if let Some(n) = res.get("note").and_then(|n| n.as_str()) {
                s.push_str(&format!("\n  note: {n}"));
            }
            s
        }
        "get-table" => format!(
            "get-table {}: {} rows to {}",
            res["name"].as_str().unwrap_or("?"),
            res["rows"],
            res["output"].as_str().unwrap_or("?")
        ),
        op if op.starts_with("shuffle (") => format!(
            "{op}: {} rows of {} into {} partitions by {} ({}), {} stored ({:.2}x compression) as {}",
            res["rows"],
            res["table"].as_str().unwrap_or("?"),
            res["partitions"],
            res["keys"],
            res["hash"].as_str().unwrap_or("?"),
            human_bytes(res["stored_bytes"].as_u64().unwrap_or(0)),
            res["compression_ratio"].as_f64().unwrap_or(0.0),
            res["out"].as_str().unwrap_or("?")
        ),
        "put-list" => format!(
            "put-list {}: {} entries of {} B on device {}",
            res["name"].as_str().unwrap_or("?"),
            res["entries"],
            res["entry_size"],
            res["device"]
        ),
        "index-text" => format!(
            "index-text {}: {} documents, {} posting lists; most frequent {}",
            res["name"].as_str().unwrap_or("?"),
            res["documents"],
            res["terms"],
            res["top"]
        ),
        op if op.starts_with("intersect") => format!(
            "{op}: {} common of {} ({} partition(s), {} poll(s))",
            res["count"], res["lists"], res["partitions"], res["polls"]
        ),
        "shuffle-read" => format!(
            "shuffle-read {} partition {}: {} rows to {}",
            res["name"].as_str().unwrap_or("?"),
            res["partition"],
            res["rows"],
            res["output"].as_str().unwrap_or("?")
        ),
        op if op.starts_with("sort") => {
            let mut s = format!(
                "{op}: {} rows of {} by {} ({}) into {}",
                res["rows"],
                res["table"].as_str().unwrap_or("?"),
                res["key"].as_str().unwrap_or("?"),
                res["algo"].as_str().unwrap_or("?"),
                res["out"].as_str().unwrap_or("?")
            );
            if let Some(m) = res.get("merged") {
                s.push_str(&format!(
                    "\n  merged {} rows into {}",
                    m["rows"],
                    m["output"].as_str().unwrap_or("?")
                ));
            }
            s
        }
        op if op.starts_with("search") => {
            let mut s = format!(
                "{op}: {} match(es) of {:?} in {} ({})",
                res["count"],
                res["pattern"].as_str().unwrap_or(""),
                res["name"].as_str().unwrap_or("?"),
                human_bytes(res["bytes_searched"].as_u64().unwrap_or(0)),
            );
            if let Some(o) = res.get("offsets").and_then(|o| o.as_array()) {
                let shown: Vec<String> = o.iter().take(20).map(|v| v.to_string()).collect();
                s.push_str(&format!(
                    "\n  offsets: {}{}",
                    shown.join(" "),
                    if o.len() > 20 { " ..." } else { "" }
                ));
            }
            s
        }
        _ => format!("{}: {}", r.op, res),
    }
}

/// The readable summary of a report.
pub fn summary(r: &Report) -> String {
    let b = &r.bytes;
    let m = &r.modeled;
    let bottleneck = m.phases.iter().map(|p| p.bottleneck.as_str()).collect::<Vec<_>>().join(", ");
    format!(
        "{}\n  measured  wall {:.3} s   host cpu {:.3} s   device cpu {:.3} s\n  bytes     flash read {}   flash program {}   flash->dev mem {}   dev->host {}   host->dev {}   dev<->dev {}\n  modeled   {} x{}: {:.4} s, {:.3} J (bottleneck: {})",
        headline(r),
        r.wall_s,
        r.host_cpu_s,
        r.device_cpu_s,
        human_bytes(b.flash_read),
        human_bytes(b.flash_program),
        human_bytes(b.flash_to_device_mem),
        human_bytes(b.device_to_host),
        human_bytes(b.host_to_device),
        human_bytes(b.device_to_device),
        m.profile,
        m.devices,
        m.time_s,
        m.energy_j,
        if bottleneck.is_empty() { "-" } else { &bottleneck },
    )
}

/// Per-device space, wear and traffic.
pub fn stats(array: &Array) -> Result<(Value, String)> {
    let mut devices = Vec::new();
    let mut text = format!(
        "array {} : {} x {} ({} each), stripe unit {}\n",
        array.dir().display(),
        array.devices().len(),
        array.profile().name,
        human_bytes(array.config().capacity_bytes),
        human_bytes(array.config().stripe_unit)
    );
    for d in array.devices() {
        let Response::Properties(p) = d.call(Command::Identify)? else { continue };
        let f = &p.flash;
        let ps = f.geometry.page_size as u64;
        let c = d.counters();
        text.push_str(&format!(
            "dev{}: {} used of {} ({} objects), {} free blocks, WA {:.3}, erase counts min/mean/max {}/{:.2}/{}, device memory {}\n",
            d.id(),
            human_bytes((f.object_pages + f.raw_pages) * ps),
            human_bytes(f.logical_pages * ps),
            f.objects,
            f.free_blocks,
            f.write_amplification,
            f.wear.min_erase_count,
            f.wear.mean_erase_count,
            f.wear.max_erase_count,
            human_bytes(p.memory_bytes),
        ));
        devices.push(json!({ "device": d.id(), "properties": *p, "counters": c }));
    }
    Ok((json!({ "devices": devices }), text.trim_end().to_string()))
}
