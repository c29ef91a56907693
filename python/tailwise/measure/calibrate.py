"""`tailwise calibrate`: what each timestamp source reports for the same traffic, on this machine.

How to Measure the Killer Microsecond (KBNets'17, Table 1) shows that where a timestamp is taken
decides what a tool can see: NIC stamps within a µs of the truth, user-space stamps after blocking
sockets ~20 µs off at the median. This command gives that table for the user's own machine. It
sends low-rate ping-pong traffic (one connection, one request outstanding) to a reflector — the
built-in server with no service time, on loopback and, where this process may create network
namespaces, across a veth pair — with every source on at once, so that each request carries
each source's send and receive times:

* ``kernel``: the kernel's software stamps of the send (SO_TIMESTAMPING TX) and of the reply's
  arrival (RX), the best source available here;
* ``user``: the clock around the system calls (before the write, after the read);
* ``nic``: the NIC's hardware stamps, where the interface's driver can stamp every packet and
  this process may switch it to (stamp/nic.rs; otherwise the driver's or the permission's reason): a
  second run of the same traffic, since one socket's sends carry kernel or NIC stamps, not both.

Each source's bias is measured against a stamped one on the same requests: the median and p99
of the per-request difference of round trips, split into its send side (write call → kernel
stamp) and its receive side (kernel stamp → reader awake). Then the whole tool against the
queueing model: ``tailwise serve`` with fixed:10us at 20 % load (Lancet, Fig. 6), measured with
each source as ``tailwise run --duration`` measures it, minus the M/D/1 sojourn percentiles.
There, and only there, the figures are also given with the built-in server's own stalls left
out: the server is part of the reference, not of what is measured.

TLS (issue 36): what record protection costs on this host, the clock read around the engine's own
encrypt of a request and decrypt of a reply record, a rustls client and server joined in memory
(engine/tls_cost.rs); and on loopback the ping again over TLS, the built-in server with the
crate's test certificate, kernel stamps on: what TLS adds to a round trip here. Both stamps of a
request over TLS leave the client's own record work out (it encrypts before the write and
decrypts after the read); the in-memory figures are that part.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace

import numpy as np

from tailwise import _core
from tailwise.driver.local import LocalAgent
from tailwise.results.rows import Flag
from tailwise.spec.load import LoadSpec, protocol
from tailwise.errors import TailwiseError
from tailwise.results.documents.calibrate import Calibration
from tailwise.results.files import CALIBRATE_SCHEMA
from tailwise.host.facts import host_info
from tailwise.spec.runspec import hardware_stamping

SCHEMA = CALIBRATE_SCHEMA
#: Ping-pong at a low rate: the path's own latency, no queueing behind earlier requests.
PING_RATE_RPS = 2_000
PING_SECONDS = 2.0
#: The first requests warm caches and connections; they stay out of every figure here.
WARMUP_NS = 200_000_000
PERCENTILES = (50.0, 99.0, 99.9)
#: The Lancet Fig. 6 case and this machine's goal for it with kernel stamps (issue 11).
MODEL_SERVICE = "fixed:10us"
MODEL_LOAD = 0.2
MODEL_SECONDS = 3.0
GOAL_NS = {50.0: 12_000, 99.0: 30_000}
#: The veth path's reflector listens on this port inside its own namespace (no clash possible).
VETH_PORT = 7000
#: TLS's record cost: calls timed each way (~10 ms in all here), a request and a reply of a small
#: cache's size (a get of a short key; a value of ~100 bytes), each one record.
TLS_ITERATIONS = 10_000
TLS_REQUEST_BYTES = 64
TLS_REPLY_BYTES = 128


def _pct_key(p: float) -> str:
    return f"p{p:g}_ns"


def _figures(values: np.ndarray) -> dict:
    """min, the PERCENTILES and max of ``values`` (ns), exact order statistics."""
    if len(values) == 0:
        return {"n": 0}
    v = np.sort(values)
    out = {"n": int(len(v)), "min_ns": int(v[0])}
    for p in PERCENTILES:
        out[_pct_key(p)] = int(np.quantile(v, p / 100, method="inverted_cdf"))
    out["max_ns"] = int(v[-1])
    return out


def _bias(diff: np.ndarray) -> dict:
    """A per-request difference (ns): its median and p99."""
    if len(diff) == 0:
        return {"n": 0}
    return {"n": int(len(diff)), "p50_ns": int(np.median(diff)),
            "p99_ns": int(np.quantile(diff, 0.99, method="inverted_cdf"))}


def source_figures(samples: np.ndarray, start_ns: int = WARMUP_NS) -> dict:
    """Round trips from engine rows recorded with stamps on (the kernel's or the NIC's: the
    samples' ``tx_ns`` and receive time) and the user-space clock around the system calls on the
    same requests: the stamped round trip, and the user-space one with its bias against it."""
    flags = samples["flags"].astype(np.int64)
    stamped = int(Flag.KERNEL_RX | Flag.KERNEL_TX)
    keep = ((flags & int(Flag.CENSORED | Flag.ENGINE_STALL | Flag.ERROR_REPLY)) == 0) & (samples["intended_ns"] >= start_ns)
    both = keep & ((flags & stamped) == stamped)
    s = samples[both]
    i64 = lambda name: s[name].astype(np.int64)  # noqa: E731
    rx_stamp = i64("intended_ns") + i64("latency_ns")
    rtt = rx_stamp - i64("tx_ns")
    user = i64("rx_user_ns") - i64("sent_ns")
    return {
        "requests": int(keep.sum()),
        "stamped": int(both.sum()),
        "rtt": _figures(rtt),
        "user": {
            "rtt": _figures(user),
            "bias": _bias(user - rtt),
            # Where the bias comes from: the write call before the send stamp, and the reader's
            # wake-up after the arrival stamp.
            "send_side": _bias(i64("tx_ns") - i64("sent_ns")),
            "receive_side": _bias(i64("rx_user_ns") - rx_stamp),
        },
    }


def _ping_samples(addr: str, scheme: str, rate_rps: float, seconds: float, source: str,
                  tls: dict | None = None) -> np.ndarray:
    spec = LoadSpec(targets=[addr], rate_rps=rate_rps, duration_ns=int(seconds * 1e9), conns=1, outstanding=1,
                    sample_every=1, timestamps=source, protocol=protocol(scheme), tls=tls)
    result = LocalAgent().run(spec)
    if result.error:
        raise TailwiseError(f"calibration traffic to {addr} ({source} stamps) failed: {result.error}",
                            "check that the reflector is up (tailwise serve --service fixed:0)")
    return result.samples


def ping(addr: str, scheme: str = "synthetic", rate_rps: float = PING_RATE_RPS, seconds: float = PING_SECONDS) -> dict:
    """Ping-pong to a reflector at ``addr``: kernel and user-space stamps on the same requests;
    where the interface can stamp in hardware, a second run with NIC and user-space stamps on the
    same requests (kernel and NIC stamps cannot both be on one socket's sends), the best source."""
    iface, why = hardware_stamping(addr)
    k = source_figures(_ping_samples(addr, scheme, rate_rps, seconds, "kernel"))
    out = {"target": f"{scheme}://{addr}", "interface": iface, "rate_rps": rate_rps, "seconds": seconds,
           "best": "kernel", "requests": k["requests"], "kernel_stamped": k["stamped"],
           "kernel": {"rtt": k["rtt"]}, "user": k["user"], "nic": {"available": why is None, "reason": why}}
    if why is None:
        n = source_figures(_ping_samples(addr, scheme, rate_rps, seconds, "nic"))
        out["best"] = "nic"
        out["nic"] |= {"requests": n["requests"], "stamped": n["stamped"], "rtt": n["rtt"], "user_bias": n["user"]["bias"]}
        # Separate runs of the same traffic: percentiles compared, not requests.
        out["kernel"]["bias_vs_nic"] = {key: (k["rtt"][key] - n["rtt"][key] if key in k["rtt"] and key in n["rtt"]
                                              else None) for key in ("min_ns", "p50_ns", "p99_ns")}
    return out


def _cores() -> int:
    return len(os.sched_getaffinity(0))


def loopback_path(seconds: float) -> dict:
    from tailwise.measure.server import builtin_server

    with builtin_server(service="fixed:0", busy_poll=_cores() >= 2) as srv:
        out = {"path": "loopback", "tried": True} | ping(srv.addr, seconds=seconds)
    return out | {"tls": tls_ping(out, seconds)}


def _p50_gap(a: dict, b: dict) -> int | None:
    return a["p50_ns"] - b["p50_ns"] if "p50_ns" in a and "p50_ns" in b else None


def tls_ping(plain: dict, seconds: float, rate_rps: float = PING_RATE_RPS) -> dict:
    """The loopback ping again over TLS, next to ``plain`` (the plaintext ping's path): the
    built-in server with the crate's test certificate (``_core.TLS_CALIBRATE_PEM``, written to a
    private temporary directory for it), the engine trusting its CA, kernel stamps on."""
    from tailwise.measure.server import builtin_server

    with tempfile.TemporaryDirectory(prefix="tailwise-calibrate-tls-") as d:
        files = {}
        for name, text in _core.TLS_CALIBRATE_PEM.items():
            files[name] = os.path.join(d, f"{name}.pem")
            with open(files[name], "w") as f:
                f.write(text)
        try:
            with builtin_server(service="fixed:0", busy_poll=_cores() >= 2, tls_cert=files["cert"],
                                tls_key=files["key"]) as srv:
                target = f"synthetic+tls://{srv.addr}"
                samples = _ping_samples(srv.addr, "synthetic", rate_rps, seconds, "kernel",
                                        tls={"ca_file": files["ca"]})
        except TailwiseError as e:
            return {"tried": False, "reason": e.line()}
    k = source_figures(samples)
    return {"tried": True, "target": target, "requests": k["requests"], "kernel_stamped": k["stamped"],
            "rtt": k["rtt"], "user_rtt": k["user"]["rtt"],
            "adds_p50_ns": _p50_gap(k["rtt"], plain["kernel"]["rtt"]),
            "user_adds_p50_ns": _p50_gap(k["user"]["rtt"], plain["user"]["rtt"]),
            "note": ("the same ping over TLS to the built-in server: the send stamp is the write of the request's "
                     "last encrypted byte and the receive stamp comes before the reply is decrypted, so the "
                     "round trip holds the server's record work and the longer segments, not the client's own "
                     "(the tls entry's encrypt and decrypt)")}


def tls_cost(clock_read_ns: float) -> dict:
    """What TLS record protection costs here (engine/tls_cost.rs): the clock around the engine's
    encrypt of a request and decrypt of a reply record, a rustls client and server in memory."""
    c = _core.tls_record_cost_ns(TLS_ITERATIONS, TLS_REQUEST_BYTES, TLS_REPLY_BYTES)
    return {"version": c["version"], "cipher": c["cipher"], "iterations": TLS_ITERATIONS,
            "request_bytes": TLS_REQUEST_BYTES, "reply_bytes": TLS_REPLY_BYTES,
            "encrypt": _figures(np.asarray(c["encrypt_ns"], dtype=np.int64)),
            "decrypt": _figures(np.asarray(c["decrypt_ns"], dtype=np.int64)),
            "note": (f"a rustls client (the engine's) and server joined in memory, no network: the clock read "
                     f"around the engine's encrypt of a {TLS_REQUEST_BYTES}-byte request into its write buffer "
                     f"and its decrypt of a {TLS_REPLY_BYTES}-byte reply record, each figure with one clock read "
                     f"in it ({clock_read_ns:.0f} ns here); in a run the encryption comes before the send stamp "
                     f"(inside the latency from the intended time), the decryption after the receive stamp")}


def veth_path(seconds: float) -> dict:
    """The same measurement across a veth pair: the reflector (`tailwise serve`) in one namespace,
    this command (against it) in the other."""
    from tailwise.measure import netns

    if (why := netns.can_create()) is not None:
        return {"path": "veth", "tried": False, "reason": why}
    with netns.veth_pair() as pair:
        serve = [sys.executable, "-m", "tailwise", "serve", "--listen", f"{pair.server_ip}:{VETH_PORT}",
                 "--service", "fixed:0"] + (["--spin"] if _cores() >= 2 else [])
        server = subprocess.Popen(pair.argv(pair.server_ns, serve), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        try:
            first = server.stdout.readline()
            if "listening" not in first:
                return {"path": "veth", "tried": False, "reason": f"the reflector did not start: {first.strip()}"}
            me = [sys.executable, "-m", "tailwise", "calibrate", f"synthetic://{pair.server_ip}:{VETH_PORT}",
                  "--duration", f"{seconds}s", "--json"]
            try:
                done = subprocess.run(pair.argv(pair.client_ns, me), capture_output=True, text=True,
                                      timeout=seconds + 60)
            except subprocess.TimeoutExpired:
                return {"path": "veth", "tried": False,
                        "reason": f"the measurement in {pair.client_ns} did not finish in {seconds + 60:g} s"}
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                return {"path": "veth", "tried": False, "reason": f"the measurement in {pair.client_ns} failed: {last}"}
            inner = json.loads(done.stdout)["paths"][0]
        finally:
            server.kill()
            server.wait(timeout=10)
    return inner | {"path": "veth", "namespaces": [pair.client_ns, pair.server_ns]}


def _in_stall(intended: np.ndarray, latency: np.ndarray, stalls: list[tuple[int, int]]) -> np.ndarray:
    """Requests outstanding during any of ``stalls`` (ns since the schedule's start)."""
    hit = np.zeros(len(intended), dtype=bool)
    for a, b in stalls:
        hit |= (intended < b) & (intended + latency > a)
    return hit


def model_bias(seconds: float = MODEL_SECONDS) -> dict:
    """The whole tool against the model: `tailwise run --service fixed:10us` at 20 % load, once per
    source, minus the M/D/1 sojourn percentiles."""
    from tailwise.spec.precision import Precision
    from tailwise.methodology.controller import fixed_methodology
    from tailwise.stats.model import model_percentiles
    from tailwise.measure.server import builtin_server

    model = model_percentiles(MODEL_SERVICE, MODEL_LOAD, ps=PERCENTILES)
    want = {p["p"]: p["value_ns"] for p in model["percentiles"]}
    base = LoadSpec(targets=[], rate_rps=model["rate_rps"], duration_ns=int(seconds * 1e9),
                    sample_every=1, busy_poll=True)
    sources = {}
    # On loopback: no NIC to stamp.
    for source in ("kernel", "user"):
        with builtin_server(service=MODEL_SERVICE, busy_poll=_cores() >= 2) as srv:
            spec = replace(base, targets=[srv.addr], timestamps=source)
            result = LocalAgent().run(spec, stall_sources=(srv.take_stalls,))
        if result.error:
            raise TailwiseError(f"the model run failed: {result.error}", "run `tailwise run --service fixed:10us` to see why")
        analysis, _ = fixed_methodology(result, spec, Precision(percentile=99.0), seed=1)
        got = {pc.p: pc.value for pc in analysis.percentiles}
        used = result.samples[analysis.used_mask]
        lat = used["latency_ns"].astype(np.int64)
        stalled = _in_stall(used["intended_ns"].astype(np.int64), lat, result.target_stalls_ns)
        clean = np.sort(lat[~stalled])
        entry = {"samples": int(len(lat)), "verdict_state": analysis.state}
        for p in PERCENTILES:
            entry[_pct_key(p)] = got.get(p)
        entry["minus_model"] = {_pct_key(p): None if got.get(p) is None else got[p] - want[p] for p in PERCENTILES}
        entry["server_stalls_left_out"] = {
            "server_stalls": len(result.target_stalls_ns),
            "requests_left_out": int(stalled.sum()),
            "minus_model": {_pct_key(p): (int(np.quantile(clean, p / 100, method="inverted_cdf")) - want[p]
                                          if len(clean) else None) for p in PERCENTILES},
        }
        sources[source] = entry
    kernel = sources["kernel"]["minus_model"]
    gaps = {p: kernel[_pct_key(p)] for p in GOAL_NS}
    met = all(g is not None and abs(g) <= GOAL_NS[p] for p, g in gaps.items())
    return {
        "service": MODEL_SERVICE,
        "load": MODEL_LOAD,
        "rate_rps": model["rate_rps"],
        "seconds": seconds,
        "model": model["model"],
        "model_ns": {_pct_key(p): want[p] for p in PERCENTILES},
        "sources": sources,
        "goal": {"with": "kernel", "within_ns": {_pct_key(p): g for p, g in GOAL_NS.items()}, "met": met},
        "note": ("measured as `tailwise run --duration` measures, every request in; 'server_stalls_left_out' "
                 "also leaves out the requests outstanding during the built-in server's own stalls (the "
                 "reference's, not the client's) — the only place tailwise leaves a target's stalls out"),
    }


def calibrate(target: str | None = None, seconds: float = PING_SECONDS, with_model: bool = True) -> Calibration:
    """Every path and the model bias (no ``target``), or the sources against one reflector: the
    document, written through its model (results/documents/calibrate.Calibration)."""
    mono, real = _core.clock_cost_ns()
    out = {"schema": SCHEMA, "host": host_info(), "clock": {"monotonic_read_ns": mono, "realtime_read_ns": real}}
    if target is not None:
        from tailwise.spec.target import parse_target

        t = parse_target(target)
        if t.tls:
            # The sources are compared on the path itself; the TLS row is measured on loopback.
            raise TailwiseError(f"calibrate measures a reflector in the clear, not {t.url.split('://')[0]}://",
                                "give synthetic://HOST:PORT; `tailwise calibrate` without a target adds the TLS row")
        if t.scheme not in ("synthetic", "udp"):
            raise TailwiseError(f"calibrate needs a reflector, not {t.scheme}://",
                                "give synthetic://HOST:PORT (tailwise serve --service fixed:0) or udp://HOST:PORT (an echo)")
        out["paths"] = [{"path": "target", "tried": True} | ping(t.socket_addr(), t.scheme, seconds=seconds)]
        out["model_bias"] = None
    else:
        out["paths"] = [loopback_path(seconds), veth_path(seconds)]
        out["model_bias"] = model_bias() if with_model else None
    out["not_tried"] = [{"what": "nic", "why": p["nic"]["reason"], "path": p["path"]}
                        for p in out["paths"] if p["tried"] and not p["nic"]["available"]]
    out["not_tried"] += [{"what": p["path"], "why": p["reason"]} for p in out["paths"] if not p["tried"]]
    out["not_tried"] += [{"what": "tls", "why": p["tls"]["reason"], "path": p["path"]}
                         for p in out["paths"] if "tls" in p and not p["tls"]["tried"]]
    out["tls"] = tls_cost(mono)
    return Calibration.model_validate(out)
