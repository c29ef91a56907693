//! Bindings of the queueing model (`tailwise_core::model`): `model_sojourn` and `model_summary`.
//! Each validates its arguments (ValueError with a one-line message naming
//! the fix), then simulates with the interpreter released (`py.detach`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tailwise_core::dist::Dist;
use tailwise_core::model;

/// At most this many customers are kept (8 bytes each: 800 MB).
pub(crate) const MAX_CUSTOMERS: usize = 100_000_000;
/// A customer costs O(busy servers): beyond this the simulation takes minutes.
pub(crate) const MAX_WORKERS: i64 = 1024;

/// The service distribution and the arrival rate (per ns) for `load` = ρ on `workers` servers.
/// Python ints may be negative: the sizes are taken as i64 and checked here.
struct Setup {
    dist: Dist,
    rate: f64,
    workers: usize,
    n: usize,
    warmup: usize,
}

fn setup(service: &str, load: f64, workers: i64, n: i64, warmup: i64) -> PyResult<Setup> {
    let dist = Dist::parse(service).map_err(PyValueError::new_err)?;
    if !(1..=MAX_WORKERS).contains(&workers) {
        return Err(PyValueError::new_err(format!("workers={workers} is outside 1..{MAX_WORKERS}: give the server's worker count, e.g. workers=1")));
    }
    if !(1..=MAX_CUSTOMERS as i64).contains(&n) {
        return Err(PyValueError::new_err(format!("n={n} customers is outside 1..{MAX_CUSTOMERS}: give e.g. n=2000000")));
    }
    if !(0..=MAX_CUSTOMERS as i64).contains(&warmup) {
        return Err(PyValueError::new_err(format!("warmup={warmup} customers is outside 0..{MAX_CUSTOMERS}: give e.g. warmup=100000")));
    }
    let (workers, n, warmup) = (workers as usize, n as usize, warmup as usize);
    let rate = model::arrival_rate_for_load(&dist, load, workers).map_err(PyValueError::new_err)?;
    Ok(Setup { dist, rate, workers, n, warmup })
}

fn simulate(s: &Setup, seed: u64) -> Result<Vec<f64>, String> {
    if s.workers == 1 {
        model::mg1_sojourn(&s.dist, s.rate, s.n, seed, s.warmup)
    } else {
        model::mgk_sojourn(&s.dist, s.rate, s.workers, s.n, seed, s.warmup)
    }
}

fn check_ps(ps: &[f64]) -> PyResult<()> {
    match ps.iter().find(|p| !(0.0..=100.0).contains(*p)) {
        Some(p) => Err(PyValueError::new_err(format!("percentile {p} is outside [0, 100]: give percents, e.g. 99.9"))),
        None => Ok(()),
    }
}

/// Sojourn times (ns) of `n` customers of a FIFO M/G/k queue (k = `workers`) at load ρ = `load`,
/// after `warmup` discarded ones, in arrival order, as little-endian f64 bytes
/// (`numpy.frombuffer(b, '<f8')`). k = 1 uses the Lindley recursion.
#[pyfunction]
#[pyo3(signature = (service, load, workers=1, *, n, seed=1, warmup=0))]
pub fn model_sojourn<'py>(
    py: Python<'py>,
    service: &str,
    load: f64,
    workers: i64,
    n: i64,
    seed: u64,
    warmup: i64,
) -> PyResult<Bound<'py, PyBytes>> {
    let s = setup(service, load, workers, n, warmup)?;
    let bytes = py
        .detach(|| {
            simulate(&s, seed)
                .map(|t| t.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
        })
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &bytes))
}

/// Percentiles `ps` (percent) of the sojourn time of the same simulation as `model_sojourn`
/// (the order statistic x(⌈n·p/100⌉), as in `stats.quantiles`) without handing the sequence
/// over, and the mean: {"percentiles": [...], "mean_ns", "customers",
/// "arrival_rate_per_ns", "mean_service_ns", "service" (canonical spec)}.
#[pyfunction]
#[pyo3(signature = (service, load, workers=1, *, ps, n, seed=1, warmup=0))]
#[allow(clippy::too_many_arguments)]
pub fn model_summary<'py>(
    py: Python<'py>,
    service: &str,
    load: f64,
    workers: i64,
    ps: Vec<f64>,
    n: i64,
    seed: u64,
    warmup: i64,
) -> PyResult<Bound<'py, PyDict>> {
    check_ps(&ps)?;
    let s = setup(service, load, workers, n, warmup)?;
    let (mean, values) = py
        .detach(|| {
            simulate(&s, seed).map(|mut t| (model::mean(&t), model::percentiles(&mut t, &ps)))
        })
        .map_err(PyValueError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("percentiles", values)?;
    d.set_item("mean_ns", mean)?;
    d.set_item("customers", s.n)?;
    d.set_item("arrival_rate_per_ns", s.rate)?;
    d.set_item("mean_service_ns", s.dist.mean_ns())?;
    d.set_item("service", s.dist.spec())?;
    Ok(d)
}
