//! Tests only (the `test-hooks` feature, and `cargo test`): stop an engine thread as a preemption
//! would, so that tests can see what a stall of the engine does to its requests. Release builds
//! have none of it in the timing loop.

use super::config::TestStall;
use super::thread::{Path, Worker};

impl<P: Path> Worker<P> {
    /// Stop at the first moment after each stop's time with a request sent in the last 200 µs
    /// still in flight, so that its reply arrives during the stop (or 10 ms after that time at the
    /// latest); say so on stderr. Never while the schedule is paused (the caller's check): a
    /// round's pause — the first loads the statistics, ~1 s — has nothing in flight to stop.
    pub(crate) fn test_hook(&mut self, now: u64) {
        let Some(ts) = self.test_stall else { return };
        if now < self.t0 + ts.at_ns {
            return;
        }
        let in_flight = self.path.sent_since(now.saturating_sub(200_000));
        if !in_flight && now < self.t0 + ts.at_ns + 10_000_000 {
            return;
        }
        // The next stop, if any, `every` after this one began.
        self.test_stall = (ts.count > 1).then(|| TestStall { at_ns: now - self.t0 + ts.every_ns, count: ts.count - 1, ..ts });
        // A clock read right before the stop, so that the stall logged is the stop itself (not
        // joined to a wait before it that the host prolonged).
        self.watch.now();
        std::thread::sleep(std::time::Duration::from_nanos(ts.for_ns));
        eprintln!(
            "tailwise test hook: engine thread {} stalled at {:.3} s for {} µs",
            self.index,
            (now - self.t0) as f64 / 1e9,
            ts.for_ns / 1_000
        );
    }
}
