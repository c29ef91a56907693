"""What the run summary counts (documents/run.py, ``Summary``): the engine's counters, the packets
of a packet run, the probe's, the failed requests by reason, the engine's own conduct, and what
the target itself counted (the built-in server's view, memcached stats or redis INFO).
"""

from __future__ import annotations

from typing import Literal

from tailwise.results.documents.base import Count, Doc, F, Int, Num
from tailwise.results.documents.latency import HistPercentile

def _count(description: str):
    return F(description=description, minimum=0)


class Counters(Doc):
    """Counts of requests (integers). Later versions may add counters."""

    open_keys = True
    __pydantic_extra__: dict[str, Count]
    intended: Int = _count("Requests the schedule made due.")
    sent: Int = _count("Requests sent.")
    received: Int = _count("Replies received.")
    late: Int = _count("Requests sent later than --late after their intended time.")
    never_sent: Int = _count("Requests due that could not be sent within --timeout.")
    errors: Int = _count("Requests answered with an error or failed (see error_reasons).")
    timeouts: Int = _count("Requests unanswered after --timeout.")
    unfinished: Int = _count("Requests still outstanding when the run ended.")
    rx_kernel: Int = _count("Replies with a kernel receive stamp.")
    tx_kernel: Int = _count("Requests with a kernel transmit stamp.")
    reconnects: Int = _count("Connections re-established.")
    resent: Int = _count("Requests sent again after a reconnect.")
    gets: Int = _count("Get requests (memcached, redis).")
    sets: Int = _count("Set requests.")
    hits: Int = _count("Gets answered with a value.")
    misses: Int = _count("Gets answered without a value.")
    stored: Int = _count("Sets the server stored.")
    lost: Int = F(None, description="Packet mode (udp+flow): packets never answered by their timeout or the drain's end (sent = received + lost); 0 for other protocols; absent in summaries written before it existed.", minimum=0)
    reordered: Int = F(None, description="Packet mode: first answers that came after an answer of a later seq of their flow; 0 otherwise.", minimum=0)
    reorder_max: Int = F(None, description="Packet mode: the largest reordering displacement, in packets (highest seq answered − the seq); 0 otherwise.", minimum=0)
    duplicates: Int = F(None, description="Packet mode: answers of a seq already answered (not in received); 0 otherwise.", minimum=0)


class PacketHistogram(Doc):
    """Packet mode: every answered packet at bin_ns (100 ns, the granularity KBNets'17 §3 gives its software tools) from 0 to range_ns; the counted bins are in the results directory's packets-hist.csv. Answers at or above range_ns are counted in above (latency.histogram has them at HDR precision)."""

    bin_ns: Int = F(description="Each bin's width.", minimum=1)
    range_ns: Int = F(description="The range binned at bin_ns, from 0.", minimum=1)
    count: Int = _count("Answered packets in it (= packets.received for a run on one host).")
    above: Int = _count("Answered packets at or above range_ns.")
    max_ns: Int | None = F(description="The top of the highest bin counted; null when an answer is above range_ns or none came.")
    percentiles: list[HistPercentile] = F(description="Every-packet percentiles (no CI: latency.percentiles has those), each the highest value of the bin of the ⌈p/100 × count⌉-th smallest answer: at most bin_ns − 1 above it, never below; null where that answer is above range_ns.")


class Packets(Doc):
    """Packet mode (udp+flow://): the packets, their loss, reordering and duplicates, the rates achieved. Bits per second count Ethernet frame bits (--size per packet: header, IP, UDP, payload and FCS, as RFC 2544)."""

    size_bytes: Int = F(description="--size: each packet's Ethernet frame size (RFC 2544's count).", minimum=64)
    payload_bytes: Int = F(description="Its UDP payload: size − 46 over IPv4, size − 66 over IPv6.", minimum=0)
    flows: Int = F(description="--flows: UDP flows, one socket (source port) each.", minimum=1)
    sent: Int = _count("Packets sent.")
    received: Int = _count("Packets answered (each packet's first answer, duplicates not counted).")
    lost: Int = _count("Packets never answered by their timeout or the drain's end: sent = received + lost.")
    loss_ratio: Num | None = F(description="lost / sent; null when nothing was sent.", minimum=0, maximum=1)
    reordered: Int = _count("Answers that came after an answer of a later seq of their flow.")
    reorder_max: Int = _count("The largest reordering displacement, in packets.")
    duplicates: Int = _count("Answers of a seq already answered.")
    rate_pps: Num | None = F(description="Packets answered per second of the schedule's time (received / elapsed); null when no time elapsed.", minimum=0)
    sent_pps: Num | None = F(description="Packets sent per second of the schedule's time; null when no time elapsed.", minimum=0)
    bits_per_s: Num | None = F(description="Frame bits answered per second (rate_pps × size_bytes × 8); null when no time elapsed.", minimum=0)
    resolution_ns: Int | None = F(description="The every-packet histogram's bin width at the largest answer: histogram.bin_ns (100) when every answer is below histogram.range_ns, else latency.histogram's bucket width there (HDR, 3 significant digits: ≤ 64 ns below 131 µs, 0.1 % above); null without an answer.", minimum=1)
    histogram: PacketHistogram | None = F(None, description="Every answered packet at 100 ns; null on a run on agents (latency.histogram has them at HDR precision). Added after issue 22.")
    max_loss: Num = F(description="--max-loss: the loss ratio the loss check allows.", minimum=0)


class Probe(Doc):
    """The latency probe (--probe): its settings and its own counters; null without --probe. With a probe only its requests are timed."""

    conns: Int = F(minimum=1)
    rate_rps: Num = F(minimum=0)
    counters: Counters | None


class TlsHandshake(Doc):
    """The completed handshakes' times, from the first byte of the ClientHello to the end of the handshake, never charged to a request."""

    count: Int = _count("Handshakes completed (full + resumed).")
    p50_ns: Num | None = F(description="Their median (numpy's linear interpolation between order statistics); null without any.", minimum=0)
    p99_ns: Num | None = F(description="Their 99th percentile, the same way; null without any.", minimum=0)


class Tls(Doc):
    """TLS to the target: the handshakes (before the schedule and on each reconnect, timed apart from the requests) and how the server was verified."""

    handshake: TlsHandshake
    full: Int = _count("Full handshakes.")
    resumed: Int = _count("Handshakes that resumed an earlier session (a TLS 1.3 ticket or a TLS 1.2 session id).")
    failed: Int = _count("Handshakes that failed (certificate refused, alert, closed).")
    resume: bool = F(description="Whether reconnects tried to resume (false with --tls-no-resume).")
    insecure: bool = F(description="--tls-insecure: the server's certificate was not verified.")
    sni: str | None = F(description="The server name sent (RFC 6066 §3); null: none (an IP target).")
    ca: str | None = F(description="The CA trusted: the --tls-ca file's name, \"system\" for the system's roots; null with --tls-insecure.")


class ErrorReason(Doc):
    reason: str
    count: Int = F(minimum=0)


class Engine(Doc):
    """The engine's own conduct: its CPUs, CPU time and stalls."""

    pinned_cpus: list[Int | None] = F(description="The CPU each engine thread was pinned to (null: not pinned).")
    cpu_s: Num = F(description="CPU time of the engine threads.", minimum=0)
    cpu_ns_per_request: Num | None = F(description="Engine CPU time per request sent; null when none was sent.", minimum=0)
    preemptions: Int = F(description="Involuntary context switches of the engine threads.", minimum=0)
    sleeps: Int = F(0, description="Voluntary context switches of the engine threads: the times they slept (--poll block: for each send and each reply; lean: for each send, and for a reply only when its time needs it; spin: seldom).", minimum=0)
    sleeps_per_request: Num | None = F(None, description="sleeps per request sent; null when none was sent.", minimum=0)
    stalls: Int = F(description="Timing-loop iterations longer than stall_threshold_ns (not the ≥ 200 µs stalls the methodology leaves out: methodology.stalls).", minimum=0)
    stalled_s: Num = F(description="Time spent in those iterations.", minimum=0)
    stall_threshold_ns: Int = F(description="An iteration longer than this counts as a stall.", minimum=1)
    host_steal_s: Num | None = F(description="Hypervisor steal time over the host's CPUs during the run (/proc/stat); null when unreadable.", minimum=0)


class BuiltinServerStats(Doc):
    """The built-in server's own view of the run."""

    source: Literal["builtin-server"]
    served: Int = F(description="Requests served.", minimum=0)
    busy_s: Num = F(description="Time the workers spent serving.", minimum=0)
    effective_service_ns: Num | None = F(description="busy / served: the service time really given (the server's own work included); null when none served.")
    service_overhead_ns: Num | None = F(description="effective_service_ns − the distribution's mean.")
    utilisation: Num | None = F(description="busy / (elapsed × workers): the load really offered, to compare with a queueing model.", minimum=0)
    stalls: Int = F(description="Stalls of the workers (the host took a worker's CPU while it served); they stay in the tail.", minimum=0)
    stalled_s: Num = F(minimum=0)
    stalls_longest_ns: Int | None = F(description="null without stalls.", minimum=0)


class ServerCounts(Doc):
    gets: Int | None
    sets: Int | None
    hits: Int | None
    misses: Int | None
    connections: Int | None = F(None, description="Includes the after-reading's own connection (+1).")


class ServerDelta(ServerCounts):
    connections: Int | None = F(description="Includes the after-reading's own connection (+1).")


class ServerStats(Doc):
    """One server's counters (memcached stats, redis INFO) before and after the run, and their differences (null when a reading failed or the server restarted; error then says why)."""

    target: str
    source: Literal["memcached stats", "redis INFO"]
    before: dict[str, Num] = F(description="The server's raw counters (its own field names) before the run.")
    after: dict[str, Num]
    delta: ServerDelta
    error: str = F(None, description="Present only when a reading failed or a difference is unknown.")
    ours: ServerCounts = F(None, description="tailwise's own counts for the same names.")
    agrees: bool | None = F(None, description="gets, sets, hits and misses all equal the server's; null when a server value is unknown.")


class ServerStatsCombined(Doc):
    """Several servers: one block each, and the sums."""

    source: str
    targets: list[ServerStats] = F(minItems=2)
    delta: ServerCounts
    error: str = None
    ours: ServerCounts = None
    agrees: bool | None = None
