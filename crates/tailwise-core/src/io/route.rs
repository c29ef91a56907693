//! The interface the kernel routes a target through (for NIC stamps: the interface that must
//! stamp).

use crate::error::{Kind, Problem};
use std::io;
use std::net::SocketAddr;

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
