"""SIGINT, SIGTERM and SIGHUP, alike, for the commands that measure (`run`, `sweep`).

The handler never raises: an exception thrown at an arbitrary point (the default SIGINT
behaviour) could land in the write of a results directory and lose what was measured, and the
default SIGTERM/SIGHUP kill the process outright. Instead the first signal is recorded and stops
the engine of the running measurement (if one runs), which then ends as an interrupted run and is
written as usual; code between measurements asks ``check()`` and stops there. A later signal only
says that the results are being written. The command exits with 128 + the first signal's number.

Python runs a handler between bytecodes of the main thread, once for however many of a signal came
meanwhile: a double Ctrl-C while the main thread is in one long C call (loading a library's
extension) would be one. So every signal is also written to a wakeup pipe (``signal.set_wakeup_fd``:
a byte each, in C), and the handler takes each byte as one signal.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A stop signal came before anything was measured (raised by ``check``, never by the handler).
    A KeyboardInterrupt, so that code which already stops cleanly on Ctrl-C stops on it too."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    signum: int | None = None
    #: Stops the running measurement's engine (``Session.stop``); None between measurements.
    stop: Callable[[], None] | None = None
    installed: bool = False
    #: The wakeup pipe's read end (-1: none): one byte per signal delivered.
    wakeup: int = -1


_state = _State()


def _say(line: str) -> None:
    # os.write, not print: the handler may run while the main thread is inside a write to
    # sys.stderr, and a buffered stream must not be re-entered.
    try:
        os.write(2, f"tailwise: {line}\n".encode())
    except OSError:
        pass


def _delivered(signum: int) -> list[int]:
    """The signals delivered since the last call (from the wakeup pipe), at least this one."""
    got = b""
    if _state.wakeup >= 0:
        try:
            while chunk := os.read(_state.wakeup, 64):
                got += chunk
        except (BlockingIOError, OSError):
            pass
    # None there: its byte is not written yet (the C handler marks the signal first, and may run on
    # another thread), or an earlier call took it. Handled as one either way: a lost first signal
    # would not stop the run, and one handled twice only says "still finishing" once more.
    return [b for b in got if b in STOP_SIGNALS] or [signum]


def _handler(signum: int, _frame) -> None:
    for one in _delivered(signum):
        _one(one)


def _one(signum: int) -> None:
    name = signal.Signals(signum).name
    if _state.signum is None:
        _state.signum = signum
        if _state.stop is not None:
            _state.stop()  # stop sending now; the measurement ends as interrupted and is written
        return
    _say(f"{name}: still finishing what was measured (the results are being written); "
         f"tailwise ends when that is done")


@contextmanager
def handled() -> Iterator[None]:
    """Handle the stop signals for the duration of a command (the previous handlers after)."""
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    _state.signum, _state.stop, _state.installed = None, None, True
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        previous_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        _state.wakeup = r
    except ValueError:  # not the main thread: handled as Python delivers them
        previous_fd = None
    for s in STOP_SIGNALS:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if previous_fd is not None:
            signal.set_wakeup_fd(previous_fd)
        _state.wakeup = -1
        os.close(r)
        os.close(w)
        _state.stop, _state.installed = None, False


def received() -> int | None:
    """The first stop signal received during the command, or None."""
    return _state.signum


def name(signum: int | None) -> str:
    return signal.Signals(signum or signal.SIGINT).name


def exit_code(default: int = 130) -> int:
    return 128 + _state.signum if _state.signum else default


def check() -> None:
    """Between measurements: stop here (raise ``Interrupted``) if a stop signal came."""
    if _state.signum is not None:
        raise Interrupted(_state.signum)


def attach(stop: Callable[[], None]) -> None:
    """A measurement started: a stop signal from now on calls ``stop``; one that came before (while
    it was starting) calls it at once."""
    _state.stop = stop
    if _state.signum is not None:
        stop()


def detach() -> None:
    _state.stop = None
