//! The packet path end to end against a reflector thread written here: a plain UDP socket that
//! sends every datagram back, and on purpose drops every N-th, holds one back behind the next,
//! or sends one twice — so that every count is known exactly.

use crate::engine::{Counters, Engine, EngineConfig};
use crate::protocol::Protocol;
use crate::record::flags as F;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Clone, Copy, Default)]
struct Impair {
    drop_every: u64,
    reorder_every: u64,
    duplicate_every: u64,
}

/// What the reflector did: datagrams received, dropped, held back and sent after the next, sent twice.
#[derive(Debug, Default, PartialEq, Eq)]
struct Did {
    received: u64,
    dropped: u64,
    reordered: u64,
    duplicated: u64,
}

fn reflector(imp: Impair) -> (SocketAddr, Arc<AtomicBool>, JoinHandle<Did>) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let addr = s.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let h = std::thread::spawn(move || {
        let (mut did, mut buf) = (Did::default(), [0u8; 2048]);
        let mut held: Option<(Vec<u8>, SocketAddr)> = None;
        let every = |n: u64, k: u64| n > 0 && k % n == 0;
        while !stopped.load(Relaxed) {
            let Ok((n, from)) = s.recv_from(&mut buf) else {
                // Nothing within 1 ms: a held datagram goes alone (then not reordered).
                if let Some((d, to)) = held.take() {
                    s.send_to(&d, to).unwrap();
                    did.reordered -= 1;
                }
                continue;
            };
            did.received += 1;
            let k = did.received;
            if every(imp.drop_every, k) {
                did.dropped += 1;
                continue;
            }
            if every(imp.reorder_every, k) && held.is_none() {
                held = Some((buf[..n].to_vec(), from));
                did.reordered += 1;
                continue;
            }
            s.send_to(&buf[..n], from).unwrap();
            if every(imp.duplicate_every, k) {
                s.send_to(&buf[..n], from).unwrap();
                did.duplicated += 1;
            }
            if let Some((d, to)) = held.take() {
                s.send_to(&d, to).unwrap();
            }
        }
        did
    });
    (addr, stop, h)
}

fn config(addr: SocketAddr, rate: f64, ms: u64, flows: usize) -> EngineConfig {
    EngineConfig {
        targets: vec![addr],
        rate_rps: rate,
        duration_ns: ms * 1_000_000,
        protocol: Protocol::UdpFlow { size: 64, flows },
        arrival: crate::load::schedule::Arrival::Fixed,
        timeout_ns: 100_000_000,
        late_ns: 1_000_000,
        unreachable_ns: 500_000_000,
        seed: 5,
        pin: false,
        busy_poll: false,
        ..EngineConfig::default()
    }
}

fn run(imp: Impair, cfg: impl FnOnce(SocketAddr) -> EngineConfig) -> (crate::engine::EngineResult, Did, Vec<(u64, u64, u64, u64, u64, u64)>) {
    let (addr, stop, h) = reflector(imp);
    let e = Engine::start(cfg(addr)).unwrap();
    let packets = e.packets();
    let r = e.join();
    stop.store(true, Relaxed);
    let rows = packets.lock().unwrap().rows();
    (r, h.join().unwrap(), rows)
}

/// The invariants of every packet run, and the interval counts adding up to the counters.
fn check(c: &Counters, rows: &[(u64, u64, u64, u64, u64, u64)]) {
    assert_eq!(c.intended, c.sent + c.never_sent, "{c:?}");
    assert_eq!(c.sent, c.received + c.lost, "each packet answered or lost, once: {c:?}");
    assert_eq!(c.timeouts + c.unfinished, c.lost, "{c:?}");
    let sum = |f: fn(&(u64, u64, u64, u64, u64, u64)) -> u64| rows.iter().map(f).sum::<u64>();
    assert_eq!(
        (sum(|r| r.1), sum(|r| r.2), sum(|r| r.3), sum(|r| r.4), sum(|r| r.5)),
        (c.sent, c.received, c.lost, c.reordered, c.duplicates)
    );
}

#[test]
fn every_packet_is_answered_on_a_clean_path() {
    let (r, did, rows) = run(Impair::default(), |a| config(a, 5_000.0, 400, 3));
    let c = r.counters;
    assert!(r.error.is_none(), "{:?}", r.error);
    check(&c, &rows);
    assert_eq!((c.lost, c.reordered, c.duplicates, c.never_sent), (0, 0, 0, 0), "{c:?}");
    assert_eq!(did.received, c.sent);
    assert!((1_900..=2_100).contains(&c.sent), "{c:?}");
    assert_eq!(r.hist.latency.len(), c.sent, "every packet in the histogram");
    assert_eq!(r.hist.packets.as_ref().unwrap().total(), c.received, "every answer at 100 ns");
    assert_eq!(r.samples.len() as u64, c.sent, "sample_every 1 keeps every packet");
    assert!(r.samples.iter().all(|s| s.flags() & F::CENSORED == 0 && s.latency_ns > 0));
    assert_eq!(rows.len(), 4, "four 100 ms intervals");
}

#[test]
fn dropped_packets_are_lost_exactly_and_censored_as_timeouts() {
    let imp = Impair { drop_every: 7, ..Impair::default() };
    let (r, did, rows) = run(imp, |a| config(a, 5_000.0, 400, 1));
    let c = r.counters;
    check(&c, &rows);
    assert_eq!(c.lost, did.dropped, "{c:?} {did:?}");
    assert_eq!(c.lost, c.sent / 7);
    assert_eq!((c.reordered, c.duplicates), (0, 0));
    let lost = r.samples.iter().filter(|s| s.flags() & F::TIMEOUT != 0).count() as u64;
    assert_eq!(lost, c.lost, "a lost packet stays in the samples, censored");
    assert_eq!(r.hist.packets.as_ref().unwrap().total(), c.received, "answers only at 100 ns");
    assert!(r.samples.iter().filter(|s| s.flags() & F::TIMEOUT != 0).all(|s| s.latency_ns >= 100_000_000));
}

#[test]
fn reordering_and_duplicates_are_counted_exactly() {
    let imp = Impair { reorder_every: 5, duplicate_every: 11, ..Impair::default() };
    let (r, did, rows) = run(imp, |a| config(a, 5_000.0, 400, 1));
    let c = r.counters;
    check(&c, &rows);
    assert_eq!(c.lost, 0, "{c:?}");
    assert_eq!(c.reordered, did.reordered, "{c:?} {did:?}");
    // Every 5th is held; one that waits 1 ms for the next goes alone (a busy host's gap), so
    // the exact count is the reflector's, and most holds reorder.
    assert!(c.reordered * 2 >= c.sent / 5, "{c:?}");
    assert_eq!(c.reorder_max, 1, "held behind one packet");
    assert_eq!(c.duplicates, did.duplicated);
    assert_eq!(c.duplicates, c.sent / 11 - c.sent / 55, "a held datagram (every 5th) is not also sent twice here");
}

#[test]
fn many_flows_over_threads_count_per_flow() {
    let imp = Impair { drop_every: 10, duplicate_every: 13, ..Impair::default() };
    let (r, did, rows) = run(imp, |a| EngineConfig { threads: 2, ..config(a, 10_000.0, 300, 8) });
    let c = r.counters;
    check(&c, &rows);
    assert_eq!((c.lost, c.duplicates), (did.dropped, did.duplicated), "{c:?} {did:?}");
}

#[test]
fn nothing_listening_ends_the_run_as_unanswered() {
    let free = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let r = Engine::start(config(free, 2_000.0, 300, 1)).unwrap().join();
    let c = r.counters;
    assert_eq!(c.sent, c.lost, "{c:?}");
    assert!(r.error.is_some());
}

#[test]
fn kernel_stamps_time_every_answer() {
    let (r, _, rows) = run(Impair::default(), |a| EngineConfig {
        timestamps: crate::engine::Timestamps::Kernel,
        ..config(a, 5_000.0, 300, 2)
    });
    let c = r.counters;
    check(&c, &rows);
    assert_eq!(c.rx_kernel, c.received, "{c:?}");
    assert!(r.samples.iter().all(|s| s.flags() & F::KERNEL_RX != 0 && s.rx_user_ns >= s.sent_ns));
}

#[test]
fn packets_carry_their_thread_and_the_client_idle_instant() {
    let (r, _, rows) = run(Impair::default(), |a| EngineConfig { threads: 2, ..config(a, 4_000.0, 300, 2) });
    check(&r.counters, &rows);
    let idle = crate::engine::busy::assert_busy_from_sound(r.samples.iter());
    assert!(idle > 0 && r.samples.iter().any(|s| s.busy_from_ns > 0), "{idle}");
    for t in 0..2 {
        assert!(r.samples.iter().any(|s| s.thread == t), "no packet of thread {t}");
    }
    assert!(r.samples.iter().all(|s| s.thread < 2 && s.slot_wait_ns == 0));
}

/// Issue 33: an agent bounds the rows a thread gathers between two takes (`Engine::thin_rows`);
/// past it the thread thins them by the statistics' own keys, and each take says the level. The
/// rows of every take and of the end, pooled at the highest level, are exactly the rows of the
/// run a subsample at that level keeps: every packet's (fixed arrivals: packet k intended at
/// k × 50 µs, each ends as one row), not one more or less — whatever the takes' timing.
#[test]
fn rows_thinned_past_the_bound_are_exactly_one_levels_of_the_run() {
    use crate::record::thin::keeps;
    let base = 2 << 16;
    let (addr, stop, h) = reflector(Impair::default());
    let e = Engine::start(config(addr, 20_000.0, 500, 1)).unwrap();
    e.thin_rows(300, base);
    let mut got: Vec<(u32, Vec<crate::record::sample::Sample>)> = Vec::new();
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(100));
        let t = e.take(1_000_000_000);
        assert!(t.pending.iter().all(|s| keeps(s, t.thinned_level, base)));
        got.push((t.thinned_level, t.samples.iter().copied().collect()));
    }
    let r = e.join();
    stop.store(true, Relaxed);
    h.join().unwrap();
    got.push((r.thinned_level, r.samples.iter().copied().collect()));
    let top = got.iter().map(|(l, _)| *l).max().unwrap();
    assert!(top >= 2, "2,000 rows a take past a bound of 300: {:?}", got.iter().map(|(l, r)| (*l, r.len())).collect::<Vec<_>>());
    for (level, rows) in &got {
        assert!(rows.iter().all(|s| keeps(s, *level, base)), "a take's rows are of its level");
    }
    let mut pooled: Vec<u64> =
        got.iter().flat_map(|(_, rows)| rows.iter()).filter(|s| keeps(s, top, base)).map(|s| s.intended_ns).collect();
    pooled.sort_unstable();
    let gap = 50_000;
    let want: Vec<u64> = (0..r.counters.intended)
        .map(|k| k * gap)
        .filter(|&t| keeps(&crate::record::sample::Sample { intended_ns: t, ..Default::default() }, top, base))
        .collect();
    assert_eq!(pooled, want, "level {top} of {} packets", r.counters.intended);
}
