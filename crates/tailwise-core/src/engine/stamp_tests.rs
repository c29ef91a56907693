//! Kernel transmit and receive stamps against a server that records, on the same CLOCK_MONOTONIC,
//! when it read each request and when it wrote each reply's last bytes: a request's transmit stamp
//! must be that of the send that carried its last byte (pipelined requests, partial writes), and a
//! reply's receive stamp that of the segment that completed it (replies split over segments).

use super::*;
use crate::load::schedule::Arrival;
use std::net::SocketAddr;
use crate::load::workload::{SizeDist, Workload};
use crate::protocol::Protocol;
use crate::record::{flags as F, sample::Sample};
use crate::time::clock::now_ns;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// What the server saw, per request in stream order (CLOCK_MONOTONIC ns, each read after it
/// returned): the read that brought its first byte, the one that brought its last, and for gets
/// the time just before the write of its reply's last chunk.
#[derive(Default, Debug)]
struct Seen {
    first: Vec<u64>,
    last: Vec<u64>,
    last_chunk: Vec<u64>,
    /// Each request's end as a stream offset, and every read as (time, stream offset after it).
    end: Vec<u64>,
    reads: Vec<(u64, u64)>,
}

struct Slow {
    /// Bytes per read, and a pause after each (a slow reader makes the client's writes partial).
    read_chunk: usize,
    read_pause: Duration,
    /// Gets: a reply of this many value bytes, written in chunks with a pause between them.
    value_len: usize,
    reply_chunk: usize,
    reply_pause: Duration,
}

/// A memcached text server for one connection (set → STORED, get → one value) that records `Seen`.
fn slow_server(slow: Slow) -> (SocketAddr, std::thread::JoinHandle<Seen>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let mss: libc::c_int = 1_000;
    // SAFETY: a valid c_int option of its size. A small segment size (lo's is 64 KB) keeps the
    // client's send buffer small (the kernel sizes it by cwnd × segment), so that its writes of
    // 1 MB requests are partial.
    unsafe {
        libc::setsockopt(l.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_MAXSEG, &mss as *const _ as *const libc::c_void, 4);
    }
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let small: libc::c_int = 16 << 10;
        // SAFETY: a valid c_int option of its size. A small receive buffer: the client's writes of
        // 1 MB requests must be partial.
        unsafe {
            libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &small as *const _ as *const libc::c_void, 4);
        }
        let mut seen = Seen::default();
        let mut buf: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; slow.read_chunk];
        let mut first: Option<u64> = None;
        let (mut got, mut consumed) = (0u64, 0u64);
        let value: Vec<u8> = (0..slow.value_len).map(|i| b'a' + (i % 26) as u8).collect();
        loop {
            let n = match s.read(&mut chunk) {
                Ok(0) | Err(_) => return seen,
                Ok(n) => n,
            };
            let t = now_ns();
            got += n as u64;
            seen.reads.push((t, got));
            buf.extend_from_slice(&chunk[..n]);
            first.get_or_insert(t);
            while let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&buf[..eol]).to_string();
                let words: Vec<&str> = line.split_whitespace().collect();
                let need = if words[0] == "set" { eol + 2 + words[4].parse::<usize>().unwrap() + 2 } else { eol + 2 };
                if buf.len() < need {
                    break;
                }
                buf.drain(..need);
                consumed += need as u64;
                seen.end.push(consumed);
                seen.first.push(first.unwrap());
                seen.last.push(t);
                first = if buf.is_empty() { None } else { Some(t) };
                if words[0] == "set" {
                    s.write_all(b"STORED\r\n").unwrap();
                } else {
                    let mut reply = format!("VALUE {} 0 {}\r\n", words[1], value.len()).into_bytes();
                    reply.extend_from_slice(&value);
                    reply.extend_from_slice(b"\r\nEND\r\n");
                    let mut parts = reply.chunks(slow.reply_chunk).peekable();
                    while let Some(p) = parts.next() {
                        if parts.peek().is_none() {
                            seen.last_chunk.push(now_ns());
                        }
                        s.write_all(p).unwrap();
                        if parts.peek().is_some() {
                            std::thread::sleep(slow.reply_pause);
                        }
                    }
                }
            }
            std::thread::sleep(slow.read_pause);
        }
    });
    (addr, t)
}

fn config(addr: SocketAddr, rate: f64, duration_ms: u64, outstanding: usize, workload: Workload) -> EngineConfig {
    EngineConfig {
        targets: vec![addr],
        protocol: Protocol::MemcachedAscii,
        workload,
        rate_rps: rate,
        duration_ns: duration_ms * 1_000_000,
        conns: 1,
        outstanding,
        arrival: Arrival::Fixed,
        timeout_ns: 3_000_000_000,
        late_ns: 1_000_000,
        connect_timeout_ns: 1_000_000_000,
        seed: 5,
        pin: false,
        busy_poll: false,
        timestamps: Timestamps::Kernel,
        ..EngineConfig::default()
    }
}

fn workload(value: f64, set_fraction: f64) -> Workload {
    Workload { keys: 1, value_size: SizeDist::Fixed(value), set_fraction, ..Default::default() }
}

/// Run, then pair each answered sample (in stream order: one connection) with what the server saw.
fn run(cfg: EngineConfig, t: std::thread::JoinHandle<Seen>) -> (Vec<Sample>, Seen, u64) {
    let r = Engine::start(cfg).unwrap().join();
    assert!(r.error.is_none(), "{:?}", r.error);
    // Shown with a failure: what the engine counted, and its stalls as (start, length) in µs.
    let stalls: Vec<_> = r.stall_intervals.iter().map(|&(a, b)| ((a - r.start_mono_ns) / 1_000, (b - a) / 1_000)).collect();
    eprintln!("engine: {:?}; reasons {:?}; stalls {stalls:?}", r.counters, r.error_reasons);
    let seen = t.join().unwrap();
    let mut done: Vec<Sample> = r.samples.iter().copied().filter(|x| x.flags() & F::CENSORED == 0).collect();
    done.sort_by_key(|x| x.intended_ns);
    assert_eq!(r.counters.sent, r.counters.received, "{:?}", r.counters);
    assert_eq!(seen.last.len() as u64, r.counters.sent);
    (done, seen, r.start_mono_ns)
}

/// Conversion from CLOCK_REALTIME may err by a little (time/clock.rs, `realtime_offset_ns`).
const SLACK_NS: u64 = 2_000;

#[test]
fn pipelined_requests_get_the_stamp_of_the_send_that_carried_them() {
    // 20k req/s, 8 outstanding on one connection: requests due together go in one write.
    let (addr, t) = slow_server(Slow {
        read_chunk: 64 << 10,
        read_pause: Duration::ZERO,
        value_len: 32,
        reply_chunk: 1 << 20,
        reply_pause: Duration::ZERO,
    });
    let mut cfg = config(addr, 20_000.0, 300, 8, workload(32.0, 0.5));
    cfg.arrival = Arrival::Exp;
    let (done, seen, t0) = run(cfg, t);
    assert!(done.len() > 4_000, "{}", done.len());
    let mut shared = 0;
    for (i, x) in done.iter().enumerate() {
        assert!(x.flags() & F::KERNEL_TX != 0 && x.flags() & F::KERNEL_RX != 0, "{x:?}");
        let tx = t0 + x.tx_ns;
        assert!(x.sent_ns <= x.tx_ns, "stamped before its write began: {x:?}");
        assert!(tx <= seen.last[i] + SLACK_NS, "request {i} stamped after the server read it: {x:?}");
        assert!(x.intended_ns + x.latency_ns <= x.rx_user_ns, "{x:?}");
        if i > 0 {
            assert!(x.tx_ns >= done[i - 1].tx_ns, "stamps out of stream order at {i}");
            shared += (x.tx_ns == done[i - 1].tx_ns) as usize;
        }
    }
    assert!(shared > 0, "no write carried two requests: the test did not pipeline");
}

#[test]
fn a_request_written_in_parts_gets_the_stamp_of_its_last_byte() {
    // 1 MB sets to a server that reads at most 64 KB each 2 ms through a small receive buffer:
    // every request takes many partial writes, and its last byte can leave only once the server
    // has read all but a window of it. The window (what the client may have sent and the server
    // not yet read) stays under 512 KB: the receive buffer is 16 KB, the window advertised before
    // it was set at most 128 KB (tcp_rmem).
    let (addr, t) = slow_server(Slow {
        read_chunk: 64 << 10,
        read_pause: Duration::from_millis(2),
        value_len: 0,
        reply_chunk: 1 << 20,
        reply_pause: Duration::ZERO,
    });
    let (done, seen, t0) = run(config(addr, 10.0, 500, 4, workload(1_000_000.0, 1.0)), t);
    assert!(done.len() >= 4, "{}", done.len());
    for (i, x) in done.iter().enumerate() {
        assert!(x.flags() & F::KERNEL_TX != 0, "{x:?}");
        let tx = t0 + x.tx_ns;
        assert!(tx <= seen.last[i] + SLACK_NS, "request {i}: stamped after the server read its last byte");
        // The last time the server had read no further than 512 KB short of the request's end:
        // its last byte had not been sent yet then. A stamp of an earlier part comes before.
        let before = seen.reads.iter().filter(|(_, off)| off + (512 << 10) <= seen.end[i]).map(|(t, _)| *t).max();
        let before = before.unwrap_or(0);
        assert!(tx > before, "request {i}: stamped {} µs before its last byte could leave", (before - tx) / 1_000);
        assert!(before > seen.first[i], "request {i}: the test did not hold its writes back");
        // Its first write began long before its last byte left.
        assert!(x.tx_ns - x.sent_ns > 5_000_000, "request {i}: {} ns from first write to last byte", x.tx_ns - x.sent_ns);
    }
}

#[test]
fn a_reply_split_over_segments_gets_the_stamp_of_its_last_segment() {
    // 1 MB values written in 64 KB chunks 1 ms apart: the reply ends with its last chunk.
    let (addr, t) = slow_server(Slow {
        read_chunk: 64 << 10,
        read_pause: Duration::ZERO,
        value_len: 1_000_000,
        reply_chunk: 64 << 10,
        reply_pause: Duration::from_millis(1),
    });
    let (done, seen, t0) = run(config(addr, 10.0, 500, 4, workload(1_000_000.0, 0.0)), t);
    assert!(done.len() >= 4, "{}", done.len());
    for (i, x) in done.iter().enumerate() {
        assert!(x.flags() & F::KERNEL_RX != 0, "{x:?}");
        let rx = t0 + x.intended_ns + x.latency_ns;
        assert!(rx + SLACK_NS >= seen.last_chunk[i], "reply {i}: stamped before its last chunk was written");
        assert!(x.intended_ns + x.latency_ns <= x.rx_user_ns, "{x:?}");
        assert!(x.tx_ns <= x.intended_ns + x.latency_ns, "{x:?}");
    }
}

#[test]
fn every_datagram_gets_the_stamp_of_its_own_send() {
    let (addr, stop, t) = super::tests::udp_echo(Duration::ZERO);
    let mut cfg = config(addr, 5_000.0, 300, 4, Workload::default());
    cfg.protocol = Protocol::UdpEcho { size: 64 };
    cfg.conns = 2;
    cfg.arrival = Arrival::Exp;
    let r = Engine::start(cfg).unwrap().join();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    t.join().unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    let done: Vec<&Sample> = r.samples.iter().filter(|x| x.flags() & F::CENSORED == 0).collect();
    assert!(done.len() > 1_000, "{}", done.len());
    assert_eq!(r.counters.tx_kernel, r.counters.received);
    for x in &done {
        assert!(x.flags() & F::KERNEL_TX != 0 && x.flags() & F::KERNEL_RX != 0, "{x:?}");
        assert!(x.sent_ns <= x.tx_ns && x.tx_ns <= x.intended_ns + x.latency_ns, "{x:?}");
    }
    // Each stamp is its own send's: two datagrams never share one (one send each).
    let mut stamps: Vec<u64> = done.iter().map(|x| x.tx_ns).collect();
    stamps.sort_unstable();
    stamps.dedup();
    assert_eq!(stamps.len(), done.len(), "two datagrams got the same transmit stamp");
}
