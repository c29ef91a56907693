//! `tailwise load`: store every key of a workload once, so that a measured run's gets hit.
//!
//! Not a timed path: blocking sockets, one thread per connection, each storing its own range of
//! key indices with `depth` sets pipelined per round trip. memcached over UDP is preloaded over
//! TCP on the same port (memcached listens on both), since UDP sets could be lost silently.
//! Over TLS (the engine's `tls` settings) each connection's handshake is engine/tls.rs's, then its
//! setup and sets go through the session (a blocking `rustls::StreamOwned`).

use crate::engine::count_reason;
use crate::engine::setup::{self, Setup, SetupError};
use crate::engine::tls::{Client, HandshakeError, TlsConfig, TlsError};
use crate::error::{Kind, Problem};
use crate::load::workload::{Workload, WorkloadError};
use crate::protocol::{OpKind, Outcome, Parsed, Protocol, Request};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct PreloadConfig {
    pub target: SocketAddr,
    pub protocol: Protocol,
    pub workload: Workload,
    pub conns: usize,
    /// Sets in flight per connection.
    pub depth: usize,
    pub timeout_ns: u64,
    /// TLS to the target (the engine's settings), None in plaintext.
    pub tls: Option<TlsConfig>,
}

#[derive(Clone, Debug, Default)]
pub struct PreloadResult {
    pub stored: u64,
    pub errors: u64,
    pub error_reasons: Vec<(String, u64)>,
    pub elapsed_ns: u64,
    pub bytes: u64,
}

/// Why the keys could not all be stored.
#[derive(Debug, thiserror::Error)]
pub enum PreloadError {
    #[error("{0}:// has no keys to preload")]
    NoKeys(&'static str),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error("cannot connect to {addr}: {err}")]
    Connect { addr: SocketAddr, err: std::io::Error },
    #[error("sending sets to {addr} failed: {err}")]
    Send { addr: SocketAddr, err: std::io::Error },
    #[error("no reply from {addr} to a set: {err}")]
    NoReply { addr: SocketAddr, err: std::io::Error },
    #[error("{0} closed the connection during the preload")]
    Closed(SocketAddr),
    /// A reply that is not a set's (`outcome` as the codec parsed it).
    #[error("unexpected reply to a set from {addr}: {outcome:?}")]
    Unexpected { addr: SocketAddr, outcome: Outcome },
    #[error("malformed reply from {addr}: {reason}")]
    Malformed { addr: SocketAddr, reason: String },
    /// Redis AUTH or SELECT (engine/setup.rs) failed or was refused.
    #[error("{addr}: {err}")]
    Setup { addr: SocketAddr, err: SetupError },
    /// The TLS settings (files, names) refused.
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("TLS handshake with {addr} failed: {err}")]
    Handshake { addr: SocketAddr, err: HandshakeError },
    #[error("preload thread panicked")]
    Panicked,
}

impl Problem for PreloadError {
    fn kind(&self) -> Kind {
        match self {
            PreloadError::NoKeys(_) | PreloadError::Workload(_) => Kind::Input,
            PreloadError::Tls(e) => e.kind(),
            _ => Kind::Target,
        }
    }

    fn remedy(&self) -> String {
        match self {
            PreloadError::NoKeys(_) => "`tailwise load` is for memcached and redis targets".into(),
            PreloadError::Workload(e) => e.remedy(),
            PreloadError::Setup { err, .. } => err.remedy(),
            PreloadError::Tls(e) => e.remedy(),
            PreloadError::Handshake { err, .. } => err.remedy().into(),
            _ => "check that the server runs and listens on that address".into(),
        }
    }
}

/// The protocol used to store keys for `protocol`, or why there is nothing to store.
fn store_protocol(protocol: &Protocol) -> Result<Protocol, PreloadError> {
    match protocol {
        Protocol::MemcachedUdp => Ok(Protocol::MemcachedAscii),
        p if p.has_keys() => Ok(p.clone()),
        p => Err(PreloadError::NoKeys(p.name())),
    }
}

pub fn preload(cfg: &PreloadConfig) -> Result<PreloadResult, PreloadError> {
    let protocol = store_protocol(&cfg.protocol)?;
    cfg.workload.validate()?;
    let conns = cfg.conns.clamp(1, 64).min(cfg.workload.keys as usize);
    let depth = cfg.depth.max(1);
    let t0 = Instant::now();
    let keys = cfg.workload.keys;
    // One client for every connection (as an engine's: one session store).
    let client = cfg.tls.as_ref().map(Client::build).transpose()?;
    let client = client.as_ref();
    let results: Vec<Result<PreloadResult, PreloadError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..conns as u64)
            .map(|k| {
                let (lo, hi) = (k * keys / conns as u64, (k + 1) * keys / conns as u64);
                let protocol = &protocol;
                s.spawn(move || store_range(cfg, protocol, client, lo..hi, depth))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(Err(PreloadError::Panicked))).collect()
    });
    let mut out = PreloadResult::default();
    for r in results {
        let r = r?;
        out.stored += r.stored;
        out.errors += r.errors;
        out.bytes += r.bytes;
        for (reason, n) in r.error_reasons {
            count_reason(&mut out.error_reasons, reason, n);
        }
    }
    out.elapsed_ns = t0.elapsed().as_nanos() as u64;
    Ok(out)
}

/// A blocking connection to the target: a TCP stream, or a TLS session over one.
trait Stream: Read + Write {}
impl<S: Read + Write> Stream for S {}

/// Connect to `addr` (blocking, each wait bounded by `timeout`), with the TLS handshake when
/// asked.
fn open(addr: SocketAddr, client: Option<&Client>, timeout: Duration) -> Result<Box<dyn Stream>, PreloadError> {
    let s = TcpStream::connect_timeout(&addr, timeout).map_err(|err| PreloadError::Connect { addr, err })?;
    s.set_nodelay(true).ok();
    s.set_read_timeout(Some(timeout)).ok();
    s.set_write_timeout(Some(timeout)).ok();
    let Some(client) = client else { return Ok(Box::new(s)) };
    // The handshake polls a non-blocking socket until its deadline (engine/tls.rs).
    s.set_nonblocking(true).map_err(|err| PreloadError::Connect { addr, err })?;
    let (session, _) = client
        .connect(&addr, s.as_raw_fd(), timeout.as_nanos() as u64)
        .map_err(|err| PreloadError::Handshake { addr, err })?;
    s.set_nonblocking(false).map_err(|err| PreloadError::Connect { addr, err })?;
    Ok(Box::new(Tls(rustls::StreamOwned::new(*session, s))))
}

/// A TLS session over its socket that says its end (close_notify, RFC 8446 §6.1) when dropped.
struct Tls(rustls::StreamOwned<rustls::ClientConnection, TcpStream>);

impl Read for Tls {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Tls {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Drop for Tls {
    fn drop(&mut self) {
        self.0.conn.send_close_notify();
        let _ = self.0.flush();
    }
}

fn store_range(
    cfg: &PreloadConfig,
    protocol: &Protocol,
    client: Option<&Client>,
    range: std::ops::Range<u64>,
    depth: usize,
) -> Result<PreloadResult, PreloadError> {
    let timeout = Duration::from_nanos(cfg.timeout_ns.max(1_000_000));
    let addr = cfg.target;
    let mut s = open(addr, client, timeout)?;
    // Redis AUTH and SELECT first, as a run's connections say them.
    if let Some(setup) = Setup::of(protocol) {
        setup::exchange(&mut s, &setup).map_err(|err| PreloadError::Setup { addr, err })?;
    }
    let mut codec = protocol.codec();
    let mut out = PreloadResult::default();
    let (mut wbuf, mut rbuf, mut key) = (Vec::new(), Vec::new(), Vec::new());
    let mut chunk = vec![0u8; 64 << 10];
    let mut next = range.start;
    while next < range.end {
        let batch_end = (next + depth as u64).min(range.end);
        wbuf.clear();
        for index in next..batch_end {
            cfg.workload.write_key(index, &mut key);
            let value = cfg.workload.value_for_key(index);
            out.bytes += value.len() as u64;
            codec.encode(&Request { id: index, kind: OpKind::Set, key: &key, value, request: 0 }, &mut wbuf);
        }
        s.write_all(&wbuf).map_err(|err| PreloadError::Send { addr, err })?;
        let mut want = batch_end - next;
        rbuf.clear();
        let mut pos = 0;
        while want > 0 {
            match codec.parse(&rbuf[pos..]) {
                Parsed::Reply { len, outcome, .. } => {
                    pos += len;
                    want -= 1;
                    match outcome {
                        Outcome::Stored | Outcome::Done => out.stored += 1,
                        Outcome::Error(reason) => {
                            out.errors += 1;
                            count_reason(&mut out.error_reasons, reason, 1);
                        }
                        outcome => return Err(PreloadError::Unexpected { addr, outcome }),
                    }
                }
                Parsed::Malformed { reason } => return Err(PreloadError::Malformed { addr, reason }),
                Parsed::Incomplete => {
                    let n = s.read(&mut chunk).map_err(|err| PreloadError::NoReply { addr, err })?;
                    if n == 0 {
                        return Err(PreloadError::Closed(addr));
                    }
                    rbuf.extend_from_slice(&chunk[..n]);
                }
            }
        }
        next = batch_end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyless_protocols_are_refused_with_the_reason() {
        let e = store_protocol(&Protocol::named("http").unwrap()).unwrap_err();
        assert!(e.to_string().contains("http:// has no keys") && e.remedy().contains("memcached and redis"), "{e}");
        assert_eq!(e.kind(), Kind::Input);
        assert_eq!(store_protocol(&Protocol::MemcachedUdp).unwrap(), Protocol::MemcachedAscii);
    }
}
