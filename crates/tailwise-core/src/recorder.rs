//! Per-thread recording: every completed request into a histogram, a random 1-in-k subset raw.
//!
//! As in HdrHistogram_rust, each engine thread owns its recorder and nothing is shared while the
//! timing loop runs; the threads' histograms are merged (added) after the run — never their
//! percentiles averaged. The raw samples are what the statistics use: order-statistic confidence
//! intervals need independent draws, and a random 1-in-k subset of a queue's output is the
//! standard way to get them (Lancet §4.3).

use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Histograms cover 1 ns .. 1 h at 3 significant digits (0.1 % relative error).
pub const HIST_MAX_NS: u64 = 3_600 * 1_000_000_000;
pub const HIST_SIGFIG: u8 = 3;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, HIST_SIGFIG).expect("valid histogram bounds")
}

/// Serialize in the HdrHistogram V2 compressed format (readable by every HdrHistogram port).
pub fn encode_histogram(h: &Histogram<u64>) -> Vec<u8> {
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
}

impl Histograms {
    pub fn new() -> Histograms {
        Histograms {
            latency: new_histogram(),
            send_lag: new_histogram(),
            send_lag_unstalled: new_histogram(),
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
    }
}

impl Default for Histograms {
    fn default() -> Self {
        Self::new()
    }
}

/// One kept request. Times are ns since the engine's start.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Sample {
    pub intended_ns: u64,
    pub sent_ns: u64,
    pub latency_ns: u64,
}

/// 1024 samples (24 KiB) a chunk: small enough to come from malloc's free lists, not fresh pages,
/// when a thread starts a new store after handing one over.
const CHUNK: usize = 1024;

/// Append-only store of samples in fixed chunks: no doubling, so memory stays at
/// `size_of::<Sample>()` (24 bytes) per sample plus one partly filled chunk.
#[derive(Default)]
pub struct SampleStore {
    chunks: Vec<Vec<Sample>>,
    len: usize,
}

impl SampleStore {
    #[inline]
    pub fn push(&mut self, s: Sample) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(s),
            _ => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(s);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn iter(&self) -> impl Iterator<Item = &Sample> {
        self.chunks.iter().flat_map(|c| c.iter())
    }
    /// Bytes allocated for samples.
    pub fn allocated_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity() * std::mem::size_of::<Sample>()).sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Sample>>()
    }
    /// Little-endian rows of three u64: intended_ns, sent_ns, latency_ns.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len * 24);
        for s in self.iter() {
            out.extend_from_slice(&s.intended_ns.to_le_bytes());
            out.extend_from_slice(&s.sent_ns.to_le_bytes());
            out.extend_from_slice(&s.latency_ns.to_le_bytes());
        }
        out
    }
}

/// Decides, per request, whether it is kept raw: Bernoulli(1/k), drawn by skipping a geometric
/// number of requests so that the cost is one RNG draw per *kept* request.
pub struct Sampler {
    k: u64,
    rng: SmallRng,
    skip: u64,
}

impl Sampler {
    pub fn new(k: u64, seed: u64) -> Sampler {
        let mut s = Sampler { k: k.max(1), rng: SmallRng::seed_from_u64(seed), skip: 0 };
        s.skip = s.draw_skip();
        s
    }
    fn draw_skip(&mut self) -> u64 {
        if self.k == 1 {
            return 0;
        }
        // Geometric(p = 1/k) failures before the next success, by inversion.
        let p = 1.0 / self.k as f64;
        let u: f64 = self.rng.random::<f64>();
        ((1.0 - u).ln() / (1.0 - p).ln()).floor() as u64
    }
    #[inline]
    pub fn take(&mut self) -> bool {
        if self.skip == 0 {
            self.skip = self.draw_skip();
            true
        } else {
            self.skip -= 1;
            false
        }
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

    #[test]
    fn sampler_keeps_one_in_k() {
        for k in [1u64, 5, 100] {
            let mut s = Sampler::new(k, 3);
            let n = 1_000_000u64;
            let kept = (0..n).filter(|_| s.take()).count() as f64;
            let expect = n as f64 / k as f64;
            // Binomial s.d. is sqrt(n p (1-p)); allow 5 s.d.
            let sd = (n as f64 * (1.0 / k as f64) * (1.0 - 1.0 / k as f64)).sqrt();
            assert!((kept - expect).abs() <= 5.0 * sd + 1e-9, "k {k}: kept {kept}");
        }
    }

    #[test]
    fn sampler_gaps_are_memoryless() {
        // Geometric gaps with p = 1/10 have mean k - 1 = 9 requests skipped and variance (1-p)/p².
        let mut s = Sampler::new(10, 9);
        let mut gaps = Vec::new();
        let mut run = 0u64;
        for _ in 0..2_000_000 {
            if s.take() {
                gaps.push(run as f64);
                run = 0;
            } else {
                run += 1;
            }
        }
        let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let v = gaps.iter().map(|g| (g - m) * (g - m)).sum::<f64>() / gaps.len() as f64;
        assert!((m - 9.0).abs() < 0.15, "mean gap {m}");
        assert!((v / 90.0 - 1.0).abs() < 0.05, "var {v}");
    }

    #[test]
    fn store_costs_24_bytes_a_sample() {
        let mut st = SampleStore::default();
        let n = 100 * CHUNK;
        for i in 0..n as u64 {
            st.push(Sample { intended_ns: i, sent_ns: i + 1, latency_ns: 2 * i });
        }
        assert_eq!(st.len(), n);
        let per = st.allocated_bytes() as f64 / n as f64;
        assert!(per <= 25.0, "{per} bytes per sample");
        let bytes = st.to_le_bytes();
        assert_eq!(bytes.len(), n * 24);
        assert_eq!(u64::from_le_bytes(bytes[24..32].try_into().unwrap()), 1);
        assert_eq!(u64::from_le_bytes(bytes[40..48].try_into().unwrap()), 2);
    }
}
