"""`tailwise doctor` as users run it (issue 22): a report that exits 0, one entry per knob, valid
JSON as root and as an unprivileged user, and the same knobs in every run summary's host. The
knobs themselves on fake sysfs/procfs trees: tests/unit/test_doctor.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from support.cli import MEASURED, CLI, run_cli
from support.schemas import assert_valid
from support.servers import in_ci
from tailwise.host.doctor import KNOBS
from tailwise.results.documents.base import STRICT
from tailwise.results.documents.doctor import Doctor

NAMES = [k.name for k in KNOBS]


def _doc(r: subprocess.CompletedProcess) -> dict:
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    assert_valid(doc, "doctor")
    assert Doctor.model_validate(doc, context=STRICT).to_json() == doc  # only the fields its model declares
    assert [k["name"] for k in doc["knobs"]] == NAMES
    for k in doc["knobs"]:
        # Whatever could not be read says why; nothing unreadable passes as fine.
        assert k["state"] == "ok" or k["detail"], k
        if k["state"] == "unreadable":
            assert k["fix"] is None and k["readings"] == {}, k
    return doc


def test_doctor_json_names_every_knob():
    doc = _doc(run_cli("doctor", "--json"))
    assert doc["target"] is None and doc["sample_s"] > 0 and doc["cpus"]
    assert doc["host"]["usable_cores"] >= 1


def test_the_table_has_a_row_per_knob_and_exits_0():
    r = run_cli("doctor")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    for name in NAMES:
        assert re.search(rf"│ {re.escape(name)}\s", r.stdout), (name, r.stdout)
    assert re.search(r"\d+ to look at, \d+ not readable here, \d+ ok, \d+ not applicable", r.stdout), r.stdout


def test_at_80_columns_a_line_per_knob_and_each_fix_command_whole():
    """Issue 34: `tailwise doctor` off a terminal at COLUMNS=80 — no table, an entry per knob
    (its state and what it read), each fix on its own line with its commands whole (one longer than
    80 columns alone on its line), no line wider than 80 but such a command; a table from 120."""
    from tailwise.render.doctor import COMMANDS, command_spans

    r = subprocess.run([*CLI, "doctor"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    doc = _doc(run_cli("doctor", "--json"))
    lines = r.stdout.splitlines()
    assert "┃" not in r.stdout and len(lines) <= 4 * len(NAMES) + 4, r.stdout
    cmds = [k["fix"][a:b].rstrip(";,") for k in doc["knobs"] if k["fix"] for a, b in command_spans(k["fix"])
            if k["fix"][a:b].split()[0] in COMMANDS]
    assert all(len(ln) <= 80 or ln.strip().rstrip(";,") in cmds for ln in lines), r.stdout
    for k in doc["knobs"]:
        assert any(ln.startswith(f"{k['name']} ") for ln in lines), (k["name"], r.stdout)
    for cmd in cmds:  # read by the two calls apart (a state can change between them): each one printed, whole
        if " ".join(cmd.split()[:3]) in r.stdout:
            assert any(cmd in ln for ln in lines), (cmd, r.stdout)
    wide = subprocess.run([*CLI, "doctor"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "120"})
    assert "┃ knob" in wide.stdout and max(len(ln) for ln in wide.stdout.splitlines()) <= 120, wide.stdout


def test_a_loopback_target_has_no_nic():
    doc = _doc(run_cli("doctor", "synthetic://127.0.0.1:7000", "--json"))
    assert doc["interface"] == "lo" and doc["target"] == "synthetic://127.0.0.1:7000"
    knobs = {k["name"]: k for k in doc["knobs"]}
    for name in ("nic-numa", "coalescing", "irq-affinity"):
        assert knobs[name]["state"] == "not-applicable" and "lo is virtual" in knobs[name]["detail"]


@pytest.mark.parametrize("target", ["127.0.0.1:7000", "gopher://127.0.0.1:70", "memcached://no-such-host.invalid:1"])
def test_bad_input_is_one_line_and_exit_2(target):
    r = run_cli("doctor", target)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("tailwise: "), r
    assert "Traceback" not in r.stderr


def _unprivileged() -> tuple[list[str], str]:
    """How to run a command as uid 65534 from here, and what that means; skip (fail under
    CI=true) when there is no way."""
    if os.geteuid() != 0:
        return [], "the test's own (unprivileged) user"
    if shutil.which("setpriv"):
        drop, how = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"], "setpriv uid 65534"
    elif shutil.which("runuser"):
        drop, how = ["runuser", "-u", "nobody", "--"], "runuser -u nobody"
    else:
        msg = "neither setpriv nor runuser (util-linux) is installed: cannot run as an unprivileged user"
        if in_ci():
            pytest.fail(msg + " (CI=true: a failure, not a skip)")
        pytest.skip(msg)
    python = CLI[0]
    probe = [python, "-c", "import tailwise.cli.main"]
    r = subprocess.run([*drop, *probe], capture_output=True, text=True, timeout=60, cwd="/")
    if r.returncode == 0:
        return drop, how
    # An interpreter the user cannot reach (a pyenv under /root, mode 700): the user may search
    # directories to reach it (CAP_DAC_READ_SEARCH, nothing else), still without root's rights.
    if drop[0] == "setpriv":
        reach = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
        drop = [*drop[:-1], *reach, "--"]
        if subprocess.run([*drop, *probe], capture_output=True, timeout=60, cwd="/").returncode == 0:
            return drop, how + f" (with CAP_DAC_READ_SEARCH only, to reach {python})"
    pytest.skip(f"uid 65534 cannot run {python} with tailwise: {r.stderr.strip()[-300:]}")


def test_as_an_unprivileged_user_it_prints_valid_json_with_every_knob():
    drop, how = _unprivileged()
    r = subprocess.run([*drop, *CLI, "doctor", "--json"], capture_output=True, text=True, timeout=120, cwd="/")
    doc = _doc(r)
    if drop:
        status = subprocess.run([*drop, "cat", "/proc/self/status"], capture_output=True, text=True, timeout=30).stdout
        assert re.search(r"^Uid:\s+65534\s+65534", status, re.M), (how, status)
    # Root reads the same files: what root could read, the unprivileged user read too (nothing here needs root).
    as_root = {k["name"]: k["state"] for k in _doc(run_cli("doctor", "--json"))["knobs"]}
    readable_by_root = {n for n, s in as_root.items() if s != "unreadable"}
    unreadable = {k["name"] for k in doc["knobs"] if k["state"] == "unreadable"}
    assert not (unreadable & readable_by_root), (how, unreadable & readable_by_root, doc["knobs"])


def test_a_run_s_summary_carries_the_knobs_and_warns_once_per_knob_that_matters(tmp_path):
    out = tmp_path / "r"
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--json", "--out", str(out))
    assert r.returncode in MEASURED, r.stderr
    s = json.loads(r.stdout)
    assert_valid(s, "summary")
    knobs = {k["name"]: k for k in s["host"]["knobs"]}
    assert list(knobs) == NAMES
    assert json.loads((out / "host.json").read_text())["knobs"] == s["host"]["knobs"]
    # The built-in server on loopback: no NIC; a knob warned about is one in warn state, once.
    for name in ("nic-numa", "coalescing", "irq-affinity"):
        assert knobs[name]["state"] == "not-applicable", knobs[name]
    warned = re.findall(r"^warning: host ([\w-]+): .* \(see `tailwise doctor`: \1\)$", r.stderr, re.M)
    assert len(warned) == len(set(warned)), r.stderr
    assert all(knobs[n]["state"] == "warn" for n in warned), (warned, r.stderr)
    assert not {"isolation", "busy-poll", "nic-numa", "coalescing", "irq-affinity"} & set(warned), r.stderr
