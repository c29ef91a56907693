//! One engine thread: its connections, schedule, backlog and recorder.

use super::{Counters, EngineConfig, Shared, Sock};
use crate::clock::{now_ns, set_timer_slack_1ns};
use crate::net::{self, Epoll, EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT};
use crate::protocol::{Codec, OpKind, Outcome, Parsed, Request};
use crate::recorder::{Histograms, Sample, SampleStore, Sampler};
use crate::schedule::Schedule;
use crate::stall::StallWatch;
use crate::workload::OpGen;
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// In blocking mode, wake this long before the next intended send and spin the rest
/// (sleeps overshoot ~6 µs p50 and ~35 µs p99 here even at 1 ns slack: platform.md).
const SPIN_NS: u64 = 50_000;
/// A loop iteration longer than this is a stall (preemption, or a long syscall); the sends it
/// delays are counted apart so that the send lag of an unpreempted thread can be read. A lone
/// pinned spinner here sees ~400 gaps/s above 5 µs (platform.md); the loop's own work takes
/// a few µs per syscall.
pub(crate) const STALL_NS: u64 = 20_000;
/// How often a thread hands its kept samples to the coordinator.
const HARVEST_NS: u64 = 10_000_000;
/// Longest single wait, so that stop requests and timeouts are noticed promptly.
const MAX_WAIT_NS: u64 = 1_000_000;
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

pub(crate) struct ThreadCtx {
    pub index: usize,
    pub streams: Vec<Sock>,
    pub cfg: EngineConfig,
    pub start_ns: u64,
    pub cpu: Option<usize>,
    pub shared: Arc<Shared>,
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
}

struct Flight {
    id: u64,
    kind: OpKind,
    intended: u64,
    sent: u64,
    sampled: bool,
}

struct Conn {
    sock: Sock,
    fd: RawFd,
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
    dead: bool,
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
    ep: Epoll,
    rr: usize,
    next_id: u64,
    backlog: VecDeque<u64>,
    dirty: Vec<usize>,
    ready: Vec<(usize, u32)>,
    sampler: Sampler,
    c: Counters,
    received_in_window: u64,
    hist: Histograms,
    stalls: u64,
    stalled_ns: u64,
    /// End of the latest stall: a request intended before it and sent after it was delayed by it.
    last_stall_end: u64,
    /// The wait asked of epoll in the current iteration (blocking mode).
    planned_wait: u64,
    /// Every clock read of the timing loop goes through it: a gap of ≥ 200 µs between two reads
    /// (beyond a planned wait) is a time the thread did not run, logged for masking (stall.rs).
    /// The loop-gap count above also includes the loop's own long iterations; this does not.
    watch: StallWatch,
    samples: SampleStore,
    reasons: Vec<(String, u64)>,
    t0: u64,
    end: u64,
}

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
                sock,
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
                dead: false,
            }})
            .collect(),
        datagram: cfg.protocol.is_datagram(),
        keyed: cfg.protocol.has_keys(),
        gen: OpGen::new(cfg.workload.clone(), seed ^ 0xC0FF_EE00),
        shared: ctx.shared,
        index: ctx.index,
        rr: 0,
        next_id: 0,
        backlog: VecDeque::new(),
        dirty: Vec::with_capacity(n),
        ready: Vec::with_capacity(n.max(1) * 2),
        sampler: Sampler::new(cfg.sample_every, seed ^ 0x5A5A),
        c: Counters::default(),
        received_in_window: 0,
        hist: Histograms::new(),
        stalls: 0,
        stalled_ns: 0,
        last_stall_end: 0,
        planned_wait: 0,
        watch,
        samples: SampleStore::default(),
        reasons: Vec::new(),
        t0: ctx.start_ns,
        end: ctx.start_ns + cfg.duration_ns,
        cfg,
    };
    for (i, c) in w.conns.iter().enumerate() {
        w.ep.add(c.fd, EPOLLIN, i as u64).expect("epoll_ctl add");
    }
    let share = w.cfg.rate_rps / w.cfg.threads as f64;
    let phase = w.index as f64 / w.cfg.threads as f64;
    let mut sched = Schedule::new(w.cfg.arrival, share, w.t0, phase, seed);
    let elapsed_ns = w.main_loop(&mut sched);
    w.drain();
    w.hand_over_samples();
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
    }
}

impl Worker {
    /// Returns how long the schedule ran (ns).
    fn main_loop(&mut self, sched: &mut Schedule) -> u64 {
        let mut next = sched.next_ns();
        let mut next_timeout_check = self.t0 + 1_000_000;
        let mut next_harvest = self.t0 + HARVEST_NS;
        // Wait for the common start, sleeping most of it.
        crate::clock::sleep_until(self.t0, SPIN_NS);
        self.watch.reset();
        let mut prev = self.watch.now();
        loop {
            let now = self.watch.now();
            if now >= self.end || self.shared.stop.load(Relaxed) {
                break;
            }
            let gap = now - prev;
            prev = now;
            // A planned sleep (blocking mode) is not a stall: only time past the wake-up counts.
            if gap > STALL_NS && (self.cfg.busy_poll || gap > self.planned_wait + STALL_NS) {
                self.stalls += 1;
                self.stalled_ns += gap;
                self.last_stall_end = now;
            }
            while next <= now {
                self.enqueue(next);
                next = sched.next_ns();
            }
            if !self.backlog.is_empty() {
                self.dispatch();
                self.flush_dirty();
            }
            let wait = if self.cfg.busy_poll || (!self.backlog.is_empty() && self.has_free_slot()) {
                0
            } else {
                next.saturating_sub(self.watch.now() + SPIN_NS).min(MAX_WAIT_NS)
            };
            self.planned_wait = wait;
            self.poll(wait, next);
            if now >= next_timeout_check {
                self.check_timeouts(now);
                next_timeout_check = now + 1_000_000;
            }
            if now >= next_harvest {
                self.hand_over_samples();
                next_harvest = now + HARVEST_NS;
            }
        }
        let stopped = now_ns().min(self.end);
        // Requests due before the end are still sent (late) rather than dropped.
        if !self.shared.stop.load(Relaxed) {
            while next < self.end {
                self.enqueue(next);
                next = sched.next_ns();
            }
            self.dispatch();
            self.flush_dirty();
        }
        self.c.never_sent += self.backlog.len() as u64;
        self.backlog.clear();
        stopped.saturating_sub(self.t0)
    }

    /// After the schedule: collect the replies still in flight, up to the timeout.
    fn drain(&mut self) {
        let deadline = now_ns() + self.cfg.timeout_ns;
        while self.conns.iter().any(|c| !c.dead && !c.inflight.is_empty()) {
            let now = now_ns();
            if now >= deadline || (self.shared.stop.load(Relaxed) && self.shared.abort.lock().unwrap().is_some()) {
                break;
            }
            self.poll(if self.cfg.busy_poll { 0 } else { (deadline - now).min(MAX_WAIT_NS) }, u64::MAX);
        }
        for i in 0..self.conns.len() {
            let left = self.conns[i].inflight.len() as u64;
            if left > 0 && !self.conns[i].dead {
                self.c.timeouts += left;
                self.conns[i].inflight.clear();
            }
        }
        self.publish();
    }

    /// Move the kept samples to the shared harvest: an O(1) push under a lock that the
    /// coordinator holds only to swap the list out.
    fn hand_over_samples(&mut self) {
        if self.samples.is_empty() {
            return;
        }
        let mine = std::mem::take(&mut self.samples);
        self.shared.harvest.lock().unwrap().push(mine);
    }

    fn enqueue(&mut self, intended: u64) {
        self.c.intended += 1;
        if self.backlog.len() < MAX_BACKLOG {
            self.backlog.push_back(intended);
        } else {
            self.c.never_sent += 1;
        }
    }

    fn has_free_slot(&self) -> bool {
        self.conns.iter().any(|c| !c.dead && c.inflight.len() < self.cfg.outstanding)
    }

    /// Hand backlog entries to connections with a free slot, round-robin.
    fn dispatch(&mut self) {
        let n = self.conns.len();
        let k = self.cfg.outstanding;
        while let Some(&intended) = self.backlog.front() {
            let mut found = None;
            for step in 0..n {
                let i = (self.rr + step) % n;
                let c = &self.conns[i];
                if !c.dead && c.inflight.len() < k {
                    found = Some(i);
                    break;
                }
            }
            let Some(i) = found else { break };
            self.rr = (i + 1) % n;
            let id = self.next_id;
            self.next_id += 1;
            let sampled = self.sampler.take();
            let (kind, key, value) = if self.keyed { self.gen.next_op() } else { (OpKind::Get, &b""[..], &b""[..]) };
            let c = &mut self.conns[i];
            c.codec.encode(&Request { id, kind, key, value }, &mut c.wbuf);
            if self.datagram {
                c.dgram_ends.push_back(c.wbuf.len());
            }
            c.inflight.push_back(Flight { id, kind, intended, sent: 0, sampled });
            c.unsent += 1;
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(i);
            }
            self.backlog.pop_front();
        }
    }

    /// One write per connection with new requests; stamp their send time.
    fn flush_dirty(&mut self) {
        for d in 0..self.dirty.len() {
            let i = self.dirty[d];
            let t = self.watch.now();
            let late_ns = self.cfg.late_ns;
            let c = &mut self.conns[i];
            c.dirty = false;
            let first = c.inflight.len() - c.unsent;
            for f in c.inflight.range_mut(first..) {
                f.sent = t;
                let lag = t.saturating_sub(f.intended);
                self.hist.send_lag.saturating_record(lag.max(1));
                if f.intended >= self.last_stall_end {
                    self.hist.send_lag_unstalled.saturating_record(lag.max(1));
                }
                if lag > late_ns {
                    self.c.late += 1;
                }
                match f.kind {
                    OpKind::Get => self.c.gets += 1,
                    OpKind::Set => self.c.sets += 1,
                }
            }
            self.c.sent += c.unsent as u64;
            c.unsent = 0;
            if let Err(e) = self.write_conn(i) {
                self.fail_conn(i, format!("send failed: {e}"));
            }
        }
        self.dirty.clear();
        self.publish();
    }

    fn write_conn(&mut self, i: usize) -> io::Result<()> {
        let datagram = self.datagram;
        let c = &mut self.conns[i];
        while c.wpos < c.wbuf.len() {
            // A datagram goes whole, one per request; a stream takes what fits.
            let end = if datagram { c.dgram_ends.front().copied().unwrap_or(c.wbuf.len()) } else { c.wbuf.len() };
            match net::write(c.fd, &c.wbuf[c.wpos..end]) {
                Ok(n) if datagram => {
                    debug_assert_eq!(n, end - c.wpos);
                    c.wpos = end;
                    c.dgram_ends.pop_front();
                }
                Ok(n) => c.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        let pending = c.wpos < c.wbuf.len();
        if !pending {
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
        if ready.is_empty() {
            self.ready = ready;
            return;
        }
        for (n, &(i, events)) in ready.iter().enumerate() {
            // At least one event is served per poll, or at high rates (a send due every µs) the
            // replies would never be read.
            if n > 0 && self.watch.now() >= next_due {
                break;
            }
            if self.conns[i].dead {
                continue;
            }
            if events & (EPOLLIN | EPOLLHUP | EPOLLERR) as u32 != 0 {
                self.read_conn(i);
            }
            if events & EPOLLOUT as u32 != 0 && !self.conns[i].dead {
                if let Err(e) = self.write_conn(i) {
                    self.fail_conn(i, format!("send failed: {e}"));
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
                    self.fail_conn(i, format!("reply longer than {MAX_READ_BUF} bytes"));
                    return;
                }
                c.rbuf.reserve(READ_CHUNK);
            }
            let cap = c.rbuf.capacity();
            // SAFETY: read into spare capacity, then set the length to what the kernel wrote.
            let spare = unsafe { std::slice::from_raw_parts_mut(c.rbuf.as_mut_ptr().add(len), cap - len) };
            let got = net::read(c.fd, spare);
            let t_rx = self.watch.now();
            match got {
                Ok(0) => {
                    let why = format!(
                        "the target closed the connection mid-run ({} replies received before)",
                        self.c.received
                    );
                    self.fail_conn(i, "connection closed by the target".into());
                    self.shared.abort(why);
                    return;
                }
                Ok(n) => {
                    // SAFETY: the kernel initialised n bytes.
                    unsafe { c.rbuf.set_len(len + n) };
                    self.parse_replies(i, t_rx);
                    if n < spare.len() || self.conns[i].dead {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let why = if e.kind() == io::ErrorKind::ConnectionReset {
                        format!("the target closed the connection mid-run (reset; {} replies received before)", self.c.received)
                    } else {
                        format!("the connection to the target failed mid-run: {e}")
                    };
                    self.fail_conn(i, format!("receive failed: {e}"));
                    self.shared.abort(why);
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
            let got = net::read(c.fd, spare);
            let t_rx = self.watch.now();
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
                                Some(f) => self.complete(f, outcome, t_rx),
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
                    let hint = if e.kind() == io::ErrorKind::ConnectionRefused {
                        " — nothing listens on that UDP port: start the server or fix the port"
                    } else {
                        ""
                    };
                    self.fail_conn(i, format!("receive failed: {e}{hint}"));
                    return;
                }
            }
        }
    }

    /// Record a reply to `f`.
    fn complete(&mut self, f: Flight, outcome: Outcome, t_rx: u64) {
        match outcome {
            Outcome::Error(reason) => {
                self.c.errors += 1;
                self.note(format!("error reply: {reason}"));
                return;
            }
            Outcome::Hit => self.c.hits += 1,
            Outcome::Miss => self.c.misses += 1,
            Outcome::Stored => self.c.stored += 1,
            Outcome::Done => {}
        }
        let latency = t_rx.saturating_sub(f.intended);
        self.hist.latency.saturating_record(latency.max(1));
        self.c.received += 1;
        if f.intended < self.end {
            self.received_in_window += 1;
        }
        if f.sampled {
            self.samples.push(Sample { intended_ns: f.intended - self.t0, sent_ns: f.sent - self.t0, latency_ns: latency });
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

    fn parse_replies(&mut self, i: usize, t_rx: u64) {
        loop {
            let c = &mut self.conns[i];
            let parsed = c.codec.parse(&c.rbuf[c.rpos..]);
            match parsed {
                Parsed::Incomplete => return,
                Parsed::Reply { len, id, outcome } => {
                    c.rpos += len;
                    let Some(f) = c.inflight.pop_front() else {
                        self.fail_conn(i, "a reply arrived with no request outstanding".into());
                        return;
                    };
                    if let Some(id) = id {
                        if id != f.id & c.id_mask {
                            let want = f.id & c.id_mask;
                            c.inflight.push_front(f);
                            self.fail_conn(i, format!("reply id {id} does not match the oldest request {want}"));
                            return;
                        }
                    }
                    self.complete(f, outcome, t_rx);
                }
                Parsed::Malformed { reason } => {
                    self.fail_conn(i, format!("malformed reply: {reason}"));
                    return;
                }
            }
        }
    }

    fn check_timeouts(&mut self, now: u64) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.dead {
                continue;
            }
            if self.datagram {
                // A lost datagram costs its request only; the socket goes on.
                let mut lost = 0;
                let c = &mut self.conns[i];
                while c.inflight.front().is_some_and(|f| f.sent > 0 && now.saturating_sub(f.sent) > self.cfg.timeout_ns) {
                    c.inflight.pop_front();
                    lost += 1;
                }
                if lost > 0 {
                    self.c.timeouts += lost;
                    self.note_n(format!("no reply within {} ms (datagram lost)", self.cfg.timeout_ns / 1_000_000), lost);
                }
                continue;
            }
            if let Some(f) = c.inflight.front() {
                if f.sent > 0 && now.saturating_sub(f.sent) > self.cfg.timeout_ns {
                    let n = c.inflight.len() as u64;
                    self.c.timeouts += n;
                    self.conns[i].inflight.clear();
                    self.fail_conn(i, format!("no reply within {} ms", self.cfg.timeout_ns / 1_000_000));
                }
            }
        }
    }

    /// Close a connection; its requests in flight count as errors. The run goes on on the
    /// others, and stops when a thread has none left.
    fn fail_conn(&mut self, i: usize, reason: String) {
        let c = &mut self.conns[i];
        if c.dead {
            return;
        }
        c.dead = true;
        self.c.errors += c.inflight.len() as u64;
        c.inflight.clear();
        c.unsent = 0;
        let _ = self.ep.delete(c.fd);
        c.sock.shutdown();
        self.note(reason.clone());
        if self.conns.iter().all(|c| c.dead) {
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
    }
}

