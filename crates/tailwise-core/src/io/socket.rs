//! Non-blocking socket I/O: read, write, connect, and socket options.

use super::cvt;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{FromRawFd, RawFd};

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
    let (ss, len) = sockaddr(addr);
    // SAFETY: valid fd, address and length.
    let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) };
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

/// `addr` as the kernel takes it: a sockaddr_storage holding a sockaddr_in or sockaddr_in6, and
/// its length.
pub fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
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
    (ss, len as libc::socklen_t)
}

/// The address a sockaddr_storage holds (what recvmsg filled in); None for another family.
pub fn socket_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says it holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::from((ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            let a = std::net::SocketAddrV6::new(ip, u16::from_be(sin6.sin6_port), sin6.sin6_flowinfo, sin6.sin6_scope_id);
            Some(SocketAddr::V6(a))
        }
        _ => None,
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

/// Whether a TCP connection met itself. On loopback, a connect to a port nothing listens on may
/// be given that same port as its own, and then completes as a simultaneous open (RFC 793 §3.4):
/// every request would come back as its own "reply". A reconnect loop against a target that died
/// tries many ports, so it happens (seen here once in ~12 runs); such a connection is refused.
pub fn connected_to_itself(fd: RawFd) -> bool {
    // SAFETY: the fd is only borrowed for two calls; ManuallyDrop leaves it open.
    let s = std::mem::ManuallyDrop::new(unsafe { TcpStream::from_raw_fd(fd) });
    matches!((s.local_addr(), s.peer_addr()), (Ok(a), Ok(b)) if a == b)
}

/// What a connection that met itself is: nothing listens at the target's address.
pub fn met_itself() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, "nothing listens there (the connection met itself)")
}

/// SO_BUSY_POLL: a read or poll on this socket spins up to `us` µs in the device's receive queue
/// before it sleeps (drivers with NAPI; lo and veth have none). Raising it needs CAP_NET_ADMIN.
pub fn set_busy_poll(fd: RawFd, us: u32) -> io::Result<()> {
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, us as libc::c_int)
}

/// setsockopt with an int value.
pub(crate) fn set_int_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::poll::{Epoll, EPOLLOUT};
    use std::os::fd::AsRawFd;

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
    fn a_connection_that_met_itself_is_told_apart() {
        // Bound to a port nothing listens on, a connect to that same port opens simultaneously
        // with itself, as a reconnect loop against a dead local target can be given by chance.
        let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) }).unwrap();
        let s = unsafe { TcpStream::from_raw_fd(fd) };
        let (ss, len) = sockaddr(&"127.0.0.1:0".parse().unwrap());
        cvt(unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) }).unwrap();
        let (me, _) = sockaddr(&s.local_addr().unwrap());
        cvt(unsafe { libc::connect(fd, &me as *const _ as *const libc::sockaddr, len) }).unwrap();
        assert!(connected_to_itself(s.as_raw_fd()));
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert!(!connected_to_itself(other.as_raw_fd()));
    }
}
