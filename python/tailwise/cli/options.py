"""The options of `run` and `sweep`, each defined once as a typer `Annotated` alias; wrk2's short
letters where tailwise has its setting (-c/--conns, -t/--threads, -d/--duration, -R/--rate).

A setting's `[default: …]` in its help comes from the setting's one definition (spec/workload.py's
`DEFAULTS` and `COMMAND_DEFAULTS`, `stats.DEFAULT_PERCENTILES`, spec/runspec.py's computed ones),
never written by hand; each value is named (RATE, TIME, N …) by its metavar here. A value left at
None is "not given": the workload file, then the default, decide (spec/workload.py).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Optional

import typer

from tailwise import _core

from tailwise.spec.runspec import AUTO_SAMPLES_PER_S, BUILTIN_SERVICE, DEFAULT_CI
from tailwise.spec.workload import COMMAND_DEFAULTS, DEFAULTS
from tailwise.stats import DEFAULT_PERCENTILES

#: A sweep's directory when --out is not given; {time} is when it started.
SWEEP_OUT = "tailwise-sweep-{time}"


def shown(value: Any) -> str:
    """A default as --help shows it (99.0 → 99)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def default(name: str, note: str = "") -> str:
    """`[default: X]` for a setting named as its flag, X from DEFAULTS or COMMAND_DEFAULTS."""
    value = DEFAULTS[name] if name in DEFAULTS else COMMAND_DEFAULTS[name]
    return f"[default: {shown(value)}{', ' + note if note else ''}]"


def default_switch(name: str, on: str, off: str) -> str:
    """`[default: --FLAG]` for an on/off setting: the flag that gives its default."""
    return f"[default: {on if DEFAULTS[name] else off}]"


class Poll(str, Enum):
    spin = "spin"
    block = "block"
    lean = "lean"


def _opt(*names: str, help: str, metavar: str | None = None) -> Any:
    return typer.Option(*names, help=help, metavar=metavar)


Targets = Annotated[Optional[list[str]], typer.Argument(
    help="one or more targets of one protocol: synthetic://, memcached://, memcached+binary://, memcached+udp://, "
         "redis://, http://host:port/path, udp://host:port?size=N, udp+flow://host:port (packet mode: flows of "
         "sequenced datagrams through a reflector); over TLS: https://host[:port]/path, memcached+tls://, "
         "redis+tls://, synthetic+tls:// (any TCP protocol +tls); none: the built-in server on 127.0.0.1",
    metavar="TARGET", show_default=False)]
Workload = Annotated[Optional[str], _opt(
    "--workload", metavar="FILE",
    help="TOML file with any of these settings (examples/workload.toml); flags given here win")]
Rate = Annotated[Optional[str], _opt(
    "--rate", "-R", metavar="RATE", help=f"offered load, requests per second (5000, 50k, 1.5M) {default('rate')}")]
Percentile = Annotated[Optional[float], _opt(
    "--percentile", metavar="P",
    help=f"the percentile whose confidence interval must meet --ci {default('percentile')}")]
Percentiles = Annotated[Optional[str], _opt(
    "--percentiles", metavar="P,P,…",
    help="the percentiles to report, each with its CI, e.g. 50,95,99,99.9 (--percentile and those of "
         f"--threshold/--slo are added) [default: {','.join(map(shown, DEFAULT_PERCENTILES))}]")]
Ci = Annotated[Optional[str], _opt(
    "--ci", metavar="WIDTH",
    help="widest acceptable CI of that percentile: a time (10us) or a share of its value (5%); none with "
         f"--duration [default: {DEFAULT_CI}]")]
Confidence = Annotated[Optional[float], _opt(
    "--confidence", metavar="LEVEL", help=f"confidence level of the percentile intervals {default('confidence')}")]
MaxTime = Annotated[Optional[str], _opt(
    "--max-time", metavar="TIME",
    help=f"the longest the coordinator may measure before it concludes {default('max_time')}")]
Duration = Annotated[Optional[str], _opt(
    "--duration", "-d", metavar="TIME",
    help="fixed-length mode: send for exactly this long (3, 500ms, 2m); checks still reported")]
Threads = Annotated[Optional[int], _opt(
    "--threads", "-t", metavar="N", help=f"engine threads, one CPU each {default('threads')}")]
_CONNS = "connections in all, spread over the threads and targets"
_OUTSTANDING = "requests in flight per connection, at most"
# A sweep sizes the window itself (sweep/search.py's size_window: ASSUMED_RESPONSE_NS, LITTLE_HEADROOM).
_SIZED = ("; a sweep sizes conns × outstanding to hold the top of --rates × 500 µs × 2 (Little's law) when not "
          "given, and refuses a given window that cannot")
Conns = Annotated[Optional[int], _opt("--conns", "-c", metavar="N", help=f"{_CONNS} {default('conns')}")]
SweepConns = Annotated[Optional[int], _opt("--conns", "-c", metavar="N", help=f"{_CONNS}{_SIZED} {default('conns')}")]
Outstanding = Annotated[Optional[int], _opt(
    "--outstanding", metavar="N", help=f"{_OUTSTANDING} {default('outstanding')}")]
SweepOutstanding = Annotated[Optional[int], _opt(
    "--outstanding", metavar="N", help=f"{_OUTSTANDING}{_SIZED} {default('outstanding')}")]
Arrival = Annotated[Optional[str], _opt(
    "--arrival", metavar="PROCESS",
    help=f"inter-arrival process: exp (Poisson), fixed, uniform, lognormal:SIGMA {default('arrival')}")]
Keys = Annotated[Optional[int], _opt(
    "--keys", metavar="N", help=f"memcached/redis: number of distinct keys {default('keys')}")]
KeySize = Annotated[Optional[str], _opt(
    "--key-size", metavar="SIZES",
    help=f"key sizes in bytes: 30, uniform:10:60, gev:LOC:SCALE:SHAPE, etc or usr (Facebook) {default('key_size')}")]
ValueSize = Annotated[Optional[str], _opt(
    "--value-size", "--value", metavar="SIZES",
    help="value sizes of sets in bytes: 200, uniform:MIN:MAX, gpareto:LOC:SCALE:SHAPE, etc or usr "
         f"{default('value_size')}")]
Popularity = Annotated[Optional[str], _opt(
    "--popularity", metavar="DIST", help=f"key popularity: uniform or zipf:S {default('popularity')}")]
Mix = Annotated[Optional[str], _opt(
    "--mix", metavar="GET:SET",
    help="gets to sets: GET:SET (9:1 is nine gets per set) or by name, get=9,set=1 — GET:SET, the reverse of "
         f"memtier's --ratio SET:GET (1:9) {default('mix', 'gets only')}")]
Service = Annotated[Optional[str], _opt(
    "--service", metavar="DIST",
    help="service time: the built-in server's distribution; with a synthetic:// target only fixed:T, carried in "
         f"each request [default: {BUILTIN_SERVICE} for the built-in server]")]
Workers = Annotated[Optional[int], _opt(
    "--workers", metavar="N", help=f"built-in server worker threads {default('workers')}")]
SampleEvery = Annotated[Optional[int], _opt(
    "--sample-every", metavar="N",
    help="engine keeps a random 1 in K requests raw; the methodology thins further [default: as many as keeps "
         f"≤ {AUTO_SAMPLES_PER_S // 1000}k samples/s]")]
Timeout = Annotated[Optional[str], _opt(
    "--timeout", metavar="TIME", help=f"a request unanswered this long is a timeout {default('timeout')}")]
Late = Annotated[Optional[str], _opt(
    "--late", metavar="TIME",
    help=f"a request sent this long after its intended time counts as late {default('late')}")]
PollOption = Annotated[Optional[Poll], _opt(
    "--poll", metavar="|".join(p.value for p in Poll),
    help=f"block: sleep until each send less the measured wake-up lateness; lean: block, and a reply whose kernel "
         f"stamp is exact however late it is read waits for the next send's wake-up (one sleep a request, less CPU; "
         f"the built-in server's median round trip measured ~3 µs longer); spin: busy-poll, one core per thread (use it "
         f"with --timestamps user) {default('poll')}")]
Timestamps = Annotated[Optional[str], _opt(
    "--timestamps", metavar="SOURCE",
    help="where send and reply times come from: auto (the best available), nic (hardware), kernel (software stamps "
         f"of each send and arrival), user (the clock around the system calls) {default('timestamps')}")]
Probe = Annotated[Optional[bool], _opt(
    "--probe/--no-probe",
    help="time only a latency probe's requests (a thread of its own, --probe-conns connections with one request "
         "outstanding each, Poisson at --probe-rate, spinning) while the --rate load only loads: prefer it with many "
         f"load threads or a busy client {default_switch('probe', '--probe', '--no-probe')}")]
ProbeConns = Annotated[Optional[int], _opt(
    "--probe-conns", metavar="N", help=f"the probe's connections {default('probe_conns')}")]
ProbeRate = Annotated[Optional[str], _opt(
    "--probe-rate", metavar="RATE", help=f"the probe's rate, on top of --rate {default('probe_rate')}")]
Size = Annotated[Optional[int], _opt(
    "--size", metavar="BYTES",
    help=f"udp+flow:// only: each packet's Ethernet frame size, {_core.PACKET_SIZE_MIN}–{_core.PACKET_SIZE_MAX} "
         f"(UDP payload = size − 46 over IPv4; bits/s count frame bits) [default: {_core.PACKET_SIZE}]")]
Flows = Annotated[Optional[int], _opt(
    "--flows", metavar="N",
    help=f"udp+flow:// only: UDP flows (one socket and source port each), spread over the threads, at most "
         f"{_core.PACKET_FLOWS_MAX} [default: {_core.PACKET_FLOWS}]")]
MaxLoss = Annotated[Optional[float], _opt(
    "--max-loss", metavar="RATIO",
    help=f"udp+flow:// only: the loss check fails above this share of packets lost {default('max_loss', '0.1 %')}")]
_HTTP_ONLY = "http:// only"
Method = Annotated[Optional[str], _opt(
    "--method", "-X", metavar="METHOD", help=f"{_HTTP_ONLY}: the request's method, sent as written [default: GET]")]
Header = Annotated[Optional[list[str]], _opt(
    "--header", "-H", metavar="'NAME: VALUE'",
    help=f"{_HTTP_ONLY}: a header field of every request (repeatable); Host replaces the target's; Content-Length is "
         "tailwise's, from the body")]
Body = Annotated[Optional[str], _opt("--body", metavar="TEXT", help=f"{_HTTP_ONLY}: the request's body (Content-Length set)")]
BodyFile = Annotated[Optional[str], _opt(
    "--body-file", metavar="FILE", help=f"{_HTTP_ONLY}: the request's body, this file's bytes (Content-Length set)")]
RequestsFile = Annotated[Optional[str], _opt(
    "--requests-file", metavar="FILE",
    help=f"{_HTTP_ONLY}: several requests, in vegeta's targets format (METHOD URL, header lines, @BODY-FILE, a blank "
         "line between requests; '# weight: N' before a request line weights it): drawn in turn, or by weight when "
         "any has one; without TARGET, the URLs give it (docs/run.md)")]
RedisPasswordFile = Annotated[Optional[str], _opt(
    "--redis-password-file", metavar="FILE",
    help="redis:// only: the password (AUTH) from this file's one line, when the URL gives none; else "
         "TAILWISE_REDIS_PASSWORD; never printed (docs/run.md)")]
_TLS_ONLY = "https://, …+tls:// only"
TlsCa = Annotated[Optional[str], _opt(
    "--tls-ca", metavar="FILE", help=f"{_TLS_ONLY}: trust these CA certificates (PEM) [default: the system's roots]")]
TlsInsecure = Annotated[Optional[bool], _opt(
    "--tls-insecure", help=f"{_TLS_ONLY}: do not verify the server's certificate at all (anyone in the path can "
                           "read and change the traffic)")]
TlsCert = Annotated[Optional[str], _opt(
    "--tls-cert", metavar="FILE", help=f"{_TLS_ONLY}: a client certificate (PEM), with --tls-key, for servers that "
                                       "ask for one")]
TlsKey = Annotated[Optional[str], _opt(
    "--tls-key", metavar="FILE", help=f"{_TLS_ONLY}: the private key (PEM) of --tls-cert; its name is recorded, "
                                      "never its contents")]
TlsSni = Annotated[Optional[str], _opt(
    "--tls-sni", metavar="NAME", help=f"{_TLS_ONLY}: the server name sent and verified [default: the target's host "
                                      "name; none for an IP address]")]
TlsNoResume = Annotated[Optional[bool], _opt(
    "--tls-no-resume", help=f"{_TLS_ONLY}: a full handshake on every reconnect (no session tickets or ids)")]
#: The --tls-* settings (spec/tls.py), named as the flags: run, sweep and load take them all.
TLS_SETTINGS = ("tls_ca", "tls_insecure", "tls_cert", "tls_key", "tls_sni", "tls_no_resume")
Pin = Annotated[Optional[bool], _opt(
    "--pin/--no-pin",
    help=f"pin engine threads (and built-in server workers) to CPUs {default_switch('pin', '--pin', '--no-pin')}")]
Warmup = Annotated[Optional[str], _opt(
    "--warmup", metavar="TIME",
    help="leading span left out of the statistics (reported with its own p99); whole 100 ms intervals, at most 10% "
         f"of the run {default('warmup')}")]
KeepStalls = Annotated[Optional[bool], _opt(
    "--keep-stalls/--bound-stalls",
    help="take the requests that stalls (≥ 200 µs) of tailwise's engine threads delayed as measured, instead of as "
         "intervals down to what the target can be shown to have taken "
         f"{default_switch('keep_stalls', '--keep-stalls', '--bound-stalls')}")]
Bounds = Annotated[Optional[str], _opt(
    "--bounds", metavar="RULE",
    help="how a request tailwise's own stalls delayed is bounded below: busy — its measured latency less the "
         "client's stall time since the client last had nothing outstanding (sound for targets that serve each "
         "connection in order); floor — the run's least latency (looser; for processor-sharing, priority or "
         f"reordering targets) {default('bounds')}")]
Seed = Annotated[Optional[int], _opt(
    "--seed", metavar="N",
    help="random seed of schedules, sampling and statistics [default: random, recorded in the summary]")]
Thresholds = Annotated[Optional[list[str]], _opt(
    "--threshold", metavar="LIMIT",
    help="gate a CI job: 'p99<200us' (repeatable) passes only when the percentile's whole CI meets it; a failed or "
         "inconclusive one exits 3")]
Quiet = Annotated[bool, typer.Option(
    "--quiet", "-q", help="print only the result: no live line, no 'measuring', round or warning lines")]
Verbose = Annotated[bool, typer.Option(
    "--verbose", "-v",
    help="the result with every check's figures, the warm-up, the stalls and the server's own counts")]
Agents = Annotated[Optional[list[str]], _opt(
    "--agents", metavar="HOST:PORT,…",
    help="run the load on these `tailwise agent`s (rate and connections split over them by their threads); each "
         "measures too, unless --probe-agent is given; none: this process")]
ProbeAgent = Annotated[Optional[str], _opt(
    "--probe-agent", metavar="HOST:PORT",
    help="the agent that runs the latency probe (--probe-conns, --probe-rate) while the --agents only load")]
TokenFile = Annotated[Optional[str], _opt(
    "--token-file", metavar="FILE", help="the agents' shared token (the file each `tailwise agent` was given)")]
AgentTlsCa = Annotated[Optional[str], _opt(
    "--agent-tls-ca", metavar="FILE",
    help="talk TLS to the agents, trusting this CA certificate (PEM); needed for agents not on loopback unless "
         "--insecure-plaintext")]
AgentTlsCert = Annotated[Optional[str], _opt(
    "--agent-tls-cert", metavar="FILE",
    help="this coordinator's certificate (PEM), with --agent-tls-key, for agents started with --tls-client-ca")]
AgentTlsKey = Annotated[Optional[str], _opt(
    "--agent-tls-key", metavar="FILE", help="the private key (PEM, mode 0600) of --agent-tls-cert")]
InsecurePlaintext = Annotated[Optional[bool], _opt(
    "--insecure-plaintext", help="talk to agents not on loopback without TLS: the token and the run cross the "
                                 "network in the clear")]
RunOut = Annotated[Optional[str], _opt(
    "--out", metavar="DIR",
    help="write the results directory here: summary.json, samples, .hgrm, histograms, interval log, config and host "
         "(docs/results.md); a directory that already holds results is refused unless --force")]
SweepOut = Annotated[Optional[str], _opt(
    "--out", metavar="DIR",
    help="the sweep's directory (docs/results.md): summary.json, config, host and one results directory per point; "
         f"one that already holds results is refused unless --force [default: ./{SWEEP_OUT.format(time='DATE-TIME')}]")]
SamplesFormat = Annotated[Optional[str], _opt(
    "--samples-format", metavar="FORMAT", help=f"raw samples file format: csv or parquet {default('samples_format')}")]
Force = Annotated[bool, typer.Option(
    "--force",
    help="replace whole the results already in --out (summary, samples, histograms, logs, report, plots, points/); "
         "without it such a directory is refused")]
Json = Annotated[bool, typer.Option("--json", help="print the summary JSON on stdout instead of the table")]
Rates = Annotated[Optional[str], _opt(
    "--rates", metavar="RATES", help="the loads: START:STOP:N (e.g. 10k:400k:12) or a list, 10k,20k,50k")]
Steps = Annotated[Optional[str], _opt(
    "--steps", metavar="SPACING", help=f"spacing of START:STOP:N: linear or log {default('steps')}")]
Slo = Annotated[Optional[str], _opt(
    "--slo", metavar="LIMIT",
    help="search (bisection on the CIs) for the highest load whose percentile meets this, e.g. 'p99<200us'")]
Resume = Annotated[Optional[str], _opt(
    "--resume", metavar="DIR",
    help="continue the sweep in this directory (a killed or interrupted one), with its own settings")]
