"""Errors the user can act on: each carries what went wrong and what to do about it.

The CLI prints them as one line and exits with status 2; no traceback reaches the user. The data
plane raises these same classes (crates/tailwise-py `raise`, from tailwise-core's typed
`error::Problem`: its kind picks the class), with the problem and the remedy as two values.
"""

from __future__ import annotations


class TailwiseError(Exception):
    """A problem with a message and a remedy."""

    exit_code = 2

    def __init__(self, problem: str, remedy: str = ""):
        super().__init__(problem)
        self.problem = problem
        self.remedy = remedy

    def line(self) -> str:
        return f"{self.problem}: {self.remedy}" if self.remedy else self.problem


class InputError(TailwiseError):
    """Bad input: a flag, a target, a distribution."""


class TargetError(TailwiseError):
    """The target cannot be reached or stopped behaving during the run."""


class HostError(TailwiseError):
    """The host cannot do what was asked: a clock, a NIC's stamps, a permission."""
