//! Packet mode (`udp+flow://`): the engine's threads send flows of sequenced UDP datagrams to a
//! network function (a reflector, or a forwarder in front of one) and time every packet, as
//! "How to Measure the Killer Microsecond" (KBNets'17) does.
//!
//! | module | what it holds |
//! |---|---|
//! | `flows` | one connected UDP socket per flow, its seq counters and the ring of its packets |
//! | `track` | a flow's answered seqs: first answers, duplicates, reordering and its displacement |
//! | `batch` | the buffers of one sendmmsg / recvmmsg, receive stamps from their control messages |
//! | `packets` | the packet path (`Packets`, behind engine/thread.rs's loop): schedule → flows; timeouts, the drain |
//! | `send` | the queued packets of each flow out with sendmmsg, counted sent |
//! | `answer` | what an arriving datagram is (answer, reordered, duplicate, late) and its record |
//!
//! Every packet is one request of the engine: it ends exactly once, answered (into the
//! histograms, intervals and samples as any reply) or censored — a lost packet as a timeout, at
//! the time it waited. The engine's loop and parts are shared: the schedule, the sampler,
//! `Finish`, the stall watch and its flags, the snapshots (`Handover`), the target's
//! reachability. The payload's layout is `protocol::flow`'s.

pub(crate) mod answer;
pub(crate) mod batch;
pub(crate) mod flows;
mod packets;
pub(crate) mod send;
pub mod track;

pub(crate) use packets::Packets;

use crate::record::interval::INTERVAL_NS;

/// Per interval of intended time: sent, received, lost, reordered, duplicates.
pub type PacketRow = [u64; 5];
pub(crate) const SENT: usize = 0;
pub(crate) const RECEIVED: usize = 1;
pub(crate) const LOST: usize = 2;
pub(crate) const REORDERED: usize = 3;
pub(crate) const DUPLICATES: usize = 4;

/// Every thread's packet counts per 100 ms interval of intended time (`Engine::packet_intervals`).
#[derive(Default)]
pub struct PacketIntervals {
    rows: Vec<PacketRow>,
}

impl PacketIntervals {
    fn add(&mut self, index: usize, row: &PacketRow) {
        if self.rows.len() <= index {
            self.rows.resize(index + 1, [0; 5]);
        }
        for (a, b) in self.rows[index].iter_mut().zip(row) {
            *a += b;
        }
    }

    /// `(index, sent, received, lost, reordered, duplicates)`, every interval up to the last seen.
    pub fn rows(&self) -> Vec<(u64, u64, u64, u64, u64, u64)> {
        self.rows.iter().enumerate().map(|(i, r)| (i as u64, r[0], r[1], r[2], r[3], r[4])).collect()
    }
}

/// One thread's counts not yet handed over, by interval index; sized for the run at the start so
/// that the timing loop does not allocate.
pub(crate) struct PacketCounts {
    rows: Vec<PacketRow>,
}

impl PacketCounts {
    pub fn new(duration_ns: u64, timeout_ns: u64) -> PacketCounts {
        PacketCounts { rows: Vec::with_capacity(((duration_ns + timeout_ns) / INTERVAL_NS + 2) as usize) }
    }

    /// One more of `what` for the packet intended `intended_ns` after the schedule's start.
    #[inline]
    pub fn note(&mut self, intended_ns: u64, what: usize) {
        let index = (intended_ns / INTERVAL_NS) as usize;
        if self.rows.len() <= index {
            self.rows.resize(index + 1, [0; 5]);
        }
        self.rows[index][what] += 1;
    }

    /// Add the counts to `into` and zero them.
    pub fn hand_over(&mut self, into: &mut PacketIntervals) {
        for (i, r) in self.rows.iter_mut().enumerate() {
            if r.iter().any(|&n| n > 0) {
                into.add(i, r);
                *r = [0; 5];
            }
        }
    }
}

#[cfg(test)]
mod tests;
