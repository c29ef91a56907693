//! Impairments of the UDP network functions (`tailwise serve --udp-reflect / --udp-forward`):
//! drop, duplicate and reorder every N-th datagram, exactly, so that tests and demos get loss,
//! duplicates and reordering on a kernel without netem.
//!
//! [`Impair`] is pure: fed the datagrams in arrival order (any `Copy` handle for them) and the
//! clock, it says what to send now, in order. Datagrams are counted from 1 in arrival order, one
//! count for every impairment:
//! * `drop_every N`: the N-th, 2N-th, … is dropped (neither duplicated nor held);
//! * `duplicate_every N`: the N-th, 2N-th, … is sent twice, back to back;
//! * `reorder_every N`: the N-th, 2N-th, … is held and sent right after the next datagram sent
//!   (displacement 1: a dropped one does not count as next). A held datagram with no successor
//!   within [`HOLD_NS`] is sent alone, and then is counted `held_alone`, not `reordered` (so
//!   every datagram held is in exactly one of the two, however late its successor came). A
//!   datagram due to be held while another is held is that one's successor: it goes out first,
//!   the held one after it.

use crate::error::{Kind, Problem};

/// How long a held datagram waits for a successor before it is sent alone.
pub const HOLD_NS: u64 = 1_000_000;

/// Which datagrams to drop, duplicate, hold back (every N-th of each; None: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Impairments {
    pub drop_every: Option<u64>,
    pub reorder_every: Option<u64>,
    pub duplicate_every: Option<u64>,
}

/// An impairment that cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum ImpairError {
    /// "Every 0th datagram" means nothing.
    #[error("{flag} 0 must be at least 1")]
    Zero { flag: &'static str },
}

impl Problem for ImpairError {
    fn kind(&self) -> Kind {
        Kind::Input
    }

    fn remedy(&self) -> String {
        match self {
            ImpairError::Zero { flag } => format!("give {flag} 1 or more (2: every second datagram)"),
        }
    }
}

impl Impairments {
    /// The impairments asked for; 0 for any of them is refused, naming its flag.
    pub fn new(drop_every: Option<u64>, reorder_every: Option<u64>, duplicate_every: Option<u64>) -> Result<Self, ImpairError> {
        for (flag, v) in [("--drop-every", drop_every), ("--reorder-every", reorder_every), ("--duplicate-every", duplicate_every)] {
            if v == Some(0) {
                return Err(ImpairError::Zero { flag });
            }
        }
        Ok(Impairments { drop_every, reorder_every, duplicate_every })
    }
}

/// What an [`Impair`] did since its counts were last taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImpairCounts {
    pub dropped: u64,
    pub reordered: u64,
    pub duplicated: u64,
    /// Held, then sent alone: no successor came in time (or the function stopped).
    pub held_alone: u64,
}

/// A held datagram: its handle, whether it goes twice, when it was held.
#[derive(Clone, Copy, Debug)]
struct Held<T> {
    item: T,
    twice: bool,
    since_ns: u64,
}

/// The impairments applied to one stream of datagrams (one per worker).
#[derive(Debug)]
pub struct Impair<T> {
    cfg: Impairments,
    n: u64,
    held: Option<Held<T>>,
    counts: ImpairCounts,
}

impl<T: Copy> Impair<T> {
    pub fn new(cfg: Impairments) -> Self {
        Impair { cfg, n: 0, held: None, counts: ImpairCounts::default() }
    }

    fn every(&self, every: Option<u64>) -> bool {
        every.is_some_and(|e| self.n % e == 0)
    }

    /// A datagram arrived at `now_ns`: append to `out`, in order, what is to be sent now.
    pub fn push(&mut self, item: T, now_ns: u64, out: &mut Vec<T>) {
        self.n += 1;
        if self.every(self.cfg.drop_every) {
            self.counts.dropped += 1;
            return;
        }
        let twice = self.every(self.cfg.duplicate_every);
        self.counts.duplicated += twice as u64;
        if let Some(h) = self.held.take() {
            emit(out, item, twice);
            emit(out, h.item, h.twice);
            self.counts.reordered += 1;
        } else if self.every(self.cfg.reorder_every) {
            self.held = Some(Held { item, twice, since_ns: now_ns });
        } else {
            emit(out, item, twice);
        }
    }

    /// The handle of the datagram held back, if any (its buffer must outlive the batch).
    pub fn held(&self) -> Option<T> {
        self.held.map(|h| h.item)
    }

    /// When the held datagram is to be sent alone, if one is held.
    pub fn deadline_ns(&self) -> Option<u64> {
        self.held.map(|h| h.since_ns + HOLD_NS)
    }

    /// Send the held datagram alone (not reordered) if its successor did not come in time.
    pub fn expire(&mut self, now_ns: u64, out: &mut Vec<T>) {
        if self.deadline_ns().is_some_and(|d| now_ns >= d) {
            self.flush(out);
        }
    }

    /// Send the held datagram now, alone, whatever the time (the function stops).
    pub fn flush(&mut self, out: &mut Vec<T>) {
        if let Some(h) = self.held.take() {
            emit(out, h.item, h.twice);
            self.counts.held_alone += 1;
        }
    }

    /// What was done since the last call.
    pub fn take_counts(&mut self) -> ImpairCounts {
        std::mem::take(&mut self.counts)
    }
}

fn emit<T: Copy>(out: &mut Vec<T>, item: T, twice: bool) {
    out.push(item);
    if twice {
        out.push(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn impair(d: Option<u64>, r: Option<u64>, u: Option<u64>) -> Impair<u32> {
        Impair::new(Impairments::new(d, r, u).unwrap())
    }

    /// Datagrams 1..=n pushed 1 µs apart, then what a stop flushes: everything sent, in order.
    fn run(imp: &mut Impair<u32>, n: u32) -> Vec<u32> {
        let mut out = Vec::new();
        for i in 1..=n {
            imp.push(i, i as u64 * 1_000, &mut out);
        }
        imp.flush(&mut out);
        out
    }

    #[test]
    fn none_passes_everything_in_order() {
        let mut imp = impair(None, None, None);
        assert_eq!(run(&mut imp, 5), vec![1, 2, 3, 4, 5]);
        assert_eq!(imp.take_counts(), ImpairCounts::default());
    }

    #[test]
    fn zero_is_refused_naming_the_flag() {
        for (d, r, u, flag) in [(Some(0), None, None, "--drop-every"), (None, Some(0), None, "--reorder-every"), (None, None, Some(0), "--duplicate-every")] {
            let e = Impairments::new(d, r, u).unwrap_err();
            assert!(matches!(e, ImpairError::Zero { flag: f } if f == flag));
            assert!(e.remedy().contains(flag));
        }
    }

    #[test]
    fn drops_every_nth() {
        let mut imp = impair(Some(3), None, None);
        assert_eq!(run(&mut imp, 10), vec![1, 2, 4, 5, 7, 8, 10]);
        assert_eq!(imp.take_counts(), ImpairCounts { dropped: 3, ..Default::default() });
        assert_eq!(imp.take_counts(), ImpairCounts::default(), "taken: reset");
    }

    #[test]
    fn duplicates_every_nth_back_to_back() {
        let mut imp = impair(None, None, Some(2));
        assert_eq!(run(&mut imp, 5), vec![1, 2, 2, 3, 4, 4, 5]);
        assert_eq!(imp.take_counts(), ImpairCounts { duplicated: 2, ..Default::default() });
    }

    #[test]
    fn holds_every_nth_until_after_the_next() {
        let mut imp = impair(None, Some(3), None);
        let mut out = Vec::new();
        imp.push(1, 0, &mut out);
        imp.push(2, 0, &mut out);
        imp.push(3, 0, &mut out);
        assert_eq!(out, vec![1, 2], "the third is held");
        assert_eq!(imp.held(), Some(3));
        imp.push(4, 0, &mut out);
        assert_eq!(out, vec![1, 2, 4, 3], "and sent right after the fourth");
        assert_eq!(imp.held(), None);
        assert_eq!(run(&mut imp, 0), Vec::<u32>::new());
        let mut imp = impair(None, Some(3), None);
        assert_eq!(run(&mut imp, 9), vec![1, 2, 4, 3, 5, 7, 6, 8, 9], "the ninth has no successor: flushed");
        assert_eq!(imp.take_counts(), ImpairCounts { reordered: 2, held_alone: 1, ..Default::default() });
    }

    #[test]
    fn a_held_datagram_goes_alone_after_a_millisecond_not_reordered() {
        let mut imp = impair(None, Some(2), None);
        let mut out = Vec::new();
        imp.push(1, 0, &mut out);
        imp.push(2, 5_000, &mut out);
        assert_eq!(imp.deadline_ns(), Some(5_000 + HOLD_NS));
        imp.expire(5_000 + HOLD_NS - 1, &mut out);
        assert_eq!(out, vec![1], "not yet");
        imp.expire(5_000 + HOLD_NS, &mut out);
        assert_eq!(out, vec![1, 2]);
        assert_eq!(imp.deadline_ns(), None);
        imp.push(3, 2 * HOLD_NS, &mut out);
        imp.push(4, 2 * HOLD_NS, &mut out);
        imp.push(5, 2 * HOLD_NS + 1, &mut out);
        assert_eq!(out, vec![1, 2, 3, 5, 4]);
        let want = ImpairCounts { reordered: 1, held_alone: 1, ..Default::default() };
        assert_eq!(imp.take_counts(), want, "only 4 was reordered; 2 went alone");
    }

    #[test]
    fn every_datagram_held_pairs_them() {
        // A datagram due to be held while one is held goes first; the held one after it.
        let mut imp = impair(None, Some(1), None);
        assert_eq!(run(&mut imp, 5), vec![2, 1, 4, 3, 5]);
        assert_eq!(imp.take_counts(), ImpairCounts { reordered: 2, held_alone: 1, ..Default::default() });
    }

    #[test]
    fn a_dropped_datagram_is_neither_duplicated_nor_held_nor_a_successor() {
        // Every 2nd dropped, every 3rd held, every 4th duplicated: 6 and 12 dropped (not held),
        // 4 and 8 dropped (not duplicated); 3 held waits past dropped 4 for 5.
        let mut imp = impair(Some(2), Some(3), Some(4));
        assert_eq!(run(&mut imp, 12), vec![1, 5, 3, 7, 11, 9]);
        assert_eq!(imp.take_counts(), ImpairCounts { dropped: 6, reordered: 2, duplicated: 0, held_alone: 0 });
    }

    #[test]
    fn a_held_datagram_due_twice_goes_twice_after_its_successor() {
        let mut imp = impair(None, Some(3), Some(3));
        assert_eq!(run(&mut imp, 4), vec![1, 2, 4, 3, 3]);
        assert_eq!(imp.take_counts(), ImpairCounts { dropped: 0, reordered: 1, duplicated: 1, held_alone: 0 });
        // A successor due twice goes twice, then the held one.
        let mut imp = impair(None, Some(3), Some(4));
        assert_eq!(run(&mut imp, 4), vec![1, 2, 4, 4, 3]);
    }

    #[test]
    fn all_three_over_a_long_stream_count_exactly() {
        let mut imp = impair(Some(10), Some(7), Some(5));
        let out = run(&mut imp, 2_000);
        let c = imp.take_counts();
        assert_eq!(c.dropped, 200);
        // Every 5th except the 10th's multiples (dropped): 400 − 200.
        assert_eq!(c.duplicated, 200);
        // Every 7th not dropped (not a multiple of 70): 285 − 28; the successor of each is sent.
        assert_eq!(c.reordered, 257);
        assert_eq!(out.len() as u64, 2_000 - c.dropped + c.duplicated);
        let mut sorted = out.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 1_800, "each datagram not dropped is sent");
    }
}
