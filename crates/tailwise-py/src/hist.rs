//! `tailwise._core.Histogram`: the `hdrhistogram` crate's histogram, for Python's statistics and
//! files (stats/histogram.py, results/summary.py, render/), so that decoding, adding, subtracting
//! and reading percentiles are the crate's rather than a re-implementation in Python.

use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tailwise_core::record::histogram::encode_histogram;

/// The rank Java HdrHistogram's `getValueAtPercentile` reads for percentile `p` (0–100) of `n`
/// counts: 1 ulp below p, clamped to 0–100, then ⌈p·n/100⌉, at least 1. The crate's
/// `value_at_quantile` takes ⌈(p/100)·n⌉ without the ulp, which for some p and n (99.9 of 1000)
/// reaches one request higher than Java and its log processor.
pub fn java_rank(p: f64, n: u64) -> u64 {
    let below = if p > 0.0 { f64::from_bits(p.to_bits() - 1) } else { 0.0 };
    ((below.min(100.0) * n as f64) / 100.0).ceil().max(1.0) as u64
}

/// Values at percentiles `ps` (0–100) as Java's `getValueAtPercentile` reads them: the highest
/// value equivalent to the `java_rank`-th smallest (the lowest for p = 0); 0 when empty. One walk
/// of the recorded buckets for all of them.
pub fn values_at_percentiles(h: &Histogram<u64>, ps: &[f64]) -> Vec<u64> {
    let n = h.len();
    let mut values = vec![0; ps.len()];
    if n == 0 {
        return values;
    }
    let mut order: Vec<usize> = (0..ps.len()).collect();
    order.sort_by_key(|&i| java_rank(ps[i], n));
    let mut pending = order.into_iter().peekable();
    let mut seen = 0u64;
    for item in h.iter_recorded() {
        seen += item.count_since_last_iteration();
        while let Some(&i) = pending.peek() {
            if seen < java_rank(ps[i], n) {
                break;
            }
            let v = item.value_iterated_to();
            values[i] = if ps[i] == 0.0 { h.lowest_equivalent(v) } else { h.highest_equivalent(v) };
            pending.next();
        }
    }
    values
}

fn hist_error(what: &str, e: impl std::fmt::Debug) -> PyErr {
    PyValueError::new_err(format!("{what}: {e:?}"))
}

/// An HDR histogram of u64 counts (the crate's `Histogram<u64>`).
#[pyclass(name = "Histogram", module = "tailwise._core")]
#[derive(Clone)]
pub struct PyHistogram {
    h: Histogram<u64>,
}

#[pymethods]
impl PyHistogram {
    /// An empty histogram of `lowest`…`highest` (ns) at `digits` significant digits.
    #[new]
    fn new(lowest: u64, highest: u64, digits: u8) -> PyResult<Self> {
        let h = Histogram::new_with_bounds(lowest, highest, digits).map_err(|e| hist_error("histogram bounds", e))?;
        Ok(PyHistogram { h })
    }

    /// A histogram from HdrHistogram V2 bytes (compressed, as the engine and the files hold them, or not).
    #[staticmethod]
    fn decode(raw: &[u8]) -> PyResult<Self> {
        let h = Deserializer::new().deserialize(&mut &raw[..]).map_err(|e| hist_error("HdrHistogram V2 bytes", e))?;
        Ok(PyHistogram { h })
    }

    /// HdrHistogram V2 compressed bytes (as the engine writes them).
    fn encode<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &encode_histogram(&self.h))
    }

    /// Count `value` `count` times; a value above the range counts at its top.
    #[pyo3(signature = (value, count=1))]
    fn record(&mut self, value: u64, count: u64) {
        self.h.saturating_record_n(value, count);
    }

    /// Count each value once; values above the range count at its top.
    fn record_values(&mut self, values: Vec<u64>) {
        for v in values {
            self.h.saturating_record(v);
        }
    }

    /// Add another histogram's counts (its range must fit in this one's).
    fn add(&mut self, other: &PyHistogram) -> PyResult<()> {
        self.h.add(&other.h).map_err(|e| hist_error("histogram addition", e))
    }

    /// Take another histogram's counts away; raises ValueError, leaving this one as it was, when
    /// any bucket of the other holds more than this one's.
    fn subtract(&mut self, other: &PyHistogram) -> PyResult<()> {
        let mut h = self.h.clone();
        h.subtract(&other.h).map_err(|e| hist_error("histogram subtraction", e))?;
        self.h = h;
        Ok(())
    }

    /// A copy.
    fn copy(&self) -> Self {
        self.clone()
    }

    /// Counts recorded.
    #[getter]
    fn total(&self) -> u64 {
        self.h.len()
    }

    /// The lowest recorded value's lowest equivalent (0 when empty).
    #[getter]
    fn min(&self) -> u64 {
        self.h.min()
    }

    /// The highest recorded value's highest equivalent (0 when empty).
    #[getter]
    fn max(&self) -> u64 {
        self.h.max()
    }

    #[getter]
    fn lowest(&self) -> u64 {
        self.h.low()
    }

    #[getter]
    fn highest(&self) -> u64 {
        self.h.high()
    }

    #[getter]
    fn digits(&self) -> u8 {
        self.h.sigfig()
    }

    /// The value at percentile `p` (0–100) as Java HdrHistogram's `getValueAtPercentile`; 0 when empty.
    fn value_at_percentile(&self, p: f64) -> u64 {
        values_at_percentiles(&self.h, &[p])[0]
    }

    /// `value_at_percentile` of each of `ps`, in one walk.
    fn values_at_percentiles(&self, ps: Vec<f64>) -> Vec<u64> {
        values_at_percentiles(&self.h, &ps)
    }

    fn lowest_equivalent(&self, value: u64) -> u64 {
        self.h.lowest_equivalent(value)
    }

    fn highest_equivalent(&self, value: u64) -> u64 {
        self.h.highest_equivalent(value)
    }

    /// Every bucket with a count, ascending: (its highest equivalent value, its count).
    fn recorded(&self) -> Vec<(u64, u64)> {
        self.h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_since_last_iteration())).collect()
    }
}

/// Register the histogram's class on the module.
pub fn add_to(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyHistogram>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_as_java_reads_them() {
        // Java: (long) Math.ceil(Math.nextAfter(p, -inf) * n / 100), at least 1.
        assert_eq!(java_rank(0.0, 10), 1);
        assert_eq!(java_rank(50.0, 10), 5);
        assert_eq!(java_rank(99.9, 1000), 999);
        assert_eq!(java_rank(100.0, 7), 7);
        assert_eq!(java_rank(150.0, 7), 7);
    }

    #[test]
    fn values_at_percentiles_walk_the_buckets() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        h.record_n(10, 9).unwrap();
        h.record(5_000).unwrap();
        let v = values_at_percentiles(&h, &[100.0, 0.0, 90.0, 91.0]);
        assert_eq!(v, vec![h.highest_equivalent(5_000), 10, 10, h.highest_equivalent(5_000)]);
    }
}
