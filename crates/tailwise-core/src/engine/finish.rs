//! The end of every request, exactly once: answered, or censored at the time it waited (timed
//! out, never sent, unfinished, failed), into the counters, the histograms (whole run and its
//! interval) and, if it was chosen, the raw samples; and the error reasons, counted. Sends are
//! counted here too, with their send lag.

use super::req::{Flight, Req, Times, SAMPLED};
use super::shared::{count_reason, Counters, Role};
use crate::protocol::OpKind;
use crate::record::flags as F;
use crate::record::histogram::Histograms;
use crate::record::interval::IntervalRecorder;
use crate::record::linear::LinearHistogram;
use crate::record::sample::{Sample, SampleStore};
use crate::record::thin::Thin;

/// Distinct error reasons kept per thread; the rest are counted under one line.
const MAX_REASONS: usize = 32;
const OTHER_REASONS: &str = "other reasons";

/// A time as an error reason says it.
pub(super) fn ms(ns: u64) -> String {
    format!("{} ms", ns / 1_000_000)
}

/// `F::SET` for a set, else 0: a sample says which kind it was.
#[inline]
pub(super) fn kind_flag(r: &Req) -> u32 {
    if r.op.kind == OpKind::Set { F::SET } else { 0 }
}

pub(crate) struct Finish {
    /// `Role::Load`: requests are counted, not timed (a probe thread times its own).
    role: Role,
    /// The engine thread's index, in every sample.
    thread: u32,
    /// The schedule's time zero: samples and intervals count from it.
    t0: u64,
    timeout_ns: u64,
    pub c: Counters,
    /// Replies received within the schedule's window.
    pub received_in_window: u64,
    pub hist: Histograms,
    pub intervals: IntervalRecorder,
    pub samples: SampleStore,
    /// How `samples` are thinned (never, unless the caller bounds them: `Engine::thin_rows`).
    pub thin: Thin,
    pub reasons: Vec<(String, u64)>,
}

impl Finish {
    pub fn new(role: Role, thread: usize, t0: u64, timeout_ns: u64) -> Finish {
        Finish {
            role,
            thread: thread as u32,
            t0,
            timeout_ns,
            c: Counters::default(),
            received_in_window: 0,
            hist: Histograms::new(),
            intervals: IntervalRecorder::default(),
            samples: SampleStore::default(),
            thin: Thin::default(),
            reasons: Vec::new(),
        }
    }

    /// Packet mode: every answered packet also into a 100 ns histogram (`record/linear`).
    pub fn with_packet_histogram(mut self) -> Finish {
        self.hist.packets = Some(LinearHistogram::new());
        self
    }

    /// The end of a request: into the histograms (whole run and its interval), and into the
    /// samples if it was chosen.
    #[inline]
    pub fn record(&mut self, r: Req, times: Times, latency: u64, flags: u32, inflation: u64) {
        if self.role == Role::Load {
            return; // counted by the caller; the probe times the requests that are reported
        }
        let mut flags = flags | (r.flags & !SAMPLED);
        if inflation > 0 {
            flags |= F::INFLATED;
        }
        flags |= kind_flag(&r);
        self.hist.latency.saturating_record(latency.max(1));
        if let Some(packets) = self.hist.packets.as_mut().filter(|_| flags & F::CENSORED == 0) {
            packets.record(latency);
        }
        self.intervals.record(r.intended - self.t0, latency);
        if r.flags & SAMPLED != 0 {
            let s = Sample {
                intended_ns: r.intended - self.t0,
                sent_ns: times.sent.saturating_sub(self.t0),
                tx_ns: times.tx.saturating_sub(self.t0),
                rx_user_ns: times.rx_user.saturating_sub(self.t0),
                latency_ns: latency,
                busy_from_ns: r.busy_from.saturating_sub(self.t0),
                flags: F::in_row(flags),
                request: r.op.request,
                inflation_ns: inflation.min(u32::MAX as u64) as u32,
                thread: self.thread,
                slot_wait_ns: r.slot_wait,
            };
            if self.thin.keeps(&s) {
                self.samples.push(s);
                if self.samples.len() > self.thin.bound {
                    self.thin.raise(&mut self.samples);
                }
            }
        }
    }

    /// A request written at `t` (again, if it is `RESENT`): its send lag, lateness and kind;
    /// `last_stall_end`: a request intended before it was delayed by it.
    #[inline]
    pub fn sent(&mut self, r: &Req, t: u64, late_ns: u64, last_stall_end: u64) {
        if r.flags & F::RESENT != 0 {
            self.c.resent += 1;
            return;
        }
        self.c.sent += 1;
        let lag = t.saturating_sub(r.intended);
        self.hist.send_lag.saturating_record(lag.max(1));
        if r.intended >= last_stall_end {
            self.hist.send_lag_unstalled.saturating_record(lag.max(1));
        }
        if lag > late_ns {
            self.c.late += 1;
        }
        match r.op.kind {
            OpKind::Get => self.c.gets += 1,
            OpKind::Set => self.c.sets += 1,
        }
    }

    /// A sent request without a reply `timeout` after its intended time.
    pub fn time_out(&mut self, r: Req, times: Times, now: u64) {
        self.c.timeouts += 1;
        self.record(r, times, now - r.intended, F::CENSORED | F::TIMEOUT, 0);
    }

    /// A request lost with its connection, closed for good.
    pub fn fail(&mut self, f: &Flight, now: u64) {
        self.c.errors += 1;
        self.record(f.req, f.times(), now - f.req.intended, F::CENSORED | F::FAILED, 0);
    }

    /// A request still in flight when the run ends: a timeout if it has been outstanding longer
    /// than the timeout, else `unfinished` (the run was stopped before it could end).
    pub fn censor_flight(&mut self, f: Flight, now: u64) {
        let age = now - f.req.intended;
        if age > self.timeout_ns {
            self.time_out(f.req, f.times(), now);
        } else {
            self.c.unfinished += 1;
            self.record(f.req, f.times(), age, F::CENSORED | F::PENDING, 0);
        }
    }

    /// A request that waited in the backlog past its timeout (`timed_out`) or to the end of the
    /// run: never sent, or — if it was sent before, on a connection since lost — a timeout or
    /// unfinished; censored at the time it waited.
    pub fn censor_waiting(&mut self, r: Req, now: u64, timed_out: bool) {
        let flag = match (r.flags & F::RESENT != 0, timed_out) {
            (true, true) => {
                self.c.timeouts += 1;
                F::TIMEOUT
            }
            (true, false) => {
                self.c.unfinished += 1;
                F::PENDING
            }
            (false, _) => {
                self.c.never_sent += 1;
                F::NEVER_SENT
            }
        };
        self.record(r, Times::default(), now - r.intended, F::CENSORED | flag, 0);
    }

    /// Count one occurrence of an error reason.
    pub fn note(&mut self, reason: String) {
        self.note_n(reason, 1);
    }

    pub fn note_n(&mut self, reason: String, n: u64) {
        let full = self.reasons.len() >= MAX_REASONS;
        let key = if full && !self.reasons.iter().any(|(r, _)| *r == reason) { OTHER_REASONS.to_string() } else { reason };
        count_reason(&mut self.reasons, key, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::workload::Op;

    const T0: u64 = 1_000_000_000;

    fn req(at: u64, flags: u32) -> Req {
        Req::new(T0 + at, T0 + at / 2, Op::KEYLESS, flags)
    }

    fn one(fin: &Finish) -> Sample {
        assert_eq!(fin.hist.latency.len(), 1, "recorded exactly once");
        assert_eq!(fin.samples.len(), 1);
        *fin.samples.iter().next().unwrap()
    }

    #[test]
    fn an_answer_is_recorded_once_with_its_times_and_inflation() {
        let mut fin = Finish::new(Role::Measure, 3, T0, 1_000);
        let times = Times { sent: T0 + 150, tx: T0 + 160, rx_user: T0 + 900 };
        let r = Req { slot_wait: 30, ..req(100, SAMPLED | F::ENGINE_STALL) };
        fin.record(r, times, 700, F::KERNEL_RX, 40);
        let s = one(&fin);
        assert_eq!((s.intended_ns, s.sent_ns, s.tx_ns, s.rx_user_ns, s.latency_ns), (100, 150, 160, 900, 700));
        assert_eq!(s.flags(), F::KERNEL_RX | F::ENGINE_STALL | F::INFLATED, "SAMPLED is internal");
        assert_eq!((s.inflation_ns, s.busy_from_ns, s.thread, s.slot_wait_ns), (40, 50, 3, 30));
        // Not chosen: in the histogram only.
        fin.record(req(200, 0), times, 700, 0, 0);
        assert_eq!((fin.hist.latency.len(), fin.samples.len()), (2, 1));
    }

    #[test]
    fn the_packet_histogram_holds_answers_only() {
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000).with_packet_histogram();
        fin.record(req(100, 0), Times::default(), 1_234, 0, 0);
        fin.record(req(200, 0), Times::default(), 1_000, F::CENSORED | F::TIMEOUT, 0);
        let packets = fin.hist.packets.as_ref().unwrap();
        assert_eq!((packets.counts[12], packets.total()), (1, 1), "a lost packet is not an answer");
        assert_eq!(fin.hist.latency.len(), 2);
        assert!(Finish::new(Role::Measure, 0, T0, 1_000).hist.packets.is_none());
    }

    #[test]
    fn censored_requests_carry_why_and_count_once() {
        let now = T0 + 5_000;
        let cases = [
            (SAMPLED | F::RESENT, true, F::TIMEOUT),
            (SAMPLED | F::RESENT, false, F::PENDING),
            (SAMPLED, true, F::NEVER_SENT),
            (SAMPLED, false, F::NEVER_SENT),
        ];
        for (flags, timed_out, why) in cases {
            let mut fin = Finish::new(Role::Measure, 0, T0, 1_000);
            fin.censor_waiting(req(1_000, flags), now, timed_out);
            let s = one(&fin);
            assert_eq!(s.flags(), F::CENSORED | why | (flags & F::RESENT));
            assert_eq!(s.latency_ns, 4_000, "the time it waited");
            let c = fin.c;
            assert_eq!(c.timeouts + c.unfinished + c.never_sent, 1, "{c:?}");
        }
    }

    #[test]
    fn a_flight_at_the_end_is_a_timeout_past_the_timeout_else_unfinished() {
        let flight = |at| Flight { req: req(at, SAMPLED), id: 0, sent: T0 + at + 1, end: 0, tx: 0, ghost: false };
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000);
        fin.censor_flight(flight(3_000), T0 + 5_000);
        assert_eq!(one(&fin).flags(), F::CENSORED | F::TIMEOUT);
        assert_eq!((fin.c.timeouts, fin.c.unfinished), (1, 0));
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000);
        fin.censor_flight(flight(4_500), T0 + 5_000);
        assert_eq!(one(&fin).flags(), F::CENSORED | F::PENDING);
        assert_eq!((fin.c.timeouts, fin.c.unfinished), (0, 1));
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000);
        fin.fail(&flight(4_500), T0 + 5_000);
        assert_eq!((one(&fin).flags(), fin.c.errors), (F::CENSORED | F::FAILED, 1));
    }

    #[test]
    fn a_send_counts_once_with_its_lag_and_a_resend_only_as_resent() {
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000);
        fin.sent(&req(0, 0), T0 + 100, 50, 0);
        fin.sent(&req(10, 0), T0 + 20, 50, T0 + 15); // intended before the last stall's end
        fin.sent(&req(20, F::RESENT), T0 + 500, 50, 0);
        let c = fin.c;
        assert_eq!((c.sent, c.late, c.gets, c.resent), (2, 1, 2, 1));
        assert_eq!((fin.hist.send_lag.len(), fin.hist.send_lag_unstalled.len()), (2, 1));
        assert_eq!(fin.hist.send_lag.max(), 100);
    }

    #[test]
    fn a_load_thread_counts_but_records_nothing() {
        let mut fin = Finish::new(Role::Load, 0, T0, 1_000);
        fin.censor_waiting(req(0, SAMPLED), T0 + 10, false);
        assert_eq!((fin.c.never_sent, fin.hist.latency.len(), fin.samples.len()), (1, 0, 0));
    }

    #[test]
    fn reasons_are_counted_and_bounded() {
        let mut fin = Finish::new(Role::Measure, 0, T0, 1_000);
        for i in 0..40 {
            fin.note(format!("reason {}", i % 35));
        }
        fin.note_n("reason 0".into(), 3);
        assert_eq!(fin.reasons.len(), MAX_REASONS + 1);
        assert_eq!(fin.reasons[0], ("reason 0".to_string(), 5));
        assert_eq!(fin.reasons.last().unwrap(), &(OTHER_REASONS.to_string(), 3));
    }
}
