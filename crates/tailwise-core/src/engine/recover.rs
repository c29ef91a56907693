//! The request path's tick (every millisecond), and connections that time out, end or fail, as the thread
//! handles them: timed-out requests kept as ghosts (or, for datagrams, dropped), a lost
//! connection's requests sent again on a new one (non-blocking reconnect with back-off, conn.rs),
//! a connection that does not speak the protocol closed for good; the failures the target caused
//! go to its reachability (reach.rs).

use super::conn::State;
use super::finish::ms;
use super::problem::{Abort, Failure, Killed, Lost};
use super::requests::Requests;
use super::thread::Worker;
use super::tls::{self, HandshakeError, Step};
use crate::io::poll::{EPOLLIN, EPOLLOUT};
use crate::io::socket;
use crate::record::flags as F;
use crate::stamp;
use crate::time::clock::now_ns;
use std::sync::Arc;

impl Worker<Requests> {
    /// Every millisecond (the loop's tick, which then looks at the target's reachability and old
    /// stall windows): timeouts (from the intended time) and reconnections.
    pub(super) fn tick_conns(&mut self, now: u64) {
        let timeout = self.cfg.timeout_ns;
        // Requests still waiting for a slot past their timeout were never sent.
        let mut expired = 0;
        while let Some(&r) = self.path.backlog.front() {
            if now - r.intended <= timeout {
                break;
            }
            self.pop_backlog();
            self.fin.censor_waiting(r, now, true);
            expired += 1;
        }
        if expired > 0 {
            let why = format!("not sent within {}: every connection busy or down", ms(timeout));
            self.fin.note_n(why, expired);
        }
        for i in 0..self.path.conns.len() {
            match self.path.conns[i].state {
                State::Up => self.time_out_flights(i, now),
                State::Waiting(at) if now >= at => self.start_connect(i, now),
                State::Connecting(since) if now - since > self.cfg.connect_timeout_ns => self.reconnect_silent(i, now),
                State::Handshaking(since) if now.saturating_sub(since) > self.cfg.connect_timeout_ns => {
                    self.handshake_failed(i, HandshakeError::TimedOut(self.cfg.connect_timeout_ns))
                }
                _ => {}
            }
        }
    }

    pub(super) fn time_out_flights(&mut self, i: usize, now: u64) {
        let timeout = self.cfg.timeout_ns;
        let mut lost = 0;
        if self.path.datagram {
            // A lost datagram costs its request only; the socket goes on.
            let mut freed = now;
            while self.path.conns[i].inflight.front().is_some_and(|f| now - f.req.intended > timeout) {
                let f = self.path.conns[i].inflight.pop_front().unwrap();
                self.path.flights -= 1;
                // Its slot was the target's until the timeout, however late the tick saw it.
                freed = freed.min(f.req.intended + timeout);
                self.fin.time_out(f.req, f.times(), now);
                lost += 1;
            }
            if lost > 0 {
                self.slot_freed(freed, true);
            }
            if lost > 0 {
                self.fin.note_n(format!("no reply within {} (datagram lost)", ms(timeout)), lost);
            }
            return;
        }
        // A stream: the timed-out requests stay in their slots as ghosts, so that their replies,
        // if they come, keep the stream in step.
        for k in 0..self.path.conns[i].inflight.len() {
            let f = &mut self.path.conns[i].inflight[k];
            if now - f.req.intended <= timeout {
                break;
            }
            if !f.ghost {
                f.ghost = true;
                let (r, times) = (f.req, f.times());
                self.fin.time_out(r, times, now);
                lost += 1;
            }
        }
        if lost > 0 {
            self.fin.note_n(format!("no reply within {}", ms(timeout)), lost);
        }
        // Twice the timeout without a reply to the oldest: replace the connection and send what
        // it still holds again (not the target's failure: it may only be slow).
        if self.path.conns[i].inflight.front().is_some_and(|f| f.ghost && now - f.req.intended > 2 * timeout) {
            self.lost_conn(i, Lost::Silent(2 * timeout));
        }
    }

    /// A connection that ended (closed or reset by the target, a send error, or closed by us
    /// after a timeout): its unanswered requests go back to the front of the backlog, in intended
    /// order, to be sent again with their original intended times; reconnect with back-off.
    pub(super) fn lost_conn(&mut self, i: usize, why: Lost) {
        let now = now_ns();
        if self.path.datagram {
            return self.kill_conn(i, Killed::Lost(why)); // a datagram socket has no connection to lose
        }
        let by_target = !matches!(why, Lost::Silent(_));
        let Some((flights, no_reply)) = self.path.conns[i].lose(&self.path.ep, by_target, now) else { return };
        self.path.flights -= flights.len();
        let mut last = None;
        for f in flights.into_iter().filter(|f| !f.ghost) {
            let mut r = f.req;
            if f.sent > 0 {
                r.flags |= F::RESENT;
            }
            last = last.max(Some(r.intended));
            let at = self.path.backlog.partition_point(|b| b.intended <= r.intended);
            self.path.backlog_delayed += (r.flags & F::ENGINE_STALL != 0) as usize;
            self.path.backlog.insert(at, r);
        }
        // Held by the target until now: they wait for a slot from here, as a blocked backlog.
        if let Some(last) = last {
            self.path.slots.requeued(last);
            self.slot_freed(now, false);
        }
        if by_target {
            if why.closed_by_target() {
                self.reach.closed();
            }
            if no_reply {
                self.reach.failure(Failure::LostBeforeReply(why));
            }
        }
    }

    /// Start a non-blocking reconnect of connection `i`.
    pub(super) fn start_connect(&mut self, i: usize, now: u64) {
        let addr = self.path.conns[i].addr;
        match socket::connect_nonblocking(&addr) {
            Ok((s, done)) => {
                self.path.conns[i].connecting(s, self.cfg.protocol.codec(), now);
                if let Err(e) = self.path.ep.add(self.path.conns[i].fd, EPOLLOUT, i as u64) {
                    self.connect_failed(i, Failure::Reconnect { addr, err: e.into() }, now);
                } else if done {
                    self.connect_done(i);
                }
            }
            Err(e) => self.connect_failed(i, Failure::Reconnect { addr, err: e.into() }, now),
        }
    }

    /// A reconnect in progress became writable: connected, or failed.
    pub(super) fn connect_done(&mut self, i: usize) {
        let (fd, addr) = (self.path.conns[i].fd, self.path.conns[i].addr);
        if let Err(e) = socket::take_socket_error(fd) {
            return self.connect_failed(i, Failure::Reconnect { addr, err: e.into() }, now_ns());
        }
        if socket::connected_to_itself(fd) {
            return self.connect_failed(i, Failure::Reconnect { addr, err: socket::met_itself().into() }, now_ns());
        }
        // Before anything is written: TCP transmit-stamp keys count from here.
        if let Some(clock) = self.rx.clock {
            match stamp::enable_timestamps(fd, true, clock) {
                Ok(tx) => self.path.conns[i].tx.ok = tx,
                Err(e) => self.fin.note(format!("{clock:?} timestamps refused on a new connection: {e}")),
            }
        }
        if let Some(client) = self.shared.tls.clone() {
            return match client.session(&addr) {
                Ok(session) => {
                    self.path.conns[i].tls_session(session);
                    self.path.conns[i].state = State::Handshaking(now_ns());
                    self.handshake_step(i)
                }
                Err(e) => self.handshake_failed(i, HandshakeError::Tls(e)),
            };
        }
        self.up_again(i);
    }

    /// A reconnect's TLS handshake, driven as its socket's events come (its requests wait in the
    /// backlog with their intended times, as for the TCP connect).
    pub(super) fn handshake_step(&mut self, i: usize) {
        if self.rx.clock.is_some() {
            // The handshake's own transmit stamps (EPOLLERR until read): they match no request.
            self.take_tx_stamps(i);
        }
        let c = &mut self.path.conns[i];
        let (Some(session), State::Handshaking(since)) = (c.tls.as_deref_mut(), c.state) else { return };
        let mut wrote = 0;
        let step = tls::handshake(session, c.fd, &mut wrote);
        c.tx.base += wrote;
        let (fd, kind) = (c.fd, session.handshake_kind());
        let watch = match step {
            Ok(Step::Done) => {
                if let Some(client) = &self.shared.tls {
                    client.done(kind, now_ns() - since);
                }
                return self.up_again(i);
            }
            Ok(Step::Read) => EPOLLIN,
            Ok(Step::Write) => EPOLLIN | EPOLLOUT,
            Err(e) => return self.handshake_failed(i, e),
        };
        if self.path.ep.modify(fd, watch, i as u64).is_err() {
            let addr = self.path.conns[i].addr;
            self.connect_failed(i, Failure::Watch(addr), now_ns());
        }
    }

    fn handshake_failed(&mut self, i: usize, err: HandshakeError) {
        if let Some(client) = &self.shared.tls {
            client.failed();
        }
        let addr = self.path.conns[i].addr;
        self.connect_failed(i, Failure::Handshake { addr, err: Arc::new(err) }, now_ns());
    }

    /// A reconnect is done (its handshake too): requests may go.
    fn up_again(&mut self, i: usize) {
        let (fd, addr) = (self.path.conns[i].fd, self.path.conns[i].addr);
        self.path.conns[i].connected();
        self.slot_freed(now_ns(), false);
        if self.path.ep.modify(fd, EPOLLIN, i as u64).is_err() {
            return self.connect_failed(i, Failure::Watch(addr), now_ns());
        }
        self.fin.c.reconnects += 1;
        // Its setup commands first, before any request (setup.rs): written now without waiting
        // for their replies, which parse_replies reads before the requests' (io.rs).
        if let Some(setup) = &self.path.setup {
            let c = &mut self.path.conns[i];
            c.send_setup(setup.bytes());
            c.setup_left = setup.replies();
            if let Err(e) = self.write_conn(i) {
                self.lost_conn(i, Lost::Send(e.into()));
            }
        }
    }

    /// A reconnect with no answer within the connect timeout.
    pub(super) fn reconnect_silent(&mut self, i: usize, now: u64) {
        let why = Failure::ReconnectSilent { addr: self.path.conns[i].addr, ns: self.cfg.connect_timeout_ns };
        self.connect_failed(i, why, now);
    }

    fn connect_failed(&mut self, i: usize, why: Failure, now: u64) {
        self.path.conns[i].connect_failed(&self.path.ep, now);
        self.reach.failure(why);
    }

    /// Close a connection for good (the target does not speak the protocol); its requests in
    /// flight are errors, censored at the time they were outstanding. The run goes on on the
    /// others, and stops when a thread has none left.
    pub(super) fn kill_conn(&mut self, i: usize, why: Killed) {
        let now = now_ns();
        let held = self.path.conns[i].inflight.len();
        let Some(flights) = self.path.conns[i].kill(&self.path.ep) else { return };
        self.path.flights -= held;
        for f in &flights {
            self.fin.fail(f, now);
        }
        self.fin.note(why.to_string());
        if self.path.conns.iter().all(|c| c.state == State::Dead) {
            self.shared.abort(Abort::ConnsFailed { thread: self.index, last: why });
        }
    }
}
