//! epoll with ns timeouts, and the eventfd that wakes a thread blocked in it.
//!
//! The engine needs sub-millisecond waits: mio (and `epoll_wait`) take their timeout in whole
//! milliseconds, so we call `epoll_pwait2`, which takes a timespec (Linux ≥ 5.11), and fall back
//! to `epoll_wait` rounding up when the kernel lacks it.

use super::cvt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

pub use libc::{EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLRDHUP};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::clock::now_ns;

    #[test]
    fn sub_millisecond_wait_is_honoured() {
        crate::time::clock::set_timer_slack_1ns();
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
}
