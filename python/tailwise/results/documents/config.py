"""What a run asked and where it ran (documents/run.py, ``Summary``): ``Config`` and its resolved
settings (``Spec``), and the host measured from with its sources of jitter (``Host``, ``Knob``:
also `tailwise doctor`'s document, documents/doctor.py).
"""

from __future__ import annotations

from typing import Literal

from tailwise.results.documents.base import Doc, F, Int, Num

class BuiltinServer(Doc):
    service: str = F(description="Its service-time distribution (fixed:10us).")
    workers: Int = F(minimum=1)
    busy_poll: bool = F(None, description="Its workers busy-polled (each spinning thread had a CPU of its own).")


class Workload(Doc):
    keys: Int = F(minimum=1)
    key_size: str
    value_size: str
    popularity: str
    set_fraction: Num = F(minimum=0, maximum=1)
    mean_key_bytes: Num
    mean_value_bytes: Num


class ProbeSettings(Doc):
    conns: Int
    rate_rps: Num


class Spec(Doc):
    """The resolved settings (flags over the workload file over the defaults), named as the flags with _ for -: what `tailwise sweep --resume` and RunSpec.from_json read back. Values are as given: a time or a rate may be a string with its unit ("20k", "1s") or a plain number."""

    targets: list[str] | None
    rate: str | Num
    arrival: str
    threads: Int
    conns: Int
    outstanding: Int
    keys: Int
    key_size: str | Int
    value_size: str | Int
    popularity: str
    mix: str
    percentile: Num
    percentiles: str | list | None = F(None, description="--percentiles as given (null: the defaults) or, once resolved, the list reported.")
    ci: str | Num | None
    confidence: Num
    max_time: str | Num
    duration: str | Num | None
    timeout: str | Num
    late: str | Num
    warmup: str | Num
    poll: Literal["spin", "block", "lean"]
    timestamps: Literal["auto", "nic", "kernel", "user"]
    sample_every: Int | None
    seed: Int = F(description="Always set: the seed chosen when none was given.")
    service: str | None
    workers: Int
    probe: bool
    probe_conns: Int
    probe_rate: str | Num
    pin: bool = None
    keep_stalls: bool = None
    bounds: Literal["busy", "floor"] = F(None, description="--bounds: how a request tailwise delayed is bounded below (busy: its measured latency less the client's stall time in its busy period; floor: the run's least latency). Added by issue 32.")
    workload_file: str | None = None
    size: Int | None = F(None, description="--size (udp+flow://); null: the default.")
    flows: Int | None = F(None, description="--flows (udp+flow://); null: the default.")
    max_loss: Num = F(None, description="--max-loss (udp+flow://).")
    method: str | None = F(None, description="--method (http://); null: GET. Added by issue 36.")
    header: list[str] | None = F(None, description="--header, each 'Name: value' (http://). Added by issue 36.")
    body: str | None = F(None, description="--body (http://). Added by issue 36.")
    body_file: str | None = F(None, description="--body-file (http://). Added by issue 36.")
    requests_file: str | None = F(None, description="--requests-file: a requests file in vegeta's targets format (http://). Added by issue 36.")
    redis_password_file: str | None = F(None, description="--redis-password-file: the file the redis password was read from (redis://; the password itself is never written, and a target's URL shows it as ***). Added by issue 36.")
    tls_ca: str | None = F(None, description="--tls-ca: the CA certificates (PEM) trusted for the target, as a path; null: the system's roots. Added by issue 36.")
    tls_insecure: bool | None = F(None, description="--tls-insecure: the target's certificate not verified (null: not given, off). Added by issue 36.")
    tls_cert: str | None = F(None, description="--tls-cert: the client certificate's path (PEM). Added by issue 36.")
    tls_key: str | None = F(None, description="--tls-key: the client key's path — its name only, never its contents. Added by issue 36.")
    tls_sni: str | None = F(None, description="--tls-sni: the server name sent; null: the target's host name. Added by issue 36.")
    tls_no_resume: bool | None = F(None, description="--tls-no-resume: no session resumption on reconnects (null: not given, off). Added by issue 36.")


class PacketSettings(Doc):
    """Packet mode's settings (udp+flow://)."""

    size_bytes: Int = F(description="--size: the Ethernet frame size.", minimum=64)
    flows: Int = F(description="--flows.", minimum=1)
    max_loss: Num = F(description="--max-loss.", minimum=0)


class TlsSettings(Doc):
    """TLS to the target as the engine was configured (its ``tls``): files by their paths, never their contents."""

    ca_file: str | None = F(description="The CA certificates trusted (--tls-ca); null: the system's roots (or nothing verified with insecure).")
    insecure: bool = F(description="--tls-insecure: the server's certificate was not verified.")
    cert_file: str | None = F(description="The client certificate (--tls-cert); null: none.")
    key_file: str | None = F(description="The client key's path (--tls-key); null: none.")
    sni: str | None = F(description="The server name sent in the ClientHello and verified (RFC 6066 §3); null for an IP target without --tls-sni.")
    alpn: list[str] = F(description="The ALPN protocols offered (RFC 7301): [\"http/1.1\"] for https://, none otherwise.")
    resume: bool = F(description="Whether reconnects resume the session (false with --tls-no-resume).")


class Config(Doc):
    """What was asked, in the units the tool uses (also the run directory's config.json). spec holds the resolved settings, named as the flags, that parse back to the same run."""

    model_config = {"json_schema_extra": {"if": {"properties": {"mode": {"const": "fixed"}}},
                                          "then": {"properties": {"duration_s": {"type": "number"}}},
                                          "else": {"properties": {"duration_s": {"type": "null"}}}}}
    command: str = F(description="The command line as given.")
    workload_file: str | None = F(description="--workload, or null.")
    target: str | None = F(description="The first target's URL; null for the built-in server.")
    targets: list[str] = F(description="Every target's URL (empty for the built-in server).")
    protocol: Literal["synthetic", "memcached", "memcached+binary", "memcached+udp", "redis", "http", "udp", "udp+flow"]
    builtin_server: BuiltinServer | None = F(description="The built-in server started for the run; null with a target.")
    rate_rps: Num = F(description="--rate.", minimum=0)
    mode: Literal["fixed", "adaptive"]
    duration_s: Num | None = F(description="--duration (fixed mode); null in adaptive mode.")
    percentile: Num = F(description="--percentile: the percentile whose CI must meet --ci.", exclusiveMinimum=0, exclusiveMaximum=100)
    percentiles: list[Num] = F(None, description="The percentiles reported (--percentiles, with --percentile and every --threshold's/--slo's added), ascending; absent in summaries written before it existed.")
    ci_ns: Num | None = F(description="--ci as a time; null when relative or not given.")
    ci_rel: Num | None = F(description="--ci as a share of the value (0.1 = 10 %); null when a time or not given.")
    confidence: Num = F(exclusiveMinimum=0, exclusiveMaximum=1)
    max_time_s: Num = F(exclusiveMinimum=0)
    threads: Int = F(minimum=1)
    conns: Int = F(minimum=1)
    outstanding: Int = F(minimum=1)
    arrival: str = F(description="Inter-arrival process: exp, fixed, uniform, lognormal:SIGMA.")
    workload: Workload | None = F(description="Keys and values (memcached, redis); null for other protocols.")
    service: str | None = F(description="Service time: the built-in server's distribution, or the fixed time carried in each request to a synthetic:// target; null otherwise.")
    sample_every: Int = F(minimum=1)
    timeout_ns: Int = F(minimum=1)
    late_ns: Int = F(minimum=0)
    warmup_ns: Int = F(minimum=0)
    poll: Literal["spin", "block", "lean"]
    probe: ProbeSettings | None = F(description="The latency probe's settings; null without --probe.")
    packet: PacketSettings | None = F(None, description="Packet mode's settings (udp+flow://); null for other protocols; absent in summaries written before it existed.")
    timestamps: Literal["nic", "kernel", "user"] = F(description="The timestamp source used (--timestamps decided for the target's interface).")
    timestamps_note: str | None
    pin: bool
    keep_stalls: bool
    bounds: Literal["busy", "floor"] = F(None, description="--bounds (see delayed.rule). Added by issue 32.")
    seed: Int = F(description="The random seed (chosen when not given).")
    tls: TlsSettings | None = F(None, description="TLS to the target (https://, …+tls://) as the engine was configured; null in the clear; absent in summaries written before issue 36.")
    spec: Spec


KNOB_STATES = ("ok", "warn", "unreadable", "not-applicable")


class Knob(Doc):
    """One of the host's sources of jitter as `tailwise doctor` read it (python/tailwise/host/doctor.py, one class per knob): what it read, whether that is fine for the tail, why it matters and the command that would fix it. A file that is missing or unreadable makes the knob unreadable with the reason, never ok."""

    name: str = F(description="The knob: governor, cstates, turbo, smt, isolation, nic-numa, thp, coalescing, irq-affinity, busy-poll, clocksource, steal, other-load (later versions may add knobs).", minLength=1)
    state: Literal[KNOB_STATES] = F(description="ok: fine for the tail; warn: it can move the tail (detail says how, fix what to do); unreadable: a file or system call could not be read (detail says which and why); not-applicable: it does not apply here (detail says why: a loopback target has no NIC, one NUMA node no remote one).")
    value: str = F(description="What it read, in a few words.")
    detail: str | None = F(description="warn: what is wrong; unreadable: why it could not be read; not-applicable: why not; else null or a note.")
    why: str = F(description="Why the knob matters for the tail, in one line, with its source (KBNets'17 §3/§4.2, Lancet §5, pyperf's system tune).")
    fix: str | None = F(description="The command that would set the tail-friendly value; null when it has it already or nothing was read.")
    source: str = F(description="The files or system calls read (under / on the machine).")
    readings: dict = F(description="The figures read, by name (per CPU keyed by the CPU's number); empty when nothing was read.")


class Host(Doc):
    """The machine measured from (also the directory's host.json)."""

    hostname: str
    kernel: str = F(description="Kernel release (uname -r).")
    cpu_model: str | None
    cores: Int | None = F(description="CPUs of the machine.", minimum=1)
    usable_cores: Int = F(description="CPUs this process may run on (its affinity).", minimum=1)
    clocksource: str | None = F(description="The kernel's clock source (tsc, kvm-clock, ...).")
    python: str
    knobs: list[Knob] = F(None, description="The host's sources of jitter as `tailwise doctor` reads them, one entry per knob, read before the run (run and sweep; not in tailwise calibrate's document).")
