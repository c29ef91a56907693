//! Asking a socket for stamps (SO_TIMESTAMPING), and waiting until the kernel gives them.

use super::{read_stamped, StampClock};
use super::{SOF_TIMESTAMPING_OPT_ID, SOF_TIMESTAMPING_OPT_ID_TCP, SOF_TIMESTAMPING_OPT_TSONLY};
use crate::io::socket::set_int_option;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

fn set_timestamping(fd: RawFd, flags: libc::c_uint) -> io::Result<()> {
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, flags as libc::c_int)
}

/// Ask for a stamp of every packet this socket receives, on `clock`.
pub fn enable_rx_timestamps(fd: RawFd, clock: StampClock) -> io::Result<()> {
    set_timestamping(fd, clock.flags().0)
}

/// Receive stamps as [`enable_rx_timestamps`], and a transmit stamp of every send (the kernel's:
/// taken when the packet is handed to the device, SND; the NIC's: when it left), read back from
/// the error queue ([`read_tx_stamps`](super::read_tx_stamps)) with a key (OPT_ID): for UDP the send's number (0, 1, 2, …
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
    let deadline = crate::time::clock::now_ns() + timeout_ns;
    let mut buf = [0u8; 1];
    loop {
        if s.send_to(&[0], me).is_ok() {
            let t = crate::time::clock::now_ns() + 1_000_000;
            // On loopback the datagram is queued inside send_to; a ms covers a preempted one.
            while crate::time::clock::now_ns() < t {
                match read_stamped(s.as_raw_fd(), &mut buf, StampClock::Kernel) {
                    Ok((_, Some(_))) => return true,
                    Ok((_, None)) => break,
                    Err(_) => std::thread::sleep(std::time::Duration::from_micros(50)),
                }
            }
        }
        if crate::time::clock::now_ns() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_stamping_comes_on() {
        // While this socket holds the kernel's stamping key, a datagram comes back stamped.
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(s.as_raw_fd(), StampClock::Kernel).unwrap();
        assert!(await_rx_stamping(1_000_000_000));
    }
}
