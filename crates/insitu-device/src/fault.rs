//! Crash injection for tests: `INSITU_CRASH_AT=POINT:N` makes the process kill itself with SIGKILL the
//! N-th time it passes POINT (N counts from 1). This is a real SIGKILL: no destructor, flush or checkpoint
//! runs, exactly as when an operator's process is killed. Points are named where they are placed: the
//! host's (`put-stripe`, `put-part-committed`, `put-catalog`, `rm-catalog`, `put-table-batch`,
//! `put-table-part`, `put-table-catalog`, `shuffle-before-catalog`, `lba-write-piece`,
//! `selfsort-generate-chunk`), the BlueDBM file system's (`fs-put-pages`, `fs-put-journal`, `fs-gc-erase`,
//! `fs-gc-moved`) and a device server's (`devN-command`: a command arriving at the server of device N, so a
//! test can kill one device in the middle of an operator). The crash tests check that the process was
//! killed, so a test that names a point no code passes (a misspelt one) fails.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where (if anywhere) to crash.
#[derive(Debug, Default)]
pub struct FaultPlan {
    point: Option<(String, u64)>,
    seen: AtomicU64,
}

impl FaultPlan {
    /// No crash.
    pub fn none() -> FaultPlan {
        FaultPlan::default()
    }

    /// Parses `POINT:N` (or `POINT`, meaning the first time).
    pub fn parse(spec: &str) -> FaultPlan {
        let (p, n) = match spec.rsplit_once(':') {
            Some((p, n)) if n.parse::<u64>().is_ok() => (p.to_string(), n.parse().unwrap_or(1)),
            _ => (spec.to_string(), 1),
        };
        FaultPlan { point: Some((p, n.max(1))), seen: AtomicU64::new(0) }
    }

    /// From the `INSITU_CRASH_AT` environment variable.
    pub fn from_env() -> FaultPlan {
        std::env::var("INSITU_CRASH_AT").map(|s| FaultPlan::parse(&s)).unwrap_or_default()
    }

    /// Whether this plan names `point`.
    pub fn names(&self, point: &str) -> bool {
        self.point.as_ref().is_some_and(|(p, _)| p == point)
    }

    /// Marks passing `point`; kills the process if the plan says so.
    pub fn hit(&self, point: &str) {
        if let Some((p, n)) = &self.point {
            if p == point && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == *n {
                crate::sys::kill_self();
            }
        }
    }
}
