//! One flow's answered sequence numbers, as a sliding window of bits below the highest seq
//! answered: it tells a first answer from a duplicate and measures reordering — an answer that
//! comes after an answer of a later seq is reordered, displaced by (highest seq answered − its
//! seq) packets. A seq below the window is too old to tell (the window is at least as long as
//! the flow's packets can be outstanding: such an answer comes after its packet's timeout).

/// What an answer was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The first answer of its seq, none later answered before it.
    InOrder,
    /// The first answer of its seq, after the answer of a seq `by` higher.
    Reordered { by: u64 },
    /// Its seq was answered before.
    Duplicate,
    /// Below the window: answered long after later packets, whether before or not is not known.
    TooOld,
}

pub struct Tracker {
    /// `bits` holds seqs (highest − len, highest], seq s at bit s mod len (a power of two).
    bits: Vec<u64>,
    len: u64,
    highest: Option<u64>,
}

impl Tracker {
    /// A window of at least `seqs` sequence numbers (rounded up to a power of two, ≥ 64).
    pub fn new(seqs: u64) -> Tracker {
        let len = seqs.max(64).next_power_of_two();
        Tracker { bits: vec![0; (len / 64) as usize], len, highest: None }
    }

    #[inline]
    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = seq & (self.len - 1);
        (&mut self.bits[(i / 64) as usize], 1 << (i % 64))
    }

    /// Note an answer of `seq`.
    #[inline]
    pub fn observe(&mut self, seq: u64) -> Seen {
        let Some(high) = self.highest else {
            self.highest = Some(seq);
            let (w, b) = self.bit(seq);
            *w |= b;
            return Seen::InOrder;
        };
        if seq > high {
            self.advance(high, seq);
            return Seen::InOrder;
        }
        if high - seq >= self.len {
            return Seen::TooOld;
        }
        let (w, b) = self.bit(seq);
        if *w & b != 0 {
            return Seen::Duplicate;
        }
        *w |= b;
        Seen::Reordered { by: high - seq }
    }

    /// Move the window's top from `high` to `seq`: the seqs between, not answered yet, are cleared.
    fn advance(&mut self, high: u64, seq: u64) {
        if seq - high >= self.len {
            self.bits.iter_mut().for_each(|w| *w = 0);
        } else {
            for s in high + 1..seq {
                let (w, b) = self.bit(s);
                *w &= !b;
            }
        }
        let (w, b) = self.bit(seq);
        *w |= b;
        self.highest = Some(seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: &mut Tracker, seqs: &[u64]) -> Vec<Seen> {
        seqs.iter().map(|&s| t.observe(s)).collect()
    }

    #[test]
    fn in_order_with_gaps_is_in_order() {
        let mut t = Tracker::new(64);
        assert!(run(&mut t, &[0, 1, 2, 5, 6, 100]).iter().all(|s| *s == Seen::InOrder));
    }

    #[test]
    fn reordering_by_k_is_measured() {
        let mut t = Tracker::new(64);
        use Seen::*;
        assert_eq!(run(&mut t, &[0, 2, 1, 3]), [InOrder, InOrder, Reordered { by: 1 }, InOrder]);
        assert_eq!(run(&mut t, &[10, 4]), [InOrder, Reordered { by: 6 }]);
        // A gap not yet filled, then filled late: reordered by the distance to the highest.
        assert_eq!(run(&mut t, &[9, 5, 8]), [Reordered { by: 1 }, Reordered { by: 5 }, Reordered { by: 2 }]);
    }

    #[test]
    fn duplicates_are_told_apart_from_first_answers() {
        let mut t = Tracker::new(64);
        use Seen::*;
        assert_eq!(run(&mut t, &[0, 0, 1, 3, 1, 2, 2, 3]), [InOrder, Duplicate, InOrder, InOrder, Duplicate,
            Reordered { by: 1 }, Duplicate, Duplicate]);
        // A duplicate of an old seq, well behind the highest but inside the window.
        run(&mut t, &(4..60).collect::<Vec<_>>());
        assert_eq!(t.observe(7), Duplicate);
        assert_eq!(t.observe(59), Duplicate);
    }

    #[test]
    fn the_window_wraps_and_forgets_only_what_fell_out() {
        let mut t = Tracker::new(64);
        for s in 0..1000 {
            assert_eq!(t.observe(s), Seen::InOrder);
        }
        assert_eq!(t.observe(999 - 63), Seen::Duplicate, "the window's oldest seq");
        assert_eq!(t.observe(999 - 64), Seen::TooOld);
        // Skipping past the whole window clears it: seqs in between were never answered.
        assert_eq!(t.observe(5000), Seen::InOrder);
        assert_eq!(t.observe(4990), Seen::Reordered { by: 10 });
        assert_eq!(t.observe(4990), Seen::Duplicate);
        assert_eq!(t.observe(999), Seen::TooOld);
        // A jump shorter than the window clears the bits it passes: they held seqs a lap ago.
        let mut t = Tracker::new(64);
        run(&mut t, &(0..64).collect::<Vec<_>>());
        assert_eq!(t.observe(100), Seen::InOrder);
        assert_eq!(t.observe(80), Seen::Reordered { by: 20 }, "bit 16 held seq 16, answered a lap ago");
        assert_eq!(t.observe(40), Seen::Duplicate, "still inside the window");
        assert_eq!(t.observe(36), Seen::TooOld);
    }
}
