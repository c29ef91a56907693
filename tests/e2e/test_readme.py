"""Every `tailwise` command in README.md's and docs/'s shell blocks runs as written (issues 10, 34).

The test reads the ```sh blocks of README.md, then of the pages in docs/ (in ``PAGES``' order, the
one docs/README.md lists them in), splits each line as a shell would (comments, `&&`,
`|`), and runs every `tailwise …` command in README order against the servers it names, which it
starts on the ports written there: memcached, redis-server, nginx (serving `/index.html`), a UDP
echo, and each `tailwise serve` line itself, in the background. Only the time is shortened, by
``TAILWISE_TIME_CAP`` (the CLI caps --duration and --max-time by it); the commands are not edited
— unless a README port is taken on this machine, when that address alone is moved to a free port
(and the test says so). A command fails the test when it exits with an error (2), is interrupted,
or prints a traceback; a measured run may end not-measurable (1) — at a two-second cap an
adaptive run rarely reaches its precision, and that is the tool working, not the docs drifting.
The part of a pipeline after `|` (`jq`) is not run; a `--json` command's stdout must be JSON.

The README's quick start is run apart, uncapped, exactly as a newcomer would; and the README stays
a page a newcomer reads in a minute (``README_MAX_LINES``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

from support.cli import MEASURED, CLI
from support.servers import free_port, memcached_server, nginx_server, redis_server, udp_echo_server

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: docs/ pages in the order their commands run (the keys are stored before the runs that get them;
#: results directories are written before the pages that read them).
PAGES = ["load.md", "run.md", "packet-mode.md", "sweep.md", "report.md", "serve.md", "model.md", "calibrate.md",
         "doctor.md", "agents.md", "reading.md", "methodology.md", "results.md"]
DOCS = [README, *(ROOT / "docs" / p for p in PAGES)]
#: Issue 34: the README is a newcomer's page; the reference lives in docs/.
README_MAX_LINES = 250
QUICK_START = "## Quick start"
CAP = "2s"
TIMEOUT_S = 120
#: Shell separators after which a new command starts; what follows `|` is not tailwise's.
SEPARATORS = {"&&", "||", ";"}


def _quick_start() -> str:
    text = README.read_text()
    start = text.index(QUICK_START)
    end = text.find("\n## ", start + len(QUICK_START))
    return text[start:end if end >= 0 else len(text)]


def readme_commands(texts: list[str] | None = None) -> list[list[str]]:
    """Every `tailwise …` command of the documents' ```sh blocks, as argv lists, in order (the
    quick start's apart: ``quick_start_commands``)."""
    if texts is None:
        texts = [README.read_text().replace(_quick_start(), ""), *(p.read_text() for p in DOCS[1:])]
    return [c for text in texts for c in _commands(text)]


def quick_start_commands() -> list[list[str]]:
    return _commands(_quick_start())


def _commands(text: str) -> list[list[str]]:
    cmds = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            lex = shlex.shlex(line, posix=True, punctuation_chars=True)
            lex.whitespace_split = True
            lex.commenters = "#"
            current: list[str] = []
            piped = False
            for tok in [*lex, ";"]:
                if tok in SEPARATORS:
                    if current and current[0] == "tailwise":
                        cmds.append(current)
                    current, piped = [], False
                elif tok == "|":
                    piped = True
                elif not piped:
                    current.append(tok)
    return cmds


COMMANDS = readme_commands()
QUICK = quick_start_commands()
ADDR = re.compile(r"^(\w[\w+]*)://127\.0\.0\.1:(\d+)")


def _port_free(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _listen_port(cmd: list[str]) -> int | None:
    if "--listen" in cmd:
        return int(cmd[cmd.index("--listen") + 1].rsplit(":", 1)[1])
    return None


def test_the_readme_has_the_commands_this_test_expects():
    """The parser sees every kind of command the README shows (a guard on the parser itself)."""
    kinds = {c[1] for c in COMMANDS}
    assert {"run", "serve", "load", "model"} <= kinds, kinds
    schemes = {m.group(1) for c in COMMANDS for a in c if (m := ADDR.match(a))}
    assert {"synthetic", "memcached", "redis", "http", "udp"} <= schemes, schemes


@pytest.fixture(scope="module")
def readme_servers(tmp_path_factory):
    """The servers the README's commands name, on the README's ports (moved only if taken), and a
    working directory holding the README's relative paths (examples/)."""
    work = tmp_path_factory.mktemp("readme")
    (work / "examples").symlink_to(ROOT / "examples")
    wanted: dict[int, str] = {}
    for c in COMMANDS + QUICK:
        if c[1] == "serve":
            wanted[_listen_port(c)] = "serve"
        for a in c:
            if (m := ADDR.match(a)) and m.group(1) != "synthetic":
                wanted[int(m.group(2))] = m.group(1)
    moved = {p: p if _port_free(p) else free_port(udp_too=True) for p in wanted}
    for old, new in moved.items():
        if old != new:
            print(f"README port {old} is taken on this machine: using {new} for it")
    serves: list[subprocess.Popen] = []
    with ExitStack() as stack:
        for port, kind in wanted.items():
            p = moved[port]
            # Room for every page's keys at once (README's and load.md's): with memcached's default
            # 64 MB, the first page's value sizes take the slabs and the next page's keys are evicted.
            if kind in ("memcached", "memcached+binary"):
                stack.enter_context(memcached_server(port=p, memory_mb=256))
            elif kind == "memcached+udp":
                stack.enter_context(memcached_server(udp=True, port=p, memory_mb=256))
            elif kind == "redis":
                stack.enter_context(redis_server(port=p))
            elif kind == "http":
                stack.enter_context(nginx_server(port=p))
            elif kind == "udp":
                stack.enter_context(udp_echo_server(port=p))
        for c in COMMANDS:
            if c[1] == "serve":
                argv = _moved(c, moved)
                proc = subprocess.Popen([*CLI, *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, cwd=work)
                serves.append(proc)
                line = proc.stdout.readline()  # "tailwise serve: listening on synthetic://…" (or reflecting UDP on …)
                assert re.search(r"listening on|reflecting UDP on|forwarding UDP on", line), \
                    (c, line, proc.stderr.read() if proc.poll() is not None else "")
        try:
            yield work, moved
        finally:
            for proc in serves:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for proc in serves:
                # `tailwise serve` stops cleanly on SIGTERM, as the README says.
                assert proc.returncode == 0, (proc.returncode, proc.stderr.read())


def _moved(cmd: list[str], moved: dict[int, int]) -> list[str]:
    out = []
    for a in cmd:
        for old, new in moved.items():
            if old != new:
                a = a.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}")
        out.append(a)
    return out


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c[1] != "serve"], ids=lambda c: " ".join(c)[:90])
def test_every_readme_command_runs_as_written(readme_servers, cmd):
    work, moved = readme_servers
    argv = _moved(cmd, moved)
    r = subprocess.run([*CLI, *argv[1:]], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=work,
                       env={**os.environ, "TAILWISE_TIME_CAP": CAP, "COLUMNS": "200"})
    shown = f"{shlex.join(cmd)}\nexit {r.returncode}\nstderr: {r.stderr[-2000:]}"
    assert "Traceback" not in r.stderr + r.stdout, shown
    allowed = MEASURED if cmd[1] in ("run", "sweep") else (0,)
    if "--threshold" in cmd:
        allowed += (3,)  # a threshold that fails or is inconclusive at the capped time: the gate working
    assert r.returncode in allowed, shown
    if "--json" in cmd:
        json.loads(r.stdout)
    # The README stores the keys (`tailwise load`) before its memcached runs: they must all hit.
    if cmd[1] == "run" and any(a.startswith("memcached://") for a in cmd):
        hit = re.search(r"hit ratio ([0-9.]+)%", r.stdout)
        assert hit, r.stdout
        assert float(hit.group(1)) >= 99.0, f"the README's load stored other keys than this run asks for: {shown}"
    if cmd[1] == "run" and "--out" in cmd:
        out = work / cmd[cmd.index("--out") + 1]
        assert json.loads((out / "summary.json").read_text())["verdict"] in ("ok", "imprecise", "not-measurable")


def test_the_readme_is_a_page_a_newcomer_reads_in_a_minute():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move reference to docs/"
    text = "\n".join(lines)
    for heading in (QUICK_START, "## Reading the result", "## Commands", "## Coming from another tool"):
        assert heading in text, heading
    for page in PAGES:
        assert f"({page})" in (ROOT / "docs" / "README.md").read_text(), f"docs/README.md does not list {page}"
    assert len([c for c in QUICK if c[1] in ("run", "load")]) >= 2, QUICK


@pytest.mark.parametrize("cmd", QUICK, ids=lambda c: " ".join(c)[:90])
def test_the_quick_start_runs_as_written(readme_servers, cmd):
    """Uncapped: what a newcomer types, with its own time budget. A measured run's verdict may be
    any of the three (the host decides), but it is printed, and nothing errs."""
    work, moved = readme_servers
    argv = _moved(cmd, moved)
    r = subprocess.run([*CLI, *argv[1:]], capture_output=True, text=True, timeout=TIMEOUT_S + 120, cwd=work,
                       env={k: v for k, v in os.environ.items() if k != "TAILWISE_TIME_CAP"} | {"COLUMNS": "100"})
    shown = f"{shlex.join(cmd)}\nexit {r.returncode}\nstderr: {r.stderr[-2000:]}"
    assert "Traceback" not in r.stderr + r.stdout, shown
    assert r.returncode in (MEASURED if cmd[1] == "run" else (0,)), shown
    if cmd[1] == "run":
        verdict = re.search(r"verdict (ok|imprecise|not-measurable)", r.stdout)
        assert verdict, r.stdout
        print(f"{shlex.join(cmd)}: {verdict.group(1)}")
