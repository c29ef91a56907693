//! `tailwise._core`: the Python face of the data plane. Thin on purpose: it converts arguments,
//! releases the interpreter (`py.detach`) around every call that waits, and hands results back as
//! plain dicts and bytes. Engine and server threads are native threads that never touch Python.

mod hist;
mod model;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use tailwise_core::engine::{Counters, Engine, EngineConfig, Snapshot, TlsStats};
use tailwise_core::error::{Kind, Problem};
use tailwise_core::load::dist::Dist;
use tailwise_core::load::schedule::Arrival;
use tailwise_core::load::workload::Workload;
use tailwise_core::preload::{preload as run_preload, PreloadConfig};
use tailwise_core::protocol::Protocol;
use tailwise_core::packet::PacketIntervals;
use tailwise_core::protocol::flow;
use tailwise_core::record::flags;
use tailwise_core::record::histogram::{encode_histogram, HIST_LOWEST_NS, HIST_MAX_NS, HIST_SIGFIG};
use tailwise_core::record::linear::{LINEAR_BIN_NS, LINEAR_RANGE_NS};
use tailwise_core::record::interval::{Intervals, INTERVAL_NS, INTERVAL_SIGFIG};
use tailwise_core::record::sample::{samples_to_le_bytes, SAMPLE_BYTES, SAMPLE_FIELDS};
use tailwise_core::server::impair::Impairments;
use tailwise_core::server::udp::{UdpConfig, UdpFunction, UdpMode};
use tailwise_core::server::{Server, ServerConfig};

/// A data-plane problem raised as its `tailwise.errors` class, carrying the problem and the remedy
/// as two values (`TailwiseError(problem, remedy)`), so Python never reads them out of a message.
pub(crate) fn raise<E: Problem>(e: E) -> PyErr {
    Python::attach(|py| {
        let class = match e.kind() {
            Kind::Input => "InputError",
            Kind::Target => "TargetError",
            Kind::Host => "HostError",
        };
        match py.import("tailwise.errors").and_then(|m| m.getattr(class)) {
            Ok(cls) => match cls.call1((e.to_string(), e.remedy())) {
                Ok(obj) => PyErr::from_value(obj),
                Err(err) => err,
            },
            Err(err) => err,
        }
    })
}

fn workload(keys: u64, key_size: &str, value_size: &str, popularity: &str, set_fraction: f64) -> PyResult<Workload> {
    Workload::parse(keys, key_size, value_size, popularity, set_fraction).map_err(raise)
}

/// The interface the kernel routes `target` (HOST:PORT) through. Raises HostError with the reason
/// (ValueError if `target` does not resolve).
#[pyfunction]
fn route_interface(target: &str) -> PyResult<String> {
    tailwise_core::io::route::route_interface(&resolve(target)?).map_err(raise)
}

/// Whether `ifname` can stamp every packet in hardware for this process (its driver, the permission
/// to switch it, its PTP clock): returns if it can, else raises HostError with the reason.
#[pyfunction]
fn hardware_timestamping(ifname: &str) -> PyResult<()> {
    tailwise_core::stamp::nic::hardware_timestamping(ifname).map_err(raise)
}

/// Check a workload's fields; returns the mean key and value sizes (bytes) over a sample of keys.
#[pyfunction]
#[pyo3(signature = (keys, key_size, value_size, popularity, set_fraction))]
fn check_workload(keys: u64, key_size: &str, value_size: &str, popularity: &str, set_fraction: f64) -> PyResult<(f64, f64)> {
    let w = workload(keys, key_size, value_size, popularity, set_fraction)?;
    let n = keys.min(10_000);
    let key = (0..n).map(|i| w.key_len(i * (keys / n)) as f64).sum::<f64>() / n as f64;
    let value = (0..n).map(|i| w.value_for_key(i).len() as f64).sum::<f64>() / n as f64;
    Ok((key, value))
}

/// Store every key of the workload on `target` (memcached or redis). Returns
/// {stored, errors, error_reasons, elapsed_ns, bytes}; raises TargetError (the target failed) or
/// InputError (the workload; ValueError if `target` does not resolve). `protocol`: the scheme's
/// parameters as a configuration writes them (JSON; redis's `auth` and `db`), else its defaults.
/// `tls`: the engine configuration's `tls` (JSON), over TLS; None in plaintext.
#[pyfunction]
#[pyo3(signature = (target, scheme, *, keys, key_size, value_size, conns=4, depth=64, timeout_ns=2_000_000_000, protocol=None, tls=None))]
#[allow(clippy::too_many_arguments)]
fn preload<'py>(py: Python<'py>, target: &str, scheme: &str, keys: u64, key_size: &str, value_size: &str, conns: usize, depth: usize, timeout_ns: u64, protocol: Option<&str>, tls: Option<&str>) -> PyResult<Bound<'py, PyDict>> {
    let protocol = match protocol {
        Some(json) => {
            let spec: tailwise_core::protocol::ProtocolSpec =
                serde_json::from_str(json).map_err(|e| raise(tailwise_core::engine::ConfigError::Json(e)))?;
            Protocol::try_from(spec).map_err(raise)?
        }
        None => Protocol::named(scheme).map_err(raise)?,
    };
    // The engine configuration's `tls` (engine/tls.rs), as a run's connections take it.
    let tls = tls
        .map(|json| serde_json::from_str::<tailwise_core::engine::TlsConfig>(json))
        .transpose()
        .map_err(|e| raise(tailwise_core::engine::ConfigError::Json(e)))?;
    let cfg = PreloadConfig {
        target: resolve(target)?,
        protocol,
        workload: workload(keys, key_size, value_size, "uniform", 0.0)?,
        conns,
        depth,
        timeout_ns,
        tls,
    };
    let r = py.detach(|| run_preload(&cfg)).map_err(raise)?;
    let d = PyDict::new(py);
    d.set_item("stored", r.stored)?;
    d.set_item("errors", r.errors)?;
    d.set_item("error_reasons", r.error_reasons)?;
    d.set_item("elapsed_ns", r.elapsed_ns)?;
    d.set_item("bytes", r.bytes)?;
    Ok(d)
}

/// An address Python gave that is no socket address.
#[derive(Debug, thiserror::Error)]
enum AddrError {
    #[error("cannot resolve '{addr}': {err}")]
    Resolve { addr: String, err: std::io::Error },
    #[error("'{0}' resolves to no address")]
    NoAddress(String),
    #[error("cannot listen on {addr}: {err}")]
    Listen { addr: String, err: std::io::Error },
}

impl Problem for AddrError {
    fn kind(&self) -> Kind {
        match self {
            AddrError::Listen { .. } => Kind::Target,
            _ => Kind::Input,
        }
    }

    fn remedy(&self) -> String {
        match self {
            AddrError::Listen { .. } => "choose another --listen address or port".into(),
            _ => "give HOST:PORT with a host that resolves, e.g. 127.0.0.1:11211".into(),
        }
    }
}

fn resolve(addr: &str) -> PyResult<SocketAddr> {
    let mut found = addr.to_socket_addrs().map_err(|err| raise(AddrError::Resolve { addr: addr.into(), err }))?;
    found.next().ok_or_else(|| raise(AddrError::NoAddress(addr.into())))
}

/// Parse a distribution; returns (canonical spec, mean_ns). Raises InputError naming the fix.
#[pyfunction]
fn parse_dist(spec: &str) -> PyResult<(String, f64)> {
    let d = Dist::parse(spec).map_err(raise)?;
    Ok((d.spec(), d.mean_ns()))
}

/// Parse an inter-arrival process name; returns its canonical name. Raises InputError naming the fix.
#[pyfunction]
fn parse_arrival(text: &str) -> PyResult<String> {
    Arrival::parse(text).map(|a| a.name()).map_err(raise)
}

/// An engine configuration (JSON) checked as `Engine` would before it connects: returns it
/// whole, every default filled in. Raises InputError naming the field.
#[pyfunction]
fn check_engine_config(config: &str) -> PyResult<String> {
    let cfg = EngineConfig::from_json(config).map_err(raise)?;
    cfg.validate().map_err(raise)?;
    Ok(cfg.to_json())
}

/// A configuration's `protocol` (JSON) checked as the engine builds it (an http target's requests
/// as protocol/http.rs's `Requests::new` checks them): returns it as the engine writes it. Raises
/// InputError naming the problem.
#[pyfunction]
fn check_protocol(protocol: &str) -> PyResult<String> {
    use tailwise_core::engine::ConfigError;
    use tailwise_core::protocol::ProtocolSpec;
    let spec: ProtocolSpec = serde_json::from_str(protocol).map_err(|e| raise(ConfigError::Json(e)))?;
    let p = Protocol::try_from(spec).map_err(raise)?;
    Ok(serde_json::to_string(&p).expect("a protocol always serialises"))
}

/// Packet mode: the UDP payload of a `size`-byte Ethernet frame (protocol/flow.rs).
#[pyfunction]
fn packet_payload_len(size: usize, ipv6: bool) -> usize {
    flow::payload_len(size, ipv6)
}

/// CLOCK_MONOTONIC in ns, the clock of every data-plane timestamp.
#[pyfunction]
fn now_ns() -> u64 {
    tailwise_core::time::clock::now_ns()
}

/// What one clock read costs here: (CLOCK_MONOTONIC ns, CLOCK_REALTIME ns), medians of batches.
#[pyfunction]
#[pyo3(signature = (per_batch=10_000))]
fn clock_cost_ns(py: Python<'_>, per_batch: u32) -> (f64, f64) {
    py.detach(|| tailwise_core::time::clock::clock_cost_ns(per_batch))
}

/// What TLS record protection costs here (engine/tls_cost.rs): a rustls client and server in
/// memory, `iterations` times the clock around encrypting a `request_bytes` request and around
/// decrypting a `reply_bytes` reply record. Returns {encrypt_ns, decrypt_ns, version, cipher};
/// raises InputError for an argument out of range.
#[pyfunction]
#[pyo3(signature = (iterations, request_bytes, reply_bytes))]
fn tls_record_cost_ns<'py>(py: Python<'py>, iterations: usize, request_bytes: usize, reply_bytes: usize) -> PyResult<Bound<'py, PyDict>> {
    let c = py
        .detach(|| tailwise_core::engine::tls_cost::record_cost(iterations, request_bytes, reply_bytes))
        .map_err(raise)?;
    let d = PyDict::new(py);
    d.set_item("encrypt_ns", c.encrypt_ns)?;
    d.set_item("decrypt_ns", c.decrypt_ns)?;
    d.set_item("version", c.version)?;
    d.set_item("cipher", c.cipher)?;
    Ok(d)
}

/// The HDR histogram parameters used everywhere: (lowest_ns, highest_ns, significant_digits).
#[pyfunction]
fn histogram_params() -> (u64, u64, u8) {
    (HIST_LOWEST_NS, HIST_MAX_NS, HIST_SIGFIG)
}

/// The every-request interval histograms: (interval_ns, significant_digits).
#[pyfunction]
fn interval_params() -> (u64, u8) {
    (INTERVAL_NS, INTERVAL_SIGFIG)
}

/// Spin on CPU `cpu` (if given) for `duration_ns`, counting gaps above `threshold_ns`:
/// returns {duration_ns, count, lost_ns, max_ns}. Measures what preemption costs a spinning thread.
#[pyfunction]
#[pyo3(signature = (duration_ns, threshold_ns=5_000, cpu=None))]
fn measure_stalls<'py>(py: Python<'py>, duration_ns: u64, threshold_ns: u64, cpu: Option<usize>) -> PyResult<Bound<'py, PyDict>> {
    let s = py.detach(|| {
        std::thread::spawn(move || {
            if let Some(c) = cpu {
                tailwise_core::io::cpu::pin_to_cpu(c);
            }
            tailwise_core::time::clock::measure_stalls(duration_ns, threshold_ns)
        })
        .join()
    });
    let s = s.map_err(|_| PyRuntimeError::new_err("stall measurement thread panicked"))?;
    let d = PyDict::new(py);
    d.set_item("duration_ns", s.duration_ns)?;
    d.set_item("count", s.count)?;
    d.set_item("lost_ns", s.lost_ns)?;
    d.set_item("max_ns", s.max_ns)?;
    Ok(d)
}

#[pyclass(name = "Server", module = "tailwise._core")]
struct PyServer {
    inner: Mutex<Option<Server>>,
    addr: String,
}

#[pymethods]
impl PyServer {
    #[new]
    #[pyo3(signature = (listen, workers=1, service="fixed:10us", seed=1, pin=true, busy_poll=false, tls_cert=None, tls_key=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        listen: &str,
        workers: usize,
        service: &str,
        seed: u64,
        pin: bool,
        busy_poll: bool,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        // TLS on every connection with both files (the CLI refuses one without the other).
        let tls = match (tls_cert, tls_key) {
            (Some(cert), Some(key)) => Some(tailwise_core::server::tls::server_config(&cert, &key).map_err(raise)?),
            _ => None,
        };
        let cfg = ServerConfig {
            listen: resolve(listen)?,
            workers,
            service: Dist::parse(service).map_err(raise)?,
            seed,
            pin,
            busy_poll,
        };
        let s = py
            .detach(|| Server::start_tls(cfg, tls))
            .map_err(|err| raise(AddrError::Listen { addr: listen.into(), err }))?;
        let addr = s.addr().to_string();
        Ok(PyServer { inner: Mutex::new(Some(s)), addr })
    }

    /// "ip:port" the server listens on.
    #[getter]
    fn addr(&self) -> String {
        self.addr.clone()
    }

    fn served(&self) -> u64 {
        self.inner.lock().unwrap().as_ref().map(|s| s.served()).unwrap_or(0)
    }

    /// Nanoseconds the workers spent serving (not waiting), all workers.
    fn busy_ns(&self) -> u64 {
        self.inner.lock().unwrap().as_ref().map(|s| s.busy_ns()).unwrap_or(0)
    }

    /// The workers' stalls (≥ 200 µs without running) since the last call: (start, end) pairs
    /// of CLOCK_MONOTONIC ns.
    fn take_stalls(&self) -> Vec<(u64, u64)> {
        self.inner.lock().unwrap().as_ref().map(|s| s.take_stalls()).unwrap_or_default()
    }

    fn stop(&self, py: Python<'_>) {
        let s = self.inner.lock().unwrap().take();
        if let Some(mut s) = s {
            py.detach(move || s.stop());
        }
    }
}

/// A UDP network function (`tailwise serve --udp-reflect / --udp-forward`): a reflector or a
/// forwarder to `to`, with exact impairments (every N-th datagram dropped, held back one place,
/// duplicated). Raises InputError (a mode or an impairment of 0) or TargetError (cannot listen, or
/// no socket towards `to`).
#[pyclass(name = "UdpFunction", module = "tailwise._core")]
struct PyUdpFunction {
    inner: Mutex<Option<UdpFunction>>,
    addr: String,
    last: Mutex<tailwise_core::server::udp::UdpCounters>,
}

#[pymethods]
impl PyUdpFunction {
    #[new]
    #[pyo3(signature = (listen, mode="reflect", to=None, drop_every=None, reorder_every=None, duplicate_every=None, workers=1, pin=true, busy_poll=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(py: Python<'_>, listen: &str, mode: &str, to: Option<&str>, drop_every: Option<u64>, reorder_every: Option<u64>, duplicate_every: Option<u64>, workers: usize, pin: bool, busy_poll: bool) -> PyResult<Self> {
        let to = to.map(resolve).transpose()?;
        let cfg = UdpConfig {
            listen: resolve(listen)?,
            mode: UdpMode::parse(mode, to).map_err(raise)?,
            impair: Impairments::new(drop_every, reorder_every, duplicate_every).map_err(raise)?,
            workers,
            pin,
            busy_poll,
        };
        let f = py.detach(|| UdpFunction::start(cfg)).map_err(raise)?;
        let addr = f.addr().to_string();
        Ok(PyUdpFunction { inner: Mutex::new(Some(f)), addr, last: Mutex::default() })
    }

    /// "ip:port" the function listens on.
    fn addr(&self) -> String {
        self.addr.clone()
    }

    /// The counters now (after `stop`, their final values): received, sent, dropped, reordered,
    /// duplicated, held_alone (held, then sent alone), returned (the forwarder's replies passed
    /// back), failed (sends refused).
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = match self.inner.lock().unwrap().as_ref() {
            Some(f) => f.counters(),
            None => *self.last.lock().unwrap(),
        };
        let d = PyDict::new(py);
        for (k, v) in [("received", c.received), ("sent", c.sent), ("dropped", c.dropped), ("reordered", c.reordered),
                       ("duplicated", c.duplicated), ("held_alone", c.held_alone), ("returned", c.returned), ("failed", c.failed)] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Stop the workers (a held datagram is sent first); the counters keep their final values.
    fn stop(&self, py: Python<'_>) {
        let f = self.inner.lock().unwrap().take();
        if let Some(mut f) = f {
            let c = py.detach(move || {
                f.stop();
                f.counters()
            });
            *self.last.lock().unwrap() = c;
        }
    }
}

/// Every-request histograms by 100 ms of intended send time; outlives its engine.
#[pyclass(name = "Intervals", module = "tailwise._core")]
struct PyIntervals {
    inner: Arc<Mutex<Intervals>>,
}

#[pymethods]
impl PyIntervals {
    /// Every request intended in intervals `first .. last` (exclusive) — finished ones and, with
    /// `with_pending`, those outstanding at the latest snapshot — as one histogram (HdrHistogram
    /// V2 compressed).
    #[pyo3(signature = (first, last, with_pending=true))]
    fn window<'py>(&self, py: Python<'py>, first: usize, last: usize, with_pending: bool) -> Bound<'py, PyBytes> {
        let bytes = py.detach(|| encode_histogram(&self.inner.lock().unwrap().window(first, last, with_pending)));
        PyBytes::new(py, &bytes)
    }

    /// Each interval that has any request, with how many: (index, count) — finished ones, or with
    /// `pending` those outstanding at the latest snapshot. An agent sends only what changed.
    #[pyo3(signature = (pending=false))]
    fn counts(&self, py: Python<'_>, pending: bool) -> Vec<(usize, u64)> {
        py.detach(|| {
            let iv = self.inner.lock().unwrap();
            if pending {
                iv.pending.iter().enumerate().filter_map(|(i, h)| h.as_ref().map(|h| (i, h.len()))).collect()
            } else {
                iv.done.iter().enumerate().filter_map(|(i, d)| d.as_ref().map(|d| (i, d.len()))).collect()
            }
        })
    }

    /// The histograms of intervals `indices` (HdrHistogram V2 compressed; empty bytes for an
    /// interval without one), finished requests or with `pending` outstanding ones.
    #[pyo3(signature = (indices, pending=false))]
    fn encoded<'py>(&self, py: Python<'py>, indices: Vec<usize>, pending: bool) -> Vec<Bound<'py, PyBytes>> {
        let encoded: Vec<Vec<u8>> = py.detach(|| {
            let iv = self.inner.lock().unwrap();
            indices
                .iter()
                .map(|&i| {
                    if pending {
                        iv.pending.get(i).and_then(|h| h.as_ref()).map(encode_histogram).unwrap_or_default()
                    } else {
                        iv.done.get(i).and_then(|d| d.as_ref()).map(|d| d.encoded()).unwrap_or_default()
                    }
                })
                .collect()
        });
        encoded.into_iter().map(|b| PyBytes::new(py, &b)).collect()
    }

    /// The finished requests' histograms, one per interval that has any: (index, V2 bytes).
    fn log<'py>(&self, py: Python<'py>) -> Vec<(usize, Bound<'py, PyBytes>)> {
        let encoded: Vec<(usize, Vec<u8>)> = py.detach(|| {
            let iv = self.inner.lock().unwrap();
            iv.done.iter().enumerate().filter_map(|(i, d)| d.as_ref().map(|d| (i, d.encoded()))).collect()
        });
        encoded.into_iter().map(|(i, b)| (i, PyBytes::new(py, &b))).collect()
    }
}

fn snapshot_dict<'py>(py: Python<'py>, s: &Snapshot) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in [
        ("elapsed_ns", s.elapsed_ns),
        ("intended", s.intended),
        ("sent", s.sent),
        ("late", s.late),
        ("received", s.received),
        ("errors", s.errors),
        ("timeouts", s.timeouts),
        ("never_sent", s.never_sent),
        ("reconnects", s.reconnects),
        ("received_in_window", s.received_in_window),
    ] {
        d.set_item(k, v)?;
    }
    Ok(d)
}

fn counters_dict<'py>(py: Python<'py>, c: &Counters) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in [
        ("intended", c.intended),
        ("sent", c.sent),
        ("received", c.received),
        ("late", c.late),
        ("never_sent", c.never_sent),
        ("errors", c.errors),
        ("timeouts", c.timeouts),
        ("unfinished", c.unfinished),
        ("rx_kernel", c.rx_kernel),
        ("tx_kernel", c.tx_kernel),
        ("reconnects", c.reconnects),
        ("resent", c.resent),
        ("gets", c.gets),
        ("sets", c.sets),
        ("hits", c.hits),
        ("misses", c.misses),
        ("stored", c.stored),
        ("lost", c.lost),
        ("reordered", c.reordered),
        ("reorder_max", c.reorder_max),
        ("duplicates", c.duplicates),
    ] {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// With TLS, the engine's handshakes since its start — {full, resumed, failed, handshake_ns: every
/// handshake's duration, initial and reconnects, the first 65,536} —; None for plaintext.
fn tls_dict<'py>(py: Python<'py>, t: Option<&TlsStats>) -> PyResult<Bound<'py, PyAny>> {
    let Some(t) = t else { return Ok(py.None().into_bound(py)) };
    let d = PyDict::new(py);
    d.set_item("full", t.full)?;
    d.set_item("resumed", t.resumed)?;
    d.set_item("failed", t.failed)?;
    d.set_item("handshake_ns", &t.handshake_ns)?;
    Ok(d.into_any())
}

#[pyclass(name = "Engine", module = "tailwise._core")]
struct PyEngine {
    inner: Mutex<Option<Engine>>,
    intervals: Arc<Mutex<Intervals>>,
    packets: Arc<Mutex<PacketIntervals>>,
}

#[pymethods]
impl PyEngine {
    /// Connect and start, as `config` (an engine configuration, JSON: EngineConfig in
    /// tailwise-core, every field and default in `ENGINE_DEFAULTS`) says. Raises tailwise.errors'
    /// InputError (bad config), TargetError (cannot connect) or HostError (timestamps, a NIC),
    /// each with its remedy.
    #[new]
    fn new(py: Python<'_>, config: &str) -> PyResult<Self> {
        let cfg = EngineConfig::from_json(config).map_err(raise)?;
        let e = py.detach(|| Engine::start(cfg)).map_err(raise)?;
        let (intervals, packets) = (e.intervals(), e.packets());
        Ok(PyEngine { inner: Mutex::new(Some(e)), intervals, packets })
    }

    /// Live counters: elapsed_ns, intended, sent, late, received, errors, timeouts, never_sent,
    /// reconnects, received_in_window.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // The lock is taken without the interpreter: `take` holds it while it waits for the
        // threads without the interpreter, so a snapshot from another Python thread (the live
        // line) that held the interpreter while it waited would deadlock with it.
        match py.detach(|| self.inner.lock().unwrap().as_ref().map(|e| e.snapshot())) {
            Some(s) => snapshot_dict(py, &s),
            None => Ok(PyDict::new(py)),
        }
    }

    /// A snapshot of every thread (waiting up to `wait_ns` for them): {samples: the requests
    /// finished since the last take, pending: the sampled requests outstanding now, censored at
    /// the time they have waited (both as 48-byte little-endian rows: intended_ns, sent_ns, tx_ns,
    /// rx_user_ns, latency_ns as u64, flags, inflation_ns as u32), snap_ns, complete, counters}. The
    /// interval histograms (`intervals()`) are up to date with it. `join` returns what was never taken.
    /// With `pending` false, nothing outstanding is reported: `pending` is empty, and so are the
    /// intervals' pending histograms (for a caller that keeps only the finished rows).
    /// `thinned_level`: the level both sets of rows were thinned to (0 but after `thin_rows`).
    #[pyo3(signature = (wait_ns=1_000_000_000, pending=true))]
    fn take<'py>(&self, py: Python<'py>, wait_ns: u64, pending: bool) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let guard = self.inner.lock().unwrap();
        let Some(e) = guard.as_ref() else { return Ok(d) };
        let (t, samples, outstanding) = py.detach(|| {
            let t = if pending { e.take(wait_ns) } else { e.take_finished(wait_ns) };
            let (s, p) = (t.samples.to_le_bytes(), samples_to_le_bytes(t.pending.iter()));
            (t, s, p)
        });
        d.set_item("samples", PyBytes::new(py, &samples))?;
        d.set_item("pending", PyBytes::new(py, &outstanding))?;
        d.set_item("thinned_level", t.thinned_level)?;
        d.set_item("snap_ns", t.snap_ns)?;
        d.set_item("complete", t.complete)?;
        d.set_item("counters", snapshot_dict(py, &t.counters)?)?;
        d.set_item("tls", tls_dict(py, t.tls.as_ref())?)?;
        Ok(d)
    }

    /// From now on, an engine thread that gathers more than `max_rows` sampled rows (shared among
    /// the threads) between two takes thins them by the statistics' own keys
    /// (stats/subsample.py; each row's source its thread + `source_base`), a level more each time
    /// it passes the bound; `take` and `join` say the level (`thinned_level`). For an agent, which
    /// bounds the rows it holds by the same keys.
    fn thin_rows(&self, max_rows: usize, source_base: u64) {
        if let Some(e) = self.inner.lock().unwrap().as_ref() {
            e.thin_rows(max_rows, source_base);
        }
    }

    /// The every-request interval histograms (they outlive the engine).
    fn intervals(&self) -> PyIntervals {
        PyIntervals { inner: self.intervals.clone() }
    }

    /// Packet mode (udp+flow): per 100 ms interval of intended time, `(index, sent, received,
    /// lost, reordered, duplicates)`, as of the latest `take` (every packet after `join`); empty
    /// for the other protocols. It outlives the engine.
    fn packet_intervals(&self) -> Vec<(u64, u64, u64, u64, u64, u64)> {
        self.packets.lock().unwrap().rows()
    }

    /// The engine threads' stalls (≥ 200 µs without running) since the last call: (start, end)
    /// pairs of CLOCK_MONOTONIC ns; `join` returns the rest.
    fn take_stalls(&self) -> Vec<(u64, u64)> {
        self.inner.lock().unwrap().as_ref().map(|e| e.take_stalls()).unwrap_or_default()
    }

    /// The schedule's time zero on CLOCK_MONOTONIC: sample times are ns after it.
    #[getter]
    fn start_mono_ns(&self) -> u64 {
        self.inner.lock().unwrap().as_ref().map(|e| e.start_mono_ns()).unwrap_or(0)
    }

    fn is_finished(&self) -> bool {
        self.inner.lock().unwrap().as_ref().map(|e| e.is_finished()).unwrap_or(true)
    }

    /// Hold the schedule (no request falls due) until `resume`; replies are still read.
    fn pause(&self) {
        if let Some(e) = self.inner.lock().unwrap().as_ref() {
            e.pause();
        }
    }

    /// Go on with the schedule, every time still to come moved by the pause's length.
    fn resume(&self) {
        if let Some(e) = self.inner.lock().unwrap().as_ref() {
            e.resume();
        }
    }

    /// Requests sent and not yet answered (or timed out).
    fn in_flight(&self) -> u64 {
        self.inner.lock().unwrap().as_ref().map(|e| e.in_flight()).unwrap_or(0)
    }

    /// Ask the engine to stop early; `join` still returns what was measured.
    fn stop(&self) {
        if let Some(e) = self.inner.lock().unwrap().as_ref() {
            e.stop();
        }
    }

    /// Wait for the end (without holding the interpreter) and return the merged result.
    fn join<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let e = self.inner.lock().unwrap().take().ok_or_else(|| PyRuntimeError::new_err("engine already joined"))?;
        let r = py.detach(move || e.join());
        let (lat, lag, lag_ok, samples, packets) = py.detach(|| {
            (
                encode_histogram(&r.hist.latency),
                encode_histogram(&r.hist.send_lag),
                encode_histogram(&r.hist.send_lag_unstalled),
                r.samples.to_le_bytes(),
                r.hist.packets.as_ref().map(|h| (h.to_le_bytes(), h.above)),
            )
        });
        let d = PyDict::new(py);
        d.set_item("counters", counters_dict(py, &r.counters)?)?;
        match &r.probe_counters {
            Some(c) => d.set_item("probe_counters", counters_dict(py, c)?)?,
            None => d.set_item("probe_counters", py.None())?,
        }
        d.set_item("start_mono_ns", r.start_mono_ns)?;
        d.set_item("elapsed_ns", r.elapsed_ns)?;
        d.set_item("received_in_window", r.received_in_window)?;
        d.set_item("latency_hist", PyBytes::new(py, &lat))?;
        d.set_item("send_lag_hist", PyBytes::new(py, &lag))?;
        d.set_item("send_lag_unstalled_hist", PyBytes::new(py, &lag_ok))?;
        // Packet mode: every answered packet at 100 ns (record/linear), its bins as u64 LE.
        match packets {
            Some((counts, above)) => {
                let h = PyDict::new(py);
                h.set_item("bin_ns", LINEAR_BIN_NS)?;
                h.set_item("range_ns", LINEAR_RANGE_NS)?;
                h.set_item("counts", PyBytes::new(py, &counts))?;
                h.set_item("above", above)?;
                d.set_item("packet_hist", h)?;
            }
            None => d.set_item("packet_hist", py.None())?,
        }
        d.set_item("stalls", r.stalls)?;
        d.set_item("stalled_ns", r.stalled_ns)?;
        d.set_item("stall_intervals", r.stall_intervals)?;
        d.set_item("samples", PyBytes::new(py, &samples))?;
        d.set_item("thinned_level", r.thinned_level)?;
        // Why the run ended early: the problem and its remedy, apart.
        d.set_item("error", r.error.as_ref().map(|e| e.to_string()))?;
        d.set_item("error_remedy", r.error.as_ref().map(|e| e.remedy()))?;
        d.set_item("error_reasons", r.error_reasons)?;
        d.set_item("pinned_cpus", r.pinned_cpus)?;
        d.set_item("cpu_ns", r.cpu_ns)?;
        d.set_item("preemptions", r.preemptions)?;
        d.set_item("sleeps", r.sleeps)?;
        d.set_item("sample_bytes", r.sample_bytes)?;
        d.set_item("tls", tls_dict(py, r.tls.as_ref())?)?;
        Ok(d)
    }
}

/// The data plane's constants that Python also uses, each from its one definition in
/// tailwise-core: Python builds `Flag`, `SAMPLE_DTYPE` and its constants from these at import.
fn add_constants(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let sample_flags = PyDict::new(py);
    for (name, bit) in flags::ALL {
        sample_flags.set_item(name, bit)?;
    }
    m.add("SAMPLE_FLAGS", sample_flags)?;
    m.add("SAMPLE_FIELDS", SAMPLE_FIELDS.to_vec())?;
    m.add("SAMPLE_BYTES", SAMPLE_BYTES)?;
    m.add("HIST_LOWEST_NS", HIST_LOWEST_NS)?;
    m.add("HIST_MAX_NS", HIST_MAX_NS)?;
    m.add("HIST_SIGFIG", HIST_SIGFIG)?;
    m.add("INTERVAL_NS", INTERVAL_NS)?;
    m.add("INTERVAL_SIGFIG", INTERVAL_SIGFIG)?;
    m.add("STALL_NS", tailwise_core::engine::STALL_NS)?;
    m.add("MASK_STALL_NS", tailwise_core::time::stall::MASK_STALL_NS)?;
    m.add("ECHO_MIN_DATAGRAM", tailwise_core::protocol::echo::MIN_DATAGRAM)?;
    m.add("ECHO_MAX_DATAGRAM", tailwise_core::protocol::echo::MAX_DATAGRAM)?;
    let protocols = PyDict::new(py);
    for p in Protocol::each() {
        let traits = PyDict::new(py);
        traits.set_item("keys", p.has_keys())?;
        traits.set_item("datagram", p.is_datagram())?;
        protocols.set_item(p.name(), traits)?;
    }
    m.add("PROTOCOLS", protocols)?;
    // Packet mode's frame sizes and flows (protocol/flow.rs): range and defaults.
    m.add("PACKET_SIZE", flow::FRAME_DEFAULT)?;
    m.add("PACKET_SIZE_MIN", flow::FRAME_MIN)?;
    m.add("PACKET_SIZE_MAX", flow::FRAME_MAX)?;
    m.add("PACKET_FLOWS", flow::DEFAULT_FLOWS)?;
    m.add("PACKET_FLOWS_MAX", flow::MAX_FLOWS)?;
    m.add("MODEL_MAX_CUSTOMERS", model::MAX_CUSTOMERS)?;
    m.add("MODEL_MAX_WORKERS", model::MAX_WORKERS)?;
    // Every field of an engine configuration with its default: the one definition of them.
    let defaults = py.import("json")?.call_method1("loads", (EngineConfig::default().to_json(),))?;
    m.add("ENGINE_DEFAULTS", defaults)?;
    m.add("UDP_SIZE", tailwise_core::protocol::UDP_SIZE)?;
    // calibrate's TLS identity (engine/tls_cost.rs: the crate's test CA, certificate and key, for
    // loopback only): name → PEM text.
    let pem = PyDict::new(py);
    for (name, text) in tailwise_core::engine::tls_cost::IDENTITY_PEM {
        pem.set_item(name, text)?;
    }
    m.add("TLS_CALIBRATE_PEM", pem)?;
    // Whether the engine's test hook (a configuration's `test_stall`) is built in (feature test-hooks).
    m.add("TEST_HOOKS", cfg!(feature = "test-hooks"))?;
    Ok(())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_constants(m)?;
    m.add_function(wrap_pyfunction!(parse_dist, m)?)?;
    m.add_function(wrap_pyfunction!(packet_payload_len, m)?)?;
    m.add_function(wrap_pyfunction!(check_engine_config, m)?)?;
    m.add_function(wrap_pyfunction!(check_protocol, m)?)?;
    m.add_function(wrap_pyfunction!(route_interface, m)?)?;
    m.add_function(wrap_pyfunction!(hardware_timestamping, m)?)?;
    m.add_function(wrap_pyfunction!(now_ns, m)?)?;
    m.add_function(wrap_pyfunction!(clock_cost_ns, m)?)?;
    m.add_function(wrap_pyfunction!(tls_record_cost_ns, m)?)?;
    m.add_function(wrap_pyfunction!(histogram_params, m)?)?;
    m.add_function(wrap_pyfunction!(interval_params, m)?)?;
    m.add_function(wrap_pyfunction!(measure_stalls, m)?)?;
    m.add_function(wrap_pyfunction!(check_workload, m)?)?;
    m.add_function(wrap_pyfunction!(parse_arrival, m)?)?;
    m.add_function(wrap_pyfunction!(preload, m)?)?;
    m.add_function(wrap_pyfunction!(model::model_sojourn, m)?)?;
    m.add_function(wrap_pyfunction!(model::model_summary, m)?)?;
    m.add_class::<PyServer>()?;
    m.add_class::<PyUdpFunction>()?;
    m.add_class::<PyEngine>()?;
    m.add_class::<PyIntervals>()?;
    hist::add_to(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
