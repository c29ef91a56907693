"""The commands around a measurement: `serve` (the built-in server), `load` (keys stored before a
run), `model` (the queueing model's ground truth) and `calibrate` (each timestamp source here)."""

from __future__ import annotations

import json
import signal
import threading
from typing import Annotated, Optional

import typer

from tailwise.cli.exits import EXIT_OK
from tailwise.cli.options import TlsCa, TlsCert, TlsInsecure, TlsKey, TlsNoResume, TlsSni, default
from tailwise.errors import InputError, TargetError
from tailwise.spec.runspec import BUILTIN_SERVICE, positive
from tailwise.spec.target import parse_target, with_password
from tailwise.spec.tls import readable, url_scheme
from tailwise.spec.workload import DEFAULTS, LOAD_OUTSTANDING
from tailwise.spec.units import parse_time_ns

_DISTS = "fixed:10us, exp:10us, bimodal:10us, uniform:5us:15us, lognormal:10us:1.0"


def _parse_listen(text: str, flag: str = "--listen") -> str:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        example = "--listen 127.0.0.1:7000 (port 0: any free port)" if flag == "--listen" else f"{flag} 127.0.0.1:7000"
        raise InputError(f"{flag} {text} is not HOST:PORT", f"write e.g. {example}")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _udp_flags(udp_reflect: bool, udp_forward: Optional[str], service: Optional[str],
               impairments: dict[str, Optional[int]]) -> None:
    """Refuse what does not go together: the flags of a UDP function and of the synthetic server."""
    if udp_reflect and udp_forward is not None:
        raise InputError("--udp-reflect and --udp-forward go separately",
                         "give --udp-reflect (back to the source) or --udp-forward HOST:PORT (on to HOST:PORT)")
    udp = udp_reflect or udp_forward is not None
    if udp and service is not None:
        raise InputError("--service is the synthetic server's: a UDP function spins for no service time",
                         "drop --service, or drop --udp-reflect/--udp-forward to serve the synthetic protocol")
    given = [flag for flag, every in impairments.items() if every is not None]
    if given and not udp:
        raise InputError(f"{given[0]} impairs a UDP function: the synthetic server takes no impairments",
                         f"add --udp-reflect or --udp-forward HOST:PORT to {given[0]}")


def _stop_on_signal() -> threading.Event:
    """An event SIGINT and SIGTERM set, installed before the address is printed (a test may
    signal as soon as it reads it)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def _serve_udp(addr: str, forward_to: Optional[str], impairments: dict[str, Optional[int]], workers: int,
               pin: bool, spin: bool) -> int:
    from tailwise.measure.server import udp_function

    stop = _stop_on_signal()
    with udp_function(addr, forward_to, *impairments.values(), workers=workers, pin=pin, busy_poll=spin) as fn:
        line = f"tailwise serve: {'reflecting' if forward_to is None else 'forwarding'} UDP on {fn.addr()}"
        if forward_to is not None:
            line += f" to {forward_to}"
        details = [f"{workers} worker{'s' if workers != 1 else ''}"]
        details += [f"{flag} {n}" for flag, n in impairments.items() if n is not None]
        print(f"{line} ({', '.join(details)})", flush=True)
        while not stop.wait(0.2):
            pass
        fn.stop()  # a held datagram goes out first: the counters are final
        c = fn.counters()
    names = ["received", "sent", "dropped", "reordered", "duplicated"]
    # Held datagrams whose successor came too late (after 1 ms) were sent alone, not reordered.
    names += ["held_alone"] if impairments["--reorder-every"] is not None else []
    names += ["returned"] if forward_to is not None else []
    names += ["failed"] if c["failed"] else []
    print("tailwise serve: stopped: " + ", ".join(f"{k} {c[k]}" for k in names), flush=True)
    return EXIT_OK


def serve(
    listen: Annotated[str, typer.Option("--listen", metavar="HOST:PORT",
                                        help="HOST:PORT to listen on (port 0: a free port)")] = "127.0.0.1:0",
    workers: Annotated[int, typer.Option("--workers", metavar="N",
                                         help="worker threads; each spins for every request's service time (a UDP "
                                              "function: each with a socket of its own on the port)")] = 1,
    service: Annotated[Optional[str], typer.Option("--service", metavar="DIST", show_default=False,
                                                   help=f"service-time distribution: {_DISTS} "
                                                        f"[default: {BUILTIN_SERVICE}]")] = None,
    spin: Annotated[bool, typer.Option("--spin", help="busy-poll for requests (lower latency, 100 % CPU per worker)")] = False,
    pin: Annotated[bool, typer.Option("--pin/--no-pin", help="pin worker i to CPU i")] = True,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="seed of the service-time draws")] = 1,
    udp_reflect: Annotated[bool, typer.Option(
        "--udp-reflect", help="instead: a UDP reflector, every datagram sent back to its source unchanged")] = False,
    udp_forward: Annotated[Optional[str], typer.Option(
        "--udp-forward", metavar="HOST:PORT",
        help="instead: a UDP forwarder to HOST:PORT, replies passed back (one socket per client, like a NAT)")] = None,
    drop_every: Annotated[Optional[int], typer.Option(
        "--drop-every", metavar="N", help="UDP function: drop the N-th, 2N-th, … datagram")] = None,
    reorder_every: Annotated[Optional[int], typer.Option(
        "--reorder-every", metavar="N",
        help="UDP function: hold the N-th, 2N-th, … datagram back and send it after the next (alone after 1 ms)")] = None,
    duplicate_every: Annotated[Optional[int], typer.Option(
        "--duplicate-every", metavar="N", help="UDP function: send the N-th, 2N-th, … datagram twice")] = None,
    tls_cert: Annotated[Optional[str], typer.Option(
        "--tls-cert", metavar="FILE", help="speak TLS on every connection with this certificate chain (PEM, the "
                                           "server's first), with --tls-key: synthetic+tls://, memcached+tls://")] = None,
    tls_key: Annotated[Optional[str], typer.Option(
        "--tls-key", metavar="FILE", help="the private key (PEM) of --tls-cert")] = None,
) -> int:
    """Run the synthetic server (synthetic protocol and memcached ASCII get/set), or a UDP reflector or
    forwarder (--udp-reflect, --udp-forward), until SIGINT/SIGTERM."""
    from tailwise.measure.server import builtin_server

    impairments = {"--drop-every": drop_every, "--reorder-every": reorder_every, "--duplicate-every": duplicate_every}
    _udp_flags(udp_reflect, udp_forward, service, impairments)
    positive("--workers", workers)
    addr = _parse_listen(listen)
    if (tls_cert is None) != (tls_key is None):
        have, lack = ("--tls-cert", "--tls-key") if tls_cert is not None else ("--tls-key", "--tls-cert")
        raise InputError(f"{have} without {lack}", "TLS needs both --tls-cert FILE and --tls-key FILE")
    if tls_cert is not None and (udp_reflect or udp_forward is not None):
        raise InputError("--tls-cert with a UDP function: TLS needs a stream (no DTLS)",
                         "drop --tls-cert/--tls-key, or drop --udp-reflect/--udp-forward")
    for flag, path in (("--tls-cert", tls_cert), ("--tls-key", tls_key)):
        if path is not None:
            readable(path, flag)
    if udp_reflect or udp_forward is not None:
        to = None if udp_forward is None else _parse_listen(udp_forward, "--udp-forward")
        return _serve_udp(addr, to, impairments, workers, pin, spin)
    service = service or BUILTIN_SERVICE
    stop = _stop_on_signal()
    with builtin_server(service=service, workers=workers, listen=addr, seed=seed, pin=pin, busy_poll=spin,
                        tls_cert=tls_cert, tls_key=tls_key) as srv:
        scheme = "synthetic+tls" if tls_cert else "synthetic"
        print(f"tailwise serve: listening on {scheme}://{srv.addr} (service {service}, "
              f"{workers} worker{'s' if workers != 1 else ''}; memcached ASCII too)", flush=True)
        while not stop.wait(0.2):
            pass
        served = srv.served()
    print(f"tailwise serve: stopped after {served:,} requests", flush=True)
    return EXIT_OK


def model(
    service: Annotated[str, typer.Option("--service", metavar="DIST", help=f"service-time distribution: {_DISTS}")],
    load: Annotated[float, typer.Option("--load", metavar="RHO",
                                        help="load ρ = λ·E[S]/workers, between 0 and 1 (e.g. 0.5)")],
    workers: Annotated[int, typer.Option(
        "--workers", metavar="N",
        help="servers (worker threads) taking requests from one common FIFO queue (M/G/k)")] = 1,
    customers: Annotated[Optional[int], typer.Option(
        "--customers", metavar="N", help="customers simulated after a 100k warm-up [default: 2,000,000]")] = None,
    seed: Annotated[int, typer.Option("--seed", metavar="N",
                                      help="seed of the simulated arrivals and service times")] = 1,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON on stdout instead of the table")] = False,
) -> int:
    """Queueing-model ground truth: sojourn-time percentiles of a FIFO M/G/k queue (simulated)."""
    from tailwise.render.tables import print_model
    from tailwise.results.files import dumps
    from tailwise.stats.model import model_percentiles

    result = model_percentiles(service, load, workers=workers, n=customers, seed=seed)
    if json_out:
        print(dumps(result))
    else:
        print_model(result)
    return EXIT_OK


def load(
    target: Annotated[str, typer.Argument(
        metavar="TARGET", show_default=False,
        help="memcached://, memcached+binary://, memcached+udp:// (stored over TCP) or redis:// target; over TLS "
             "memcached+tls://, redis+tls://")],
    workload: Annotated[Optional[str], typer.Option(
        "--workload", metavar="FILE", help="TOML workload file: its keys, key_size and value_size are used")] = None,
    keys: Annotated[Optional[int], typer.Option(
        "--keys", metavar="N", help=f"number of keys to store, 0 … N−1 {default('keys')}")] = None,
    key_size: Annotated[Optional[str], typer.Option(
        "--key-size", metavar="SIZES", help=f"key sizes: as for `tailwise run` {default('key_size')}")] = None,
    value_size: Annotated[Optional[str], typer.Option(
        "--value-size", "--value", metavar="SIZES",
        help=f"value sizes: 200, uniform:MIN:MAX, gpareto:LOC:SCALE:SHAPE, etc, usr {default('value_size')}")] = None,
    conns: Annotated[int, typer.Option(
        "--conns", "-c", metavar="N", help="connections storing in parallel, as many as a run's")] = DEFAULTS["conns"],
    outstanding: Annotated[int, typer.Option(
        "--outstanding", "--depth", metavar="N",
        help="sets in flight per connection, pipelined (--depth: mutilate's name, kept)")] = LOAD_OUTSTANDING,
    redis_password_file: Annotated[Optional[str], typer.Option(
        "--redis-password-file", metavar="FILE",
        help="redis:// only: the password (AUTH) from this file's one line, when the URL gives none; else "
             "TAILWISE_REDIS_PASSWORD")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
    tls_ca: TlsCa = None, tls_insecure: TlsInsecure = None, tls_cert: TlsCert = None, tls_key: TlsKey = None,
    tls_sni: TlsSni = None, tls_no_resume: TlsNoResume = None,
) -> int:
    """Store every key of a workload once, so that the gets of a later `tailwise run` hit."""
    from tailwise import _core
    from tailwise.results.files import dumps
    from tailwise.spec.tls import tls_settings
    from tailwise.spec.workload import Workload, load_file, resolve

    tls_flags = {"tls_ca": tls_ca, "tls_insecure": tls_insecure, "tls_cert": tls_cert, "tls_key": tls_key,
                 "tls_sni": tls_sni, "tls_no_resume": tls_no_resume}
    st = resolve({"keys": keys, "key_size": key_size, "value_size": value_size, **tls_flags}, load_file(workload))
    tgt = with_password([parse_target(target)], redis_password_file)[0]
    tls = tls_settings(st, (tgt,))
    if not tgt.keyed:
        raise InputError(f"{url_scheme(tgt.scheme, tgt.tls)}:// has no keys to store", "`tailwise load` is for memcached and redis targets")
    positive("--conns", conns)
    positive("--outstanding", outstanding)
    work = Workload.from_settings(st | {"mix": "1:0"})
    # Over TLS the engine's configuration's ``tls`` (as a run's); absent, the call is a plaintext one.
    over = {} if tls is None else {"tls": json.dumps(tls.engine())}
    try:
        r = _core.preload(tgt.socket_addr(), tgt.scheme, keys=work.keys, key_size=work.key_size,
                          value_size=work.value_size, conns=conns, depth=outstanding,
                          protocol=json.dumps({"scheme": tgt.scheme} | tgt.protocol_auth()), **over)
    except ValueError as e:  # the address does not resolve; the data plane's own problems are TailwiseErrors
        raise InputError(str(e)) from None
    out = {"target": tgt.url, "keys": work.keys, "stored": r["stored"], "errors": r["errors"],
           "error_reasons": [{"reason": m, "count": n} for m, n in r["error_reasons"]],
           "value_bytes": r["bytes"], "elapsed_s": r["elapsed_ns"] / 1e9}
    if json_out:
        print(dumps(out))
    else:
        rate = r["stored"] / max(r["elapsed_ns"] / 1e9, 1e-9)
        print(f"stored {r['stored']:,} of {work.keys:,} keys ({r['bytes'] / 1e6:.1f} MB of values) on {tgt.url} "
              f"in {r['elapsed_ns'] / 1e9:.2f} s ({rate:,.0f} sets/s)")
    if r["errors"]:
        reasons = "; ".join(f"{m} ×{n}" for m, n in r["error_reasons"])
        raise TargetError(f"{r['errors']:,} sets failed ({reasons})",
                          "check the server's memory limit (memcached -m, redis maxmemory) and value sizes")
    return EXIT_OK


def calibrate(
    target: Annotated[Optional[str], typer.Argument(
        metavar="TARGET", show_default=False,
        help="a reflector to measure against (synthetic://HOST:PORT from `tailwise serve --service fixed:0`, or "
             "udp://HOST:PORT echo); none: loopback, veth (when it may create network namespaces) and the model")] = None,
    duration: Annotated[str, typer.Option("--duration", metavar="TIME", help="ping-pong traffic per path, e.g. 2s")] = "2s",
    with_model: Annotated[bool, typer.Option(
        "--model/--no-model",
        help="also measure the whole tool against the queueing model (tailwise serve fixed:10us at 20 % load, 6 s)")] = True,
    out: Annotated[Optional[str], typer.Option(
        "--out", metavar="DIR",
        help="also write the result to DIR/summary.json (schema tailwise.calibrate/1, docs/schema/)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print JSON on stdout instead of the tables")] = False,
) -> int:
    """What each timestamp source (kernel, user, nic) reports for the same traffic here: each one's bias against the best, the clock's cost, and the whole tool's bias against the model.

    Example: tailwise calibrate --json
    """
    from tailwise.measure.calibrate import calibrate as run_calibration
    from tailwise.render.tables import print_calibration
    from tailwise.results.export import jsonfiles
    from tailwise.results.files import check_out_dir, dumps

    seconds = parse_time_ns(duration, what="--duration") / 1e9
    if seconds < 0.5:
        raise InputError(f"--duration {duration} is too short for calibration traffic", "give --duration 1s or more")
    if out:
        check_out_dir(out)
    result = run_calibration(target, seconds=seconds, with_model=with_model)
    if out:
        jsonfiles.SUMMARY.write_doc(out, result)
    if json_out:
        print(dumps(result.to_json()))
    else:
        print_calibration(result)
    return EXIT_OK
