//! One flow: a UDP socket connected to the target (its own source port, so its own 5-tuple), its
//! sequence numbers, and a ring of its packets indexed by seq — intended and send times, flags,
//! state — sized by the flow's rate × the timeout and bounded, so that nothing is allocated per
//! packet. A packet is queued (due, not yet sent), out (sent, not answered) or done (answered,
//! timed out, never sent); `oldest` is the first not done, so the timeouts scan from there.

use super::track::Tracker;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum State {
    #[default]
    Done,
    Queued,
    Out,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Slot {
    pub seq: u64,
    pub intended: u64,
    /// The client's latest certified idle instant when it fell due (engine/busy.rs).
    pub busy_from: u64,
    /// Stamp before the send that carried it (0: not sent).
    pub sent: u64,
    /// `SAMPLED`, `ENGINE_STALL`.
    pub flags: u32,
    pub state: State,
}

/// Packets one flow keeps track of, at least and at most: the ring's and the seq window's length.
const MIN_RING: u64 = 64;
const MAX_RING: u64 = 1 << 20;

/// Packets all the run's flows keep track of together, at most: 2²² slots (160 MiB at 40 bytes a
/// slot), whatever the timeout and the flows — room for 1 M packets/s at the default 1 s timeout.
/// A flow's share is a power of two, so that 1,024 flows of a 60 s timeout take 4,096 slots each
/// (160 KiB) where they took up to 2²⁰ (40 MiB: 40 GiB in all). A packet that finds its ring full is never sent, and counted so (`ring_full`).
pub(crate) const RINGS_BUDGET: u64 = 1 << 22;

/// A flow's ring for `rate_pps` packets per second outstanding up to `timeout_ns` (twice that,
/// and 50 ms more: the timeouts are looked at every millisecond and a stalled thread looks late),
/// within its share of [`RINGS_BUDGET`] among the run's `flows`.
pub(crate) fn ring_len(rate_pps: f64, timeout_ns: u64, flows: usize) -> u64 {
    let share = (RINGS_BUDGET / flows.max(1) as u64).max(MIN_RING);
    let share = 1 << (63 - share.leading_zeros()); // a power of two, at most the share
    let n = rate_pps * (timeout_ns as f64 + 50e6) / 1e9 * 2.0;
    (n.ceil() as u64).clamp(MIN_RING, MAX_RING.min(share)).next_power_of_two()
}

pub(crate) struct Flow {
    pub sock: UdpSocket,
    pub fd: RawFd,
    pub id: u16,
    ring: Vec<Slot>,
    mask: u64,
    /// The next seq to give a packet, the first not yet sent, the first not done.
    pub next_seq: u64,
    pub next_send: u64,
    pub oldest: u64,
    pub track: Tracker,
}

impl Flow {
    pub fn new(sock: UdpSocket, id: u16, len: u64) -> Flow {
        let fd = sock.as_raw_fd();
        Flow {
            sock,
            fd,
            id,
            ring: vec![Slot::default(); len as usize],
            mask: len - 1,
            next_seq: 0,
            next_send: 0,
            oldest: 0,
            track: Tracker::new(len),
        }
    }

    #[inline]
    pub fn slot(&mut self, seq: u64) -> &mut Slot {
        &mut self.ring[(seq & self.mask) as usize]
    }

    /// Queue a packet due at `intended`; its seq, or `None` when the ring is full (the flow has
    /// as many packets outstanding as it can track: it is never sent).
    #[inline]
    pub fn push(&mut self, intended: u64, busy_from: u64, flags: u32) -> Option<u64> {
        if self.next_seq - self.oldest > self.mask {
            return None;
        }
        let seq = self.next_seq;
        *self.slot(seq) = Slot { seq, intended, busy_from, sent: 0, flags, state: State::Queued };
        self.next_seq += 1;
        Some(seq)
    }

    /// Packets due and not yet sent.
    #[inline]
    pub fn queued(&self) -> u64 {
        self.next_seq - self.next_send
    }

    /// Whether every packet is done.
    #[inline]
    pub fn idle(&self) -> bool {
        self.oldest == self.next_seq
    }

    /// The packet `seq` is answered: it, if it was out (else it was done already: timed out).
    #[inline]
    pub fn answer(&mut self, seq: u64) -> Option<Slot> {
        if seq >= self.next_send || seq < self.oldest {
            return None;
        }
        let s = self.slot(seq);
        if s.seq != seq || s.state != State::Out {
            return None;
        }
        s.state = State::Done;
        let done = *s;
        self.skip_done();
        Some(done)
    }

    fn skip_done(&mut self) {
        while self.oldest < self.next_seq && self.slot(self.oldest).state == State::Done {
            self.oldest += 1;
        }
    }

    /// Every packet not done whose `intended` is before `before`, oldest first, made done and
    /// handed to `end` — out ones as sent, queued ones (never sent) as not.
    pub fn expire(&mut self, before: u64, mut end: impl FnMut(Slot)) {
        while self.oldest < self.next_seq {
            let seq = self.oldest;
            let s = self.slot(seq);
            if s.state != State::Done {
                if s.intended >= before {
                    break;
                }
                let was = *s;
                s.state = State::Done;
                if was.state == State::Queued {
                    self.next_send = self.next_send.max(seq + 1);
                }
                end(was);
            }
            self.oldest += 1;
        }
    }

    /// The packets not done, oldest first.
    pub fn outstanding(&self) -> impl Iterator<Item = &Slot> + '_ {
        (self.oldest..self.next_seq).map(|s| &self.ring[(s & self.mask) as usize]).filter(|s| s.state != State::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(len: u64) -> Flow {
        Flow::new(UdpSocket::bind("127.0.0.1:0").unwrap(), 3, len)
    }

    #[test]
    fn the_ring_is_sized_by_rate_and_timeout_and_bounded() {
        assert_eq!(ring_len(1.0, 1_000_000_000, 1), 64);
        assert_eq!(ring_len(10_000.0, 1_000_000_000, 1), 32_768);
        assert_eq!(ring_len(1e9, 1_000_000_000, 1), MAX_RING);
        // All flows together stay within the budget, whatever the timeout (issue 33: 4 flows of a
        // long timeout took 128 MiB; 1,024 would have taken 32 GiB).
        for flows in [1, 3, 4, 64, 1000, 1024] {
            let len = ring_len(1e6, u64::MAX / 2, flows);
            assert!(len.is_power_of_two() && len >= MIN_RING && len * flows as u64 <= RINGS_BUDGET, "{flows}: {len}");
        }
        assert_eq!(ring_len(1e6, 60_000_000_000, 1024), 4096);
        assert_eq!(ring_len(10_000.0, 1_000_000_000, 64), 32_768, "a short timeout is not cut");
        let slot = std::mem::size_of::<Slot>() as u64;
        assert!(slot <= 40 && RINGS_BUDGET * slot <= 160 << 20, "{slot} bytes a slot");
    }

    #[test]
    fn packets_end_once_answered_or_expired_in_seq_order() {
        let mut f = flow(64);
        for t in 0..4 {
            f.push(100 + t, 0, 0).unwrap();
        }
        // Sent: the first three.
        for s in 0..3 {
            f.slot(s).state = State::Out;
        }
        f.next_send = 3;
        assert_eq!(f.answer(1).map(|s| s.intended), Some(101));
        assert!(f.answer(1).is_none(), "answered once");
        assert_eq!(f.answer(3), None, "not sent yet");
        assert_eq!(f.outstanding().map(|s| s.seq).collect::<Vec<_>>(), [0, 2, 3]);
        let mut ended = Vec::new();
        f.expire(103, |s| ended.push((s.seq, s.state)));
        assert_eq!(ended, [(0, State::Out), (2, State::Out)]);
        assert_eq!(f.answer(0), None, "timed out already");
        f.expire(104, |s| ended.push((s.seq, s.state)));
        assert_eq!(ended[2], (3, State::Queued));
        assert!(f.idle());
        assert_eq!((f.next_send, f.queued()), (4, 0));
    }

    #[test]
    fn a_full_ring_refuses_a_packet() {
        let mut f = flow(64);
        for t in 0..64 {
            assert_eq!(f.push(t, 0, 0), Some(t));
        }
        assert_eq!(f.push(64, 0, 0), None);
        f.expire(1, |_| {});
        assert_eq!(f.push(64, 0, 0), Some(64));
    }
}
