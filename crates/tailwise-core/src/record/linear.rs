//! Packet mode's histogram of every answered packet at a fixed 100 ns: the granularity the
//! software tools of How to Measure the Killer Microsecond keep (KBNets'17 §3: MoonGen-SW, TRex
//! and netperf, each given "a 100ns-granularity histogram"). The HDR histograms (`histogram`)
//! have a relative resolution — ≤ 64 ns below 131 µs, 0.1 % above — so a 1 ms answer is known to
//! 1 µs there; here every answer below [`LINEAR_RANGE_NS`] is known to [`LINEAR_BIN_NS`].
//!
//! Bins are plain counts (100,000 of them, 800 KB per packet thread, allocated once: nothing per
//! packet), merged by adding; answers at or above the range are counted in `above` (the HDR
//! histogram still has them at 0.1 %).

/// A bin's width: 100 ns (KBNets'17 §3).
pub const LINEAR_BIN_NS: u64 = 100;
/// The range binned at that width: 0 .. 10 ms, 100× a µs-scale network function's tail.
pub const LINEAR_RANGE_NS: u64 = 10_000_000;

#[derive(Clone, Debug, PartialEq)]
pub struct LinearHistogram {
    /// `counts[i]`: answers in `[i·LINEAR_BIN_NS, (i+1)·LINEAR_BIN_NS)`.
    pub counts: Vec<u64>,
    /// Answers at or above `LINEAR_RANGE_NS`.
    pub above: u64,
}

impl LinearHistogram {
    pub fn new() -> LinearHistogram {
        LinearHistogram { counts: vec![0; (LINEAR_RANGE_NS / LINEAR_BIN_NS) as usize], above: 0 }
    }

    #[inline]
    pub fn record(&mut self, latency_ns: u64) {
        match self.counts.get_mut((latency_ns / LINEAR_BIN_NS) as usize) {
            Some(c) => *c += 1,
            None => self.above += 1,
        }
    }

    pub fn add(&mut self, other: &LinearHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.above += other.above;
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.above
    }

    /// The bins up to the last one counted, as little-endian u64s (what Python reads with
    /// `numpy.frombuffer`): a µs-scale answer set is a few thousand bins, not the whole range.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let used = self.counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
        self.counts[..used].iter().flat_map(|c| c.to_le_bytes()).collect()
    }
}

impl Default for LinearHistogram {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_lands_in_its_100ns_bin() {
        let mut h = LinearHistogram::new();
        for v in [0, 99, 100, 12_345, LINEAR_RANGE_NS - 1, LINEAR_RANGE_NS, u64::MAX] {
            h.record(v);
        }
        assert_eq!(h.counts[0], 2);
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[123], 1);
        assert_eq!(h.counts[99_999], 1);
        assert_eq!(h.above, 2);
        assert_eq!(h.total(), 7);
    }

    #[test]
    fn merged_by_adding_and_encoded_up_to_the_last_bin() {
        let (mut a, mut b) = (LinearHistogram::new(), LinearHistogram::new());
        a.record(250);
        b.record(250);
        b.record(20_000_000);
        a.add(&b);
        assert_eq!((a.counts[2], a.above, a.total()), (2, 1, 3));
        let bytes = a.to_le_bytes();
        assert_eq!(bytes.len(), 3 * 8);
        assert_eq!(u64::from_le_bytes(bytes[16..24].try_into().unwrap()), 2);
        assert!(LinearHistogram::new().to_le_bytes().is_empty());
    }
}
