"""The `tailwise` command line (typer). Each command parses and validates, then hands over to the
agent, the statistics and the output modules. Every user error ends as one line and status 2."""

from __future__ import annotations

import copy
import functools
import inspect
import shlex
import shutil
import signal
import sys
import threading
import typing
from enum import Enum
from typing import Optional

import typer

# typer 0.29 vendors its own click; its exceptions live here (the version is pinned).
from typer._click.exceptions import NoArgsIsHelpError, UsageError

from tailwise import __version__
from tailwise.errors import InputError, TailwiseError, TargetError
from tailwise.render.output import err_console, print_summary, set_quiet, warn
from tailwise.signals import Interrupted
from tailwise.measure.server import builtin_server
from tailwise.spec.target import parse_target
from tailwise.spec.runspec import TIME_CAP_ENV, RunSpec, positive as _positive
from tailwise.spec.units import parse_time_ns

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Plain help, as hyperfine's: rich markup would eat every "[default: …]" in a help text.
    rich_markup_mode=None,
    context_settings={"max_content_width": 100},
    help="Open-loop tail-latency measurement of µs-scale services, with statistics that say whether to trust it.",
)

EXIT_OK, EXIT_NOT_MEASURABLE, EXIT_ERROR, EXIT_THRESHOLD, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


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
    percentiles: Optional[str] = typer.Option(None, "--percentiles", help="the percentiles to report, each with its CI, e.g. 50,95,99,99.9 (--percentile and those of --threshold/--slo are added) [default: 50,90,95,99,99.9,99.99]"),
    ci: Optional[str] = typer.Option(None, "--ci", help="widest acceptable CI of that percentile: a time (10us) or a share of its value (5%); none with --duration [default: 10%]"),
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
    service: Optional[str] = typer.Option(None, "--service", help="service time: the built-in server's distribution; with a synthetic:// target only fixed:T, carried in each request [default: fixed:10us for the built-in server]"),
    workers: Optional[int] = typer.Option(None, "--workers", help="built-in server worker threads [default: 1]"),
    sample_every: Optional[int] = typer.Option(None, "--sample-every", help="engine keeps a random 1 in K requests raw; the methodology thins further [default: as many as keeps ≤ 20k samples/s]"),
    timeout: Optional[str] = typer.Option(None, "--timeout", help="a request unanswered this long is a timeout [default: 1s]"),
    late: Optional[str] = typer.Option(None, "--late", help="a request sent this long after its intended time counts as late [default: 50us]"),
    poll: Optional[Poll] = typer.Option(None, "--poll", help="spin: busy-poll (precise, one core per thread); block: sleep between sends [default: spin]"),
    timestamps: Optional[str] = typer.Option(None, "--timestamps", help="where send and reply times come from: auto (the best available), nic (hardware), kernel (software stamps of each send and arrival), user (the clock around the system calls) [default: auto]"),
    probe: Optional[bool] = typer.Option(None, "--probe/--no-probe", help="time only a latency probe's requests (a thread of its own, --probe-conns connections with one request outstanding each, Poisson at --probe-rate, spinning) while the --rate load only loads: prefer it with many load threads or a busy client [default: off]"),
    probe_conns: Optional[int] = typer.Option(None, "--probe-conns", help="the probe's connections [default: 4]"),
    probe_rate: Optional[str] = typer.Option(None, "--probe-rate", help="the probe's rate, on top of --rate [default: 2k]"),
    pin: Optional[bool] = typer.Option(None, "--pin/--no-pin", help="pin engine threads (and built-in server workers) to CPUs [default: --pin]"),
    warmup: Optional[str] = typer.Option(None, "--warmup", help="leading span left out of the statistics (reported with its own p99); whole 100 ms intervals, at most 10% of the run [default: 100ms]"),
    keep_stalls: Optional[bool] = typer.Option(None, "--keep-stalls/--bound-stalls", help="take the requests that stalls (≥ 200 µs) of tailwise's engine threads delayed as measured, instead of as intervals down to what the target can be shown to have taken [default: --bound-stalls]"),
    seed: Optional[int] = typer.Option(None, "--seed", help="random seed of schedules, sampling and statistics [default: random, recorded in the summary]"),
    threshold: Optional[list[str]] = typer.Option(None, "--threshold", help="gate a CI job: 'p99<200us' (repeatable) passes only when the percentile's whole CI meets it; a failed or inconclusive one exits 3"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="print only the result: no live line, no 'measuring', round or warning lines"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="the result with every check's figures, the warm-up, the stalls and the server's own counts"),
    out: Optional[str] = typer.Option(None, "--out", help="write the results directory here: summary.json, samples, .hgrm, histograms, interval log, config and host (docs/results.md); a directory that already holds results is refused unless --force"),
    samples_format: Optional[str] = typer.Option(None, "--samples-format", help="raw samples file format: csv or parquet [default: csv]"),
    force: bool = typer.Option(False, "--force", help="replace whole the results already in --out (summary, samples, histograms, logs, report, plots, points/); without it such a directory is refused"),
    json_out: bool = typer.Option(False, "--json", help="print the summary JSON on stdout instead of the table"),
) -> int:
    """Measure latency at an offered open-loop load, until the percentile's CI is as narrow as asked."""
    from tailwise import signals

    # SIGINT, SIGTERM and SIGHUP stop sending; what was measured is still written (signals.py).
    with signals.handled():
        return _run(locals())


def _run(kw: dict) -> int:
    from tailwise import signals
    # The statistics stack (scipy, statsmodels) loads in ~1 s: only the commands that use it pay.
    from tailwise.measure.point import measure, prepare, round_line
    from tailwise.results.files import check_out_dir, dumps, new_dirs, refuse_results, remove_new_dirs
    from tailwise.results.summary import SAMPLE_FORMATS, amend, write_out
    from tailwise.spec.threshold import Threshold, parse_all as parse_thresholds
    from tailwise.spec.workload import command_setting, load_file

    set_quiet(kw["quiet"])
    file = load_file(kw["workload"])
    threshold = command_setting("threshold", kw["threshold"], file)
    out = command_setting("out", kw["out"], file)
    samples_format = command_setting("samples_format", kw["samples_format"], file)
    quiet, json_out = kw["quiet"], kw["json_out"]
    judged = [Threshold.parse(t) for t in threshold or ()]
    rs = RunSpec.from_flags(_run_flags(kw), kw["workload"], pin=kw["pin"], keep_stalls=kw["keep_stalls"],
                            also_report=tuple(t.p for t in judged))
    if rs.capped:
        warn(rs.capped, f"unset {TIME_CAP_ENV} to measure as asked")
    if samples_format not in SAMPLE_FORMATS:
        raise InputError(f"--samples-format {samples_format} is unknown", "use csv or parquet")
    gates = parse_thresholds(threshold, set(rs.percentiles))
    made = []
    if out:
        if not kw["force"]:
            refuse_results(out)
        made = new_dirs(out)
        check_out_dir(out)  # before the first request: a bad --out must not lose a measured run
    try:
        signals.check()
        setup = prepare(rs)
        m = measure(rs, setup, shlex.join(["tailwise", *sys.argv[1:]]), quiet=quiet, bar=not json_out,
                    on_round=round_line)
    except BaseException:
        remove_new_dirs(made)  # nothing was measured: no directory of ours is left behind
        raise
    summary, result = m.summary, m.result
    amend(summary, thresholds=[g.evaluate(summary["latency"]["percentiles"]) for g in gates])
    if out:
        write_out(out, summary, result, m.analysis.used_mask, samples_format)
    if json_out:
        print(dumps(summary), flush=True)
    else:
        print_summary(summary, verbose=kw["verbose"])
        print_thresholds(summary["thresholds"])
        if out and not summary["error"] and not result.interrupted and not quiet and not signals.received():
            err_console.print(f"results written to {out}/")
    if result.interrupted or signals.received():
        kept = f"results kept in {out}/" if out else "nothing kept on disk (--out DIR keeps the results)"
        sig = signals.name(signals.received())
        if result.interrupted:
            err_console.print(f"tailwise: interrupted after {result.elapsed_ns / 1e9:.1f} s of measuring ({sig}); {kept}")
        else:
            err_console.print(f"tailwise: {sig} came after the measurement ended; it is complete; {kept}")
        return signals.exit_code()
    return exit_code(summary, out)


def _run_flags(kw: dict) -> dict:
    """The run settings among a command's arguments (None: not given), named as the flags."""
    names = ("targets", "rate", "percentile", "percentiles", "ci", "confidence", "max_time", "duration", "threads", "conns",
             "outstanding", "arrival", "keys", "key_size", "popularity", "mix", "service", "workers", "sample_every",
             "timeout", "late", "warmup", "seed", "timestamps", "probe", "probe_conns", "probe_rate")
    flags = {name: kw.get(name) for name in names}
    flags["value_size"] = kw.get("value")
    flags["poll"] = kw["poll"].value if kw.get("poll") else None
    return flags


def exit_code(summary: dict, out: str | None) -> int:
    """0 ok, 1 not-measurable, 2 error; 3 when a --threshold failed or was inconclusive, whatever
    the verdict (a CI job must not pass on a figure it could not trust)."""
    if summary.get("error"):
        err_console.print(f"tailwise: {summary['error']}" + (f" (results so far in {out}/)" if out else ""))
        return EXIT_ERROR
    if any(t["status"] != "pass" for t in summary.get("thresholds") or ()):
        return EXIT_THRESHOLD
    return EXIT_OK if summary["verdict"] == "ok" else EXIT_NOT_MEASURABLE


def print_thresholds(rows: list[dict]) -> None:
    for t in rows:
        colour = {"pass": "green", "fail": "red"}.get(t["status"], "yellow")
        err_console.print(f"threshold {t['threshold']}: [{colour}]{t['status']}[/] — {t['detail']}")


def sweep(**kw) -> int:
    """Measure latency at a series of loads (one self-correcting run each), find the knee, or with --slo the highest load that meets it.

    Examples: tailwise sweep --rates 10k:60k:8 --service fixed:20us --duration 3;
    tailwise sweep memcached://10.0.0.2:11211 --rates 50k:500k:10 --slo 'p99<200us' --out sweep1
    """
    import json
    import time
    from pathlib import Path

    from tailwise import signals
    from tailwise.results.files import check_out_dir, dumps, new_dirs, refuse_results
    from tailwise.results.summary import SAMPLE_FORMATS
    from tailwise.sweep.run import Plan, Sweep, parse_rates, size_window
    from tailwise.spec.threshold import Threshold, parse_all as parse_thresholds
    from tailwise.spec.workload import COMMAND_DEFAULTS, command_setting, load_file

    set_quiet(kw["quiet"])
    resume = kw["resume"]
    command = shlex.join(["tailwise", *sys.argv[1:]])
    if resume:
        given = [f"--{name.replace('_', '-')}" for name, v in _run_flags(kw).items() if v is not None]
        given += [flag for name, flag in (("rates", "--rates"), ("slo", "--slo"), ("threshold", "--threshold"),
                                          ("out", "--out"), ("workload", "--workload"), ("force", "--force"))
                  if kw.get(name)]
        if given:
            raise InputError(f"--resume takes every setting from {resume}/config.json, but {given[0]} was given",
                             f"drop {' '.join(given)}, or start a new sweep with --out")
        out = Path(resume)
        try:
            saved = json.loads((out / "config.json").read_text())
            rs, plan = RunSpec.from_json(saved["spec"]), Plan(**saved["sweep"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError(f"{resume} is not a sweep directory tailwise can resume ({e})",
                             "give --resume the --out directory of an earlier `tailwise sweep`") from None
    else:
        file = load_file(kw["workload"])
        kw = kw | {name: command_setting(name, kw.get(name), file) for name in COMMAND_DEFAULTS}
        if not kw["rates"]:
            raise InputError("tailwise sweep needs --rates", "give e.g. --rates 10k:400k:12 (12 loads) or --rates 10k,20k,50k")
        if kw["samples_format"] not in SAMPLE_FORMATS:
            raise InputError(f"--samples-format {kw['samples_format']} is unknown", "use csv or parquet")
        grid = parse_rates(kw["rates"], kw["steps"])
        flags = _run_flags(kw) | {"rate": grid[0]}
        slo = Threshold.parse(kw["slo"], what="--slo") if kw["slo"] else None
        if slo and flags["percentile"] is None:
            flags["percentile"] = slo.p  # the search decides on the SLO's percentile: bound that one
        judged = [slo] * bool(slo) + [Threshold.parse(t) for t in kw["threshold"] or ()]
        also = tuple(t.p for t in judged)
        rs = RunSpec.from_flags(flags, kw["workload"], pin=kw["pin"], keep_stalls=kw["keep_stalls"], also_report=also)
        # The client's window must hold the top load (Little's law): sized when not given, a given
        # one that cannot is refused.
        given = file | {k: v for k, v in flags.items() if v is not None}
        conns, outstanding, window_note = size_window(grid[-1], given.get("conns"), given.get("outstanding"),
                                                      rs.threads)
        if window_note:
            rs = RunSpec.from_flags(flags | {"conns": conns, "outstanding": outstanding}, kw["workload"], pin=kw["pin"],
                                    keep_stalls=kw["keep_stalls"], also_report=also)
        reported = set(rs.percentiles)
        if slo:
            parse_thresholds([kw["slo"]], reported, what="--slo")
        parse_thresholds(kw["threshold"], reported)
        plan = Plan(rates_rps=grid, rates=kw["rates"], steps=kw["steps"], slo=kw["slo"],
                    thresholds=list(kw["threshold"] or ()), samples_format=kw["samples_format"],
                    window_sized=window_note is not None)
        out = Path(kw["out"] or f"tailwise-sweep-{time.strftime('%Y%m%d-%H%M%S')}")
        if kw["force"]:
            pass  # what tailwise wrote there is put aside when the sweep starts, dropped once a point is in
        elif (out / "summary.json").exists() or (out / "points").exists():
            raise InputError(f"{out} already holds a sweep",
                             f"continue it with --resume {out}, replace it whole with --force, or give a new --out")
        else:
            refuse_results(out)
        made = new_dirs(out)
        check_out_dir(out)
    if rs.capped:
        warn(rs.capped, f"unset {TIME_CAP_ENV} to measure as asked")
    quiet = kw["quiet"]
    if not quiet and not resume:
        what = f"the highest load meeting {plan.slo}" if plan.slo else "the knee"
        print(f"sweeping {len(plan.rates_rps)} loads from {plan.rates_rps[0]:,.0f} to {plan.rates_rps[-1]:,.0f} req/s "
              f"for {what}; results in {out}/ (resume with: tailwise sweep --resume {out})", file=sys.stderr, flush=True)
        if window_note:
            print(window_note, file=sys.stderr, flush=True)
    # SIGINT, SIGTERM, SIGHUP (handled from the command's start: _signals_handled): the point being
    # measured stops and is kept apart, the sweep is saved. The sweep is made inside: with --force
    # the old results are put aside first, so that none of them is read back as a point.
    jobs: list[Sweep] = []

    def start() -> dict:
        jobs.append(Sweep(rs, plan, out, command, quiet=quiet, resumed=bool(resume)))
        return jobs[0].run()

    doc = _execute_into(out, None if resume else made, bool(kw["force"]) and not resume, start)
    if jobs and jobs[0].nothing_to_do:
        err_console.print(f"tailwise: nothing to do: the sweep in {out}/ is complete ({doc['stopped']}); its result:")
    if kw["json_out"]:
        print(dumps(doc), flush=True)
    else:
        print_sweep(doc)
    if doc["interrupted"]:
        kept = (f"{len(doc['points'])} point(s) kept in {out}/: continue with `tailwise sweep --resume {out}`"
                if out.is_dir() else "nothing was measured")
        err_console.print(f"tailwise: sweep interrupted ({signals.name(signals.received())}); {kept}")
        return signals.exit_code()
    if doc["error"]:
        err_console.print(f"tailwise: {doc['error']} (points so far in {out}/; continue with --resume {out})")
        return EXIT_ERROR
    if any(t["status"] != "pass" for p in doc["points"] for t in p["thresholds"]):
        return EXIT_THRESHOLD
    answered = (doc["slo"] or {}).get("rate_rps") is not None if plan.slo else any(not p["saturated"] for p in doc["points"])
    return EXIT_OK if answered else EXIT_NOT_MEASURABLE


def _execute_into(out, made: list | None, force: bool, execute):
    """Run a new sweep (``made``: the directories it created; None when resuming) into ``out``,
    with --force putting aside what tailwise wrote there before. If no point gets measured (a
    target refused, a signal before the first point), the directory is left as it was found: the
    old results put back, or the directories created removed."""
    from tailwise.results.files import remove_new_dirs, stash_results, unstash_results
    from tailwise.sweep.run import completed_points

    stash = stash_results(out) if force else None
    measured = False
    try:
        doc = execute()
        measured = bool(doc["points"]) or (out / "failed").is_dir() or (out / "interrupted").is_dir()
        return doc
    finally:
        if made is not None and not measured and not completed_points(out / "points"):
            if made:
                remove_new_dirs(made)
            else:
                unstash_results(out, stash)
        elif stash is not None:
            shutil.rmtree(stash, ignore_errors=True)


def print_sweep(doc: dict) -> None:
    from rich.table import Table

    from tailwise.render.output import fmt_ns, stdout_console
    from tailwise.sweep.run import capacity_text, knee_text, saturation_text

    console = stdout_console()
    console.print(f"tailwise sweep · {doc['target']} · p{doc['percentile']:g} with its CI", markup=False)
    # Plain columns (as the run's table): no box, so that it fits 80 columns; nothing is cut —
    # a verdict ("not-measurable", "undetermined (2 attempts)") or a header never ends in "…".
    t = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 2))
    cols = ["load req/s", "sent req/s", f"p{doc['percentile']:g}", "CI", "verdict", "saturated"]
    if doc["slo"]:
        cols.append("SLO")
    for col in cols:
        t.add_column(col, justify="right" if "req/s" in col else "left", overflow="fold",
                     no_wrap=col in ("CI", "verdict", "SLO"), min_width=max(len(w) for w in col.split()))
    for p in doc["points"]:
        x = p["target"] or {}
        sat = ("client" if p.get("client_limited") else "yes") if p["saturated"] else ""
        row = [f"{p['rate_rps']:,.0f}", f"{p['achieved_rps']:,.0f}" if p["achieved_rps"] else "—",
               fmt_ns(x.get("value_ns")), f"[{fmt_ns(x.get('low_ns'))}, {fmt_ns(x.get('high_ns'))}]",
               p["verdict"], sat]
        if doc["slo"]:
            tries = len(p.get("attempts") or ())
            row.append((p.get("slo_outcome") or "—") + (f" ({tries} attempts)" if tries > 1 else ""))
        t.add_row(*row)
    console.print(t)
    if (knee := knee_text(doc)) is not None:
        console.print(knee, markup=False)
    if (sat := saturation_text(doc)) is not None:
        console.print(sat, markup=False)
    if (capacity := capacity_text(doc)) is not None:
        console.print(capacity)
    if doc["slo"]:
        console.print(f"SLO {doc['slo']['threshold']}: {doc['slo']['detail']}", markup=False)


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
    from tailwise.render.tables import print_model
    from tailwise.stats.model import model_percentiles
    from tailwise.results.files import dumps

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
    from tailwise.results.files import dumps
    from tailwise.spec.workload import Workload, load_file, resolve

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
    out: Optional[str] = typer.Option(None, "--out", help="also write the result to DIR/summary.json (schema tailwise.calibrate/1, docs/schema/)"),
    json_out: bool = typer.Option(False, "--json", help="print JSON on stdout instead of the tables"),
) -> int:
    """What each timestamp source (kernel, user, nic) reports for the same traffic here: each one's bias against the best, the clock's cost, and the whole tool's bias against the model.

    Example: tailwise calibrate --json
    """
    from pathlib import Path

    from tailwise.measure.calibrate import calibrate as run_calibration
    from tailwise.render.tables import print_calibration
    from tailwise.results.files import check_out_dir, dumps, write_json

    seconds = parse_time_ns(duration, what="--duration") / 1e9
    if seconds < 0.5:
        raise InputError(f"--duration {duration} is too short for calibration traffic", "give --duration 1s or more")
    if out:
        check_out_dir(out)
    result = run_calibration(target, seconds=seconds, with_model=with_model)
    if out:
        write_json(Path(out) / "summary.json", result)
    if json_out:
        print(dumps(result))
    else:
        print_calibration(result)
    return EXIT_OK


@app.command()
def version() -> None:
    """Print the version."""
    print(f"tailwise {__version__}")


def _sweep_signature() -> None:
    """`sweep` takes every option of `run` (but --rate: --rates) and its own."""
    own = {
        "rates": (Optional[str], typer.Option(None, "--rates", help="the loads: START:STOP:N (e.g. 10k:400k:12) or a list, 10k,20k,50k")),
        "steps": (Optional[str], typer.Option(None, "--steps", help="spacing of START:STOP:N: linear or log [default: linear]")),
        "slo": (Optional[str], typer.Option(None, "--slo", help="search (bisection on the CIs) for the highest load whose percentile meets this, e.g. 'p99<200us'")),
        "resume": (Optional[str], typer.Option(None, "--resume", help="continue the sweep in this directory (a killed or interrupted one), with its own settings")),
    }
    params = [p for name, p in inspect.signature(run, eval_str=True).parameters.items() if name != "rate"]
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=ann)
               for name, (ann, opt) in own.items()]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
    for i, p in enumerate(params):
        if p.name == "out":
            opt = copy.copy(p.default)
            opt.help = ("the sweep's directory (docs/results.md): summary.json, config, host and one results directory "
                        "per point; one that already holds results is refused unless --force [default: ./tailwise-sweep-DATE-TIME]")
            params[i] = p.replace(default=opt)
        elif p.name in ("conns", "outstanding"):
            opt = copy.copy(p.default)
            head, _, default = opt.help.partition(" [default")
            opt.help = (f"{head}; a sweep sizes conns × outstanding to hold the top of --rates × 500 µs × 2 (Little's "
                        "law) when not given, and refuses a given window that cannot" + (f" [default{default}" if default else ""))
            params[i] = p.replace(default=opt)
    sweep.__signature__ = inspect.Signature(params, return_annotation=int)
    sweep.__annotations__ = {p.name: p.annotation for p in params} | {"return": int}
    app.command(name="sweep")(_signals_handled(sweep))


def _signals_handled(fn):
    """The command with SIGINT, SIGTERM and SIGHUP handled from its first line (signals.py)."""
    @functools.wraps(fn)
    def command(**kw):
        from tailwise import signals

        with signals.handled():
            return fn(**kw)
    return command


_sweep_signature()

from tailwise.cli import report as cli_report  # noqa: E402  (report and compare: their own module)

cli_report.register(app)


#: What each option's value is, in --help (typer 0.29 would print its Python type, <list[str]>).
VALUE_NAMES = {
    "targets": "TARGET", "target": "TARGET", "directory": "DIR", "directories": "DIR",
    "rate": "RATE", "rates": "RATES", "probe_rate": "RATE", "load": "RHO",
    "max_time": "TIME", "duration": "TIME", "timeout": "TIME", "late": "TIME", "warmup": "TIME", "ci": "WIDTH",
    "percentile": "P", "percentiles": "P,P,…", "confidence": "LEVEL", "threshold": "LIMIT", "slo": "LIMIT",
    "workload": "FILE", "out": "DIR", "resume": "DIR", "listen": "HOST:PORT",
    "arrival": "PROCESS", "key_size": "SIZES", "value": "SIZES", "popularity": "DIST", "mix": "GET:SET",
    "service": "DIST", "timestamps": "SOURCE", "samples_format": "FORMAT", "steps": "SPACING", "label": "NAME",
}


def _name_values(command) -> None:
    """Name each value in --help (RATE, TIME, N …) instead of its Python type; arguments are
    named by their metavar alone."""
    from typer.models import ArgumentInfo, OptionInfo

    for name, p in inspect.signature(command.callback, eval_str=True).parameters.items():
        info = p.default
        if not isinstance(info, (OptionInfo, ArgumentInfo)) or info.metavar is not None:
            continue
        ann = str(p.annotation)
        if "bool" in ann:
            continue
        if isinstance(info, ArgumentInfo):
            info.metavar = VALUE_NAMES.get(name, name.upper())  # click adds "..." to a list
        elif enums := [a for a in (p.annotation, *typing.get_args(p.annotation)) if inspect.isclass(a) and issubclass(a, Enum)]:
            info.metavar = "|".join(e.value for e in enums[0])
        else:
            info.metavar = VALUE_NAMES.get(name) or ("N" if "int" in ann else "X" if "float" in ann else "TEXT")


def _patch_help() -> None:
    import typer.core

    # typer 0.29 (pinned) prints an argument's Python type after its name; the name says it.
    typer.core.TyperArgument.display_type_rich = lambda self, ctx: None
    for command in app.registered_commands:
        _name_values(command)


def main() -> None:
    _patch_help()
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
    except Interrupted as e:
        print(f"tailwise: interrupted ({e}) before the first request was sent; nothing was measured", file=sys.stderr)
        code = e.exit_code
    except (KeyboardInterrupt, typer.Abort):
        print("tailwise: interrupted before a result was complete; nothing was kept", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.stdout.flush()
    sys.exit(code if isinstance(code, int) else EXIT_OK)
