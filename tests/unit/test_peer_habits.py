"""Issue 34, items 3 and 4, in process: the peers' habits (wrk2's short letters, --outstanding in
`load` with --depth kept, one default for connections, a --mix that cannot be read backwards, a
peer's flag answered with tailwise's) and the smaller items (examples in `run --help`, one style of
default, the commands in a fixed order with whole descriptions, `deploy status --token-file`'s own
text, `compare` refusing to judge a difference to a run that is neither ok nor imprecise)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
import re
import shlex
import sys

import pytest
import typer.main

from support.schemas import assert_valid
from tailwise.cli.main import _patch_help, app, main
from tailwise.cli.run import run_flags
from tailwise.cli.usage import ORDER, PEER_FLAGS, _flag_text
from tailwise.errors import InputError
from tailwise.spec.runspec import RunSpec
from tailwise.spec.workload import DEFAULTS, LOAD_OUTSTANDING, parse_mix


def _cli():
    _patch_help()
    return typer.main.get_command(app)


def _params(command: str, args: list[str]) -> dict:
    """What the command's parser makes of ``args`` (nothing runs)."""
    cli = _cli()
    parent = cli.make_context("tailwise", [command], resilient_parsing=True)
    return cli.commands[command].make_context(command, list(args), parent=parent).params


def _spec(args: list[str]) -> dict:
    """The run's spec as resolved (the settings as typed left out: "3s" and "3" are one duration)."""
    p = _params("run", args)
    rs = RunSpec.from_flags(run_flags(p), None, pin=p["pin"], keep_stalls=p["keep_stalls"])
    return {f.name: getattr(rs, f.name) for f in dataclasses.fields(RunSpec) if f.name not in ("settings", "capped")}


def _every_command():
    """(name, command, context) of every command, a group's (`deploy start`, …) too."""
    cli = _cli()
    root = cli.make_context("tailwise", ["--help"], resilient_parsing=True)
    found = [(name, command, root) for name, command in cli.commands.items()]
    for name, command, parent in found:
        ctx = command.make_context(name, [], resilient_parsing=True, parent=parent)
        found += [(f"{name} {n}", c, ctx) for n, c in getattr(command, "commands", {}).items()]
        yield name, command, ctx


def _tailwise(monkeypatch, capsys, *argv: str) -> tuple[int, str, str]:
    """`tailwise ARGV…` in process: its exit status, stdout and stderr."""
    monkeypatch.setattr(sys, "argv", ["tailwise", *argv])
    with pytest.raises(SystemExit) as e:
        main()
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


# --------------------------------------------------------------------------- wrk2's letters

def test_short_and_long_flags_give_the_same_spec():
    long = _spec(["--conns", "16", "--threads", "2", "--duration", "3", "--rate", "20k", "--seed", "1"])
    assert long["conns"] == 16 and long["threads"] == 2 and long["duration_ns"] == 3_000_000_000
    assert long["rate_rps"] == 20_000
    assert _spec(["-c", "16", "-t", "2", "-d", "3", "-R", "20k", "--seed", "1"]) == long
    # As wrk2 is typed: each letter with its value attached.
    assert _spec(["-c16", "-t2", "-d3s", "-R20k", "--seed", "1"]) == long


def test_sweep_and_load_take_the_letters_they_have_the_settings_of():
    names = ("conns", "threads", "duration")
    long = _params("sweep", ["--conns", "16", "--threads", "2", "--duration", "3"])
    assert {n: long[n] for n in names} == {"conns": 16, "threads": 2, "duration": "3"}
    short = _params("sweep", ["-c", "16", "-t", "2", "-d", "3"])
    assert {n: short[n] for n in names} == {n: long[n] for n in names}
    # A sweep has --rates, not --rate: -R is not its (a wrk2 user is told --rates, below).
    assert "-R" not in {o for p in _cli().commands["sweep"].params for o in getattr(p, "opts", ())}
    # `load`: -c/--conns, and --outstanding as in `run` with mutilate's --depth kept.
    target = "memcached://127.0.0.1:11211"
    given = _params("load", [target, "--conns", "3", "--outstanding", "5"])
    assert given["conns"] == 3 and given["outstanding"] == 5
    for args in ([target, "-c", "3", "--depth", "5"], [target, "-c3", "--outstanding", "5"]):
        assert {k: _params("load", args)[k] for k in ("conns", "outstanding")} == {"conns": 3, "outstanding": 5}


def test_one_default_for_connections():
    """`run`, `sweep` and `load` open as many connections unless told (the engine's own default,
    spec/workload.DEFAULTS); `load` pipelines deeper (keys are stored for throughput)."""
    assert _spec(["--seed", "1"])["conns"] == DEFAULTS["conns"]
    load = _params("load", ["memcached://127.0.0.1:11211"])
    assert load["conns"] == DEFAULTS["conns"] and load["outstanding"] == LOAD_OUTSTANDING
    help_text = _cli().commands["load"].get_help(
        _cli().commands["load"].make_context("load", [], resilient_parsing=True))
    assert f"[default: {DEFAULTS['conns']}]" in help_text and "--outstanding, --depth N" in help_text


def test_no_short_flag_is_given_twice_in_one_command():
    for name, command, _ in _every_command():
        opts = [o for p in command.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))]
        assert len(opts) == len(set(opts)), (name, sorted(o for o in opts if opts.count(o) > 1))
    run = {o for p in _cli().commands["run"].params for o in getattr(p, "opts", ())}
    assert {"-c", "-t", "-d", "-R", "-q", "-v"} <= run


# --------------------------------------------------------------------------------- --mix

@pytest.mark.parametrize("text", ["9:1", "get=9,set=1", "set=1,get=9", "GET=9, SET=1", "18:2"])
def test_mix_forms_give_one_fraction(text):
    assert parse_mix(text) == pytest.approx(0.1)


def test_mix_by_name_may_leave_a_part_out():
    assert parse_mix("get=1") == 0.0 and parse_mix("set=1") == 1.0 and parse_mix("1:0") == 0.0


def test_mix_forms_give_one_spec():
    specs = [_spec(["memcached://127.0.0.1:11211", "--mix", m, "--seed", "1"]) for m in
             ("9:1", "get=9,set=1", "set=1,get=9")]
    assert specs[0]["workload"].set_fraction == pytest.approx(0.1)
    assert all(s["workload"] == specs[0]["workload"] for s in specs)


@pytest.mark.parametrize("text", ["9-1", "get=9,put=1", "get=9,get=1", "9:1:1", "get=9;set=1", "get"])
def test_a_mix_that_is_neither_form_is_refused_naming_both(text):
    with pytest.raises(InputError) as e:
        parse_mix(text)
    line = e.value.line()
    assert line.startswith(f"--mix {text} is not GET:SET") and "--mix get=9,set=1" in line and "\n" not in line


@pytest.mark.parametrize("text", ["0:0", "get=-1,set=1", "inf:1", "nan:1"])
def test_a_mix_with_impossible_parts_is_refused(text):
    with pytest.raises(InputError, match="non-negative finite parts"):
        parse_mix(text)


def test_a_wrong_mix_is_one_line_on_the_command_line(monkeypatch, capsys):
    code, out, err = _tailwise(monkeypatch, capsys, "run", "memcached://127.0.0.1:9", "--mix", "get=9,put=1")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("tailwise: --mix get=9,put=1 is not GET:SET"), err


def test_mix_help_says_get_set_beside_memtiers_set_get():
    text = next(p.help for p in _cli().commands["run"].params if p.name == "mix")
    assert "GET:SET" in text and "get=9,set=1" in text and "memtier's --ratio SET:GET" in text


# ------------------------------------------------------------------------- a peer's flags

def test_a_peers_flag_names_tailwises(monkeypatch, capsys):
    code, out, err = _tailwise(monkeypatch, capsys, "run", "--ratio", "1:9")
    assert code == 2 and out == ""
    assert err == ("tailwise: no --ratio here: tailwise's is --mix GET:SET (memtier's --ratio is SET:GET); "
                   "see `tailwise run --help`\n")


@pytest.mark.parametrize("argv,theirs", [
    (("run", "--ratio=1:9"), "--mix GET:SET"),
    (("run", "--connections", "8"), "-c/--conns N"),
    (("run", "--depth", "4"), "--outstanding N"),
    (("run", "--qps", "10k"), "-R/--rate RATE"),
    (("sweep", "--qps", "10k"), "--rates RATES"),
    (("sweep", "-R", "10k"), "--rates RATES"),
    (("run", "-Q", "1000"), "--probe-rate RATE"),
    (("run", "-Q1000"), "--probe-rate RATE"),
    (("run", "--test-time", "10"), "-d/--duration TIME"),
    (("run", "--clients", "4"), "-c/--conns N"),
    (("sweep", "--pipeline", "4"), "--outstanding N"),
    (("run", "-T", "2"), "-t/--threads N"),
    (("run", "--update", "0.1"), "--mix GET:SET"),
    (("run", "-s", "10.0.0.2"), "the TARGET argument"),
    (("load", "-s", "10.0.0.2"), "the TARGET argument"),
])
def test_each_peers_flag_is_one_line_naming_tailwises(monkeypatch, capsys, argv, theirs):
    code, _, err = _tailwise(monkeypatch, capsys, *argv)
    flag = argv[1].split("=")[0] if argv[1].startswith("--") else argv[1][:2]
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"tailwise: no {flag} here: tailwise's is {theirs}"), err


def test_a_flag_no_peer_has_or_one_the_command_lacks_keeps_clicks_message(monkeypatch, capsys):
    code, _, err = _tailwise(monkeypatch, capsys, "run", "--nonsense")
    assert code == 2 and err.startswith("tailwise: No such option: --nonsense"), err
    # `load` stores keys: it has no --mix to name for memtier's --ratio.
    code, _, err = _tailwise(monkeypatch, capsys, "load", "memcached://127.0.0.1:9", "--ratio", "1:9")
    assert code == 2 and err.startswith("tailwise: No such option: --ratio"), err


def test_the_peer_table_names_flags_tailwise_has():
    """Every entry names an option of `run` or `sweep` (or their TARGET), and none is a flag both already have."""
    cli = _cli()
    run, sweep = cli.commands["run"], cli.commands["sweep"]
    own = set.intersection(*({o for p in c.params for o in getattr(p, "opts", ())} for c in (run, sweep)))
    for flag, peer in PEER_FLAGS.items():
        assert _flag_text(run, peer.theirs) or _flag_text(sweep, peer.theirs), flag
        assert flag not in own, flag


# --------------------------------------------------------------------------------- help texts

def test_run_help_has_examples_that_parse():
    """`run --help` shows examples, as sweep, report, compare and doctor do; each one's flags are the
    command's (parsed here, not run)."""
    cli = _cli()
    for name in ("run", "sweep", "report", "compare", "doctor", "calibrate"):
        help_text = cli.commands[name].help
        assert re.search(r"\bExamples?:\s", help_text), name
        examples = help_text.split("Example", 1)[1].split(":", 1)[1]
        for example in (e for e in examples.split(";") if e.strip()):
            words = shlex.split(example)
            assert words[:2] == ["tailwise", name], example
            _params(name, words[2:])


def test_one_style_of_default_in_every_help():
    """A default is written `[default: …]` everywhere: no "(default …)" nor "default: …" without the
    bracket (a default route is not a default)."""
    for name, command, ctx in _every_command():
        texts = [command.help or ""] + [(p.get_help_record(ctx) or ("", ""))[1] for p in command.get_params(ctx)]
        for text in texts:
            spoken = len(re.findall(r"default", text)) - len(re.findall(r"default route", text))
            assert spoken == len(re.findall(r"\[default: [^\]]+\]", text)), (name, text)


def test_commands_are_listed_in_a_fixed_order_with_whole_descriptions():
    cli = _cli()
    ctx = cli.make_context("tailwise", ["--help"], resilient_parsing=True)
    text = cli.get_help(ctx).split("Commands:", 1)[1]
    listed = [m.group(1) for m in re.finditer(r"^  (\S+)  +\S", text, re.M)]
    assert listed == list(ORDER) == cli.list_commands(ctx)
    assert "..." not in text
    for name in ORDER:
        short = cli.commands[name].get_short_help_str(limit=sys.maxsize)
        assert short.endswith(".") and " ".join(short.split()[:4]) in text, name
    deploy = cli.commands["deploy"]
    sub = deploy.make_context("deploy", [], resilient_parsing=True, parent=ctx)
    assert "..." not in deploy.get_help(sub).split("Commands:", 1)[1]


def test_deploy_status_says_what_its_token_file_is_for():
    cli = _cli()
    deploy = cli.commands["deploy"]
    texts = {name: next(p.help for p in deploy.commands[name].params if p.name == "token_file")
             for name in ("start", "status")}
    assert texts["start"] != texts["status"]
    assert "Health" in texts["status"] and "SFTP" not in texts["status"]


# ------------------------------------------------------------------------------------ compare

def _summary(verdict: str, p99_ns: float) -> dict:
    """A real run's summary.json (tests/unit/screens/run-ok.json) with the verdict and p99 given:
    two percentiles, p50 the same in every run and p99 with a ±5 % interval."""
    doc = json.loads((Path(__file__).parent / "screens" / "run-ok.json").read_text())
    doc["verdict"] = verdict
    doc["latency"]["percentiles"] = [
        {"p": 50.0, "value_ns": 10_000.0, "low_ns": 9_900.0, "high_ns": 10_100.0, "n_effective": 5_000.0,
         "samples_needed": None, "censored": False},
        {"p": 99.0, "value_ns": p99_ns, "low_ns": 0.95 * p99_ns, "high_ns": 1.05 * p99_ns, "n_effective": 5_000.0,
         "samples_needed": None, "censored": False}]
    return doc


@pytest.fixture
def runs(tmp_path):
    """Three runs whose p99s are far apart (disjoint CIs): ok, imprecise, not-measurable."""
    dirs = {}
    for name, verdict, p99 in (("base", "ok", 50_000.0), ("wide", "imprecise", 90_000.0),
                               ("bad", "not-measurable", 90_000.0)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(_summary(verdict, p99)))
        dirs[name] = str(tmp_path / name)
    return dirs


def _p99_diff(doc) -> dict:
    return next(row for row in doc["percentiles"] if row["p"] == 99.0)["diffs"][0]


def test_compare_judges_ok_and_imprecise_runs(runs):
    from tailwise.render.compare import compare_doc, load_runs

    doc = compare_doc(load_runs([runs["base"], runs["wide"]], None)).to_json()
    assert _p99_diff(doc)["ci_overlap"] is False and "not judged" not in doc["note"].lower()


@pytest.mark.parametrize("order", [("base", "bad"), ("bad", "base"), ("bad", "bad")])
def test_compare_does_not_call_a_difference_to_a_not_measurable_run_significant(runs, order, capsys, monkeypatch):
    from tailwise.render.compare import compare_doc, load_runs, print_compare

    monkeypatch.setenv("COLUMNS", "120")  # off a terminal: the table's width, whatever the caller's

    typed = compare_doc(load_runs([runs[n] for n in order], list(order) if order[0] != order[1] else ["a", "b"]))
    doc = typed.to_json()
    assert_valid(doc, "compare")
    diff = _p99_diff(doc)
    assert diff["diff_ns"] != 0 or order[0] == order[1]
    assert diff["ci_overlap"] is None  # the CIs may be disjoint: that is not called significant
    assert "is not-measurable" in doc["note"]
    print_compare(typed)
    out = capsys.readouterr().out
    # One reason a run, folded at the screen's width: its continuation lines are indented.
    reasons = [" ".join(part.split()) for part in re.split(r"\n(?! )", out) if part.startswith("not judged: ")]
    assert len(reasons) == sum(n == "bad" for n in order), out
    assert all("is not-measurable" in r and "called significant" in r for r in reasons), reasons
    p99_rows = out.split("p99", 1)[1].split("CIs overlap = no")[0]
    assert "not judged" in p99_rows and " no " not in p99_rows, out


def test_compare_on_the_command_line_says_why_in_one_line_per_run(runs, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = _tailwise(monkeypatch, capsys, "compare", runs["base"], runs["bad"], runs["wide"])
    assert code == 0, err
    # One reason a run, folded at the screen's width: its continuation lines are indented.
    reasons = [" ".join(part.split()) for part in re.split(r"\n(?! )", out) if part.startswith("not judged: ")]
    assert reasons == [f"not judged: bad is not-measurable, so its difference to base is not called significant, "
                       f"whatever the CIs (why: tailwise report {runs['bad']})"], out
