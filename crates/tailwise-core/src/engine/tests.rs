use super::*;
use crate::dist::Dist;
use crate::server::{Server, ServerConfig};
use std::time::Duration;

fn server(service: &str) -> Server {
    Server::start(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        service: Dist::parse(service).unwrap(),
        seed: 3,
        pin: false,
        busy_poll: false,
    })
    .unwrap()
}

fn config(addr: SocketAddr, rate: f64, duration_ms: u64) -> EngineConfig {
    EngineConfig {
        targets: vec![addr],
        protocol: Protocol::Synthetic { service_ns: None, reply_pad: 0 },
        workload: Default::default(),
        rate_rps: rate,
        duration_ns: duration_ms * 1_000_000,
        threads: 1,
        conns: 2,
        outstanding: 4,
        arrival: Arrival::Exp,
        sample_every: 1,
        timeout_ns: 1_000_000_000,
        late_ns: 1_000_000,
        connect_timeout_ns: 1_000_000_000,
        seed: 11,
        pin: false,
        busy_poll: false,
    }
}

#[test]
fn counts_add_up_and_latency_exceeds_service_time() {
    let s = server("fixed:20us");
    let r = Engine::start(config(s.addr(), 2_000.0, 500)).unwrap().join();
    let c = r.counters;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(c.intended, c.sent + c.never_sent);
    assert_eq!(c.sent, c.received + c.errors + c.timeouts);
    assert_eq!(c.errors + c.timeouts, 0);
    // 1000 expected; Poisson s.d. ~32.
    assert!((800..1200).contains(&c.intended), "{c:?}");
    assert_eq!(r.hist.latency.len(), c.received);
    assert_eq!(r.samples.len() as u64, c.received, "k = 1 keeps every reply");
    // The server ends each service when its reply's write is expected to end (server/mod.rs), so
    // a write faster than its running estimate lets a reply out a little early: allow 5 µs.
    let min = r.hist.latency.min();
    assert!(min >= 15_000, "latency includes the 20 µs service, less the write estimate: min {min} ns");
    for smp in r.samples.iter() {
        assert!(smp.sent_ns >= smp.intended_ns);
        assert!(smp.latency_ns >= smp.sent_ns - smp.intended_ns);
    }
    assert_eq!(s.served(), c.received);
}

#[test]
fn several_threads_and_fixed_arrivals() {
    let s = server("fixed:0");
    let mut cfg = config(s.addr(), 4_000.0, 500);
    cfg.threads = 2;
    cfg.conns = 4;
    cfg.arrival = Arrival::Fixed;
    cfg.sample_every = 4;
    let r = Engine::start(cfg).unwrap().join();
    // Fixed gaps: exactly rate × duration, give or take one per thread.
    assert!((1_998..=2_002).contains(&r.counters.intended), "{:?}", r.counters);
    assert_eq!(r.counters.received, r.counters.sent);
    let kept = r.samples.len() as f64;
    assert!((kept - 500.0).abs() < 5.0 * (2000.0f64 * 0.25 * 0.75).sqrt(), "kept {kept}");
}

#[test]
fn refused_connection_is_a_clear_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let e = Engine::start(config(port, 1000.0, 100)).err().unwrap();
    assert!(e.contains("cannot connect") && e.contains("nothing listens"), "{e}");
}

#[test]
fn invalid_configs_are_refused() {
    let a: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut c = config(a, 0.0, 100);
    assert!(Engine::start(c.clone()).err().unwrap().contains("rate"));
    c.rate_rps = 1e12;
    assert!(Engine::start(c.clone()).err().unwrap().contains("--threads 100000"));
    c.rate_rps = 10.0;
    c.threads = 4;
    assert!(Engine::start(c).err().unwrap().contains("--conns 4"));
}

#[test]
fn a_server_that_goes_away_ends_the_run_with_what_was_measured() {
    let mut s = server("fixed:0");
    let engine = Engine::start(config(s.addr(), 5_000.0, 3_000)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    s.stop();
    let r = engine.join();
    let e = r.error.expect("the run must say why it stopped");
    assert!(e.contains("closed the connection") || e.contains("failed"), "{e}");
    assert!(r.counters.received > 500, "{:?}", r.counters);
    assert!(r.elapsed_ns < 2_000_000_000);
}

#[test]
fn a_server_that_never_answers_gives_timeouts() {
    // A listener that accepts (in the backlog) but never reads or replies.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(l.local_addr().unwrap(), 1_000.0, 300);
    cfg.timeout_ns = 100_000_000;
    let r = Engine::start(cfg).unwrap().join();
    assert_eq!(r.counters.received, 0);
    assert!(r.counters.timeouts >= 1, "{:?}", r.counters);
    assert_eq!(r.counters.sent, r.counters.timeouts + r.counters.errors);
    drop(l);
}

#[test]
fn garbage_replies_are_errors_with_a_reason() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let mut socks = Vec::new();
        for _ in 0..2 {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 24];
            let _ = s.read_exact(&mut b);
            let _ = s.write_all(b"HTTP/1.1 500 nope\r\n\r\n");
            socks.push(s);
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    });
    let r = Engine::start(config(addr, 1_000.0, 200)).unwrap().join();
    assert!(r.counters.errors >= 1);
    assert!(r.error_reasons.iter().any(|(why, _)| why.contains("malformed reply")), "{:?}", r.error_reasons);
    t.join().unwrap();
}

#[test]
fn samples_can_be_taken_while_the_run_goes_on() {
    let s = server("fixed:0");
    let e = Engine::start(config(s.addr(), 4_000.0, 600)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let early = e.take_samples();
    assert!(early.len() > 400, "{} samples after 300 ms at 4k req/s", early.len());
    let snap = e.snapshot();
    assert!(snap.intended >= snap.sent && snap.sent >= snap.received);
    let r = e.join();
    // Nothing lost or counted twice between the take and the join.
    assert_eq!(early.len() as u64 + r.samples.len() as u64, r.counters.received);
    let last_early = early.iter().map(|x| x.intended_ns).max().unwrap();
    assert!(r.samples.iter().all(|x| x.intended_ns > 0) && last_early > 0);
}

#[test]
fn memcached_workload_counts_gets_sets_hits_and_misses() {
    // `tailwise serve` speaks memcached's text protocol too.
    let s = server("fixed:0");
    let mut cfg = config(s.addr(), 3_000.0, 300);
    cfg.protocol = Protocol::MemcachedAscii;
    cfg.workload = crate::workload::Workload { keys: 50, set_fraction: 0.5, ..Default::default() };
    let r = Engine::start(cfg).unwrap().join();
    let c = r.counters;
    assert!(r.error.is_none(), "{:?} {:?}", r.error, r.error_reasons);
    assert_eq!(c.received, c.sent);
    assert_eq!(c.gets + c.sets, c.sent);
    assert_eq!(c.hits + c.misses, c.gets);
    assert_eq!(c.stored, c.sets);
    assert!((c.sets as f64 / c.sent as f64 - 0.5).abs() < 0.1, "{c:?}");
    // 50 keys and hundreds of sets: after the first few, nearly every get hits.
    assert!(c.hits > c.misses, "{c:?}");
}

/// A UDP echo server that drops every `drop_every`-th datagram.
fn lossy_udp_echo(drop_every: u64) -> (SocketAddr, Arc<AtomicBool>, std::thread::JoinHandle<u64>) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let addr = sock.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let h = std::thread::spawn(move || {
        let (mut buf, mut n) = ([0u8; 2048], 0u64);
        while !stop2.load(Relaxed) {
            if let Ok((len, from)) = sock.recv_from(&mut buf) {
                n += 1;
                if n % drop_every != 0 {
                    sock.send_to(&buf[..len], from).unwrap();
                }
            }
        }
        n
    });
    (addr, stop, h)
}

#[test]
fn lost_datagrams_are_timeouts_and_the_socket_goes_on() {
    let (addr, stop, h) = lossy_udp_echo(4);
    let mut cfg = config(addr, 2_000.0, 400);
    cfg.protocol = Protocol::UdpEcho { size: 100 };
    cfg.timeout_ns = 50_000_000;
    cfg.outstanding = 16;
    let r = Engine::start(cfg).unwrap().join();
    stop.store(true, Relaxed);
    let seen = h.join().unwrap();
    let c = r.counters;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(seen, c.sent, "every request is one datagram");
    assert_eq!(c.sent, c.received + c.timeouts + c.errors);
    assert_eq!(c.errors, 0);
    assert_eq!(c.timeouts, c.sent / 4, "every fourth datagram dropped");
    assert!(r.error_reasons.iter().any(|(why, _)| why.contains("datagram lost")), "{:?}", r.error_reasons);
}

/// Spin on `cpu` for `ms`: another task taking that CPU, as a preemption would.
fn hog(cpu: usize, ms: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        net::pin_to_cpu(cpu);
        crate::clock::spin_for(ms * 1_000_000);
    })
}

#[test]
fn a_thread_taking_the_engines_cpu_is_logged_as_stalls() {
    let s = server("fixed:0");
    let mut cfg = config(s.addr(), 2_000.0, 400);
    cfg.pin = true;
    cfg.busy_poll = true;
    let Some(&cpu) = net::allowed_cpus().last() else { return };
    let e = Engine::start(cfg).unwrap();
    // Two spinners on one CPU share it in scheduler slices of ms: the engine misses whole slices.
    hog(cpu, 150).join().unwrap();
    let r = e.join();
    assert!(!r.stall_intervals.is_empty(), "a CPU shared with a spinner for 150 ms shows as stalls");
    for &(a, b) in &r.stall_intervals {
        assert!(b - a >= crate::stall::MASK_STALL_NS && a >= r.start_mono_ns - 5_000_000, "{a} {b}");
    }
}
