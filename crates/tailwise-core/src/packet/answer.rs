//! What comes back: each datagram read (recvmmsg, with its receive stamp) is matched to its
//! packet by flow and seq. The flow's tracker (track.rs) says whether it is the seq's first
//! answer — in order, or reordered by how many — or a duplicate; a first answer of a packet still
//! out ends it, answered, as the request path ends a reply (its latency from the intended time
//! to the receive stamp, into the histograms, intervals and samples). An answer of a packet
//! already lost (after its timeout) changes nothing but the error reasons.

use super::flows::Slot;
use super::packets::Packets;
use super::track::Seen;
use super::{DUPLICATES, RECEIVED, REORDERED};
use crate::engine::req::{Req, Times};
use crate::engine::thread::Worker;
use crate::engine::Failure;
use crate::engine::Role;
use crate::load::workload::Op;
use crate::protocol::flow;
use crate::record::flags as F;
use std::io;

impl Worker<Packets> {
    /// Read flow `i`'s socket until it is empty, `BATCH` datagrams a call.
    pub(crate) fn read_flow(&mut self, i: usize) {
        loop {
            match self.path.inb.recv(self.path.flows[i].fd) {
                Ok(n) => {
                    let now = self.watch.now();
                    for k in 0..n {
                        let (header, stamp) = {
                            let (d, stamp) = self.path.inb.received(k, self.rx.clock);
                            (flow::read(d), stamp)
                        };
                        let t_rx = stamp.map_or(now, |t| self.rx.mono(t, now));
                        match header {
                            Some((flow, seq)) if flow == self.path.flows[i].id => self.answer(i, seq, (t_rx, now), stamp.is_some()),
                            _ => self.fin.note("datagram dropped: not a packet of this flow".into()),
                        }
                    }
                    if n < super::batch::BATCH {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // An ICMP error (nothing listens): the packets out are lost at their timeouts.
                    let addr = self.path.flows[i].sock.peer_addr().unwrap_or_else(|_| self.cfg.targets[0]);
                    let why = Failure::Receive { addr, err: e.into() };
                    self.fin.note(why.reason());
                    self.reach.failure(why);
                    return;
                }
            }
        }
    }

    /// An answer of `seq` on flow `i`, received at `t_rx` (the kernel's stamp if `stamped`) and
    /// seen by user space at `t_user`.
    fn answer(&mut self, i: usize, seq: u64, (t_rx, t_user): (u64, u64), stamped: bool) {
        let f = &mut self.path.flows[i];
        if seq >= f.next_send {
            return self.fin.note("datagram dropped: a seq not sent yet".into());
        }
        match f.track.observe(seq) {
            Seen::Duplicate => {
                self.fin.c.duplicates += 1;
                let s = *f.slot(seq);
                let at = if s.seq == seq { s.intended } else { t_rx };
                self.path.counts.note(at.saturating_sub(self.t0), DUPLICATES);
            }
            Seen::TooOld => self.fin.note("answer after its packet's timeout".into()),
            seen => match f.answer(seq) {
                Some(slot) => {
                    self.path.outstanding -= 1;
                    self.answered(slot, seen, (t_rx, t_user), stamped)
                }
                None => self.fin.note("answer after its packet's timeout".into()),
            },
        }
    }

    /// A packet's first answer: counted, timed, recorded.
    fn answered(&mut self, s: Slot, seen: Seen, (t_rx, t_user): (u64, u64), stamped: bool) {
        // A stamp converted from another clock may lie a few ns before the send.
        let t_rx = t_rx.max(s.sent);
        let c = &mut self.fin.c;
        c.received += 1;
        c.rx_kernel += stamped as u64;
        if t_rx < self.end {
            self.fin.received_in_window += 1;
        }
        let at = s.intended - self.t0;
        self.path.counts.note(at, RECEIVED);
        if let Seen::Reordered { by } = seen {
            c.reordered += 1;
            c.reorder_max = c.reorder_max.max(by);
            self.path.counts.note(at, REORDERED);
        }
        self.reach.replied(t_rx);
        // A datagram's kernel stamp is its arrival: an engine stall cannot have inflated it.
        let exact = stamped || self.role == Role::Load;
        let inflation = if exact { 0 } else { self.stalls.inflation(s.intended, t_rx) };
        let flags = if stamped { F::KERNEL_RX } else { 0 };
        let req = Req::new(s.intended, s.busy_from, Op::KEYLESS, s.flags);
        let times = Times { sent: s.sent, tx: 0, rx_user: t_user };
        self.fin.record(req, times, t_rx - s.intended, flags, inflation);
    }
}
