//! Client codec cost per request: encode one GET and parse one reply (200-byte value) from a
//! buffer of 64 pipelined replies, through `Box<dyn Codec>` as the engine calls it.
//!
//! `cargo bench -p tailwise-core --bench codecs -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tailwise_core::protocol::memcached::{binary, udp};
use tailwise_core::protocol::{synthetic, Codec, OpKind, Parsed, Protocol, Request};

const N: usize = 64;
const VALUE: usize = 200;

fn key(i: usize) -> Vec<u8> {
    format!("key:{i:010}").into_bytes()
}

/// A stream protocol: `N` replies back to back.
fn stream(p: Protocol, reply: impl Fn(usize, &mut Vec<u8>)) -> (Protocol, Vec<u8>) {
    let mut s = Vec::new();
    for i in 0..N {
        reply(i, &mut s);
    }
    (p, s)
}

fn bench_stream(c: &mut Criterion, name: &str, (p, s): (Protocol, Vec<u8>)) {
    let mut g = c.benchmark_group("codec");
    g.throughput(Throughput::Elements(N as u64));
    let mut codec = p.codec();
    let key = key(7);
    let mut out = Vec::with_capacity(N * 64);
    g.bench_function(name, |b| {
        b.iter(|| {
            out.clear();
            let mut pos = 0;
            for i in 0..N {
                codec.encode(&Request { id: i as u64, kind: OpKind::Get, key: &key, value: b"", request: 0 }, &mut out);
                match codec.parse(black_box(&s[pos..])) {
                    Parsed::Reply { len, .. } => pos += len,
                    other => panic!("{name}: {other:?}"),
                }
            }
            black_box(&out);
        })
    });
    g.finish();
}

fn bench_datagrams(c: &mut Criterion, name: &str, p: Protocol, ds: Vec<Vec<u8>>) {
    let mut g = c.benchmark_group("codec");
    g.throughput(Throughput::Elements(N as u64));
    let mut codec: Box<dyn Codec> = p.codec();
    let key = key(7);
    let mut out = Vec::with_capacity(2048);
    g.bench_function(name, |b| {
        b.iter(|| {
            for (i, d) in ds.iter().enumerate() {
                out.clear();
                codec.encode(&Request { id: i as u64, kind: OpKind::Get, key: &key, value: b"", request: 0 }, &mut out);
                black_box(&out);
                match codec.parse(black_box(d)) {
                    Parsed::Reply { .. } => {}
                    other => panic!("{name}: {other:?}"),
                }
            }
        })
    });
    g.finish();
}

fn codecs(c: &mut Criterion) {
    let value = vec![b'v'; VALUE];
    let ascii_hit = |i: usize, s: &mut Vec<u8>| {
        s.extend_from_slice(b"VALUE ");
        s.extend_from_slice(&key(i));
        s.extend_from_slice(format!(" 0 {VALUE}\r\n").as_bytes());
        s.extend_from_slice(&value);
        s.extend_from_slice(b"\r\nEND\r\n");
    };
    bench_stream(c, "memcached", stream(Protocol::MemcachedAscii, ascii_hit));
    bench_stream(
        c,
        "memcached+binary",
        stream(Protocol::MemcachedBinary, |i, s| {
            binary::encode_reply(binary::OP_GETK, 0, i as u32, &key(i), &value, s)
        }),
    );
    bench_stream(
        c,
        "redis",
        stream(Protocol::Redis { auth: None, db: None }, |_, s| {
            s.extend_from_slice(format!("${VALUE}\r\n").as_bytes());
            s.extend_from_slice(&value);
            s.extend_from_slice(b"\r\n");
        }),
    );
    let http = Protocol::named("http").unwrap();
    let head = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sat, 22 Nov 2025 05:06:00 GMT\r\n\
                Content-Type: text/html\r\nConnection: keep-alive\r\n";
    bench_stream(
        c,
        "http",
        stream(http.clone(), |_, s| {
            s.extend_from_slice(format!("{head}Content-Length: {VALUE}\r\n\r\n").as_bytes());
            s.extend_from_slice(&value);
        }),
    );
    bench_stream(
        c,
        "http+chunked",
        stream(http, |_, s| {
            s.extend_from_slice(format!("{head}Transfer-Encoding: chunked\r\n\r\n{VALUE:x}\r\n").as_bytes());
            s.extend_from_slice(&value);
            s.extend_from_slice(b"\r\n0\r\n\r\n");
        }),
    );
    bench_stream(
        c,
        "synthetic",
        stream(Protocol::Synthetic { service_ns: None, reply_pad: VALUE as u32 }, |i, s| {
            synthetic::encode_reply(i as u64, 0, VALUE as u32, s)
        }),
    );
    let udp_ds = (0..N)
        .map(|i| {
            let mut text = Vec::new();
            ascii_hit(i, &mut text);
            udp::encode_reply(i as u16, &text, 1400).remove(0)
        })
        .collect();
    bench_datagrams(c, "memcached+udp", Protocol::MemcachedUdp, udp_ds);
    let echo_ds = (0..N)
        .map(|i| {
            let mut d = (i as u64).to_le_bytes().to_vec();
            d.resize(VALUE, 0);
            d
        })
        .collect();
    bench_datagrams(c, "udp-echo", Protocol::UdpEcho { size: VALUE }, echo_ds);
}

criterion_group!(benches, codecs);
criterion_main!(benches);
