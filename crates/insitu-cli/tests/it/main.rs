//! End-to-end tests of the `insitu` binary: what a user types, what they get back.
#![allow(clippy::unwrap_used)]

mod apps;
mod bluedbm;
mod crash;
mod errors;
mod fs;
mod psacs;
mod roundtrip;
mod selfsort;
mod tables;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[derive(Debug)]
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Default for Env {
    fn default() -> Env {
        Env::new()
    }
}

impl Env {
    pub fn new() -> Env {
        Env { dir: tempfile::tempdir().unwrap() }
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("array")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_insitu"));
        // In the test's own folder, so what a command writes by default (`repro-out/`) lands there.
        c.current_dir(self.dir.path()).env("INSITU_DATA", self.data()).env_remove("INSITU_CRASH_AT");
        c
    }

    /// Runs `insitu ARGS`, returning the output whatever the exit status.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Runs `insitu ARGS` and expects success.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(o.status.success(), "insitu {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    }

    /// Runs `insitu --json ARGS` and parses the one JSON object it prints.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.ok(&all);
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not one JSON object ({e}): {out}"))
    }

    /// Runs `insitu ARGS` and expects failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(!o.status.success(), "insitu {args:?} should have failed");
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(!err.contains("panicked"), "insitu {args:?} panicked: {err}");
        err
    }

    pub fn init(&self, args: &[&str]) {
        let mut all = vec!["init"];
        all.extend_from_slice(args);
        self.ok(&all);
    }

    pub fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, data).unwrap();
        p
    }
}

/// Deterministic bytes over a small alphabet, so that short patterns match often.
pub fn text(n: usize, seed: u64, alphabet: &[u8]) -> Vec<u8> {
    use rand::{Rng, SeedableRng};
    let mut r = rand::rngs::SmallRng::seed_from_u64(seed);
    (0..n).map(|_| alphabet[r.gen_range(0..alphabet.len())]).collect()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
