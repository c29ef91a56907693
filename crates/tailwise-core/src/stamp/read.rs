//! Stamps read back: the receive stamp of a read (SCM_TIMESTAMPING), and transmit stamps from the
//! socket's error queue with their OPT_ID keys.

use super::StampClock;
use std::io;
use std::os::fd::RawFd;

/// `sock_extended_err.ee_origin` of a transmit stamp, and `ee_info` of the one taken when the
/// packet is handed to the device (linux/errqueue.h).
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;
const SCM_TSTAMP_SND: u32 = 0;

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

/// Error-queue messages taken per system call: a send's stamp and the ones queued behind it come
/// in one `recvmmsg`, where reading until the queue is empty took a second `recvmsg` per send
/// (issue 23: kernel stamps cost two system calls per request more than user stamps).
const TX_BATCH: usize = 8;

/// Read every transmit stamp queued on `fd`'s error queue: `(key, ns on clock)` pairs, in the order
/// the kernel queued them, into `out` (cleared first). Only SND stamps (software: handed to the
/// device; hardware: sent) are kept. Returns how many error-queue messages were read (0: empty).
pub fn read_tx_stamps(fd: RawFd, out: &mut Vec<(u32, u64)>, clock: StampClock) -> io::Result<usize> {
    out.clear();
    let mut messages = 0;
    loop {
        // Per message one SCM_TIMESTAMPING (3 timespecs) and one sock_extended_err with its
        // offender address.
        let mut control = [[0u64; 24]; TX_BATCH];
        // SAFETY: zeroed mmsghdrs are valid (OPT_TSONLY: no payload, so no iovec).
        let mut msgs: [libc::mmsghdr; TX_BATCH] = unsafe { std::mem::zeroed() };
        for (m, c) in msgs.iter_mut().zip(control.iter_mut()) {
            m.msg_hdr.msg_control = c.as_mut_ptr() as *mut libc::c_void;
            m.msg_hdr.msg_controllen = std::mem::size_of_val(c) as _;
        }
        let flags = libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT;
        // SAFETY: msgs and their control buffers live for the call; no timeout.
        let n = unsafe { libc::recvmmsg(fd, msgs.as_mut_ptr(), TX_BATCH as _, flags as _, std::ptr::null_mut()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(messages),
                io::ErrorKind::Interrupted => continue,
                _ => Err(e),
            };
        }
        let n = n as usize;
        messages += n;
        // SAFETY: the kernel filled the first n messages' control buffers.
        out.extend(msgs[..n].iter().filter_map(|m| unsafe { tx_stamp(&m.msg_hdr, clock) }));
        if n < TX_BATCH {
            return Ok(messages);
        }
    }
}

/// The SND stamp and its OPT_ID key in one error-queue message, if it holds one.
///
/// # Safety
/// `msg`'s control buffer was filled by the kernel (`msg_controllen` as it left it).
unsafe fn tx_stamp(msg: &libc::msghdr, clock: StampClock) -> Option<(u32, u64)> {
    let (mut stamp, mut key) = (None, None);
    let mut c = libc::CMSG_FIRSTHDR(msg);
    while !c.is_null() {
        let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
        if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPING {
            stamp = scm_stamp(c, clock);
        } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR) || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR) {
            let ee = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::sock_extended_err);
            if ee.ee_errno == libc::ENOMSG as u32 && ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && ee.ee_info == SCM_TSTAMP_SND {
                key = Some(ee.ee_data);
            }
        }
        c = libc::CMSG_NXTHDR(msg, c);
    }
    Some((key?, stamp?))
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
    // SAFETY: the kernel filled msg's control buffer.
    Ok((n as usize, unsafe { rx_stamp(&msg, clock) }))
}

/// The receive stamp on `clock` among a received message's control messages, if one came
/// (a `recvmsg`'s, or one message of a `recvmmsg`).
///
/// # Safety
/// `msg` is a message header the kernel filled, its control buffer still live.
#[inline]
pub unsafe fn rx_stamp(msg: &libc::msghdr, clock: StampClock) -> Option<u64> {
    let mut stamp = None;
    // SAFETY: walking the control buffer the kernel filled, with the CMSG_* macros.
    let mut c = libc::CMSG_FIRSTHDR(msg);
    while !c.is_null() {
        if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPING {
            stamp = scm_stamp(c, clock);
        }
        c = libc::CMSG_NXTHDR(msg, c);
    }
    stamp
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
