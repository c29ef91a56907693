//! The thread's own stalls, by the clock: loop iterations that took too long (counted), and the
//! stall windows (time/stall.rs) turned into per-request flags — a request intended inside a stall or
//! the guard after it is sent late (`ENGINE_STALL`), one outstanding across windows is inflated by
//! the union of the stall and guard time it spans (`INFLATED`). And what the host took from the
//! thread: its preemptions and CPU time.

use std::collections::VecDeque;

/// A loop iteration longer than this is a stall (preemption, or a long syscall); the sends it
/// delays are counted apart so that the send lag of an unpreempted thread can be read. A lone
/// pinned spinner here sees ~400 gaps/s above 5 µs (BENCHMARKS.md, the machine floor); the loop's own work takes
/// a few µs per syscall.
/// (`stalls` in the result; the summary's `engine.stall_threshold_ns`.)
pub const STALL_NS: u64 = 20_000;
/// Cost of one send before any has been measured (a loopback `send` here: 3–5 µs, BENCHMARKS.md).
const INITIAL_SEND_COST_NS: f64 = 5_000.0;

/// A stall of this thread and the guard after it, as intended times to flag.
struct StallWindow {
    start: u64,
    end: u64,
    /// Requests intended inside the stall: the backlog it built.
    backlog: u64,
    /// The thread's cost per send when the stall was seen.
    send_cost_ns: f64,
}

impl StallWindow {
    /// The stall's guard ends when the backlog it built has been sent at the thread's send rate:
    /// computed from the stall alone, never from what the target did.
    #[inline]
    fn guard_end(&self) -> u64 {
        self.end + (self.backlog as f64 * self.send_cost_ns) as u64
    }
}

pub(crate) struct Stalls {
    /// Loop iterations longer than `STALL_NS`, and their time.
    pub count: u64,
    pub stalled_ns: u64,
    /// End of the latest loop-gap stall: a request intended before it and sent after it was delayed by it.
    pub last_end: u64,
    /// Stall windows recent enough to matter, oldest first, and the first one an enqueue at the
    /// current intended time can still fall in.
    windows: VecDeque<StallWindow>,
    at: usize,
    /// Running mean of the time one request's send takes (ns).
    send_cost_ns: f64,
}

impl Stalls {
    pub fn new() -> Stalls {
        Stalls {
            count: 0,
            stalled_ns: 0,
            last_end: 0,
            windows: VecDeque::new(),
            at: 0,
            send_cost_ns: INITIAL_SEND_COST_NS,
        }
    }

    /// A stall the watch logged, from `start` to `end`.
    #[inline]
    pub fn push(&mut self, start: u64, end: u64) {
        self.windows.push_back(StallWindow { start, end, backlog: 0, send_cost_ns: self.send_cost_ns });
    }

    /// One loop iteration took `gap` where `planned` was a chosen wait: only time past it counts.
    #[inline]
    pub fn iteration(&mut self, gap: u64, planned: u64, now: u64) {
        if gap > planned + STALL_NS {
            self.count += 1;
            self.stalled_ns += gap;
            self.last_end = now;
        }
    }

    /// `written` requests took `elapsed` ns to send: the guard after a stall is its backlog times
    /// this cost (`StallWindow::guard_end`).
    #[inline]
    pub fn sent(&mut self, written: u64, elapsed: u64) {
        let per = elapsed as f64 / written as f64;
        self.send_cost_ns += (per - self.send_cost_ns) / 64.0;
    }

    /// Whether a request intended at `t` (called in increasing `t`) falls in a stall of this
    /// thread or its guard; counts the stall's backlog as it goes.
    #[inline]
    pub fn in_window(&mut self, t: u64) -> bool {
        while let Some(w) = self.windows.get(self.at) {
            if t < w.start {
                return false;
            }
            if t < w.end {
                self.windows[self.at].backlog += 1;
                return true;
            }
            if t < w.guard_end() {
                return true;
            }
            self.at += 1;
        }
        false
    }

    /// How much of the time a request was outstanding, from `intended` to `t_rx`, this thread
    /// spent in stalls and their guards: its latency may be that much the client's.
    #[inline]
    pub fn inflation(&self, intended: u64, t_rx: u64) -> u64 {
        if self.windows.is_empty() {
            return 0;
        }
        self.spanned(intended, t_rx)
    }

    fn spanned(&self, intended: u64, t_rx: u64) -> u64 {
        // Windows are in time order, each stall after the last: scan back from the newest to the
        // first that ended before the request was due ...
        let mut first = self.windows.len();
        for (i, w) in self.windows.iter().enumerate().rev() {
            if w.start < t_rx && w.guard_end() <= intended {
                break;
            }
            first = i;
        }
        // ... then add up the union of their parts within [intended, t_rx): a guard can reach
        // into the next stall, and time counted twice would put the lower bound above the truth.
        let (mut sum, mut cur) = (0, None::<(u64, u64)>);
        for w in self.windows.range(first..) {
            let (a, b) = (intended.max(w.start), t_rx.min(w.guard_end()));
            if a >= b {
                continue;
            }
            cur = match cur {
                Some((ca, cb)) if a <= cb => Some((ca, cb.max(b))),
                Some((ca, cb)) => {
                    sum += cb - ca;
                    Some((a, b))
                }
                None => Some((a, b)),
            };
        }
        sum + cur.map_or(0, |(a, b)| b - a)
    }

    /// The start of the earliest stall that ended after `since` (not before `since`), if any.
    pub fn first_since(&self, since: u64) -> Option<u64> {
        let mut first = None;
        for w in self.windows.iter().rev() {
            if w.end <= since {
                break;
            }
            first = Some(w.start.max(since));
        }
        first
    }

    /// Forget the windows whose guard ended before `horizon` (no request outstanding across them
    /// can still end), but never one an enqueue can still fall in.
    pub fn prune(&mut self, horizon: u64) {
        while self.windows.front().is_some_and(|w| w.guard_end() < horizon) && self.at > 0 {
            self.windows.pop_front();
            self.at -= 1;
        }
    }
}

/// What the host gave a thread: its CPU time, and its context switches, involuntary (another task
/// took its CPU) and voluntary (it slept).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ThreadUse {
    pub cpu_ns: u64,
    pub preemptions: u64,
    pub sleeps: u64,
}

impl ThreadUse {
    /// The calling thread's, so far.
    pub fn now() -> ThreadUse {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: valid pointers; rusage is plain data that RUSAGE_THREAD fills for this thread.
        let ru = unsafe {
            libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
            ru
        };
        ThreadUse {
            cpu_ns: ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64,
            preemptions: ru.ru_nivcsw as u64,
            sleeps: ru.ru_nvcsw as u64,
        }
    }

    pub fn since(self, start: ThreadUse) -> ThreadUse {
        ThreadUse {
            cpu_ns: self.cpu_ns - start.cpu_ns,
            preemptions: self.preemptions - start.preemptions,
            sleeps: self.sleeps - start.sleeps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Windows with a known send cost: 1 µs per request.
    fn stalls(windows: &[(u64, u64)]) -> Stalls {
        let mut s = Stalls::new();
        s.send_cost_ns = 1_000.0;
        for &(a, b) in windows {
            s.push(a, b);
        }
        s
    }

    #[test]
    fn requests_due_in_a_stall_or_its_guard_are_inside_and_the_guard_grows_with_the_backlog() {
        let mut s = stalls(&[(100_000, 200_000)]);
        assert!(!s.in_window(50_000));
        for t in 0..10 {
            assert!(s.in_window(100_000 + t * 10_000)); // 10 requests due in the stall
        }
        // The guard: 10 requests × 1 µs after the stall's end.
        assert!(s.in_window(205_000) && s.in_window(209_999));
        assert!(!s.in_window(210_000));
        assert!(!s.in_window(300_000));
    }

    #[test]
    fn inflation_is_the_union_of_the_windows_a_request_spans() {
        let mut s = stalls(&[(100_000, 200_000), (205_000, 300_000)]);
        for t in 0..20 {
            s.in_window(100_000 + t * 5_000); // 20 in the first stall: its guard reaches 220 µs
        }
        // Outstanding across both: [100, 220) ∪ [205, 300) = 200 µs, not 120 + 95.
        assert_eq!(s.inflation(50_000, 400_000), 200_000);
        // From inside the first stall to inside the second.
        assert_eq!(s.inflation(150_000, 250_000), 100_000);
        // Before any stall, or after every guard: nothing.
        assert_eq!(s.inflation(10_000, 90_000), 0);
        assert_eq!(s.inflation(310_000, 400_000), 0);
        assert_eq!(Stalls::new().inflation(0, u64::MAX), 0);
    }

    #[test]
    fn only_long_iterations_beyond_a_planned_wait_count_and_old_windows_go() {
        let mut s = stalls(&[(100_000, 200_000), (300_000, 400_000)]);
        s.iteration(STALL_NS, 0, 1);
        s.iteration(1_000_000, 990_000, 2);
        assert_eq!((s.count, s.last_end), (0, 0));
        s.iteration(STALL_NS + 1, 0, 3);
        assert_eq!((s.count, s.stalled_ns, s.last_end), (1, STALL_NS + 1, 3));
        // Kept while an enqueue can still fall in it ...
        s.prune(u64::MAX);
        assert_eq!(s.windows.len(), 2);
        assert!(!s.in_window(250_000));
        s.prune(u64::MAX);
        assert_eq!(s.windows.len(), 1);
        assert_eq!(s.inflation(0, 500_000), 100_000);
    }

    #[test]
    fn the_first_stall_since_an_instant() {
        let s = stalls(&[(100_000, 200_000), (300_000, 400_000)]);
        assert_eq!(s.first_since(50_000), Some(100_000));
        assert_eq!(s.first_since(150_000), Some(150_000), "under way then: from then");
        assert_eq!(s.first_since(250_000), Some(300_000));
        assert_eq!(s.first_since(400_000), None);
    }

    #[test]
    fn the_send_cost_follows_the_sends_slowly() {
        let mut s = Stalls::new();
        s.sent(10, 10 * 69_000);
        assert_eq!(s.send_cost_ns, 6_000.0);
    }
}
