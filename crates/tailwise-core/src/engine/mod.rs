//! The open-loop engine.
//!
//! `threads` native threads (no async runtime, no GIL), each pinned to a CPU where allowed, each
//! with its own share of the connections and of the rate. A thread precomputes its arrival
//! schedule and, in its loop, (1) moves every due intended time into a FIFO backlog, (2) hands
//! backlog entries to connections with fewer than `outstanding` requests in flight, (3) writes
//! each connection's new requests with one syscall, stamping the actual send time, and (4) polls
//! for replies, matching each to the oldest request in flight on its connection.
//!
//! Latency is *reply time − intended send time*: a request delayed by the client (backlog, a full
//! connection, preemption) is charged for the delay, so the tool cannot hide its own or the
//! server's stalls (coordinated omission). The send lag, *actual − intended*, is kept on its own.
//! A request without a reply is never dropped: it is recorded *censored*, at the time it has been
//! outstanding (see `thread.rs` for every way a request can end).
//!
//! While the run goes on, [`Engine::take`] asks every thread for a snapshot: each hands over its
//! samples and interval histograms and reports what is outstanding at that instant, so that the
//! coordinator analyses a consistent picture in which a freeze still going on is already visible.
//!
//! Busy-poll mode spins on `epoll_wait(0)`; blocking mode sleeps in `epoll_pwait2` until a reply
//! arrives or until the next send less the thread's measured wake-up lateness (time/wake.rs),
//! then spins (timer slack 1 ns).

pub(crate) mod busy;
mod config;
mod conn;
// The parts the packet path (crate::packet) shares with the request path.
pub(crate) mod finish;
pub(crate) mod handover;
pub(crate) mod io;
mod problem;
pub(crate) mod reach;
mod recover;
pub(crate) mod req;
pub(crate) mod stalls;
#[cfg(any(test, feature = "test-hooks"))]
mod test_hook;
pub(crate) mod thread;
mod tx_stamps;

pub use config::{ConfigError, EngineConfig, Probe, TestStall, Timestamps};
pub use problem::{Abort, EngineError, Failure, IoErr, Killed, Lost, NoReply};

/// A timing-loop iteration longer than this counts as a stall (`stalls` in the result; the
/// summary's `engine.stall_threshold_ns`).
pub const STALL_NS: u64 = stalls::STALL_NS;

use crate::io::{cpu, route, socket};
use crate::load::schedule::Arrival;
use crate::packet::PacketIntervals;
use crate::record::histogram::Histograms;
use crate::record::interval::{Intervals, SEAL_BEHIND};
use crate::record::sample::{Sample, SampleStore};
use crate::record::thin;
use crate::stamp::nic::NicStamping;
use crate::stamp;
use crate::time::stall::StallLog;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Whether an engine thread's requests are timed (`Measure`, and the `Probe`: histograms,
/// intervals, samples) or only counted (`Load`, beside a probe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Measure,
    Load,
    Probe,
}

/// Request counts. `intended` = `sent` + `never_sent`; every sent request ends as exactly one of
/// `received`, `errors` (error replies and requests lost with a failed connection), `timeouts`
/// or `unfinished` (still outstanding when the run was stopped). `gets` + `sets` = `sent`; `hits`
/// and `misses` count the replies to gets that said so, `stored` the sets the server stored.
/// `reconnects` counts connections re-established after the target closed one (or after a
/// timeout), `resent` the requests sent again on them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub intended: u64,
    pub sent: u64,
    pub received: u64,
    pub late: u64,
    pub never_sent: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub gets: u64,
    pub sets: u64,
    pub hits: u64,
    pub misses: u64,
    pub stored: u64,
    pub reconnects: u64,
    pub resent: u64,
    pub unfinished: u64,
    /// Replies whose receive time is the kernel's stamp (`Timestamps::Kernel`).
    pub rx_kernel: u64,
    /// Replies whose request carries the kernel's transmit stamp.
    pub tx_kernel: u64,
    /// Packet mode (udp+flow, packet/; zero for the other protocols): packets never answered by
    /// their timeout or the drain's end (`sent` = `received` + `lost`), first answers that came
    /// after an answer of a later seq of their flow, the largest such displacement (packets), and
    /// answers of a seq already answered.
    pub lost: u64,
    pub reordered: u64,
    pub reorder_max: u64,
    pub duplicates: u64,
}

impl Counters {
    fn add(&mut self, o: &Counters) {
        self.intended += o.intended;
        self.sent += o.sent;
        self.received += o.received;
        self.late += o.late;
        self.never_sent += o.never_sent;
        self.errors += o.errors;
        self.timeouts += o.timeouts;
        self.gets += o.gets;
        self.sets += o.sets;
        self.hits += o.hits;
        self.misses += o.misses;
        self.stored += o.stored;
        self.reconnects += o.reconnects;
        self.resent += o.resent;
        self.unfinished += o.unfinished;
        self.rx_kernel += o.rx_kernel;
        self.tx_kernel += o.tx_kernel;
        self.lost += o.lost;
        self.reordered += o.reordered;
        self.reorder_max = self.reorder_max.max(o.reorder_max);
        self.duplicates += o.duplicates;
    }
}

pub struct EngineResult {
    /// The schedule's time zero on CLOCK_MONOTONIC; sample times are relative to it.
    pub start_mono_ns: u64,
    /// How long requests were scheduled for (shorter than asked if the run was cut short).
    pub elapsed_ns: u64,
    pub counters: Counters,
    /// Replies received within the schedule window (for the completion rate).
    pub received_in_window: u64,
    /// Latency and send-lag (all and unstalled) histograms, all threads added.
    pub hist: Histograms,
    /// Iterations longer than 20 µs (preemption or a long syscall) and their total time.
    pub stalls: u64,
    pub stalled_ns: u64,
    /// Stalls of ≥ `stall::MASK_STALL_NS` not yet taken, as (start, end) on CLOCK_MONOTONIC.
    pub stall_intervals: Vec<(u64, u64)>,
    pub samples: SampleStore,
    /// Why the run ended early, if it did.
    pub error: Option<Abort>,
    /// Distinct error reasons with their counts.
    pub error_reasons: Vec<(String, u64)>,
    pub pinned_cpus: Vec<Option<usize>>,
    /// CPU time the engine threads used.
    pub cpu_ns: u64,
    /// Bytes allocated for the raw samples.
    pub sample_bytes: usize,
    /// Involuntary context switches of the engine threads (another task took their CPU).
    pub preemptions: u64,
    /// The probe thread's own counters (also in `counters`), when there is a probe.
    pub probe_counters: Option<Counters>,
    /// The level `samples` were thinned to (as `Taken::thinned_level`).
    pub thinned_level: u32,
}

#[derive(Default)]
pub(crate) struct Progress {
    pub intended: AtomicU64,
    pub sent: AtomicU64,
    pub late: AtomicU64,
    pub received: AtomicU64,
    pub errors: AtomicU64,
    pub timeouts: AtomicU64,
    pub never_sent: AtomicU64,
    pub reconnects: AtomicU64,
    pub received_in_window: AtomicU64,
    /// The latest snapshot this thread served, and when (ns after the schedule's start).
    pub snap_seq: AtomicU64,
    pub snap_ns: AtomicU64,
    /// The thread has ended and handed over everything.
    pub done: AtomicBool,
    /// Its counters as of the latest snapshot it served.
    pub at_snapshot: Mutex<Snapshot>,
}

/// The threads' samples not taken yet, and the highest level any of them (or of the pending rows
/// handed over with them) was thinned to (record/thin.rs; 0: none thinned).
#[derive(Default)]
pub(crate) struct Harvest {
    pub batches: Vec<SampleStore>,
    pub level: u32,
}

pub(crate) struct Shared {
    pub stop: AtomicBool,
    /// While set, no request falls due: the threads hold their schedules (see `Engine::pause`).
    pub paused: AtomicBool,
    pub abort: Mutex<Option<Abort>>,
    pub progress: Vec<Progress>,
    /// Samples handed over by the threads at snapshots and at their end.
    pub harvest: Mutex<Harvest>,
    /// Set by [`Engine::thin_rows`]: the rows a thread gathers between two hand-overs at most
    /// (`usize::MAX`: no bound), and the base of their keys' source (record/thin.rs).
    pub thin_bound: AtomicUsize,
    pub thin_base: AtomicU64,
    /// The sampled requests outstanding at the latest snapshot (its sequence number first).
    pub pending: Mutex<(u64, Vec<Sample>)>,
    /// Every-request histograms by interval of intended time.
    pub intervals: Arc<Mutex<Intervals>>,
    /// Raised by the caller to ask every thread for a snapshot.
    pub snap_seq: AtomicU64,
    /// Whether the snapshot asked for wants what is outstanding (set before `snap_seq` is
    /// raised): false for [`Engine::take_finished`].
    pub snap_pending: AtomicBool,
    /// Stalls of the engine threads of at least `stall::MASK_STALL_NS`.
    pub stall_log: StallLog,
    /// Packet mode: packet counts by interval of intended time (empty for other protocols).
    pub packets: Arc<Mutex<PacketIntervals>>,
    /// The instants at which no thread had anything outstanding (busy.rs).
    pub busy: busy::Busy,
}

impl Shared {
    /// For `threads` threads whose schedule starts at `t0`.
    pub fn new(threads: usize, t0: u64) -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            abort: Mutex::new(None),
            progress: (0..threads).map(|_| Progress::default()).collect(),
            harvest: Mutex::new(Harvest::default()),
            thin_bound: AtomicUsize::new(usize::MAX),
            thin_base: AtomicU64::new(0),
            pending: Mutex::new((0, Vec::new())),
            intervals: Arc::new(Mutex::new(Intervals::default())),
            snap_seq: AtomicU64::new(0),
            snap_pending: AtomicBool::new(true),
            stall_log: StallLog::default(),
            packets: Arc::new(Mutex::new(PacketIntervals::default())),
            busy: busy::Busy::new(threads, t0),
        }
    }

    /// End the run, for the first reason given.
    pub fn abort(&self, why: Abort) {
        let mut a = self.abort.lock().unwrap();
        if a.is_none() {
            *a = Some(why);
        }
        self.stop.store(true, Relaxed);
    }
}

/// Live counters, for progress display and the coordinator's rounds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot {
    pub elapsed_ns: u64,
    pub intended: u64,
    pub sent: u64,
    pub late: u64,
    pub received: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub never_sent: u64,
    pub reconnects: u64,
    pub received_in_window: u64,
}

impl Snapshot {
    fn add(&mut self, o: &Snapshot) {
        self.intended += o.intended;
        self.sent += o.sent;
        self.late += o.late;
        self.received += o.received;
        self.errors += o.errors;
        self.timeouts += o.timeouts;
        self.never_sent += o.never_sent;
        self.reconnects += o.reconnects;
        self.received_in_window += o.received_in_window;
    }
}

/// What [`Engine::take`] hands over: a consistent picture as of `snap_ns`.
pub struct Taken {
    /// Requests finished since the previous take (answered or censored for good).
    pub samples: SampleStore,
    /// Sampled requests outstanding at the snapshot, censored at the time they had waited (none
    /// from [`Engine::take_finished`]).
    pub pending: Vec<Sample>,
    /// The earliest of the threads' snapshot times, ns after the schedule's start.
    pub snap_ns: u64,
    /// Every thread answered (false if one did not within the wait: a stalled thread).
    pub complete: bool,
    /// The counters at the snapshot.
    pub counters: Snapshot,
    /// The level `samples` and `pending` were thinned to by the statistics' keys (record/thin.rs):
    /// they hold the rows a subsample at this level keeps. 0 unless [`Engine::thin_rows`] was
    /// called and a thread passed its bound.
    pub thinned_level: u32,
}

pub struct Engine {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<thread::ThreadResult>>,
    start_ns: u64,
    duration_ns: u64,
    /// With `Timestamps::Nic`: the interface stamping every packet until the engine is dropped.
    _nic: Option<Arc<NicStamping>>,
}

/// Time between connecting and the first intended send, so that every thread is pinned and
/// spinning before the schedule starts.
const START_DELAY_NS: u64 = 5_000_000;

/// Add `n` occurrences of `reason` to a list of distinct reasons with their counts.
pub fn count_reason(reasons: &mut Vec<(String, u64)>, reason: String, n: u64) {
    match reasons.iter_mut().find(|(r, _)| *r == reason) {
        Some(e) => e.1 += n,
        None => reasons.push((reason, n)),
    }
}

/// One connection's socket: a TCP stream, or a UDP socket connected to the target.
pub(crate) enum Sock {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

impl Sock {
    pub fn fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Udp(s) => s.as_raw_fd(),
        }
    }
    pub fn peer(&self) -> SocketAddr {
        match self {
            Sock::Tcp(s) => s.peer_addr(),
            Sock::Udp(s) => s.peer_addr(),
        }
        .expect("a connected socket has a peer")
    }
    pub fn shutdown(&self) {
        if let Sock::Tcp(s) = self {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn connect_udp(addr: &SocketAddr) -> Result<UdpSocket, EngineError> {
    let local: SocketAddr = if addr.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
    let s = UdpSocket::bind(local).map_err(EngineError::UdpSocket)?;
    s.connect(addr).map_err(|err| EngineError::ConnectUdp { addr: *addr, err })?;
    s.set_nonblocking(true).map_err(|err| EngineError::SocketOption { what: "non-blocking mode", addr: *addr, err })?;
    Ok(s)
}

fn connect(addr: &SocketAddr, timeout_ns: u64) -> Result<TcpStream, EngineError> {
    let s = TcpStream::connect_timeout(addr, Duration::from_nanos(timeout_ns))
        .map_err(|err| EngineError::Connect { addr: *addr, err })?;
    if socket::connected_to_itself(s.as_raw_fd()) {
        return Err(EngineError::Connect { addr: *addr, err: socket::met_itself() });
    }
    s.set_nodelay(true).map_err(|err| EngineError::SocketOption { what: "TCP_NODELAY", addr: *addr, err })?;
    s.set_nonblocking(true).map_err(|err| EngineError::SocketOption { what: "non-blocking mode", addr: *addr, err })?;
    Ok(s)
}

/// Busy-poll budget of the probe's sockets (SO_BUSY_POLL, µs; the kernel docs suggest 50).
const PROBE_BUSY_POLL_US: u32 = 50;

/// Packet mode: each flow socket's receive and send buffer asked for (bytes): at 20k packets/s
/// the default 208 KiB holds ~10 ms of answers on loopback, less than a busy host preempts for.
const PACKET_SOCKET_BUFFER: i32 = 4 << 20;

/// Connect one connection to `addr`, with the kernel's timestamps on when asked.
fn open(cfg: &EngineConfig, addr: &SocketAddr) -> Result<Sock, EngineError> {
    let s = if cfg.protocol.is_datagram() {
        Sock::Udp(connect_udp(addr)?)
    } else {
        Sock::Tcp(connect(addr, cfg.connect_timeout_ns)?)
    };
    if cfg.protocol.is_packet() {
        // Room for the answers that arrive while the thread is preempted (the kernel caps it at
        // net.core.rmem_max / wmem_max; refused or capped, the flow goes on with what it has).
        for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
            let _ = socket::set_int_option(s.fd(), libc::SOL_SOCKET, opt, PACKET_SOCKET_BUFFER);
        }
    }
    if let (Some(clock), true) = (cfg.timestamps.clock(), cfg.protocol.is_packet()) {
        // Receive stamps only: a packet's send time is the user-space stamp before its sendmmsg.
        stamp::enable_rx_timestamps(s.fd(), clock).map_err(|err| EngineError::Timestamps { clock, err })?;
    } else if let Some(clock) = cfg.timestamps.clock() {
        // Before anything is written: TCP transmit-stamp keys count from here. Without transmit
        // stamps the requests go without one (counters.tx_kernel says how many have one).
        stamp::enable_timestamps(s.fd(), !cfg.protocol.is_datagram(), clock)
            .map_err(|err| EngineError::Timestamps { clock, err })?;
    }
    Ok(s)
}

/// `Timestamps::Nic`: the interface every target is reached through, switched to stamp every
/// packet; why not, in one line, where it cannot.
fn nic_stamping(targets: &[SocketAddr]) -> Result<NicStamping, EngineError> {
    let mut ifaces: Vec<String> = Vec::new();
    for t in targets {
        let i = route::route_interface(t).map_err(EngineError::Route)?;
        if !ifaces.contains(&i) {
            ifaces.push(i);
        }
    }
    if ifaces.len() > 1 {
        return Err(EngineError::Interfaces(ifaces));
    }
    let iface = ifaces.swap_remove(0);
    NicStamping::enable(&iface).map_err(|err| EngineError::NoHardwareStamps { err, iface })
}

/// The probe thread's configuration: its own connections, one request outstanding on each,
/// Poisson arrivals at its own rate, every request kept raw, spinning.
fn probe_config(cfg: &EngineConfig, p: Probe) -> EngineConfig {
    EngineConfig {
        rate_rps: p.rate_rps,
        threads: 1,
        conns: p.conns,
        outstanding: 1,
        arrival: Arrival::Exp,
        sample_every: 1,
        busy_poll: true,
        probe: None,
        seed: cfg.seed ^ 0x9B0B_E000,
        ..cfg.clone()
    }
}

/// Every connection, per thread: the load threads' in turn over the targets, then the probe's
/// (a thread of its own, the last one).
fn connect_all(cfg: &EngineConfig) -> Result<Vec<Vec<Sock>>, EngineError> {
    let mut per_thread: Vec<Vec<Sock>> = (0..cfg.threads).map(|_| Vec::new()).collect();
    // Packet mode: one connected socket per flow, flow i on thread i mod threads.
    let n = match cfg.protocol {
        crate::protocol::Protocol::UdpFlow { flows, .. } => flows,
        _ => cfg.conns,
    };
    for i in 0..n {
        let s = open(cfg, &cfg.targets[i % cfg.targets.len()])?;
        per_thread[i % cfg.threads].push(s);
    }
    if let Some(p) = cfg.probe {
        let mut mine = Vec::new();
        for i in 0..p.conns {
            let s = open(cfg, &cfg.targets[i % cfg.targets.len()])?;
            // Busy polling of the socket's device queue, where the driver has one (not lo or
            // veth); refused without CAP_NET_ADMIN: the probe spins on its sockets either way.
            let _ = socket::set_busy_poll(s.fd(), PROBE_BUSY_POLL_US);
            mine.push(s);
        }
        per_thread.push(mine);
    }
    Ok(per_thread)
}

impl Engine {
    /// Connect every connection (failing fast with a clear message), then start the threads.
    pub fn start(cfg: EngineConfig) -> Result<Engine, EngineError> {
        cfg.validate()?;
        let nic = match cfg.timestamps {
            Timestamps::Nic => Some(Arc::new(nic_stamping(&cfg.targets)?)),
            _ => None,
        };
        let per_thread = connect_all(&cfg)?;
        if cfg.timestamps == Timestamps::Kernel {
            // The connections asked for stamps: wait for the kernel to take them before the
            // schedule starts, so that the first replies are stamped too (stamp/enable.rs).
            stamp::await_rx_stamping(100_000_000);
        }
        let start_ns = (crate::time::clock::now_ns() + START_DELAY_NS).max(cfg.start_at_ns.unwrap_or(0));
        let shared = Arc::new(Shared::new(per_thread.len(), start_ns));
        let cpus = cpu::allowed_cpus();
        let mut handles = Vec::new();
        for (t, streams) in per_thread.into_iter().enumerate() {
            // Engine threads take CPUs from the top, the synthetic server's workers from the bottom.
            let cpu = if cfg.pin && !cpus.is_empty() { Some(cpus[cpus.len() - 1 - (t % cpus.len())]) } else { None };
            let (role, thread_cfg) = match cfg.probe {
                Some(p) if t == cfg.threads => (Role::Probe, probe_config(&cfg, p)),
                Some(_) => (Role::Load, cfg.clone()),
                None if cfg.timed => (Role::Measure, cfg.clone()),
                None => (Role::Load, cfg.clone()),
            };
            let ctx = thread::ThreadCtx {
                index: t,
                streams,
                cfg: thread_cfg,
                role,
                start_ns,
                cpu,
                shared: shared.clone(),
                nic: nic.clone(),
            };
            let h = std::thread::Builder::new()
                .name(format!("tw-engine-{t}"))
                .spawn(move || if ctx.cfg.protocol.is_packet() { crate::packet::thread::run(ctx) } else { thread::run(ctx) })
                .map_err(EngineError::Spawn)?;
            handles.push(h);
        }
        Ok(Engine { shared, handles, start_ns, duration_ns: cfg.duration_ns, _nic: nic })
    }

    /// Ask the threads to stop early (e.g. on Ctrl-C); `join` still returns what was measured.
    pub fn stop(&self) {
        self.shared.stop.store(true, Relaxed);
    }

    /// Hold the schedule: from the threads' next iteration no request falls due, while they go on
    /// sending what was due and reading replies. The coordinator pauses while it computes on a
    /// machine without a CPU of its own, so that its work delays no request.
    pub fn pause(&self) {
        self.shared.paused.store(true, SeqCst);
    }

    /// Go on with the schedule, every time still to come moved by the length of the pause.
    pub fn resume(&self) {
        self.shared.paused.store(false, SeqCst);
    }

    /// Requests sent and not yet answered (or timed out), all threads.
    pub fn in_flight(&self) -> u64 {
        self.shared
            .progress
            .iter()
            .map(|p| {
                let sent = p.sent.load(Relaxed);
                sent.saturating_sub(p.received.load(Relaxed) + p.errors.load(Relaxed) + p.timeouts.load(Relaxed))
            })
            .sum()
    }

    pub fn is_finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot {
            elapsed_ns: crate::time::clock::now_ns().saturating_sub(self.start_ns).min(self.duration_ns),
            ..Default::default()
        };
        for p in &self.shared.progress {
            s.intended += p.intended.load(Relaxed);
            s.sent += p.sent.load(Relaxed);
            s.late += p.late.load(Relaxed);
            s.received += p.received.load(Relaxed);
            s.errors += p.errors.load(Relaxed);
            s.timeouts += p.timeouts.load(Relaxed);
            s.never_sent += p.never_sent.load(Relaxed);
            s.reconnects += p.reconnects.load(Relaxed);
            s.received_in_window += p.received_in_window.load(Relaxed);
        }
        s
    }

    /// Ask every thread for a snapshot and wait (up to `wait_ns`) until each has served it: the
    /// samples finished since the last take, what is outstanding now (censored), and the interval
    /// histograms up to now (in [`Engine::intervals`]). `join` returns what was never taken.
    pub fn take(&self, wait_ns: u64) -> Taken {
        self.take_snapshot(wait_ns, true)
    }

    /// As [`Engine::take`], without what is outstanding: no pending rows and no pending interval
    /// histograms (`Intervals::pending` is left empty). For a caller that keeps only the finished
    /// rows (an agent's keeper: agents/held.py `Held`): a thread far behind has up to a ring of
    /// packets outstanding, which it would otherwise censor into rows at every snapshot.
    pub fn take_finished(&self, wait_ns: u64) -> Taken {
        self.take_snapshot(wait_ns, false)
    }

    fn take_snapshot(&self, wait_ns: u64, with_pending: bool) -> Taken {
        let sh = &self.shared;
        let seq = {
            // Under both locks, so that no thread adds to the old snapshot's pending after this.
            let mut pend = sh.pending.lock().unwrap();
            let mut iv = sh.intervals.lock().unwrap();
            let seq = sh.snap_seq.load(SeqCst) + 1;
            pend.0 = seq;
            pend.1.clear();
            iv.pending_seq = seq;
            iv.pending.clear();
            sh.snap_pending.store(with_pending, SeqCst);
            sh.snap_seq.store(seq, SeqCst);
            seq
        };
        let deadline = crate::time::clock::now_ns() + wait_ns;
        let served = |p: &Progress| p.snap_seq.load(SeqCst) >= seq || p.done.load(SeqCst);
        let complete = loop {
            if sh.progress.iter().all(served) {
                break true;
            }
            if crate::time::clock::now_ns() >= deadline {
                break false;
            }
            std::thread::sleep(Duration::from_micros(50));
        };
        let snap_ns = sh
            .progress
            .iter()
            .filter(|p| p.snap_seq.load(SeqCst) >= seq && !p.done.load(SeqCst))
            .map(|p| p.snap_ns.load(SeqCst))
            .min()
            .unwrap_or_else(|| crate::time::clock::now_ns().saturating_sub(self.start_ns));
        // The counters as of each thread's snapshot (a finished thread's final ones).
        let mut counters = Snapshot { elapsed_ns: snap_ns, ..Default::default() };
        for p in &sh.progress {
            counters.add(&p.at_snapshot.lock().unwrap());
        }
        let mut pending = std::mem::take(&mut sh.pending.lock().unwrap().1);
        // Every thread has handed over: the old finished intervals are encoded (memory bounded
        // in the run's length, record/interval.rs), here in the caller's thread.
        sh.intervals.lock().unwrap().seal(SEAL_BEHIND);
        // Read after the pending rows: a thread hands its samples (and their level) over first.
        let (samples, thinned_level) = self.take_harvest();
        if thinned_level > 0 {
            let base = sh.thin_base.load(SeqCst);
            pending.retain(|s| thin::keeps(s, thinned_level, base));
        }
        Taken { samples, pending, snap_ns, complete, counters, thinned_level }
    }

    /// Everything finished since the last take, as one store (compacted here, in the caller's
    /// thread, never in a timing loop), and the level it is thinned to: the highest of the
    /// threads' (the levels nest: a row kept at a level is kept at every lower one, so the rows of
    /// a lower level are thinned to it here).
    fn take_harvest(&self) -> (SampleStore, u32) {
        let Harvest { batches, level } = std::mem::take(&mut *self.shared.harvest.lock().unwrap());
        let base = self.shared.thin_base.load(SeqCst);
        let mut out = SampleStore::default();
        for b in batches {
            for s in b.iter().filter(|s| thin::keeps(s, level, base)) {
                out.push(*s);
            }
        }
        (out, level)
    }

    /// From now on, a thread that gathers more than `max_rows` (shared among the threads) of
    /// samples between two hand-overs thins them by the statistics' own keys (record/thin.rs;
    /// each row's source its thread + `source_base`), a level more each time it passes the bound
    /// again; the level is reset at each snapshot it serves. Each take says the level its rows
    /// were thinned to (`Taken::thinned_level`). For an agent, whose rows its keeper bounds in
    /// the same way (agents/held.py `Held`): a thread far behind its schedule ends millions of
    /// requests at once (never sent) between two of its takes. Taken from each thread's next
    /// snapshot on.
    pub fn thin_rows(&self, max_rows: usize, source_base: u64) {
        let sh = &self.shared;
        sh.thin_base.store(source_base, SeqCst);
        sh.thin_bound.store((max_rows / sh.progress.len().max(1)).max(1), SeqCst);
    }

    /// The samples finished since the last call (a snapshot: see [`Engine::take`]).
    pub fn take_samples(&self) -> SampleStore {
        self.take(1_000_000_000).samples
    }

    /// The every-request interval histograms, shared with the threads (they add to them at each
    /// snapshot and at their end); they outlive the engine.
    pub fn intervals(&self) -> Arc<Mutex<Intervals>> {
        self.shared.intervals.clone()
    }

    /// Packet mode: every thread's packet counts by interval of intended time, as of the latest
    /// snapshot (all of them after `join`), shared with the threads; they outlive the engine.
    pub fn packets(&self) -> Arc<Mutex<PacketIntervals>> {
        self.shared.packets.clone()
    }

    /// `(index, sent, received, lost, reordered, duplicates)` per 100 ms interval (empty for
    /// protocols other than udp+flow).
    pub fn packet_intervals(&self) -> Vec<(u64, u64, u64, u64, u64, u64)> {
        self.shared.packets.lock().unwrap().rows()
    }

    /// Stalls of the engine threads (≥ `stall::MASK_STALL_NS`) logged since the last call, as
    /// (start, end) on CLOCK_MONOTONIC; `join` returns the rest.
    pub fn take_stalls(&self) -> Vec<(u64, u64)> {
        self.shared.stall_log.take()
    }

    /// The schedule's time zero on CLOCK_MONOTONIC (sample times are relative to it).
    pub fn start_mono_ns(&self) -> u64 {
        self.start_ns
    }

    /// Wait for the threads and merge their recorders. `samples` holds those not yet taken.
    pub fn join(mut self) -> EngineResult {
        let mut out = EngineResult {
            start_mono_ns: self.start_ns,
            elapsed_ns: 0,
            counters: Counters::default(),
            received_in_window: 0,
            hist: Histograms::new(),
            stalls: 0,
            stalled_ns: 0,
            stall_intervals: Vec::new(),
            samples: SampleStore::default(),
            error: None,
            error_reasons: Vec::new(),
            pinned_cpus: Vec::new(),
            cpu_ns: 0,
            preemptions: 0,
            sample_bytes: 0,
            probe_counters: None,
            thinned_level: 0,
        };
        for h in std::mem::take(&mut self.handles) {
            let r = match h.join() {
                Ok(r) => r,
                Err(_) => {
                    self.shared.abort(Abort::Panicked);
                    continue;
                }
            };
            out.counters.add(&r.counters);
            if r.role == Role::Probe {
                out.probe_counters = Some(r.counters);
            }
            out.received_in_window += r.received_in_window;
            out.hist.add(&r.hist);
            out.stalls += r.stalls;
            out.stalled_ns += r.stalled_ns;
            out.elapsed_ns = out.elapsed_ns.max(r.elapsed_ns);
            out.pinned_cpus.push(r.pinned_cpu);
            out.cpu_ns += r.cpu_ns;
            out.preemptions += r.preemptions;
            for (reason, n) in r.error_reasons {
                count_reason(&mut out.error_reasons, reason, n);
            }
        }
        (out.samples, out.thinned_level) = self.take_harvest();
        out.stall_intervals = self.take_stalls();
        // Everything is finished now: what was outstanding at the last snapshot is in `done`.
        let mut iv = self.shared.intervals.lock().unwrap();
        iv.pending.clear();
        iv.pending_seq = u64::MAX;
        drop(iv);
        out.error = self.shared.abort.lock().unwrap().take();
        out.sample_bytes = out.samples.allocated_bytes();
        out
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod stamp_tests;
