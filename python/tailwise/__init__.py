"""tailwise: open-loop tail-latency measurement that says whether its numbers can be trusted."""

import os
from importlib.metadata import PackageNotFoundError, version

# The statistics here run on one thread; an idle OpenBLAS pool of spinning helper threads would
# only compete with the pinned engine and server threads for CPUs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    __version__ = version("tailwise")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+src"


def __getattr__(name: str):
    # load_results pulls in pandas: only notebooks that ask for it pay.
    if name == "load_results":
        from tailwise.results.dataset import load_results

        return load_results
    raise AttributeError(f"module 'tailwise' has no attribute {name!r}")
