//! Stamps on a clock other than the thread's own (`Timestamps::Kernel`: CLOCK_REALTIME;
//! `Timestamps::Nic`: the NIC's PTP clock) taken to CLOCK_MONOTONIC, by an offset re-read as the
//! clocks drift apart; the request path's and the packet path's receive stamps alike.

use crate::stamp::nic::NicStamping;
use crate::stamp::StampClock;
use std::sync::Arc;

/// How often the realtime–monotonic offset of the kernel stamps is re-read. The kernel slews
/// CLOCK_REALTIME against CLOCK_MONOTONIC by up to 500 ppm (adjtimex's frequency bound) while NTP
/// corrects it: 0.5 µs per ms at worst, against 50 µs per 100 ms. A re-read costs ~0.3 µs (nine
/// clock reads): 0.03 % of a thread at this period.
const OFFSET_EVERY_NS: u64 = 1_000_000;
/// How often the PTP clock's offset of the NIC stamps is re-read (stamp/nic.rs): a free-running crystal
/// drifts ≤ ~100 ppm, ≤ 1 µs in this time; a re-read (three PHC reads across the PCIe bus, a few
/// µs) then costs < 0.1 % of a thread.
const PHC_OFFSET_EVERY_NS: u64 = 10_000_000;

/// Transmit and receive stamps on a clock other than the thread's own (`Timestamps::Kernel`,
/// `Nic`), a buffer for the transmit stamps read at once, and that clock − CLOCK_MONOTONIC,
/// re-read every `every_ns`, with when it was.
pub(crate) struct RxClock {
    pub clock: Option<StampClock>,
    nic: Option<Arc<NicStamping>>,
    pub tx_buf: Vec<(u32, u64)>,
    offset: i64,
    offset_at: u64,
    every_ns: u64,
}

impl RxClock {
    pub fn new(clock: Option<StampClock>, nic: Option<Arc<NicStamping>>, start_ns: u64) -> RxClock {
        let every_ns = if nic.is_some() { PHC_OFFSET_EVERY_NS } else { OFFSET_EVERY_NS };
        RxClock { clock, offset: stamp_offset(&nic), nic, tx_buf: Vec::new(), offset_at: start_ns, every_ns }
    }

    /// A stamp (CLOCK_REALTIME, or the NIC's PTP clock) on CLOCK_MONOTONIC, never later than `now`
    /// (the conversion may err by ~100 ns, by ~0.5 µs for a PTP clock).
    #[inline]
    pub fn mono(&mut self, t: u64, now: u64) -> u64 {
        if now - self.offset_at > self.every_ns {
            self.offset = stamp_offset(&self.nic);
            self.offset_at = now;
        }
        ((t as i64 - self.offset).max(0) as u64).min(now)
    }
}

/// The stamps' clock − CLOCK_MONOTONIC: the NIC's PTP clock's, else CLOCK_REALTIME's.
fn stamp_offset(nic: &Option<Arc<NicStamping>>) -> i64 {
    match nic {
        Some(n) => n.phc.offset_ns(),
        None => crate::time::clock::realtime_offset_ns(),
    }
}
