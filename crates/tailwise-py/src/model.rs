//! Bindings of the queueing model (`tailwise_core::model`): `model_sojourn` and `model_summary`.
//! Each validates its arguments (InputError with the problem and its fix, `model::ModelError`),
//! then simulates with the interpreter released (`py.detach`).

use crate::raise;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tailwise_core::load::dist::Dist;
use tailwise_core::model::{self, ModelError};

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

/// `n` unless it is outside `low..=high`.
fn within(what: &'static str, counted: &'static str, n: i64, low: i64, high: i64, example: &'static str) -> Result<usize, ModelError> {
    if (low..=high).contains(&n) {
        Ok(n as usize)
    } else {
        Err(ModelError::OutOfRange { what, counted, n, low, high, example })
    }
}

fn setup(service: &str, load: f64, workers: i64, n: i64, warmup: i64) -> Result<Setup, ModelError> {
    let dist = Dist::parse(service)?;
    let workers = within("workers", "", workers, 1, MAX_WORKERS, "give the server's worker count, e.g. workers=1")?;
    let max = MAX_CUSTOMERS as i64;
    let n = within("n", " customers", n, 1, max, "give e.g. n=2000000")?;
    let warmup = within("warmup", " customers", warmup, 0, max, "give e.g. warmup=100000")?;
    let rate = model::arrival_rate_for_load(&dist, load, workers)?;
    Ok(Setup { dist, rate, workers, n, warmup })
}

fn simulate(s: &Setup, seed: u64) -> Result<Vec<f64>, ModelError> {
    if s.workers == 1 {
        model::mg1_sojourn(&s.dist, s.rate, s.n, seed, s.warmup)
    } else {
        model::mgk_sojourn(&s.dist, s.rate, s.workers, s.n, seed, s.warmup)
    }
}

fn check_ps(ps: &[f64]) -> Result<(), ModelError> {
    match ps.iter().find(|p| !(0.0..=100.0).contains(*p)) {
        Some(p) => Err(ModelError::Percentile(*p)),
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
    let s = setup(service, load, workers, n, warmup).map_err(raise)?;
    let bytes = py
        .detach(|| {
            simulate(&s, seed)
                .map(|t| t.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
        })
        .map_err(raise)?;
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
    check_ps(&ps).map_err(raise)?;
    let s = setup(service, load, workers, n, warmup).map_err(raise)?;
    let (mean, values) = py
        .detach(|| {
            simulate(&s, seed).map(|mut t| (model::mean(&t), model::percentiles(&mut t, &ps)))
        })
        .map_err(raise)?;
    let d = PyDict::new(py);
    d.set_item("percentiles", values)?;
    d.set_item("mean_ns", mean)?;
    d.set_item("customers", s.n)?;
    d.set_item("arrival_rate_per_ns", s.rate)?;
    d.set_item("mean_service_ns", s.dist.mean_ns())?;
    d.set_item("service", s.dist.spec())?;
    Ok(d)
}
