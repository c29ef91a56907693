"""The built-in synthetic server (Rust, in this process): `tailwise serve` and the embedded default;
the UDP network functions (`tailwise serve --udp-reflect / --udp-forward`)."""

from __future__ import annotations

from contextlib import contextmanager

from tailwise import _core
from tailwise.errors import InputError, TargetError
from tailwise.spec.runspec import positive
from tailwise.spec.units import parse_dist


@contextmanager
def builtin_server(service: str = "fixed:10us", workers: int = 1, listen: str = "127.0.0.1:0", seed: int = 1,
                   pin: bool = True, busy_poll: bool = False, tls_cert: str | None = None, tls_key: str | None = None):
    """Start the synthetic server (with TLS on every connection given a certificate and its key:
    server/tls.rs) and always stop it."""
    parse_dist(service)
    if workers < 1:
        raise InputError(f"--workers {workers} must be at least 1", "give --workers 1 or more")
    try:
        server = _core.Server(listen, workers=workers, service=service, seed=seed, pin=pin, busy_poll=busy_poll,
                              tls_cert=tls_cert, tls_key=tls_key)
    except (ConnectionError, ValueError) as e:
        raise TargetError(str(e), "choose another --listen address or port") from None
    try:
        yield server
    finally:
        server.stop()


#: The impairment flags of the UDP functions, in the order `udp_function` takes them.
IMPAIRMENTS = ("--drop-every", "--reorder-every", "--duplicate-every")


@contextmanager
def udp_function(listen: str = "127.0.0.1:0", forward_to: str | None = None, drop_every: int | None = None,
                 reorder_every: int | None = None, duplicate_every: int | None = None, workers: int = 1,
                 pin: bool = True, busy_poll: bool = False):
    """Start a UDP reflector (or, with ``forward_to``, a forwarder to it) and always stop it. The
    data plane refuses an impairment of 0 (InputError naming its flag); a negative one cannot
    reach it, so it is refused here the same way."""
    for flag, every in zip(IMPAIRMENTS, (drop_every, reorder_every, duplicate_every)):
        if every is not None and every < 0:
            positive(flag, every)
    positive("--workers", workers)
    mode = "reflect" if forward_to is None else "forward"
    function = _core.UdpFunction(listen, mode=mode, to=forward_to, drop_every=drop_every, reorder_every=reorder_every,
                                 duplicate_every=duplicate_every, workers=workers, pin=pin, busy_poll=busy_poll)
    try:
        yield function
    finally:
        function.stop()


def server_stats(server, mean_service_ns: float, elapsed_ns: int, workers: int,
                 stalls_ns: list[tuple[int, int]] = ()) -> dict:
    """The built-in server's own view of a run: requests served, busy time, and from them the
    effective service time and the utilisation really offered. The server's own work on a request
    (~6 µs on loopback here) counts inside the drawn service time, so only shorter services are
    stretched: exp:10us averages ~12.5 µs and a nominal 50 % load is ~60 %. Compare with the
    model at the utilisation reported here.

    ``stalls_ns`` are the workers' own stalls during the run (``Server::take_stalls``: the host
    took a worker's CPU while it served). They stay in the measured tail; they are reported so
    that a reader comparing with a queueing model, which assumes a server that never stops,
    can see how long this one did."""
    served, busy = server.served(), server.busy_ns()
    mean = busy / served if served else None
    return {
        "source": "builtin-server",
        "served": served,
        "busy_s": busy / 1e9,
        "effective_service_ns": mean,
        "service_overhead_ns": None if mean is None else mean - mean_service_ns,
        "utilisation": busy / (elapsed_ns * workers) if elapsed_ns else None,
        "stalls": len(stalls_ns),
        "stalled_s": sum(b - a for a, b in stalls_ns) / 1e9,
        "stalls_longest_ns": max((b - a for a, b in stalls_ns), default=None),
    }
