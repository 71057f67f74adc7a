//! The accelerator's scheduler (BlueDBM §4): in-store processor jobs run one at a time in the order they
//! were submitted, each told how long it waited. Measured waits are wall time; modeled waits are the
//! modeled service times of the jobs that were ahead of it when it was submitted (the devices and their
//! hosts share no clock, so jobs submitted together are taken to arrive at one instant).

use std::sync::Mutex;
use std::time::Instant;

use crate::network::Ps;

/// A job's place in the queue, taken when it is submitted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    seq: u64,
    /// The first job not finished when this one was submitted.
    ahead_from: u64,
    at: Instant,
}

/// What a job learns when it starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started {
    pub seq: u64,
    pub ahead: u64,
    pub queue_ps: Ps,
    pub queued_s: f64,
}

#[derive(Debug, Default)]
struct State {
    submitted: u64,
    /// `done[i]`: service time of jobs `0..=i` together (finished jobs only; they finish in order).
    done: Vec<Ps>,
    running: Option<(Ticket, Ps)>,
}

#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    state: Mutex<State>,
}

impl Scheduler {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a ticket for a job being submitted.
    pub(crate) fn enqueue(&self) -> Ticket {
        let mut s = self.state();
        let t = Ticket { seq: s.submitted, ahead_from: s.done.len() as u64, at: Instant::now() };
        s.submitted += 1;
        t
    }

    /// The job of `t` starts (the accelerator's worker calls this, one job at a time).
    pub(crate) fn begin(&self, t: Ticket) {
        self.state().running = Some((t, 0));
    }

    /// The running job, as its handler sees it. `None` outside a job (a command sent another way).
    pub(crate) fn started(&self) -> Option<Started> {
        let s = self.state();
        let (t, _) = s.running?;
        let before = |i: u64| if i == 0 { 0 } else { s.done[i as usize - 1] };
        Some(Started {
            seq: t.seq,
            ahead: t.seq - t.ahead_from,
            queue_ps: before(t.seq) - before(t.ahead_from),
            queued_s: t.at.elapsed().as_secs_f64(),
        })
    }

    /// The running job's modeled service time.
    pub(crate) fn served(&self, ps: Ps) {
        if let Some((_, s)) = self.state().running.as_mut() {
            *s = ps;
        }
    }

    /// The running job ended (failed jobs count as taking no time).
    pub(crate) fn end(&self) {
        let mut s = self.state();
        if let Some((_, ps)) = s.running.take() {
            let total = s.done.last().copied().unwrap_or(0) + ps;
            s.done.push(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_submitted_together_wait_for_those_ahead() {
        let s = Scheduler::default();
        let (a, b, c) = (s.enqueue(), s.enqueue(), s.enqueue());
        for (t, ps) in [(a, 5), (b, 7)] {
            s.begin(t);
            s.served(ps);
            s.end();
        }
        s.begin(c);
        let st = s.started().unwrap();
        assert_eq!((st.seq, st.ahead, st.queue_ps), (2, 2, 12));
        s.end();
        // A job submitted once the queue is empty waits for nothing.
        let d = s.enqueue();
        s.begin(d);
        assert_eq!(s.started().unwrap().queue_ps, 0);
    }
}
