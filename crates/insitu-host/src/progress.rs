//! What a long command has done so far, for a front to show while it runs (the CLI's spinner line): the
//! stage it is in and a count, of a total when one is known. Operators update it as their device programs
//! and ranges finish; reading it never waits for them.

use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct State {
    stage: String,
    done: u64,
    total: Option<u64>,
    unit: &'static str,
}

/// A shared progress count. Clones share it: the array keeps one, and a front clones it before it hands
/// the array to an operator.
#[derive(Debug, Clone, Default)]
pub struct Progress(Arc<Mutex<State>>);

impl Progress {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        // A panic elsewhere poisons nothing worth refusing: the count is advisory.
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut s)
    }

    /// Starts stage `name`, counting `unit`s from 0 (of `total`, when known).
    pub fn stage(&self, name: &str, total: Option<u64>, unit: &'static str) {
        self.with(|s| *s = State { stage: name.to_string(), done: 0, total, unit });
    }

    /// No stage: a new command has not said what it does yet.
    pub fn clear(&self) {
        self.with(|s| *s = State::default());
    }

    /// `n` more units done.
    pub fn add(&self, n: u64) {
        self.with(|s| s.done += n);
    }

    /// `n` more units to do (a total learned as the work is cut up).
    pub fn add_total(&self, n: u64) {
        self.with(|s| s.total = Some(s.total.unwrap_or(0) + n));
    }

    /// The stage, units done and the total (if known).
    pub fn get(&self) -> (String, u64, Option<u64>) {
        self.with(|s| (s.stage.clone(), s.done, s.total))
    }

    /// `shuffle 37/120 ranges`, `load 1200000 rows`, or empty before any stage.
    pub fn describe(&self) -> String {
        self.with(|s| match (s.stage.is_empty(), s.total) {
            (true, _) => String::new(),
            (false, Some(t)) => format!("{} {}/{t} {}", s.stage, s.done, s.unit),
            (false, None) => format!("{} {} {}", s.stage, s.done, s.unit),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_count_and_a_stage_starts_it_again() {
        let p = Progress::default();
        assert_eq!(p.describe(), "");
        let seen = p.clone();
        p.stage("shuffle", None, "ranges");
        p.add_total(3);
        p.add_total(2);
        p.add(4);
        assert_eq!(seen.describe(), "shuffle 4/5 ranges");
        p.stage("load", None, "rows");
        p.add(7);
        assert_eq!(seen.get(), ("load".to_string(), 7, None));
        assert_eq!(seen.describe(), "load 7 rows");
    }
}
