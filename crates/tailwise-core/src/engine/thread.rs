//! One engine thread: the timing loop over its connections, schedule and backlog.
//!
//! A request lives from its intended send time to its end as a [`Req`]: drawn (and chosen for
//! sampling) when it falls due, queued in the FIFO backlog, written on a connection with a free
//! slot, answered — or censored. Every request ends in the histograms exactly once (finish.rs):
//!
//! * answered: latency = reply time − intended time (an error reply too, flagged);
//! * no reply `timeout` after its *intended* time (in flight or still in the backlog): censored at
//!   the time outstanding, counted as a timeout (sent) or never sent (not sent). On a stream the
//!   timed-out request stays in its slot as a *ghost* whose late reply is read and dropped, so the
//!   stream stays in step; a connection whose oldest ghost is twice the timeout old is replaced;
//! * its connection closed by the target: sent again on a new connection with its original
//!   intended time (reconnect with bounded back-off: conn.rs, recover.rs); only a target that
//!   stays unreachable for `unreachable_ns` ends the run (reach.rs);
//! * its connection failed for good (a reply that is not the protocol): censored, an error;
//! * outstanding when the run stops: censored, `unfinished` (or `never_sent`).
//!
//! Stalls of this thread (time/stall.rs) are turned into per-request flags, never from a latency
//! (stalls.rs): requests intended inside a stall, or inside the guard after it, and every request
//! that falls due while one of those still waits in the backlog (it waits behind it: the backlog
//! drains only as slots free, at the target's pace) are `ENGINE_STALL`, sent late by the client;
//! requests outstanding across a stall are `INFLATED` by the part of the stall and guard they span.
//!
//! Nothing is shared while the loop runs; the coordinator asks for a snapshot, checked every
//! iteration (handover.rs). The reads and writes are in io.rs.

use super::busy::ThreadBusy;
use super::handover::{self, Handover};
use super::stalls::{preemptions, thread_cpu_ns, Stalls};
use super::{conn::Conn, conn::State, finish::Finish, io::RxClock, reach::Reach};
use super::{req::Req, req::SlotWait, req::Times, req::SAMPLED, Counters, EngineConfig, Role, Shared, Sock};
use crate::io::{cpu, poll::Epoll, poll::EPOLLIN};
use crate::load::{schedule::Schedule, workload::Op, workload::OpGen};
use crate::record::{flags as F, histogram::Histograms, sampler::Sampler};
use crate::stamp::nic::NicStamping;
use crate::time::{clock::now_ns, clock::set_timer_slack_1ns, stall::StallWatch, wake::WakeLateness, wake::MAX_EARLY_NS};
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;

/// Timeouts, reconnections and the reachability of the target are looked at this often.
pub(super) const TICK_NS: u64 = 1_000_000;
/// Longest single wait, so that stop requests, snapshots and timeouts are noticed promptly.
const MAX_WAIT_NS: u64 = 1_000_000;
/// When the caller stops the run (the coordinator has concluded, or Ctrl-C), replies still in
/// flight are waited for this long at most; the rest are `unfinished`.
const DRAIN_ON_STOP_NS: u64 = 50_000_000;
/// Requests waiting for a free connection slot, at most; beyond, a due request is never sent (and
/// counted so) rather than growing memory without bound when the target cannot keep up.
const MAX_BACKLOG: usize = 1 << 20;

pub(crate) struct ThreadCtx {
    pub index: usize,
    pub streams: Vec<Sock>,
    pub cfg: EngineConfig,
    pub role: Role,
    pub start_ns: u64,
    pub cpu: Option<usize>,
    pub shared: Arc<Shared>,
    /// With `Timestamps::Nic`: the NIC stamping every packet, and its clock.
    pub nic: Option<Arc<NicStamping>>,
}

pub(crate) struct ThreadResult {
    pub counters: Counters,
    pub received_in_window: u64,
    pub hist: Histograms,
    pub stalls: u64,
    pub stalled_ns: u64,
    pub elapsed_ns: u64,
    pub error_reasons: Vec<(String, u64)>,
    pub pinned_cpu: Option<usize>,
    pub cpu_ns: u64,
    pub preemptions: u64,
    pub role: Role,
}

/// The thread's state: its parts (each owning its own) and what the loop itself keeps.
pub(super) struct Worker {
    pub cfg: EngineConfig,
    pub shared: Arc<Shared>,
    pub index: usize,
    /// `Role::Load`: requests are counted, not timed (a probe thread times its own).
    pub role: Role,
    pub conns: Vec<Conn>,
    pub datagram: bool,
    /// The protocol sends keys: draw each request from the workload.
    pub keyed: bool,
    pub gen: OpGen,
    pub key: Vec<u8>,
    pub ep: Epoll,
    pub rr: usize,
    pub next_id: u64,
    pub backlog: VecDeque<Req>,
    /// Requests in `backlog` flagged `ENGINE_STALL`: one due while any waits there is delayed by it.
    pub backlog_delayed: usize,
    /// Requests on the connections (ghosts too), so that idleness needs no scan.
    pub flights: usize,
    /// Counted busy or idle in the engine's `Shared::busy`.
    pub busy: ThreadBusy,
    /// When the backlog waited for the target to free a slot.
    pub slots: SlotWait,
    pub dirty: Vec<usize>,
    pub ready: Vec<(usize, u32)>,
    pub sampler: Sampler,
    pub fin: Finish,
    pub stalls: Stalls,
    pub reach: Reach,
    pub handover: Handover,
    pub rx: RxClock,
    /// The wait asked of epoll in the current iteration (blocking mode), and when it returned.
    pub planned_wait: u64,
    pub polled_at: u64,
    /// Blocking mode: how late this thread's timed waits wake (time/wake.rs), so how early to ask.
    pub wake: WakeLateness,
    /// Every clock read of the timing loop goes through it: a gap of ≥ 200 µs between two reads
    /// (beyond a planned wait) is a time the thread did not run (time/stall.rs).
    pub watch: StallWatch,
    #[cfg(any(test, feature = "test-hooks"))]
    pub test_stall: Option<super::TestStall>,
    pub t0: u64,
    /// The end of the schedule's window: as planned, then when the schedule stopped.
    pub end: u64,
}

pub(crate) fn run(ctx: ThreadCtx) -> ThreadResult {
    set_timer_slack_1ns();
    let pinned_cpu = ctx.cpu.filter(|&c| cpu::pin_to_cpu(c));
    let (cpu0, preempt0) = (thread_cpu_ns(), preemptions());
    let seed = ctx.cfg.seed ^ (ctx.index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut w = Worker::new(ctx, seed);
    let share = w.cfg.rate_rps / w.cfg.threads as f64;
    // The probe has a schedule of its own (its config: one thread); load threads share the rate.
    let phase = if w.role == Role::Probe { 0.0 } else { w.index as f64 / w.cfg.threads as f64 };
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

impl Worker {
    fn new(ctx: ThreadCtx, seed: u64) -> Worker {
        let cfg = ctx.cfg;
        let n = ctx.streams.len();
        let conns: Vec<Conn> = ctx.streams.into_iter().map(|s| Conn::new(s, cfg.protocol.codec(), cfg.outstanding)).collect();
        let ep = Epoll::new(n.max(1) * 2).expect("epoll_create1");
        for (i, c) in conns.iter().enumerate() {
            ep.add(c.fd, EPOLLIN, i as u64).expect("epoll_ctl add");
        }
        Worker {
            shared: ctx.shared.clone(),
            index: ctx.index,
            role: ctx.role,
            conns,
            datagram: cfg.protocol.is_datagram(),
            keyed: cfg.protocol.has_keys(),
            gen: OpGen::new(cfg.workload.clone(), seed ^ 0xC0FF_EE00),
            key: Vec::with_capacity(crate::load::workload::MAX_KEY),
            ep,
            rr: 0,
            next_id: 0,
            backlog: VecDeque::new(),
            backlog_delayed: 0,
            flights: 0,
            busy: ThreadBusy::new(ctx.index),
            slots: SlotWait::default(),
            dirty: Vec::with_capacity(n),
            ready: Vec::with_capacity(n.max(1) * 2),
            sampler: Sampler::new(cfg.sample_every, seed ^ 0x5A5A),
            fin: Finish::new(ctx.role, ctx.index, ctx.start_ns, cfg.timeout_ns),
            stalls: Stalls::new(),
            reach: Reach::new(ctx.start_ns),
            handover: Handover::new(ctx.index, ctx.role, ctx.start_ns),
            rx: RxClock::new(cfg.timestamps.clock(), ctx.nic, ctx.start_ns),
            planned_wait: 0,
            polled_at: 0,
            wake: WakeLateness::default(),
            watch: StallWatch::new(ctx.shared.stall_log.clone()),
            #[cfg(any(test, feature = "test-hooks"))]
            test_stall: cfg.test_stall,
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
        // Wait for the common start, sleeping most of it.
        crate::time::clock::sleep_until(self.t0, MAX_EARLY_NS);
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
            #[cfg(any(test, feature = "test-hooks"))]
            self.test_hook(now);
            // A planned sleep (blocking mode, a pause) is not a stall: only time past the wake-up counts.
            self.stalls.iteration(now - prev, self.planned_wait, now);
            prev = now;
            self.fall_due(sched, &mut next, &mut paused_at, now);
            if !self.backlog.is_empty() {
                self.dispatch();
                self.flush_dirty();
            }
            let wake = if paused_at.is_some() { now + MAX_WAIT_NS } else { next };
            let wait = self.wait_ns(paused_at.is_some(), wake);
            self.planned_wait = wait;
            self.poll(wait, wake);
            if now >= next_tick {
                self.tick(now);
                next_tick = now + TICK_NS;
            }
            if next > now {
                self.idle_check(next);
            }
            self.serve_snapshot();
        }
        let stopped = now_ns().min(self.end);
        // Requests due before the end are still sent (late) rather than dropped (none is due
        // while the schedule is held).
        if !self.shared.stop.load(Relaxed) && paused_at.is_none() {
            while next < self.end {
                self.enqueue(next, stopped);
                next = sched.next_ns();
            }
        }
        // From here on a reply comes after the window (`received_in_window`), and nothing is due.
        self.end = stopped;
        self.busy.schedule_over(&self.shared.busy, || self.watch.now());
        stopped.saturating_sub(self.t0)
    }

    /// What fell due before a pause is noticed is due still, at its own time (inside a stall that
    /// delayed the notice, flagged as such): only what is to come is held. When a pause ends,
    /// every time to come moves by its length.
    #[inline]
    fn fall_due(&mut self, sched: &mut Schedule, next: &mut u64, paused_at: &mut Option<u64>, now: u64) {
        if paused_at.is_none() {
            while *next <= now {
                self.enqueue(*next, now);
                *next = sched.next_ns();
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

    /// How long to wait for events: while paused with nothing to send, block (and leave the CPU to
    /// the coordinator); spinning or with a request ready to go, not at all; else until the next
    /// send less this thread's measured wake-up lateness (`wake`), spinning the rest. A reply
    /// wakes the thread late at no cost to its latency where it has a kernel receive stamp.
    #[inline]
    fn wait_ns(&mut self, paused: bool, next: u64) -> u64 {
        if paused && self.backlog.is_empty() {
            MAX_WAIT_NS
        } else if self.cfg.busy_poll || (!self.backlog.is_empty() && self.has_free_slot()) {
            0
        } else {
            next.saturating_sub(self.watch.now() + self.wake.early_ns()).min(MAX_WAIT_NS)
        }
    }

    /// After the schedule: send what is due and collect the replies still in flight, until each
    /// is answered or times out (from its intended time) — or, when the caller stopped the run,
    /// for `DRAIN_ON_STOP_NS` at most. What is left is censored.
    fn drain(&mut self) {
        let stopped = self.shared.stop.load(Relaxed);
        let start = now_ns();
        let deadline = start + if stopped { DRAIN_ON_STOP_NS } else { self.cfg.timeout_ns + TICK_NS };
        let mut next_tick = start;
        loop {
            let now = self.watch.now();
            self.idle_check(u64::MAX);
            let outstanding =
                self.conns.iter().any(|c| c.inflight.iter().any(|f| !f.ghost)) || !self.backlog.is_empty();
            if !outstanding || now >= deadline || self.aborted() || !self.conns.iter().any(|c| c.state != State::Dead) {
                break;
            }
            if !stopped && !self.backlog.is_empty() {
                self.dispatch();
                self.flush_dirty();
            }
            self.poll(if self.cfg.busy_poll { 0 } else { (deadline - now).min(MAX_WAIT_NS) }, u64::MAX);
            if now >= next_tick {
                self.tick(now);
                next_tick = now + TICK_NS;
            }
            self.serve_snapshot();
        }
        let now = now_ns();
        // What is left stays outstanding for good (the thread stays busy): the target may hold it.
        for c in self.conns.iter_mut() {
            c.unsent = 0;
            for f in c.inflight.drain(..).filter(|f| !f.ghost) {
                self.fin.censor_flight(f, now);
            }
        }
        self.flights = 0;
        while let Some(r) = self.pop_backlog() {
            self.fin.censor_waiting(r, now, false);
        }
        let first_reason = self.fin.reasons.first().map(|(r, _)| r.as_str());
        if let Some(none) = self.reach.none_answered(self.fin.c.sent, first_reason) {
            if !self.aborted() {
                self.shared.abort(none);
            }
        }
        self.publish();
    }

    pub(super) fn aborted(&self) -> bool {
        self.shared.stop.load(Relaxed) && self.shared.abort.lock().unwrap().is_some()
    }

    /// The coordinator asked for a snapshot: hand over everything up to now and report what is
    /// outstanding, censored at the time it has waited so far.
    #[inline]
    fn serve_snapshot(&mut self) {
        if let Some(seq) = self.handover.due(&self.shared) {
            self.hand_over(Some(seq));
        }
    }

    /// Hand the samples and interval histograms over; for a snapshot (`seq`), also what is in
    /// flight and in the backlog now.
    fn hand_over(&mut self, seq: Option<u64>) {
        let now = now_ns();
        let flights = self.conns.iter().flat_map(|c| &c.inflight).filter(|f| !f.ghost).map(|f| (f.req, f.times()));
        let waiting = self.backlog.iter().map(|r| (*r, Times::default()));
        self.handover.hand_over(&self.shared, &mut self.fin, flights.chain(waiting), seq, now);
    }

    #[inline]
    pub(super) fn publish(&self) {
        handover::publish(&self.shared.progress[self.index], &self.fin);
    }

    fn enqueue(&mut self, intended: u64, now: u64) {
        self.fin.c.intended += 1;
        let busy_from = self.busy.due(&self.shared.busy, intended);
        let mut flags = if self.role != Role::Load && self.sampler.take() { SAMPLED } else { 0 };
        // Due in a stall (or its guard), or behind a request that was: the client delays it.
        if self.stalls.in_window(intended) || self.backlog_delayed > 0 {
            flags |= F::ENGINE_STALL;
        }
        let op = if self.keyed { self.gen.next_op() } else { Op::KEYLESS };
        let req = Req::new(intended, busy_from, op, flags);
        if self.backlog.len() < MAX_BACKLOG {
            self.backlog_delayed += (flags & F::ENGINE_STALL != 0) as usize;
            self.backlog.push_back(req);
        } else {
            self.fin.c.never_sent += 1;
            self.fin.record(req, Times::default(), now - intended, F::CENSORED | F::NEVER_SENT, 0);
        }
    }
}
