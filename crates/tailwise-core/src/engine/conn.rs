//! One connection of an engine thread: its socket, buffers and requests in flight, and its state
//! machine — up; lost and waiting to reconnect (with back-off); connecting; with TLS, handshaking;
//! dead for good.

use super::req::Flight;
use super::tx_stamps::TxStamps;
use super::connect::Sock;
use crate::io::poll::Epoll;
use crate::protocol::Codec;
use rustls::ClientConnection;
use std::collections::VecDeque;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

pub(super) const READ_CHUNK: usize = 64 << 10;
/// Reconnect back-off after `n` failed attempts in a row: none for the first, then 1 ms doubling
/// up to this bound.
const MAX_BACKOFF_NS: u64 = 250_000_000;

pub(super) fn backoff_ns(fails: u32) -> u64 {
    if fails == 0 {
        0
    } else {
        (1_000_000u64 << (fails - 1).min(20)).min(MAX_BACKOFF_NS)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum State {
    Up,
    /// A non-blocking connect in progress since this time.
    Connecting(u64),
    /// Connected; the TLS handshake in progress since this time (tls.rs).
    Handshaking(u64),
    /// To reconnect at this time.
    Waiting(u64),
    /// Closed for good: the target spoke something else than the protocol.
    Dead,
}

pub(super) struct Conn {
    pub sock: Option<Sock>,
    pub fd: RawFd,
    pub addr: SocketAddr,
    pub codec: Box<dyn Codec>,
    pub id_mask: u64,
    pub wbuf: Vec<u8>,
    /// Datagram protocols: where each request's datagram ends in `wbuf`.
    pub dgram_ends: VecDeque<usize>,
    pub wpos: usize,
    pub rbuf: Vec<u8>,
    pub rpos: usize,
    pub inflight: VecDeque<Flight>,
    /// Flights at the back of `inflight` encoded but not yet written.
    pub unsent: usize,
    pub dirty: bool,
    pub want_write: bool,
    pub state: State,
    /// Attempts in a row that failed: refused, or closed by the target before any reply.
    pub fails: u32,
    /// A reply has arrived since this connection was (re)established.
    pub replied: bool,
    /// Transmit-stamp keys on the current socket.
    pub tx: TxStamps,
    /// Replies to the setup commands (setup.rs) still to come on this connection, before any
    /// request's: a reconnect's (the first connections exchanged theirs before the schedule).
    pub setup_left: usize,
    /// With TLS: the session on the current socket (None while down), the request being
    /// encoded (plaintext, reused) and one read's ciphertext (READ_CHUNK bytes, reused).
    pub tls: Option<Box<ClientConnection>>,
    pub tls_plain: Vec<u8>,
    pub tls_cipher: Vec<u8>,
}

impl Conn {
    pub fn new(sock: Sock, codec: Box<dyn Codec>, outstanding: usize) -> Conn {
        let (sock, tls, wrote) = match sock {
            Sock::Tls { stream, session, wrote } => (Sock::Tcp(stream), Some(session), wrote),
            s => (s, None, 0),
        };
        let mut c = Conn {
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
            inflight: VecDeque::with_capacity(outstanding),
            unsent: 0,
            dirty: false,
            want_write: false,
            state: State::Up,
            fails: 0,
            replied: false,
            tx: TxStamps::new(),
            setup_left: 0,
            tls: None,
            tls_plain: Vec::new(),
            tls_cipher: Vec::new(),
        };
        if let Some(session) = tls {
            c.tls_session(session);
            // The handshake's bytes came first on the stream.
            c.tx.base = wrote;
        }
        c
    }

    /// A TLS session on the current socket (its buffers made the first time).
    pub fn tls_session(&mut self, session: Box<ClientConnection>) {
        self.tls = Some(session);
        if self.tls_cipher.is_empty() {
            self.tls_cipher = vec![0; READ_CHUNK];
            self.tls_plain = Vec::with_capacity(4096);
        }
    }

    /// Queue the setup commands (setup.rs) on a new connection, ahead of any request: the one
    /// place their bytes go into the write buffer — with TLS, encrypted by the session (so only
    /// once its handshake is done) as a request is (io.rs). Their replies are read before any
    /// request's (`setup_left`).
    pub fn send_setup(&mut self, bytes: &[u8]) {
        debug_assert!(self.wbuf.is_empty() && self.inflight.is_empty());
        match self.tls.as_deref_mut() {
            Some(session) => {
                debug_assert!(!session.is_handshaking(), "setup before the handshake's end");
                super::tls::encrypt(session, bytes, &mut self.wbuf);
            }
            None => self.wbuf.extend_from_slice(bytes),
        }
    }

    #[inline]
    pub fn up(&self) -> bool {
        self.state == State::Up
    }

    /// A reply arrived: the connection works, its failures are forgiven.
    #[inline]
    pub fn replied(&mut self) {
        self.replied = true;
        self.fails = 0;
    }

    /// The connection ended (closed or reset by the target — `by_target` —, a send error, or
    /// closed by us): drop the socket and buffers and wait to reconnect, after a back-off when
    /// the target closed it before any reply. Returns the requests it held and whether none was
    /// answered; None if it was not up or connecting (nothing to lose).
    pub fn lose(&mut self, ep: &Epoll, by_target: bool, now: u64) -> Option<(Vec<Flight>, bool)> {
        if !matches!(self.state, State::Up | State::Connecting(_) | State::Handshaking(_)) {
            return None;
        }
        self.tls = None;
        let _ = ep.delete(self.fd);
        if let Some(s) = self.sock.take() {
            s.shutdown();
        }
        let flights: Vec<Flight> = self.inflight.drain(..).collect();
        self.unsent = 0;
        self.wbuf.clear();
        self.wpos = 0;
        self.dgram_ends.clear();
        self.rbuf.clear();
        self.rpos = 0;
        self.want_write = false;
        self.setup_left = 0;
        if by_target {
            self.fails = if self.replied { 0 } else { self.fails + 1 };
        }
        self.state = State::Waiting(now + backoff_ns(self.fails));
        let no_reply = !self.replied;
        self.replied = false;
        Some((flights, no_reply))
    }

    /// A reconnect started: a fresh socket (and codec), its transmit-stamp keys from zero.
    pub fn connecting(&mut self, s: TcpStream, codec: Box<dyn Codec>, now: u64) {
        self.tx = TxStamps::new();
        self.tls = None;
        self.fd = s.as_raw_fd();
        self.sock = Some(Sock::Tcp(s));
        self.codec = codec;
        self.state = State::Connecting(now);
    }

    /// The reconnect is done.
    pub fn connected(&mut self) {
        if let Some(Sock::Tcp(s)) = &self.sock {
            let _ = s.set_nodelay(true);
        }
        self.state = State::Up;
        self.want_write = false;
    }

    /// A reconnect failed: wait longer before the next.
    pub fn connect_failed(&mut self, ep: &Epoll, now: u64) {
        let _ = ep.delete(self.fd);
        self.sock = None;
        self.tls = None;
        self.fails += 1;
        self.state = State::Waiting(now + backoff_ns(self.fails));
    }

    /// Closed for good: the requests it held that were not already counted (not ghosts); None if
    /// it was dead already.
    pub fn kill(&mut self, ep: &Epoll) -> Option<Vec<Flight>> {
        if self.state == State::Dead {
            return None;
        }
        self.state = State::Dead;
        self.tls = None;
        let _ = ep.delete(self.fd);
        if let Some(s) = self.sock.take() {
            s.shutdown();
        }
        self.unsent = 0;
        Some(self.inflight.drain(..).filter(|f| !f.ghost).collect())
    }
}

impl Drop for Conn {
    /// A TLS connection up at the run's end closes its session, unless requests are half
    /// written (the alert would land inside them).
    fn drop(&mut self) {
        if let (Some(session), State::Up, true) = (self.tls.as_deref_mut(), self.state, self.wpos == self.wbuf.len()) {
            super::tls::close(session, self.fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::req::Req;
    use crate::load::workload::Op;
    use crate::protocol::Protocol;

    fn conn() -> (Conn, std::net::TcpListener) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let codec = Protocol::Synthetic { service_ns: None, reply_pad: 0 }.codec();
        (Conn::new(Sock::Tcp(s), codec, 4), l)
    }

    fn flight(ghost: bool) -> Flight {
        Flight { req: Req::new(0, 0, Op::KEYLESS, 0), id: 0, sent: 1, end: 0, tx: 0, ghost }
    }

    #[test]
    fn back_off_is_none_then_doubles_from_1_ms_to_250_ms() {
        let got: Vec<u64> = (0..12).map(|n| backoff_ns(n) / 1_000_000).collect();
        assert_eq!(got, [0, 1, 2, 4, 8, 16, 32, 64, 128, 250, 250, 250]);
        assert_eq!(backoff_ns(u32::MAX), MAX_BACKOFF_NS);
    }

    #[test]
    fn a_close_before_any_reply_backs_off_and_one_after_a_reply_does_not() {
        let ep = Epoll::new(2).unwrap();
        let (mut c, l) = conn();
        c.inflight.push_back(flight(false));
        c.wbuf.extend_from_slice(b"abc");
        let (flights, no_reply) = c.lose(&ep, true, 1_000).unwrap();
        assert_eq!((flights.len(), no_reply), (1, true));
        assert_eq!((c.state, c.fails, c.wbuf.len()), (State::Waiting(1_000 + 1_000_000), 1, 0));
        assert!(c.sock.is_none() && c.lose(&ep, true, 2_000).is_none(), "nothing more to lose while waiting");
        // Refused again: longer.
        c.connect_failed(&ep, 5_000);
        assert_eq!((c.state, c.fails), (State::Waiting(5_000 + 2_000_000), 2));
        // Connected, answered, closed: reconnect at once.
        let (s, _) = crate::io::socket::connect_nonblocking(&l.local_addr().unwrap()).unwrap();
        c.connecting(s, Protocol::Synthetic { service_ns: None, reply_pad: 0 }.codec(), 6_000);
        assert_eq!(c.state, State::Connecting(6_000));
        c.connected();
        assert!(c.up());
        c.replied();
        let (_, no_reply) = c.lose(&ep, true, 7_000).unwrap();
        assert_eq!((c.state, c.fails, no_reply), (State::Waiting(7_000), 0, false));
    }

    #[test]
    fn a_loss_of_ours_keeps_the_failure_count_and_a_killed_connection_stays_dead() {
        let ep = Epoll::new(2).unwrap();
        let (mut c, _l) = conn();
        c.fails = 3;
        c.lose(&ep, false, 0).unwrap();
        assert_eq!((c.state, c.fails), (State::Waiting(backoff_ns(3)), 3));
        let (mut c, _l) = conn();
        c.inflight.extend([flight(true), flight(false), flight(false)]);
        assert_eq!(c.kill(&ep).unwrap().len(), 2, "ghosts were counted already");
        assert_eq!(c.state, State::Dead);
        assert!(c.kill(&ep).is_none() && c.lose(&ep, true, 0).is_none());
    }
}
