"""What a measurement hands to the statistics and the results directory: plain data, no behaviour.

``AgentResult`` is one finished run of the engine (in process, or pooled from several agents);
``AgentShare`` is one agent's part of a run on several machines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

@dataclass(frozen=True)
class AgentShare:
    """One agent of a run on several client machines (agents/group.py), as the coordinator knows it:
    what it was asked (its share), its clock, its counters so far and how it failed, if it did.
    The agents check reads it (methodology/analysis.py), and the summary's ``agents`` is made of it
    (``report``)."""

    address: str
    #: "symmetric" (loads and measures), "load" (loads only: counted, not timed) or "probe".
    role: str
    #: Its share of the rate (a probe agent: the probe's rate).
    rate_rps: float
    threads: int
    conns: int
    #: Whether its requests are timed (kept as samples): not for a load agent.
    timed: bool
    #: Its schedule's process (``exp``, ``fixed``, …): what its arrivals are tested against.
    arrival: str
    clock_offset_ns: int | None
    clock_rtt_ns: int | None
    counters: dict = field(default_factory=dict)
    error: str | None = None

    def achieved_rps(self, elapsed_s: float) -> float | None:
        """Its send rate over the schedule's time (``elapsed_s``, the coordinator's pauses left out)."""
        return self.counters.get("sent", 0) / elapsed_s if elapsed_s > 0 and self.counters else None

    def report(self, elapsed_s: float) -> dict:
        """What the summary says of this agent (results/documents/run.py, ``AgentReport``)."""
        return {"address": self.address, "role": self.role, "rate_rps": self.rate_rps,
                "achieved_rps": self.achieved_rps(elapsed_s), "threads": self.threads, "conns": self.conns,
                "timed": self.timed, "clock_offset_ns": self.clock_offset_ns, "clock_rtt_ns": self.clock_rtt_ns,
                "counters": self.counters, "error": self.error}


@dataclass
class AgentResult:
    counters: dict
    elapsed_ns: int
    received_in_window: int
    latency_hist: bytes  # HdrHistogram V2 compressed
    send_lag_hist: bytes
    send_lag_unstalled_hist: bytes  # send lag of requests no engine stall (> 20 µs iteration) delayed
    stalls: int
    stalled_ns: int
    samples: np.ndarray  # SAMPLE_DTYPE, sorted by intended send time: every sampled request
    error: str | None
    error_reasons: list[tuple[str, int]]
    pinned_cpus: list[int | None]
    cpu_ns: int
    preemptions: int = 0
    sleeps: int = 0  # voluntary context switches of the engine threads (--poll block's and lean's sleeps)
    probe_counters: dict | None = None  # the latency probe's own (also in counters)
    steal_s: float | None = None  # hypervisor steal time across the host's CPUs during the run
    interrupted: bool = False
    wall_start_s: float = field(default=0.0)
    #: Stalls (≥ 200 µs without running) of the engine threads, as (start, end) ns after the
    #: schedule's start (the requests they delayed are flagged ENGINE_STALL / INFLATED).
    engine_stalls_ns: list[tuple[int, int]] = field(default_factory=list)
    #: Stalls of an in-process target (the built-in server's workers): the target's own
    #: behaviour, kept in the statistics and reported as host noise.
    target_stalls_ns: list[tuple[int, int]] = field(default_factory=list)
    #: The every-request histograms by 100 ms of intended time (``_core.Intervals``).
    intervals: object = None
    #: A run on several agents (agents/group.py): each agent's share, clock offset and counters,
    #: and how together they started; None for the in-process agent.
    agents: list[AgentShare] | None = None
    barrier: dict | None = None
    #: A run on several agents: which agent each row of ``samples`` is (its index in ``agents``).
    owner: np.ndarray | None = None
    #: Packet mode (udp+flow): per 100 ms interval of intended time, (index, sent, received,
    #: lost, reordered, duplicates) (``Engine.packet_intervals``); empty for other protocols.
    packet_intervals: list[tuple[int, int, int, int, int, int]] = field(default_factory=list)
    #: Packet mode: every answered packet at 100 ns (``Engine.join``'s ``packet_hist``: bin_ns,
    #: range_ns, counts as u64 LE, above; stats/histogram.LinearHistogram); None otherwise.
    packet_hist: dict | None = None
    #: ``samples`` is a bounded subsample (stats/subsample.py) of every row kept: its 1-in-m, the
    #: limit, the rows collected and kept (``Subsample.report``); None: every row is in ``samples``.
    subsample: dict | None = None
    #: Every row the engine kept, as they came (64-byte rows, not sorted): what the results
    #: directory's samples file is written from (results/export/samples.py); on agents, one file
    #: per agent (the journal's). None: not written.
    samples_file: Path | list[Path] | None = None
    #: Why every row could not be kept on disk during the run (the disk full): the results
    #: directory's samples file then holds ``samples`` only. None: nothing went wrong.
    samples_file_error: str | None = None
    #: Why a run on agents gave up writing what it collected as it came (``collected/``, the disk
    #: full: results/journal.py); its results are written all the same. None: nothing went wrong.
    journal_error: str | None = None
    #: TLS to the target: the engine's handshakes — ``full``, ``resumed``, ``failed`` and every
    #: completed one's time, ``handshake_ns`` (agents: counts added, times pooled); None in the clear.
    tls: dict | None = None
