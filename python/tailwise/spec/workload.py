"""Workload and experiment specs: command-line flags over a TOML workload file over defaults.

A workload file (``--workload FILE``, see ``examples/workload.toml``) holds the same settings as
the flags of ``tailwise run``, named exactly as the flags with ``_`` for ``-``: ``targets``,
``rate``, ``keys``, ``key_size``, ``value_size`` (or ``value``, as ``--value``), ``popularity``,
``mix``, ``conns``, … A flag given on the command line wins over the file; what neither gives takes
the default below. Unknown names in the file are an error naming the closest valid one (a typo
must not silently measure another workload).
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailwise import _core
from tailwise.errors import InputError

#: The engine's own defaults (EngineConfig::default, crates/tailwise-core/src/engine/config.rs):
#: the settings below that the engine takes are read from there, not written again.
_ENGINE: dict[str, Any] = _core.ENGINE_DEFAULTS
_WORKLOAD: dict[str, Any] = _ENGINE["workload"]


def _as_setting(ns: int) -> str:
    """A time as the command line writes it, in the largest unit that holds it whole (``1s``)."""
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns and ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns}ns"


#: The precision asked of the percentile without --ci, unless --duration fixes the run's length
#: (DEFAULTS' "ci" is None: not given).
DEFAULT_CI = "10%"

#: Every setting of a measurement a workload file may hold, with its default (None: no default,
#: or computed).
DEFAULTS: dict[str, Any] = {
    "targets": None,
    "rate": "10k",
    "arrival": _ENGINE["arrival"],
    "threads": _ENGINE["threads"],
    "conns": _ENGINE["conns"],
    "outstanding": _ENGINE["outstanding"],
    "keys": _WORKLOAD["keys"],
    "key_size": _WORKLOAD["key_size"],
    "value_size": _WORKLOAD["value_size"],
    "popularity": _WORKLOAD["popularity"],
    "mix": "1:0",  # the engine's set_fraction, 0 (tests/unit/test_spec.py holds them together)
    "percentile": 99.0,
    "percentiles": None,  # DEFAULT_PERCENTILES
    "ci": None,  # not given: DEFAULT_CI in adaptive mode, none with --duration
    "confidence": 0.95,
    "max_time": "60s",
    "duration": None,
    "timeout": _as_setting(_ENGINE["timeout_ns"]),
    "late": _as_setting(_ENGINE["late_ns"]),
    "warmup": "100ms",
    "poll": "spin" if _ENGINE["busy_poll"] else "block",
    "timestamps": "auto",
    "sample_every": None,
    "seed": None,
    "service": None,
    "workers": 1,
    # The latency probe (Lancet's latency agent): off, or its connections and rate when on.
    "probe": False,
    "probe_conns": 4,
    "probe_rate": "2k",
    "pin": _ENGINE["pin"],
    "keep_stalls": False,
    # The lower bound of a request tailwise delayed (stats/bounds.py): "busy" (the stall time in its
    # busy period, for targets that serve each connection in order) or "floor" (the run's floor).
    "bounds": "busy",
    # Packet mode (udp+flow://): the Ethernet frame size and the flows (None: the protocol's
    # defaults, _core.PACKET_SIZE and PACKET_FLOWS), and the loss ratio the loss check allows.
    "size": None,
    "flows": None,
    "max_loss": 0.001,
    # http:// (spec/requests.py): one request's method, headers and body (None: GET, none, none),
    # or a requests file in vegeta's format.
    "method": None,
    "header": None,
    "body": None,
    "body_file": None,
    "requests_file": None,
    # redis:// (spec/target.py): a file holding the password, when the URL gives none.
    "redis_password_file": None,
    # TLS to the target (https://, …+tls://; spec/tls.py): the CA to trust (None: the system's),
    # no verification, a client certificate and key, the SNI name (None: the target's host name),
    # no session resumption (None: not given, i.e. off).
    "tls_ca": None,
    "tls_insecure": None,
    "tls_cert": None,
    "tls_key": None,
    "tls_sni": None,
    "tls_no_resume": None,
}

#: The settings of the commands around a measurement (what to judge, where to write, which loads
#: a sweep offers): a workload file may hold them too, and the flag wins as for the others.
COMMAND_DEFAULTS: dict[str, Any] = {
    "threshold": None,
    "out": None,
    "samples_format": "csv",
    "rates": None,
    "steps": "linear",
    "slo": None,
    # Where the load comes from (spec/fleet.py): the agents, a probe agent, their token, a CA.
    "agents": None,
    "probe_agent": None,
    "token_file": None,
    "agent_tls_ca": None,
    "agent_tls_cert": None,
    "agent_tls_key": None,
    "insecure_plaintext": None,
}

#: `tailwise load`'s requests in flight per connection: storing keys is a matter of throughput, not
#: of latency, so it pipelines far deeper than a run (DEFAULTS["outstanding"]); its connections are
#: a run's (DEFAULTS["conns"]).
LOAD_OUTSTANDING = 64

#: Other flag names of the same setting (``--value`` is ``--value-size``).
ALIASES = {"value": "value_size"}

_TYPES: dict[str, tuple[type, ...]] = {
    "targets": (list, str),
    "agents": (list, str),
    "rate": (str, int, float),
    "threads": (int,),
    "conns": (int,),
    "outstanding": (int,),
    "keys": (int,),
    "percentile": (int, float),
    "confidence": (float,),
    "sample_every": (int,),
    "seed": (int,),
    "workers": (int,),
    "probe": (bool,),
    "probe_conns": (int,),
    "probe_rate": (str, int, float),
    "percentiles": (str, list),
    "pin": (bool,),
    "keep_stalls": (bool,),
    "insecure_plaintext": (bool,),
    "tls_insecure": (bool,),
    "tls_no_resume": (bool,),
    "bounds": (str,),
    "size": (int,),
    "flows": (int,),
    "max_loss": (int, float),
    "threshold": (list, str),
    "header": (list, str),
    "key_size": (str, int),
    "value_size": (str, int),
    # Times: a string with its unit, or a plain number of seconds, as on the command line.
    **{name: (str, int, float) for name in ("max_time", "duration", "timeout", "late", "warmup", "ci")},
}


def load_file(path: str | None) -> dict[str, Any]:
    """Read a workload file; every problem is one InputError naming the file and the fix."""
    if path is None:
        return {}
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(f"workload file {path} does not exist", "give the path of a TOML file, e.g. examples/workload.toml") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read workload file {path} ({e})", "check the path and its permissions") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"workload file {path} is not valid TOML ({e})", "fix the line it names") from None
    for alias, name in ALIASES.items():
        if alias in data:
            if name in data:
                raise InputError(f"workload file {path} gives both {alias} and {name}", "keep one of them")
            data[name] = data.pop(alias)
    for name in data:
        if name not in DEFAULTS and name not in COMMAND_DEFAULTS:
            close = difflib.get_close_matches(name, [*DEFAULTS, *COMMAND_DEFAULTS, *ALIASES], n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}? " if close else ""
            raise InputError(f"workload file {path}: unknown setting {name}",
                             f"{hint}settings are the flags of `tailwise run` and `sweep` with _ for - "
                             f"({', '.join([*DEFAULTS, *COMMAND_DEFAULTS])})")
    for name, value in data.items():
        kinds = _TYPES.get(name, (str,))
        if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
            want = " or ".join({"int": "an integer", "str": "a string", "float": "a number", "list": "a list", "bool": "true or false"}[k.__name__] for k in kinds)
            example = {**DEFAULTS, **COMMAND_DEFAULTS, **EXAMPLES}[name]
            raise InputError(f"workload file {path}: {name} = {value!r} is not {want}", f"write e.g. {name} = {example!r}")
    for name in ("targets", "threshold", "header"):
        if isinstance(data.get(name), str):
            data[name] = [data[name]]
    if not all(isinstance(t, str) for t in data.get("threshold") or []):
        raise InputError(f"workload file {path}: threshold = {data['threshold']!r} is not a list of limits",
                         "write e.g. threshold = [\"p99<200us\", \"p99.9<1ms\"]")
    if not all(isinstance(t, str) for t in data.get("targets") or []):
        raise InputError(f"workload file {path}: targets = {data['targets']!r} is not a list of URLs",
                         'write e.g. targets = ["memcached://127.0.0.1:11211"]')
    return data


#: Examples for the settings whose default is None (in the error for a value of the wrong type).
EXAMPLES = {"percentiles": "50,95,99,99.9", "threshold": ["p99<200us"], "out": "results/run1", "rates": "10k:100k:10",
            "slo": "p99<200us", "ci": "10%", "duration": "10s", "sample_every": 5, "seed": 42, "service": "exp:10us",
            "targets": ["memcached://127.0.0.1:11211"], "agents": ["10.0.0.2:7100"], "probe_agent": "10.0.0.3:7100",
            "token_file": "/etc/tailwise/token", "agent_tls_ca": "ca.pem", "agent_tls_cert": "coordinator.pem",
            "agent_tls_key": "coordinator.key", "insecure_plaintext": False, "method": "POST",
            "header": ["Content-Type: application/json"], "body": '{"k": 1}', "body_file": "body.json",
            "requests_file": "targets.txt", "redis_password_file": "/etc/tailwise/redis.pass", "tls_ca": "ca.pem",
            "tls_cert": "client.pem", "tls_key": "client.key", "tls_sni": "www.example.com"}


def command_setting(name: str, flag: Any, file: dict[str, Any]) -> Any:
    """A command's own setting (COMMAND_DEFAULTS): the flag (not None) over the file over the default."""
    return flag if flag not in (None, []) else file.get(name, COMMAND_DEFAULTS[name])


def resolve(flags: dict[str, Any], file: dict[str, Any]) -> dict[str, Any]:
    """Flag (not None) over file over default, for every setting of a measurement."""
    out = {}
    for name, default in DEFAULTS.items():
        flag = flags.get(name)
        out[name] = flag if flag not in (None, []) else file.get(name, default)
    return out


def parse_mix(text: str) -> float:
    """The fraction of sets (0.1) of a get:set mix, written ``GET:SET`` (``9:1``: nine gets per
    set) or by name, which cannot be read backwards: ``get=9,set=1`` (either order; a part left out
    is 0). memtier's ``--ratio`` is SET:GET, the reverse of the first form."""
    s = str(text).strip()
    try:
        if "=" in s:
            parts: dict[str, float] = {}
            for item in s.split(","):
                name, sep, value = (x.strip() for x in item.partition("="))
                if not sep or name.lower() not in ("get", "set") or name.lower() in parts:
                    raise ValueError(item)
                parts[name.lower()] = float(value)
            gets, sets = parts.get("get", 0.0), parts.get("set", 0.0)
        else:
            gets, sets = (float(x) for x in s.split(":"))
    except ValueError:
        raise InputError(f"--mix {text} is not GET:SET nor get=N,set=N",
                         "write e.g. --mix 9:1 or --mix get=9,set=1 (nine gets per set; memtier's --ratio 1:9), "
                         "or --mix 1:0 (gets only)") from None
    if not (gets >= 0 and sets >= 0) or gets + sets <= 0 or gets + sets == float("inf"):
        raise InputError(f"--mix {text} needs non-negative finite parts, not both zero",
                         "write e.g. --mix 9:1 or --mix get=9,set=1")
    return sets / (gets + sets)


@dataclass(frozen=True)
class Workload:
    """The key/value shape of requests (memcached and Redis targets)."""

    keys: int = DEFAULTS["keys"]
    key_size: str = DEFAULTS["key_size"]
    value_size: str = DEFAULTS["value_size"]
    popularity: str = DEFAULTS["popularity"]
    set_fraction: float = _WORKLOAD["set_fraction"]

    @classmethod
    def from_settings(cls, s: dict[str, Any]) -> Workload:
        w = cls(keys=int(s["keys"]), key_size=str(s["key_size"]), value_size=str(s["value_size"]),
                popularity=str(s["popularity"]), set_fraction=parse_mix(s["mix"]))
        w.check()
        return w

    def check(self) -> tuple[float, float]:
        """Validate in the data plane's own parser; returns mean key and value sizes (bytes)."""
        if self.keys < 1:
            raise InputError(f"--keys {self.keys} must be at least 1", "give --keys 1 or more")
        try:
            return _core.check_workload(self.keys, self.key_size, self.value_size, self.popularity, self.set_fraction)
        except InputError as e:
            raise InputError(e.problem, e.remedy or "see examples/workload.toml") from None

    def as_json(self) -> dict:
        mean_key, mean_value = self.check()
        return {"keys": self.keys, "key_size": self.key_size, "value_size": self.value_size,
                "popularity": self.popularity, "set_fraction": self.set_fraction,
                "mean_key_bytes": mean_key, "mean_value_bytes": mean_value}
