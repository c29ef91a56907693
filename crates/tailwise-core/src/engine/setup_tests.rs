//! The engine's setup commands (setup.rs) against a small Redis of the test's own that requires
//! AUTH and closes connections: the first connections and every reconnect say AUTH and SELECT
//! before any request, their replies are never counted, and a refusal is the server's words.

use super::*;
use crate::error::Problem;
use crate::protocol::{Protocol, RedisAuth};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
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
}

/// One RESP command (an array of bulk strings), None at the end of the stream.
fn command(r: &mut BufReader<TcpStream>) -> Option<Vec<Vec<u8>>> {
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
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut w) = conn else { return };
            let s = s.clone();
            s.conns.fetch_add(1, Relaxed);
            std::thread::spawn(move || {
                let mut r = BufReader::new(w.try_clone().unwrap());
                let (mut authed, mut gets) = (false, 0);
                while let Some(args) = command(&mut r) {
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
                            b"+OK\r\n"
                        }
                        _ => {
                            gets += 1;
                            s.gets.fetch_add(1, Relaxed);
                            b"$-1\r\n"
                        }
                    };
                    if w.write_all(reply).is_err() || gets == per_conn {
                        return; // closed: the client reconnects
                    }
                }
            });
        }
    });
    (addr, seen)
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
    assert!(r.error.is_none(), "{:?}", r.error);
    let c = r.counters;
    assert!(c.reconnects >= 5, "{c:?}");
    assert_eq!(seen.unauthenticated.load(Relaxed), 0, "a request came before AUTH");
    let conns = seen.conns.load(Relaxed);
    assert_eq!((seen.auths.load(Relaxed), seen.selects.load(Relaxed)), (conns, conns));
    assert_eq!(c.errors, 0, "{:?}", r.error_reasons);
    // Every GET the server answered is ours, once (a GET lost with its connection is sent again).
    assert_eq!(c.misses, c.received);
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
