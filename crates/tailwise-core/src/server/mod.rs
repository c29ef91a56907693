//! The synthetic server behind `tailwise serve`: a known service-time distribution, so that
//! measurements can be checked against queueing theory (the gap is the tool's own bias).
//!
//! One acceptor thread hands connections round-robin to `workers` threads; each worker owns an
//! epoll set and serves its connections in arrival order, spinning for each request's service
//! time. With one worker the server is a single FIFO queue — an M/G/1 station under Poisson load.
//! With several, each connection belongs to one worker (k parallel queues, not one M/G/k queue).
//!
//! Each request's reply is written as soon as its service ends (when service ≥ 1 µs), so a
//! request's departure never waits for the service of the requests read in the same batch.
//!
//! The service time includes the server's own work on the request: the worker spins until the
//! drawn time has passed since it started on the request (for the first of a batch, since before
//! the read), less the expected duration of the reply's `send` (a running average). A loopback
//! request costs ~6 µs of reads, parsing and writes on this machine kind; without the
//! compensation fixed:10us kept a worker busy ~16 µs a request and a nominal 50 % load was 80 %.
//! With it the worker is busy max(S, its own work) per request: for S above that work the queue
//! is the model's M/G/1. `Server::busy_ns` measures what it really was.
//!
//! Every clock read of a worker goes through a [`StallWatch`]: the times it did not run although
//! it had not chosen to wait (preemption, the hypervisor) are logged for the coordinator to mask
//! (`Server::take_stalls`, see `stall`).
//!
//! The UDP network functions of `tailwise serve --udp-reflect / --udp-forward` are [`udp`], their
//! impairments [`impair`]. With `ServerConfig::tls` every connection speaks TLS ([`tls`]).

pub mod impair;
pub mod tls;
pub mod udp;

use crate::io::poll::{Epoll, Waker, EPOLLIN, EPOLLOUT, EPOLLRDHUP};
use crate::io::{cpu, socket};
use crate::load::dist::Dist;
use crate::protocol::memcached::ascii::{self, Store};
use crate::protocol::synthetic;
use crate::time::stall::{StallLog, StallWatch};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub workers: usize,
    pub service: Dist,
    pub seed: u64,
    /// Pin worker i to the i-th allowed CPU.
    pub pin: bool,
    /// Spin on epoll instead of sleeping in it (lower latency, one core per worker at 100 %).
    pub busy_poll: bool,
}

struct Shared {
    stop: AtomicBool,
    wakers: Vec<Waker>,
    inboxes: Vec<Mutex<Vec<TcpStream>>>,
    store: Store,
    served: AtomicU64,
    /// Time the workers spent serving (reading, spinning, writing), not waiting for requests,
    /// and not stalled (time/stall.rs).
    busy_ns: AtomicU64,
    /// Stalls of the workers (≥ `stall::MASK_STALL_NS` between two of their clock reads).
    stall_log: StallLog,
}

pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_waker: Arc<Waker>,
    threads: Vec<JoinHandle<()>>,
}

const WAKE: u64 = u64::MAX;
/// Stop reading a connection while this much reply data waits to be written (backpressure).
const MAX_PENDING_WRITE: usize = 1 << 20;
/// Close a connection whose unparsed input exceeds this (a request can never be this long).
const MAX_READ_BUF: usize = 4 << 20;

impl Server {
    pub fn start(cfg: ServerConfig) -> io::Result<Server> {
        Server::start_tls(cfg, None)
    }

    /// `start`, with TLS on every connection when `tls` is given (`tls::server_config`).
    pub fn start_tls(cfg: ServerConfig, tls: Option<Arc<rustls::ServerConfig>>) -> io::Result<Server> {
        if cfg.workers == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "workers must be at least 1"));
        }
        let listener = TcpListener::bind(cfg.listen)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            wakers: (0..cfg.workers).map(|_| Waker::new()).collect::<io::Result<_>>()?,
            inboxes: (0..cfg.workers).map(|_| Mutex::new(Vec::new())).collect(),
            store: Store::default(),
            served: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            stall_log: StallLog::default(),
        });
        let accept_waker = Arc::new(Waker::new()?);
        let cpus = cpu::allowed_cpus();
        let mut threads = Vec::new();
        for w in 0..cfg.workers {
            let (sh, cfg, tls) = (shared.clone(), cfg.clone(), tls.clone());
            let cpu = cpus.get(w % cpus.len().max(1)).copied();
            threads.push(std::thread::Builder::new().name(format!("tw-serve-{w}")).spawn(move || {
                if cfg.pin {
                    if let Some(c) = cpu {
                        cpu::pin_to_cpu(c);
                    }
                }
                if let Err(e) = worker(w, &sh, &cfg, tls.as_ref()) {
                    eprintln!("tailwise serve: worker {w} stopped: {e}");
                }
            })?);
        }
        let (sh, aw) = (shared.clone(), accept_waker.clone());
        threads.push(std::thread::Builder::new().name("tw-accept".into()).spawn(move || {
            if let Err(e) = acceptor(listener, &sh, &aw) {
                eprintln!("tailwise serve: acceptor stopped: {e}");
            }
        })?);
        Ok(Server { addr, shared, accept_waker, threads })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests served so far, all workers.
    pub fn served(&self) -> u64 {
        self.shared.served.load(Relaxed)
    }

    /// Time the workers spent serving requests, all workers: `busy_ns / served` is the effective
    /// service time (the spun one plus the server's own per-request work), `busy_ns / wall` the
    /// utilisation the clients really offered.
    pub fn busy_ns(&self) -> u64 {
        self.shared.busy_ns.load(Relaxed)
    }

    /// The workers' stalls logged since the last call, as (start, end) on CLOCK_MONOTONIC: times
    /// a worker did not run although it had not chosen to wait (preemption, the hypervisor).
    pub fn take_stalls(&self) -> Vec<(u64, u64)> {
        self.shared.stall_log.take()
    }

    pub fn stop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        self.accept_waker.wake();
        for w in &self.shared.wakers {
            w.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn acceptor(listener: TcpListener, sh: &Shared, waker: &Waker) -> io::Result<()> {
    let mut ep = Epoll::new(4)?;
    ep.add(listener.as_raw_fd(), EPOLLIN, 0)?;
    ep.add(waker.as_raw_fd(), EPOLLIN, WAKE)?;
    let mut next = 0usize;
    while !sh.stop.load(Relaxed) {
        ep.wait(100_000_000)?;
        loop {
            match listener.accept() {
                Ok((s, _)) => {
                    let _ = s.set_nodelay(true);
                    s.set_nonblocking(true)?;
                    sh.store.curr_connections.fetch_add(1, Relaxed);
                    sh.store.total_connections.fetch_add(1, Relaxed);
                    sh.inboxes[next].lock().unwrap().push(s);
                    sh.wakers[next].wake();
                    next = (next + 1) % sh.wakers.len();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // EMFILE and friends: keep serving the connections we have.
                Err(_) => break,
            }
        }
    }
    Ok(())
}

struct Conn {
    stream: TcpStream,
    /// TLS between the socket and the buffers below (plaintext in both).
    tls: Option<Box<tls::Tls>>,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    wpos: usize,
    want_write: bool,
}

enum Outcome {
    Keep,
    Close,
}

fn worker(w: usize, sh: &Shared, cfg: &ServerConfig, tls: Option<&Arc<rustls::ServerConfig>>) -> io::Result<()> {
    let mut ep = Epoll::new(256)?;
    ep.add(sh.wakers[w].as_raw_fd(), EPOLLIN, WAKE)?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut ready: Vec<(u64, u32)> = Vec::with_capacity(256);
    let timeout = if cfg.busy_poll { 0 } else { 100_000_000 };
    // Every clock read of the worker goes through the watch, so that a gap of ≥ 200 µs anywhere
    // in its loop (in the service spin, a syscall, between polls) is logged as a stall.
    let mut serving = Serving {
        sh,
        cfg,
        rng: SmallRng::seed_from_u64(cfg.seed.wrapping_add(w as u64 * 0x9E37_79B9)),
        write_est_ns: 0,
        watch: StallWatch::new(sh.stall_log.clone()),
    };
    while !sh.stop.load(Relaxed) {
        ready.clear();
        ready.extend(ep.wait(timeout)?.iter().map(|e| (e.u64, e.events)));
        if cfg.busy_poll {
            serving.watch.now();
        } else {
            serving.watch.reset(); // the wait was chosen: not a stall
        }
        for &(token, _events) in &ready {
            if token == WAKE {
                sh.wakers[w].drain();
                adopt(&ep, &mut conns, &sh.inboxes[w], tls)?;
            } else {
                serve_token(&ep, &mut conns, token, &mut serving)?;
            }
        }
    }
    Ok(())
}

/// The connections the acceptor handed this worker, each into a free slot.
fn adopt(
    ep: &Epoll,
    conns: &mut Vec<Option<Conn>>,
    inbox: &Mutex<Vec<TcpStream>>,
    tls_cfg: Option<&Arc<rustls::ServerConfig>>,
) -> io::Result<()> {
    for stream in inbox.lock().unwrap().drain(..) {
        let tls = match tls_cfg.map(tls::Tls::new).transpose() {
            Ok(t) => t.map(Box::new),
            Err(_) => continue, // rustls refused a new connection: drop it, keep the others
        };
        let slot = conns.iter().position(Option::is_none).unwrap_or_else(|| {
            conns.push(None);
            conns.len() - 1
        });
        ep.add(stream.as_raw_fd(), EPOLLIN | EPOLLRDHUP, slot as u64)?;
        conns[slot] =
            Some(Conn { stream, tls, rbuf: Vec::with_capacity(16 << 10), wbuf: Vec::new(), wpos: 0, want_write: false });
    }
    Ok(())
}

/// Serve the connection in slot `token`, then close it or watch it for what it waits for.
fn serve_token(ep: &Epoll, conns: &mut [Option<Conn>], token: u64, w: &mut Serving<'_>) -> io::Result<()> {
    let slot = token as usize;
    let Some(c) = conns.get_mut(slot).and_then(Option::as_mut) else { return Ok(()) };
    let (t0, lost0) = (w.watch.now(), w.watch.stalled_ns);
    let outcome = serve_conn(c, w);
    // Busy time is the worker's own: a stall while serving is the machine's, not service.
    w.sh.busy_ns.fetch_add((w.watch.now() - t0).saturating_sub(w.watch.stalled_ns - lost0), Relaxed);
    if let Outcome::Close = outcome {
        let _ = ep.delete(c.stream.as_raw_fd());
        conns[slot] = None;
        w.sh.store.curr_connections.fetch_sub(1, Relaxed);
        return Ok(());
    }
    let want = c.wpos < c.wbuf.len() || c.tls.as_ref().is_some_and(|t| t.pending());
    if want != c.want_write {
        c.want_write = want;
        let ev = if want { EPOLLIN | EPOLLOUT | EPOLLRDHUP } else { EPOLLIN | EPOLLRDHUP };
        ep.modify(c.stream.as_raw_fd(), ev, token)?;
    }
    Ok(())
}

/// Write what is pending. Err on a broken connection.
fn flush(c: &mut Conn) -> io::Result<()> {
    if let Some(t) = c.tls.as_mut() {
        c.wpos += t.write(&c.stream, &c.wbuf[c.wpos..])?;
    }
    while c.tls.is_none() && c.wpos < c.wbuf.len() {
        match socket::write(c.stream.as_raw_fd(), &c.wbuf[c.wpos..]) {
            Ok(n) => c.wpos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    if c.wpos == c.wbuf.len() {
        c.wbuf.clear();
        c.wpos = 0;
    }
    Ok(())
}

/// Spin until `start + service`, less the expected time of the reply's write, then write it and
/// update that expectation. Returns the start of the next request's service (now).
fn serve_for(c: &mut Conn, start_ns: u64, service_ns: u64, write_est_ns: &mut u64, watch: &mut StallWatch) -> std::io::Result<u64> {
    if service_ns == 0 {
        return Ok(start_ns); // no clock reads at all: pipelined fixed:0 runs at millions per second
    }
    if service_ns < 1_000 {
        // Sub-µs services are not worth a write each: replies go out with the batch.
        watch.spin_until(start_ns + service_ns);
        return Ok(watch.now());
    }
    watch.spin_until(start_ns + service_ns.saturating_sub(*write_est_ns));
    let t = watch.now();
    flush(c)?;
    let now = watch.now();
    // Exponential average over ~8 writes, each clamped to twice the estimate (+1 µs): it follows
    // the machine but a write stretched by preemption cannot shorten the next services.
    let sample = (now - t).min(2 * *write_est_ns + 1_000);
    *write_est_ns = (7 * *write_est_ns + sample) / 8;
    Ok(now)
}

/// A worker's state across the connections it serves: its random source, the expected time of a
/// reply's write, and its clock.
struct Serving<'a> {
    sh: &'a Shared,
    cfg: &'a ServerConfig,
    rng: SmallRng,
    write_est_ns: u64,
    watch: StallWatch,
}

/// Serve what connection `c` has sent: read it all (unless replies pile up unread), then serve
/// every complete request in order, each for its service time.
fn serve_conn(c: &mut Conn, w: &mut Serving<'_>) -> Outcome {
    let start = w.watch.now();
    if flush(c).is_err() {
        return Outcome::Close;
    }
    let Some(eof) = read_input(c) else { return Outcome::Close };
    let Some((pos, close)) = serve_requests(c, w, start) else { return Outcome::Close };
    c.rbuf.drain(..pos);
    if flush(c).is_err() || close || eof {
        return Outcome::Close;
    }
    Outcome::Keep
}

/// Read what is there (unless replies are piling up unread by the client): whether the client
/// closed its side; None on a broken or overlong connection.
fn read_input(c: &mut Conn) -> Option<bool> {
    if let Some(t) = c.tls.as_mut() {
        if c.wbuf.len() - c.wpos >= MAX_PENDING_WRITE {
            return Some(false);
        }
        let eof = t.read(&c.stream, &mut c.rbuf, MAX_READ_BUF + 1).ok()?;
        return (c.rbuf.len() <= MAX_READ_BUF).then_some(eof);
    }
    while c.wbuf.len() - c.wpos < MAX_PENDING_WRITE {
        let len = c.rbuf.len();
        if c.rbuf.capacity() - len < 4096 {
            c.rbuf.reserve(16 << 10);
        }
        let cap = c.rbuf.capacity();
        // SAFETY: we read into the spare capacity and then set the length to what was written.
        let spare = unsafe { std::slice::from_raw_parts_mut(c.rbuf.as_mut_ptr().add(len), cap - len) };
        match socket::read(c.stream.as_raw_fd(), spare) {
            Ok(0) => return Some(true),
            Ok(n) => unsafe { c.rbuf.set_len(len + n) },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
        if c.rbuf.len() > MAX_READ_BUF {
            return None;
        }
    }
    Some(false)
}

/// Serve every complete request, in order, the first one's service counted from `start`: how
/// many bytes they took and whether the connection is to be closed after; None when a reply's
/// write failed.
fn serve_requests(c: &mut Conn, w: &mut Serving<'_>, mut start: u64) -> Option<(usize, bool)> {
    let mut pos = 0;
    while pos < c.rbuf.len() && c.wbuf.len() - c.wpos < MAX_PENDING_WRITE {
        let buf = &c.rbuf[pos..];
        let (len, service_ns, close) = if buf[0] == synthetic::MAGIC[0] {
            match synthetic::parse_request(buf) {
                Ok(None) => break,
                Ok(Some((len, req))) => {
                    let service_ns = if req.service_ns == synthetic::SERVER_CHOOSES {
                        w.cfg.service.sample_ns(&mut w.rng) as u64
                    } else {
                        req.service_ns as u64
                    };
                    synthetic::encode_reply(req.id, service_ns.min(u32::MAX as u64 - 1) as u32, req.reply_pad, &mut c.wbuf);
                    (len, service_ns, false)
                }
                Err(_) => return Some((pos, true)),
            }
        } else {
            match ascii::serve_one(&w.sh.store, buf, &mut c.wbuf) {
                ascii::Step::Incomplete => break,
                ascii::Step::Done { len, close } => (len, w.cfg.service.sample_ns(&mut w.rng) as u64, close),
            }
        };
        pos += len;
        w.sh.served.fetch_add(1, Relaxed);
        if close {
            return Some((pos, true));
        }
        start = serve_for(c, start, service_ns, &mut w.write_est_ns, &mut w.watch).ok()?;
    }
    Some((pos, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::clock;
    use std::io::{Read, Write};

    fn one_worker(service: &str) -> ServerConfig {
        ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            workers: 1,
            service: Dist::parse(service).unwrap(),
            seed: 1,
            pin: false,
            busy_poll: false,
        }
    }

    fn server(service: &str) -> Server {
        Server::start(one_worker(service)).unwrap()
    }

    /// testdata/: a CA and a certificate for localhost and 127.0.0.1 signed by it, valid for a
    /// century, made once with openssl for these tests only.
    fn testdata() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server/testdata")
    }

    /// One worker answering at once, over TLS with testdata's certificate.
    fn tls_server() -> Server {
        let dir = testdata();
        let tls = tls::server_config(&dir.join("cert.pem"), &dir.join("key.pem")).unwrap();
        Server::start_tls(one_worker("fixed:0"), Some(tls)).unwrap()
    }

    /// A rustls client configuration trusting `roots`.
    fn client_config(roots: rustls::RootCertStore) -> Arc<rustls::ClientConfig> {
        Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        )
    }

    #[test]
    fn a_busy_worker_logs_the_time_its_cpu_was_taken_and_an_idle_sleeper_logs_nothing() {
        let Some(&cpu) = cpu::allowed_cpus().first() else { return };
        let mut s = Server::start(ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            workers: 1,
            service: Dist::parse("fixed:0").unwrap(),
            seed: 1,
            pin: true, // worker 0 on the first allowed CPU
            busy_poll: true,
        })
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.take_stalls();
        std::thread::spawn(move || {
            cpu::pin_to_cpu(cpu);
            clock::spin_for(150_000_000);
        })
        .join()
        .unwrap();
        let stalls = s.take_stalls();
        assert!(!stalls.is_empty(), "a CPU shared with a spinner for 150 ms shows as stalls");
        assert!(stalls.iter().all(|&(a, b)| b - a >= crate::time::stall::MASK_STALL_NS));
        s.stop();
        // A sleeping worker's waits are its own choice, not stalls.
        let s = server("fixed:0");
        std::thread::sleep(std::time::Duration::from_millis(250));
        assert!(s.take_stalls().is_empty());
    }

    #[test]
    fn answers_synthetic_requests_and_spins() {
        let mut s = server("fixed:50us");
        let mut c = TcpStream::connect(s.addr()).unwrap();
        let mut req = Vec::new();
        for id in 0..3 {
            synthetic::encode_request(&synthetic::Request { service_ns: synthetic::SERVER_CHOOSES, reply_pad: 0, id }, &mut req);
        }
        let t0 = clock::now_ns();
        c.write_all(&req).unwrap();
        let mut rep = [0u8; 72];
        c.read_exact(&mut rep).unwrap();
        // Three 50 µs services in sequence (each includes its own reply write, so allow a little).
        assert!(clock::now_ns() - t0 >= 140_000);
        for id in 0..3u64 {
            let r = &rep[id as usize * 24..][..24];
            assert_eq!(&r[..4], &synthetic::MAGIC);
            assert_eq!(u32::from_le_bytes(r[4..8].try_into().unwrap()), 50_000);
            assert_eq!(u64::from_le_bytes(r[16..24].try_into().unwrap()), id);
        }
        s.stop(); // busy time is added when a batch ends: read it after the workers stopped
        assert_eq!(s.served(), 3);
        assert!(s.busy_ns() >= 140_000, "busy time includes the spun service");
    }

    #[test]
    fn own_work_counts_inside_the_service_time() {
        // 200 pipelined 20 µs requests: the worker must be busy ~20 µs each, not 20 µs plus its
        // reads and writes (which take several µs each on loopback). The host's preemptions
        // shorter than a stall (< 200 µs) count as busy and only ever add: the least of three
        // tries is the one to judge.
        let per = (0..3)
            .map(|_| {
                let mut s = server("fixed:20us");
                let mut c = TcpStream::connect(s.addr()).unwrap();
                let mut req = Vec::new();
                for id in 0..200 {
                    let r = synthetic::Request { service_ns: synthetic::SERVER_CHOOSES, reply_pad: 0, id };
                    synthetic::encode_request(&r, &mut req);
                }
                c.write_all(&req).unwrap();
                let mut rep = vec![0u8; 200 * 24];
                c.read_exact(&mut rep).unwrap();
                s.stop();
                s.busy_ns() as f64 / s.served() as f64
            })
            .fold(f64::INFINITY, f64::min);
        assert!((19_000.0..30_000.0).contains(&per), "{per} ns busy per request");
    }

    #[test]
    fn answers_memcached_ascii() {
        let mut s = server("fixed:0");
        let mut c = TcpStream::connect(s.addr()).unwrap();
        c.write_all(b"set key 0 0 5\r\nhello\r\nget key\r\n").unwrap();
        let want = b"STORED\r\nVALUE key 0 5\r\nhello\r\nEND\r\n";
        let mut got = vec![0u8; want.len()];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got, want);
        s.stop();
    }

    /// A rustls client over a blocking socket (the test's side).
    fn tls_client(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(cfg, name).unwrap();
        rustls::StreamOwned::new(conn, TcpStream::connect(addr).unwrap())
    }

    #[test]
    fn answers_synthetic_requests_over_tls_and_resumes_sessions() {
        use rustls_pki_types::pem::PemObject;
        let mut s = tls_server();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(rustls_pki_types::CertificateDer::from_pem_file(testdata().join("ca.pem")).unwrap()).unwrap();
        let client = client_config(roots);
        for round in 0..2 {
            let mut c = tls_client(s.addr(), client.clone());
            let mut req = Vec::new();
            for id in 0..100 {
                synthetic::encode_request(&synthetic::Request { service_ns: synthetic::SERVER_CHOOSES, reply_pad: 0, id }, &mut req);
            }
            c.write_all(&req).unwrap();
            let mut rep = vec![0u8; 100 * 24];
            c.read_exact(&mut rep).unwrap();
            for id in 0..100u64 {
                let r = &rep[id as usize * 24..][..24];
                assert_eq!(&r[..4], &synthetic::MAGIC);
                assert_eq!(u64::from_le_bytes(r[16..24].try_into().unwrap()), id);
            }
            // The second connection resumes the first's session (a TLS 1.3 ticket, RFC 8446 §2.2).
            let kind = c.conn.handshake_kind();
            let want = if round == 0 { rustls::HandshakeKind::Full } else { rustls::HandshakeKind::Resumed };
            assert_eq!(kind, Some(want), "round {round}");
        }
        // A client that does not trust the server's CA is refused in the handshake, and the
        // server keeps serving.
        let stranger = client_config(rustls::RootCertStore::empty());
        let mut c = tls_client(s.addr(), stranger);
        let e = c.write_all(b"x").and_then(|_| c.flush()).and_then(|_| c.read(&mut [0u8; 8]).map(|_| ())).unwrap_err();
        assert!(e.to_string().contains("UnknownIssuer"), "{e}");
        s.stop();
        assert_eq!(s.served(), 200);
    }

    #[test]
    fn a_plaintext_client_of_a_tls_server_is_closed() {
        let mut s = tls_server();
        let mut c = TcpStream::connect(s.addr()).unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        c.write_all(b"get key\r\n").unwrap();
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got); // an alert at most, then the close
        assert!(!got.starts_with(b"END"), "no plaintext reply");
        s.stop();
        assert_eq!(s.served(), 0);
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused_naming_both() {
        let dir = testdata();
        // ca.pem's key is not key.pem.
        let e = tls::server_config(&dir.join("ca.pem"), &dir.join("key.pem")).unwrap_err();
        assert!(matches!(e, tls::TlsError::Mismatch { .. }), "{e}");
        assert!(e.to_string().contains("ca.pem") && e.to_string().contains("key.pem"), "{e}");
    }

    #[test]
    fn stops_with_clients_still_connected() {
        let mut s = server("fixed:0");
        let _c = TcpStream::connect(s.addr()).unwrap();
        s.stop();
        assert!(TcpStream::connect(s.addr()).is_err());
    }
}
