//! Stalls of tailwise's own spinning threads: times a thread did not run.
//!
//! A thread that busy-polls reads the clock every few µs; a gap of `MASK_STALL_NS` or more
//! between two of its reads means the thread did not run — a preemption by another task or, on a
//! virtual machine, by the hypervisor. On a 2-vCPU guest here a lone spinner loses its CPU for
//! ≥ 100 µs a few times a second and for 1–7 ms about once a second (BENCHMARKS.md), whatever the
//! load.
//!
//! What follows from a stall is decided per request, by the clock (engine/thread.rs): a request
//! whose intended send time fell inside a stall of its *engine* thread (or in the guard after it,
//! while the backlog the stall built was sent, or while that backlog still waited for free slots)
//! could not be sent on time by the client; one outstanding across the stall may have had its
//! reply read late (only kernel receive timestamps can tell). Both are flagged, and the statistics
//! keep them as intervals: at most what was measured, at least what the target can be shown to
//! have taken (python/tailwise/stats/bounds.py). Stalls of the *built-in server* are
//! the target's own behaviour and stay in; they are logged only to be reported as host noise.
//! Shorter gaps (20 µs, ~360/s here) stay in too.

use crate::time::clock::now_ns;
use std::sync::{Arc, Mutex};

/// A gap between two clock reads of a spinning thread at least this long is logged.
pub const MASK_STALL_NS: u64 = 200_000;
/// Stalls a watch keeps apart until its thread takes them; more are merged, the oldest first
/// (a merged window starts earlier: taken as a slot's freeing, it only ever shortens the wait).
const FRESH: usize = 4;
/// Intervals kept at most (16 bytes each); a machine stalling more often than this has bigger
/// problems, which the masked share of the run reports.
const MAX_STALLS: usize = 100_000;

/// Stall intervals `(start_ns, end_ns)` on CLOCK_MONOTONIC, shared by the threads that log them
/// and the caller that takes them.
#[derive(Clone, Default)]
pub struct StallLog(Arc<Mutex<Vec<(u64, u64)>>>);

impl StallLog {
    /// Log one stall. Called right after a stall, never in the steady timing path.
    pub fn record(&self, start_ns: u64, end_ns: u64) {
        let mut v = self.0.lock().unwrap();
        if v.len() < MAX_STALLS {
            v.push((start_ns, end_ns));
        }
    }

    /// The intervals logged since the last call.
    pub fn take(&self) -> Vec<(u64, u64)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A clock for one spinning thread that logs its own stalls: every read compares with the last.
pub struct StallWatch {
    last: u64,
    /// How long the thread chose to wait before the next read (a blocking poll).
    planned: u64,
    log: StallLog,
    /// Time lost to the stalls logged so far (for busy-time accounting that leaves them out).
    pub stalled_ns: u64,
    /// The stalls since its thread last took them (`take_fresh`), oldest first, kept apart (a
    /// slot freed after one of them is known to have been held until the next: engine/io.rs).
    fresh: [(u64, u64); FRESH],
    n_fresh: usize,
}

impl StallWatch {
    pub fn new(log: StallLog) -> StallWatch {
        StallWatch { last: now_ns(), planned: 0, log, stalled_ns: 0, fresh: [(0, 0); FRESH], n_fresh: 0 }
    }

    /// The time, logging the gap since the previous read if it is a stall.
    #[inline]
    pub fn now(&mut self) -> u64 {
        let t = now_ns();
        if t - self.last >= MASK_STALL_NS + self.planned {
            let start = self.last + self.planned;
            self.log.record(start, t);
            self.stalled_ns += t - start;
            if self.n_fresh == FRESH {
                self.fresh[1].0 = self.fresh[0].0;
                self.fresh.copy_within(1.., 0);
                self.n_fresh -= 1;
            }
            self.fresh[self.n_fresh] = (start, t);
            self.n_fresh += 1;
        }
        self.last = t;
        self.planned = 0;
        t
    }

    /// The stall detected and not yet taken, if any.
    #[inline]
    pub fn fresh(&self) -> Option<(u64, u64)> {
        (self.n_fresh > 0).then(|| (self.fresh[0].0, self.fresh[self.n_fresh - 1].1))
    }

    /// Of the stalls not yet taken, the start of the first that ended after `since` (not before
    /// `since`): where a freeing seen after it may have happened, at the earliest.
    #[inline]
    pub fn fresh_since(&self, since: u64) -> Option<u64> {
        self.fresh[..self.n_fresh].iter().find(|&&(_, end)| end > since).map(|&(start, _)| start.max(since))
    }

    /// The stalls detected since the last call, as one window (start, end) on CLOCK_MONOTONIC.
    #[inline]
    pub fn take_fresh(&mut self) -> Option<(u64, u64)> {
        let window = self.fresh();
        self.n_fresh = 0;
        window
    }

    /// The thread is about to wait up to `ns` on purpose: the next gap may be that much longer.
    #[inline]
    pub fn plan_wait(&mut self, ns: u64) {
        self.planned = ns;
    }

    /// Forget the time before now: call after a wait the thread chose (a blocking epoll wait).
    #[inline]
    pub fn reset(&mut self) {
        self.last = now_ns();
    }

    /// Spin until `deadline_ns`, watching for stalls while spinning.
    #[inline]
    pub fn spin_until(&mut self, deadline_ns: u64) {
        while self.now() < deadline_ns {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stalls not yet taken stay apart: a wait that began between two of them (at the end of the
    /// first) ends no earlier than the second's start; beyond FRESH the oldest merge.
    #[test]
    fn fresh_stalls_stay_apart_until_taken() {
        let mut w = StallWatch::new(StallLog::default());
        for (i, s) in [(10, 20), (30, 40), (50, 60), (70, 80), (90, 100)].into_iter().enumerate() {
            w.fresh[i.min(FRESH - 1)] = s;
            if i >= FRESH {
                // What now() does on a fifth: the two oldest become one window.
                w.fresh = [(10, 40), (50, 60), (70, 80), (90, 100)];
            }
            w.n_fresh = (i + 1).min(FRESH);
        }
        assert_eq!(w.fresh(), Some((10, 100)));
        assert_eq!((w.fresh_since(5), w.fresh_since(20), w.fresh_since(40), w.fresh_since(55)), (Some(10), Some(20), Some(50), Some(55)));
        assert_eq!(w.fresh_since(100), None);
        assert_eq!(w.take_fresh(), Some((10, 100)));
        assert_eq!((w.fresh(), w.fresh_since(0)), (None, None));
    }

    #[test]
    fn a_sleep_is_a_stall_and_a_reset_forgets_it() {
        let log = StallLog::default();
        let mut w = StallWatch::new(log.clone());
        w.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let t = w.now();
        let s = log.take();
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].1 == t && s[0].1 - s[0].0 >= 2_000_000, "{s:?}");
        assert_eq!(w.take_fresh(), Some(s[0]));
        assert_eq!(w.take_fresh(), None);
        assert_eq!(w.fresh_since(0), None);
        std::thread::sleep(std::time::Duration::from_millis(2));
        w.reset();
        w.now();
        assert!(log.take().is_empty(), "a planned sleep after reset is not a stall");
        // A plan far longer than the sleep: a host that delays the wake-up by a few ms (this
        // 2-vCPU guest does, once a second or so) is still within it.
        w.plan_wait(50_000_000);
        std::thread::sleep(std::time::Duration::from_millis(2));
        w.now();
        assert!(log.take().is_empty(), "a wait within the plan is not a stall");
        w.plan_wait(1_000_000);
        std::thread::sleep(std::time::Duration::from_millis(3));
        w.now();
        let s = log.take();
        assert!(s.len() == 1 && s[0].1 - s[0].0 >= 1_000_000, "past the plan it is: {s:?}");
    }

    #[test]
    fn the_log_is_bounded() {
        let log = StallLog::default();
        for i in 0..(MAX_STALLS as u64 + 10) {
            log.record(i, i + 1);
        }
        assert_eq!(log.take().len(), MAX_STALLS);
    }
}
