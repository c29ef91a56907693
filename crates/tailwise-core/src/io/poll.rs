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
    /// `wait_until`'s timerfd (made on first use) and the instant it is armed for (0: not armed).
    timer: Option<(RawFd, u64)>,
}

/// The token of `wait_until`'s timerfd; never handed to the caller.
const TIMER_TOKEN: u64 = u64::MAX;
/// `wait_until` keeps an armed timer that is this close to the instant asked: the caller's own
/// clock reads move the instant by ~0.1 µs between calls, and re-arming is what costs.
const REARM_SLACK_NS: u64 = 1_000;

static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

impl Epoll {
    pub fn new(capacity: usize) -> io::Result<Epoll> {
        // SAFETY: plain syscall.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll { fd, events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1) + 1], timer: None })
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
        // The timer of `wait_until` may fire during a plain wait: consumed here too.
        let (n, _) = self.take_timer(n as usize);
        Ok(&self.events[..n])
    }
}

impl Epoll {
    /// Wait for events until CLOCK_MONOTONIC `at_ns` by a timerfd in the set, re-armed only when
    /// the instant moves: arming a timer and cancelling it is a VM exit each on a virtual machine
    /// (~10 µs per pair on the project's machine, against ~0.4 µs for a system call), and a
    /// timed `epoll_pwait2` woken by an event does both every call. Returns the ready events and
    /// whether the timer fired (its own event is consumed, never returned).
    pub fn wait_until(&mut self, at_ns: u64) -> io::Result<(&[libc::epoll_event], bool)> {
        let (tfd, armed) = match self.timer {
            Some(t) => t,
            None => {
                // SAFETY: plain syscall.
                let tfd = cvt(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) })?;
                self.timer = Some((tfd, 0));
                self.add(tfd, libc::EPOLLIN, TIMER_TOKEN)?;
                (tfd, 0)
            }
        };
        if armed == 0 || armed.abs_diff(at_ns) > REARM_SLACK_NS {
            let it = libc::itimerspec {
                it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
                it_value: libc::timespec {
                    tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
                    tv_nsec: (at_ns % 1_000_000_000).max(1) as libc::c_long,
                },
            };
            // SAFETY: valid itimerspec; no old value asked for.
            cvt(unsafe { libc::timerfd_settime(tfd, libc::TFD_TIMER_ABSTIME, &it, std::ptr::null_mut()) })?;
            self.timer = Some((tfd, at_ns));
        }
        let cap = self.events.len() as libc::c_int;
        // SAFETY: events buffer has `cap` entries; no timeout: the timerfd ends the wait.
        let n = unsafe { libc::epoll_wait(self.fd, self.events.as_mut_ptr(), cap, -1) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok((&self.events[..0], false)) } else { Err(e) };
        }
        let (n, fired) = self.take_timer(n as usize);
        Ok((&self.events[..n], fired))
    }

    /// Of `n` ready events, consume the timer's if there (it is then disarmed): the rest's count,
    /// and whether it fired.
    fn take_timer(&mut self, n: usize) -> (usize, bool) {
        let Some((tfd, _)) = self.timer else { return (n, false) };
        let Some(i) = self.events[..n].iter().position(|e| e.u64 == TIMER_TOKEN) else { return (n, false) };
        let mut expirations = 0u64;
        // SAFETY: reading the 8-byte expiration count into a valid u64 (clears the event).
        unsafe { libc::read(tfd, &mut expirations as *mut u64 as *mut libc::c_void, 8) };
        self.timer = Some((tfd, 0));
        self.events.swap(i, n - 1);
        (n - 1, true)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: we own the fds.
        unsafe {
            if let Some((tfd, _)) = self.timer {
                libc::close(tfd);
            }
            libc::close(self.fd)
        };
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
    fn wait_until_ends_at_its_instant_or_at_an_event_and_keeps_its_timer() {
        crate::time::clock::set_timer_slack_1ns();
        let mut ep = Epoll::new(4).unwrap();
        let at = now_ns() + 200_000;
        let (ev, fired) = ep.wait_until(at).unwrap();
        assert!(ev.is_empty() && fired);
        assert!(now_ns() >= at);
        // An event first: returned, the timer still armed for its instant and not reported.
        let w = Waker::new().unwrap();
        ep.add(w.as_raw_fd(), EPOLLIN, 7).unwrap();
        w.wake();
        let at = now_ns() + 50_000_000;
        let (ev, fired) = ep.wait_until(at).unwrap();
        assert_eq!((ev.len(), { ev[0].u64 }, fired), (1, 7, false));
        assert_eq!(ep.timer.map(|t| t.1), Some(at));
        w.drain();
        let (ev, fired) = ep.wait_until(at).unwrap();
        assert!(ev.is_empty() && fired);
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
