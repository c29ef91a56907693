//! What a thread hands the coordinator: at a snapshot (an atomic sequence number it checks every
//! iteration) its samples and interval histograms so far, and what is outstanding at that instant,
//! censored at the time it has waited; at its end, the rest. Its counters are published for the
//! live display after every poll.

use super::finish::{kind_flag, Finish};
use super::req::{Req, Times, SAMPLED};
use super::shared::{Progress, Role, Shared, Snapshot};
use crate::record::{flags as F, interval::IntervalRecorder, sample::Sample};
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};

pub(crate) struct Handover {
    index: usize,
    role: Role,
    t0: u64,
    /// Every-request histograms of what is outstanding at the snapshot being served.
    pending: IntervalRecorder,
    /// The latest snapshot served.
    seen: u64,
}

impl Handover {
    pub fn new(index: usize, role: Role, t0: u64) -> Handover {
        Handover { index, role, t0, pending: IntervalRecorder::default(), seen: 0 }
    }

    /// The snapshot the coordinator asks for, if this thread has not served it yet. (Acquire:
    /// what the take stored before the seq, `snap_pending`, is seen with it.)
    #[inline]
    pub fn due(&self, shared: &Shared) -> Option<u64> {
        let seq = shared.snap_seq.load(Acquire);
        (seq != self.seen).then_some(seq)
    }

    /// Hand the samples and interval histograms to the shared state; for a snapshot (`seq`), also
    /// what is outstanding now (`outstanding`: requests in flight, then the backlog).
    pub fn hand_over<I>(&mut self, shared: &Shared, fin: &mut Finish, outstanding: I, seq: Option<u64>, now: u64)
    where
        I: Iterator<Item = (Req, Times)>,
    {
        let level = fin.thin.level;
        if !fin.samples.is_empty() || level > 0 {
            let mine = std::mem::take(&mut fin.samples);
            let mut harvest = shared.harvest.lock().unwrap();
            if !mine.is_empty() {
                harvest.batches.push(mine);
            }
            harvest.level = harvest.level.max(level); // this snapshot's pending rows' too
        }
        let mut pending = Vec::new();
        // A load thread beside a probe has nothing timed outstanding; a snapshot that does not
        // want what is outstanding (`Engine::take_finished`) gets none of it. Read after the
        // seq: a take raises the flag's store before the seq's, and a snapshot served after the
        // next take is asked adds nothing to it (the seq checks below).
        if seq.is_some() && self.role != Role::Load && shared.snap_pending.load(SeqCst) {
            for (r, times) in outstanding {
                self.pending.record(r.intended - self.t0, now - r.intended);
                if r.flags & SAMPLED != 0 {
                    let s = self.censored(r, times, now);
                    if fin.thin.keeps(&s) {
                        pending.push(s);
                    }
                }
            }
        }
        {
            let mut store = shared.intervals.lock().unwrap();
            fin.intervals.hand_over(&mut store, false);
            if let Some(s) = seq {
                if store.pending_seq == s {
                    self.pending.hand_over(&mut store, true);
                } else {
                    self.pending.hand_over(&mut Default::default(), true);
                }
            }
        }
        let progress = &shared.progress[self.index];
        if let Some(s) = seq {
            {
                let mut p = shared.pending.lock().unwrap();
                if p.0 == s {
                    p.1.extend(pending);
                }
            }
            self.seen = s;
            // A fresh start for the rows from here to the next snapshot (at the bound asked now).
            fin.thin.level = 0;
            fin.thin.bound = shared.thin_bound.load(Relaxed);
            fin.thin.base = shared.thin_base.load(Relaxed);
            publish_snapshot(progress, fin, now - self.t0);
            progress.snap_seq.store(s, SeqCst);
        } else {
            publish_snapshot(progress, fin, now - self.t0); // the end: a finished thread's counters are final
        }
    }

    /// An outstanding request as a sample, censored at the time it has waited until `now`.
    fn censored(&self, r: Req, times: Times, now: u64) -> Sample {
        Sample {
            intended_ns: r.intended - self.t0,
            sent_ns: times.sent.saturating_sub(self.t0),
            tx_ns: times.tx.saturating_sub(self.t0),
            rx_user_ns: 0,
            latency_ns: now - r.intended,
            busy_from_ns: r.busy_from.saturating_sub(self.t0),
            flags: F::in_row(F::CENSORED | F::PENDING | (r.flags & !SAMPLED) | kind_flag(&r)),
            request: r.op.request,
            inflation_ns: 0,
            thread: self.index as u32,
            slot_wait_ns: r.slot_wait,
        }
    }
}

/// The live counters, for the progress display and the coordinator's rounds.
#[inline]
pub(crate) fn publish(p: &Progress, fin: &Finish) {
    let c = &fin.c;
    p.intended.store(c.intended, Relaxed);
    p.sent.store(c.sent, Relaxed);
    p.late.store(c.late, Relaxed);
    p.received.store(c.received, Relaxed);
    p.errors.store(c.errors, Relaxed);
    p.timeouts.store(c.timeouts, Relaxed);
    p.never_sent.store(c.never_sent, Relaxed);
    p.reconnects.store(c.reconnects, Relaxed);
    p.received_in_window.store(fin.received_in_window, Relaxed);
}

/// The counters as of a snapshot `elapsed_ns` after the schedule's start.
fn publish_snapshot(p: &Progress, fin: &Finish, elapsed_ns: u64) {
    p.snap_ns.store(elapsed_ns, Relaxed);
    let c = &fin.c;
    *p.at_snapshot.lock().unwrap() = Snapshot {
        elapsed_ns,
        intended: c.intended,
        sent: c.sent,
        late: c.late,
        received: c.received,
        errors: c.errors,
        timeouts: c.timeouts,
        never_sent: c.never_sent,
        reconnects: c.reconnects,
        received_in_window: fin.received_in_window,
    };
    publish(p, fin);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::workload::Op;
    use crate::record::sample::Sample;
    use std::iter::empty;

    const T0: u64 = 1_000;

    fn req(at: u64, flags: u32) -> Req {
        Req::new(T0 + at, T0 + at / 2, Op::KEYLESS, flags)
    }

    /// The coordinator's side of `Engine::take`: ask for snapshot `seq`.
    fn ask(shared: &Shared, seq: u64) {
        shared.pending.lock().unwrap().0 = seq;
        shared.intervals.lock().unwrap().pending_seq = seq;
        shared.snap_seq.store(seq, SeqCst);
    }

    #[test]
    fn a_snapshot_hands_over_the_finished_and_censors_the_outstanding() {
        let shared = Shared::new(1, T0);
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000_000);
        fin.record(req(10, SAMPLED), Times::default(), 50, 0, 0);
        fin.c.intended = 3;
        let mut h = Handover::new(0, Role::Measure, T0);
        assert_eq!(h.due(&shared), None);
        ask(&shared, 1);
        assert_eq!(h.due(&shared), Some(1));
        let out = [(req(20, SAMPLED | F::RESENT), Times { sent: T0 + 25, ..Default::default() }), (req(30, 0), Times::default())];
        h.hand_over(&shared, &mut fin, out.into_iter(), Some(1), T0 + 100);
        assert_eq!(h.due(&shared), None);
        assert!(fin.samples.is_empty());
        assert_eq!(shared.harvest.lock().unwrap().batches.iter().map(|s| s.len()).sum::<usize>(), 1);
        let pending = shared.pending.lock().unwrap().1.clone();
        assert_eq!(pending.len(), 1, "the sampled one of the two outstanding");
        assert_eq!((pending[0].intended_ns, pending[0].sent_ns, pending[0].latency_ns), (20, 25, 80));
        assert_eq!(pending[0].flags(), F::CENSORED | F::PENDING | F::RESENT);
        assert_eq!((pending[0].busy_from_ns, pending[0].thread), (10, 0), "kept from when it fell due");
        let p = &shared.progress[0];
        assert_eq!((p.snap_seq.load(SeqCst), p.snap_ns.load(SeqCst), p.intended.load(SeqCst)), (1, 100, 3));
        assert_eq!(p.at_snapshot.lock().unwrap().intended, 3);
        let iv = shared.intervals.lock().unwrap();
        assert_eq!(iv.window(0, 1, false).len(), 1);
        assert_eq!(iv.window(0, 1, true).len(), 3, "with the two outstanding");
    }

    #[test]
    fn a_snapshot_served_late_adds_nothing_to_a_newer_one_and_the_end_publishes() {
        let shared = Shared::new(1, T0);
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000_000);
        let mut h = Handover::new(0, Role::Measure, T0);
        ask(&shared, 2);
        // Serving snapshot 1 after the coordinator moved on to 2.
        h.hand_over(&shared, &mut fin, [(req(20, SAMPLED), Times::default())].into_iter(), Some(1), T0 + 100);
        assert!(shared.pending.lock().unwrap().1.is_empty());
        assert_eq!(shared.intervals.lock().unwrap().window(0, 1, true).len(), 0);
        fin.c.sent = 7;
        h.hand_over(&shared, &mut fin, empty(), None, T0 + 200);
        assert_eq!(shared.progress[0].at_snapshot.lock().unwrap().sent, 7);
        assert_eq!(shared.progress[0].snap_seq.load(SeqCst), 1);
    }

    #[test]
    fn a_snapshot_without_pending_hands_over_the_finished_and_censors_nothing() {
        let shared = Shared::new(1, T0);
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000_000);
        fin.record(req(10, SAMPLED), Times::default(), 50, 0, 0);
        let mut h = Handover::new(0, Role::Measure, T0);
        ask(&shared, 1);
        shared.snap_pending.store(false, SeqCst); // Engine::take_finished
        let out = [(req(20, SAMPLED), Times::default()), (req(30, SAMPLED), Times::default())];
        h.hand_over(&shared, &mut fin, out.into_iter(), Some(1), T0 + 100);
        assert_eq!(shared.harvest.lock().unwrap().batches.iter().map(|s| s.len()).sum::<usize>(), 1);
        assert!(shared.pending.lock().unwrap().1.is_empty(), "no pending rows");
        let iv = shared.intervals.lock().unwrap();
        assert_eq!((iv.window(0, 1, false).len(), iv.window(0, 1, true).len()), (1, 1), "nor pending histograms");
        drop(iv);
        assert_eq!(shared.progress[0].snap_seq.load(SeqCst), 1, "served all the same");
    }

    #[test]
    fn rows_past_the_bound_are_thinned_by_key_and_handed_over_with_their_level() {
        let shared = Shared::new(1, T0);
        shared.thin_bound.store(100, SeqCst);
        shared.thin_base.store(3 << 16, SeqCst);
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000_000);
        let mut h = Handover::new(0, Role::Measure, T0);
        // The bound is taken at a snapshot: none before the first.
        ask(&shared, 1);
        h.hand_over(&shared, &mut fin, empty(), Some(1), T0 + 1);
        for i in 0..1_000 {
            fin.record(req(10 + i, SAMPLED), Times::default(), 50, 0, 0);
        }
        let level = fin.thin.level;
        assert!(level >= 3 && fin.samples.len() <= 100, "{} rows at level {level}", fin.samples.len());
        let out: Vec<_> = (0..1_000).map(|i| (req(2_000 + i, SAMPLED), Times::default())).collect();
        ask(&shared, 2);
        h.hand_over(&shared, &mut fin, out.into_iter(), Some(2), T0 + 5_000);
        let harvest = shared.harvest.lock().unwrap();
        assert_eq!(harvest.level, level);
        let kept = |s: &Sample| crate::record::thin::keeps(s, level, 3 << 16);
        let rows: Vec<Sample> = harvest.batches.iter().flat_map(|b| b.iter().copied()).collect();
        assert_eq!(rows.iter().map(|s| s.intended_ns).collect::<Vec<_>>(),
                   (10..1_010).filter(|&t| kept(&Sample { intended_ns: t, ..Default::default() })).collect::<Vec<_>>(),
                   "exactly the finished rows a subsample at that level keeps");
        let pending = shared.pending.lock().unwrap().1.clone();
        assert!(!pending.is_empty() && pending.len() < 1_000 && pending.iter().all(kept), "the outstanding at that level too");
        assert_eq!((fin.thin.level, fin.thin.bound), (0, 100), "a fresh start after the snapshot");
    }

    #[test]
    fn a_load_thread_reports_nothing_outstanding() {
        let shared = Shared::new(1, T0);
        let mut fin = Finish::new(Role::Load, 0, T0, 1_000_000);
        let mut h = Handover::new(0, Role::Load, T0);
        ask(&shared, 1);
        h.hand_over(&shared, &mut fin, [(req(20, SAMPLED), Times::default())].into_iter(), Some(1), T0 + 100);
        assert!(shared.pending.lock().unwrap().1.is_empty());
        assert_eq!(shared.progress[0].snap_seq.load(SeqCst), 1);
    }
}
