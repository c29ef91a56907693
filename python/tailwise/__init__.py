"""tailwise: open-loop tail-latency measurement that says whether its numbers can be trusted."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tailwise")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+src"
