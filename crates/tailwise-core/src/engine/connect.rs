//! The connections an engine starts with: every socket connected (failing fast, with a clear
//! message) before a thread starts, per thread; their options and the kernel's or the NIC's
//! stamps asked for; with TLS, every handshake done (and timed) before the schedule starts.

use super::config::EngineConfig;
use super::problem::EngineError;
use super::setup::{self, Setup};
use super::tls::{self, Client};
use crate::io::{route, socket};
use crate::stamp;
use crate::stamp::nic::NicStamping;
use rustls::ClientConnection;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// One connection's socket: a TCP stream, or a UDP socket connected to the target; or a TCP
/// stream with its TLS session, handshake done (`wrote`: the bytes it wrote, which the socket's
/// transmit-stamp keys count), as `connect_all` hands it to a thread (a `Conn` keeps the two apart).
pub(crate) enum Sock {
    Tcp(TcpStream),
    Udp(UdpSocket),
    Tls { stream: TcpStream, session: Box<ClientConnection>, wrote: u64 },
}

impl Sock {
    pub fn fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) | Sock::Tls { stream: s, .. } => s.as_raw_fd(),
            Sock::Udp(s) => s.as_raw_fd(),
        }
    }
    pub fn peer(&self) -> SocketAddr {
        match self {
            Sock::Tcp(s) | Sock::Tls { stream: s, .. } => s.peer_addr(),
            Sock::Udp(s) => s.peer_addr(),
        }
        .expect("a connected socket has a peer")
    }
    pub fn shutdown(&self) {
        if let Sock::Tcp(s) | Sock::Tls { stream: s, .. } = self {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn connect_udp(addr: &SocketAddr) -> Result<UdpSocket, EngineError> {
    let local: SocketAddr = if addr.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
    let s = UdpSocket::bind(local).map_err(EngineError::UdpSocket)?;
    s.connect(addr).map_err(|err| EngineError::ConnectUdp { addr: *addr, err })?;
    s.set_nonblocking(true).map_err(|err| EngineError::SocketOption { what: "non-blocking mode", addr: *addr, err })?;
    Ok(s)
}

/// A TCP connection, its setup commands exchanged (blocking, each wait bounded by the connect
/// timeout) before it turns non-blocking.
fn connect(addr: &SocketAddr, timeout_ns: u64, setup: Option<&Setup>) -> Result<TcpStream, EngineError> {
    let timeout = Duration::from_nanos(timeout_ns);
    let mut s = TcpStream::connect_timeout(addr, timeout).map_err(|err| EngineError::Connect { addr: *addr, err })?;
    if socket::connected_to_itself(s.as_raw_fd()) {
        return Err(EngineError::Connect { addr: *addr, err: socket::met_itself() });
    }
    s.set_nodelay(true).map_err(|err| EngineError::SocketOption { what: "TCP_NODELAY", addr: *addr, err })?;
    if let Some(setup) = setup {
        let option = |err| EngineError::SocketOption { what: "a timeout", addr: *addr, err };
        s.set_read_timeout(Some(timeout)).map_err(option)?;
        s.set_write_timeout(Some(timeout)).map_err(option)?;
        setup::exchange(&mut s, setup).map_err(|err| EngineError::Setup { addr: *addr, err })?;
    }
    s.set_nonblocking(true).map_err(|err| EngineError::SocketOption { what: "non-blocking mode", addr: *addr, err })?;
    Ok(s)
}

/// Busy-poll budget of the probe's sockets (SO_BUSY_POLL, µs; the kernel docs suggest 50).
const PROBE_BUSY_POLL_US: u32 = 50;

/// Packet mode: each flow socket's receive and send buffer asked for (bytes): at 20k packets/s
/// the default 208 KiB holds ~10 ms of answers on loopback, less than a busy host preempts for.
const PACKET_SOCKET_BUFFER: i32 = 4 << 20;

/// Connect one connection to `addr`, with the kernel's timestamps on when asked, and its TLS
/// handshake done when asked; then its setup (setup.rs) exchanged. In plaintext the setup goes
/// before the stamps are asked for, so that the transmit-stamp keys count the requests' bytes
/// only; over TLS after the handshake, through the session (its bytes counted as the
/// handshake's are).
fn open(cfg: &EngineConfig, addr: &SocketAddr, tls: Option<&Client>, setup: Option<&Setup>) -> Result<Sock, EngineError> {
    let s = if cfg.protocol.is_datagram() {
        Sock::Udp(connect_udp(addr)?)
    } else {
        Sock::Tcp(connect(addr, cfg.connect_timeout_ns, if tls.is_none() { setup } else { None })?)
    };
    if cfg.protocol.is_packet() {
        // Room for the answers that arrive while the thread is preempted (the kernel caps it at
        // net.core.rmem_max / wmem_max; refused or capped, the flow goes on with what it has).
        for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
            let _ = socket::set_int_option(s.fd(), libc::SOL_SOCKET, opt, PACKET_SOCKET_BUFFER);
        }
    }
    if let (Some(clock), true) = (cfg.timestamps.clock(), cfg.protocol.is_packet()) {
        // Receive stamps only: a packet's send time is the user-space stamp before its sendmmsg.
        stamp::enable_rx_timestamps(s.fd(), clock).map_err(|err| EngineError::Timestamps { clock, err })?;
    } else if let Some(clock) = cfg.timestamps.clock() {
        // Before anything is written: TCP transmit-stamp keys count from here. Without transmit
        // stamps the requests go without one (counters.tx_kernel says how many have one).
        stamp::enable_timestamps(s.fd(), !cfg.protocol.is_datagram(), clock)
            .map_err(|err| EngineError::Timestamps { clock, err })?;
    }
    match (s, tls) {
        (Sock::Tcp(stream), Some(client)) => handshake(cfg, addr, stream, client, setup),
        (s, _) => Ok(s),
    }
}

/// The TLS handshake of a connection just made, waiting up to the connect timeout; timed. Then
/// its setup, if any, through the session.
fn handshake(cfg: &EngineConfig, addr: &SocketAddr, stream: TcpStream, client: &Client, setup: Option<&Setup>) -> Result<Sock, EngineError> {
    let (mut session, mut wrote) = client
        .connect(addr, stream.as_raw_fd(), cfg.connect_timeout_ns)
        .map_err(|err| EngineError::Handshake { addr: *addr, err })?;
    if let Some(setup) = setup {
        wrote += setup_over_tls(addr, &stream, &mut session, setup, cfg.connect_timeout_ns)?;
    }
    Ok(Sock::Tls { stream, session, wrote })
}

/// The setup exchanged through a session whose handshake is done, the socket blocking meanwhile
/// (each wait bounded by the connect timeout): the ciphertext bytes it wrote.
fn setup_over_tls(addr: &SocketAddr, stream: &TcpStream, session: &mut ClientConnection, setup: &Setup, timeout_ns: u64) -> Result<u64, EngineError> {
    let timeout = Some(Duration::from_nanos(timeout_ns));
    let option = |what| move |err| EngineError::SocketOption { what, addr: *addr, err };
    stream.set_nonblocking(false).map_err(option("blocking mode"))?;
    stream.set_read_timeout(timeout).map_err(option("a timeout"))?;
    stream.set_write_timeout(timeout).map_err(option("a timeout"))?;
    let mut sock = tls::Counted::new(stream);
    setup::exchange(&mut rustls::Stream::new(session, &mut sock), setup).map_err(|err| EngineError::Setup { addr: *addr, err })?;
    stream.set_nonblocking(true).map_err(option("non-blocking mode"))?;
    Ok(sock.wrote)
}

/// `Timestamps::Nic`: the interface every target is reached through, switched to stamp every
/// packet; why not, in one line, where it cannot.
pub(super) fn nic_stamping(targets: &[SocketAddr]) -> Result<NicStamping, EngineError> {
    let mut ifaces: Vec<String> = Vec::new();
    for t in targets {
        let i = route::route_interface(t).map_err(EngineError::Route)?;
        if !ifaces.contains(&i) {
            ifaces.push(i);
        }
    }
    if ifaces.len() > 1 {
        return Err(EngineError::Interfaces(ifaces));
    }
    let iface = ifaces.swap_remove(0);
    NicStamping::enable(&iface).map_err(|err| EngineError::NoHardwareStamps { err, iface })
}

/// Every connection, per thread: the load threads' in turn over the targets, then the probe's
/// (a thread of its own, the last one).
pub(super) fn connect_all(cfg: &EngineConfig, tls: Option<&Client>) -> Result<Vec<Vec<Sock>>, EngineError> {
    let mut per_thread: Vec<Vec<Sock>> = (0..cfg.threads).map(|_| Vec::new()).collect();
    let setup = Setup::of(&cfg.protocol);
    // Packet mode: one connected socket per flow, flow i on thread i mod threads.
    let n = match cfg.protocol {
        crate::protocol::Protocol::UdpFlow { flows, .. } => flows,
        _ => cfg.conns,
    };
    for i in 0..n {
        let s = open(cfg, &cfg.targets[i % cfg.targets.len()], tls, setup.as_ref())?;
        per_thread[i % cfg.threads].push(s);
    }
    if let Some(p) = cfg.probe {
        let mut mine = Vec::new();
        for i in 0..p.conns {
            let s = open(cfg, &cfg.targets[i % cfg.targets.len()], tls, setup.as_ref())?;
            // Busy polling of the socket's device queue, where the driver has one (not lo or
            // veth); refused without CAP_NET_ADMIN: the probe spins on its sockets either way.
            let _ = socket::set_busy_poll(s.fd(), PROBE_BUSY_POLL_US);
            mine.push(s);
        }
        per_thread.push(mine);
    }
    Ok(per_thread)
}
