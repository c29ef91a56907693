"""`tailwise run`: one measurement, its summary, its results directory and its exit status."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tailwise.cli.exits import EXIT_ERROR, EXIT_NOT_MEASURABLE, EXIT_THRESHOLD, VERDICT_EXIT, measuring
from tailwise.cli.options import (Agents, Arrival, Bounds, Ci, Confidence, Conns, Duration, Force, Json, KeepStalls, Keys, KeySize,
                                  Late, MaxTime, Mix, Outstanding, Percentile, Percentiles, Pin, PollOption,
                                  Popularity, Probe, ProbeConns, ProbeRate, Quiet, Rate, RunOut, SampleEvery,
                                  Size, Flows, MaxLoss, Method, Header, Body, BodyFile, RequestsFile, RedisPasswordFile,
                                  TlsCa, TlsInsecure, TlsCert, TlsKey, TlsSni, TlsNoResume, TLS_SETTINGS,
                                  ProbeAgent, SamplesFormat, Seed, Service, Targets, Threads, Thresholds, Timeout,
                                  Timestamps, AgentTlsCa, AgentTlsCert, AgentTlsKey, InsecurePlaintext, TokenFile,
                                  ValueSize, Verbose, Warmup, Workers, Workload)
from tailwise.errors import InputError
from tailwise.render.output import print_summary, set_quiet, table_unit
from tailwise.render.warning import warn
from tailwise.render.run import print_run_error, print_signalled, print_thresholds, print_written
from tailwise.spec.runspec import RunSpec
from tailwise.spec.target import command_line

if TYPE_CHECKING:
    from tailwise.results.documents.run import Summary

#: The arguments of `run` (and `sweep`) that are settings of the measurement (RunSpec), named as the flags.
RUN_SETTINGS = ("targets", "rate", "percentile", "percentiles", "ci", "confidence", "max_time", "duration", "threads",
                "conns", "outstanding", "arrival", "keys", "key_size", "popularity", "mix", "service", "workers",
                "sample_every", "timeout", "late", "warmup", "seed", "timestamps", "probe", "probe_conns", "probe_rate",
                "value_size", "size", "flows", "max_loss", "bounds", "method", "header", "body", "body_file", "requests_file",
                "redis_password_file", *TLS_SETTINGS)


def run(
    targets: Targets = None, workload: Workload = None, rate: Rate = None, percentile: Percentile = None,
    percentiles: Percentiles = None, ci: Ci = None, confidence: Confidence = None, max_time: MaxTime = None,
    duration: Duration = None, threads: Threads = None, conns: Conns = None, outstanding: Outstanding = None,
    arrival: Arrival = None, keys: Keys = None, key_size: KeySize = None, value_size: ValueSize = None,
    popularity: Popularity = None, mix: Mix = None, service: Service = None, workers: Workers = None,
    sample_every: SampleEvery = None, timeout: Timeout = None, late: Late = None, poll: PollOption = None,
    timestamps: Timestamps = None, probe: Probe = None, probe_conns: ProbeConns = None, probe_rate: ProbeRate = None,
    pin: Pin = None, warmup: Warmup = None, keep_stalls: KeepStalls = None, seed: Seed = None,
    threshold: Thresholds = None, quiet: Quiet = False, verbose: Verbose = False, out: RunOut = None,
    samples_format: SamplesFormat = None, force: Force = False, json_out: Json = False, agents: Agents = None,
    probe_agent: ProbeAgent = None, token_file: TokenFile = None, agent_tls_ca: AgentTlsCa = None,
    agent_tls_cert: AgentTlsCert = None, agent_tls_key: AgentTlsKey = None, insecure_plaintext: InsecurePlaintext = None,
    size: Size = None,
    flows: Flows = None, max_loss: MaxLoss = None, bounds: Bounds = None, method: Method = None, header: Header = None,
    body: Body = None, body_file: BodyFile = None, requests_file: RequestsFile = None,
    redis_password_file: RedisPasswordFile = None, tls_ca: TlsCa = None,
    tls_insecure: TlsInsecure = None, tls_cert: TlsCert = None, tls_key: TlsKey = None, tls_sni: TlsSni = None,
    tls_no_resume: TlsNoResume = None,
) -> int:
    """Measure latency at an offered open-loop load, until the percentile's CI is as narrow as asked.

    Examples: tailwise run -R 20k -d 5 --service exp:10us;
    tailwise run memcached://10.0.0.2:11211 -R 100k -c 32 -t 2 --mix get=9,set=1 --out run1;
    tailwise run http://10.0.0.2:8080/ -R 5k --threshold 'p99<2ms'
    """
    # SIGINT, SIGTERM and SIGHUP stop sending; what was measured is still written (signals.py).
    kw = locals()
    return measuring(lambda: _run(kw))


def run_flags(kw: dict, file: dict | None = None) -> dict:
    """The run settings among a command's arguments (None: not given), named as the flags. A
    probe agent (--probe-agent, here or in the workload file) turns the probe on."""
    flags = {name: kw.get(name) for name in RUN_SETTINGS} | {"poll": kw["poll"].value if kw.get("poll") else None}
    if flags["probe"] is None and (kw.get("probe_agent") or (file or {}).get("probe_agent")):
        flags["probe"] = True
    return flags


def fleet_of(kw: dict, file: dict):
    """The agents of a run (spec/fleet.py), the flags over the workload file; None: this process."""
    from tailwise.spec.fleet import Fleet
    from tailwise.spec.workload import command_setting

    return Fleet.from_flags(*(command_setting(n, kw.get(n), file) for n in (
        "agents", "probe_agent", "token_file", "agent_tls_ca", "agent_tls_cert", "agent_tls_key", "insecure_plaintext")))


def _run(kw: dict) -> int:
    from tailwise import signals
    # The statistics stack (scipy, statsmodels) loads in ~1 s: the first analysis imports it, after the
    # first request (measure/point._drive).
    from tailwise.measure.point import measure, prepare
    from tailwise.render.point import PointDisplay
    from tailwise.results.journal import COLLECTED
    from tailwise.results.files import (check_out_dir, discard_stage, dumps, new_dirs, refuse_results,
                                        remove_new_dirs)
    from tailwise.results.export import write_run
    from tailwise.results.export.samples import SAMPLE_FORMATS
    from tailwise.spec.threshold import Threshold, parse_all as parse_thresholds
    from tailwise.spec.workload import command_setting, load_file

    set_quiet(kw["quiet"])
    file = load_file(kw["workload"])
    threshold = command_setting("threshold", kw["threshold"], file)
    out = command_setting("out", kw["out"], file)
    samples_format = command_setting("samples_format", kw["samples_format"], file)
    quiet, json_out = kw["quiet"], kw["json_out"]
    judged = [Threshold.parse(t) for t in threshold or ()]
    rs = RunSpec.from_flags(run_flags(kw, file), kw["workload"], pin=kw["pin"], keep_stalls=kw["keep_stalls"],
                            also_report=tuple(t.p for t in judged))
    if rs.capped:
        warn(rs.capped)
    if samples_format not in SAMPLE_FORMATS:
        raise InputError(f"--samples-format {samples_format} is unknown", "use csv or parquet")
    gates = parse_thresholds(threshold, set(rs.percentiles))
    fleet = fleet_of(kw, file)
    made = []
    if out:
        if not kw["force"]:
            refuse_results(out)
        made = new_dirs(out)
        check_out_dir(out)  # before the first request: a bad --out must not lose a measured run
    try:
        signals.check()
        setup = prepare(rs, warn, fleet)
        display = PointDisplay(quiet=quiet, live=not json_out, rate_rps=rs.rate_rps,
                               span_s=(rs.duration_ns or rs.max_time_ns) / 1e9, fixed=bool(rs.duration_ns),
                               percentile=rs.percentile)
        m = measure(rs, setup, command_line(sys.argv[1:]), display,
                    collected=Path(out) / COLLECTED if out else None)
    except BaseException:
        remove_new_dirs(made)  # nothing was measured: no directory of ours is left behind
        raise
    summary, result = m.summary, m.result
    m.amend(thresholds=[g.evaluate(summary.latency.percentiles) for g in gates])
    unwritten = None
    if out:
        for problem in m.file_problems(out):
            warn(problem)
        try:
            write_run(out, summary, result, m.analysis.used_mask, samples_format)
        except OSError as e:
            # The disk filled or went away after the run: what was measured is printed all the same.
            unwritten = f"{out} was not written ({(e.strerror or str(e)).lower()})"
            discard_stage(out)
    kept_in = None if unwritten else out  # no line below may point at a directory not written
    if json_out:
        print(dumps(summary.to_json()), flush=True)
    else:
        print_summary(summary, verbose=kw["verbose"])
        print_thresholds(summary.thresholds, table_unit(summary))
        if kept_in and not summary.error and not result.interrupted and not quiet and not signals.received():
            print_written(out)
    if unwritten:
        print(f"tailwise: {unwritten}; the run's summary is printed above: free space there or give --out "
              "another directory, and run again to have its files", file=sys.stderr)
    if result.interrupted or signals.received():
        print_signalled(kept_in, signals.name(signals.received()), result.interrupted, result.elapsed_ns)
        return signals.exit_code()
    code = exit_code(summary, kept_in)
    return EXIT_ERROR if unwritten else code


def exit_code(summary: Summary, out: str | None) -> int:
    """0 ok, 4 imprecise, 1 not-measurable, 2 error; 3 when a --threshold failed or was
    inconclusive, whatever the verdict (a CI job must not pass on a figure it could not trust)."""
    if summary.error:
        print_run_error(summary.error, out)
        return EXIT_ERROR
    if any(t.status != "pass" for t in summary.thresholds):
        return EXIT_THRESHOLD
    return VERDICT_EXIT.get(summary.verdict, EXIT_NOT_MEASURABLE)
