//! The packet path (`Worker<Packets>`, the loop of engine/thread.rs): each packet due (the
//! schedule's intended times, the thread's flows in turn) is queued on its flow with the next
//! seq; every iteration sends all that is queued with one sendmmsg per flow (send.rs), and reads
//! what came back with recvmmsg (answer.rs). Every millisecond the flows' rings are scanned from
//! their oldest packet for timeouts: a packet unanswered `timeout` after its intended time is lost,
//! censored at the time it waited. After the schedule the drain waits for the rest (a timeout at
//! most, 50 ms when the run was stopped); what is still out then is lost too. So at the end
//! `sent` = `received` + `lost`, each packet counted once.
//!
//! Snapshots, pauses, stalls and the target's reachability are the loop's (engine/thread.rs), as
//! are the whole-run and interval histograms and the samples.

use super::batch::{Batch, BATCH};
use super::flows::{ring_len, Flow, Slot, State};
use super::{PacketCounts, LOST};
use crate::engine::req::{Flight, Req, Times};
use crate::engine::thread::{Path, Worker, MAX_WAIT_NS};
use crate::engine::{EngineConfig, Shared, Sock};
use crate::io::poll::{Epoll, EPOLLIN};
use crate::load::workload::Op;
use crate::protocol::flow;

/// Spin this long before a send in blocking mode.
const SPIN_NS: u64 = 50_000;
/// Once every packet is done, the drain reads on this long: a duplicate sent right behind the
/// last answer is still counted.
const LINGER_NS: u64 = 5_000_000;
/// A thread far behind its schedule queues (or finds the ring full for) millions of packets in
/// one `fall_due` and sends for seconds in one `send_queued`: it serves a snapshot asked meanwhile
/// after this many packets queued, and between two batches sent, not only once the iteration is
/// over — otherwise the rows it finishes gather in it until then (issue 33: hundreds of MiB at an
/// offered rate far above what the machine sends) and the snapshot comes too late for its taker.
const SERVE_EVERY: u32 = 1024;

/// The packet path's state: the thread's flows and the buffers of its system calls.
pub(crate) struct Packets {
    pub flows: Vec<Flow>,
    /// The flow the next packet due goes to (the thread's flows in turn).
    rr: usize,
    ep: Epoll,
    ready: Vec<usize>,
    pub out: Batch,
    pub inb: Batch,
    pub counts: PacketCounts,
    /// Packets never sent because their flow's ring was full, not yet in the error reasons.
    ring_full: u64,
    /// Packets queued or out on the flows, so that idleness needs no scan.
    pub outstanding: u64,
    /// The drain: since when every packet is done.
    idle_since: Option<u64>,
}

impl Path for Packets {
    const SERVE_EVERY: u32 = SERVE_EVERY;
    const PACKET_HISTOGRAM: bool = true;

    fn new(streams: Vec<Sock>, cfg: &EngineConfig, index: usize, _seed: u64) -> Packets {
        let crate::protocol::Protocol::UdpFlow { size, flows: all } = cfg.protocol else {
            unreachable!("the packet path runs udp+flow only")
        };
        let threads = cfg.threads;
        let mine = streams.len().max(1);
        let len = ring_len(cfg.rate_rps / threads as f64 / mine as f64, cfg.timeout_ns, all);
        let ipv6 = cfg.targets.first().is_some_and(|a| a.is_ipv6());
        let payload = flow::payload_len(size, ipv6);
        // Flow i of the run is thread (i mod threads)'s (engine/connect.rs, `connect_all`).
        let flows: Vec<Flow> = streams
            .into_iter()
            .enumerate()
            .map(|(k, s)| match s {
                Sock::Udp(u) => Flow::new(u, (index + k * threads).min(all - 1) as u16, len),
                Sock::Tcp(_) | Sock::Tls { .. } => unreachable!("packet flows are UDP sockets"),
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
        Packets {
            ready: Vec::with_capacity(flows.len() * 2),
            flows,
            rr: 0,
            ep,
            out,
            // Room for a longer answer than asked: only its header is read.
            inb: Batch::new(payload.max(64)),
            counts: PacketCounts::new(cfg.duration_ns, cfg.timeout_ns),
            ring_full: 0,
            outstanding: 0,
            idle_since: None,
        }
    }

    /// Queued on the next flow in turn (never sent if its ring is full).
    #[inline]
    fn queue(w: &mut Worker<Packets>, intended: u64, busy_from: u64, flags: u32) -> Result<(), Req> {
        let p = &mut w.path;
        let f = p.rr;
        p.rr = (p.rr + 1) % p.flows.len();
        if p.flows[f].push(intended, busy_from, flags).is_some() {
            p.outstanding += 1;
            Ok(())
        } else {
            p.ring_full += 1; // in the error reasons at the next tick: no text per packet here
            Err(Req::new(intended, busy_from, Op::KEYLESS, flags))
        }
    }

    /// A packet waits on its own flow, behind none of another's.
    #[inline]
    fn delayed(&self) -> bool {
        false
    }

    #[inline]
    fn send(w: &mut Worker<Packets>) {
        w.send_queued();
    }

    /// Spinning, or with packets queued (a send that would have blocked), not at all; else until
    /// the next send less `SPIN_NS`, spinning the rest.
    #[inline]
    fn wait_ns(w: &mut Worker<Packets>, paused: bool, wake: u64) -> u64 {
        if w.cfg.busy_poll || !paused && w.path.queued() {
            0
        } else {
            wake.saturating_sub(w.watch.now() + SPIN_NS).min(MAX_WAIT_NS)
        }
    }

    /// Wait for datagrams and read them, flow by flow, but return once a send falls due.
    fn poll(w: &mut Worker<Packets>, wait_ns: u64, next_due: u64) {
        let mut ready = std::mem::take(&mut w.path.ready);
        ready.clear();
        w.watch.plan_wait(wait_ns);
        let waited = w.path.ep.wait(wait_ns);
        w.watch.now();
        match waited {
            Ok(evs) => ready.extend(evs.iter().map(|e| e.u64 as usize)),
            Err(e) => w.shared.abort(crate::engine::Abort::Epoll(e)),
        }
        for (n, &i) in ready.iter().enumerate() {
            if n > 0 && w.watch.now() >= next_due {
                break;
            }
            w.read_flow(i);
        }
        w.path.ready = ready;
    }

    /// Packets past their timeout are lost (queued ones never sent).
    fn tick(w: &mut Worker<Packets>, now: u64) {
        let timeout = w.cfg.timeout_ns;
        w.end_flows(now.saturating_sub(timeout), now);
        w.note_ring_full();
    }

    #[inline]
    fn idle(&self) -> bool {
        debug_assert_eq!(self.outstanding == 0, self.flows.iter().all(Flow::idle));
        self.outstanding == 0
    }

    /// Every packet done for `LINGER_NS` (a duplicate behind the last answer still counted).
    fn drained(&mut self, now: u64) -> bool {
        if self.flows.iter().all(Flow::idle) {
            self.idle_since = self.idle_since.or(Some(now));
        }
        self.idle_since.is_some_and(|t| now - t >= LINGER_NS)
    }

    /// What is still out is lost, and stays outstanding for good (the thread stays busy).
    fn end(w: &mut Worker<Packets>, now: u64) {
        w.end_flows(u64::MAX, now);
        w.note_ring_full();
    }

    /// The packets not done (censored at the time they have waited, at a snapshot).
    fn outstanding(&self) -> impl Iterator<Item = (Req, Times)> + '_ {
        self.flows.iter().flat_map(|f| f.outstanding()).map(|s| {
            (Req::new(s.intended, s.busy_from, Op::KEYLESS, s.flags), Times { sent: s.sent, tx: 0, rx_user: 0 })
        })
    }

    /// The packet counts, to the shared state.
    fn hand_over(&mut self, shared: &Shared) {
        self.counts.hand_over(&mut shared.packets.lock().unwrap());
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn sent_since(&self, t: u64) -> bool {
        self.flows.iter().flat_map(|f| f.outstanding()).any(|s| s.state == State::Out && s.sent >= t)
    }
}

impl Packets {
    fn queued(&self) -> bool {
        self.flows.iter().any(|f| f.queued() > 0)
    }
}

impl Worker<Packets> {
    /// The packets never sent for a full ring, in the error reasons (one text per tick, not per packet).
    fn note_ring_full(&mut self) {
        if self.path.ring_full > 0 {
            let why = "not sent: the flow already had as many packets outstanding as it tracks".to_string();
            self.fin.note_n(why, std::mem::take(&mut self.path.ring_full));
        }
    }

    /// End every packet intended before `before`, censored at `now`: one sent is lost (a timeout
    /// when past its timeout, else unfinished: the run ends), one queued is never sent.
    fn end_flows(&mut self, before: u64, now: u64) {
        let (fin, t0) = (&mut self.fin, self.t0);
        let Packets { flows, counts, outstanding, .. } = &mut self.path;
        for f in flows.iter_mut() {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::thread::ThreadCtx;
    use crate::engine::Role;
    use crate::load::schedule::{Arrival, Schedule};
    use crate::protocol::Protocol;
    use std::net::UdpSocket;
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;

    type PacketWorker = Worker<Packets>;

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
