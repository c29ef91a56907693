//! The request path's I/O: backlog entries handed to connections with a free slot, one write per
//! connection (one datagram per request), replies read and matched (stream: FIFO; datagram: by
//! id), receive stamps converted to CLOCK_MONOTONIC and transmit stamps matched (tx_stamps.rs).

use super::conn::{State, READ_CHUNK};
use super::problem::{Abort, Failure, Killed, Lost};
use super::req::{Flight, Req, Times};
use super::requests::Requests;
use super::shared::Role;
use super::thread::Worker;
use super::tls;
use crate::io::poll::{EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT};
use crate::io::socket;
use crate::load::workload::value_bytes;
use crate::protocol::{Outcome, Parsed, Request};
use crate::record::flags as F;
use crate::stamp::{self, StampClock};
use std::io;
use std::os::fd::RawFd;

/// A connection's read buffer never grows past this, whatever the server sends: the longest reply
/// a codec accepts plus one read.
const MAX_READ_BUF: usize = crate::protocol::MAX_REPLY + READ_CHUNK;
/// Largest UDP datagram.
const MAX_DATAGRAM: usize = 65_536;
/// A timed wait this long or longer (the loop's longest, 1 ms) ends on a grid of this period.
const WAIT_GRID_NS: u64 = 1_000_000;
/// The margin before a send is used for the replies only while it holds this much: a stamped
/// read of one reply (recvmsg, parse, record) takes 2–4 µs on loopback here.
const READ_BUDGET_NS: u64 = 5_000;

/// The instant a wait of `wait_ns` from `now` ends: as asked, or at the cap on its grid, so that the
/// instant stays steady across iterations (io/poll.rs re-arms its timer only when it moves).
#[inline]
fn wake_at(now: u64, wait_ns: u64) -> u64 {
    if wait_ns >= WAIT_GRID_NS { (now + wait_ns) / WAIT_GRID_NS * WAIT_GRID_NS } else { now + wait_ns }
}

/// One non-blocking read of a connection, with its receive stamp on `stamps` when asked for one.
#[inline]
fn read(stamps: Option<StampClock>, fd: RawFd, buf: &mut [u8]) -> (io::Result<usize>, Option<u64>) {
    let Some(clock) = stamps else {
        return (socket::read(fd, buf), None);
    };
    match stamp::read_stamped(fd, buf, clock) {
        Ok((n, stamp)) => (Ok(n), stamp),
        Err(e) => (Err(e), None),
    }
}

impl Worker<Requests> {
    #[inline]
    pub(super) fn has_free_slot(&self) -> bool {
        self.path.conns.iter().any(|c| c.up() && c.inflight.len() < self.cfg.outstanding)
    }

    /// A slot freed at `t` (a reply, a timeout, a reconnect) ends the wait of a blocked backlog.
    /// `t` is the kernel's receive stamp (`exact`), or a clock read of this thread's: then a
    /// stall of the thread since it last polled before the backlog blocked may have hidden the
    /// slot's freeing, which is taken at the stall's start — the stall is the client's, never a
    /// wait for the target.
    #[inline]
    pub(super) fn slot_freed(&mut self, t: u64, exact: bool) {
        if self.path.backlog.is_empty() {
            return;
        }
        let since = self.path.slots.blocked_at;
        // The first stall not yet taken that ended after the block (kept apart from later ones: a
        // wait that began at one's end was held until the next began at least).
        let stalled = self.watch.fresh_since(since);
        let t = match self.stalls.first_since(since).or(stalled) {
            Some(a) if !exact => t.min(a),
            _ => t,
        };
        self.path.slots.freed(t);
    }

    /// Whether the replies can wait for the next send's wake-up rather than wake the thread
    /// themselves (`--poll lean`): each one's time is its receive stamp, exact however late it is
    /// read — the kernel's or NIC's, on a datagram or on a connection with one request out (a read
    /// that takes two replies of a stream stamps both at the later's arrival). Not while anything
    /// waits on the connections: a backlog for a free slot, a connect, a handshake, a write.
    #[inline]
    pub(super) fn replies_can_wait(&self) -> bool {
        if self.cfg.busy_poll || !self.cfg.replies_wait || self.rx.clock.is_none() || !self.path.backlog.is_empty() {
            return false;
        }
        let datagram = self.path.datagram;
        self.path.conns.iter().all(|c| c.up() && !c.want_write && (datagram || c.inflight.len() <= 1))
    }

    /// Hand backlog entries to connections with a free slot, round-robin.
    pub(super) fn dispatch(&mut self) {
        let n = self.path.conns.len();
        let k = self.cfg.outstanding;
        while let Some(&req) = self.path.backlog.front() {
            let Some(i) = (0..n).map(|step| (self.path.rr + step) % n).find(|&i| self.path.conns[i].up() && self.path.conns[i].inflight.len() < k)
            else {
                // Every slot held or down: the backlog waits for the target.
                self.path.slots.blocked(self.path.backlog.back().map_or(0, |r| r.intended), self.path.polled_at);
                break;
            };
            let req = Req { slot_wait: self.path.slots.of(req.intended), ..req };
            self.path.rr = (i + 1) % n;
            let id = self.path.next_id;
            self.path.next_id += 1;
            let key: &[u8] = if self.path.keyed {
                self.path.gen.workload().write_key(req.op.key, &mut self.path.key);
                &self.path.key
            } else {
                b""
            };
            let c = &mut self.path.conns[i];
            let request = Request { id, kind: req.op.kind, key, value: value_bytes(req.op.value_len), request: req.op.request };
            match c.tls.as_deref_mut() {
                None => c.codec.encode(&request, &mut c.wbuf),
                // Encrypted at once: `wbuf` holds ciphertext, and the key below is the end of the
                // request's last encrypted byte, as the kernel counts the stream.
                Some(session) => {
                    c.tls_plain.clear();
                    c.codec.encode(&request, &mut c.tls_plain);
                    tls::encrypt(session, &c.tls_plain, &mut c.wbuf);
                }
            }
            let end = if self.path.datagram {
                c.dgram_ends.push_back(c.wbuf.len());
                c.tx.end_key(true, c.dgram_ends.len())
            } else {
                c.tx.end_key(false, c.wbuf.len())
            };
            c.inflight.push_back(Flight { req, id, sent: 0, end, tx: 0, ghost: false });
            self.path.flights += 1;
            c.unsent += 1;
            if !c.dirty {
                c.dirty = true;
                self.path.dirty.push(i);
            }
            self.pop_backlog();
        }
    }

    /// The backlog's oldest request, counted out of `backlog_delayed`.
    #[inline]
    pub(super) fn pop_backlog(&mut self) -> Option<Req> {
        let r = self.path.backlog.pop_front()?;
        self.path.backlog_delayed -= (r.flags & F::ENGINE_STALL != 0) as usize;
        Some(r)
    }

    /// One write per connection with new requests; stamp their send time.
    pub(super) fn flush_dirty(&mut self) {
        let mut written = 0u64;
        let t_start = self.watch.now();
        let (late_ns, last_stall_end) = (self.cfg.late_ns, self.stalls.last_end);
        for d in 0..self.path.dirty.len() {
            let i = self.path.dirty[d];
            let t = self.watch.now();
            let c = &mut self.path.conns[i];
            c.dirty = false;
            if !c.up() {
                continue;
            }
            let first = c.inflight.len() - c.unsent;
            for f in c.inflight.range_mut(first..) {
                f.sent = t;
                self.fin.sent(&f.req, t, late_ns, last_stall_end);
            }
            written += c.unsent as u64;
            c.unsent = 0;
            if let Err(e) = self.write_conn(i) {
                self.lost_conn(i, Lost::Send(e.into()));
            } else if self.rx.clock == Some(StampClock::Kernel) {
                // The kernel stamps a send as the device takes it, before `send` returns (lo, and a
                // NIC whose queue was empty): taken now, it costs no loop iteration woken by
                // EPOLLERR for it. A stamp not there yet comes that way.
                self.take_tx_stamps(i);
            }
        }
        self.path.dirty.clear();
        if written > 0 {
            let elapsed = self.watch.now() - t_start;
            self.stalls.sent(written, elapsed);
        }
        self.publish();
    }

    pub(super) fn write_conn(&mut self, i: usize) -> io::Result<()> {
        let datagram = self.path.datagram;
        let mut failed = None;
        let c = &mut self.path.conns[i];
        while c.wpos < c.wbuf.len() {
            // A datagram goes whole, one per request; a stream takes what fits.
            let end = if datagram { c.dgram_ends.front().copied().unwrap_or(c.wbuf.len()) } else { c.wbuf.len() };
            match socket::write(c.fd, &c.wbuf[c.wpos..end]) {
                Ok(n) if datagram => {
                    debug_assert_eq!(n, end - c.wpos);
                    c.wpos = end;
                    c.dgram_ends.pop_front();
                    c.tx.base += 1;
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
                    c.tx.ok = false;
                    failed = Some(Failure::SendDatagram { addr: c.addr, err: e.into() });
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(why) = failed {
            self.reach.failure(why);
        }
        self.written(i)
    }

    /// After a write: drop what was sent, and watch for writability while anything waits.
    fn written(&mut self, i: usize) -> io::Result<()> {
        let datagram = self.path.datagram;
        let c = &mut self.path.conns[i];
        let pending = c.wpos < c.wbuf.len();
        if !pending {
            if !datagram {
                c.tx.base += c.wbuf.len() as u64;
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
            self.path.ep.modify(c.fd, ev, i as u64)?;
        }
        Ok(())
    }

    /// Wait for events and serve them, but return as soon as a send falls due (`next_due`): the
    /// events not served are level-triggered and come back on the next poll, and a request due
    /// now must not wait behind the reads of other connections.
    pub(super) fn poll_conns(&mut self, wait_ns: u64, next_due: u64) {
        if next_due != u64::MAX && self.replies_can_wait() {
            if wait_ns > 0 {
                return self.read_then_sleep(wait_ns, next_due);
            }
            // The margin before a send, woken for it: the replies that came meanwhile are read in
            // it while it leaves room for one more read (else after the send), then the clock alone.
            if self.path.unread && self.watch.now() + READ_BUDGET_NS <= next_due {
                self.wait_and_serve(0, next_due - READ_BUDGET_NS);
                self.path.unread = false;
            }
            while self.watch.now() < next_due {
                std::hint::spin_loop();
            }
            return;
        }
        self.path.unread = false;
        self.wait_and_serve(wait_ns, next_due);
    }

    /// The replies can wait (`replies_can_wait`): sleep to the next send with no connection in the
    /// wait, the replies that come meanwhile left for the margin before that send (`poll_conns`) —
    /// or, when it had none, read now, after the send, first. One wake-up a request instead of two,
    /// the reads in time the thread would spin, no system call in the spin; each reply's kernel
    /// stamp is its time still.
    fn read_then_sleep(&mut self, wait_ns: u64, next_due: u64) {
        let now = self.watch.now();
        let at = wake_at(now, wait_ns);
        if self.path.unread {
            self.wait_and_serve(0, next_due);
        }
        let now = self.watch.now();
        self.watch.plan_wait(at.saturating_sub(now));
        crate::time::clock::sleep_until(at, 0);
        let woke = self.watch.now();
        if now < at && woke >= at {
            self.path.wake.record(woke - at);
        }
        self.path.polled_at = woke;
        self.path.unread = true;
    }

    /// Wait for events (`wait_ns`: 0, or up to the next send) and serve them, but return as soon
    /// as a send falls due.
    fn wait_and_serve(&mut self, wait_ns: u64, next_due: u64) {
        // Reuse one buffer: no allocation in the timing loop.
        let mut ready = std::mem::take(&mut self.path.ready);
        ready.clear();
        let mut at = 0;
        let waited = if wait_ns == 0 {
            self.path.ep.wait(0).map(|evs| (evs, false))
        } else {
            // The instant to wake at, steady across iterations so that the timer is re-armed only
            // when it moves (io/poll.rs): the next send's, or a wait at the cap ends on its grid.
            let now = self.watch.now();
            at = wake_at(now, wait_ns);
            self.watch.plan_wait(at - now);
            self.path.ep.wait_until(at)
        };
        let woke = self.watch.now();
        self.path.polled_at = woke;
        match waited {
            Ok((evs, fired)) => {
                // Woken by the timer, not by an event: how late it was (time/wake.rs). (An expiry
                // left from an instant since moved comes early: not a lateness.)
                if fired && evs.is_empty() && woke >= at {
                    self.path.wake.record(woke.saturating_sub(at));
                }
                ready.extend(evs.iter().map(|e| (e.u64 as usize, e.events)))
            }
            Err(e) => self.shared.abort(Abort::Epoll(e)),
        }
        for (n, &(i, events)) in ready.iter().enumerate() {
            // At least one event is served per poll, or at high rates (a send due every µs) the
            // replies would never be read.
            if n > 0 && self.watch.now() >= next_due {
                break;
            }
            self.serve_events(i, events);
        }
        self.path.ready = ready;
    }

    #[inline]
    fn serve_events(&mut self, i: usize, events: u32) {
        match self.path.conns[i].state {
            State::Up => {}
            State::Connecting(_) => return self.connect_done(i),
            State::Handshaking(_) => return self.handshake_step(i),
            State::Waiting(_) | State::Dead => return,
        }
        // Transmit stamps come on the error queue, which raises EPOLLERR until read; they are
        // taken before the replies so that a reply finds its request stamped.
        let mut read = events & (EPOLLIN | EPOLLHUP) as u32 != 0;
        if events & EPOLLERR as u32 != 0 {
            read |= !(self.rx.clock.is_some() && self.take_tx_stamps(i));
        }
        if read {
            self.read_conn(i);
        }
        if events & EPOLLOUT as u32 != 0 && self.path.conns[i].up() {
            if let Err(e) = self.write_conn(i) {
                self.lost_conn(i, Lost::Send(e.into()));
            }
        }
    }

    fn read_conn(&mut self, i: usize) {
        if self.path.datagram {
            return self.read_datagrams(i);
        }
        loop {
            let c = &mut self.path.conns[i];
            if c.rpos > 0 && (c.rpos == c.rbuf.len() || c.rbuf.capacity() - c.rbuf.len() < READ_CHUNK / 4) {
                c.rbuf.drain(..c.rpos);
                c.rpos = 0;
            }
            let len = c.rbuf.len();
            if c.rbuf.capacity() - len < READ_CHUNK / 4 {
                if len >= MAX_READ_BUF {
                    self.kill_conn(i, Killed::TooLong(MAX_READ_BUF));
                    return;
                }
                c.rbuf.reserve(READ_CHUNK);
            }
            let cap = c.rbuf.capacity();
            // SAFETY: read into spare capacity, then set the length to what the kernel wrote.
            let spare = unsafe { std::slice::from_raw_parts_mut(c.rbuf.as_mut_ptr().add(len), cap - len) };
            // With TLS the ciphertext goes to its own buffer first (no more than the plaintext's room).
            let (spare_len, (got, stamp)) = match c.tls {
                None => (spare.len(), read(self.rx.clock, c.fd, spare)),
                Some(_) => {
                    let k = spare.len().min(c.tls_cipher.len());
                    (k, read(self.rx.clock, c.fd, &mut c.tls_cipher[..k]))
                }
            };
            let (t_rx, t_user) = self.rx_time(stamp);
            match got {
                Ok(0) => return self.lost_conn(i, Lost::Closed),
                Ok(n) => {
                    let c = &mut self.path.conns[i];
                    let (closed, reply) = match c.tls.as_deref_mut() {
                        None => {
                            // SAFETY: the kernel initialised n bytes.
                            unsafe { c.rbuf.set_len(len + n) };
                            (false, false)
                        }
                        Some(session) => match tls::decrypt(session, &c.tls_cipher[..n], &mut c.rbuf) {
                            // What rustls answers by itself (a KeyUpdate) goes out with the stream.
                            Ok(closed) => (closed, tls::pending(session, &mut c.wbuf)),
                            Err(e) => {
                                let why = Lost::Tls(e);
                                self.fin.note(why.to_string());
                                return self.lost_conn(i, why);
                            }
                        },
                    };
                    self.parse_replies(i, t_rx, t_user, stamp.is_some());
                    if !self.path.conns[i].up() {
                        return;
                    }
                    if closed {
                        return self.lost_conn(i, Lost::Closed); // close_notify
                    }
                    if reply {
                        if let Err(e) = self.write_conn(i) {
                            return self.lost_conn(i, Lost::Send(e.into()));
                        }
                    }
                    if n < spare_len {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return self.lost_conn(i, Lost::Reset),
                Err(e) => return self.lost_conn(i, Lost::Failed(e.into())),
            }
        }
    }

    /// Datagram protocols: one reply per datagram, matched by id; a lost one times out.
    fn read_datagrams(&mut self, i: usize) {
        loop {
            let c = &mut self.path.conns[i];
            c.rbuf.clear();
            c.rbuf.reserve(MAX_DATAGRAM);
            let cap = c.rbuf.capacity();
            // SAFETY: read into spare capacity, then set the length to what the kernel wrote.
            let spare = unsafe { std::slice::from_raw_parts_mut(c.rbuf.as_mut_ptr(), cap) };
            let (got, stamp) = read(self.rx.clock, c.fd, spare);
            let t = self.rx_time(stamp);
            match got {
                Ok(n) => {
                    // SAFETY: the kernel initialised n bytes.
                    unsafe { self.path.conns[i].rbuf.set_len(n) };
                    self.datagram_reply(i, t, stamp.is_some());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // An ICMP error (nothing listens): the datagrams in flight time out one by
                    // one and the socket goes on, until the target stays unreachable.
                    let why = Failure::Receive { addr: self.path.conns[i].addr, err: e.into() };
                    self.fin.note(why.reason());
                    self.reach.failure(why);
                    return;
                }
            }
        }
    }

    fn datagram_reply(&mut self, i: usize, t: (u64, u64), stamped: bool) {
        let c = &mut self.path.conns[i];
        match c.codec.parse(&c.rbuf) {
            Parsed::Incomplete => {}
            Parsed::Reply { id, outcome, .. } => {
                let mask = c.id_mask;
                let pos = id.and_then(|id| c.inflight.iter().position(|f| f.sent > 0 && f.id & mask == id));
                match pos.and_then(|p| c.inflight.remove(p)) {
                    Some(f) => {
                        self.path.flights -= 1;
                        self.complete(i, f, outcome, t, stamped)
                    }
                    // A reply to a request already timed out, or a duplicate.
                    None => self.fin.note("reply to no request in flight (after its timeout, or duplicated)".into()),
                }
            }
            Parsed::Malformed { reason } => self.fin.note(format!("malformed datagram dropped: {reason}")),
        }
    }

    /// A reply's receive time on CLOCK_MONOTONIC: the kernel's or NIC's stamp when there is one,
    /// else now; and now (the user-space stamp). The clock is read either way: every read feeds
    /// the stall watch.
    #[inline]
    fn rx_time(&mut self, stamp: Option<u64>) -> (u64, u64) {
        let now = self.watch.now();
        match stamp {
            Some(t) => (self.rx.mono(t, now), now),
            None => (now, now),
        }
    }

    /// Read connection `i`'s transmit stamps and give each to the requests whose last byte its
    /// send carried (tx_stamps.rs). Returns whether the queue held anything.
    pub(super) fn take_tx_stamps(&mut self, i: usize) -> bool {
        let mut stamps = std::mem::take(&mut self.rx.tx_buf);
        let fd = self.path.conns[i].fd;
        let clock = self.rx.clock.expect("transmit stamps are read only with a stamp clock");
        let read = stamp::read_tx_stamps(fd, &mut stamps, clock);
        let now = self.watch.now();
        let datagram = self.path.datagram;
        for &(key, raw) in &stamps {
            let t = self.rx.mono(raw, now);
            let c = &mut self.path.conns[i];
            if !c.tx.apply(&mut c.inflight, key, t, datagram) {
                break;
            }
        }
        self.rx.tx_buf = stamps;
        match read {
            Ok(n) => n > 0,
            Err(e) => {
                self.fin.note(format!("reading transmit stamps failed: {e}"));
                false
            }
        }
    }

    fn parse_replies(&mut self, i: usize, t_rx: u64, t_user: u64, stamped: bool) {
        loop {
            let c = &mut self.path.conns[i];
            let parsed = c.codec.parse(&c.rbuf[c.rpos..]);
            match parsed {
                Parsed::Incomplete => return,
                Parsed::Reply { len, id, outcome } => {
                    c.rpos += len;
                    if c.setup_left > 0 {
                        // A reply to a setup command (setup.rs), not a request's: checked, not counted.
                        let setup = self.path.setup.as_ref().expect("setup replies only where there is a setup");
                        let k = setup.replies() - c.setup_left;
                        c.setup_left -= 1;
                        match setup.check(k, outcome) {
                            Ok(()) => continue,
                            Err(refused) => return self.kill_conn(i, Killed::Setup(refused)),
                        }
                    }
                    let Some(f) = c.inflight.front() else {
                        return self.kill_conn(i, Killed::NoRequest);
                    };
                    let want = f.id & c.id_mask;
                    if let Some(got) = id.filter(|&got| got != want) {
                        return self.kill_conn(i, Killed::WrongId { got, want });
                    }
                    let f = c.inflight.pop_front().expect("looked at above");
                    self.path.flights -= 1;
                    if f.ghost {
                        self.slot_freed(t_rx, stamped);
                        continue; // the late reply of a request already counted as a timeout
                    }
                    self.complete(i, f, outcome, (t_rx, t_user), stamped);
                }
                Parsed::Malformed { reason } => return self.kill_conn(i, Killed::Malformed(reason.to_string())),
            }
        }
    }

    /// Record a reply to `f` on connection `i`, received at `t_rx` (the kernel's stamp if
    /// `stamped`) and seen by user space at `t_user`.
    fn complete(&mut self, i: usize, f: Flight, outcome: Outcome, (t_rx, t_user): (u64, u64), stamped: bool) {
        // A kernel stamp converted from another clock may lie a few ns before the send.
        let t_rx = t_rx.max(f.tx).max(f.sent);
        self.slot_freed(t_rx, stamped);
        let flags = self.count_reply(&f, outcome, t_rx, stamped);
        self.reach.replied(t_rx);
        self.path.conns[i].replied();
        // A datagram's kernel stamp is its arrival: an engine stall cannot have inflated it. A TCP
        // read's stamp is its last segment's, so a stall before that segment still may have.
        // A load thread beside a probe times nothing: no inflation to work out.
        let exact = self.rx.clock.is_some() && self.path.datagram;
        let untimed = self.role == Role::Load;
        let inflation = if exact || untimed { 0 } else { self.stalls.inflation(f.req.intended, t_rx) };
        let times = Times { rx_user: t_user, ..f.times() };
        self.fin.record(f.req, times, t_rx - f.req.intended, flags, inflation);
    }

    /// A reply's counters; its flags.
    #[inline]
    fn count_reply(&mut self, f: &Flight, outcome: Outcome, t_rx: u64, stamped: bool) -> u32 {
        let c = &mut self.fin.c;
        c.rx_kernel += stamped as u64;
        c.tx_kernel += (f.tx > 0) as u64;
        let mut flags = if stamped { F::KERNEL_RX } else { 0 };
        if f.tx > 0 {
            flags |= F::KERNEL_TX;
        }
        match outcome {
            Outcome::Error(reason) => {
                c.errors += 1;
                self.fin.note(format!("error reply: {reason}"));
                flags |= F::ERROR_REPLY;
            }
            Outcome::Hit => c.hits += 1,
            Outcome::Miss => c.misses += 1,
            Outcome::Stored => c.stored += 1,
            Outcome::Done => {}
        }
        if flags & F::ERROR_REPLY == 0 {
            self.fin.c.received += 1;
            // Completed within the window: the server's throughput, not the client's schedule
            // (replies to the backlog an overloaded server leaves come after it).
            if t_rx < self.end {
                self.fin.received_in_window += 1;
            }
        }
        flags
    }
}
