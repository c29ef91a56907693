//! The UDP network functions behind `tailwise serve --udp-reflect / --udp-forward TO`: a reflector
//! that sends every datagram back to its source unchanged, and a forwarder that relays datagrams
//! to TO and the replies back (like a NAT), each with exact impairments (`impair`).
//!
//! `workers` threads each own a socket bound to the listen address with SO_REUSEPORT (the kernel
//! spreads clients over them by their address, so a client stays with one worker), pinned like the
//! synthetic server's workers (worker i on the i-th allowed CPU). A worker receives with recvmmsg
//! and sends with sendmmsg, up to [`BATCH`] datagrams a call, sleeping in epoll between batches or,
//! with `busy_poll`, spinning on it. Each worker impairs the datagrams it receives, counted in its
//! own arrival order.
//!
//! The forwarder keeps, per worker, one socket connected to TO for each client address (at most
//! [`MAX_CLIENTS`]; beyond, the one idle longest is closed and its slot reused): a client's
//! datagrams go to TO from its socket, and what TO sends back on it goes to the client from the
//! listening socket. Only the client → TO direction is impaired. The functions never look inside
//! a datagram.
//!
//! Counters, read live: `received` (datagrams from clients), `sent` (reflected or forwarded to TO,
//! duplicates included), `dropped`, `reordered`, `duplicated`, `held_alone` (held, then sent alone:
//! no successor within 1 ms, or the stop), `returned` (the forwarder's replies
//! passed back to clients) and `failed` (sends the kernel refused: dropped too, but not by an
//! impairment). On stop a held datagram is sent, so `sent = received − dropped + duplicated −
//! failed` on the impaired direction.

use super::impair::{Impair, ImpairError, Impairments};
use crate::error::{Kind, Problem};
use crate::io::poll::{Epoll, Waker, EPOLLIN};
use crate::io::{cpu, socket};
use crate::time::clock;
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Datagrams per recvmmsg / sendmmsg call.
pub const BATCH: usize = 32;
/// The largest UDP payload (IPv4's 65,507 rounded up): nothing is ever truncated.
const MAX_DATAGRAM: usize = 65_536;
/// The forwarder's sockets per worker, one per client address.
pub const MAX_CLIENTS: usize = 4096;
/// The receive buffer asked for each socket (the kernel caps it at net.core.rmem_max): a burst
/// while a worker is descheduled waits rather than being dropped by the kernel.
const RCVBUF: i32 = 4 << 20;
const WAKE: u64 = u64::MAX;
const LISTEN: u64 = 0;
/// The longest sleep in epoll with nothing held (stop wakes the worker anyway).
const IDLE_WAIT_NS: u64 = 100_000_000;

/// What the function does with a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpMode {
    /// Back to its source, unchanged.
    Reflect,
    /// On to `to`, from a socket kept for its source; what `to` answers goes back to the source.
    Forward { to: SocketAddr },
}

impl UdpMode {
    /// `reflect` (no target) or `forward` (with one).
    pub fn parse(mode: &str, to: Option<SocketAddr>) -> Result<UdpMode, UdpFunctionError> {
        match (mode, to) {
            ("reflect", None) => Ok(UdpMode::Reflect),
            ("forward", Some(to)) => Ok(UdpMode::Forward { to }),
            ("reflect", Some(_)) => Err(UdpFunctionError::ReflectTo),
            ("forward", None) => Err(UdpFunctionError::ForwardWithoutTo),
            _ => Err(UdpFunctionError::UnknownMode(mode.into())),
        }
    }
}

#[derive(Clone, Debug)]
pub struct UdpConfig {
    pub listen: SocketAddr,
    pub mode: UdpMode,
    pub impair: Impairments,
    pub workers: usize,
    /// Pin worker i to the i-th allowed CPU.
    pub pin: bool,
    /// Spin on epoll instead of sleeping in it (one core per worker at 100 %).
    pub busy_poll: bool,
}

/// Why a UDP function did not start.
#[derive(Debug, thiserror::Error)]
pub enum UdpFunctionError {
    #[error(transparent)]
    Impair(#[from] ImpairError),
    #[error("--workers 0 must be at least 1")]
    NoWorkers,
    #[error("unknown UDP function '{0}'")]
    UnknownMode(String),
    #[error("a reflector sends each datagram back to its source: it takes no target")]
    ReflectTo,
    #[error("a forwarder needs a target to forward to")]
    ForwardWithoutTo,
    #[error("cannot listen for UDP on {addr}: {err}")]
    Listen { addr: SocketAddr, err: io::Error },
    #[error("cannot open a UDP socket towards {to}: {err}")]
    Target { to: SocketAddr, err: io::Error },
    #[error("cannot start a worker thread: {0}")]
    Spawn(#[source] io::Error),
}

impl Problem for UdpFunctionError {
    fn kind(&self) -> Kind {
        match self {
            UdpFunctionError::Impair(e) => e.kind(),
            UdpFunctionError::NoWorkers | UdpFunctionError::UnknownMode(_) => Kind::Input,
            UdpFunctionError::ReflectTo | UdpFunctionError::ForwardWithoutTo => Kind::Input,
            UdpFunctionError::Listen { .. } | UdpFunctionError::Target { .. } => Kind::Target,
            UdpFunctionError::Spawn(_) => Kind::Host,
        }
    }

    fn remedy(&self) -> String {
        match self {
            UdpFunctionError::Impair(e) => e.remedy(),
            UdpFunctionError::NoWorkers => "give --workers 1 or more".into(),
            UdpFunctionError::UnknownMode(_) => "use reflect or forward".into(),
            UdpFunctionError::ReflectTo => "give either --udp-reflect or --udp-forward HOST:PORT".into(),
            UdpFunctionError::ForwardWithoutTo => "give --udp-forward HOST:PORT".into(),
            UdpFunctionError::Listen { .. } => "choose another --listen address or port".into(),
            UdpFunctionError::Target { .. } => "give a target of the same address family as --listen, with a route to it".into(),
            UdpFunctionError::Spawn(_) => "free some memory or threads on this host".into(),
        }
    }
}

/// The counters, all workers (a copy taken at one instant).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UdpCounters {
    pub received: u64,
    pub sent: u64,
    pub dropped: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub held_alone: u64,
    pub returned: u64,
    pub failed: u64,
}

#[derive(Default)]
struct Counts {
    received: AtomicU64,
    sent: AtomicU64,
    dropped: AtomicU64,
    reordered: AtomicU64,
    duplicated: AtomicU64,
    held_alone: AtomicU64,
    returned: AtomicU64,
    failed: AtomicU64,
}

struct Shared {
    stop: AtomicBool,
    wakers: Vec<Waker>,
    counts: Counts,
}

/// A running UDP function; `stop` (or drop) ends its workers.
pub struct UdpFunction {
    addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl UdpFunction {
    pub fn start(cfg: UdpConfig) -> Result<UdpFunction, UdpFunctionError> {
        if cfg.workers == 0 {
            return Err(UdpFunctionError::NoWorkers);
        }
        if let UdpMode::Forward { to } = cfg.mode {
            open_towards(to).map_err(|err| UdpFunctionError::Target { to, err })?;
        }
        let first = bind_reuseport(cfg.listen).map_err(|err| UdpFunctionError::Listen { addr: cfg.listen, err })?;
        let addr = first.local_addr().map_err(|err| UdpFunctionError::Listen { addr: cfg.listen, err })?;
        let mut socks = vec![first];
        for _ in 1..cfg.workers {
            socks.push(bind_reuseport(addr).map_err(|err| UdpFunctionError::Listen { addr, err })?);
        }
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            wakers: (0..cfg.workers).map(|_| Waker::new()).collect::<io::Result<_>>().map_err(UdpFunctionError::Spawn)?,
            counts: Counts::default(),
        });
        let cpus = cpu::allowed_cpus();
        let mut f = UdpFunction { addr, shared, threads: Vec::new() };
        for (w, sock) in socks.into_iter().enumerate() {
            let (sh, cfg) = (f.shared.clone(), cfg.clone());
            let cpu = cpus.get(w % cpus.len().max(1)).copied();
            let t = std::thread::Builder::new().name(format!("tw-udp-{w}")).spawn(move || {
                if let (true, Some(c)) = (cfg.pin, cpu) {
                    cpu::pin_to_cpu(c);
                }
                if let Err(e) = Worker::new(w, &sh, &cfg, sock).and_then(|mut wk| wk.run()) {
                    eprintln!("tailwise serve: UDP worker {w} stopped: {e}");
                }
            });
            f.threads.push(t.map_err(UdpFunctionError::Spawn)?); // on error, drop stops the rest
        }
        Ok(f)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn counters(&self) -> UdpCounters {
        let c = &self.shared.counts;
        UdpCounters {
            received: c.received.load(Relaxed),
            sent: c.sent.load(Relaxed),
            dropped: c.dropped.load(Relaxed),
            reordered: c.reordered.load(Relaxed),
            duplicated: c.duplicated.load(Relaxed),
            held_alone: c.held_alone.load(Relaxed),
            returned: c.returned.load(Relaxed),
            failed: c.failed.load(Relaxed),
        }
    }

    /// Stop the workers (a held datagram is sent first) and wait for them.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        for w in &self.shared.wakers {
            w.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for UdpFunction {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A UDP socket on `addr` that other workers' sockets may share (SO_REUSEPORT), blocking (sends
/// wait for buffer space; receives pass MSG_DONTWAIT).
fn bind_reuseport(addr: SocketAddr) -> io::Result<UdpSocket> {
    let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain syscall; the fd is owned by the UdpSocket from here on.
    let fd = unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let sock = unsafe { UdpSocket::from_raw_fd(fd) };
    socket::set_int_option(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    let _ = socket::set_int_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF);
    let (ss, len) = socket::sockaddr(&addr);
    // SAFETY: valid fd, address and length.
    if unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

/// A socket of the forwarder's own, connected to `to`.
fn open_towards(to: SocketAddr) -> io::Result<UdpSocket> {
    let any: SocketAddr = if to.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
    let s = UdpSocket::bind(any)?;
    let _ = socket::set_int_option(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF);
    s.connect(to)?;
    Ok(s)
}

/// Datagram buffers, each with its length and its peer's address.
struct Bufs {
    data: Vec<u8>,
    lens: Vec<usize>,
    names: Vec<libc::sockaddr_storage>,
    namelens: Vec<libc::socklen_t>,
}

impl Bufs {
    fn new(n: usize) -> Bufs {
        // SAFETY: sockaddr_storage is plain data.
        let zero: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        Bufs { data: vec![0; n * MAX_DATAGRAM], lens: vec![0; n], names: vec![zero; n], namelens: vec![0; n] }
    }

    fn ptr(&mut self, id: usize) -> *mut u8 {
        self.data[id * MAX_DATAGRAM..].as_mut_ptr()
    }
}

/// The headers of one recvmmsg or sendmmsg call.
struct Msgs {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
}

impl Msgs {
    fn new() -> Msgs {
        Msgs { hdrs: Vec::with_capacity(2 * BATCH + 2), iovs: Vec::with_capacity(2 * BATCH + 2) }
    }

    fn clear(&mut self) {
        self.hdrs.clear();
        self.iovs.clear();
    }

    /// One datagram of `len` bytes at `data`, to or from `name` (null: the connected peer).
    fn push(&mut self, data: *mut u8, len: usize, name: *mut libc::sockaddr_storage, namelen: libc::socklen_t) {
        self.iovs.push(libc::iovec { iov_base: data as *mut libc::c_void, iov_len: len });
        // SAFETY: mmsghdr is plain data; the pointers are set below and in `finish`.
        let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
        h.msg_hdr.msg_name = name as *mut libc::c_void;
        h.msg_hdr.msg_namelen = namelen;
        h.msg_hdr.msg_iovlen = 1;
        self.hdrs.push(h);
    }

    /// Point each header at its iovec (the vector no longer moves).
    fn finish(&mut self) {
        for (h, iov) in self.hdrs.iter_mut().zip(self.iovs.iter_mut()) {
            h.msg_hdr.msg_iov = iov;
        }
    }
}

/// recvmmsg into buffers `ids` without waiting: how many came (0 when none waits, or on an error
/// such as a connected socket's ICMP refusal, which the call reports and clears).
fn recv_batch(fd: RawFd, bufs: &mut Bufs, ids: &[usize], m: &mut Msgs) -> usize {
    m.clear();
    for &id in ids {
        let (data, name) = (bufs.ptr(id), &mut bufs.names[id] as *mut _);
        m.push(data, MAX_DATAGRAM, name, std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t);
    }
    m.finish();
    // SAFETY: every header points at a live buffer of its length and a sockaddr_storage.
    let n = unsafe { libc::recvmmsg(fd, m.hdrs.as_mut_ptr(), ids.len() as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
    if n <= 0 {
        return 0;
    }
    for (h, &id) in m.hdrs.iter().zip(ids).take(n as usize) {
        bufs.lens[id] = h.msg_len as usize;
        bufs.namelens[id] = h.msg_hdr.msg_namelen;
    }
    n as usize
}

/// sendmmsg every datagram of `m`: (sent, failed). A datagram the kernel refuses is skipped.
fn send_batch(fd: RawFd, m: &mut Msgs) -> (u64, u64) {
    m.finish();
    let (mut i, mut sent, mut failed) = (0, 0, 0);
    while i < m.hdrs.len() {
        // SAFETY: as in recv_batch; the buffers hold what was received.
        let r = unsafe { libc::sendmmsg(fd, m.hdrs.as_mut_ptr().add(i), (m.hdrs.len() - i) as libc::c_uint, 0) };
        if r > 0 {
            i += r as usize;
            sent += r as u64;
        } else if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            i += 1;
            failed += 1;
        }
    }
    (sent, failed)
}

/// A client of the forwarder: its address, its own socket towards the target, when it last
/// sent or was answered.
struct Client {
    sock: UdpSocket,
    addr: SocketAddr,
    name: libc::sockaddr_storage,
    namelen: libc::socklen_t,
    last_ns: u64,
}

/// The forwarder's clients of one worker, each socket in the worker's epoll set as its slot + 1.
struct Clients {
    to: SocketAddr,
    cap: usize,
    slots: Vec<Client>,
    by_addr: HashMap<SocketAddr, usize>,
}

impl Clients {
    fn new(to: SocketAddr, cap: usize) -> Clients {
        Clients { to, cap, slots: Vec::new(), by_addr: HashMap::new() }
    }

    /// The slot of `addr`'s socket, opened (in a new slot, or the one idle longest) if it has none.
    fn slot_for(&mut self, addr: SocketAddr, now_ns: u64, ep: &Epoll) -> io::Result<usize> {
        if let Some(&s) = self.by_addr.get(&addr) {
            self.slots[s].last_ns = now_ns;
            return Ok(s);
        }
        let sock = open_towards(self.to)?;
        let (name, namelen) = socket::sockaddr(&addr);
        let client = Client { sock, addr, name, namelen, last_ns: now_ns };
        let slot = if self.slots.len() < self.cap {
            self.slots.push(client);
            self.slots.len() - 1
        } else {
            let s = (0..self.slots.len()).min_by_key(|&s| self.slots[s].last_ns).unwrap_or(0);
            let old = std::mem::replace(&mut self.slots[s], client);
            let _ = ep.delete(old.sock.as_raw_fd());
            self.by_addr.remove(&old.addr);
            s
        };
        ep.add(self.slots[slot].sock.as_raw_fd(), EPOLLIN, slot as u64 + 1)?;
        self.by_addr.insert(addr, slot);
        Ok(slot)
    }
}

/// One worker: its socket, buffers (one more than a batch: the held datagram keeps its own),
/// impairments and, forwarding, its clients.
struct Worker<'a> {
    sh: &'a Shared,
    w: usize,
    busy_poll: bool,
    listen: UdpSocket,
    ep: Epoll,
    bufs: Bufs,
    replies: Bufs,
    msgs: Msgs,
    impair: Impair<usize>,
    out: Vec<usize>,
    ids: Vec<usize>,
    clients: Option<Clients>,
}

impl<'a> Worker<'a> {
    fn new(w: usize, sh: &'a Shared, cfg: &UdpConfig, listen: UdpSocket) -> io::Result<Worker<'a>> {
        let ep = Epoll::new(256)?;
        ep.add(listen.as_raw_fd(), EPOLLIN, LISTEN)?;
        ep.add(sh.wakers[w].as_raw_fd(), EPOLLIN, WAKE)?;
        let clients = match cfg.mode {
            UdpMode::Reflect => None,
            UdpMode::Forward { to } => Some(Clients::new(to, MAX_CLIENTS)),
        };
        Ok(Worker {
            sh,
            w,
            busy_poll: cfg.busy_poll,
            listen,
            ep,
            bufs: Bufs::new(BATCH + 1),
            replies: Bufs::new(if clients.is_some() { BATCH } else { 0 }),
            msgs: Msgs::new(),
            impair: Impair::new(cfg.impair),
            out: Vec::with_capacity(2 * BATCH + 2),
            ids: Vec::with_capacity(BATCH),
            clients,
        })
    }

    fn run(&mut self) -> io::Result<()> {
        let mut ready: Vec<u64> = Vec::with_capacity(256);
        while !self.sh.stop.load(Relaxed) {
            let timeout = self.wait_ns();
            ready.clear();
            ready.extend(self.ep.wait(timeout)?.iter().map(|e| e.u64));
            for &token in &ready {
                match token {
                    WAKE => self.sh.wakers[self.w].drain(),
                    LISTEN => self.relay_clients(),
                    slot => self.relay_replies(slot as usize - 1),
                }
            }
            self.out.clear();
            self.impair.expire(clock::now_ns(), &mut self.out);
            self.send_out();
        }
        self.out.clear();
        self.impair.flush(&mut self.out);
        self.send_out();
        Ok(())
    }

    /// How long epoll may sleep: not at all when spinning, else until the held datagram is due.
    fn wait_ns(&self) -> u64 {
        if self.busy_poll {
            return 0;
        }
        match self.impair.deadline_ns() {
            Some(d) => d.saturating_sub(clock::now_ns()).clamp(1, IDLE_WAIT_NS),
            None => IDLE_WAIT_NS,
        }
    }

    /// Receive what clients sent, batch by batch, impair it and send it on.
    fn relay_clients(&mut self) {
        loop {
            let held = self.impair.held();
            self.ids.clear();
            self.ids.extend((0..=BATCH).filter(|&id| Some(id) != held).take(BATCH));
            let n = recv_batch(self.listen.as_raw_fd(), &mut self.bufs, &self.ids, &mut self.msgs);
            if n == 0 {
                return;
            }
            self.sh.counts.received.fetch_add(n as u64, Relaxed);
            let now = clock::now_ns();
            self.out.clear();
            for &id in &self.ids[..n] {
                self.impair.push(id, now, &mut self.out);
            }
            self.send_out();
            if n < BATCH {
                return;
            }
        }
    }

    /// Send `out` (reflected to each source, or forwarded from each source's socket) and publish
    /// the counts.
    fn send_out(&mut self) {
        let c = self.impair.take_counts();
        let counts = &self.sh.counts;
        counts.dropped.fetch_add(c.dropped, Relaxed);
        counts.reordered.fetch_add(c.reordered, Relaxed);
        counts.duplicated.fetch_add(c.duplicated, Relaxed);
        counts.held_alone.fetch_add(c.held_alone, Relaxed);
        if self.out.is_empty() {
            return;
        }
        let (sent, failed) = if self.clients.is_some() { self.forward_out() } else { self.reflect_out() };
        counts.sent.fetch_add(sent, Relaxed);
        counts.failed.fetch_add(failed, Relaxed);
    }

    fn reflect_out(&mut self) -> (u64, u64) {
        self.msgs.clear();
        for &id in &self.out {
            let (data, name) = (self.bufs.ptr(id), &mut self.bufs.names[id] as *mut _);
            self.msgs.push(data, self.bufs.lens[id], name, self.bufs.namelens[id]);
        }
        send_batch(self.listen.as_raw_fd(), &mut self.msgs)
    }

    /// Each datagram from its client's socket; consecutive ones of a client in one sendmmsg. (The
    /// pending run's slot was just used, so a full table never evicts it: a batch holds at most
    /// 2 × BATCH + 2 datagrams, far fewer than MAX_CLIENTS.)
    fn forward_out(&mut self) -> (u64, u64) {
        let Some(clients) = self.clients.as_mut() else { return (0, 0) };
        let now = clock::now_ns();
        let (mut sent, mut failed, mut run) = (0, 0, None);
        self.msgs.clear();
        for &id in &self.out {
            let slot = match socket::socket_addr(&self.bufs.names[id]).map(|a| clients.slot_for(a, now, &self.ep)) {
                Some(Ok(s)) => s,
                _ => {
                    failed += 1;
                    continue;
                }
            };
            if run.is_some_and(|r| r != slot) {
                let (s, f) = send_batch(clients.slots[run.unwrap_or(0)].sock.as_raw_fd(), &mut self.msgs);
                (sent, failed) = (sent + s, failed + f);
                self.msgs.clear();
            }
            run = Some(slot);
            self.msgs.push(self.bufs.ptr(id), self.bufs.lens[id], std::ptr::null_mut(), 0);
        }
        if let Some(r) = run {
            let (s, f) = send_batch(clients.slots[r].sock.as_raw_fd(), &mut self.msgs);
            (sent, failed) = (sent + s, failed + f);
        }
        (sent, failed)
    }

    /// Pass what the target sent on `slot`'s socket back to its client, unimpaired.
    fn relay_replies(&mut self, slot: usize) {
        let Some(clients) = self.clients.as_mut() else { return };
        let Some(client) = clients.slots.get_mut(slot) else { return };
        let ids: [usize; BATCH] = std::array::from_fn(|i| i);
        loop {
            let n = recv_batch(client.sock.as_raw_fd(), &mut self.replies, &ids, &mut self.msgs);
            if n == 0 {
                return;
            }
            client.last_ns = clock::now_ns();
            self.msgs.clear();
            for id in 0..n {
                self.msgs.push(self.replies.ptr(id), self.replies.lens[id], &mut client.name, client.namelen);
            }
            let (sent, failed) = send_batch(self.listen.as_raw_fd(), &mut self.msgs);
            self.sh.counts.returned.fetch_add(sent, Relaxed);
            self.sh.counts.failed.fetch_add(failed, Relaxed);
            if n < BATCH {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
