//! Crash injection for tests: `INSITU_CRASH_AT=POINT:N` makes the process kill itself with SIGKILL the
//! N-th time it passes POINT (N counts from 1). This is a real SIGKILL: no destructor, flush or checkpoint
//! runs, exactly as when an operator's process is killed. The points are named where they are placed
//! (`put-stripe`, `put-part-committed`, `put-catalog`, `rm-catalog`, `put-table-part`, `put-table-catalog`, `shuffle-before-catalog`).
#![allow(unsafe_code)]

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

    /// Marks passing `point`; kills the process if the plan says so.
    pub fn hit(&self, point: &str) {
        if let Some((p, n)) = &self.point {
            if p == point && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == *n {
                // SAFETY: kill(2) on our own pid with a constant signal; it does not return.
                unsafe {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
            }
        }
    }
}
