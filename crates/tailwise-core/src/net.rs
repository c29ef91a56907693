//! Sockets, epoll and CPU pinning, straight on libc.
//!
//! The engine needs sub-millisecond waits: mio (and `epoll_wait`) take their timeout in whole
//! milliseconds, so we call `epoll_pwait2`, which takes a timespec (Linux ≥ 5.11), and fall back
//! to `epoll_wait` rounding up when the kernel lacks it.

use crate::error::{Kind, Problem};
use crate::nic;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

pub use libc::{EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLRDHUP};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub struct Epoll {
    fd: RawFd,
    events: Vec<libc::epoll_event>,
}

static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

impl Epoll {
    pub fn new(capacity: usize) -> io::Result<Epoll> {
        // SAFETY: plain syscall.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll { fd, events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)] })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: i32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: events as u32, u64: token };
        // SAFETY: valid epoll fd and event pointer.
        cvt(unsafe { libc::epoll_ctl(self.fd, op, fd, &mut ev) }).map(|_| ())
    }
    pub fn add(&self, fd: RawFd, events: i32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }
    pub fn modify(&self, fd: RawFd, events: i32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Wait up to `timeout_ns` (0 = poll and return at once). Returns the ready (token, events).
    pub fn wait(&mut self, timeout_ns: u64) -> io::Result<&[libc::epoll_event]> {
        let cap = self.events.len() as libc::c_int;
        let n = if timeout_ns == 0 {
            // SAFETY: events buffer has `cap` entries.
            unsafe { libc::epoll_wait(self.fd, self.events.as_mut_ptr(), cap, 0) }
        } else if !NO_PWAIT2.load(Ordering::Relaxed) {
            let ts = libc::timespec {
                tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: epoll_pwait2(epfd, events, maxevents, timeout, sigmask = NULL, sigsetsize).
            let r = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd,
                    self.events.as_mut_ptr(),
                    cap,
                    &ts as *const libc::timespec,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            } as libc::c_int;
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                NO_PWAIT2.store(true, Ordering::Relaxed);
                return self.wait(timeout_ns);
            }
            r
        } else {
            let ms = timeout_ns.div_ceil(1_000_000).min(i32::MAX as u64) as libc::c_int;
            // SAFETY: as above.
            unsafe { libc::epoll_wait(self.fd, self.events.as_mut_ptr(), cap, ms) }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(&self.events[..0]);
            }
            return Err(e);
        }
        Ok(&self.events[..n as usize])
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}

/// An eventfd used to wake a thread blocked in epoll.
pub struct Waker {
    fd: RawFd,
}

impl Waker {
    pub fn new() -> io::Result<Waker> {
        // SAFETY: plain syscall.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        Ok(Waker { fd })
    }
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a valid u64.
        unsafe { libc::write(self.fd, &one as *const u64 as *const libc::c_void, 8) };
    }
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes into a valid u64.
        unsafe { libc::read(self.fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
    }
}

impl AsRawFd for Waker {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl Drop for Waker {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}

/// Non-blocking read into `buf`; `Ok(0)` is end of stream, `WouldBlock` means nothing to read.
#[inline]
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Non-blocking write; MSG_NOSIGNAL so a closed peer is an error, not SIGPIPE.
#[inline]
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes.
    let n = unsafe { libc::send(fd, buf.as_ptr() as *const libc::c_void, buf.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Start a TCP connect without blocking (the engine reconnects from its timing loop). Returns the
/// stream and whether it is connected already; if not, it becomes writable when the connect ends
/// and [`take_socket_error`] says how.
pub fn connect_nonblocking(addr: &SocketAddr) -> io::Result<(TcpStream, bool)> {
    let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain syscall; the fd is owned by the TcpStream from here on.
    let fd = cvt(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) })?;
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    // SAFETY: sockaddr_storage is plain data, large enough for either family.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: valid fd, address and length.
    let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len as libc::socklen_t) };
    if r == 0 {
        return Ok((stream, true));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINPROGRESS) {
        Ok((stream, false))
    } else {
        Err(e)
    }
}

/// The pending error of a socket (SO_ERROR): how a non-blocking connect ended.
pub fn take_socket_error(fd: RawFd) -> io::Result<()> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: valid fd and output buffer.
    cvt(unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut _ as *mut libc::c_void, &mut len) })?;
    if err == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(err))
    }
}

/// Pin the calling thread to one CPU. Returns false where the kernel refuses (e.g. a cpuset).
pub fn pin_to_cpu(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks against its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as above.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// SO_BUSY_POLL: a read or poll on this socket spins up to `us` µs in the device's receive queue
/// before it sleeps (drivers with NAPI; lo and veth have none). Raising it needs CAP_NET_ADMIN.
pub fn set_busy_poll(fd: RawFd, us: u32) -> io::Result<()> {
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, us as libc::c_int)
}

/// setsockopt with an int value.
fn set_int_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid c_int option value of its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// SO_TIMESTAMPING flags (linux/net_tstamp.h; Debian 12's headers stop at 0x8000, so OPT_ID_TCP
/// is defined here from the kernel's).
const SOF_TIMESTAMPING_TX_SOFTWARE: libc::c_uint = 1 << 1;
const SOF_TIMESTAMPING_RX_SOFTWARE: libc::c_uint = 1 << 3;
const SOF_TIMESTAMPING_SOFTWARE: libc::c_uint = 1 << 4;
const SOF_TIMESTAMPING_OPT_ID: libc::c_uint = 1 << 7;
const SOF_TIMESTAMPING_OPT_TSONLY: libc::c_uint = 1 << 11;
const SOF_TIMESTAMPING_OPT_ID_TCP: libc::c_uint = 1 << 16;
/// `sock_extended_err.ee_origin` of a transmit stamp, and `ee_info` of the one taken when the
/// packet is handed to the device (linux/errqueue.h).
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;
const SCM_TSTAMP_SND: u32 = 0;

fn set_timestamping(fd: RawFd, flags: libc::c_uint) -> io::Result<()> {
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, flags as libc::c_int)
}

/// Which clock stamps a socket's packets: the kernel's software stamps (CLOCK_REALTIME, taken as
/// the packet is handed to the device and as it arrives: on loopback, in the sender's context,
/// whether or not the receiving thread runs — none missing in 100k on the project's machine, TCP
/// and UDP; tests/e2e/test_timestamps.py holds every reply to a stamp), or the NIC's (its PTP hardware clock, on the wire: nic.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StampClock {
    Kernel,
    Nic,
}

impl StampClock {
    /// SO_TIMESTAMPING flags for receive stamps, and for transmit stamps.
    fn flags(self) -> (libc::c_uint, libc::c_uint) {
        match self {
            StampClock::Kernel => {
                (SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE, SOF_TIMESTAMPING_TX_SOFTWARE)
            }
            StampClock::Nic => (
                nic::SOF_TIMESTAMPING_RX_HARDWARE | nic::SOF_TIMESTAMPING_RAW_HARDWARE,
                nic::SOF_TIMESTAMPING_TX_HARDWARE,
            ),
        }
    }

    /// The slot of SCM_TIMESTAMPING's three timespecs this clock fills: software, (deprecated),
    /// raw hardware.
    fn slot(self) -> usize {
        match self {
            StampClock::Kernel => 0,
            StampClock::Nic => 2,
        }
    }
}

/// Ask for a stamp of every packet this socket receives, on `clock`.
pub fn enable_rx_timestamps(fd: RawFd, clock: StampClock) -> io::Result<()> {
    set_timestamping(fd, clock.flags().0)
}

/// Receive stamps as [`enable_rx_timestamps`], and a transmit stamp of every send (the kernel's:
/// taken when the packet is handed to the device, SND; the NIC's: when it left), read back from
/// the error queue ([`read_tx_stamps`]) with a key (OPT_ID): for UDP the send's number (0, 1, 2, …
/// per socket, failed sends not counted), for TCP the stream offset of the send's last byte. For
/// TCP the key counts from the next byte to be written (OPT_ID_TCP; without it the kernel counts
/// from the oldest unacked byte, one off while the SYN is unacked), so call this on an
/// established connection before anything is written.
pub fn enable_tx_rx_timestamps(fd: RawFd, tcp: bool, clock: StampClock) -> io::Result<()> {
    let (rx, tx) = clock.flags();
    let base = rx | tx | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
    if !tcp {
        return set_timestamping(fd, base);
    }
    match set_timestamping(fd, base | SOF_TIMESTAMPING_OPT_ID_TCP) {
        // Kernels before 6.2 lack OPT_ID_TCP: on an established socket with nothing written yet
        // the oldest unacked byte is the next to be written, so plain OPT_ID keys the same.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => set_timestamping(fd, base),
        r => r,
    }
}

/// Stamps on `clock` on a new connection, before anything is written: transmit and receive stamps
/// (`Ok(true)`), or receive stamps alone where the kernel refuses transmit stamps (`Ok(false)`:
/// its requests then go without one).
pub fn enable_timestamps(fd: RawFd, tcp: bool, clock: StampClock) -> io::Result<bool> {
    match enable_tx_rx_timestamps(fd, tcp, clock) {
        Ok(()) => Ok(true),
        Err(_) => enable_rx_timestamps(fd, clock).map(|()| false),
    }
}

/// The stamp on `clock` (ns: CLOCK_REALTIME for the kernel's, the PHC's for the NIC's) of an
/// SCM_TIMESTAMPING control message, if that slot was filled.
///
/// # Safety
/// `c` points at a control message of that type inside a buffer the kernel filled.
unsafe fn scm_stamp(c: *const libc::cmsghdr, clock: StampClock) -> Option<u64> {
    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const [libc::timespec; 3]);
    let t = ts[clock.slot()];
    (t.tv_sec != 0 || t.tv_nsec != 0).then(|| t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
}

/// Read every transmit stamp queued on `fd`'s error queue: `(key, ns on clock)` pairs, in the order
/// the kernel queued them, into `out` (cleared first). Only SND stamps (software: handed to the
/// device; hardware: sent) are kept. Returns how many error-queue messages were read (0: empty).
pub fn read_tx_stamps(fd: RawFd, out: &mut Vec<(u32, u64)>, clock: StampClock) -> io::Result<usize> {
    out.clear();
    let mut messages = 0;
    loop {
        // One SCM_TIMESTAMPING (3 timespecs) and one sock_extended_err with its offender address.
        let mut control = [0u64; 24];
        // SAFETY: zeroed msghdr is valid (OPT_TSONLY: no payload, so no iovec); control is live.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: msg describes valid buffers for the duration of the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(messages),
                io::ErrorKind::Interrupted => continue,
                _ => Err(e),
            };
        }
        messages += 1;
        let (mut stamp, mut key) = (None, None);
        // SAFETY: walking the control buffer the kernel filled, with the CMSG_* macros.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
                if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPING {
                    stamp = scm_stamp(c, clock);
                } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                    || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
                {
                    let ee = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::sock_extended_err);
                    if ee.ee_errno == libc::ENOMSG as u32
                        && ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING
                        && ee.ee_info == SCM_TSTAMP_SND
                    {
                        key = Some(ee.ee_data);
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if let (Some(k), Some(t)) = (key, stamp) {
            out.push((k, t));
        }
    }
}

/// Non-blocking read that also returns the receive stamp on `clock` (ns), when one came. For TCP
/// it is the stamp of the last segment the read took bytes from (Linux `tcp_recv_timestamp`; for
/// hardware stamps since 4.19.4, Lancet's patch); for UDP, of the datagram.
pub fn read_stamped(fd: RawFd, buf: &mut [u8], clock: StampClock) -> io::Result<(usize, Option<u64>)> {
    // Room for one SCM_TIMESTAMPING (3 timespecs) and, to be safe, one more small cmsg.
    let mut control = [0u64; 16];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: zeroed msghdr is valid; pointers set below point at live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg describes valid buffers for the duration of the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: walking the control buffer the kernel filled, with the CMSG_* macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPING {
                stamp = scm_stamp(c, clock);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// Wait (at most `timeout_ns`) until the kernel stamps arriving packets in software; whether it
/// does. The first socket to ask for receive stamps switches a static key of the whole kernel
/// on, and the kernel defers that switch to a worker thread (`net_enable_timestamp`): until it
/// runs — a few ms on a busy host — packets arrive unstamped, and so would a run's first replies.
/// A datagram to ourselves on loopback tells when it has run. Call it once this process's sockets
/// have asked for stamps: while one of them holds the key, it stays on.
pub fn await_rx_stamping(timeout_ns: u64) -> bool {
    let Ok(s) = std::net::UdpSocket::bind("127.0.0.1:0") else { return false };
    let (Ok(me), Ok(())) = (s.local_addr(), s.set_nonblocking(true)) else { return false };
    if enable_rx_timestamps(s.as_raw_fd(), StampClock::Kernel).is_err() {
        return false;
    }
    let deadline = crate::clock::now_ns() + timeout_ns;
    let mut buf = [0u8; 1];
    loop {
        if s.send_to(&[0], me).is_ok() {
            let t = crate::clock::now_ns() + 1_000_000;
            // On loopback the datagram is queued inside send_to; a ms covers a preempted one.
            while crate::clock::now_ns() < t {
                match read_stamped(s.as_raw_fd(), &mut buf, StampClock::Kernel) {
                    Ok((_, Some(_))) => return true,
                    Ok((_, None)) => break,
                    Err(_) => std::thread::sleep(std::time::Duration::from_micros(50)),
                }
            }
        }
        if crate::clock::now_ns() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Why the interface towards a target is unknown.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("cannot open a UDP socket: {0}")]
    Socket(#[source] io::Error),
    #[error("no route to {target}: {err}")]
    NoRoute { target: SocketAddr, err: io::Error },
    #[error("no local address towards {target}: {err}")]
    NoLocalAddress { target: SocketAddr, err: io::Error },
    #[error("cannot list interfaces: {0}")]
    ListInterfaces(#[source] io::Error),
    #[error("no interface holds {ip}, the local address towards {target}")]
    NoInterface { ip: std::net::IpAddr, target: SocketAddr },
}

impl Problem for RouteError {
    fn kind(&self) -> Kind {
        Kind::Host
    }

    fn remedy(&self) -> String {
        String::new()
    }
}

/// The interface the kernel routes `target` through: the one holding the local address a UDP
/// socket connected to it gets (no packet is sent).
pub fn route_interface(target: &SocketAddr) -> Result<String, RouteError> {
    let local: SocketAddr = if target.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
    let s = std::net::UdpSocket::bind(local).map_err(RouteError::Socket)?;
    s.connect(target).map_err(|err| RouteError::NoRoute { target: *target, err })?;
    let ip = s.local_addr().map_err(|err| RouteError::NoLocalAddress { target: *target, err })?.ip();
    let mut ifs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below.
    if unsafe { libc::getifaddrs(&mut ifs) } != 0 {
        return Err(RouteError::ListInterfaces(io::Error::last_os_error()));
    }
    let mut found = None;
    let mut p = ifs;
    // SAFETY: walking the list getifaddrs returned, reading sockaddrs by their family.
    unsafe {
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null() {
                let here = match (*a).sa_family as i32 {
                    libc::AF_INET => {
                        let v4 = &*(a as *const libc::sockaddr_in);
                        Some(std::net::IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()))
                    }
                    libc::AF_INET6 => {
                        let v6 = &*(a as *const libc::sockaddr_in6);
                        Some(std::net::IpAddr::from(v6.sin6_addr.s6_addr))
                    }
                    _ => None,
                };
                if here == Some(ip) {
                    found = Some(std::ffi::CStr::from_ptr((*p).ifa_name).to_string_lossy().into_owned());
                    break;
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(ifs);
    }
    found.ok_or(RouteError::NoInterface { ip, target: *target })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::now_ns;

    #[test]
    fn sub_millisecond_wait_is_honoured() {
        crate::clock::set_timer_slack_1ns();
        let mut ep = Epoll::new(4).unwrap();
        let t0 = now_ns();
        ep.wait(200_000).unwrap();
        let waited = now_ns() - t0;
        // Never early. (How late is for the benchmark, not a test.)
        assert!(waited >= 200_000, "{waited}");
    }

    #[test]
    fn waker_wakes() {
        let mut ep = Epoll::new(4).unwrap();
        let w = Waker::new().unwrap();
        ep.add(w.as_raw_fd(), EPOLLIN, 7).unwrap();
        w.wake();
        let ev = ep.wait(1_000_000_000).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!({ ev[0].u64 }, 7);
        w.drain();
    }

    #[test]
    fn non_blocking_connect_ends_in_success_or_refusal() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (s, done) = connect_nonblocking(&l.local_addr().unwrap()).unwrap();
        let mut ep = Epoll::new(2).unwrap();
        if !done {
            ep.add(s.as_raw_fd(), EPOLLOUT, 1).unwrap();
            assert_eq!(ep.wait(1_000_000_000).unwrap().len(), 1);
        }
        assert!(take_socket_error(s.as_raw_fd()).is_ok());
        let port = l.local_addr().unwrap();
        drop(l);
        drop(s);
        match connect_nonblocking(&port) {
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused),
            Ok((s, _)) => {
                let mut ep = Epoll::new(2).unwrap();
                ep.add(s.as_raw_fd(), EPOLLOUT, 1).unwrap();
                ep.wait(1_000_000_000).unwrap();
                assert_eq!(take_socket_error(s.as_raw_fd()).unwrap_err().kind(), io::ErrorKind::ConnectionRefused);
            }
        }
    }

    #[test]
    fn a_stamp_is_read_from_its_clocks_slot() {
        // An SCM_TIMESTAMPING message as the kernel writes it: software, (deprecated), raw hardware.
        let ts = [
            libc::timespec { tv_sec: 1, tv_nsec: 5 },
            libc::timespec { tv_sec: 0, tv_nsec: 0 },
            libc::timespec { tv_sec: 7, tv_nsec: 9 },
        ];
        let mut control = [0u64; 16];
        // SAFETY: a zeroed msghdr whose control buffer is `control`; the CMSG_* macros stay in it.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_TIMESTAMPING;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(&ts) as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut [libc::timespec; 3], ts);
            assert_eq!(scm_stamp(c, StampClock::Kernel), Some(1_000_000_005));
            assert_eq!(scm_stamp(c, StampClock::Nic), Some(7_000_000_009));
            // A slot the kernel left empty: no stamp (a NIC that did not stamp this packet).
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut [libc::timespec; 3], [ts[0], ts[1], ts[1]]);
            assert_eq!(scm_stamp(c, StampClock::Nic), None);
        }
    }

    #[test]
    fn receive_stamping_comes_on() {
        // While this socket holds the kernel's stamping key, a datagram comes back stamped.
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(s.as_raw_fd(), StampClock::Kernel).unwrap();
        assert!(await_rx_stamping(1_000_000_000));
    }

    #[test]
    fn nic_flags_ask_for_hardware_stamps_only() {
        let (rx, tx) = StampClock::Nic.flags();
        assert_eq!(rx & (SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE), 0);
        assert_ne!(rx & nic::SOF_TIMESTAMPING_RAW_HARDWARE, 0);
        assert_eq!(tx, nic::SOF_TIMESTAMPING_TX_HARDWARE);
        // The socket option is accepted even where no stamp will come (lo, veth, virtio): only the
        // driver can tell (nic::hardware_timestamping).
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable_timestamps(s.as_raw_fd(), false, StampClock::Nic).unwrap());
    }

    #[test]
    fn we_can_pin_somewhere() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        std::thread::spawn(move || assert!(pin_to_cpu(cpus[0]))).join().unwrap();
    }
}
