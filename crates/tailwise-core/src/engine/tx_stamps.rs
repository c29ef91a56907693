//! Transmit stamps matched to requests by the kernel's OPT_ID key (SO_TIMESTAMPING): for a
//! stream, the byte offset of the last byte a send carried; for datagrams, the datagram's number
//! on the socket. The key is 32 bits and counts from the socket's first send.

use super::req::Flight;
use std::collections::VecDeque;

/// One socket's keys: where its sends stand, which keys are matched, and whether they still agree
/// with the kernel's.
pub(super) struct TxStamps {
    /// Stream offset of the first byte not yet written (datagrams: the next datagram's number).
    pub base: u64,
    /// Keys below this are matched.
    next: u64,
    /// Until a send fails: the kernel's count and ours could part after one.
    pub ok: bool,
}

impl TxStamps {
    pub fn new() -> TxStamps {
        TxStamps { base: 0, next: 0, ok: true }
    }

    /// The key of a request just encoded: for a stream, the offset one past its last byte (`queued`
    /// bytes wait to be written); for datagrams, its datagram's number (`queued` datagrams wait,
    /// itself the last).
    #[inline]
    pub fn end_key(&self, datagram: bool, queued: usize) -> u64 {
        if datagram {
            self.base + queued as u64 - 1
        } else {
            self.base + queued as u64
        }
    }

    /// The full key of a 32-bit one: the nearest at or after the last matched; None if already
    /// matched (a stamp of a retransmission, or out of order).
    #[inline]
    fn full(&self, key: u32) -> Option<u64> {
        let last = self.next as i64 - 1;
        let full = last + (key.wrapping_sub(last as u32) as i32) as i64;
        (full >= self.next as i64).then_some(full as u64)
    }

    /// Give the stamp `t` of key `key` to the requests whose last byte its send carried: for a
    /// stream, every request not yet stamped that ends at or before the stamped byte (several
    /// requests in one send share its stamp; a send the kernel split is stamped at its last
    /// segment); for datagrams, the request of that datagram. Returns false once the keys cannot
    /// be trusted (a send failed).
    #[inline]
    pub fn apply(&mut self, inflight: &mut VecDeque<Flight>, key: u32, t: u64, datagram: bool) -> bool {
        if !self.ok {
            return false;
        }
        let Some(full) = self.full(key) else { return true };
        if datagram {
            if let Some(f) = inflight.iter_mut().find(|f| f.end == full) {
                f.tx = t.max(f.sent);
            }
        } else {
            for f in inflight.iter_mut().filter(|f| f.end <= full + 1 && f.tx == 0 && f.sent > 0) {
                f.tx = t.max(f.sent);
            }
        }
        self.next = full + 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::req::Req;
    use crate::load::workload::Op;

    fn flight(end: u64, sent: u64) -> Flight {
        Flight { req: Req::new(0, 0, Op::KEYLESS, 0), id: 0, sent, end, tx: 0, ghost: false }
    }

    #[test]
    fn a_stream_stamp_goes_to_every_request_its_send_completed() {
        let mut tx = TxStamps::new();
        // Three requests of 10 bytes in one send (ends 10, 20, 30), a fourth not yet sent.
        let mut q: VecDeque<Flight> = [flight(10, 5), flight(20, 5), flight(30, 5), flight(40, 0)].into();
        assert!(tx.apply(&mut q, 29, 100, false)); // the key is the offset of the last byte
        assert_eq!(q.iter().map(|f| f.tx).collect::<Vec<_>>(), [100, 100, 100, 0]);
        // A stamp for bytes already matched (a retransmission) is dropped.
        q[3].sent = 50;
        assert!(tx.apply(&mut q, 19, 200, false));
        assert_eq!(q[3].tx, 0);
        assert!(tx.apply(&mut q, 39, 300, false));
        assert_eq!(q[3].tx, 300);
    }

    #[test]
    fn keys_unwrap_past_32_bits_and_never_before_a_send() {
        let mut tx = TxStamps::new();
        tx.next = (1 << 32) - 8;
        let end = (1u64 << 32) + 2; // the request's last byte is offset 2^32 + 1: key 1
        let mut q: VecDeque<Flight> = [flight(end, 7)].into();
        assert!(tx.apply(&mut q, 1, 3, false));
        assert_eq!(q[0].tx, 7, "a stamp converted from another clock is never before the send");
        assert_eq!(tx.next, (1 << 32) + 2);
        // A key just below the matched ones is a late duplicate, not 4 GB ahead.
        q[0].tx = 0;
        assert!(tx.apply(&mut q, 0, 9, false));
        assert_eq!(q[0].tx, 0);
    }

    #[test]
    fn a_datagram_stamp_goes_to_its_own_datagram_in_any_order() {
        let mut tx = TxStamps::new();
        tx.base = 3;
        assert_eq!(tx.end_key(true, 1), 3);
        assert_eq!(tx.end_key(false, 24), 27);
        let mut q: VecDeque<Flight> = [flight(0, 1), flight(1, 1), flight(2, 1)].into();
        assert!(tx.apply(&mut q, 1, 10, true));
        assert!(tx.apply(&mut q, 0, 20, true)); // before the last matched: dropped
        assert!(tx.apply(&mut q, 2, 30, true));
        assert_eq!(q.iter().map(|f| f.tx).collect::<Vec<_>>(), [0, 10, 30]);
        tx.ok = false;
        assert!(!tx.apply(&mut q, 3, 40, true));
    }
}
