"""Is the machine quiet enough for a comparison that needs one (the model, a capacity)? Measured,
not guessed: each CPU for 1 s."""

import os

from tailwise import _core

#: A CPU that loses more than this share of its time to stalls > 5 µs is not quiet: a quiet one
#: here loses 1–2 % (BENCHMARKS.md); on a spell at 2.4–3.7 % the same machine's loopback p50 rose
#: from ~10 to 22 µs and bimodal:10us at 50 % load measured p90 193 µs against the model's 61 µs.
#: The model comparisons are then skipped, before the runs or when one fails.
NOISY = 0.025


def machine_noise() -> str | None:
    """Measure each CPU for 1 s: why the machine is too noisy to compare with the model, or None."""
    for cpu in sorted(os.sched_getaffinity(0)):
        st = _core.measure_stalls(1_000_000_000, 5_000, cpu)
        lost = st["lost_ns"] / st["duration_ns"]
        if lost > NOISY:
            return (f"CPU {cpu} lost {lost:.1%} of 1 s to other tasks ({st['count']:,} stalls > 5 µs; a quiet one "
                    f"loses 1–2 %, more than {NOISY:.1%} skips)")
    return None
