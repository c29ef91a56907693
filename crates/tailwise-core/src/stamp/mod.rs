//! Packet timestamps: when a request left and its reply arrived, stamped by the kernel or the NIC
//! rather than read from the clock around a system call.
//!
//! | module | what it holds |
//! |---|---|
//! | this one | [`StampClock`]: which clock stamps a socket's packets (the kernel's software stamps or the NIC's) |
//! | `enable` | SO_TIMESTAMPING on a socket (receive stamps; transmit stamps keyed by OPT_ID); waiting until the kernel stamps |
//! | `read` | stamps read back: a read with its receive stamp (SCM_TIMESTAMPING), transmit stamps from the error queue |
//! | [`nic`] | NIC hardware stamps: whether a driver can stamp every packet, switching it to, its PTP clock's offset |

mod enable;
pub mod nic;
mod read;

pub use enable::{await_rx_stamping, enable_rx_timestamps, enable_timestamps, enable_tx_rx_timestamps};
pub use read::{read_stamped, read_tx_stamps, rx_stamp};

/// SO_TIMESTAMPING flags (linux/net_tstamp.h; Debian 12's headers stop at 0x8000, so OPT_ID_TCP
/// is defined here from the kernel's).
const SOF_TIMESTAMPING_TX_SOFTWARE: libc::c_uint = 1 << 1;
const SOF_TIMESTAMPING_RX_SOFTWARE: libc::c_uint = 1 << 3;
const SOF_TIMESTAMPING_SOFTWARE: libc::c_uint = 1 << 4;
const SOF_TIMESTAMPING_OPT_ID: libc::c_uint = 1 << 7;
const SOF_TIMESTAMPING_OPT_TSONLY: libc::c_uint = 1 << 11;
const SOF_TIMESTAMPING_OPT_ID_TCP: libc::c_uint = 1 << 16;

/// Which clock stamps a socket's packets: the kernel's software stamps (CLOCK_REALTIME, taken as
/// the packet is handed to the device and as it arrives: on loopback, in the sender's context,
/// whether or not the receiving thread runs — none missing in 100k on the project's machine, TCP
/// and UDP; tests/e2e/test_timestamps.py holds every reply to a stamp), or the NIC's (its PTP
/// hardware clock, on the wire: [`nic`]).
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

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
}
