//! One engine thread: its connections, schedule, backlog and recorder.
//!
//! A request lives from its intended send time to its end as a [`Req`]: drawn (and chosen for
//! sampling) when it falls due, queued in the FIFO backlog, written on a connection with a free
//! slot, answered — or censored. Every request ends in the histograms exactly once:
//!
//! * answered: latency = reply time − intended time (an error reply too, flagged);
//! * no reply `timeout` after its *intended* time (in flight or still in the backlog): censored at
//!   the time outstanding, counted as a timeout (sent) or never sent (not sent). On a stream the
//!   timed-out request stays in its slot as a *ghost* whose late reply is read and dropped, so the
//!   stream stays in step; a connection whose oldest ghost is twice the timeout old is replaced;
//! * its connection closed by the target: sent again on a new connection with its original
//!   intended time (reconnect with bounded back-off); only a target that stays unreachable for
//!   `unreachable_ns` ends the run;
//! * its connection failed for good (a reply that is not the protocol): censored, an error;
//! * outstanding when the run stops: censored, `unfinished` (or `never_sent`).
//!
//! Stalls of this thread (stall.rs) are turned into per-request flags, never from a latency:
//! requests intended inside a stall, or inside the guard after it — the backlog it built (the
//! requests intended during it) times the thread's measured cost per send — and every request that
//! falls due while one of those still waits in the backlog (it waits behind it: the backlog drains
//! only as slots free, at the target's pace) are `ENGINE_STALL`, sent late by the client; requests
//! outstanding across a stall are `INFLATED` by the part of the stall and guard they span.
//!
//! Nothing is shared while the loop runs; the coordinator asks for a snapshot (an atomic sequence
//! number, checked every iteration) and the thread hands over its samples and interval
//! histograms, and reports what is outstanding at that instant as censored.

use super::{Counters, EngineConfig, Role, Shared, Sock, TestStall};
use crate::clock::{now_ns, set_timer_slack_1ns};
use crate::net::{self, Epoll, StampClock, EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT};
use crate::nic::NicStamping;
use crate::protocol::{Codec, OpKind, Outcome, Parsed, Request};
use crate::recorder::{flags as F, Histograms, IntervalRecorder, Sample, SampleStore, Sampler};
use crate::schedule::Schedule;
use crate::stall::StallWatch;
use crate::workload::{value_bytes, Op, OpGen};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;

/// In blocking mode, wake this long before the next intended send and spin the rest
/// (sleeps overshoot ~6 µs p50 and ~35 µs p99 here even at 1 ns slack: platform.md).
const SPIN_NS: u64 = 50_000;
/// A loop iteration longer than this is a stall (preemption, or a long syscall); the sends it
/// delays are counted apart so that the send lag of an unpreempted thread can be read. A lone
/// pinned spinner here sees ~400 gaps/s above 5 µs (platform.md); the loop's own work takes
/// a few µs per syscall.
pub(crate) const STALL_NS: u64 = 20_000;
/// Timeouts, reconnections and the reachability of the target are looked at this often.
const TICK_NS: u64 = 1_000_000;
/// Longest single wait, so that stop requests, snapshots and timeouts are noticed promptly.
const MAX_WAIT_NS: u64 = 1_000_000;
/// When the caller stops the run (the coordinator has concluded, or Ctrl-C), replies still in
/// flight are waited for this long at most; the rest are `unfinished`.
const DRAIN_ON_STOP_NS: u64 = 50_000_000;
/// Requests waiting for a free connection slot, at most; beyond, a due request is never sent (and
/// counted so) rather than growing memory without bound when the target cannot keep up.
const MAX_BACKLOG: usize = 1 << 20;
const READ_CHUNK: usize = 64 << 10;
/// A connection's read buffer never grows past this, whatever the server sends: the longest reply
/// a codec accepts plus one read.
const MAX_READ_BUF: usize = crate::protocol::MAX_REPLY + READ_CHUNK;
/// Distinct error reasons kept per thread; the rest are counted under one line.
const MAX_REASONS: usize = 32;
const OTHER_REASONS: &str = "other reasons";
/// Largest UDP datagram.
const MAX_DATAGRAM: usize = 65_536;
/// Reconnect back-off after `n` failed attempts in a row: none for the first, then 1 ms doubling
/// up to this bound.
const MAX_BACKOFF_NS: u64 = 250_000_000;
/// Cost of one send before any has been measured (a loopback `send` here: 3–5 µs, BENCHMARKS.md).
const INITIAL_SEND_COST_NS: f64 = 5_000.0;
/// Chosen for the raw samples (internal bit of `Req::flags`, never in a sample's flags).
const SAMPLED: u32 = 1 << 31;

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

/// A request from its intended time to its end.
#[derive(Clone, Copy)]
struct Req {
    intended: u64,
    op: Op,
    /// `SAMPLED`, `F::ENGINE_STALL`, `F::RESENT`.
    flags: u32,
}

struct Flight {
    req: Req,
    id: u64,
    /// Stamp just before the write that carried it.
    sent: u64,
    /// Transmit-stamp key: for a stream, the stream offset one past its last byte; for datagrams,
    /// its datagram's number on the socket (`Conn::stream_base`).
    end: u64,
    /// The kernel's transmit stamp of the send that carried its last byte (CLOCK_MONOTONIC; 0: none).
    tx: u64,
    /// Timed out and already counted: its reply, if it comes, is read and dropped.
    ghost: bool,
}

impl Flight {
    fn times(&self) -> Times {
        Times { sent: self.sent, tx: self.tx, rx_user: 0 }
    }
}

/// A request's clock readings (CLOCK_MONOTONIC ns; 0: none): the user-space stamp before the
/// write that sent it, the kernel's transmit stamp, and the user-space stamp after the read that
/// completed its reply.
#[derive(Clone, Copy, Default)]
struct Times {
    sent: u64,
    tx: u64,
    rx_user: u64,
}

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
    fn guard_end(&self) -> u64 {
        self.end + (self.backlog as f64 * self.send_cost_ns) as u64
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Up,
    /// A non-blocking connect in progress since this time.
    Connecting(u64),
    /// To reconnect at this time.
    Waiting(u64),
    /// Closed for good: the target spoke something else than the protocol.
    Dead,
}

struct Conn {
    sock: Option<Sock>,
    fd: RawFd,
    addr: SocketAddr,
    codec: Box<dyn Codec>,
    id_mask: u64,
    wbuf: Vec<u8>,
    /// Datagram protocols: where each request's datagram ends in `wbuf`.
    dgram_ends: VecDeque<usize>,
    wpos: usize,
    rbuf: Vec<u8>,
    rpos: usize,
    inflight: VecDeque<Flight>,
    /// Flights at the back of `inflight` encoded but not yet written.
    unsent: usize,
    dirty: bool,
    want_write: bool,
    state: State,
    /// Attempts in a row that failed: refused, or closed by the target before any reply.
    fails: u32,
    /// A reply has arrived since this connection was (re)established.
    replied: bool,
    /// Transmit stamps: stream offset of `wbuf[0]` (datagrams: the next datagram's number) on the
    /// current socket; keys below `tx_next` are matched; `tx_ok` until a send fails.
    stream_base: u64,
    tx_next: u64,
    tx_ok: bool,
}

impl Conn {
    fn up(&self) -> bool {
        self.state == State::Up
    }
}

struct Worker {
    cfg: EngineConfig,
    shared: Arc<Shared>,
    index: usize,
    conns: Vec<Conn>,
    datagram: bool,
    /// The protocol sends keys: draw each request from the workload.
    keyed: bool,
    gen: OpGen,
    key: Vec<u8>,
    ep: Epoll,
    rr: usize,
    next_id: u64,
    backlog: VecDeque<Req>,
    /// Requests in `backlog` flagged `ENGINE_STALL`: one due while any waits there is delayed by it.
    backlog_delayed: usize,
    dirty: Vec<usize>,
    ready: Vec<(usize, u32)>,
    sampler: Sampler,
    c: Counters,
    received_in_window: u64,
    /// Replies of any kind (answers and error replies).
    replies: u64,
    hist: Histograms,
    intervals: IntervalRecorder,
    pending: IntervalRecorder,
    stalls: u64,
    stalled_ns: u64,
    /// End of the latest loop-gap stall: a request intended before it and sent after it was delayed by it.
    last_stall_end: u64,
    /// The wait asked of epoll in the current iteration (blocking mode).
    planned_wait: u64,
    /// Every clock read of the timing loop goes through it: a gap of ≥ 200 µs between two reads
    /// (beyond a planned wait) is a time the thread did not run (stall.rs).
    watch: StallWatch,
    /// Stall windows recent enough to matter, oldest first, and the first one an enqueue at the
    /// current intended time can still fall in.
    windows: VecDeque<StallWindow>,
    window_at: usize,
    /// Running mean of the time one request's send takes (ns).
    send_cost_ns: f64,
    samples: SampleStore,
    reasons: Vec<(String, u64)>,
    /// Reachability: the last reply, the target-side failures since it (the first and the
    /// latest), and whether the target closed a connection since it.
    last_reply: u64,
    failure_since_reply: Option<String>,
    last_failure: String,
    closed_since_reply: bool,
    snap_seen: u64,
    test_stall: Option<TestStall>,
    /// `Role::Load`: requests are counted, not timed (a probe thread times its own).
    role: Role,
    /// Transmit and receive stamps on a clock other than the thread's own (`Timestamps::Kernel`,
    /// `Nic`), a buffer for the transmit stamps read at once, and that clock − CLOCK_MONOTONIC,
    /// re-read every `offset_every_ns`, with when it was.
    stamps: Option<StampClock>,
    nic: Option<Arc<NicStamping>>,
    tx_buf: Vec<(u32, u64)>,
    stamp_offset: i64,
    stamp_offset_at: u64,
    offset_every_ns: u64,
    t0: u64,
    /// The end of the schedule's window: as planned, then when the schedule stopped.
    end: u64,
}

/// How often the realtime–monotonic offset of the kernel stamps is re-read. The kernel slews
/// CLOCK_REALTIME against CLOCK_MONOTONIC by up to 500 ppm (adjtimex's frequency bound) while NTP
/// corrects it: 0.5 µs per ms at worst, against 50 µs per 100 ms. A re-read costs ~0.3 µs (nine
/// clock reads): 0.03 % of a thread at this period.
const OFFSET_EVERY_NS: u64 = 1_000_000;
/// How often the PTP clock's offset of the NIC stamps is re-read (nic.rs): a free-running crystal
/// drifts ≤ ~100 ppm, ≤ 1 µs in this time; a re-read (three PHC reads across the PCIe bus, a few
/// µs) then costs < 0.1 % of a thread.
const PHC_OFFSET_EVERY_NS: u64 = 10_000_000;

/// Involuntary context switches of this thread so far: times another task took its CPU.
fn preemptions() -> u64 {
    // SAFETY: rusage is plain data; RUSAGE_THREAD fills it for the calling thread.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru.ru_nivcsw as u64
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn backoff_ns(fails: u32) -> u64 {
    if fails == 0 {
        0
    } else {
        (1_000_000u64 << (fails - 1).min(20)).min(MAX_BACKOFF_NS)
    }
}

fn ms(ns: u64) -> String {
    format!("{} ms", ns / 1_000_000)
}

pub(crate) fn run(ctx: ThreadCtx) -> ThreadResult {
    set_timer_slack_1ns();
    let pinned_cpu = ctx.cpu.filter(|&c| net::pin_to_cpu(c));
    let cpu0 = thread_cpu_ns();
    let preempt0 = preemptions();
    let cfg = ctx.cfg;
    let n = ctx.streams.len();
    let seed = cfg.seed ^ (ctx.index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let watch = StallWatch::new(ctx.shared.stall_log.clone());
    let mut w = Worker {
        ep: Epoll::new(n.max(1) * 2).expect("epoll_create1"),
        conns: ctx
            .streams
            .into_iter()
            .map(|sock| {
                let codec = cfg.protocol.codec();
                Conn {
                    fd: sock.fd(),
                    addr: sock.peer(),
                    sock: Some(sock),
                    id_mask: codec.id_mask(),
                    codec,
                    wbuf: Vec::with_capacity(4096),
                    dgram_ends: VecDeque::new(),
                    wpos: 0,
                    rbuf: Vec::with_capacity(READ_CHUNK),
                    rpos: 0,
                    inflight: VecDeque::with_capacity(cfg.outstanding),
                    unsent: 0,
                    dirty: false,
                    want_write: false,
                    state: State::Up,
                    fails: 0,
                    replied: false,
                    stream_base: 0,
                    tx_next: 0,
                    tx_ok: true,
                }
            })
            .collect(),
        datagram: cfg.protocol.is_datagram(),
        keyed: cfg.protocol.has_keys(),
        gen: OpGen::new(cfg.workload.clone(), seed ^ 0xC0FF_EE00),
        key: Vec::with_capacity(crate::workload::MAX_KEY),
        shared: ctx.shared,
        index: ctx.index,
        rr: 0,
        next_id: 0,
        backlog: VecDeque::new(),
        backlog_delayed: 0,
        dirty: Vec::with_capacity(n),
        ready: Vec::with_capacity(n.max(1) * 2),
        sampler: Sampler::new(cfg.sample_every, seed ^ 0x5A5A),
        c: Counters::default(),
        received_in_window: 0,
        replies: 0,
        hist: Histograms::new(),
        intervals: IntervalRecorder::default(),
        pending: IntervalRecorder::default(),
        stalls: 0,
        stalled_ns: 0,
        last_stall_end: 0,
        planned_wait: 0,
        watch,
        windows: VecDeque::new(),
        window_at: 0,
        send_cost_ns: INITIAL_SEND_COST_NS,
        samples: SampleStore::default(),
        reasons: Vec::new(),
        last_reply: ctx.start_ns,
        failure_since_reply: None,
        last_failure: String::new(),
        closed_since_reply: false,
        snap_seen: 0,
        test_stall: cfg.test_stall,
        stamps: cfg.timestamps.clock(),
        offset_every_ns: if ctx.nic.is_some() { PHC_OFFSET_EVERY_NS } else { OFFSET_EVERY_NS },
        stamp_offset: stamp_offset(&ctx.nic),
        nic: ctx.nic,
        role: ctx.role,
        tx_buf: Vec::new(),
        stamp_offset_at: ctx.start_ns,
        t0: ctx.start_ns,
        end: ctx.start_ns + cfg.duration_ns,
        cfg,
    };
    for (i, c) in w.conns.iter().enumerate() {
        w.ep.add(c.fd, EPOLLIN, i as u64).expect("epoll_ctl add");
    }
    let share = w.cfg.rate_rps / w.cfg.threads as f64;
    // The probe has a schedule of its own (its config: one thread); load threads share the rate.
    let phase = if w.role == Role::Probe { 0.0 } else { w.index as f64 / w.cfg.threads as f64 };
    let mut sched = Schedule::new(w.cfg.arrival, share, w.t0, phase, seed);
    let elapsed_ns = w.main_loop(&mut sched);
    w.drain();
    w.hand_over(None);
    w.shared.progress[w.index].done.store(true, SeqCst);
    ThreadResult {
        counters: w.c,
        received_in_window: w.received_in_window,
        hist: w.hist,
        stalls: w.stalls,
        stalled_ns: w.stalled_ns,
        elapsed_ns,
        error_reasons: w.reasons,
        pinned_cpu,
        cpu_ns: thread_cpu_ns() - cpu0,
        preemptions: preemptions() - preempt0,
        role: w.role,
    }
}

impl Worker {
    /// Returns how long the schedule ran (ns).
    fn main_loop(&mut self, sched: &mut Schedule) -> u64 {
        let mut next = sched.next_ns();
        let mut next_tick = self.t0 + TICK_NS;
        let mut paused_at: Option<u64> = None;
        // Wait for the common start, sleeping most of it.
        crate::clock::sleep_until(self.t0, SPIN_NS);
        self.watch.reset();
        let mut prev = self.watch.now();
        loop {
            let now = self.watch.now();
            if let Some((a, b)) = self.watch.take_fresh() {
                self.windows.push_back(StallWindow { start: a, end: b, backlog: 0, send_cost_ns: self.send_cost_ns });
            }
            if now >= self.end || self.shared.stop.load(Relaxed) {
                break;
            }
            self.test_hook(now);
            let gap = now - prev;
            prev = now;
            // A planned sleep (blocking mode, a pause) is not a stall: only time past the wake-up counts.
            if gap > self.planned_wait + STALL_NS {
                self.stalls += 1;
                self.stalled_ns += gap;
                self.last_stall_end = now;
            }
            // What fell due before a pause is noticed is due still, at its own time (inside a stall
            // that delayed the notice, flagged as such): only what is to come is held.
            if paused_at.is_none() {
                while next <= now {
                    self.enqueue(next, now);
                    next = sched.next_ns();
                }
            }
            // A pause holds the schedule; when it ends, every time to come moves by its length.
            match (self.shared.paused.load(Relaxed), paused_at) {
                (true, None) => paused_at = Some(now),
                (false, Some(p)) => {
                    paused_at = None;
                    sched.shift(now - p);
                    next += now - p;
                }
                _ => {}
            }
            if !self.backlog.is_empty() {
                self.dispatch();
                self.flush_dirty();
            }
            let next = if paused_at.is_some() { now + MAX_WAIT_NS } else { next };
            // While paused nothing falls due: block, and leave the CPU to the coordinator.
            let wait = if paused_at.is_some() && self.backlog.is_empty() {
                MAX_WAIT_NS
            } else if self.cfg.busy_poll || (!self.backlog.is_empty() && self.has_free_slot()) {
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
        // From here on a reply comes after the window (`received_in_window`).
        self.end = stopped;
        stopped.saturating_sub(self.t0)
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
        for i in 0..self.conns.len() {
            let flights: Vec<Flight> = self.conns[i].inflight.drain(..).filter(|f| !f.ghost).collect();
            self.conns[i].unsent = 0;
            for f in flights {
                self.censor_flight(f, now);
            }
        }
        while let Some(r) = self.pop_backlog() {
            self.censor_waiting(r, now, false);
        }
        if self.replies == 0 && self.c.sent > 0 && !self.aborted() {
            let why = self
                .failure_since_reply
                .clone()
                .or_else(|| self.reasons.first().map(|(r, _)| r.clone()))
                .unwrap_or_else(|| "no reply".into());
            self.shared.abort(format!("the target answered none of the {} requests sent ({why})", self.c.sent));
        }
        self.publish();
    }

    /// A request still in flight when the run ends: a timeout if it has been outstanding longer
    /// than the timeout, else `unfinished` (the run was stopped before it could end).
    fn censor_flight(&mut self, f: Flight, now: u64) {
        let age = now - f.req.intended;
        if age > self.cfg.timeout_ns {
            self.c.timeouts += 1;
            self.finish(f.req, f.times(), age, F::CENSORED | F::TIMEOUT, 0);
        } else {
            self.c.unfinished += 1;
            self.finish(f.req, f.times(), age, F::CENSORED | F::PENDING, 0);
        }
    }

    /// A request that waited in the backlog past its timeout (`timed_out`) or to the end of the
    /// run: never sent, or — if it was sent before, on a connection since lost — a timeout or
    /// unfinished; censored at the time it waited.
    fn censor_waiting(&mut self, r: Req, now: u64, timed_out: bool) {
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
        self.finish(r, Times::default(), now - r.intended, F::CENSORED | flag, 0);
    }

    fn aborted(&self) -> bool {
        self.shared.stop.load(Relaxed) && self.shared.abort.lock().unwrap().is_some()
    }

    /// Tests only: stop the thread as a preemption would (`EngineConfig::test_stall`), at the
    /// first moment after each stop's time with a request sent in the last 200 µs still in flight,
    /// so that its reply arrives during the stop (or 10 ms after that time at the latest).
    fn test_hook(&mut self, now: u64) {
        if let Some(ts) = self.test_stall {
            let (at, dur) = (ts.at_ns, ts.for_ns);
            if now < self.t0 + at {
                return;
            }
            let fresh = |f: &Flight| f.sent > 0 && f.sent + 200_000 >= now;
            let in_flight = self.conns.iter().any(|c| c.inflight.iter().any(fresh));
            if in_flight || now >= self.t0 + at + 10_000_000 {
                // The next stop, if any, `every` after this one began.
                self.test_stall = (ts.count > 1)
                    .then(|| TestStall { at_ns: now - self.t0 + ts.every_ns, count: ts.count - 1, ..ts });
                // A clock read right before the stop, so that the stall logged is the stop itself
                // (not joined to a wait before it that the host prolonged).
                self.watch.now();
                std::thread::sleep(std::time::Duration::from_nanos(dur));
                eprintln!(
                    "tailwise test hook: engine thread {} stalled at {:.3} s for {} µs",
                    self.index,
                    (now - self.t0) as f64 / 1e9,
                    dur / 1_000
                );
            }
        }
    }

    /// The coordinator asked for a snapshot: hand over everything up to now and report what is
    /// outstanding, censored at the time it has waited so far.
    fn serve_snapshot(&mut self) {
        let seq = self.shared.snap_seq.load(Relaxed);
        if seq != self.snap_seen {
            self.hand_over(Some(seq));
        }
    }

    /// Hand the samples and interval histograms to the shared state; for a snapshot (`seq`), also
    /// what is outstanding now.
    fn hand_over(&mut self, seq: Option<u64>) {
        let now = now_ns();
        if !self.samples.is_empty() {
            let mine = std::mem::take(&mut self.samples);
            self.shared.harvest.lock().unwrap().push(mine);
        }
        let mut pending = Vec::new();
        // A load thread beside a probe has nothing timed outstanding.
        if seq.is_some() && self.role != Role::Load {
            let t0 = self.t0;
            let flights = self.conns.iter().flat_map(|c| c.inflight.iter()).filter(|f| !f.ghost).map(|f| (f.req, f.times()));
            for (r, times) in flights.chain(self.backlog.iter().map(|r| (*r, Times::default()))) {
                self.pending.record(r.intended - t0, now - r.intended);
                if r.flags & SAMPLED != 0 {
                    pending.push(Sample {
                        intended_ns: r.intended - t0,
                        sent_ns: times.sent.saturating_sub(t0),
                        tx_ns: times.tx.saturating_sub(t0),
                        rx_user_ns: 0,
                        latency_ns: now - r.intended,
                        flags: F::CENSORED | F::PENDING | (r.flags & !SAMPLED),
                        inflation_ns: 0,
                    });
                }
            }
        }
        {
            let mut store = self.shared.intervals.lock().unwrap();
            self.intervals.hand_over(&mut store, false);
            if let Some(s) = seq {
                if store.pending_seq == s {
                    self.pending.hand_over(&mut store, true);
                } else {
                    self.pending.hand_over(&mut Default::default(), true);
                }
            }
        }
        if let Some(s) = seq {
            {
                let mut p = self.shared.pending.lock().unwrap();
                if p.0 == s {
                    p.1.extend(pending);
                }
            }
            self.snap_seen = s;
            self.publish_snapshot(now);
            self.shared.progress[self.index].snap_seq.store(s, SeqCst);
        } else {
            self.publish_snapshot(now); // the end: a finished thread's counters are final
        }
    }

    fn publish_snapshot(&self, now: u64) {
        let prog = &self.shared.progress[self.index];
        prog.snap_ns.store(now - self.t0, Relaxed);
        let c = &self.c;
        *prog.at_snapshot.lock().unwrap() = super::Snapshot {
            elapsed_ns: now - self.t0,
            intended: c.intended,
            sent: c.sent,
            late: c.late,
            received: c.received,
            errors: c.errors,
            timeouts: c.timeouts,
            never_sent: c.never_sent,
            reconnects: c.reconnects,
            received_in_window: self.received_in_window,
        };
        self.publish();
    }

    fn enqueue(&mut self, intended: u64, now: u64) {
        self.c.intended += 1;
        let mut flags = if self.role != Role::Load && self.sampler.take() { SAMPLED } else { 0 };
        // Due in a stall (or its guard), or behind a request that was: the client delays it.
        if self.in_stall_window(intended) || self.backlog_delayed > 0 {
            flags |= F::ENGINE_STALL;
        }
        let op = if self.keyed { self.gen.next_op() } else { Op::KEYLESS };
        let req = Req { intended, op, flags };
        if self.backlog.len() < MAX_BACKLOG {
            self.backlog_delayed += (flags & F::ENGINE_STALL != 0) as usize;
            self.backlog.push_back(req);
        } else {
            self.c.never_sent += 1;
            self.finish(req, Times::default(), now - intended, F::CENSORED | F::NEVER_SENT, 0);
        }
    }

    /// Whether a request intended at `t` (called in increasing `t`) falls in a stall of this
    /// thread or its guard; counts the stall's backlog as it goes.
    #[inline]
    fn in_stall_window(&mut self, t: u64) -> bool {
        while let Some(w) = self.windows.get(self.window_at) {
            if t < w.start {
                return false;
            }
            if t < w.end {
                self.windows[self.window_at].backlog += 1;
                return true;
            }
            if t < w.guard_end() {
                return true;
            }
            self.window_at += 1;
        }
        false
    }

    /// How much of the time a request was outstanding, from `intended` to `t_rx`, this thread
    /// spent in stalls and their guards: its latency may be that much the client's.
    fn inflation(&self, intended: u64, t_rx: u64) -> u64 {
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

    fn has_free_slot(&self) -> bool {
        self.conns.iter().any(|c| c.up() && c.inflight.len() < self.cfg.outstanding)
    }

    /// Hand backlog entries to connections with a free slot, round-robin.
    fn dispatch(&mut self) {
        let n = self.conns.len();
        let k = self.cfg.outstanding;
        while let Some(&req) = self.backlog.front() {
            let mut found = None;
            for step in 0..n {
                let i = (self.rr + step) % n;
                let c = &self.conns[i];
                if c.up() && c.inflight.len() < k {
                    found = Some(i);
                    break;
                }
            }
            let Some(i) = found else { break };
            self.rr = (i + 1) % n;
            let id = self.next_id;
            self.next_id += 1;
            let key: &[u8] = if self.keyed {
                self.gen.workload().write_key(req.op.key, &mut self.key);
                &self.key
            } else {
                b""
            };
            let c = &mut self.conns[i];
            c.codec.encode(&Request { id, kind: req.op.kind, key, value: value_bytes(req.op.value_len) }, &mut c.wbuf);
            let end = if self.datagram {
                c.dgram_ends.push_back(c.wbuf.len());
                c.stream_base + c.dgram_ends.len() as u64 - 1
            } else {
                c.stream_base + c.wbuf.len() as u64
            };
            c.inflight.push_back(Flight { req, id, sent: 0, end, tx: 0, ghost: false });
            c.unsent += 1;
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(i);
            }
            self.pop_backlog();
        }
    }

    /// The backlog's oldest request, counted out of `backlog_delayed`.
    fn pop_backlog(&mut self) -> Option<Req> {
        let r = self.backlog.pop_front()?;
        self.backlog_delayed -= (r.flags & F::ENGINE_STALL != 0) as usize;
        Some(r)
    }

    /// One write per connection with new requests; stamp their send time.
    fn flush_dirty(&mut self) {
        let mut written = 0u64;
        let t_start = self.watch.now();
        for d in 0..self.dirty.len() {
            let i = self.dirty[d];
            let t = self.watch.now();
            let late_ns = self.cfg.late_ns;
            let c = &mut self.conns[i];
            c.dirty = false;
            if !c.up() {
                continue;
            }
            let first = c.inflight.len() - c.unsent;
            for f in c.inflight.range_mut(first..) {
                f.sent = t;
                if f.req.flags & F::RESENT != 0 {
                    self.c.resent += 1;
                    continue;
                }
                self.c.sent += 1;
                let lag = t.saturating_sub(f.req.intended);
                self.hist.send_lag.saturating_record(lag.max(1));
                if f.req.intended >= self.last_stall_end {
                    self.hist.send_lag_unstalled.saturating_record(lag.max(1));
                }
                if lag > late_ns {
                    self.c.late += 1;
                }
                match f.req.op.kind {
                    OpKind::Get => self.c.gets += 1,
                    OpKind::Set => self.c.sets += 1,
                }
            }
            written += c.unsent as u64;
            c.unsent = 0;
            if let Err(e) = self.write_conn(i) {
                self.lost_conn(i, format!("send failed: {e}"), true);
            }
        }
        self.dirty.clear();
        if written > 0 {
            // The guard after a stall is its backlog times this cost (StallWindow::guard_end).
            let per = (self.watch.now() - t_start) as f64 / written as f64;
            self.send_cost_ns += (per - self.send_cost_ns) / 64.0;
        }
        self.publish();
    }

    fn write_conn(&mut self, i: usize) -> io::Result<()> {
        let datagram = self.datagram;
        let mut failed = None;
        let c = &mut self.conns[i];
        while c.wpos < c.wbuf.len() {
            // A datagram goes whole, one per request; a stream takes what fits.
            let end = if datagram { c.dgram_ends.front().copied().unwrap_or(c.wbuf.len()) } else { c.wbuf.len() };
            match net::write(c.fd, &c.wbuf[c.wpos..end]) {
                Ok(n) if datagram => {
                    debug_assert_eq!(n, end - c.wpos);
                    c.wpos = end;
                    c.dgram_ends.pop_front();
                    c.stream_base += 1;
                }
                Ok(n) => c.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if datagram => {
                    // This datagram is lost (its request will time out); the socket goes on. The
                    // kernel does not count a failed send in its stamp keys; rather than rely on
                    // that, this socket's later sends go unstamped.
                    c.wpos = end;
                    c.dgram_ends.pop_front();
                    c.tx_ok = false;
                    failed = Some(format!("send to {} failed: {e}", c.addr));
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(why) = failed {
            self.target_failure(why);
        }
        let c = &mut self.conns[i];
        let pending = c.wpos < c.wbuf.len();
        if !pending {
            if !datagram {
                c.stream_base += c.wbuf.len() as u64;
            }
            c.wbuf.clear();
            c.wpos = 0;
        } else if datagram && c.wpos > 0 {
            // Keep offsets valid: drop what was sent.
            let sent = c.wpos;
            c.wbuf.drain(..sent);
            c.wpos = 0;
            for e in c.dgram_ends.iter_mut() {
                *e -= sent;
            }
        }
        if pending != c.want_write {
            c.want_write = pending;
            let ev = if pending { EPOLLIN | EPOLLOUT } else { EPOLLIN };
            self.ep.modify(c.fd, ev, i as u64)?;
        }
        Ok(())
    }

    /// Wait for events and serve them, but return as soon as a send falls due (`next_due`): the
    /// events not served are level-triggered and come back on the next poll, and a request due
    /// now must not wait behind the reads of other connections.
    fn poll(&mut self, wait_ns: u64, next_due: u64) {
        // Reuse one buffer: no allocation in the timing loop.
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        self.watch.plan_wait(wait_ns);
        let waited = self.ep.wait(wait_ns);
        self.watch.now();
        match waited {
            Ok(evs) => ready.extend(evs.iter().map(|e| (e.u64 as usize, e.events))),
            Err(e) => self.shared.abort(format!("epoll failed: {e}")),
        }
        for (n, &(i, events)) in ready.iter().enumerate() {
            // At least one event is served per poll, or at high rates (a send due every µs) the
            // replies would never be read.
            if n > 0 && self.watch.now() >= next_due {
                break;
            }
            match self.conns[i].state {
                State::Up => {}
                State::Connecting(_) => {
                    self.connect_done(i);
                    continue;
                }
                State::Waiting(_) | State::Dead => continue,
            }
            // Transmit stamps come on the error queue, which raises EPOLLERR until read; they are
            // taken before the replies so that a reply finds its request stamped.
            let mut read = events & (EPOLLIN | EPOLLHUP) as u32 != 0;
            if events & EPOLLERR as u32 != 0 {
                read |= !(self.stamps.is_some() && self.take_tx_stamps(i));
            }
            if read {
                self.read_conn(i);
            }
            if events & EPOLLOUT as u32 != 0 && self.conns[i].up() {
                if let Err(e) = self.write_conn(i) {
                    self.lost_conn(i, format!("send failed: {e}"), true);
                }
            }
        }
        self.ready = ready;
        self.publish();
    }

    fn read_conn(&mut self, i: usize) {
        if self.datagram {
            return self.read_datagrams(i);
        }
        loop {
            let c = &mut self.conns[i];
            if c.rpos > 0 && (c.rpos == c.rbuf.len() || c.rbuf.capacity() - c.rbuf.len() < READ_CHUNK / 4) {
                c.rbuf.drain(..c.rpos);
                c.rpos = 0;
            }
            let len = c.rbuf.len();
            if c.rbuf.capacity() - len < READ_CHUNK / 4 {
                if len >= MAX_READ_BUF {
                    self.kill_conn(i, format!("reply longer than {MAX_READ_BUF} bytes"));
                    return;
                }
                c.rbuf.reserve(READ_CHUNK);
            }
            let cap = c.rbuf.capacity();
            // SAFETY: read into spare capacity, then set the length to what the kernel wrote.
            let spare = unsafe { std::slice::from_raw_parts_mut(c.rbuf.as_mut_ptr().add(len), cap - len) };
            let spare_len = spare.len();
            let (got, stamp) = read(self.stamps, c.fd, spare);
            let stamped = stamp.is_some();
            let (t_rx, t_user) = self.rx_time(stamp);
            let c = &mut self.conns[i];
            match got {
                Ok(0) => {
                    self.lost_conn(i, "the target closed the connection".into(), true);
                    return;
                }
                Ok(n) => {
                    // SAFETY: the kernel initialised n bytes.
                    unsafe { c.rbuf.set_len(len + n) };
                    self.parse_replies(i, t_rx, t_user, stamped);
                    if n < spare_len || !self.conns[i].up() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let why = if e.kind() == io::ErrorKind::ConnectionReset {
                        "the target closed the connection (reset)".to_string()
                    } else {
                        format!("the connection to the target failed: {e}")
                    };
                    self.lost_conn(i, why, true);
                    return;
                }
            }
        }
    }

    /// Datagram protocols: one reply per datagram, matched by id; a lost one times out.
    fn read_datagrams(&mut self, i: usize) {
        loop {
            let c = &mut self.conns[i];
            c.rbuf.clear();
            c.rbuf.reserve(MAX_DATAGRAM);
            let cap = c.rbuf.capacity();
            // SAFETY: read into spare capacity, then set the length to what the kernel wrote.
            let spare = unsafe { std::slice::from_raw_parts_mut(c.rbuf.as_mut_ptr(), cap) };
            let (got, stamp) = read(self.stamps, c.fd, spare);
            let stamped = stamp.is_some();
            let (t_rx, t_user) = self.rx_time(stamp);
            let c = &mut self.conns[i];
            match got {
                Ok(n) => {
                    // SAFETY: the kernel initialised n bytes.
                    unsafe { c.rbuf.set_len(n) };
                    let parsed = c.codec.parse(&c.rbuf);
                    match parsed {
                        Parsed::Incomplete => {}
                        Parsed::Reply { id, outcome, .. } => {
                            let mask = c.id_mask;
                            let pos = id.and_then(|id| c.inflight.iter().position(|f| f.sent > 0 && f.id & mask == id));
                            match pos.and_then(|p| c.inflight.remove(p)) {
                                Some(f) => self.complete(i, f, outcome, (t_rx, t_user), stamped),
                                // A reply to a request already timed out, or a duplicate.
                                None => self.note("reply to no request in flight (after its timeout, or duplicated)".into()),
                            }
                        }
                        Parsed::Malformed { reason } => self.note(format!("malformed datagram dropped: {reason}")),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // An ICMP error (nothing listens): the datagrams in flight time out one by
                    // one and the socket goes on, until the target stays unreachable.
                    let hint = if e.kind() == io::ErrorKind::ConnectionRefused {
                        " — nothing listens on that UDP port: start the server or fix the port"
                    } else {
                        ""
                    };
                    let why = format!("receive from {} failed: {e}{hint}", c.addr);
                    self.note(why.clone());
                    self.target_failure(why);
                    return;
                }
            }
        }
    }

    /// A reply's receive time on CLOCK_MONOTONIC: the kernel's or NIC's stamp when there is one,
    /// else now; and now (the user-space stamp). The clock is read either way: every read feeds
    /// the stall watch.
    fn rx_time(&mut self, stamp: Option<u64>) -> (u64, u64) {
        let now = self.watch.now();
        match stamp {
            Some(t) => (self.stamp_to_mono(t, now), now),
            None => (now, now),
        }
    }

    /// A stamp (CLOCK_REALTIME, or the NIC's PTP clock) on CLOCK_MONOTONIC, never later than `now`
    /// (the conversion may err by ~100 ns, by ~0.5 µs for a PTP clock).
    fn stamp_to_mono(&mut self, t: u64, now: u64) -> u64 {
        if now - self.stamp_offset_at > self.offset_every_ns {
            self.stamp_offset = stamp_offset(&self.nic);
            self.stamp_offset_at = now;
        }
        ((t as i64 - self.stamp_offset).max(0) as u64).min(now)
    }

    /// Read connection `i`'s transmit stamps and give each to the requests whose last byte its
    /// send carried: for a stream, every request not yet stamped that ends at or before the
    /// stamped byte (several requests in one send share its stamp; a send the kernel split is
    /// stamped at its last segment); for datagrams, the request of that datagram. A stamp for
    /// bytes already matched (a retransmission) is dropped. Returns whether the queue held
    /// anything.
    fn take_tx_stamps(&mut self, i: usize) -> bool {
        let mut stamps = std::mem::take(&mut self.tx_buf);
        let fd = self.conns[i].fd;
        let clock = self.stamps.expect("transmit stamps are read only with a stamp clock");
        let read = net::read_tx_stamps(fd, &mut stamps, clock);
        let now = self.watch.now();
        let datagram = self.datagram;
        for &(key, raw) in &stamps {
            let t = self.stamp_to_mono(raw, now);
            let c = &mut self.conns[i];
            if !c.tx_ok {
                break;
            }
            // The key is the low 32 bits of a byte offset (datagram number): the nearest at or
            // after the last matched one.
            let last = c.tx_next as i64 - 1;
            let full = last + (key.wrapping_sub(last as u32) as i32) as i64;
            if full < c.tx_next as i64 {
                continue;
            }
            if datagram {
                if let Some(f) = c.inflight.iter_mut().find(|f| f.end == full as u64) {
                    f.tx = t.max(f.sent);
                }
            } else {
                for f in c.inflight.iter_mut().filter(|f| f.end <= full as u64 + 1 && f.tx == 0 && f.sent > 0) {
                    f.tx = t.max(f.sent);
                }
            }
            c.tx_next = full as u64 + 1;
        }
        self.tx_buf = stamps;
        match read {
            Ok(n) => n > 0,
            Err(e) => {
                self.note(format!("reading transmit stamps failed: {e}"));
                false
            }
        }
    }

    /// Record a reply to `f` on connection `i`, received at `t_rx` (the kernel's stamp if
    /// `stamped`) and seen by user space at `t_user`.
    fn complete(&mut self, i: usize, f: Flight, outcome: Outcome, (t_rx, t_user): (u64, u64), stamped: bool) {
        // A kernel stamp converted from another clock may lie a few ns before the send.
        let t_rx = t_rx.max(f.tx).max(f.sent);
        self.c.rx_kernel += stamped as u64;
        self.c.tx_kernel += (f.tx > 0) as u64;
        let mut flags = if stamped { F::KERNEL_RX } else { 0 };
        if f.tx > 0 {
            flags |= F::KERNEL_TX;
        }
        match outcome {
            Outcome::Error(reason) => {
                self.c.errors += 1;
                self.note(format!("error reply: {reason}"));
                flags |= F::ERROR_REPLY;
            }
            Outcome::Hit => self.c.hits += 1,
            Outcome::Miss => self.c.misses += 1,
            Outcome::Stored => self.c.stored += 1,
            Outcome::Done => {}
        }
        if flags & F::ERROR_REPLY == 0 {
            self.c.received += 1;
            // Completed within the window: the server's throughput, not the client's schedule
            // (replies to the backlog an overloaded server leaves come after it).
            if t_rx < self.end {
                self.received_in_window += 1;
            }
        }
        self.replies += 1;
        self.last_reply = t_rx;
        self.failure_since_reply = None;
        self.closed_since_reply = false;
        let c = &mut self.conns[i];
        c.replied = true;
        c.fails = 0;
        // A datagram's kernel stamp is its arrival: an engine stall cannot have inflated it. A TCP
        // read's stamp is its last segment's, so a stall before that segment still may have.
        // A load thread beside a probe times nothing: no inflation to work out.
        let exact = self.stamps.is_some() && self.datagram;
        let untimed = self.role == Role::Load;
        let inflation =
            if self.windows.is_empty() || exact || untimed { 0 } else { self.inflation(f.req.intended, t_rx) };
        let times = Times { rx_user: t_user, ..f.times() };
        self.finish(f.req, times, t_rx - f.req.intended, flags, inflation);
    }

    /// The end of a request: into the histograms (whole run and its interval), and into the
    /// samples if it was chosen.
    fn finish(&mut self, r: Req, times: Times, latency: u64, flags: u32, inflation: u64) {
        if self.role == Role::Load {
            return; // counted by the caller; the probe times the requests that are reported
        }
        let mut flags = flags | (r.flags & !SAMPLED);
        if inflation > 0 {
            flags |= F::INFLATED;
        }
        self.hist.latency.saturating_record(latency.max(1));
        self.intervals.record(r.intended - self.t0, latency);
        if r.flags & SAMPLED != 0 {
            self.samples.push(Sample {
                intended_ns: r.intended - self.t0,
                sent_ns: times.sent.saturating_sub(self.t0),
                tx_ns: times.tx.saturating_sub(self.t0),
                rx_user_ns: times.rx_user.saturating_sub(self.t0),
                latency_ns: latency,
                flags,
                inflation_ns: inflation.min(u32::MAX as u64) as u32,
            });
        }
    }

    /// Count one occurrence of an error reason.
    fn note(&mut self, reason: String) {
        self.note_n(reason, 1);
    }

    fn note_n(&mut self, reason: String, n: u64) {
        let full = self.reasons.len() >= MAX_REASONS;
        let key = if full && !self.reasons.iter().any(|(r, _)| *r == reason) { OTHER_REASONS.to_string() } else { reason };
        super::count_reason(&mut self.reasons, key, n);
    }

    fn parse_replies(&mut self, i: usize, t_rx: u64, t_user: u64, stamped: bool) {
        loop {
            let c = &mut self.conns[i];
            let parsed = c.codec.parse(&c.rbuf[c.rpos..]);
            match parsed {
                Parsed::Incomplete => return,
                Parsed::Reply { len, id, outcome } => {
                    c.rpos += len;
                    let Some(f) = c.inflight.pop_front() else {
                        self.kill_conn(i, "a reply arrived with no request outstanding".into());
                        return;
                    };
                    if let Some(id) = id {
                        if id != f.id & c.id_mask {
                            let want = f.id & c.id_mask;
                            c.inflight.push_front(f);
                            self.kill_conn(i, format!("reply id {id} does not match the oldest request {want}"));
                            return;
                        }
                    }
                    if f.ghost {
                        continue; // the late reply of a request already counted as a timeout
                    }
                    self.complete(i, f, outcome, (t_rx, t_user), stamped);
                }
                Parsed::Malformed { reason } => {
                    self.kill_conn(i, format!("malformed reply: {reason}"));
                    return;
                }
            }
        }
    }

    /// Every millisecond: timeouts (from the intended time), reconnections, the target's
    /// reachability, and old stall windows.
    fn tick(&mut self, now: u64) {
        let timeout = self.cfg.timeout_ns;
        let t_ms = ms(timeout);
        // Requests still waiting for a slot past their timeout were never sent.
        let mut expired = 0;
        while let Some(&r) = self.backlog.front() {
            if now - r.intended <= timeout {
                break;
            }
            self.pop_backlog();
            self.censor_waiting(r, now, true);
            expired += 1;
        }
        if expired > 0 {
            self.note_n(format!("not sent within {t_ms}: every connection busy or down"), expired);
        }
        for i in 0..self.conns.len() {
            match self.conns[i].state {
                State::Up => self.time_out_flights(i, now),
                State::Waiting(at) if now >= at => self.start_connect(i, now),
                State::Connecting(since) if now - since > self.cfg.connect_timeout_ns => {
                    let why = format!("cannot reconnect to {}: no answer within {}", self.conns[i].addr, ms(self.cfg.connect_timeout_ns));
                    self.connect_failed(i, why, now);
                }
                _ => {}
            }
        }
        if self.failure_since_reply.is_some() && now - self.last_reply > self.cfg.unreachable_ns {
            let secs = (now - self.last_reply) as f64 / 1e9;
            let what = if self.last_failure.starts_with("the target closed") {
                format!("the target closed every connection before replying for {secs:.1} s")
            } else if self.closed_since_reply {
                format!("the target closed the connection and stays unreachable ({}) for {secs:.1} s", self.last_failure)
            } else {
                format!("the target stays unreachable ({}) for {secs:.1} s", self.last_failure)
            };
            self.shared.abort(format!("{what} ({} replies received before)", self.replies));
        }
        // A stall window matters while a request outstanding across it can still end.
        let horizon = now.saturating_sub(timeout + 10 * TICK_NS);
        while self.windows.front().is_some_and(|w| w.guard_end() < horizon) && self.window_at > 0 {
            self.windows.pop_front();
            self.window_at -= 1;
        }
    }

    fn time_out_flights(&mut self, i: usize, now: u64) {
        let timeout = self.cfg.timeout_ns;
        let mut lost = 0;
        if self.datagram {
            // A lost datagram costs its request only; the socket goes on.
            while self.conns[i].inflight.front().is_some_and(|f| now - f.req.intended > timeout) {
                let f = self.conns[i].inflight.pop_front().unwrap();
                self.c.timeouts += 1;
                self.finish(f.req, f.times(), now - f.req.intended, F::CENSORED | F::TIMEOUT, 0);
                lost += 1;
            }
            if lost > 0 {
                self.note_n(format!("no reply within {} (datagram lost)", ms(timeout)), lost);
            }
            return;
        }
        // A stream: the timed-out requests stay in their slots as ghosts, so that their replies,
        // if they come, keep the stream in step.
        let mut timed_out = Vec::new();
        for f in self.conns[i].inflight.iter_mut() {
            if now - f.req.intended <= timeout {
                break;
            }
            if !f.ghost {
                f.ghost = true;
                timed_out.push((f.req, f.times()));
            }
        }
        for (r, times) in timed_out {
            self.c.timeouts += 1;
            self.finish(r, times, now - r.intended, F::CENSORED | F::TIMEOUT, 0);
            lost += 1;
        }
        if lost > 0 {
            self.note_n(format!("no reply within {}", ms(timeout)), lost);
        }
        // Twice the timeout without a reply to the oldest: replace the connection and send what
        // it still holds again (not the target's failure: it may only be slow).
        if self.conns[i].inflight.front().is_some_and(|f| f.ghost && now - f.req.intended > 2 * timeout) {
            self.lost_conn(i, format!("no reply within {}", ms(2 * timeout)), false);
        }
    }

    /// A target-side failure (a refusal, a close before any reply): for reachability.
    fn target_failure(&mut self, why: String) {
        if self.failure_since_reply.is_none() {
            self.failure_since_reply = Some(why.clone());
        }
        self.last_failure = why;
    }

    /// A connection that ended (closed or reset by the target, a send error, or closed by us
    /// after a timeout): its unanswered requests go back to the front of the backlog, in intended
    /// order, to be sent again with their original intended times; reconnect with back-off.
    fn lost_conn(&mut self, i: usize, why: String, by_target: bool) {
        let now = now_ns();
        if self.datagram {
            return self.kill_conn(i, why); // a datagram socket has no connection to lose
        }
        let c = &mut self.conns[i];
        if !matches!(c.state, State::Up | State::Connecting(_)) {
            return;
        }
        let _ = self.ep.delete(c.fd);
        if let Some(s) = c.sock.take() {
            s.shutdown();
        }
        let flights: Vec<Flight> = c.inflight.drain(..).collect();
        c.unsent = 0;
        c.wbuf.clear();
        c.wpos = 0;
        c.dgram_ends.clear();
        c.rbuf.clear();
        c.rpos = 0;
        c.want_write = false;
        if by_target {
            c.fails = if c.replied { 0 } else { c.fails + 1 };
        }
        c.state = State::Waiting(now + backoff_ns(c.fails));
        let no_reply = !c.replied;
        c.replied = false;
        for f in flights.into_iter().filter(|f| !f.ghost) {
            let mut r = f.req;
            if f.sent > 0 {
                r.flags |= F::RESENT;
            }
            let at = self.backlog.partition_point(|b| b.intended <= r.intended);
            self.backlog_delayed += (r.flags & F::ENGINE_STALL != 0) as usize;
            self.backlog.insert(at, r);
        }
        if by_target {
            self.closed_since_reply |= why.starts_with("the target closed");
            if no_reply {
                let why = if why.starts_with("the target closed") { format!("{why} before replying") } else { why };
                self.target_failure(why);
            }
        }
    }

    /// Start a non-blocking reconnect of connection `i`.
    fn start_connect(&mut self, i: usize, now: u64) {
        let addr = self.conns[i].addr;
        match net::connect_nonblocking(&addr) {
            Ok((s, done)) => {
                let c = &mut self.conns[i];
                c.stream_base = 0;
                c.tx_next = 0;
                c.tx_ok = true;
                c.fd = s.as_raw_fd();
                c.sock = Some(Sock::Tcp(s));
                c.codec = self.cfg.protocol.codec();
                c.state = State::Connecting(now);
                if let Err(e) = self.ep.add(c.fd, EPOLLOUT, i as u64) {
                    self.connect_failed(i, format!("cannot reconnect to {addr}: {e}"), now);
                } else if done {
                    self.connect_done(i);
                }
            }
            Err(e) => self.connect_failed(i, format!("cannot reconnect to {addr}: {e}"), now),
        }
    }

    /// A reconnect in progress became writable: connected, or failed.
    fn connect_done(&mut self, i: usize) {
        let fd = self.conns[i].fd;
        if let Err(e) = net::take_socket_error(fd) {
            let why = format!("cannot reconnect to {}: {e}", self.conns[i].addr);
            return self.connect_failed(i, why, now_ns());
        }
        // Before anything is written: TCP transmit-stamp keys count from here.
        if let Some(clock) = self.stamps {
            match net::enable_timestamps(fd, true, clock) {
                Ok(tx) => self.conns[i].tx_ok = tx,
                Err(e) => self.note(format!("{clock:?} timestamps refused on a new connection: {e}")),
            }
        }
        let c = &mut self.conns[i];
        if let Some(Sock::Tcp(s)) = &c.sock {
            let _ = s.set_nodelay(true);
        }
        c.state = State::Up;
        c.want_write = false;
        if self.ep.modify(fd, EPOLLIN, i as u64).is_err() {
            return self.connect_failed(i, format!("cannot watch the connection to {}", self.conns[i].addr), now_ns());
        }
        self.c.reconnects += 1;
    }

    fn connect_failed(&mut self, i: usize, why: String, now: u64) {
        let c = &mut self.conns[i];
        let _ = self.ep.delete(c.fd);
        c.sock = None;
        c.fails += 1;
        c.state = State::Waiting(now + backoff_ns(c.fails));
        self.target_failure(why);
    }

    /// Close a connection for good (the target does not speak the protocol); its requests in
    /// flight are errors, censored at the time they were outstanding. The run goes on on the
    /// others, and stops when a thread has none left.
    fn kill_conn(&mut self, i: usize, reason: String) {
        let now = now_ns();
        let c = &mut self.conns[i];
        if c.state == State::Dead {
            return;
        }
        c.state = State::Dead;
        let _ = self.ep.delete(c.fd);
        if let Some(s) = c.sock.take() {
            s.shutdown();
        }
        let flights: Vec<Flight> = c.inflight.drain(..).filter(|f| !f.ghost).collect();
        c.unsent = 0;
        self.c.errors += flights.len() as u64;
        for f in flights {
            self.finish(f.req, f.times(), now - f.req.intended, F::CENSORED | F::FAILED, 0);
        }
        self.note(reason.clone());
        if self.conns.iter().all(|c| c.state == State::Dead) {
            self.shared.abort(format!("every connection of engine thread {} failed; last: {reason}", self.index));
        }
    }

    fn publish(&self) {
        let p = &self.shared.progress[self.index];
        p.intended.store(self.c.intended, Relaxed);
        p.sent.store(self.c.sent, Relaxed);
        p.late.store(self.c.late, Relaxed);
        p.received.store(self.c.received, Relaxed);
        p.errors.store(self.c.errors, Relaxed);
        p.timeouts.store(self.c.timeouts, Relaxed);
        p.never_sent.store(self.c.never_sent, Relaxed);
        p.reconnects.store(self.c.reconnects, Relaxed);
        p.received_in_window.store(self.received_in_window, Relaxed);
    }
}

/// One non-blocking read of a connection, with its receive stamp on `stamps` when asked for one.
fn read(stamps: Option<StampClock>, fd: RawFd, buf: &mut [u8]) -> (io::Result<usize>, Option<u64>) {
    let Some(clock) = stamps else {
        return (net::read(fd, buf), None);
    };
    match net::read_stamped(fd, buf, clock) {
        Ok((n, stamp)) => (Ok(n), stamp),
        Err(e) => (Err(e), None),
    }
}

/// The stamps' clock − CLOCK_MONOTONIC: the NIC's PTP clock's, else CLOCK_REALTIME's.
fn stamp_offset(nic: &Option<Arc<NicStamping>>) -> i64 {
    match nic {
        Some(n) => n.phc.offset_ns(),
        None => crate::clock::realtime_offset_ns(),
    }
}
