//! The engine as its caller drives it: `Engine::start` connects and spawns the threads (each
//! the timing loop of thread.rs on the request path or the packet path), `take` asks them for
//! a snapshot, `pause`/`resume` hold the schedule, `stop` and `join` end the run and merge what
//! every thread measured.

use super::config::{EngineConfig, Probe, Timestamps};
use super::connect::{connect_all, nic_stamping};
use super::problem::{Abort, EngineError};
use super::requests::Requests;
use super::shared::{count_reason, Counters, Harvest, Progress, Role, Shared, Snapshot};
use super::tls::{Client, TlsStats};
use super::thread::{run, ThreadCtx, ThreadResult};
use crate::io::cpu;
use crate::load::schedule::Arrival;
use crate::packet::{PacketIntervals, Packets};
use crate::record::histogram::Histograms;
use crate::record::interval::{Intervals, SEAL_BEHIND};
use crate::record::sample::{Sample, SampleStore};
use crate::record::thin;
use crate::stamp;
use crate::stamp::nic::NicStamping;
use std::sync::atomic::{Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

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
    /// Voluntary context switches of the engine threads: the times they slept (`--poll block`, `lean`).
    pub sleeps: u64,
    /// The probe thread's own counters (also in `counters`), when there is a probe.
    pub probe_counters: Option<Counters>,
    /// The level `samples` were thinned to (as `Taken::thinned_level`).
    pub thinned_level: u32,
    /// With TLS: every handshake of the run (None: plaintext).
    pub tls: Option<TlsStats>,
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
    /// With TLS: the handshakes so far, every one since the start (None: plaintext).
    pub tls: Option<TlsStats>,
}

pub struct Engine {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<ThreadResult>>,
    start_ns: u64,
    duration_ns: u64,
    /// With `Timestamps::Nic`: the interface stamping every packet until the engine is dropped.
    _nic: Option<Arc<NicStamping>>,
}

/// Time between connecting and the first intended send, so that every thread is pinned and
/// spinning before the schedule starts.
const START_DELAY_NS: u64 = 5_000_000;

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

impl Engine {
    /// Connect every connection (failing fast with a clear message), then start the threads.
    pub fn start(cfg: EngineConfig) -> Result<Engine, EngineError> {
        cfg.validate()?;
        let nic = match cfg.timestamps {
            Timestamps::Nic => Some(Arc::new(nic_stamping(&cfg.targets)?)),
            _ => None,
        };
        // Files read and refused before any connect.
        let tls = cfg.tls.as_ref().map(Client::build).transpose().map_err(EngineError::Tls)?.map(Arc::new);
        let per_thread = connect_all(&cfg, tls.as_deref())?;
        if cfg.timestamps == Timestamps::Kernel {
            // The connections asked for stamps: wait for the kernel to take them before the
            // schedule starts, so that the first replies are stamped too (stamp/enable.rs).
            stamp::await_rx_stamping(100_000_000);
        }
        let start_ns = (crate::time::clock::now_ns() + START_DELAY_NS).max(cfg.start_at_ns.unwrap_or(0));
        let shared = Arc::new(Shared { tls, ..Shared::new(per_thread.len(), start_ns) });
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
            let ctx = ThreadCtx {
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
                .spawn(move || if ctx.cfg.protocol.is_packet() { run::<Packets>(ctx) } else { run::<Requests>(ctx) })
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
        let tls = sh.tls.as_ref().map(|c| c.stats());
        Taken { samples, pending, snap_ns, complete, counters, thinned_level, tls }
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
            sleeps: 0,
            sample_bytes: 0,
            probe_counters: None,
            thinned_level: 0,
            tls: None,
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
            out.cpu_ns += r.used.cpu_ns;
            out.preemptions += r.used.preemptions;
            out.sleeps += r.used.sleeps;
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
        out.tls = self.shared.tls.as_ref().map(|c| c.stats());
        out
    }
}
