"""`tailwise serve --udp-reflect / --udp-forward`: a plain UDP client through the reflector, and
through a forwarder to a reflector, sees exactly the datagrams each impairment drops, duplicates
and holds back one place, and the counters the command prints when it stops say the same."""

from __future__ import annotations

import signal
import socket
import struct

import pytest
from support.cli import run_cli

N = 2_000
MAGIC = 0x5477  # "Tw"


def payload(seq: int) -> bytes:
    """The packet mode's payload: magic, flow, seq, a 48-bit stamp: 18 bytes (a 64-byte frame)."""
    return struct.pack("<HHQ", MAGIC, 0, seq) + bytes(6)


def exchange(addr: str, n: int = N, held: int | None = None) -> list[int]:
    """Send seqs 0..n from one connected socket, at most 32 beyond the highest seq answered (the
    kernel's buffers never fill, so only the function loses datagrams); the seqs answered, in
    arrival order, until nothing comes for 0.3 s. A burst never ends on a datagram the function
    holds (every ``held``-th): its successor follows at once, not after an answer that a loaded
    machine could delay past the 1 ms a held datagram waits."""
    host, port = addr.rsplit(":", 1)
    got: list[int] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, int(port)))
        s.settimeout(5.0)
        sent = wanted = 0
        while sent < n:
            while sent < n and (sent - wanted < 32 or (held and sent % held == 0)):
                s.send(payload(sent))
                sent += 1
            data = s.recv(2048)
            assert len(data) == 18 and struct.unpack_from("<H", data)[0] == MAGIC
            got.append(struct.unpack_from("<Q", data, 4)[0])
            wanted = max(wanted, got[-1] + 1)
        s.settimeout(0.3)
        try:
            while True:
                got.append(struct.unpack_from("<Q", s.recv(2048), 4)[0])
        except TimeoutError:
            pass
    return got


def seen(answers: list[int], n: int = N) -> dict[str, int]:
    """What the client counts: seqs never answered, answers of a seq already answered, answers
    after the answer of a later seq."""
    answered: set[int] = set()
    counts = {"missing": 0, "duplicates": 0, "reordered": 0}
    highest = -1
    for seq in answers:
        if seq in answered:
            counts["duplicates"] += 1
        elif seq < highest:
            counts["reordered"] += 1
        answered.add(seq)
        highest = max(highest, seq)
    counts["missing"] = n - len(answered)
    return counts


# (flags, what the client sees, the counters): datagrams are counted from 1 at the function. A
# datagram held (--reorder-every) is sent after the next — or alone, when the client was held up
# past 1 ms before its next send (a loaded host): the counters say which (`reordered` or
# `held_alone`), the two add up to those held, and the client sees exactly the `reordered` ones.
CASES = {
    "none": ((), (0, 0, 0), dict(received=N, sent=N, dropped=0, reordered=0, duplicated=0)),
    "drop": (("--drop-every", "10"), (200, 0, 0), dict(received=N, sent=N - 200, dropped=200, reordered=0, duplicated=0)),
    "duplicate": (("--duplicate-every", "8"), (0, 250, 0),
                  dict(received=N, sent=N + 250, dropped=0, reordered=0, duplicated=250)),
    # 500 held; the 2,000th has no successor: sent alone after 1 ms, not reordered.
    "reorder": (("--reorder-every", "4"), (0, 0, 499),
                dict(received=N, sent=N, dropped=0, reordered=499, duplicated=0, held_alone=1)),
    # Every 10th dropped; every 5th not dropped duplicated (200); every 7th not dropped held and
    # sent after the next (285 − 28 = 257).
    "all": (("--drop-every", "10", "--reorder-every", "7", "--duplicate-every", "5"), (200, 200, 257),
            dict(received=N, sent=N, dropped=200, reordered=257, duplicated=200, held_alone=0)),
}


def assert_exact(got: list[int], counters: dict[str, int], want_seen: tuple[int, int, int],
                 want: dict[str, int]) -> None:
    """The client saw what the counters say, and they are the expected figures (those held
    counted as reordered or sent alone, the sum exact)."""
    if "held_alone" in want:
        held = want["reordered"] + want["held_alone"]
        assert counters["reordered"] + counters["held_alone"] == held, counters
        late = counters["held_alone"] - want["held_alone"]
        want = {**want, "reordered": want["reordered"] - late, "held_alone": counters["held_alone"]}
        want_seen = (*want_seen[:2], want["reordered"])
    assert tuple(seen(got).values()) == want_seen
    assert counters == want


def _held(flags: tuple[str, ...]) -> int | None:
    return int(flags[flags.index("--reorder-every") + 1]) if "--reorder-every" in flags else None


@pytest.mark.parametrize("case", CASES)
def test_reflector_counts_exactly(udp_reflector, case):
    flags, want_seen, want_counters = CASES[case]
    r = udp_reflector(*flags)
    got = exchange(r.addr, held=_held(flags))
    assert r.stop(signal.SIGINT) == 0
    assert_exact(got, r.counters(), want_seen, want_counters)


@pytest.mark.parametrize("case", ["drop", "all"])
def test_forwarder_to_a_reflector_counts_exactly(udp_reflector, udp_forwarder, case):
    flags, want_seen, want_counters = CASES[case]
    r = udp_reflector()
    f = udp_forwarder(r.addr, *flags)
    got = exchange(f.addr, held=_held(flags))
    assert f.stop(signal.SIGTERM) == 0
    assert r.stop(signal.SIGINT) == 0
    # Impaired on the way to the reflector only: everything it reflects comes back.
    sent = want_counters["sent"]
    assert_exact(got, f.counters(), want_seen, {**want_counters, "returned": sent})
    assert r.counters() == dict(received=sent, sent=sent, dropped=0, reordered=0, duplicated=0)


def test_two_workers_spinning_answer_every_datagram(udp_reflector):
    r = udp_reflector("--workers", "2", "--spin", "--no-pin")
    assert exchange(r.addr, 500) == list(range(500))
    assert r.stop(signal.SIGINT) == 0
    assert r.counters()["sent"] == 500


@pytest.mark.parametrize("args, words", [
    (["--udp-reflect", "--udp-forward", "127.0.0.1:9"], "--udp-reflect and --udp-forward go separately"),
    (["--udp-reflect", "--service", "fixed:1us"], "--service is the synthetic server's"),
    (["--drop-every", "3"], "--drop-every impairs a UDP function"),
    (["--duplicate-every", "2", "--service", "fixed:1us"], "--duplicate-every impairs a UDP function"),
    (["--udp-reflect", "--drop-every", "0"], "--drop-every 0 must be at least 1: give --drop-every 1 or more"),
    (["--udp-reflect", "--reorder-every", "-2"], "--reorder-every -2 must be at least 1: give --reorder-every 1 or more"),
    (["--udp-forward", "127.0.0.1:x"], "--udp-forward 127.0.0.1:x is not HOST:PORT"),
    (["--udp-reflect", "--workers", "0"], "--workers 0 must be at least 1"),
])
def test_bad_flags_are_refused_in_one_line(args, words):
    r = run_cli("serve", "--listen", "127.0.0.1:0", *args, timeout=30)
    assert r.returncode == 2, r
    assert words in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
