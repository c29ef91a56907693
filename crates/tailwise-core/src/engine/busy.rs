//! The client's idle instants across every thread of one engine (load, probe and packet threads
//! alike): instants at which no thread had anything outstanding — backlog empty, every request
//! written answered (a ghost counts as outstanding), no packet queued or out — and nothing due.
//! At such an instant a FIFO target serving only this client is idle too, so nothing before it can
//! delay anything after it: each request's `busy_from` is the latest such instant certified when
//! it fell due, never later than its intended time (the statistics' max-plus bound reads it).
//!
//! Lock-free, and touched only when a thread changes between busy and idle:
//! * `state` = (generation << `COUNT_BITS`) | threads busy; every transition adds one generation;
//! * `idle_until[i]`: thread i's next intended time, published before it goes idle;
//! * `last_idle`: the latest certified idle instant (the schedule's start at first).
//!
//! The thread whose idle transition leaves no thread busy certifies: it reads the clock `t`,
//! requires every `idle_until[k] > t` and `state` unchanged since its transition, then raises
//! `last_idle` to the least `idle_until` — the client stays idle until some thread's next request
//! is due, since an idle thread enqueues nothing before it. Sound because a thread with a request
//! due at or before `t` has `idle_until ≤ t` or is counted busy, and a transition during the check
//! changes the generation. A published `idle_until` that turns out early (the coordinator's pause
//! moved the schedule later) only prevents a certification.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

/// Low bits of `state`: the threads counted busy.
const COUNT_BITS: u32 = 20;
const COUNT: u64 = (1 << COUNT_BITS) - 1;
/// One transition.
const GEN: u64 = 1 << COUNT_BITS;

/// A word on its own cache line: threads write these on their transitions only, and must not
/// slow each other's steady work by sharing a line with it.
#[repr(align(128))]
struct Line(AtomicU64);

pub(crate) struct Busy {
    state: Line,
    last_idle: Line,
    idle_until: Box<[Line]>,
}

impl Busy {
    /// `threads` threads, all idle with nothing due before `t0` (the schedule's start).
    pub fn new(threads: usize, t0: u64) -> Busy {
        assert!((threads as u64) < COUNT, "{threads} threads");
        Busy {
            state: Line(AtomicU64::new(0)),
            last_idle: Line(AtomicU64::new(t0)),
            idle_until: (0..threads).map(|_| Line(AtomicU64::new(t0))).collect(),
        }
    }

    /// The latest certified idle instant.
    #[cfg(test)]
    pub fn last_idle(&self) -> u64 {
        self.last_idle.0.load(SeqCst)
    }

    /// Thread `i`, idle, has a request due: it is busy. Returns the latest certified idle instant,
    /// which the requests of this busy stretch start from (none can be certified while it lasts;
    /// one certified just before and raised after the load is missed: an earlier instant, sound).
    #[inline]
    pub fn busy(&self, i: usize) -> u64 {
        debug_assert!(i < self.idle_until.len());
        self.state.0.fetch_add(GEN + 1, SeqCst);
        self.last_idle.0.load(SeqCst)
    }

    /// Thread `i`, busy, has nothing outstanding and nothing due before `next`: it is idle. When no
    /// thread is busy any more, returns the state to certify from (`certify`, with a clock read
    /// taken after this call).
    #[inline]
    pub fn idle(&self, i: usize, next: u64) -> Option<u64> {
        self.idle_until[i].0.store(next, SeqCst);
        let old = self.state.0.fetch_add(GEN - 1, SeqCst);
        debug_assert!(old & COUNT > 0, "thread {i} went idle while counted idle");
        let now = old + GEN - 1;
        (now & COUNT == 0).then_some(now)
    }

    /// Certify the instants from `t` (read after `idle` returned `state`) to the least `idle_until`
    /// as idle, if no thread has a request due by `t` and no transition came in between. Returns
    /// the instant certified.
    pub fn certify(&self, state: u64, t: u64) -> Option<u64> {
        let mut until = u64::MAX;
        for k in self.idle_until.iter() {
            let u = k.0.load(SeqCst);
            if u <= t {
                return None;
            }
            until = until.min(u);
        }
        if self.state.0.load(SeqCst) != state {
            return None;
        }
        self.last_idle.0.fetch_max(until, SeqCst);
        Some(until)
    }
}

/// One thread's side of [`Busy`]: whether it is counted busy, and the instant the requests of
/// its busy stretch are busy from. Per request one branch; the atomics only on a transition.
pub(crate) struct ThreadBusy {
    index: usize,
    busy: bool,
    from: u64,
}

impl ThreadBusy {
    pub fn new(index: usize) -> ThreadBusy {
        ThreadBusy { index, busy: false, from: 0 }
    }

    #[inline]
    pub fn is_busy(&self) -> bool {
        self.busy
    }

    /// A request falls due at `intended`: the thread is busy; the request's `busy_from`.
    #[inline]
    pub fn due(&mut self, shared: &Busy, intended: u64) -> u64 {
        if !self.busy {
            self.busy = true;
            self.from = shared.busy(self.index);
        }
        self.from.min(intended)
    }

    /// Nothing outstanding and nothing due before `next` (`u64::MAX` after the schedule): idle,
    /// certified with a clock read after the transition when it leaves no thread busy.
    #[inline]
    pub fn idle(&mut self, shared: &Busy, next: u64, clock: impl FnOnce() -> u64) {
        if self.busy {
            self.busy = false;
            if let Some(state) = shared.idle(self.index, next) {
                shared.certify(state, clock());
            }
        }
    }

    /// The schedule is over: an idle thread says nothing more is due (a busy one does when the
    /// drain leaves it idle).
    pub fn schedule_over(&mut self, shared: &Busy, clock: impl FnOnce() -> u64) {
        if !self.busy {
            self.busy = true;
            shared.busy(self.index);
            self.idle(shared, u64::MAX, clock);
        }
    }
}

/// Engine tests: every sample's `busy_from` is at most its intended time, and every request due
/// before it had ended by then (its reply read, or given up). Returns how many found the whole
/// client idle (`busy_from` = intended).
#[cfg(test)]
pub(crate) fn assert_busy_from_sound<'a>(samples: impl Iterator<Item = &'a crate::record::sample::Sample>) -> usize {
    use crate::record::flags as F;
    let mut v: Vec<_> = samples.copied().collect();
    v.sort_by_key(|s| s.intended_ns);
    // When the thread saw each end: the read of its reply, or the instant it was censored.
    let end = |s: &crate::record::sample::Sample| if s.flags() & F::CENSORED != 0 { s.intended_ns + s.latency_ns } else { s.rx_user_ns };
    let mut latest = Vec::with_capacity(v.len());
    let mut m = 0;
    for s in &v {
        m = m.max(end(s));
        latest.push(m);
    }
    for s in &v {
        assert!(s.busy_from_ns <= s.intended_ns, "{s:?}");
        let before = v.partition_point(|x| x.intended_ns < s.busy_from_ns);
        if before > 0 {
            assert!(latest[before - 1] <= s.busy_from_ns, "a request due before {s:?} ended at {}", latest[before - 1]);
        }
    }
    v.iter().filter(|s| s.busy_from_ns == s.intended_ns).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_000;

    #[test]
    fn one_thread_certifies_until_its_next_request_and_not_past_it() {
        let b = Busy::new(1, T0);
        assert_eq!(b.last_idle(), T0);
        assert_eq!(b.busy(0), T0, "a request at the start is busy from the start");
        // Answered at 1_130, the next request due at 1_200: idle from now until then.
        let s = b.idle(0, 1_200).expect("the only thread");
        assert_eq!(b.certify(s, 1_131), Some(1_200));
        assert_eq!(b.busy(0), 1_200, "the request due at 1_200 found the client idle");
        // Its next intended time already past when the clock is read: nothing certified.
        let s = b.idle(0, 1_300).unwrap();
        assert_eq!(b.certify(s, 1_300), None);
        assert_eq!(b.certify(s, 1_350), None);
        assert_eq!(b.last_idle(), 1_200);
    }

    #[test]
    fn two_threads_certify_only_when_both_are_idle_and_neither_has_anything_due() {
        let b = Busy::new(2, T0);
        b.busy(0);
        b.busy(1);
        assert_eq!(b.idle(0, 2_000), None, "thread 1 is still busy");
        let s = b.idle(1, 1_500).expect("the last busy thread certifies");
        // The client is idle from the clock read until the earlier next request, thread 1's.
        assert_eq!(b.certify(s, 1_400), Some(1_500));
        assert_eq!(b.last_idle(), 1_500);
        // Thread 1 busy at 1_500, thread 0 due at 2_000 while 1 is still busy: thread 0 gets the
        // instant certified before, however late it runs.
        assert_eq!(b.busy(1), 1_500);
        assert_eq!(b.busy(0), 1_500);
        assert_eq!(b.idle(1, 3_000), None);
        // Thread 0 done at 2_100 but its next is due at 2_050 (already past): no certification.
        let s = b.idle(0, 2_050).unwrap();
        assert_eq!(b.certify(s, 2_100), None);
        assert_eq!(b.last_idle(), 1_500);
    }

    #[test]
    fn an_idle_thread_whose_next_request_is_past_blocks_a_certification() {
        let b = Busy::new(2, T0);
        b.busy(0);
        // Thread 1 never went busy: idle with nothing due before T0, which is past.
        let s = b.idle(0, 5_000).unwrap();
        assert_eq!(b.certify(s, 2_000), None, "thread 1 may have a request due since T0");
        // Thread 1 publishes its next request (due at 3_000) on its own idle transition.
        b.busy(1);
        b.busy(0);
        b.idle(0, 5_000);
        let s = b.idle(1, 3_000).unwrap();
        assert_eq!(b.certify(s, 2_500), Some(3_000));
        assert_eq!(b.certify(s, 3_000), None, "due at 3_000: not idle at 3_000");
    }

    #[test]
    fn a_transition_during_the_check_voids_it() {
        let b = Busy::new(2, T0);
        b.busy(0);
        let s = b.idle(0, 4_000).unwrap(); // thread 1 was idle (its next due at T0 …)
        // … and goes busy between thread 0's transition and its check, then idle again with a
        // later next: the values all look fine, but the generation moved on.
        b.busy(1);
        let s1 = b.idle(1, 5_000).unwrap();
        assert_eq!(b.certify(s, 3_500), None);
        assert_eq!(b.certify(s1, 3_500), Some(4_000), "the newer state certifies");
        // A busy thread between the transition and the check, still busy: nothing.
        b.busy(0);
        let s = b.idle(0, 6_000).unwrap();
        b.busy(1);
        assert_eq!(b.certify(s, 4_500), None);
        assert_eq!(b.last_idle(), 4_000);
    }

    #[test]
    fn a_late_certification_never_moves_the_instant_back() {
        let b = Busy::new(1, T0);
        b.busy(0);
        let s = b.idle(0, 9_000).unwrap();
        assert_eq!(b.certify(s, 8_000), Some(9_000));
        b.last_idle.0.fetch_max(2_000, SeqCst);
        assert_eq!(b.last_idle(), 9_000);
    }

    #[test]
    fn after_the_schedule_a_drained_thread_blocks_nothing() {
        let b = Busy::new(2, T0);
        b.busy(0);
        b.busy(1);
        b.idle(0, u64::MAX); // drained
        let s = b.idle(1, 7_000).unwrap();
        assert_eq!(b.certify(s, 6_000), Some(7_000));
    }

    #[test]
    fn threads_racing_never_certify_an_instant_with_a_request_outstanding() {
        // Two threads run requests at their own intended times on one clock: while one of a
        // thread's requests is outstanding, the instant certified never passes its intended time.
        // They go on until 100 instants are certified (or 2 s: a host too busy to run both).
        use std::sync::Arc;
        let b = Arc::new(Busy::new(2, 0));
        let certified = Arc::new(AtomicU64::new(0));
        let clock = std::time::Instant::now();
        let hs: Vec<_> = (0..2usize)
            .map(|i| {
                let (b, certified) = (b.clone(), certified.clone());
                std::thread::spawn(move || {
                    let now = || clock.elapsed().as_nanos() as u64 + 1;
                    let mut next = now() + 1_000 * i as u64;
                    while certified.load(SeqCst) < 100 && now() < 2_000_000_000 {
                        while now() < next {}
                        let from = b.busy(i);
                        assert!(from <= next, "busy from {from}, due at {next}");
                        let done = now() + 500;
                        while now() < done {
                            let seen = b.last_idle();
                            assert!(seen <= next, "certified {seen} while the request due at {next} is outstanding");
                        }
                        next = now() + 2_000 + 3_000 * i as u64;
                        if let Some(s) = b.idle(i, next) {
                            certified.fetch_add(b.certify(s, now()).is_some() as u64, SeqCst);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert!(certified.load(SeqCst) > 0, "no idle instant certified");
    }
}
