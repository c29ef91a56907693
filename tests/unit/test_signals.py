"""Stop signals (python/tailwise/signals.py): two that come while the main thread is inside one long
C call, where Python runs its handler once, are still two — the first stops, the second says that
the results are being written."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time

from tailwise import signals


def _two_sigints_during_one_c_call() -> None:
    def send() -> None:
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.03)  # a double Ctrl-C
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=send)
    t.start()
    # One C call that returns to the interpreter only when it is done: ~0.5 s here, ~0.1 s at the
    # least on a machine 5× faster; both signals come within its first 0.1 s.
    hashlib.pbkdf2_hmac("sha256", b"x", b"y", 3_000_000)
    t.join()


def test_a_double_sigint_inside_one_c_call_is_two_signals(capfd):
    stopped = []
    with signals.handled():
        signals.attach(lambda: stopped.append(True))
        _two_sigints_during_one_c_call()
        time.sleep(0.01)  # the handler runs at the next bytecode
        assert signals.received() == signal.SIGINT and stopped == [True]
    err = capfd.readouterr().err
    assert err.count("still finishing what was measured") >= 1, err
    # The previous handler and wakeup fd are back.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.set_wakeup_fd(-1) == -1
