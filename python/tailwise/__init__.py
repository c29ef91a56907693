"""tailwise: open-loop tail-latency measurement that says whether its numbers can be trusted."""

import os

# The statistics here run on one thread; an idle OpenBLAS pool of spinning helper threads would
# only compete with the pinned engine and server threads for CPUs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def __getattr__(name: str):
    # The built core's version is the package's (maturin takes it from Cargo.toml), read without
    # importlib.metadata's scan of site-packages (~15 ms of every command's start).
    if name == "__version__":
        from tailwise._core import __version__

        return __version__
    # load_results pulls in pandas: only notebooks that ask for it pay.
    if name == "load_results":
        from tailwise.results.dataset import load_results

        return load_results
    raise AttributeError(f"module 'tailwise' has no attribute {name!r}")
