//! The buffers of one sendmmsg or recvmmsg: `BATCH` datagrams, their iovecs and message headers
//! (and, for reads, room for each one's receive stamp), built once per thread: the timing loop
//! allocates nothing. The headers point into the buffers, which are heap storage that never
//! moves, so a `Batch` may itself be moved.

use crate::stamp::{self, StampClock};
use std::io;
use std::os::fd::RawFd;

/// Datagrams per system call: recvmmsg and sendmmsg amortise the call over this many.
pub(crate) const BATCH: usize = 32;
/// Control buffer per message: one SCM_TIMESTAMPING (three timespecs) with room to spare.
const CONTROL_WORDS: usize = 16;

pub(crate) struct Batch {
    len: usize,
    bufs: Vec<u8>,
    iov: Vec<libc::iovec>,
    control: Vec<[u64; CONTROL_WORDS]>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers point into the batch's own heap buffers only.
unsafe impl Send for Batch {}

impl Batch {
    /// Room for `BATCH` datagrams of `len` bytes each.
    pub fn new(len: usize) -> Batch {
        let mut b = Batch {
            len,
            bufs: vec![0; len * BATCH],
            iov: Vec::with_capacity(BATCH),
            control: vec![[0; CONTROL_WORDS]; BATCH],
            // SAFETY: an all-zero mmsghdr is valid (null pointers, zero lengths).
            hdrs: (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect(),
        };
        for k in 0..BATCH {
            // SAFETY: inside bufs, which is len × BATCH bytes.
            let base = unsafe { b.bufs.as_mut_ptr().add(k * len) };
            b.iov.push(libc::iovec { iov_base: base as *mut libc::c_void, iov_len: len });
        }
        for k in 0..BATCH {
            let h = &mut b.hdrs[k].msg_hdr;
            h.msg_iov = &mut b.iov[k];
            h.msg_iovlen = 1;
        }
        b
    }

    /// Datagram `k`'s buffer (to fill before a send).
    #[inline]
    pub fn buf(&mut self, k: usize) -> &mut [u8] {
        &mut self.bufs[k * self.len..(k + 1) * self.len]
    }

    /// Datagram `k` as received: its bytes (cut at the buffer; the header is all that is read)
    /// and its receive stamp on `clock`, if asked and one came.
    #[inline]
    pub fn received(&self, k: usize, clock: Option<StampClock>) -> (&[u8], Option<u64>) {
        let n = (self.hdrs[k].msg_len as usize).min(self.len);
        // SAFETY: the kernel filled this header and its control buffer in the last recvmmsg.
        let stamp = clock.and_then(|c| unsafe { stamp::rx_stamp(&self.hdrs[k].msg_hdr, c) });
        (&self.bufs[k * self.len..k * self.len + n], stamp)
    }

    /// Send the first `n` datagrams on connected socket `fd`: how many went.
    pub fn send(&mut self, fd: RawFd, n: usize) -> io::Result<usize> {
        for h in &mut self.hdrs[..n] {
            h.msg_hdr.msg_control = std::ptr::null_mut();
            h.msg_hdr.msg_controllen = 0;
        }
        // SAFETY: the headers point at live iovecs and buffers; n ≤ BATCH.
        let r = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }

    /// Read up to `BATCH` datagrams from `fd` without blocking: how many came.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for (h, c) in self.hdrs.iter_mut().zip(self.control.iter_mut()) {
            h.msg_hdr.msg_control = c.as_mut_ptr() as *mut libc::c_void;
            h.msg_hdr.msg_controllen = std::mem::size_of::<[u64; CONTROL_WORDS]>() as _;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: the headers point at live iovecs, buffers and control buffers.
        let r = unsafe {
            libc::recvmmsg(fd, self.hdrs.as_mut_ptr(), BATCH as u32, libc::MSG_DONTWAIT, std::ptr::null_mut())
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_batch_goes_out_and_comes_back_stamped() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        stamp::enable_rx_timestamps(b.as_raw_fd(), StampClock::Kernel).unwrap();
        stamp::await_rx_stamping(1_000_000_000);
        let mut out = Batch::new(18);
        for k in 0..5 {
            out.buf(k)[0] = k as u8;
        }
        let moved = out; // the headers survive a move
        let mut out = moved;
        assert_eq!(out.send(a.as_raw_fd(), 5).unwrap(), 5);
        let mut inb = Batch::new(64);
        assert_eq!(inb.recv(b.as_raw_fd()).unwrap(), 5);
        for k in 0..5 {
            let (d, stamp) = inb.received(k, Some(StampClock::Kernel));
            assert_eq!((d.len(), d[0]), (18, k as u8));
            assert!(stamp.is_some());
        }
        assert_eq!(inb.recv(b.as_raw_fd()).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    }
}
