"""`tailwise sweep`: the plan from flags (or from the directory it resumes), the sweep run into its
directory, its table and its exit status."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tailwise.cli.exits import EXIT_ERROR, EXIT_NOT_MEASURABLE, EXIT_OK, EXIT_THRESHOLD, measuring
from tailwise.cli.options import (SWEEP_OUT, Agents, Arrival, Bounds, Ci, Confidence, Duration, Force, Json, KeepStalls, Keys,
                                  KeySize, Late, MaxTime, Mix, Percentile, Percentiles, Pin, PollOption, Popularity,
                                  Probe, ProbeConns, ProbeRate, Quiet, Rates, Resume, SampleEvery, SamplesFormat, Seed,
                                  Service, Slo, Steps, SweepConns, SweepOut, SweepOutstanding, Targets, Threads,
                                  Thresholds, Timeout, Timestamps, ValueSize, Verbose, Warmup, Workers, Workload,
                                  ProbeAgent, AgentTlsCa, AgentTlsCert, AgentTlsKey, InsecurePlaintext, TokenFile, Size,
                                  Flows, MaxLoss, Method, Header, Body, BodyFile, RequestsFile, RedisPasswordFile, TlsCa,
                                  TlsInsecure, TlsCert, TlsKey, TlsSni, TlsNoResume)
from tailwise.cli.run import fleet_of, run_flags
from tailwise.errors import InputError
from tailwise.render.output import set_quiet
from tailwise.render.warning import warn
from tailwise.spec.runspec import RunSpec
from tailwise.spec.target import command_line

if TYPE_CHECKING:
    from tailwise.results.documents.sweep import SweepSummary

#: The sweep's own flags that --resume refuses beside it (the run settings too: `run_flags`).
_NOT_WITH_RESUME = (("rates", "--rates"), ("slo", "--slo"), ("threshold", "--threshold"), ("out", "--out"),
                    ("workload", "--workload"), ("force", "--force"))


def sweep(
    targets: Targets = None, workload: Workload = None, percentile: Percentile = None, percentiles: Percentiles = None,
    ci: Ci = None, confidence: Confidence = None, max_time: MaxTime = None, duration: Duration = None,
    threads: Threads = None, conns: SweepConns = None, outstanding: SweepOutstanding = None, arrival: Arrival = None,
    keys: Keys = None, key_size: KeySize = None, value_size: ValueSize = None, popularity: Popularity = None,
    mix: Mix = None, service: Service = None, workers: Workers = None, sample_every: SampleEvery = None,
    timeout: Timeout = None, late: Late = None, poll: PollOption = None, timestamps: Timestamps = None,
    probe: Probe = None, probe_conns: ProbeConns = None, probe_rate: ProbeRate = None, pin: Pin = None,
    warmup: Warmup = None, keep_stalls: KeepStalls = None, seed: Seed = None, threshold: Thresholds = None,
    quiet: Quiet = False, verbose: Verbose = False, out: SweepOut = None, samples_format: SamplesFormat = None,
    force: Force = False, json_out: Json = False, rates: Rates = None, steps: Steps = None, slo: Slo = None,
    resume: Resume = None, agents: Agents = None, probe_agent: ProbeAgent = None, token_file: TokenFile = None,
    agent_tls_ca: AgentTlsCa = None, agent_tls_cert: AgentTlsCert = None,
    agent_tls_key: AgentTlsKey = None, insecure_plaintext: InsecurePlaintext = None, size: Size = None,
    flows: Flows = None, max_loss: MaxLoss = None, bounds: Bounds = None, method: Method = None, header: Header = None,
    body: Body = None, body_file: BodyFile = None, requests_file: RequestsFile = None,
    redis_password_file: RedisPasswordFile = None, tls_ca: TlsCa = None,
    tls_insecure: TlsInsecure = None, tls_cert: TlsCert = None, tls_key: TlsKey = None, tls_sni: TlsSni = None,
    tls_no_resume: TlsNoResume = None,
) -> int:
    """Measure latency at a series of loads (one self-correcting run each), find the knee, or with --slo the highest load that meets it.

    Examples: tailwise sweep --rates 10k:60k:8 --service fixed:20us --duration 3;
    tailwise sweep memcached://10.0.0.2:11211 --rates 50k:500k:10 --slo 'p99<200us' --out sweep1
    """
    # SIGINT, SIGTERM, SIGHUP from the command's first line: the point being measured stops and is
    # kept apart, the sweep is saved (signals.py).
    kw = locals()
    return measuring(lambda: _sweep(kw))


def _sweep(kw: dict) -> int:
    from tailwise.render.sweep import print_start, show_event
    from tailwise.spec.workload import COMMAND_DEFAULTS, command_setting, load_file
    from tailwise.sweep.run import Sweep

    set_quiet(kw["quiet"])
    resume, quiet = kw["resume"], kw["quiet"]
    command = command_line(sys.argv[1:])
    if resume:
        (rs, plan, out), made, window_note = _resumed(kw), None, None
    else:
        file = load_file(kw["workload"])
        kw = kw | {name: command_setting(name, kw.get(name), file) for name in COMMAND_DEFAULTS}
        rs, plan, window_note = _planned(kw, file)
        out, made = _new_dir(kw)
    # The agents are given again on --resume (where the load comes from is not the sweep's spec).
    fleet = fleet_of(kw, {} if resume else file)
    if rs.capped:
        warn(rs.capped)
    if not quiet and not resume:
        print_start(plan.rates_rps, plan.slo, out, window_note)
    # The sweep is made inside: with --force the old results are put aside first, so that none of
    # them is read back as a point.
    jobs: list[Sweep] = []

    def start() -> SweepSummary:
        jobs.append(Sweep(rs, plan, out, command, resumed=bool(resume), on_event=None if quiet else show_event,
                          fleet=fleet))
        return jobs[0].run()

    doc = _execute_into(out, made, bool(kw["force"]) and not resume, start)
    return _finish(doc, plan, out, bool(jobs) and jobs[0].nothing_to_do, kw["json_out"])


def _resumed(kw: dict):
    """The spec, plan and directory of the sweep --resume continues; any other setting given is refused."""
    import json

    from tailwise.results.documents.sweep import SweepConfig
    from tailwise.sweep.run import Plan

    resume = kw["resume"]
    given = [f"--{name.replace('_', '-')}" for name, v in run_flags(kw).items() if v is not None]
    given += [flag for name, flag in _NOT_WITH_RESUME if kw.get(name)]
    if given:
        raise InputError(f"--resume takes every setting from {resume}/config.json, but {given[0]} was given",
                         f"drop {' '.join(given)}, or start a new sweep with --out")
    out = Path(resume)
    try:
        saved = SweepConfig.model_validate(json.loads((out / "config.json").read_text()))
        return RunSpec.from_json(saved.spec.to_json()), Plan(**saved.sweep.to_json()), out
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{resume} is not a sweep directory tailwise can resume ({e})",
                         "give --resume the --out directory of an earlier `tailwise sweep`") from None


def _planned(kw: dict, file: dict):
    """A new sweep's spec and plan from flags over the workload file (``file``) over the defaults
    (``kw``: the sweep's own settings resolved so), and the note saying how the client's window was
    sized for the top load (None: as given or default)."""
    from tailwise.results.export.samples import SAMPLE_FORMATS
    from tailwise.spec.threshold import Threshold, parse_all as parse_thresholds
    from tailwise.sweep.run import Plan
    from tailwise.sweep.search import parse_rates, size_window

    if not kw["rates"]:
        raise InputError("tailwise sweep needs --rates", "give e.g. --rates 10k:400k:12 (12 loads) or --rates 10k,20k,50k")
    if kw["samples_format"] not in SAMPLE_FORMATS:
        raise InputError(f"--samples-format {kw['samples_format']} is unknown", "use csv or parquet")
    grid = parse_rates(kw["rates"], kw["steps"])
    flags = run_flags(kw, file) | {"rate": grid[0]}
    slo = Threshold.parse(kw["slo"], what="--slo") if kw["slo"] else None
    if slo and flags["percentile"] is None:
        flags["percentile"] = slo.p  # the search decides on the SLO's percentile: bound that one
    judged = [slo] * bool(slo) + [Threshold.parse(t) for t in kw["threshold"] or ()]
    also = tuple(t.p for t in judged)
    rs = RunSpec.from_flags(flags, kw["workload"], pin=kw["pin"], keep_stalls=kw["keep_stalls"], also_report=also)
    # The client's window must hold the top load (Little's law): sized when not given, a given
    # one that cannot is refused.
    given = file | {k: v for k, v in flags.items() if v is not None}
    conns, outstanding, window_note = size_window(grid[-1], given.get("conns"), given.get("outstanding"), rs.threads)
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
    return rs, plan, window_note


def _new_dir(kw: dict) -> tuple[Path, list]:
    """A new sweep's directory (--out, or one named by the time) and the directories made for it;
    one holding results is refused unless --force."""
    import time

    from tailwise.results.files import check_out_dir, new_dirs, refuse_results

    out = Path(kw["out"] or SWEEP_OUT.format(time=time.strftime("%Y%m%d-%H%M%S")))
    if kw["force"]:
        pass  # what tailwise wrote there is put aside when the sweep starts, dropped once a point is in
    elif (out / "summary.json").exists() or (out / "points").exists():
        raise InputError(f"{out} already holds a sweep",
                         f"continue it with --resume {out}, replace it whole with --force, or give a new --out")
    else:
        refuse_results(out)
    made = new_dirs(out)
    check_out_dir(out)
    return out, made


def _execute_into(out: Path, made: list | None, force: bool, execute):
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
        measured = bool(doc.points) or (out / "failed").is_dir() or (out / "interrupted").is_dir()
        return doc
    finally:
        if made is not None and not measured and not completed_points(out / "points"):
            if made:
                remove_new_dirs(made)
            else:
                unstash_results(out, stash)
        elif stash is not None:
            shutil.rmtree(stash, ignore_errors=True)


def _finish(doc: SweepSummary, plan, out: Path, nothing_to_do: bool, json_out: bool) -> int:
    """The sweep's result on stdout, how it ended on stderr, and its exit status."""
    from tailwise import signals
    from tailwise.render.sweep import print_error, print_interrupted, print_nothing_to_do, print_sweep
    from tailwise.results.files import dumps

    if nothing_to_do:
        print_nothing_to_do(out, doc)
    if json_out:
        print(dumps(doc.to_json()), flush=True)
    else:
        print_sweep(doc)
    if doc.interrupted:
        print_interrupted(doc, out, signals.name(signals.received()))
        return signals.exit_code()
    if doc.error:
        print_error(doc, out)
        return EXIT_ERROR
    if any(t.status != "pass" for p in doc.points for t in p.thresholds):
        return EXIT_THRESHOLD
    answered = (doc.slo is not None and doc.slo.rate_rps is not None) if plan.slo else any(not p.saturated for p in doc.points)
    return EXIT_OK if answered else EXIT_NOT_MEASURABLE
