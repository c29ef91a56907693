//! The UDP functions with real sockets on 127.0.0.1: exact counts, seen by a client and by the
//! function's counters.

use super::*;
use std::time::{Duration, Instant};

fn start(mode: UdpMode, impair: Impairments, workers: usize, busy_poll: bool) -> UdpFunction {
    let cfg = UdpConfig { listen: "127.0.0.1:0".parse().unwrap(), mode, impair, workers, pin: false, busy_poll };
    UdpFunction::start(cfg).unwrap()
}

fn impairs(d: Option<u64>, r: Option<u64>, u: Option<u64>) -> Impairments {
    Impairments::new(d, r, u).unwrap()
}

/// The packet mode's payload: magic "Tw", flow, seq, a 48-bit stamp; 18 bytes (a 64-byte frame).
fn payload(seq: u64) -> [u8; 18] {
    let mut p = [0u8; 18];
    p[..2].copy_from_slice(&0x5477u16.to_le_bytes());
    p[4..12].copy_from_slice(&seq.to_le_bytes());
    p
}

/// Send seqs 0..n from one connected socket, at most 32 beyond the highest seq answered (a
/// window that never fills the kernel's buffers, so only the function loses datagrams): the
/// seqs answered, in arrival order, until nothing more comes for 100 ms. A burst never ends on a
/// datagram the function holds (every `held`-th): its successor follows at once rather than
/// after an answer, which a loaded machine can delay past the 1 ms a held datagram waits.
fn exchange_holding(addr: SocketAddr, n: u64, held: Option<u64>) -> Vec<u64> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let (mut sent, mut next_wanted, mut got) = (0u64, 0u64, Vec::new());
    let mut buf = [0u8; 64];
    while sent < n {
        while sent < n && (sent - next_wanted < 32 || held.is_some_and(|h| sent % h == 0)) {
            s.send(&payload(sent)).unwrap();
            sent += 1;
        }
        let len = s.recv(&mut buf).expect("an answer within 2 s");
        assert_eq!(len, 18);
        let seq = u64::from_le_bytes(buf[4..12].try_into().unwrap());
        got.push(seq);
        next_wanted = next_wanted.max(seq + 1);
    }
    s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    while let Ok(len) = s.recv(&mut buf) {
        assert_eq!(len, 18);
        got.push(u64::from_le_bytes(buf[4..12].try_into().unwrap()));
    }
    got
}

fn exchange(addr: SocketAddr, n: u64) -> Vec<u64> {
    exchange_holding(addr, n, None)
}

/// (missing, duplicates, reordered) as a client counts them: a duplicate answers a seq already
/// answered; a reordered answer comes after the answer of a later seq.
fn seen(n: u64, answers: &[u64]) -> (u64, u64, u64) {
    let mut answered = vec![false; n as usize];
    let (mut dup, mut reordered, mut highest) = (0, 0, None);
    for &seq in answers {
        if std::mem::replace(&mut answered[seq as usize], true) {
            dup += 1;
        } else if highest.is_some_and(|h| seq < h) {
            reordered += 1;
        }
        highest = highest.max(Some(seq));
    }
    (answered.iter().filter(|a| !**a).count() as u64, dup, reordered)
}

#[test]
fn reflects_every_datagram_unchanged_in_order() {
    let mut f = start(UdpMode::Reflect, Impairments::default(), 1, false);
    let got = exchange(f.addr(), 2_000);
    assert_eq!(got, (0..2_000).collect::<Vec<_>>());
    f.stop();
    assert_eq!(f.counters(), UdpCounters { received: 2_000, sent: 2_000, ..Default::default() });
}

/// As impair.rs's long stream: 200 dropped, 200 duplicated, 257 held and each sent after the next
/// — or alone, when the client was held up past 1 ms before its next send (a loaded host): the
/// client sees exactly what the counters say.
fn assert_impaired_exactly(got: &[u64], c: UdpCounters) {
    assert_eq!(seen(2_000, got), (200, 200, c.reordered));
    assert_eq!(c.reordered + c.held_alone, 257, "{c:?}");
    let want = UdpCounters { received: 2_000, sent: 2_000, dropped: 200, duplicated: 200, ..c };
    assert_eq!(c, want);
}

#[test]
fn reflector_impairs_exactly() {
    let mut f = start(UdpMode::Reflect, impairs(Some(10), Some(7), Some(5)), 1, false);
    let got = exchange_holding(f.addr(), 2_000, Some(7));
    f.stop();
    assert_impaired_exactly(&got, f.counters());
    assert_eq!(f.counters().returned + f.counters().failed, 0);
}

#[test]
fn forwarder_relays_to_a_reflector_and_back_impairing_one_way() {
    let mut r = start(UdpMode::Reflect, Impairments::default(), 1, false);
    let mut f = start(UdpMode::Forward { to: r.addr() }, impairs(Some(10), Some(7), Some(5)), 1, false);
    let got = exchange_holding(f.addr(), 2_000, Some(7));
    f.stop();
    r.stop();
    assert_impaired_exactly(&got, f.counters());
    assert_eq!((f.counters().returned, f.counters().failed), (2_000, 0));
    assert_eq!(r.counters(), UdpCounters { received: 2_000, sent: 2_000, ..Default::default() });
}

#[test]
fn forwarder_keeps_each_client_apart() {
    let mut r = start(UdpMode::Reflect, Impairments::default(), 1, false);
    let mut f = start(UdpMode::Forward { to: r.addr() }, Impairments::default(), 1, false);
    let addr = f.addr();
    let clients: Vec<_> = (0..3).map(|_| std::thread::spawn(move || exchange(addr, 500))).collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), (0..500).collect::<Vec<_>>());
    }
    f.stop();
    r.stop();
    assert_eq!(f.counters().returned, 1_500);
    assert_eq!(f.counters().sent, 1_500);
}

#[test]
fn clients_beyond_the_table_reuse_the_slot_idle_longest() {
    let ep = Epoll::new(8).unwrap();
    let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut t = Clients::new(to, 2);
    let a: Vec<SocketAddr> = (1..=3).map(|p| SocketAddr::from(([127, 0, 0, 1], 40_000 + p))).collect();
    assert_eq!(t.slot_for(a[0], 10, &ep).unwrap(), 0);
    assert_eq!(t.slot_for(a[1], 20, &ep).unwrap(), 1);
    assert_eq!(t.slot_for(a[0], 30, &ep).unwrap(), 0, "known: the same slot, now the latest");
    assert_eq!(t.slot_for(a[2], 40, &ep).unwrap(), 1, "full: a[1] idle longest gives its slot");
    assert_eq!(t.by_addr.len(), 2);
    assert!(!t.by_addr.contains_key(&a[1]));
    assert_eq!(t.slot_for(a[1], 50, &ep).unwrap(), 0, "back: takes a[0]'s, idle longest now");
}

#[test]
fn a_held_datagram_without_successor_goes_alone_after_a_millisecond() {
    let mut f = start(UdpMode::Reflect, impairs(None, Some(1), None), 1, false);
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(f.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let t0 = Instant::now();
    s.send(&payload(0)).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(s.recv(&mut buf).unwrap(), 18);
    assert!(t0.elapsed() >= Duration::from_nanos(crate::server::impair::HOLD_NS));
    f.stop();
    let want = UdpCounters { received: 1, sent: 1, held_alone: 1, ..Default::default() };
    assert_eq!(f.counters(), want, "sent alone: not reordered");
}

#[test]
fn several_spinning_workers_answer_every_client() {
    let mut f = start(UdpMode::Reflect, Impairments::default(), 2, true);
    let addr = f.addr();
    let clients: Vec<_> = (0..4).map(|_| std::thread::spawn(move || exchange(addr, 300))).collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), (0..300).collect::<Vec<_>>());
    }
    f.stop();
    assert_eq!(f.counters(), UdpCounters { received: 1_200, sent: 1_200, ..Default::default() });
}

#[test]
fn refuses_what_it_cannot_do() {
    let cfg = |workers, listen: &str| UdpConfig {
        listen: listen.parse().unwrap(),
        mode: UdpMode::Reflect,
        impair: Impairments::default(),
        workers,
        pin: false,
        busy_poll: false,
    };
    assert!(matches!(UdpFunction::start(cfg(0, "127.0.0.1:0")), Err(UdpFunctionError::NoWorkers)));
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap(); // without SO_REUSEPORT: not shareable
    let e = UdpFunction::start(cfg(1, &taken.local_addr().unwrap().to_string())).err().unwrap();
    assert!(matches!(e, UdpFunctionError::Listen { .. }) && e.kind() == Kind::Target);
    assert!(matches!(UdpMode::parse("forward", None), Err(UdpFunctionError::ForwardWithoutTo)));
    assert!(matches!(UdpMode::parse("reflect", Some(taken.local_addr().unwrap())), Err(UdpFunctionError::ReflectTo)));
    assert!(matches!(UdpMode::parse("nat", None), Err(UdpFunctionError::UnknownMode(_))));
}
