//! How results are shown: one JSON object with `--json`, a short readable summary otherwise (the
//! operator's headline, then what it cost here and on the profile).

use indicatif::{ProgressBar, ProgressStyle};
use insitu_host::Report;
use serde_json::{json, Value};

/// The class of an error, for scripts: the host's kinds (`not_found`, `locked`, `device_full`...), `file`
/// for a file of the caller's, `other` for the rest (options the CLI itself checks, among them).
pub fn error_kind(e: &anyhow::Error) -> &'static str {
    e.chain()
        .find_map(|c| {
            c.downcast_ref::<insitu_host::HostError>()
                .map(|h| h.kind().name())
                .or_else(|| c.downcast_ref::<std::io::Error>().map(|_| "file"))
        })
        .unwrap_or("other")
}

/// Exit status of a failed command: 75 (`EX_TEMPFAIL`) when another process held the array past
/// `--wait` (worth a retry), 1 otherwise. (2 is a usage error, and `fsck` finding damage.)
pub fn exit_code(e: &anyhow::Error) -> std::process::ExitCode {
    match error_kind(e) {
        "locked" => std::process::ExitCode::from(75),
        _ => std::process::ExitCode::FAILURE,
    }
}

/// Transfers smaller than this show no progress bar.
const PROGRESS_MIN_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone)]
pub struct Output {
    pub json: bool,
    /// Set by a command whose data goes to standard output (`get`, `-o -`): its report, and an error
    /// with `--json`, then go to standard error, so that what a script reads from stdout is the data alone.
    data_on_stdout: std::rc::Rc<std::cell::Cell<bool>>,
}

impl Output {
    pub fn new(json: bool) -> Output {
        Output { json, data_on_stdout: Default::default() }
    }

    /// Says, before any work that can fail, whether this command's data goes to standard output.
    pub fn data_to_stdout(&self, yes: bool) {
        self.data_on_stdout.set(yes);
    }

    /// Shows a command's error: with `--json`, as `{"error": ..., "kind": ...}` on standard output
    /// (standard error when the command's data owns stdout, with no text line beside it), and as
    /// `error: ...` on standard error. `kind` names the class of failure (see [`error_kind`]).
    pub fn error(&self, e: &anyhow::Error) {
        let msg = format!("{e:#}");
        let line = json!({ "error": msg, "kind": error_kind(e) });
        match (self.json, self.data_on_stdout.get()) {
            (true, true) => eprintln!("{line}"),
            (true, false) => {
                println!("{line}");
                eprintln!("error: {msg}");
            }
            (false, _) => eprintln!("error: {msg}"),
        }
    }
    /// A result without measured cost (init, stats, fsck...).
    pub fn plain(&self, op: &str, result: Value, text: &str) {
        if self.json {
            println!("{}", json!({ "op": op, "result": result }));
        } else {
            println!("{text}");
        }
    }

    /// [`Output::plain`] for a BlueDBM run that reports its own cost inside its result (at its top or in
    /// its `cost`): with `--json`, its `modeled`, `wall_s`, `host_cpu_s` and `device_cpu_s` also stand at
    /// the top of the object, where every other command's report has them.
    pub fn costed(&self, op: &str, result: Value, text: &str) {
        if !self.json {
            return println!("{text}");
        }
        let mut top = json!({ "op": op, "headline": text.lines().next().unwrap_or_default() });
        for key in ["wall_s", "host_cpu_s", "device_cpu_s", "modeled"] {
            let v =
                [&result[key], &result["cost"][key], &result["via"][key]].into_iter().find(|v| !v.is_null());
            if let Some(v) = v {
                top[key] = v.clone();
            }
        }
        top["result"] = result;
        println!("{top}");
    }

    /// [`Output::plain`] for a command whose data owns stdout (`fs get` to stdout).
    pub fn plain_to_stderr(&self, op: &str, result: Value, text: &str) {
        if self.json {
            eprintln!("{}", json!({ "op": op, "result": result }));
        } else {
            eprintln!("{text}");
        }
    }

    pub fn report(&self, r: &Report) {
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
        if self.json {
            println!("{}", serde_json::to_string(r).expect("reports serialize"));
        } else {
            println!("{}", summary(r));
        }
    }

    /// For `get` to stdout: the data owns stdout.
    pub fn report_to_stderr(&self, r: &Report) {
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
        if self.json {
            eprintln!("{}", serde_json::to_string(r).expect("reports serialize"));
        } else {
            eprintln!("{}", summary(r));
        }
    }

    /// The headline only (a listing).
    pub fn listing(&self, r: &Report) {
        if self.json {
            return self.report(r);
        }
        println!("{}", r.headline);
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

/// Runs `f` while a spinner with the elapsed time shows on stderr (when it is a terminal), for work
/// whose progress the host cannot count as it goes (programs running inside the devices).
pub fn busy<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("static template"));
    bar.set_message(what.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let r = f();
    bar.finish_and_clear();
    r
}

/// [`busy`], the spinner's line also saying what `progress` counts (the stage, and units done of the
/// total when known: `sort: shuffle 37/120 ranges`), as the operator updates it.
pub fn busy_counting<T>(what: &str, progress: &insitu_host::progress::Progress, f: impl FnOnce() -> T) -> T {
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("static template"));
    bar.set_message(what.to_string());
    if bar.is_hidden() {
        return f();
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let done = std::sync::atomic::AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let now = progress.describe();
                bar.set_message(if now.is_empty() { what.to_string() } else { format!("{what}: {now}") });
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        });
        let r = f();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    bar.finish_and_clear();
    r
}

/// A progress bar whose total is learned as the work goes (bytes), on stderr when it is a terminal.
pub fn dynamic(what: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// A progress bar of counted items (records), total learned as the work goes.
pub fn count_progress(what: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} records eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// The readable summary of a report.
pub fn summary(r: &Report) -> String {
    r.summary()
}
