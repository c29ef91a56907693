//! One engine thread in packet mode: the timing loop over its flows. Each packet due (the
//! schedule's intended times, the thread's flows in turn) is queued on its flow with the next
//! seq; every iteration sends all that is queued with one sendmmsg per flow, and reads what came
//! back with recvmmsg (answer.rs). Every millisecond the flows' rings are scanned from their
//! oldest packet for timeouts: a packet unanswered `timeout` after its intended time is lost,
//! censored at the time it waited. After the schedule the drain waits for the rest (a timeout at
//! most, 50 ms when the run was stopped); what is still out then is lost too. So at the end
//! `sent` = `received` + `lost`, each packet counted once.
//!
//! Snapshots, pauses, stalls and the target's reachability are the request path's
//! (engine/thread.rs), as are the whole-run and interval histograms and the samples.

use super::batch::{Batch, BATCH};
use super::flows::{ring_len, Flow, Slot, State};
use super::{wire, PacketCounts, LOST};
use crate::engine::busy::ThreadBusy;
use crate::engine::finish::Finish;
use crate::engine::handover::{self, Handover};
use crate::engine::io::RxClock;
use crate::engine::reach::Reach;
use crate::engine::req::{Flight, Req, Times, SAMPLED};
use crate::engine::stalls::{preemptions, thread_cpu_ns, Stalls};
use crate::engine::thread::{ThreadCtx, ThreadResult};
use crate::engine::{EngineConfig, Role, Shared, Sock};
use crate::io::{cpu, poll::Epoll, poll::EPOLLIN};
use crate::load::{schedule::Schedule, workload::Op};
use crate::record::{flags as F, sampler::Sampler};
use crate::time::{clock::now_ns, clock::set_timer_slack_1ns, stall::StallWatch};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;

/// As the request path's (engine/thread.rs): spin this long before a send in blocking mode, look
/// at timeouts this often, wait at most this long at once, drain this long after a stop.
const SPIN_NS: u64 = 50_000;
const TICK_NS: u64 = 1_000_000;
const MAX_WAIT_NS: u64 = 1_000_000;
const DRAIN_ON_STOP_NS: u64 = 50_000_000;
/// Once every packet is done, the drain reads on this long: a duplicate sent right behind the
/// last answer is still counted.
const LINGER_NS: u64 = 5_000_000;
/// A thread far behind its schedule queues (or finds the ring full for) millions of packets in
/// one `fall_due` and sends for seconds in one `send_queued`: it serves a snapshot asked meanwhile
/// after this many packets queued, and between two batches sent, not only once the iteration is
/// over — otherwise the rows it finishes gather in it until then (issue 33: hundreds of MiB at an
/// offered rate far above what the machine sends) and the snapshot comes too late for its taker.
const SERVE_EVERY: u32 = 1024;

pub(crate) struct PacketWorker {
    pub cfg: EngineConfig,
    pub shared: Arc<Shared>,
    pub index: usize,
    pub role: Role,
    pub flows: Vec<Flow>,
    /// The flow the next packet due goes to (the thread's flows in turn).
    rr: usize,
    ep: Epoll,
    ready: Vec<usize>,
    pub out: Batch,
    pub inb: Batch,
    sampler: Sampler,
    pub fin: Finish,
    pub stalls: Stalls,
    pub reach: Reach,
    handover: Handover,
    pub rx: RxClock,
    pub counts: PacketCounts,
    /// Packets never sent because their flow's ring was full, not yet in the error reasons.
    ring_full: u64,
    /// Packets queued or out on the flows, so that idleness needs no scan.
    pub outstanding: u64,
    /// Counted busy or idle in the engine's `Shared::busy`.
    busy: ThreadBusy,
    pub watch: StallWatch,
    planned_wait: u64,
    pub t0: u64,
    pub end: u64,
}

pub(crate) fn run(ctx: ThreadCtx) -> ThreadResult {
    set_timer_slack_1ns();
    let pinned_cpu = ctx.cpu.filter(|&c| cpu::pin_to_cpu(c));
    let (cpu0, preempt0) = (thread_cpu_ns(), preemptions());
    let seed = ctx.cfg.seed ^ (ctx.index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut w = PacketWorker::new(ctx, seed);
    let share = w.cfg.rate_rps / w.cfg.threads as f64;
    let phase = w.index as f64 / w.cfg.threads as f64;
    let mut sched = Schedule::new(w.cfg.arrival, share, w.t0, phase, seed);
    let elapsed_ns = w.main_loop(&mut sched);
    w.drain();
    w.hand_over(None);
    w.shared.progress[w.index].done.store(true, SeqCst);
    ThreadResult {
        counters: w.fin.c,
        received_in_window: w.fin.received_in_window,
        hist: w.fin.hist,
        stalls: w.stalls.count,
        stalled_ns: w.stalls.stalled_ns,
        elapsed_ns,
        error_reasons: w.fin.reasons,
        pinned_cpu,
        cpu_ns: thread_cpu_ns() - cpu0,
        preemptions: preemptions() - preempt0,
        role: w.role,
    }
}

impl PacketWorker {
    fn new(ctx: ThreadCtx, seed: u64) -> PacketWorker {
        let cfg = ctx.cfg;
        let crate::protocol::Protocol::UdpFlow { size, flows: all } = cfg.protocol else {
            unreachable!("the packet path runs udp+flow only")
        };
        let threads = cfg.threads;
        let mine = ctx.streams.len().max(1);
        let len = ring_len(cfg.rate_rps / threads as f64 / mine as f64, cfg.timeout_ns, all);
        let ipv6 = cfg.targets.first().is_some_and(|a| a.is_ipv6());
        let payload = wire::payload_len(size, ipv6);
        // Flow i of the run is thread (i mod threads)'s (engine/mod.rs, `connect_all`).
        let flows: Vec<Flow> = ctx
            .streams
            .into_iter()
            .enumerate()
            .map(|(k, s)| match s {
                Sock::Udp(u) => Flow::new(u, (ctx.index + k * threads).min(all - 1) as u16, len),
                Sock::Tcp(_) => unreachable!("packet flows are UDP sockets"),
            })
            .collect();
        let ep = Epoll::new(flows.len().max(1) * 2).expect("epoll_create1");
        for (i, f) in flows.iter().enumerate() {
            ep.add(f.fd, EPOLLIN, i as u64).expect("epoll_ctl add");
        }
        let mut out = Batch::new(payload);
        for k in 0..BATCH {
            out.buf(k).fill(0);
        }
        PacketWorker {
            shared: ctx.shared.clone(),
            index: ctx.index,
            role: ctx.role,
            ready: Vec::with_capacity(flows.len() * 2),
            flows,
            rr: 0,
            ep,
            out,
            // Room for a longer answer than asked: only its header is read.
            inb: Batch::new(payload.max(64)),
            sampler: Sampler::new(cfg.sample_every, seed ^ 0x5A5A),
            fin: Finish::new(ctx.role, ctx.index, ctx.start_ns, cfg.timeout_ns).with_packet_histogram(),
            stalls: Stalls::new(),
            reach: Reach::new(ctx.start_ns),
            handover: Handover::new(ctx.index, ctx.role, ctx.start_ns),
            rx: RxClock::new(cfg.timestamps.clock(), ctx.nic, ctx.start_ns),
            counts: PacketCounts::new(cfg.duration_ns, cfg.timeout_ns),
            ring_full: 0,
            outstanding: 0,
            busy: ThreadBusy::new(ctx.index),
            watch: StallWatch::new(ctx.shared.stall_log.clone()),
            planned_wait: 0,
            t0: ctx.start_ns,
            end: ctx.start_ns + cfg.duration_ns,
            cfg,
        }
    }

    /// Returns how long the schedule ran (ns).
    fn main_loop(&mut self, sched: &mut Schedule) -> u64 {
        let mut next = sched.next_ns();
        let mut next_tick = self.t0 + TICK_NS;
        let mut paused_at: Option<u64> = None;
        crate::time::clock::sleep_until(self.t0, SPIN_NS);
        self.watch.reset();
        let mut prev = self.watch.now();
        loop {
            let now = self.watch.now();
            if let Some((a, b)) = self.watch.take_fresh() {
                self.stalls.push(a, b);
            }
            if now >= self.end || self.shared.stop.load(Relaxed) {
                break;
            }
            self.stalls.iteration(now - prev, self.planned_wait, now);
            prev = now;
            self.fall_due(sched, &mut next, &mut paused_at, now);
            self.send_queued();
            let sched_next = next;
            let next = if paused_at.is_some() { now + MAX_WAIT_NS } else { next };
            let wait = if self.cfg.busy_poll || paused_at.is_none() && self.queued() {
                0
            } else {
                next.saturating_sub(self.watch.now() + SPIN_NS).min(MAX_WAIT_NS)
            };
            self.planned_wait = wait;
            self.poll(wait, next);
            if now >= next_tick {
                self.tick(now);
                next_tick = now + TICK_NS;
            }
            if sched_next > now {
                self.idle_check(sched_next);
            }
            self.serve_snapshot();
        }
        let stopped = now_ns().min(self.end);
        if !self.shared.stop.load(Relaxed) && paused_at.is_none() {
            while next < self.end {
                self.enqueue(next, stopped);
                next = sched.next_ns();
            }
        }
        self.end = stopped;
        self.busy.schedule_over(&self.shared.busy, || self.watch.now());
        stopped.saturating_sub(self.t0)
    }

    /// What fell due is queued; a pause holds what is to come, and its end moves it (as the
    /// request path's `fall_due`).
    #[inline]
    fn fall_due(&mut self, sched: &mut Schedule, next: &mut u64, paused_at: &mut Option<u64>, now: u64) {
        if paused_at.is_none() {
            let mut n = 0u32;
            while *next <= now {
                self.enqueue(*next, now);
                *next = sched.next_ns();
                n = n.wrapping_add(1);
                if n % SERVE_EVERY == 0 {
                    self.serve_snapshot(); // far behind: see SERVE_EVERY
                }
            }
        }
        match (self.shared.paused.load(Relaxed), *paused_at) {
            (true, None) => *paused_at = Some(now),
            (false, Some(p)) => {
                *paused_at = None;
                sched.shift(now - p);
                *next += now - p;
            }
            _ => {}
        }
    }

    fn queued(&self) -> bool {
        self.flows.iter().any(|f| f.queued() > 0)
    }

    /// No packet queued or out: the thread is idle until `next`, its next intended time (busy.rs).
    #[inline]
    fn idle_check(&mut self, next: u64) {
        debug_assert_eq!(self.outstanding == 0, self.flows.iter().all(Flow::idle));
        if self.busy.is_busy() && self.outstanding == 0 {
            let watch = &mut self.watch;
            self.busy.idle(&self.shared.busy, next, || watch.now());
        }
    }

    /// A packet due at `intended`, queued on the next flow in turn (never sent if its ring is full).
    #[inline]
    fn enqueue(&mut self, intended: u64, now: u64) {
        self.fin.c.intended += 1;
        let busy_from = self.busy.due(&self.shared.busy, intended);
        let mut flags = if self.role != Role::Load && self.sampler.take() { SAMPLED } else { 0 };
        if self.stalls.in_window(intended) {
            flags |= F::ENGINE_STALL;
        }
        let f = self.rr;
        self.rr = (self.rr + 1) % self.flows.len();
        if self.flows[f].push(intended, busy_from, flags).is_some() {
            self.outstanding += 1;
        } else {
            self.fin.c.never_sent += 1;
            let req = Req::new(intended, busy_from, Op::KEYLESS, flags);
            self.fin.record(req, Times::default(), now - intended, F::CENSORED | F::NEVER_SENT, 0);
            self.ring_full += 1; // in the error reasons at the next tick: no text per packet here
        }
    }

    /// Wait for datagrams and read them, flow by flow, but return once a send falls due.
    fn poll(&mut self, wait_ns: u64, next_due: u64) {
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        self.watch.plan_wait(wait_ns);
        let waited = self.ep.wait(wait_ns);
        self.watch.now();
        match waited {
            Ok(evs) => ready.extend(evs.iter().map(|e| e.u64 as usize)),
            Err(e) => self.shared.abort(crate::engine::Abort::Epoll(e)),
        }
        for (n, &i) in ready.iter().enumerate() {
            if n > 0 && self.watch.now() >= next_due {
                break;
            }
            self.read_flow(i);
        }
        self.ready = ready;
        handover::publish(&self.shared.progress[self.index], &self.fin);
    }

    /// Every millisecond: packets past their timeout are lost (queued ones never sent), the
    /// target's reachability, old stall windows.
    fn tick(&mut self, now: u64) {
        let timeout = self.cfg.timeout_ns;
        self.end_flows(now.saturating_sub(timeout), now);
        self.note_ring_full();
        if let Some(abort) = self.reach.verdict(now, self.cfg.unreachable_ns) {
            self.shared.abort(abort);
        }
        self.stalls.prune(now.saturating_sub(timeout + 10 * TICK_NS));
    }

    /// The packets never sent for a full ring, in the error reasons (one text per tick, not per packet).
    fn note_ring_full(&mut self) {
        if self.ring_full > 0 {
            let why = "not sent: the flow already had as many packets outstanding as it tracks".to_string();
            self.fin.note_n(why, std::mem::take(&mut self.ring_full));
        }
    }

    /// End every packet intended before `before`, censored at `now`: one sent is lost (a timeout
    /// when past its timeout, else unfinished: the run ends), one queued is never sent.
    fn end_flows(&mut self, before: u64, now: u64) {
        let (fin, counts, t0, outstanding) = (&mut self.fin, &mut self.counts, self.t0, &mut self.outstanding);
        for f in self.flows.iter_mut() {
            f.expire(before, |s: Slot| {
                *outstanding -= 1;
                let req = Req::new(s.intended, s.busy_from, Op::KEYLESS, s.flags);
                if s.state == State::Out {
                    fin.c.lost += 1;
                    counts.note(s.intended - t0, LOST);
                    let flight = Flight { req, id: s.seq, sent: s.sent, end: 0, tx: 0, ghost: false };
                    fin.censor_flight(flight, now);
                } else {
                    fin.censor_waiting(req, now, false);
                }
            });
        }
    }

    /// After the schedule: send what is queued and wait for what is out, until every packet is
    /// done or its timeout has passed (`DRAIN_ON_STOP_NS` when the run was stopped); the rest lost.
    fn drain(&mut self) {
        let stopped = self.shared.stop.load(Relaxed);
        let start = now_ns();
        let deadline = start + if stopped { DRAIN_ON_STOP_NS } else { self.cfg.timeout_ns + TICK_NS };
        let (mut next_tick, mut idle_since) = (start, None);
        loop {
            self.idle_check(u64::MAX);
            let now = self.watch.now();
            let aborted = self.shared.stop.load(Relaxed) && self.shared.abort.lock().unwrap().is_some();
            if self.flows.iter().all(Flow::idle) {
                idle_since = idle_since.or(Some(now));
            }
            if idle_since.is_some_and(|t| now - t >= LINGER_NS) || now >= deadline || aborted {
                break;
            }
            if !stopped {
                self.send_queued();
            }
            self.poll(if self.cfg.busy_poll { 0 } else { (deadline - now).min(MAX_WAIT_NS) }, u64::MAX);
            if now >= next_tick {
                self.tick(now);
                next_tick = now + TICK_NS;
            }
            self.serve_snapshot();
        }
        let now = now_ns();
        // What is still out is lost, and stays outstanding for good (the thread stays busy).
        self.end_flows(u64::MAX, now);
        self.note_ring_full();
        let first_reason = self.fin.reasons.first().map(|(r, _)| r.as_str());
        if let Some(none) = self.reach.none_answered(self.fin.c.sent, first_reason) {
            if !(self.shared.stop.load(Relaxed) && self.shared.abort.lock().unwrap().is_some()) {
                self.shared.abort(none);
            }
        }
        handover::publish(&self.shared.progress[self.index], &self.fin);
    }

    #[inline]
    pub(super) fn serve_snapshot(&mut self) {
        if let Some(seq) = self.handover.due(&self.shared) {
            self.hand_over(Some(seq));
        }
    }

    /// Samples, interval histograms and packet counts to the shared state; for a snapshot, also
    /// the packets not done (censored at the time they have waited).
    fn hand_over(&mut self, seq: Option<u64>) {
        let now = now_ns();
        self.counts.hand_over(&mut self.shared.packets.lock().unwrap());
        let outstanding = self.flows.iter().flat_map(|f| f.outstanding()).map(|s| {
            (Req::new(s.intended, s.busy_from, Op::KEYLESS, s.flags), Times { sent: s.sent, tx: 0, rx_user: 0 })
        });
        self.handover.hand_over(&self.shared, &mut self.fin, outstanding, seq, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::schedule::Arrival;
    use crate::protocol::Protocol;
    use std::net::UdpSocket;

    /// A worker of one flow to a socket that reads nothing (loopback: the datagrams are sent all
    /// the same), its schedule `rate` packets a second of every one sampled, from `t0`.
    fn worker(rate: f64) -> (PacketWorker, Schedule, UdpSocket) {
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let cfg = EngineConfig {
            targets: vec![sink.local_addr().unwrap()],
            rate_rps: rate,
            duration_ns: 1_000_000_000,
            protocol: Protocol::UdpFlow { size: 64, flows: 1 },
            arrival: Arrival::Fixed,
            timeout_ns: 100_000_000,
            sample_every: 1,
            pin: false,
            ..EngineConfig::default()
        };
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(cfg.targets[0]).unwrap();
        sock.set_nonblocking(true).unwrap();
        let t0 = 1_000_000_000;
        let ctx = ThreadCtx {
            index: 0,
            streams: vec![Sock::Udp(sock)],
            cfg,
            role: Role::Measure,
            start_ns: t0,
            cpu: None,
            shared: Arc::new(Shared::new(1, t0)),
            nic: None,
        };
        let w = PacketWorker::new(ctx, 1);
        let sched = Schedule::new(Arrival::Fixed, rate, t0, 0.0, 1);
        (w, sched, sink)
    }

    /// The coordinator's side of `Engine::take`: ask for snapshot `seq`.
    fn ask(w: &PacketWorker, seq: u64) {
        *w.shared.pending.lock().unwrap() = (seq, Vec::new());
        w.shared.intervals.lock().unwrap().pending_seq = seq;
        w.shared.snap_seq.store(seq, SeqCst);
    }

    fn served(w: &PacketWorker) -> (u64, crate::engine::Snapshot) {
        let p = &w.shared.progress[w.index];
        (p.snap_seq.load(SeqCst), *p.at_snapshot.lock().unwrap())
    }

    /// Issue 33: a thread far behind queues a ring of packets and sends it for seconds in one
    /// iteration; a snapshot asked meanwhile is served inside those loops, not after them.
    #[test]
    fn a_thread_far_behind_serves_a_snapshot_while_it_queues_and_while_it_sends() {
        let (mut w, mut sched, _sink) = worker(1_000_000.0);
        let (mut next, mut paused) = (sched.next_ns(), None);
        ask(&w, 1);
        // 10 ms of the schedule due at once: 10,000 packets queued in one call.
        w.fall_due(&mut sched, &mut next, &mut paused, w.t0 + 10_000_000);
        let (seq, at) = served(&w);
        assert_eq!((seq, at.intended), (1, SERVE_EVERY as u64), "served after the first {SERVE_EVERY} queued");
        assert_eq!(w.fin.c.intended, 10_001, "and the rest queued after");
        ask(&w, 2);
        w.send_queued();
        let (seq, at) = served(&w);
        assert_eq!((seq, at.sent), (2, BATCH as u64), "served after the first batch sent");
        assert_eq!(w.fin.c.sent, 10_001, "and every packet sent after");
        // Every packet queued or out: all of them outstanding at the snapshot, censored.
        assert_eq!(w.shared.pending.lock().unwrap().1.len(), 10_001);
    }

    /// Nothing is served when nothing is asked, and a thread on time serves at the end of its
    /// iteration as before (one packet due, one batch sent: no snapshot inside the loops).
    #[test]
    fn a_thread_on_time_serves_nothing_inside_its_loops() {
        let (mut w, mut sched, _sink) = worker(1_000.0);
        let (mut next, mut paused) = (sched.next_ns(), None);
        w.fall_due(&mut sched, &mut next, &mut paused, w.t0 + 10_000_000);
        ask(&w, 1);
        w.fall_due(&mut sched, &mut next, &mut paused, w.t0 + 11_000_000);
        w.send_queued();
        assert_eq!(served(&w).0, 0);
        assert_eq!((w.fin.c.intended, w.fin.c.sent), (12, 12));
        w.serve_snapshot();
        assert_eq!(served(&w).0, 1);
    }
}
