//! Every-request histograms by 100 ms of intended send time: per thread ([`IntervalRecorder`]),
//! handed over into the shared [`Intervals`] the coordinator reads windows of.

use super::histogram::{encode_histogram, HIST_LOWEST_NS, HIST_MAX_NS};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use std::borrow::Cow;

/// Width of one every-request interval histogram, in intended send time.
pub const INTERVAL_NS: u64 = 100_000_000;
/// Interval histograms keep 2 significant digits (1 % resolution: ~18 KiB each with u32 counts,
/// against ~256 KiB at 3 digits with u64).
pub const INTERVAL_SIGFIG: u8 = 2;
/// Finished intervals this far behind the newest are kept encoded ([`Intervals::seal`]: V2
/// compressed, a few hundred bytes against ~18 KiB), so that the run's length costs ~10× less.
/// Requests finish within a timeout of their intended time; a later one unseals its interval.
pub const SEAL_BEHIND: usize = 100;

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
    pub done: Vec<Option<Done>>,
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

/// A finished interval's histogram: open (still added to), or sealed — its V2 compressed bytes
/// (what [`encode_histogram`] gives for it) and its count.
pub enum Done {
    Open(IntervalHistogram),
    Sealed { bytes: Vec<u8>, len: u64 },
}

impl Done {
    pub fn len(&self) -> u64 {
        match self {
            Done::Open(h) => h.len(),
            Done::Sealed { len, .. } => *len,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The histogram (decoded when sealed).
    pub fn histogram(&self) -> Cow<'_, IntervalHistogram> {
        match self {
            Done::Open(h) => Cow::Borrowed(h),
            Done::Sealed { bytes, .. } => Cow::Owned(decode(bytes)),
        }
    }
    /// Its V2 compressed bytes (a sealed one's as kept).
    pub fn encoded(&self) -> Vec<u8> {
        match self {
            Done::Open(h) => encode_histogram(h),
            Done::Sealed { bytes, .. } => bytes.clone(),
        }
    }
}

fn decode(bytes: &[u8]) -> IntervalHistogram {
    Deserializer::new().deserialize(&mut &bytes[..]).expect("a histogram this module encoded")
}

impl Intervals {
    pub fn add_done(&mut self, index: usize, h: &IntervalHistogram) {
        if self.done.len() <= index {
            self.done.resize_with(index + 1, || None);
        }
        let d = self.done[index].get_or_insert_with(|| Done::Open(new_interval_histogram()));
        if let Done::Sealed { bytes, .. } = d {
            *d = Done::Open(decode(bytes)); // a request finished later than SEAL_BEHIND: rare
        }
        if let Done::Open(open) = d {
            open.add(h).expect("same histogram bounds");
        }
    }
    /// Encode the finished intervals more than `behind` intervals older than the newest: called
    /// by the coordinator after a snapshot (never in a timing loop). Returns how many it sealed.
    pub fn seal(&mut self, behind: usize) -> usize {
        let upto = self.done.len().saturating_sub(behind + 1);
        let mut sealed = 0;
        for d in self.done[..upto].iter_mut().flatten() {
            if let Done::Open(h) = d {
                *d = Done::Sealed { bytes: encode_histogram(h), len: h.len() };
                sealed += 1;
            }
        }
        sealed
    }
    pub fn add_pending(&mut self, index: usize, h: &IntervalHistogram) {
        slot(&mut self.pending, index).add(h).expect("same histogram bounds");
    }
    /// Every request intended in intervals `first .. last` (exclusive), finished and (with
    /// `with_pending`) outstanding at the latest snapshot, in one histogram.
    pub fn window(&self, first: usize, last: usize, with_pending: bool) -> Histogram<u64> {
        let mut out = Histogram::<u64>::new_with_bounds(HIST_LOWEST_NS, HIST_MAX_NS, INTERVAL_SIGFIG).expect("valid bounds");
        let mut add = |h: &IntervalHistogram| {
            // Same bounds and precision: each bucket's count lands in the same bucket.
            for x in h.iter_recorded() {
                out.record_n(x.value_iterated_to(), x.count_at_value() as u64).expect("within bounds");
            }
        };
        for d in self.done.iter().take(last).skip(first).flatten() {
            add(&d.histogram());
        }
        if with_pending {
            for h in self.pending.iter().take(last).skip(first).flatten() {
                add(h);
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn sealed_intervals_read_as_open_ones_and_unseal_when_added_to() {
        let mut rec = IntervalRecorder::default();
        let mut all = Intervals::default();
        for i in 0..1000u64 {
            rec.record(i * 1_000_000, (i + 1) * 1_000);
        }
        rec.hand_over(&mut all, false);
        let before: Vec<Vec<u8>> = all.done.iter().flatten().map(Done::encoded).collect();
        let w = encode_histogram(&all.window(0, 10, false));
        assert_eq!(all.seal(3), 6);
        assert!(all.done[..6].iter().flatten().all(|d| matches!(d, Done::Sealed { .. })));
        assert!(all.done[6..].iter().flatten().all(|d| matches!(d, Done::Open(_))));
        let after: Vec<Vec<u8>> = all.done.iter().flatten().map(Done::encoded).collect();
        assert_eq!(before, after);
        assert_eq!(encode_histogram(&all.window(0, 10, false)), w);
        assert_eq!(all.done[2].as_ref().unwrap().len(), 100);
        rec.record(250_000_000, 7_000);
        rec.hand_over(&mut all, false);
        assert!(matches!(all.done[2], Some(Done::Open(_))));
        assert_eq!(all.window(2, 3, false).len(), 101);
    }
}
