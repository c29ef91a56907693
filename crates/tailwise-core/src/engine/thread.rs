//! One engine thread: the timing loop, the same for every protocol. It schedules, sends, receives,
//! stamps and records; what differs between a request/reply stream and a packet flow is behind
//! [`Path`], and the loop is monomorphised for each (`Worker<Requests>`: engine/requests.rs,
//! `Worker<Packets>`: packet/), as rpc-perf's clients share one driver.
//!
//! A request lives from its intended send time to its end as a [`Req`]: drawn (and chosen for
//! sampling) when it falls due, queued on the path (the request path's FIFO backlog; a packet
//! flow's ring), sent, answered — or censored. Every request ends in the histograms exactly once
//! (finish.rs):
//!
//! * answered: latency = reply time − intended time (an error reply too, flagged);
//! * no reply `timeout` after its *intended* time (in flight or still queued): censored at the
//!   time outstanding, counted as a timeout (sent) or never sent (not sent). On a stream the
//!   timed-out request stays in its slot as a *ghost* whose late reply is read and dropped, so the
//!   stream stays in step; a connection whose oldest ghost is twice the timeout old is replaced;
//!   a packet unanswered by then is lost;
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
//! iteration (handover.rs).

use super::busy::ThreadBusy;
use super::config::EngineConfig;
use super::connect::Sock;
use super::finish::Finish;
use super::handover::{self, Handover};
use super::reach::Reach;
use super::req::{Req, Times, SAMPLED};
use super::rx_clock::RxClock;
use super::shared::{Counters, Role, Shared};
use super::stalls::{Stalls, ThreadUse};
use crate::io::cpu;
use crate::load::schedule::Schedule;
use crate::record::{flags as F, histogram::Histograms, sampler::Sampler};
use crate::stamp::nic::NicStamping;
use crate::time::{clock::now_ns, clock::set_timer_slack_1ns, stall::StallWatch, wake::MAX_EARLY_NS};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;

/// Timeouts, reconnections and the reachability of the target are looked at this often.
pub(crate) const TICK_NS: u64 = 1_000_000;
/// Longest single wait, so that stop requests, snapshots and timeouts are noticed promptly.
pub(crate) const MAX_WAIT_NS: u64 = 1_000_000;
/// When the caller stops the run (the coordinator has concluded, or Ctrl-C), replies still in
/// flight are waited for this long at most; the rest are `unfinished`.
const DRAIN_ON_STOP_NS: u64 = 50_000_000;

/// What differs between a request/reply stream and a packet flow, behind the one loop: where a
/// request due waits to be sent, how it goes out, how answers come back and are matched, what a
/// tick times out, and what is outstanding. A path's own work that needs the thread's parts
/// (`Finish`, `Stalls`, `Reach`, the stall watch, the snapshots) takes the whole `Worker`.
pub(crate) trait Path: Sized {
    /// Serve a snapshot asked meanwhile after this many requests queued in one `fall_due`
    /// (0: only once per iteration).
    const SERVE_EVERY: u32;
    /// Every answer also into a 100 ns histogram (`record/linear`).
    const PACKET_HISTOGRAM: bool;

    /// The path over this thread's sockets.
    fn new(streams: Vec<Sock>, cfg: &EngineConfig, index: usize, seed: u64) -> Self;
    /// Queue a request that fell due (intended at `intended`, busy from `busy_from`, `flags`);
    /// refused (never sent: no room), it is handed back.
    fn queue(w: &mut Worker<Self>, intended: u64, busy_from: u64, flags: u32) -> Result<(), Req>;
    /// A request due now waits behind one the client delayed (`ENGINE_STALL`).
    fn delayed(&self) -> bool;
    /// Send what is queued, stamping each send.
    fn send(w: &mut Worker<Self>);
    /// How long the next poll may wait, ahead of the next send at `wake`.
    fn wait_ns(w: &mut Worker<Self>, paused: bool, wake: u64) -> u64;
    /// Wait up to `wait_ns` for answers and read them, but return once a send falls due.
    fn poll(w: &mut Worker<Self>, wait_ns: u64, next_due: u64);
    /// The path's part of the tick: its timeouts (and reconnections).
    fn tick(w: &mut Worker<Self>, now: u64);
    /// Nothing queued and nothing out: the thread may go idle.
    fn idle(&self) -> bool;
    /// After the schedule: nothing left to wait for (every request ended, or no way left to send).
    fn drained(&mut self, now: u64) -> bool;
    /// The drain is over: what is still outstanding is censored.
    fn end(w: &mut Worker<Self>, now: u64);
    /// What is outstanding (out, then queued), with its clock readings, for a snapshot.
    fn outstanding(&self) -> impl Iterator<Item = (Req, Times)> + '_;
    /// What the path itself hands over at a snapshot and at the end.
    fn hand_over(&mut self, _shared: &Shared) {}
    /// Before a snapshot: take the answers already there (none is reported outstanding after it came).
    fn settle(_w: &mut Worker<Self>) {}
    /// A request sent at `t` or later is out still (the test hook's stop waits for one).
    #[cfg(any(test, feature = "test-hooks"))]
    fn sent_since(&self, t: u64) -> bool;
}

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
    /// CPU time, preemptions and sleeps over the run.
    pub used: ThreadUse,
    pub role: Role,
}

/// The thread's state: its parts (each owning its own) and its path.
pub(crate) struct Worker<P> {
    pub cfg: EngineConfig,
    pub shared: Arc<Shared>,
    pub index: usize,
    /// `Role::Load`: requests are counted, not timed (a probe thread times its own).
    pub role: Role,
    /// Counted busy or idle in the engine's `Shared::busy`.
    pub busy: ThreadBusy,
    pub sampler: Sampler,
    pub fin: Finish,
    pub stalls: Stalls,
    pub reach: Reach,
    pub handover: Handover,
    pub rx: RxClock,
    /// The wait asked of epoll in the current iteration (blocking mode).
    pub planned_wait: u64,
    /// Every clock read of the timing loop goes through it: a gap of ≥ 200 µs between two reads
    /// (beyond a planned wait) is a time the thread did not run (time/stall.rs).
    pub watch: StallWatch,
    #[cfg(any(test, feature = "test-hooks"))]
    pub test_stall: Option<super::config::TestStall>,
    pub t0: u64,
    /// The end of the schedule's window: as planned, then when the schedule stopped.
    pub end: u64,
    /// The request path or the packet path.
    pub path: P,
}

pub(crate) fn run<P: Path>(ctx: ThreadCtx) -> ThreadResult {
    set_timer_slack_1ns();
    let pinned_cpu = ctx.cpu.filter(|&c| cpu::pin_to_cpu(c));
    let used0 = ThreadUse::now();
    let seed = ctx.cfg.seed ^ (ctx.index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut w = Worker::<P>::new(ctx, seed);
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
        used: ThreadUse::now().since(used0),
        role: w.role,
    }
}

impl<P: Path> Worker<P> {
    pub(crate) fn new(ctx: ThreadCtx, seed: u64) -> Worker<P> {
        let cfg = ctx.cfg;
        let fin = Finish::new(ctx.role, ctx.index, ctx.start_ns, cfg.timeout_ns);
        Worker {
            shared: ctx.shared.clone(),
            index: ctx.index,
            role: ctx.role,
            busy: ThreadBusy::new(ctx.index),
            sampler: Sampler::new(cfg.sample_every, seed ^ 0x5A5A),
            fin: if P::PACKET_HISTOGRAM { fin.with_packet_histogram() } else { fin },
            stalls: Stalls::new(),
            reach: Reach::new(ctx.start_ns),
            handover: Handover::new(ctx.index, ctx.role, ctx.start_ns),
            rx: RxClock::new(cfg.timestamps.clock(), ctx.nic, ctx.start_ns),
            planned_wait: 0,
            watch: StallWatch::new(ctx.shared.stall_log.clone()),
            #[cfg(any(test, feature = "test-hooks"))]
            test_stall: cfg.test_stall,
            t0: ctx.start_ns,
            end: ctx.start_ns + cfg.duration_ns,
            path: P::new(ctx.streams, &cfg, ctx.index, seed),
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
            if paused_at.is_none() {
                self.test_hook(now);
            }
            // A planned sleep (blocking mode, a pause) is not a stall: only time past the wake-up counts.
            self.stalls.iteration(now - prev, self.planned_wait, now);
            prev = now;
            self.fall_due(sched, &mut next, &mut paused_at, now);
            P::send(self);
            let wake = if paused_at.is_some() { now + MAX_WAIT_NS } else { next };
            let wait = P::wait_ns(self, paused_at.is_some(), wake);
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
    /// every time to come moves by its length. A path far behind serves a snapshot asked meanwhile
    /// every `P::SERVE_EVERY` requests queued.
    #[inline]
    pub(crate) fn fall_due(&mut self, sched: &mut Schedule, next: &mut u64, paused_at: &mut Option<u64>, now: u64) {
        if paused_at.is_none() {
            let mut n = 0u32;
            while *next <= now {
                self.enqueue(*next, now);
                *next = sched.next_ns();
                if P::SERVE_EVERY > 0 {
                    n = n.wrapping_add(1);
                    if n % P::SERVE_EVERY == 0 {
                        self.serve_snapshot(); // far behind: see the path's SERVE_EVERY
                    }
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

    /// Wait for answers and read them (the path's), then publish the counters.
    #[inline]
    fn poll(&mut self, wait_ns: u64, next_due: u64) {
        P::poll(self, wait_ns, next_due);
        self.publish();
    }

    /// Every millisecond: the path's timeouts (and reconnections), the target's reachability,
    /// and old stall windows.
    fn tick(&mut self, now: u64) {
        P::tick(self, now);
        if let Some(abort) = self.reach.verdict(now, self.cfg.unreachable_ns) {
            self.shared.abort(abort);
        }
        // A stall window matters while a request outstanding across it can still end.
        self.stalls.prune(now.saturating_sub(self.cfg.timeout_ns + 10 * TICK_NS));
    }

    /// Nothing queued and nothing out (ghosts included): the thread is idle until `next`, its next
    /// intended time (busy.rs).
    #[inline]
    fn idle_check(&mut self, next: u64) {
        if self.busy.is_busy() && self.path.idle() {
            let watch = &mut self.watch;
            self.busy.idle(&self.shared.busy, next, || watch.now());
        }
    }

    /// After the schedule: send what is due and collect the answers still out, until each is
    /// answered or times out (from its intended time) — or, when the caller stopped the run, for
    /// `DRAIN_ON_STOP_NS` at most. What is left is censored.
    fn drain(&mut self) {
        let stopped = self.shared.stop.load(Relaxed);
        let start = now_ns();
        let deadline = start + if stopped { DRAIN_ON_STOP_NS } else { self.cfg.timeout_ns + TICK_NS };
        let mut next_tick = start;
        loop {
            let now = self.watch.now();
            self.idle_check(u64::MAX);
            if self.path.drained(now) || now >= deadline || self.aborted() {
                break;
            }
            if !stopped {
                P::send(self);
            }
            self.poll(if self.cfg.busy_poll { 0 } else { (deadline - now).min(MAX_WAIT_NS) }, u64::MAX);
            if now >= next_tick {
                self.tick(now);
                next_tick = now + TICK_NS;
            }
            self.serve_snapshot();
        }
        // What is left stays outstanding for good (the thread stays busy): the target may hold it.
        P::end(self, now_ns());
        let first_reason = self.fin.reasons.first().map(|(r, _)| r.as_str());
        if let Some(none) = self.reach.none_answered(self.fin.c.sent, first_reason) {
            if !self.aborted() {
                self.shared.abort(none);
            }
        }
        self.publish();
    }

    pub(crate) fn aborted(&self) -> bool {
        self.shared.stop.load(Relaxed) && self.shared.abort.lock().unwrap().is_some()
    }

    /// The coordinator asked for a snapshot: hand over everything up to now and report what is
    /// outstanding, censored at the time it has waited so far.
    #[inline]
    pub(crate) fn serve_snapshot(&mut self) {
        if let Some(seq) = self.handover.due(&self.shared) {
            P::settle(self);
            self.hand_over(Some(seq));
        }
    }

    /// Hand the samples and interval histograms over (and the path's own); for a snapshot (`seq`),
    /// also what is outstanding now.
    fn hand_over(&mut self, seq: Option<u64>) {
        let now = now_ns();
        self.path.hand_over(&self.shared);
        self.handover.hand_over(&self.shared, &mut self.fin, self.path.outstanding(), seq, now);
    }

    #[inline]
    pub(crate) fn publish(&self) {
        handover::publish(&self.shared.progress[self.index], &self.fin);
    }

    /// A request due at `intended`: drawn, chosen for the samples or not, flagged if the client
    /// delays it, and queued on the path — or, refused, never sent.
    #[inline]
    fn enqueue(&mut self, intended: u64, now: u64) {
        self.fin.c.intended += 1;
        let busy_from = self.busy.due(&self.shared.busy, intended);
        let mut flags = if self.role != Role::Load && self.sampler.take() { SAMPLED } else { 0 };
        // Due in a stall (or its guard), or behind a request that was: the client delays it.
        if self.stalls.in_window(intended) || self.path.delayed() {
            flags |= F::ENGINE_STALL;
        }
        if let Err(req) = P::queue(self, intended, busy_from, flags) {
            self.fin.c.never_sent += 1;
            self.fin.record(req, Times::default(), now - intended, F::CENSORED | F::NEVER_SENT, 0);
        }
    }
}
