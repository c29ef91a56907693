"""How the command line presents itself to someone who knows the peers: `tailwise --help`'s commands
in a fixed order, each description whole, and a flag a peer has (wrk2, mutilate, memtier_benchmark,
hyperfine) but tailwise spells otherwise answered with tailwise's own.

`PEER_FLAGS` is the one table of those flags. main.py asks `peer_flag` when click refuses an option
(`NoSuchOption`), so a flag is looked up only once click has found it unknown to the command.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

from typer.core import TyperGroup

# typer 0.29 vendors its own click (pinned, as in main.py).
from typer._click.exceptions import NoSuchOption

#: `tailwise --help`'s order: measure, read the results, check the host, the helpers around a
#: measurement, the agents; the version last. A command not named here comes after, as registered.
ORDER = ("run", "sweep", "report", "compare", "doctor", "calibrate", "load", "serve", "model", "agent", "deploy",
         "version")


class Commands(TyperGroup):
    """A command group whose help lists its commands in `ORDER`, each description whole (click cuts
    a command's first sentence at ~45 characters with "...")."""

    def list_commands(self, ctx) -> list[str]:
        rank = {name: i for i, name in enumerate(ORDER)}
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: (rank.get(n, len(ORDER)), names.index(n)))

    def format_commands(self, ctx, formatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=sys.maxsize)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class PeerFlag(NamedTuple):
    """A peer's flag: tailwise's that does the same (its long name, or the first of several the
    command has; TARGET: the target argument), and what differs or who uses it."""

    theirs: str | tuple[str, ...]
    note: str = ""


#: A peer's flag → tailwise's. Only flags the command does not have are looked up: wrk2's -c, -t, -d,
#: -R (and --threads, --duration, --rate, --timeout, --warmup) are tailwise's own.
PEER_FLAGS: dict[str, PeerFlag] = {
    # memtier_benchmark
    "--ratio": PeerFlag("--mix", "memtier's --ratio is SET:GET"),
    "--clients": PeerFlag("--conns", "memtier's --clients is per thread; --conns counts them all"),
    "--pipeline": PeerFlag("--outstanding", "memtier's --pipeline"),
    "--test-time": PeerFlag("--duration", "memtier's --test-time"),
    "--requests": PeerFlag("--duration", "memtier's --requests: tailwise sends for a time, or until the CI is narrow"),
    "-n": PeerFlag("--duration", "memtier's -n: tailwise sends for a time, or until the CI is narrow"),
    "--rate-limiting": PeerFlag(("--rate", "--rates"),
                                "memtier's --rate-limiting is per connection; tailwise's is in all"),
    "--key-maximum": PeerFlag("--keys", "memtier's --key-maximum"),
    "--key-pattern": PeerFlag("--popularity", "memtier's --key-pattern"),
    "--data-size": PeerFlag("--value-size", "memtier's --data-size"),
    "--print-percentiles": PeerFlag("--percentiles", "memtier's --print-percentiles"),
    "--json-out-file": PeerFlag("--out", "the summary.json in it; --json prints it"),
    "--server": PeerFlag("TARGET", "e.g. memcached://HOST:PORT"),
    "-s": PeerFlag("TARGET", "e.g. memcached://HOST:PORT"),
    "--port": PeerFlag("TARGET", "e.g. memcached://HOST:PORT"),
    "-p": PeerFlag("TARGET", "e.g. memcached://HOST:PORT"),
    "--protocol": PeerFlag("TARGET", "its scheme: memcached://, memcached+binary://, redis://, …"),
    "-P": PeerFlag("TARGET", "its scheme: memcached://, memcached+binary://, redis://, …"),
    "--authenticate": PeerFlag("--redis-password-file",
                               "memtier's --authenticate: the password in the URL, redis://[USER]:PASSWORD@HOST:PORT, "
                               "from a file, or TAILWISE_REDIS_PASSWORD"),
    "--select-db": PeerFlag("TARGET", "memtier's --select-db N: redis://HOST:PORT/N"),
    # mutilate (its -q is --qps, but tailwise's -q is --quiet; its -t is --time, but tailwise's is wrk2's)
    "--qps": PeerFlag(("--rate", "--rates"), "mutilate's --qps"),
    "--measure_qps": PeerFlag("--probe-rate", "mutilate's --measure_qps, with --probe"),
    "-Q": PeerFlag("--probe-rate", "mutilate's -Q, the measuring connections' rate, with --probe"),
    "--measure_connections": PeerFlag("--probe-conns", "mutilate's --measure_connections, with --probe"),
    "-C": PeerFlag("--probe-conns", "mutilate's -C, with --probe"),
    "--connections": PeerFlag("--conns", "wrk's --connections; mutilate's is per thread, --conns counts them all"),
    "--depth": PeerFlag("--outstanding", "mutilate's --depth"),
    "--time": PeerFlag("--duration", "mutilate's --time; tailwise's -t is --threads, as wrk2's"),
    "-T": PeerFlag("--threads", "mutilate's -T; tailwise's -t is --threads, as wrk2's"),
    "--update": PeerFlag("--mix", "mutilate's --update is the share of sets: --update 0.1 is --mix get=9,set=1"),
    "-u": PeerFlag("--mix", "mutilate's -u is the share of sets: -u 0.1 is --mix get=9,set=1"),
    "--keysize": PeerFlag("--key-size", "mutilate's --keysize"),
    "-K": PeerFlag("--key-size", "mutilate's -K"),
    "--valuesize": PeerFlag("--value-size", "mutilate's --valuesize"),
    "-V": PeerFlag("--value-size", "mutilate's -V"),
    "--records": PeerFlag("--keys", "mutilate's --records"),
    "-r": PeerFlag("--keys", "mutilate's -r"),
    "--iadist": PeerFlag("--arrival", "mutilate's --iadist"),
    "-i": PeerFlag("--arrival", "mutilate's -i"),
    "--affinity": PeerFlag("--pin", "mutilate's --affinity; tailwise pins by default"),
    "--agent": PeerFlag("--agents", "mutilate's --agent"),
    "-a": PeerFlag("--agents", "mutilate's -a"),
    "--save": PeerFlag("--out", "the raw samples in it"),
    # wrk, wrk2 (-R is run's --rate; a sweep offers a series of loads)
    "-R": PeerFlag("--rates", "wrk2's -R is one rate; a sweep offers several"),
    "--latency": PeerFlag("--percentiles", "tailwise always prints the latency distribution; wrk asks for it"),
    # hyperfine
    "--runs": PeerFlag("--ci", "tailwise measures until the percentile's CI is this narrow, or for --duration"),
    "--min-runs": PeerFlag("--ci", "tailwise measures until the percentile's CI is this narrow, or for --duration"),
    "--export-json": PeerFlag("--out", "the summary.json in it; --json prints it"),
}


def _flag_text(command, theirs: str | tuple[str, ...]) -> str | None:
    """How the first of ``theirs`` the command has is written in --help (``-c/--conns N``, ``the
    TARGET argument``); None when it has none of them."""
    for long in (theirs,) if isinstance(theirs, str) else theirs:
        text = _one_flag_text(command, long)
        if text:
            return text
    return None


def _one_flag_text(command, long: str) -> str | None:
    for param in command.params:
        if long == "TARGET" and param.param_type_name == "argument" and param.name in ("target", "targets"):
            return "the TARGET argument"
        if long in getattr(param, "opts", ()) and param.param_type_name == "option":
            names = sorted(param.opts, key=lambda o: (len(o) > 2, param.opts.index(o)))
            metavar = "" if param.is_flag else f" {param.metavar}" if param.metavar else ""
            return "/".join(names) + metavar
    return None


def peer_flag(error: NoSuchOption) -> str | None:
    """"no --ratio here: tailwise's is --mix GET:SET (memtier's --ratio is SET:GET)" for an option
    click refused that a peer uses, when the command has tailwise's; None otherwise."""
    peer = PEER_FLAGS.get(error.option_name)
    command = error.ctx.command if error.ctx is not None else None
    theirs = _flag_text(command, peer.theirs) if peer and command is not None else None
    if theirs is None:
        return None
    return f"no {error.option_name} here: tailwise's is {theirs}" + (f" ({peer.note})" if peer.note else "")
