//! The engine's setup commands (setup.rs) against a small Redis of the test's own that requires
//! AUTH and closes connections, in plaintext or over TLS: the first connections and every
//! reconnect say AUTH and SELECT before any request (over TLS through the session, after the
//! handshake), their replies are never counted, and a refusal is the server's words.

use super::tls_tests::{trusting, Pki};
use super::*;
use crate::error::Problem;
use crate::protocol::{Protocol, RedisAuth};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

const PASSWORD: &str = "pw:with spaces";

/// What the server saw: GETs answered, AUTHs accepted, requests before a good AUTH, connections.
#[derive(Default)]
struct Seen {
    gets: AtomicU64,
    auths: AtomicU64,
    selects: AtomicU64,
    unauthenticated: AtomicU64,
    conns: AtomicU64,
    /// From now on every AUTH is refused (the password changed).
    refuse: AtomicBool,
    /// The bytes a connection had read from its socket when its SELECT came (the last one's):
    /// over TLS, its handshake's and setup's ciphertext, since nothing else can come before.
    read_at_select: AtomicU64,
}

/// A socket that counts the bytes read from it.
struct Tally {
    tcp: std::net::TcpStream,
    read: u64,
}

impl Read for Tally {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.tcp.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

impl Write for Tally {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tcp.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.tcp.flush()
    }
}

/// What a connection read so far (the TLS case's socket; 0 in plaintext).
trait ReadSoFar {
    fn read_so_far(&self) -> u64 {
        0
    }
}
impl ReadSoFar for std::net::TcpStream {}
impl ReadSoFar for StreamOwned<ServerConnection, Tally> {
    fn read_so_far(&self) -> u64 {
        self.sock.read
    }
}

/// One RESP command (an array of bulk strings), None at the end of the stream.
fn command<S: Read>(r: &mut BufReader<S>) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    r.read_line(&mut line).ok().filter(|&n| n > 0)?;
    let n: usize = line.trim_end().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        line.clear();
        r.read_line(&mut line).ok()?;
        let len: usize = line.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut data = vec![0; len + 2];
        std::io::Read::read_exact(r, &mut data).ok()?;
        data.truncate(len);
        args.push(data);
    }
    Some(args)
}

/// A Redis that requires `PASSWORD` and closes each connection after `per_conn` GETs.
fn redis(per_conn: u64) -> (SocketAddr, Arc<Seen>) {
    redis_over(per_conn, None)
}

/// The same, over TLS with `tls`: every command read from the session (a command that came in
/// the clear is no TLS record: the handshake fails and nothing is counted).
fn redis_over(per_conn: u64, tls: Option<ServerConfig>) -> (SocketAddr, Arc<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    let tls = tls.map(Arc::new);
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(tcp) = conn else { return };
            let s = s.clone();
            s.conns.fetch_add(1, Relaxed);
            let tls = tls.clone();
            std::thread::spawn(move || match tls {
                None => answer(&mut BufReader::new(tcp), per_conn, &s),
                Some(cfg) => {
                    let tally = Tally { tcp, read: 0 };
                    let mut r = BufReader::new(StreamOwned::new(ServerConnection::new(cfg).unwrap(), tally));
                    answer(&mut r, per_conn, &s);
                    let tls = r.get_mut();
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                }
            });
        }
    });
    (addr, seen)
}

/// One connection's commands answered, until it ends or after `per_conn` GETs.
fn answer<S: Read + Write + ReadSoFar>(r: &mut BufReader<S>, per_conn: u64, s: &Seen) {
    let (mut authed, mut gets) = (false, 0);
    while let Some(args) = command(r) {
        let reply: &[u8] = match args[0].as_slice() {
            b"AUTH" if s.refuse.load(Relaxed) || args.last().unwrap() != PASSWORD.as_bytes() => {
                b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
            }
            b"AUTH" => {
                authed = true;
                s.auths.fetch_add(1, Relaxed);
                b"+OK\r\n"
            }
            _ if !authed => {
                s.unauthenticated.fetch_add(1, Relaxed);
                b"-NOAUTH Authentication required.\r\n"
            }
            b"SELECT" => {
                s.selects.fetch_add(1, Relaxed);
                s.read_at_select.store(r.get_ref().read_so_far(), Relaxed);
                b"+OK\r\n"
            }
            _ => {
                gets += 1;
                s.gets.fetch_add(1, Relaxed);
                b"$-1\r\n"
            }
        };
        if r.get_mut().write_all(reply).and_then(|_| r.get_mut().flush()).is_err() || gets == per_conn {
            return; // closed: the client reconnects
        }
    }
}

fn config(addr: SocketAddr, password: &str) -> EngineConfig {
    EngineConfig {
        targets: vec![addr],
        rate_rps: 2_000.0,
        duration_ns: 600_000_000,
        conns: 2,
        connect_timeout_ns: 1_000_000_000,
        unreachable_ns: 500_000_000,
        pin: false,
        busy_poll: false,
        protocol: Protocol::Redis { auth: Some(RedisAuth { user: None, password: password.into() }), db: Some(3) },
        ..EngineConfig::default()
    }
}

#[test]
fn every_connection_says_auth_and_select_first_and_their_replies_are_not_counted() {
    let (addr, seen) = redis(100);
    let r = Engine::start(config(addr, PASSWORD)).unwrap().join();
    every_connection_authenticated(&r, &seen);
}

/// A run against `redis(100)` (closing every connection after 100 GETs): ended without error, at
/// least 5 reconnects, AUTH and SELECT said once on every connection before any request, no error
/// reply, every GET the server answered ours (a GET lost with its connection is sent again), and
/// the setup replies not counted as requests.
fn every_connection_authenticated(r: &EngineResult, seen: &Seen) {
    assert!(r.error.is_none(), "{:?}", r.error);
    let c = r.counters;
    assert!(c.reconnects >= 5, "{c:?}");
    assert_eq!(seen.unauthenticated.load(Relaxed), 0, "a request came before AUTH");
    let conns = seen.conns.load(Relaxed);
    assert_eq!((seen.auths.load(Relaxed), seen.selects.load(Relaxed)), (conns, conns));
    assert_eq!((c.errors, c.misses), (0, c.received), "{:?}", r.error_reasons);
    assert!(seen.gets.load(Relaxed) >= c.received && c.received > 900, "{c:?}");
    assert_eq!(r.hist.latency.len(), c.intended, "the setup replies are not requests");
}

#[test]
fn a_wrong_password_is_refused_at_the_start_in_the_servers_words() {
    let (addr, seen) = redis(100);
    let e = Engine::start(config(addr, "wrong")).err().expect("refused");
    let text = format!("{e}: {}", e.remedy());
    assert!(text.contains("redis refused AUTH: WRONGPASS invalid username-password pair"), "{text}");
    assert!(text.contains("--redis-password-file") && !text.contains("wrong"), "{text}");
    assert_eq!(e.kind(), crate::error::Kind::Target);
    assert_eq!(seen.gets.load(Relaxed), 0);
}

#[test]
fn a_refusal_on_a_reconnect_ends_that_connection_with_the_servers_words() {
    let (addr, seen) = redis(50);
    let engine = Engine::start(config(addr, PASSWORD)).unwrap();
    seen.refuse.store(true, Relaxed); // the password changes once the run has started
    let r = engine.join();
    let e = r.error.expect("every connection refused");
    assert!(e.to_string().contains("last: redis refused AUTH: WRONGPASS"), "{e}");
    assert!(e.remedy().contains("check the user and the password"), "{}", e.remedy());
    assert!(r.counters.received > 0 && r.counters.reconnects > 0, "{:?}", r.counters);
}

#[test]
fn over_tls_auth_and_select_go_through_the_session_at_the_start_and_on_every_reconnect() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let (addr, seen) = redis_over(100, Some(pki.server_config()));
    let cfg = EngineConfig { tls: Some(trusting(&ca)), ..config(addr, PASSWORD) };
    let r = Engine::start(cfg).unwrap().join();
    // Every command the server read came out of its TLS session: a plaintext AUTH would have
    // broken the handshake, and a request before AUTH would be counted.
    every_connection_authenticated(&r, &seen);
    let c = r.counters;
    let t = r.tls.expect("a TLS run reports its handshakes");
    assert_eq!((t.full + t.resumed, t.failed), (2 + c.reconnects, 0), "{t:?} {c:?}");
}

#[test]
fn over_tls_a_connection_counts_its_handshakes_and_setups_bytes_as_written_before_any_request() {
    // The transmit-stamp keys of the first request start after them (conn.rs: `tx.base`).
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let (addr, seen) = redis_over(100, Some(pki.server_config()));
    let cfg = EngineConfig { tls: Some(trusting(&ca)), conns: 1, threads: 1, ..config(addr, PASSWORD) };
    let client = tls::Client::build(cfg.tls.as_ref().unwrap()).unwrap();
    let socks = connect::connect_all(&cfg, Some(&client)).unwrap();
    let Sock::Tls { wrote, .. } = &socks[0][0] else { panic!("a TLS connection") };
    assert_eq!(seen.selects.load(Relaxed), 1);
    assert_eq!(*wrote, seen.read_at_select.load(Relaxed));
}

#[test]
fn over_tls_kernel_stamps_count_the_setups_encrypted_bytes() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let (addr, _seen) = redis_over(200, Some(pki.server_config()));
    let cfg = EngineConfig { tls: Some(trusting(&ca)), timestamps: Timestamps::Kernel, ..config(addr, PASSWORD) };
    let r = Engine::start(cfg).unwrap().join();
    assert!(r.error.is_none(), "{:?}", r.error);
    let c = r.counters;
    assert!(c.reconnects >= 2, "{c:?}");
    // The handshake's and the setup's ciphertext counted before the first request's: every
    // request's transmit stamp found by its own last encrypted byte, at the start and on reconnects.
    assert!(c.tx_kernel as f64 >= 0.95 * c.received as f64, "{c:?}");
    for smp in r.samples.iter().filter(|s| s.tx_ns > 0) {
        assert!(smp.tx_ns >= smp.sent_ns && smp.tx_ns - smp.sent_ns < 50_000_000, "{smp:?}");
    }
}

#[test]
fn over_tls_a_wrong_password_is_refused_at_the_start_and_on_a_reconnect() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let (addr, seen) = redis_over(50, Some(pki.server_config()));
    let e = Engine::start(EngineConfig { tls: Some(trusting(&ca)), ..config(addr, "wrong") }).err().expect("refused");
    let text = format!("{e}: {}", e.remedy());
    assert!(text.contains("redis refused AUTH: WRONGPASS invalid username-password pair"), "{text}");
    assert!(!text.contains("wrong:") && !text.contains("\"wrong\""), "{text}");
    assert_eq!(seen.gets.load(Relaxed), 0);
    let engine = Engine::start(EngineConfig { tls: Some(trusting(&ca)), ..config(addr, PASSWORD) }).unwrap();
    seen.refuse.store(true, Relaxed);
    let r = engine.join();
    let e = r.error.expect("every connection refused");
    assert!(e.to_string().contains("last: redis refused AUTH: WRONGPASS"), "{e}");
    assert!(r.counters.received > 0 && r.counters.reconnects > 0, "{:?}", r.counters);
}
