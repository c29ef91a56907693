"""stats: the CPU one methodology round costs (`analyse`, every check) on 10k, 100k and 1M
samples, timed in process as bench/methodology/run.py does (its round_cost)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from common import Ctx, aggregate, cell, md_table, noise_summary, noise_text, repeated

_spec = importlib.util.spec_from_file_location(
    "methodology_run", Path(__file__).resolve().parents[1] / "methodology" / "run.py")
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
round_cost = _mod.round_cost

SIZES = (10_000, 100_000, 1_000_000)


def run(ctx: Ctx) -> dict:
    rng = np.random.default_rng(1)
    runs = repeated(ctx, [(f"{n:,}", lambda n=n: {"cpu_s": round_cost(n, rng)}) for n in SIZES])
    res = {"round_cpu_s": {k: {**aggregate(rs, ("cpu_s",)), "runs": rs} for k, rs in runs.items()}}
    res["noise"] = noise_summary([r for rs in runs.values() for r in rs])
    res["noise_text"] = noise_text(res["noise"])
    res["table"] = md_table(["samples", "CPU s for one methodology round"],
                            [[k, cell(a["cpu_s"], 3)] for k, a in res["round_cpu_s"].items()])
    return res
