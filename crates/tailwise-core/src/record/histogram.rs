//! The whole-run histograms: every request's latency and send lag, per engine thread, merged by
//! adding counts.

use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use super::linear::LinearHistogram;

/// Histograms cover 1 ns .. 1 h at 3 significant digits (0.1 % relative error).
pub const HIST_LOWEST_NS: u64 = 1;
pub const HIST_MAX_NS: u64 = 3_600 * 1_000_000_000;
pub const HIST_SIGFIG: u8 = 3;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(HIST_LOWEST_NS, HIST_MAX_NS, HIST_SIGFIG).expect("valid histogram bounds")
}

/// Serialize in the HdrHistogram V2 compressed format (readable by every HdrHistogram port).
pub fn encode_histogram<T: hdrhistogram::Counter>(h: &Histogram<T>) -> Vec<u8> {
    let mut out = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut out).expect("serializing to memory cannot fail");
    out
}

/// The histograms every engine thread keeps and the engine merges by adding counts.
pub struct Histograms {
    /// Reply time − intended send time, every completed request.
    pub latency: Histogram<u64>,
    /// Actual − intended send time, every sent request.
    pub send_lag: Histogram<u64>,
    /// Send lag of the requests whose wait no stall of the engine thread overlapped.
    pub send_lag_unstalled: Histogram<u64>,
    /// Packet mode only: every answered packet at 100 ns (`record/linear`).
    pub packets: Option<LinearHistogram>,
}

impl Histograms {
    pub fn new() -> Histograms {
        Histograms {
            latency: new_histogram(),
            send_lag: new_histogram(),
            send_lag_unstalled: new_histogram(),
            packets: None,
        }
    }

    pub fn add(&mut self, other: &Histograms) {
        for (mine, theirs) in [
            (&mut self.latency, &other.latency),
            (&mut self.send_lag, &other.send_lag),
            (&mut self.send_lag_unstalled, &other.send_lag_unstalled),
        ] {
            mine.add(theirs).expect("same histogram bounds");
        }
        match (&mut self.packets, &other.packets) {
            (Some(mine), Some(theirs)) => mine.add(theirs),
            (mine @ None, Some(theirs)) => *mine = Some(theirs.clone()),
            (_, None) => {}
        }
    }
}

impl Default for Histograms {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_match_exact_arithmetic() {
        // 1..=100_000 ns: the exact q-quantile is ceil(q·n); the histogram is within 0.1 %.
        let mut h = new_histogram();
        for v in 1..=100_000u64 {
            h.record(v).unwrap();
        }
        for q in [0.5, 0.9, 0.99, 0.999] {
            let exact = (q * 100_000.0f64).ceil();
            let got = h.value_at_quantile(q) as f64;
            assert!((got - exact).abs() / exact <= 1e-3, "q {q}: {got} vs {exact}");
        }
        assert_eq!(h.len(), 100_000);
    }

    #[test]
    fn histograms_merge_by_adding_counts() {
        let (mut a, mut b) = (new_histogram(), new_histogram());
        for v in 0..1000u64 {
            a.record(1_000 + v).unwrap();
            b.record(1_000_000 + v).unwrap();
        }
        a.add(&b).unwrap();
        assert_eq!(a.len(), 2000);
        assert!(a.value_at_quantile(0.75) >= 1_000_000);
        let bytes = encode_histogram(&a);
        assert!(!bytes.is_empty());
    }
}
