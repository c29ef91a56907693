//! The request path: a request/reply protocol over the thread's connections (TCP streams, or UDP
//! sockets connected to the target). A request due waits in a FIFO backlog until a connection has
//! a free slot (fewer than `outstanding` in flight), is encoded there and written with the
//! connection's other new requests in one write (io.rs); replies are matched to their requests
//! (stream: FIFO; datagram: by id); every millisecond timeouts and reconnections (recover.rs).

use super::config::EngineConfig;
use super::conn::{Conn, State};
use super::connect::Sock;
use super::req::{Req, SlotWait, Times};
use super::setup::Setup;
use super::thread::{Path, Worker, MAX_WAIT_NS};
use crate::io::poll::{Epoll, EPOLLIN};
use crate::load::workload::{Op, OpGen, MAX_KEY};
use crate::protocol::http::Drawer;
use crate::record::flags as F;
use crate::time::wake::WakeLateness;
use std::collections::VecDeque;

/// Requests waiting for a free connection slot, at most; beyond, a due request is never sent (and
/// counted so) rather than growing memory without bound when the target cannot keep up.
const MAX_BACKLOG: usize = 1 << 20;

/// The request path's state: connections, backlog, and what the loop keeps for them.
pub(crate) struct Requests {
    pub(super) conns: Vec<Conn>,
    pub(super) datagram: bool,
    /// The protocol sends keys: draw each request from the workload.
    pub(super) keyed: bool,
    pub(super) gen: OpGen,
    /// Which of the protocol's requests each one is (HTTP's several; else always the one).
    pub(super) draw: Drawer,
    pub(super) key: Vec<u8>,
    pub(super) ep: Epoll,
    pub(super) rr: usize,
    pub(super) next_id: u64,
    pub(super) backlog: VecDeque<Req>,
    /// Requests in `backlog` flagged `ENGINE_STALL`: one due while any waits there is delayed by it.
    pub(super) backlog_delayed: usize,
    /// Requests on the connections (ghosts too), so that idleness needs no scan.
    pub(super) flights: usize,
    /// When the backlog waited for the target to free a slot.
    pub(super) slots: SlotWait,
    pub(super) dirty: Vec<usize>,
    pub(super) ready: Vec<(usize, u32)>,
    /// When the current iteration's wait returned (blocking mode).
    pub(super) polled_at: u64,
    /// The thread slept with the replies left for later (io.rs, `read_then_sleep`) and has not read since.
    pub(super) unread: bool,
    /// Blocking mode: how late this thread's timed waits wake (time/wake.rs), so how early to ask.
    pub(super) wake: WakeLateness,
    /// What a reconnect says first (setup.rs), encoded once.
    pub(super) setup: Option<Setup>,
}

impl Path for Requests {
    /// Never inside `fall_due`: the backlog is bounded (`MAX_BACKLOG`).
    const SERVE_EVERY: u32 = 0;
    const PACKET_HISTOGRAM: bool = false;

    fn new(streams: Vec<Sock>, cfg: &EngineConfig, _index: usize, seed: u64) -> Requests {
        let n = streams.len();
        let conns: Vec<Conn> = streams.into_iter().map(|s| Conn::new(s, cfg.protocol.codec(), cfg.outstanding)).collect();
        let ep = Epoll::new(n.max(1) * 2).expect("epoll_create1");
        for (i, c) in conns.iter().enumerate() {
            ep.add(c.fd, EPOLLIN, i as u64).expect("epoll_ctl add");
        }
        Requests {
            conns,
            datagram: cfg.protocol.is_datagram(),
            keyed: cfg.protocol.has_keys(),
            gen: OpGen::new(cfg.workload.clone(), seed ^ 0xC0FF_EE00),
            draw: cfg.protocol.drawer(seed ^ 0xD8A3_0000),
            key: Vec::with_capacity(MAX_KEY),
            ep,
            rr: 0,
            next_id: 0,
            backlog: VecDeque::new(),
            backlog_delayed: 0,
            flights: 0,
            slots: SlotWait::default(),
            dirty: Vec::with_capacity(n),
            ready: Vec::with_capacity(n.max(1) * 2),
            polled_at: 0,
            unread: false,
            wake: WakeLateness::default(),
            setup: Setup::of(&cfg.protocol),
        }
    }

    #[inline]
    fn queue(w: &mut Worker<Requests>, intended: u64, busy_from: u64, flags: u32) -> Result<(), Req> {
        let p = &mut w.path;
        let op = if p.keyed { p.gen.next_op() } else { Op { request: p.draw.next_request(), ..Op::KEYLESS } };
        let req = Req::new(intended, busy_from, op, flags);
        if p.backlog.len() < MAX_BACKLOG {
            p.backlog_delayed += (flags & F::ENGINE_STALL != 0) as usize;
            p.backlog.push_back(req);
            Ok(())
        } else {
            Err(req)
        }
    }

    #[inline]
    fn delayed(&self) -> bool {
        self.backlog_delayed > 0
    }

    #[inline]
    fn send(w: &mut Worker<Requests>) {
        if !w.path.backlog.is_empty() {
            w.dispatch();
            w.flush_dirty();
        }
    }

    /// While paused with nothing to send, block (and leave the CPU to the coordinator); spinning
    /// or with a request ready to go, not at all; else until the next send less this thread's
    /// measured wake-up lateness (`wake`), spinning the rest. A reply wakes the thread late at no
    /// cost to its latency where it has a kernel receive stamp.
    #[inline]
    fn wait_ns(w: &mut Worker<Requests>, paused: bool, wake: u64) -> u64 {
        if paused && w.path.backlog.is_empty() {
            MAX_WAIT_NS
        } else if w.cfg.busy_poll || (!w.path.backlog.is_empty() && w.has_free_slot()) {
            0
        } else {
            wake.saturating_sub(w.watch.now() + w.path.wake.early_ns()).min(MAX_WAIT_NS)
        }
    }

    #[inline]
    fn poll(w: &mut Worker<Requests>, wait_ns: u64, next_due: u64) {
        w.poll_conns(wait_ns, next_due);
    }

    /// Replies left for after the next send (io.rs, `read_then_sleep`) are read now.
    fn settle(w: &mut Worker<Requests>) {
        if w.cfg.replies_wait && !w.cfg.busy_poll {
            w.poll_conns(0, u64::MAX);
        }
    }

    fn tick(w: &mut Worker<Requests>, now: u64) {
        w.tick_conns(now);
    }

    /// Nothing on the connections (ghosts included) and nothing in the backlog.
    #[inline]
    fn idle(&self) -> bool {
        debug_assert_eq!(self.flights, self.conns.iter().map(|c| c.inflight.len()).sum::<usize>());
        self.flights == 0 && self.backlog.is_empty()
    }

    /// No request outstanding (ghosts aside), or no connection left alive.
    fn drained(&mut self, _now: u64) -> bool {
        let outstanding = self.conns.iter().any(|c| c.inflight.iter().any(|f| !f.ghost)) || !self.backlog.is_empty();
        !outstanding || !self.conns.iter().any(|c| c.state != State::Dead)
    }

    fn end(w: &mut Worker<Requests>, now: u64) {
        for c in w.path.conns.iter_mut() {
            c.unsent = 0;
            for f in c.inflight.drain(..).filter(|f| !f.ghost) {
                w.fin.censor_flight(f, now);
            }
        }
        w.path.flights = 0;
        while let Some(r) = w.pop_backlog() {
            w.fin.censor_waiting(r, now, false);
        }
    }

    /// In flight (ghosts aside), then the backlog.
    fn outstanding(&self) -> impl Iterator<Item = (Req, Times)> + '_ {
        let flights = self.conns.iter().flat_map(|c| &c.inflight).filter(|f| !f.ghost).map(|f| (f.req, f.times()));
        flights.chain(self.backlog.iter().map(|r| (*r, Times::default())))
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn sent_since(&self, t: u64) -> bool {
        self.conns.iter().any(|c| c.inflight.iter().any(|f| f.sent > 0 && f.sent >= t))
    }
}
