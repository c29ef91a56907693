"""Remedies (remedies.py) in words: the one place their text is written, read where a check is
printed or serialised (``Check.as_json``: the summary's ``remedy``)."""

from __future__ import annotations

from tailwise.methodology.remedies import (
    AddConnections,
    Advice,
    FreeHeldSlots,
    HeldSlots,
    Longer,
    OverloadedAgents,
    QuieterClient,
    RaiseMaxTime,
    Remedy,
    RunLonger,
    RunToEnd,
    Setting,
)

_LONGER = {
    Longer.SENDS: "run longer so that enough sends are kept",
    Longer.PLAIN: "run longer (--max-time or --duration)",
    Longer.DECAY: "run longer: the correlation of the samples must decay within the run (--max-time or --duration)",
    Longer.CORRELATION: "run longer (--max-time or --duration), so that the correlation ends within the run",
    Longer.SAMPLES: "run longer (--max-time or --duration) or at a higher --rate",
}

_ADVICE = {
    Advice.NOTHING_SENT: "check that the target answers and that the run lasted",
    Advice.CLIENT_COULD_NOT_SEND: "the client could not send on time: add --threads, --conns or --outstanding, or "
                                  "lower --rate",
    Advice.SERVER_BEHIND: "the server did not keep up with the rate: lower --rate or give the server more capacity",
    Advice.FIX_SERVER: "the target failed requests: they are in the tail at the time they waited, but a failing "
                       "server is not measured — fix the server or lower the rate",
    Advice.CLIENT_BEHIND_SCHEDULE: "the client fell behind its schedule: add --threads or --conns, use --poll spin, "
                                   "or lower --rate",
    Advice.CLIENT_CONTENTION: "the sends did not follow the schedule (bursts, or a closed loop): check for CPU "
                              "contention on the client (other processes, --threads above the free cores), or add "
                              "--conns / --outstanding",
    Advice.FIND_PAUSE: "something paused the server or the client during the run (a stall, a GC, another process): "
                       "find it (tailwise doctor) and measure again",
    Advice.WARM_UP_LONGER: "the latency level changed during the run: let the server warm up longer (--warmup), or "
                           "find what changed (other load on the server or client machine)",
    Advice.FIND_UNANSWERED: "find why requests went unanswered (the errors check), or raise --timeout",
    Advice.LOOSEN_PRECISION: "the tail is too variable for this precision in the time allowed: widen --ci, raise "
                             "--max-time, or choose a lower --percentile",
    Advice.TARGET_GONE: "the target stopped answering (the error above), not the client: run again once it is back",
    Advice.REPORT_OVERSHOOT: "the schedule overshot: report this as a bug",
    Advice.REPORT_NO_WINDOW: "report this as a bug",
    Advice.REPORT_SCHEDULE_MISFIT: "the intended schedule did not fit the requested process: report this as a bug",
    Advice.REPORT_SAMPLES: "the samples do not represent the requests: report this with the --out directory",
    Advice.FIND_LOSS: "lower --rate, or the network function (or the path to it) drops packets: packets.csv in the "
                      "--out directory has the loss per 100 ms; --max-loss sets what is tolerated",
}


def remedy_words(r: Remedy) -> str:
    """The remedy as the user reads it."""
    match r:
        case AddConnections(conns=conns, outstanding=outstanding):
            return f"use --conns {conns} or more (at --outstanding {outstanding}), or raise --outstanding"
        case OverloadedAgents(addresses=addresses):
            return f"add agents or threads on {', '.join(addresses)}, or lower --rate"
        case QuieterClient(setting=setting, p=p):
            return client_words(setting, p)
        case RunLonger(why=why):
            return _LONGER[why]
        case FreeHeldSlots(held=held):
            return (f"{held_words(held)}, not a slow server or client: find why datagrams go unanswered (the target "
                    f"or the network drops them), lower --timeout so that each frees its slot sooner, or raise "
                    f"--conns or --outstanding")
        case RunToEnd(measured_s=s):
            return f"the run was interrupted after {s:.1f} s: run it to its end"
        case RaiseMaxTime(seconds=s, or_higher_rate=rate):
            return f"raise --max-time above {s:g} s (this run used all of it)" + (" or use a higher --rate" if rate else "")
        case Advice():
            return _ADVICE[r]
    raise TypeError(f"not a remedy: {r!r}")


def client_words(setting: Setting | None, p: float) -> str:
    """What helps when the client's own stalls widen an interval, leaving out what is already so."""
    st = setting or Setting()
    steps = []
    if st.poll != "spin":
        steps.append("use --poll spin (a sleeping engine thread is woken late)")
    if not st.own_cpus:
        steps.append("give the engine threads CPUs of their own (fewer --threads or --workers, no other load)")
    if not st.isolated:
        cpus = f" ({','.join(map(str, st.engine_cpus))})" if st.engine_cpus else ""
        steps.append(f"a quieter core for the engine{cpus}: isolate it (isolcpus; see `tailwise doctor`: isolation) or "
                     "use a host with less other load (`tailwise doctor`: other-load)")
    else:
        steps.append("a host with less other load (the kernel keeps other tasks off the engine's CPUs already)")
    if st.local_target and not st.builtin:
        steps.append("the target on another machine")
    return "; ".join(steps) + f"; or a wider --ci or a lower --percentile than p{p:g}"


def held_words(h: HeldSlots) -> str:
    """What held the slots, with the figures (the stop reason and the rate checks' remedy say it)."""
    return (f"the slots were held by unanswered datagrams: {h.lost:,} got no reply and each held its slot for "
            f"--timeout {h.timeout_s:g} s, {h.held:,.0f} of the {h.slots} slots ({h.conns} conns × {h.outstanding} "
            f"outstanding) on average")
