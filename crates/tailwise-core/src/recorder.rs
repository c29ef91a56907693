//! Per-thread recording: every request into histograms, a random 1-in-k subset raw.
//!
//! As in HdrHistogram_rust, each engine thread owns its recorder and nothing is shared while the
//! timing loop runs; the threads' histograms are merged (added) — never their percentiles
//! averaged. The raw samples are what the statistics use: order-statistic confidence intervals
//! need independent draws, and a random 1-in-k subset of the requests, chosen when each request
//! falls due, is the standard way to get them (Lancet §4.3).
//!
//! *Every* request ends in the histograms and, if sampled, in the samples — answered ones with
//! their latency, the others (timed out, never sent, lost with their connection, still
//! outstanding) *censored*: with the time they have been outstanding since their intended send,
//! a lower bound of their latency, flagged so. A freeze can therefore only push the tail up.
//!
//! Besides the whole-run histogram, [`Intervals`] keeps one histogram per 100 ms of *intended*
//! send time, so that the coordinator can read the every-request distribution over exactly the
//! window of intended times its statistics used (the `consistency` check).

use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

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

/// What a sample's `flags` say about it (bits; several may be set). [`flags::ALL`] lists them by
/// name: the one table `tailwise._core.SAMPLE_FLAGS` exports and Python's `Flag` is built from.
pub mod flags {
    /// Each flag a `pub const`, and all of them by name in [`ALL`], from one list.
    macro_rules! flags {
        ($($(#[$doc:meta])* $name:ident = $value:expr;)*) => {
            $($(#[$doc])* pub const $name: u32 = $value;)*
            /// Every flag as (name, bit), in bit order.
            pub const ALL: &[(&str, u32)] = &[$((stringify!($name), $name)),*];
        };
    }

    flags! {
        /// The latency is a lower bound: the request had no reply (it is at least this late).
        CENSORED = 1;
        /// No reply within the timeout, counted from the intended send time.
        TIMEOUT = 1 << 1;
        /// Never sent: still waiting for a free connection at the timeout or at the end of the run.
        NEVER_SENT = 1 << 2;
        /// Lost with its connection (a reply that was not the protocol, a target that stayed away).
        FAILED = 1 << 3;
        /// Still outstanding when the samples were taken (a snapshot) or when the run was stopped.
        PENDING = 1 << 4;
        /// The server answered with an error.
        ERROR_REPLY = 1 << 5;
        /// Sent again on a new connection after its first one closed.
        RESENT = 1 << 6;
        /// Intended while its engine thread could not run (a stall of ≥ 200 µs), or in the guard
        /// after it while the backlog the stall built was being sent: the client's delay, decided by
        /// the clock — the statistics keep these as intervals (python/tailwise/stats/bounds.py).
        ENGINE_STALL = 1 << 8;
        /// Outstanding across a stall of its engine thread: its latency may include up to
        /// `inflation_ns` of the client's own pause (it stays in; it can only be overstated).
        INFLATED = 1 << 9;
        /// The reply time is the kernel's receive stamp (else the user-space clock after the read).
        KERNEL_RX = 1 << 10;
        /// `tx_ns` is the kernel's transmit stamp of the send that carried the request.
        KERNEL_TX = 1 << 11;
    }
}

/// One kept request: 48 bytes. Times are ns since the engine's start.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Sample {
    pub intended_ns: u64,
    /// Last actual send time, the user-space clock before the write (0: never sent).
    pub sent_ns: u64,
    /// The kernel's transmit stamp of that send (flag `KERNEL_TX`; 0: none).
    pub tx_ns: u64,
    /// The user-space clock after the read that completed the reply (0: no reply). The reply
    /// time the latency counts to is this, or the kernel's receive stamp (flag `KERNEL_RX`).
    pub rx_user_ns: u64,
    /// Reply time − intended send time; for a censored sample, the time outstanding so far.
    pub latency_ns: u64,
    pub flags: u32,
    /// For `INFLATED`: how much of the latency may be the engine's own stall (saturating).
    pub inflation_ns: u32,
}

/// 1024 samples (48 KiB) a chunk: small enough to come from malloc's free lists, not fresh pages,
/// when a thread starts a new store after handing one over.
const CHUNK: usize = 1024;

/// Append-only store of samples in fixed chunks: no doubling, so memory stays at
/// `size_of::<Sample>()` (48 bytes) per sample plus one partly filled chunk.
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
    /// Little-endian rows of 48 bytes: intended_ns, sent_ns, tx_ns, rx_user_ns, latency_ns (u64),
    /// flags, inflation_ns (u32).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        samples_to_le_bytes(self.iter())
    }
}

/// The row [`samples_to_le_bytes`] writes, field by field: (name, byte offset, NumPy type code).
/// `tailwise._core.SAMPLE_FIELDS` exports it and Python's `SAMPLE_DTYPE` is built from it; the
/// tests hold the struct and the writer to it.
pub const SAMPLE_FIELDS: [(&str, usize, &str); 7] = [
    ("intended_ns", std::mem::offset_of!(Sample, intended_ns), "<u8"),
    ("sent_ns", std::mem::offset_of!(Sample, sent_ns), "<u8"),
    ("tx_ns", std::mem::offset_of!(Sample, tx_ns), "<u8"),
    ("rx_user_ns", std::mem::offset_of!(Sample, rx_user_ns), "<u8"),
    ("latency_ns", std::mem::offset_of!(Sample, latency_ns), "<u8"),
    ("flags", std::mem::offset_of!(Sample, flags), "<u4"),
    ("inflation_ns", std::mem::offset_of!(Sample, inflation_ns), "<u4"),
];
/// Bytes per row.
pub const SAMPLE_BYTES: usize = std::mem::size_of::<Sample>();
const _: () = assert!(SAMPLE_BYTES == 48, "one kept request is 48 bytes, without padding");

/// Rows as [`SampleStore::to_le_bytes`] writes them ([`SAMPLE_FIELDS`]).
pub fn samples_to_le_bytes<'a>(samples: impl Iterator<Item = &'a Sample>) -> Vec<u8> {
    let mut out = Vec::new();
    for s in samples {
        out.extend_from_slice(&s.intended_ns.to_le_bytes());
        out.extend_from_slice(&s.sent_ns.to_le_bytes());
        out.extend_from_slice(&s.tx_ns.to_le_bytes());
        out.extend_from_slice(&s.rx_user_ns.to_le_bytes());
        out.extend_from_slice(&s.latency_ns.to_le_bytes());
        out.extend_from_slice(&s.flags.to_le_bytes());
        out.extend_from_slice(&s.inflation_ns.to_le_bytes());
    }
    out
}

/// Width of one every-request interval histogram, in intended send time.
pub const INTERVAL_NS: u64 = 100_000_000;
/// Interval histograms keep 2 significant digits (1 % resolution: ~18 KiB each with u32 counts,
/// against ~256 KiB at 3 digits with u64), so that a 10-minute run costs ~100 MB at most.
pub const INTERVAL_SIGFIG: u8 = 2;

pub type IntervalHistogram = Histogram<u32>;

pub fn new_interval_histogram() -> IntervalHistogram {
    Histogram::new_with_bounds(HIST_LOWEST_NS, HIST_MAX_NS, INTERVAL_SIGFIG).expect("valid histogram bounds")
}

/// Every-request histograms by interval of intended send time, shared by the engine threads
/// (each adds its records at every hand-over) and read by the coordinator: `done` holds the
/// requests that are finished (answered or censored for good); `pending` those still outstanding
/// at the latest snapshot, with the time they had been outstanding then.
#[derive(Default)]
pub struct Intervals {
    pub done: Vec<Option<IntervalHistogram>>,
    pub pending: Vec<Option<IntervalHistogram>>,
    /// The snapshot `pending` belongs to: threads add to it only for this one.
    pub pending_seq: u64,
}

fn slot(v: &mut Vec<Option<IntervalHistogram>>, index: usize) -> &mut IntervalHistogram {
    if v.len() <= index {
        v.resize_with(index + 1, || None);
    }
    v[index].get_or_insert_with(new_interval_histogram)
}

impl Intervals {
    pub fn add_done(&mut self, index: usize, h: &IntervalHistogram) {
        slot(&mut self.done, index).add(h).expect("same histogram bounds");
    }
    pub fn add_pending(&mut self, index: usize, h: &IntervalHistogram) {
        slot(&mut self.pending, index).add(h).expect("same histogram bounds");
    }
    /// Every request intended in intervals `first .. last` (exclusive), finished and (with
    /// `with_pending`) outstanding at the latest snapshot, in one histogram.
    pub fn window(&self, first: usize, last: usize, with_pending: bool) -> Histogram<u64> {
        let mut out = Histogram::<u64>::new_with_bounds(HIST_LOWEST_NS, HIST_MAX_NS, INTERVAL_SIGFIG).expect("valid bounds");
        let sources: &[&Vec<Option<IntervalHistogram>>] =
            if with_pending { &[&self.done, &self.pending] } else { &[&self.done] };
        for v in sources {
            for h in v.iter().take(last).skip(first).flatten() {
                // Same bounds and precision: each bucket's count lands in the same bucket.
                for x in h.iter_recorded() {
                    out.record_n(x.value_iterated_to(), x.count_at_value() as u64).expect("within bounds");
                }
            }
        }
        out
    }
}

/// One engine thread's interval histograms not yet handed over, by interval index. Handing over
/// adds them to the shared [`Intervals`] and zeroes them for reuse: no allocation in the timing
/// loop once an interval has been seen.
#[derive(Default)]
pub struct IntervalRecorder {
    open: Vec<(usize, IntervalHistogram)>,
    /// Where the last record went: nearly every record goes to the same interval as the last.
    last: usize,
}

/// Interval histograms kept for reuse behind the newest one seen (requests finish at most a
/// timeout after their intended time; older ones are rare and get a fresh histogram).
const KEEP_INTERVALS: usize = 64;

impl IntervalRecorder {
    #[inline]
    pub fn record(&mut self, intended_ns: u64, value_ns: u64) {
        self.histogram(intended_ns).saturating_record(value_ns.max(1));
    }

    /// The histogram of the interval holding `intended_ns`.
    #[inline]
    pub fn histogram(&mut self, intended_ns: u64) -> &mut IntervalHistogram {
        let index = (intended_ns / INTERVAL_NS) as usize;
        if self.open.get(self.last).is_some_and(|(i, _)| *i == index) {
            return &mut self.open[self.last].1;
        }
        match self.open.iter().rposition(|(i, _)| *i == index) {
            Some(p) => {
                self.last = p;
                &mut self.open[p].1
            }
            None => {
                let newest = self.open.iter().map(|(i, _)| *i).max().unwrap_or(index).max(index);
                // Reuse the oldest zeroed histogram once there are enough.
                let reuse = self.open.iter().position(|(i, h)| h.is_empty() && *i + KEEP_INTERVALS < newest);
                match reuse {
                    Some(p) => self.open[p].0 = index,
                    None => self.open.push((index, new_interval_histogram())),
                }
                let p = self.open.iter().rposition(|(i, _)| *i == index).unwrap();
                self.last = p;
                &mut self.open[p].1
            }
        }
    }

    /// Add everything recorded so far to `into` (`Intervals::add_done`, or `add_pending` with
    /// `pending`) and zero it.
    pub fn hand_over(&mut self, into: &mut Intervals, pending: bool) {
        for (index, h) in self.open.iter_mut() {
            if !h.is_empty() {
                if pending {
                    into.add_pending(*index, h);
                } else {
                    into.add_done(*index, h);
                }
                h.reset();
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.open.iter().all(|(_, h)| h.is_empty())
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
    fn sample_fields_describe_the_rows_written() {
        // The fields tile the row in order, with no gap, each as wide as its type code says.
        let width = |code: &str| code[2..].parse::<usize>().unwrap();
        let mut end = 0;
        for (name, offset, code) in SAMPLE_FIELDS {
            assert_eq!(offset, end, "{name}");
            assert!(code.starts_with("<u"), "{name}: {code}");
            end += width(code);
        }
        assert_eq!(end, SAMPLE_BYTES);
        // Every field written where the table says, little-endian.
        let s = Sample {
            intended_ns: 0x0102_0304_0506_0708,
            sent_ns: 0x1112_1314_1516_1718,
            tx_ns: 0x2122_2324_2526_2728,
            rx_user_ns: 0x3132_3334_3536_3738,
            latency_ns: 0x4142_4344_4546_4748,
            flags: 0x5152_5354,
            inflation_ns: 0x6162_6364,
        };
        let row = samples_to_le_bytes([s, s].iter());
        assert_eq!(row.len(), 2 * SAMPLE_BYTES);
        for (name, offset, code) in SAMPLE_FIELDS {
            let mut le = [0u8; 8];
            le[..width(code)].copy_from_slice(&row[SAMPLE_BYTES + offset..SAMPLE_BYTES + offset + width(code)]);
            let want = match name {
                "intended_ns" => s.intended_ns,
                "sent_ns" => s.sent_ns,
                "tx_ns" => s.tx_ns,
                "rx_user_ns" => s.rx_user_ns,
                "latency_ns" => s.latency_ns,
                "flags" => s.flags as u64,
                "inflation_ns" => s.inflation_ns as u64,
                other => panic!("field {other} not in Sample"),
            };
            assert_eq!(u64::from_le_bytes(le), want, "{name}");
        }
    }

    #[test]
    fn flags_are_distinct_single_bits_in_order() {
        let mut seen = 0u32;
        for (name, bit) in flags::ALL {
            assert_eq!(bit.count_ones(), 1, "{name}");
            assert_eq!(seen & bit, 0, "{name} reuses a bit");
            assert!(*bit > seen, "{name} out of bit order");
            seen |= bit;
        }
        assert_eq!(flags::ALL.len(), 11);
        assert_eq!(flags::ALL[0], ("CENSORED", flags::CENSORED));
        assert_eq!(flags::ALL[10], ("KERNEL_TX", flags::KERNEL_TX));
    }

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
    fn store_costs_48_bytes_a_sample() {
        let mut st = SampleStore::default();
        let n = 100 * CHUNK;
        for i in 0..n as u64 {
            st.push(Sample {
                intended_ns: i,
                sent_ns: i + 1,
                tx_ns: i + 2,
                rx_user_ns: i + 3,
                latency_ns: 2 * i,
                flags: 5,
                inflation_ns: 7,
            });
        }
        assert_eq!(st.len(), n);
        let per = st.allocated_bytes() as f64 / n as f64;
        assert!(per <= 49.0, "{per} bytes per sample");
        let bytes = st.to_le_bytes();
        assert_eq!(bytes.len(), n * 48);
        // Row 1: intended 1, sent 2, tx 3, rx_user 4, latency 2, flags 5, inflation 7.
        let row = &bytes[48..96];
        let u64_at = |o: usize| u64::from_le_bytes(row[o..o + 8].try_into().unwrap());
        assert_eq!([u64_at(0), u64_at(8), u64_at(16), u64_at(24), u64_at(32)], [1, 2, 3, 4, 2]);
        assert_eq!(u32::from_le_bytes(row[40..44].try_into().unwrap()), 5);
        assert_eq!(u32::from_le_bytes(row[44..48].try_into().unwrap()), 7);
    }

    #[test]
    fn intervals_add_up_by_intended_time_and_windows_merge_them() {
        let mut rec = IntervalRecorder::default();
        let mut all = Intervals::default();
        // 1 ms apart over 1 s: 100 per 100 ms interval, values 1..=1000 µs.
        for i in 0..1000u64 {
            rec.record(i * 1_000_000, (i + 1) * 1_000);
        }
        rec.hand_over(&mut all, false);
        assert!(rec.is_empty());
        assert_eq!(all.done.iter().flatten().count(), 10);
        let w = all.window(2, 5, false);
        assert_eq!(w.len(), 300);
        // Intervals 2..5 hold values 201..=500 µs: the median is 350 µs within 1 %.
        let med = w.value_at_quantile(0.5) as f64;
        assert!((med / 350_000.0 - 1.0).abs() < 0.01, "{med}");
        let mut pend = IntervalHistogram::new_with_bounds(HIST_LOWEST_NS, HIST_MAX_NS, INTERVAL_SIGFIG).unwrap();
        pend.record(5_000_000_000).unwrap();
        all.add_pending(4, &pend);
        assert_eq!(all.window(2, 5, true).len(), 301);
        assert_eq!(all.window(2, 5, false).len(), 300);
    }
}
