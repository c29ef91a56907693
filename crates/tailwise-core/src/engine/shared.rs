//! What an engine's threads and its caller share: the stop, pause and snapshot flags, each
//! thread's live counters (`Progress`), the samples and interval histograms handed over
//! (`Harvest`, `Shared::pending`, `Shared::intervals`), the stall log, the packet counts and the
//! client's idle instants (busy.rs); a thread's `Role`; the request `Counters`.

use super::busy;
use super::problem::Abort;
use super::tls;
use crate::packet::PacketIntervals;
use crate::record::interval::Intervals;
use crate::record::sample::{Sample, SampleStore};
use crate::time::stall::StallLog;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

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
    pub(super) fn add(&mut self, o: &Counters) {
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
    /// With TLS: the engine's one client configuration (its session store) and handshake counts.
    pub tls: Option<Arc<tls::Client>>,
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
            tls: None,
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
    pub(super) fn add(&mut self, o: &Snapshot) {
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

/// Add `n` occurrences of `reason` to a list of distinct reasons with their counts.
pub fn count_reason(reasons: &mut Vec<(String, u64)>, reason: String, n: u64) {
    match reasons.iter_mut().find(|(r, _)| *r == reason) {
        Some(e) => e.1 += n,
        None => reasons.push((reason, n)),
    }
}
