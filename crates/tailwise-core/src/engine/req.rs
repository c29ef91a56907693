//! A request from its intended time to its end, as the thread's parts hand it around.

use crate::load::workload::Op;

/// Chosen for the raw samples (internal bit of `Req::flags`, never in a sample's flags).
pub(crate) const SAMPLED: u32 = 1 << 31;

/// A request from its intended time to its end.
#[derive(Clone, Copy)]
pub(crate) struct Req {
    pub intended: u64,
    pub op: Op,
    /// `SAMPLED`, `F::ENGINE_STALL`, `F::RESENT`.
    pub flags: u32,
}

/// A request written (or encoded, to be written) on a connection.
pub(crate) struct Flight {
    pub req: Req,
    pub id: u64,
    /// Stamp just before the write that carried it.
    pub sent: u64,
    /// Transmit-stamp key: for a stream, the stream offset one past its last byte; for datagrams,
    /// its datagram's number on the socket (`TxStamps::base`).
    pub end: u64,
    /// The kernel's transmit stamp of the send that carried its last byte (CLOCK_MONOTONIC; 0: none).
    pub tx: u64,
    /// Timed out and already counted: its reply, if it comes, is read and dropped.
    pub ghost: bool,
}

impl Flight {
    #[inline]
    pub fn times(&self) -> Times {
        Times { sent: self.sent, tx: self.tx, rx_user: 0 }
    }
}

/// A request's clock readings (CLOCK_MONOTONIC ns; 0: none): the user-space stamp before the
/// write that sent it, the kernel's transmit stamp, and the user-space stamp after the read that
/// completed its reply.
#[derive(Clone, Copy, Default)]
pub(crate) struct Times {
    pub sent: u64,
    pub tx: u64,
    pub rx_user: u64,
}
