//! The send side of the packet loop: every flow's queued packets written with one sendmmsg per
//! `BATCH`, the send time stamped just before each call, the packets it took counted sent; a
//! snapshot asked while more is left to send is served between two batches.

use super::batch::BATCH;
use super::flows::State;
use super::packets::Packets;
use super::SENT;
use crate::engine::req::Req;
use crate::engine::thread::Worker;
use crate::engine::Failure;
use crate::load::workload::Op;
use crate::protocol::flow;
use std::io;

impl Worker<Packets> {
    /// Every flow's queued packets, with one sendmmsg per `BATCH`; the send time is stamped just
    /// before each call and the packets it took are counted sent.
    pub(crate) fn send_queued(&mut self) {
        for i in 0..self.path.flows.len() {
            while self.path.flows[i].queued() > 0 {
                let f = &mut self.path.flows[i];
                let n = (f.queued() as usize).min(BATCH);
                for k in 0..n {
                    let seq = f.next_send + k as u64;
                    let intended = f.slot(seq).intended;
                    flow::write(self.path.out.buf(k), f.id, seq, intended);
                }
                let t = self.watch.now();
                match self.path.out.send(self.path.flows[i].fd, n) {
                    Ok(went) => {
                        self.sent(i, went, t);
                        if went < n {
                            break;
                        }
                        if self.path.flows[i].queued() > 0 {
                            self.serve_snapshot(); // more to send: far behind (packets.rs, SERVE_EVERY)
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS) => break,
                    Err(e) => {
                        // An ICMP error reported on this send (the kernel clears it): tried again next time.
                        let addr = self.path.flows[i].sock.peer_addr().unwrap_or_else(|_| self.cfg.targets[0]);
                        let why = Failure::SendDatagram { addr, err: e.into() };
                        self.fin.note(why.reason());
                        self.reach.failure(why);
                        break;
                    }
                }
            }
        }
        self.publish();
    }

    /// `went` packets of flow `i` sent at `t`.
    fn sent(&mut self, i: usize, went: usize, t: u64) {
        let (late_ns, last_stall_end) = (self.cfg.late_ns, self.stalls.last_end);
        let f = &mut self.path.flows[i];
        for _ in 0..went {
            let seq = f.next_send;
            let s = f.slot(seq);
            s.sent = t;
            s.state = State::Out;
            let req = Req::new(s.intended, s.busy_from, Op::KEYLESS, s.flags);
            self.fin.sent(&req, t, late_ns, last_stall_end);
            self.path.counts.note(req.intended - self.t0, SENT);
            f.next_send += 1;
        }
        if went > 0 {
            self.stalls.sent(went as u64, self.watch.now() - t);
        }
    }

}
