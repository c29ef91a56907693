//! Sockets, epoll and CPU pinning, straight on libc: the data plane's I/O.
//!
//! | module | what it holds |
//! |---|---|
//! | [`poll`] | epoll with ns timeouts, the eventfd waker |
//! | [`socket`] | non-blocking read, write and connect; socket options |
//! | [`route`] | the interface the kernel routes a target through |
//! | [`cpu`] | CPU pinning, the CPUs this process may run on |
//!
//! Kernel and NIC timestamps on sockets are [`crate::stamp`]'s.

use std::io;

pub mod cpu;
pub mod poll;
pub mod route;
pub mod socket;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}
