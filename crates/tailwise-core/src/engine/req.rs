//! A request from its intended time to its end, as the thread's parts hand it around.

use crate::load::workload::Op;

/// Chosen for the raw samples (internal bit of `Req::flags`, never in a sample's flags).
pub(crate) const SAMPLED: u32 = 1 << 31;

/// A request from its intended time to its end.
#[derive(Clone, Copy)]
pub(crate) struct Req {
    pub intended: u64,
    /// The latest certified idle instant of the whole client when it fell due (engine/busy.rs),
    /// at most `intended`; kept when it is sent again.
    pub busy_from: u64,
    pub op: Op,
    /// `SAMPLED`, `F::ENGINE_STALL`, `F::RESENT`.
    pub flags: u32,
    /// How long it waited for a slot its thread's connections all held (set at its last dispatch).
    pub slot_wait: u32,
}

impl Req {
    /// Due at `intended`, the client busy since `busy_from`; not yet dispatched.
    #[inline]
    pub fn new(intended: u64, busy_from: u64, op: Op, flags: u32) -> Req {
        Req { intended, busy_from: busy_from.min(intended), op, flags, slot_wait: 0 }
    }
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

/// A thread's slot wait (`Req::slot_wait`): when `dispatch` stops for want of a free slot, every
/// request then in the backlog (intended up to `blocked_upto`) waits for the target; the first
/// slot freed after that (a reply's receive time, a reconnect) ends the wait of each of them that
/// is dispatched before the next stop. The first, not the latest: a request given a slot freed
/// later waited at least that long, so the wait is never overstated and the client's own lateness
/// (send lag − slot wait) never understated.
#[derive(Default)]
pub(crate) struct SlotWait {
    blocked_upto: u64,
    /// The thread's last poll before dispatch last stopped: a slot freed after it may have
    /// been freed at any time since.
    pub blocked_at: u64,
    freed_at: Option<u64>,
}

impl SlotWait {
    /// Every slot held as of the poll at `at`: the backlog, up to the request due at `last`, waits.
    #[inline]
    pub fn blocked(&mut self, last: u64, at: u64) {
        self.blocked_upto = last;
        self.blocked_at = at;
        self.freed_at = None;
    }

    /// Requests due up to `last` (sent before, back in the backlog from a lost connection) wait
    /// for a slot from now on, as if blocked then.
    pub fn requeued(&mut self, last: u64) {
        self.blocked_upto = self.blocked_upto.max(last);
    }

    /// A slot freed at `t` while the backlog waits.
    #[inline]
    pub fn freed(&mut self, t: u64) {
        if self.freed_at.is_none() {
            self.freed_at = Some(t);
        }
    }

    /// The slot wait of a request due at `intended`, dispatched now.
    #[inline]
    pub fn of(&self, intended: u64) -> u32 {
        match self.freed_at {
            Some(t) if intended <= self.blocked_upto => t.saturating_sub(intended).min(u32::MAX as u64) as u32,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_backlog_waits_until_the_first_slot_freed_after_the_stop() {
        let mut w = SlotWait::default();
        assert_eq!(w.of(100), 0, "never blocked");
        // Requests due at 100 and 110 find every slot held; a reply at 150 frees one, another at 170.
        w.blocked(110, 115);
        assert_eq!(w.of(100), 0, "no slot freed yet");
        w.freed(150);
        w.freed(170);
        assert_eq!((w.of(100), w.of(110)), (50, 40), "both from the first freed");
        assert_eq!(w.of(120), 0, "due after the stop: found a slot at once");
        // A reply that came before the request was due (read late): no wait of the target's.
        w.blocked(200, 205);
        w.freed(190);
        assert_eq!(w.of(200), 0);
        // Requests back from a lost connection wait from the loss (or an earlier free).
        w.blocked(300, 305);
        w.requeued(250);
        w.freed(400);
        assert_eq!((w.of(250), w.of(300)), (150, 100));
        w.requeued(260);
        assert_eq!(w.of(260), 140, "the watermark never moves back");
        // Saturating.
        w.blocked(1, 1);
        w.freed(u64::MAX);
        assert_eq!(w.of(0), u32::MAX);
    }
}
