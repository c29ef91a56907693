"""`tailwise agent` processes for the tests: a token file and an agent on a free loopback port."""

from __future__ import annotations

import re
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.cli import CLI

TOKEN = "test-token-0123456789abcdef"


def token_file(tmp_path: Path, token: str = TOKEN) -> Path:
    path = tmp_path / "token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


@contextmanager
def agent_process(*args: str):
    """`tailwise agent` on a free port; yields (process, port, the lines it printed so far)."""
    proc = subprocess.Popen([*CLI, "agent", "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if m := re.search(r"listening on 127\.0\.0\.1:(\d+)", line):
                yield proc, int(m.group(1)), lines
                return
            if not line and proc.poll() is not None:
                break
        pytest.fail(f"tailwise agent did not start: {lines} {proc.stderr.read() if proc.poll() is not None else ''}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
