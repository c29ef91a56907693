"""The `tailwise` command line (typer). Each command parses and validates, then hands over to the
agent, the statistics and the output modules. Every user error ends as one line and status 2."""

from __future__ import annotations

import ipaddress
import os
import shlex
import signal
import sys
import threading
from enum import Enum
from typing import Optional

import typer

# typer 0.29 vendors its own click; its exceptions live here (the version is pinned).
from typer._click.exceptions import NoArgsIsHelpError, UsageError

from tailwise import __version__
from tailwise.agent import LoadSpec, LocalAgent
from tailwise.errors import InputError, TailwiseError, TargetError
from tailwise.host import host_info
from tailwise.output import err_console, fmt_ns, print_summary, warn
from tailwise.server import builtin_server, server_stats
from tailwise.target import parse_target
from tailwise.spec import TIME_CAP_ENV, RunSpec, positive as _positive, timestamp_source
from tailwise.units import parse_dist, parse_time_ns

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Open-loop tail-latency measurement of µs-scale services, with statistics that say whether to trust it.",
)

EXIT_OK, EXIT_NOT_MEASURABLE, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


def _print_version(value: bool) -> None:
    if value:
        print(f"tailwise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Open-loop tail-latency measurement of µs-scale services, with statistics that say whether to trust it."""


class Poll(str, Enum):
    spin = "spin"
    block = "block"


@app.command()
def run(
    targets: Optional[list[str]] = typer.Argument(None, help="one or more targets of one protocol: synthetic://, memcached://, memcached+binary://, memcached+udp://, redis://, http://host:port/path, udp://host:port?size=N; none: the built-in server on 127.0.0.1"),
    workload: Optional[str] = typer.Option(None, "--workload", help="TOML file with any of these settings (examples/workload.toml); flags given here win"),
    rate: Optional[str] = typer.Option(None, "--rate", help="offered load, requests per second (5000, 50k, 1.5M) [default: 10k]"),
    percentile: Optional[float] = typer.Option(None, "--percentile", help="the percentile whose confidence interval must meet --ci [default: 99]"),
    ci: Optional[str] = typer.Option(None, "--ci", help="widest acceptable CI of that percentile: a time (10us) or a share of its value (5%); default 10%"),
    confidence: Optional[float] = typer.Option(None, "--confidence", help="confidence level of the percentile intervals [default: 0.95]"),
    max_time: Optional[str] = typer.Option(None, "--max-time", help="the longest the coordinator may measure before it concludes [default: 60s]"),
    duration: Optional[str] = typer.Option(None, "--duration", help="fixed-length mode: send for exactly this long (3, 500ms, 2m); checks still reported"),
    threads: Optional[int] = typer.Option(None, "--threads", help="engine threads, one CPU each [default: 1]"),
    conns: Optional[int] = typer.Option(None, "--conns", help="connections in all, spread over the threads and targets [default: 8]"),
    outstanding: Optional[int] = typer.Option(None, "--outstanding", help="requests in flight per connection, at most [default: 4]"),
    arrival: Optional[str] = typer.Option(None, "--arrival", help="inter-arrival process: exp (Poisson), fixed, uniform, lognormal:SIGMA [default: exp]"),
    keys: Optional[int] = typer.Option(None, "--keys", help="memcached/redis: number of distinct keys [default: 10000]"),
    key_size: Optional[str] = typer.Option(None, "--key-size", help="key sizes in bytes: 30, uniform:10:60, gev:LOC:SCALE:SHAPE, etc or usr (Facebook) [default: 30]"),
    value: Optional[str] = typer.Option(None, "--value-size", "--value", help="value sizes of sets in bytes: 200, uniform:MIN:MAX, gpareto:LOC:SCALE:SHAPE, etc or usr [default: 200]"),
    popularity: Optional[str] = typer.Option(None, "--popularity", help="key popularity: uniform or zipf:S [default: uniform]"),
    mix: Optional[str] = typer.Option(None, "--mix", help="GET:SET ratio, e.g. 9:1 [default: 1:0, gets only]"),
    service: Optional[str] = typer.Option(None, "--service", help="service time: built-in server's distribution (default fixed:10us); with a synthetic:// target only fixed:T, carried in each request"),
    workers: Optional[int] = typer.Option(None, "--workers", help="built-in server worker threads [default: 1]"),
    sample_every: Optional[int] = typer.Option(None, "--sample-every", help="engine keeps a random 1 in K requests raw (default: as many as keeps ≤ 20k samples/s); the methodology thins further"),
    timeout: Optional[str] = typer.Option(None, "--timeout", help="a request unanswered this long is a timeout [default: 1s]"),
    late: Optional[str] = typer.Option(None, "--late", help="a request sent this long after its intended time counts as late [default: 50us]"),
    poll: Optional[Poll] = typer.Option(None, "--poll", help="spin: busy-poll (precise, one core per thread); block: sleep between sends [default: spin]"),
    timestamps: Optional[str] = typer.Option(None, "--timestamps", help="where send and reply times come from: auto (the best available), nic (hardware), kernel (software stamps of each send and arrival), user (the clock around the system calls) [default: auto]"),
    probe: Optional[bool] = typer.Option(None, "--probe/--no-probe", help="time only a latency probe's requests (a thread of its own, --probe-conns connections with one request outstanding each, Poisson at --probe-rate, spinning) while the --rate load only loads: prefer it with many load threads or a busy client [default: off]"),
    probe_conns: Optional[int] = typer.Option(None, "--probe-conns", help="the probe's connections [default: 4]"),
    probe_rate: Optional[str] = typer.Option(None, "--probe-rate", help="the probe's rate, on top of --rate [default: 2k]"),
    pin: bool = typer.Option(True, "--pin/--no-pin", help="pin engine threads (and built-in server workers) to CPUs"),
    warmup: Optional[str] = typer.Option(None, "--warmup", help="leading span left out of the statistics (reported with its own p99); whole 100 ms intervals, at most 10% of the run [default: 100ms]"),
    keep_stalls: bool = typer.Option(False, "--keep-stalls", help="keep the requests due during stalls (≥ 200 µs) of tailwise's engine threads in the statistics instead of leaving them out"),
    seed: Optional[int] = typer.Option(None, "--seed", help="random seed of schedules, sampling and statistics (default: random, recorded)"),
    out: Optional[str] = typer.Option(None, "--out", help="write summary.json, samples and histograms to this directory"),
    samples_format: str = typer.Option("csv", "--samples-format", help="raw samples file format: csv or parquet"),
    json_out: bool = typer.Option(False, "--json", help="print the summary JSON on stdout instead of the table"),
) -> int:
    """Measure latency at an offered open-loop load, until the percentile's CI is as narrow as asked."""
    # The statistics stack (scipy, statsmodels) loads in ~1 s: only the commands that use it pay.
    from tailwise.methodology import Controller
    from tailwise.methodology.controller import fixed_methodology
    from tailwise.results import SAMPLE_FORMATS, build_summary, check_out_dir, dumps, write_out
    from tailwise import serverstats

    flags = {"targets": targets, "rate": rate, "percentile": percentile, "ci": ci, "confidence": confidence,
             "max_time": max_time, "duration": duration, "threads": threads, "conns": conns,
             "outstanding": outstanding, "arrival": arrival, "keys": keys, "key_size": key_size,
             "value_size": value, "popularity": popularity, "mix": mix, "service": service, "workers": workers,
             "sample_every": sample_every, "timeout": timeout, "late": late, "warmup": warmup,
             "poll": poll.value if poll else None, "seed": seed, "timestamps": timestamps, "probe": probe,
             "probe_conns": probe_conns, "probe_rate": probe_rate}
    rs = RunSpec.from_flags(flags, workload, pin=pin, keep_stalls=keep_stalls)
    if rs.capped:
        warn(rs.capped, f"unset {TIME_CAP_ENV} to measure as asked")
    if samples_format not in SAMPLE_FORMATS:
        raise InputError(f"--samples-format {samples_format} is unknown", "use csv or parquet")
    precision = rs.precision()
    if out:
        check_out_dir(out)  # before the first request: a bad --out must not lose a measured run

    config = rs.config(shlex.join(["tailwise", *sys.argv[1:]]))
    tgts, threads, workers = rs.targets, rs.threads, rs.workers
    host = host_info()
    # The probe thread always spins, on a CPU of its own when there is one.
    busy = (threads if rs.busy_poll else 0) + (1 if rs.probe_conns else 0)
    cores = host["usable_cores"] or 1
    # The built-in server busy-polls when every spinning thread still has a CPU of its own: a
    # sleeping worker adds a vCPU wake-up (~30 µs here) to every request it serves.
    server_spin = not tgts and busy + workers <= cores
    if not tgts:
        config["builtin_server"]["busy_poll"] = server_spin
        if busy + workers > cores:
            warn(f"{busy} spinning engine thread(s) and {workers} server worker(s) share {cores} CPUs",
                 "the server sleeps between requests and the tail includes preemption: use fewer --threads/--workers or --poll block")
    elif busy > cores:
        warn(f"{busy} spinning engine threads on {cores} CPUs", f"use --threads {cores} or fewer, or --poll block")

    # The CPUs the coordinator must not take: the engine's and the built-in server's; all of them
    # when the target is on this machine (loopback), whose CPUs we cannot know.
    local = any(ipaddress.ip_address(t.socket_addr().rsplit(":", 1)[0].strip("[]")).is_loopback for t in tgts)
    engine_threads = threads + (1 if rs.probe_conns else 0)
    busy_cpus = (set(os.sched_getaffinity(0)) if local else _busy_cpus(engine_threads, 0 if tgts else workers)) if rs.pin else None

    def measure(addrs: list[str], target_url: str, stall_sources=()):
        source, note = timestamp_source(rs.timestamps, addrs[0])
        config["timestamps"], config["timestamps_note"] = source, note
        spec = rs.load_spec(addrs, source, test_stall_ns=_test_stall())
        agent = LocalAgent()
        duration_ns, span_s = rs.duration_ns, (rs.duration_ns or rs.max_time_ns) / 1e9
        # What comes after the schedule, bounded: the drain (≤ --timeout) and the analyses (the last
        # round's, which may be running when the schedule ends, and the final one).
        analyses = 1 if duration_ns else 2
        conclude_s = (rs.timeout_ns / 1e9 + 2.0
                      + analyses * ANALYSIS_S_PER_MILLION * rs.rate_rps / rs.sample_every * span_s / 1e6)
        goal = (f"for {span_s:g} s" if duration_ns else
                f"until p{rs.percentile:g} ± {fmt_ns(rs.ci_ns) if rs.ci_ns else f'{rs.ci_rel:.0%}'}, at most {span_s:g} s")
        goal += f" (+ {conclude_s:.1f} s to conclude)"

        def started() -> None:
            print(f"measuring {target_url} at {rs.rate_rps:,.0f} req/s {goal}", file=sys.stderr, flush=True)

        if duration_ns:
            result = _with_progress(agent, spec, quiet=json_out, stall_sources=stall_sources, on_start=started)
            analysis, methodology = fixed_methodology(result, spec, precision, rs.seed, exclude_stalls=not rs.keep_stalls)
        else:
            controller = Controller(spec, precision, seed=rs.seed, progress=_round_line, exclude_stalls=not rs.keep_stalls,
                                    busy_cpus=busy_cpus)
            session = agent.start(controller.spec, stall_sources)
            started()
            result, analysis, methodology = controller.run(session)
        summary = build_summary(target=target_url, config=config, host=host, result=result, analysis=analysis,
                                methodology=methodology)
        return summary, result, analysis

    if not tgts:
        with builtin_server(service=rs.service, workers=workers, seed=rs.seed, pin=rs.pin, busy_poll=server_spin) as srv:
            summary, result, analysis = measure([srv.addr], f"synthetic://{srv.addr}", (srv.take_stalls,))
            summary["target_stats"] = server_stats(srv, parse_dist(rs.service)[1], result.elapsed_ns, workers)
    else:
        addrs = [t.socket_addr() for t in tgts]
        before = serverstats.fetch_all(list(tgts))
        summary, result, analysis = measure(addrs, tgts[0].url if len(tgts) == 1 else ", ".join(t.url for t in tgts))
        summary["target_stats"] = serverstats.compare_all(list(tgts), before, result.counters)

    if out:
        write_out(out, summary, result, analysis.used_mask, samples_format)
    if json_out:
        print(dumps(summary))
    else:
        print_summary(summary)
        if out and not summary["error"] and not result.interrupted:
            err_console.print(f"results written to {out}/")
    if result.interrupted:
        kept = f"results kept in {out}/" if out else "nothing kept on disk (--out DIR keeps the results)"
        err_console.print(f"tailwise: interrupted after {result.elapsed_ns / 1e9:.1f} s of measuring; {kept}")
        return EXIT_INTERRUPTED
    if summary["error"]:
        err_console.print(f"tailwise: {summary['error']}" + (f" (results so far in {out}/)" if out else ""))
        return EXIT_ERROR
    return EXIT_OK if summary["verdict"] == "ok" else EXIT_NOT_MEASURABLE


#: CPU seconds one analysis takes per million samples kept, with room for a busy machine
#: (BENCHMARKS.md: ~2 s per million on this machine kind), for the stated time budget.
ANALYSIS_S_PER_MILLION = 4.0


def _busy_cpus(threads: int, workers: int) -> set[int]:
    """The CPUs the engine threads (from the highest allowed CPU down) and the built-in server's
    workers (from the lowest up) pin themselves to (engine/mod.rs, server/mod.rs)."""
    cpus = sorted(os.sched_getaffinity(0))
    return {cpus[len(cpus) - 1 - (t % len(cpus))] for t in range(threads)} | {cpus[w % len(cpus)] for w in range(workers)}




def _test_stall() -> tuple[int, int] | None:
    """Tests only: TAILWISE_TEST_ENGINE_STALL=AT:FOR (e.g. 1.5s:2ms) stops each engine thread once."""
    hook = os.environ.get("TAILWISE_TEST_ENGINE_STALL")
    if not hook:
        return None
    at, _, dur = hook.partition(":")
    return parse_time_ns(at, what="TAILWISE_TEST_ENGINE_STALL"), parse_time_ns(dur, what="TAILWISE_TEST_ENGINE_STALL")


def _round_line(r) -> None:
    """One line per methodology round on stderr, on a terminal or not."""
    width = fmt_ns(r.ci_width_ns) if r.ci_width_ns is not None else "unbounded"
    target = fmt_ns(r.ci_target_ns) if r.ci_target_ns is not None else "—"
    failing = ", ".join(r.failed) if r.failed else "none"
    line = (f"round {r.round} · {r.elapsed_s:.1f} s · {r.samples:,} samples ({r.used:,} used) · "
            f"p{r.percentile:g} CI width {width} / target {target} · failing: {failing}")
    print(line, file=sys.stderr, flush=True)


def _with_progress(agent: LocalAgent, spec: LoadSpec, quiet: bool, stall_sources=(), on_start=None):
    if quiet or not err_console.is_terminal:
        return agent.run(spec, stall_sources=stall_sources, on_start=on_start)
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("[bold]measuring[/]"), BarColumn(), TextColumn("{task.description}"),
                  TimeRemainingColumn(), console=err_console, transient=True) as bar:
        task = bar.add_task("", total=spec.duration_ns)

        def show(snap: dict) -> None:
            bar.update(task, completed=snap.get("elapsed_ns", 0),
                       description=f"{snap.get('sent', 0):,} sent, {snap.get('received', 0):,} received, "
                                   f"{snap.get('errors', 0) + snap.get('timeouts', 0):,} failed")

        return agent.run(spec, show, stall_sources, on_start)


def _parse_listen(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise InputError(f"--listen {text} is not HOST:PORT", "write e.g. --listen 127.0.0.1:7000 (port 0: any free port)")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@app.command()
def serve(
    listen: str = typer.Option("127.0.0.1:0", "--listen", help="HOST:PORT to listen on (port 0: a free port)"),
    workers: int = typer.Option(1, "--workers", help="worker threads; each spins for every request's service time"),
    service: str = typer.Option("fixed:10us", "--service", help="service-time distribution: fixed:10us, exp:10us, bimodal:10us, lognormal:10us:1.0"),
    spin: bool = typer.Option(False, "--spin", help="busy-poll for requests (lower latency, 100 % CPU per worker)"),
    pin: bool = typer.Option(True, "--pin/--no-pin", help="pin worker i to CPU i"),
    seed: int = typer.Option(1, "--seed", help="seed of the service-time draws"),
) -> int:
    """Run the synthetic server (synthetic protocol and memcached ASCII get/set) until SIGINT/SIGTERM."""
    _positive("--workers", workers)
    addr = _parse_listen(listen)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with builtin_server(service=service, workers=workers, listen=addr, seed=seed, pin=pin, busy_poll=spin) as srv:
        print(f"tailwise serve: listening on synthetic://{srv.addr} (service {service}, "
              f"{workers} worker{'s' if workers != 1 else ''}; memcached ASCII too)", flush=True)
        while not stop.wait(0.2):
            pass
        served = srv.served()
    print(f"tailwise serve: stopped after {served:,} requests", flush=True)
    return EXIT_OK


@app.command()
def model(
    service: str = typer.Option(..., "--service", help="service-time distribution: fixed:10us, exp:10us, bimodal:10us, lognormal:10us:1.0"),
    load: float = typer.Option(..., "--load", help="load ρ = λ·E[S]/workers, between 0 and 1 (e.g. 0.5)"),
    workers: int = typer.Option(1, "--workers", help="servers (worker threads) taking requests from one common FIFO queue (M/G/k)"),
    customers: Optional[int] = typer.Option(None, "--customers", help="customers simulated after a 100k warm-up (default 2,000,000)"),
    seed: int = typer.Option(1, "--seed", help="seed of the simulated arrivals and service times"),
    json_out: bool = typer.Option(False, "--json", help="print JSON on stdout instead of the table"),
) -> int:
    """Queueing-model ground truth: sojourn-time percentiles of a FIFO M/G/k queue (simulated)."""
    from tailwise.model import model_percentiles, print_model
    from tailwise.results import dumps

    result = model_percentiles(service, load, workers=workers, n=customers, seed=seed)
    if json_out:
        print(dumps(result))
    else:
        print_model(result)
    return EXIT_OK


@app.command()
def load(
    target: str = typer.Argument(..., help="memcached://, memcached+binary://, memcached+udp:// (stored over TCP) or redis:// target"),
    workload: Optional[str] = typer.Option(None, "--workload", help="TOML workload file: its keys, key_size and value_size are used"),
    keys: Optional[int] = typer.Option(None, "--keys", help="number of keys to store, 0 … N−1 [default: 10000]"),
    key_size: Optional[str] = typer.Option(None, "--key-size", help="key sizes: as for `tailwise run` [default: 30]"),
    value: Optional[str] = typer.Option(None, "--value-size", "--value", help="value sizes: 200, uniform:MIN:MAX, gpareto:LOC:SCALE:SHAPE, etc, usr [default: 200]"),
    conns: int = typer.Option(4, "--conns", help="connections storing in parallel"),
    depth: int = typer.Option(64, "--depth", help="sets pipelined per connection"),
    json_out: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> int:
    """Store every key of a workload once, so that the gets of a later `tailwise run` hit."""
    from tailwise import _core
    from tailwise.results import dumps
    from tailwise.workload import Workload, load_file, resolve

    st = resolve({"keys": keys, "key_size": key_size, "value_size": value}, load_file(workload))
    tgt = parse_target(target)
    if not tgt.keyed:
        raise InputError(f"{tgt.scheme}:// has no keys to store", "`tailwise load` is for memcached and redis targets")
    _positive("--conns", conns)
    _positive("--depth", depth)
    work = Workload.from_settings(st | {"mix": "1:0"})
    try:
        r = _core.preload(tgt.socket_addr(), tgt.scheme, keys=work.keys, key_size=work.key_size,
                          value_size=work.value_size, conns=conns, depth=depth)
    except ConnectionError as e:
        raise TargetError(str(e), "check that the server runs and listens on that address") from None
    except ValueError as e:
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


@app.command()
def calibrate(
    target: Optional[str] = typer.Argument(None, help="a reflector to measure against (synthetic://HOST:PORT from `tailwise serve --service fixed:0`, or udp://HOST:PORT echo); none: loopback, veth (when it may create network namespaces) and the model"),
    duration: str = typer.Option("2s", "--duration", help="ping-pong traffic per path, e.g. 2s"),
    with_model: bool = typer.Option(True, "--model/--no-model", help="also measure the whole tool against the queueing model (tailwise serve fixed:10us at 20 % load, 6 s)"),
    json_out: bool = typer.Option(False, "--json", help="print JSON on stdout instead of the tables"),
) -> int:
    """What each timestamp source (kernel, user, nic) reports for the same traffic here: each one's bias against the best, the clock's cost, and the whole tool's bias against the model.

    Example: tailwise calibrate --json
    """
    from tailwise.calibrate import calibrate as run_calibration, print_calibration
    from tailwise.results import dumps

    seconds = parse_time_ns(duration, what="--duration") / 1e9
    if seconds < 0.5:
        raise InputError(f"--duration {duration} is too short for calibration traffic", "give --duration 1s or more")
    result = run_calibration(target, seconds=seconds, with_model=with_model)
    if json_out:
        print(dumps(result))
    else:
        print_calibration(result)
    return EXIT_OK


@app.command()
def version() -> None:
    """Print the version."""
    print(f"tailwise {__version__}")


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except NoArgsIsHelpError as e:
        print(e.ctx.get_help() if e.ctx else "see `tailwise --help`")
        code = EXIT_OK
    except UsageError as e:
        cmd = f" {e.ctx.info_name}" if e.ctx and e.ctx.info_name and e.ctx.info_name != "tailwise" else ""
        print(f"tailwise: {e.format_message()} (see `tailwise{cmd} --help`)", file=sys.stderr)
        code = EXIT_ERROR
    except TailwiseError as e:
        print(f"tailwise: {e.line()}", file=sys.stderr)
        code = e.exit_code
    except (KeyboardInterrupt, typer.Abort):
        print("tailwise: interrupted before a result was complete; nothing was kept", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.stdout.flush()
    sys.exit(code if isinstance(code, int) else EXIT_OK)
