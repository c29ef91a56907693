"""The rows the engine keeps, one per sampled request: their layout and their flags.

Both are the engine's own (``_core.SAMPLE_FIELDS``, ``_core.SAMPLE_FLAGS``); this module only gives
them numpy's and Python's names, so that every layer reads rows the same way.
"""

from __future__ import annotations

import enum

import numpy as np

from tailwise import _core

#: One row per kept request, as the engine writes it (record/sample.rs, `Sample`; the layout is the
#: engine's own, ``_core.SAMPLE_FIELDS``): times in ns since the engine's start; sent_ns/rx_user_ns
#: are the user-space clock around the system calls, tx_ns the kernel's transmit stamp (0: none);
#: latency_ns from the intended send time, to the kernel's receive stamp when flags has KERNEL_RX,
#: else to rx_user_ns (for a censored sample, the time it had been outstanding: a lower bound);
#: busy_from_ns, the latest instant at or before the intended time at which every engine thread was
#: certified idle (nothing before it can have delayed this request at a FIFO target serving only this
#: client: engine/busy.rs); flags (``Flag``, 16 bits); request, which request it was (its index in
#: the run's requests, 0 with one; issue 36: flags and request share what was a 32-bit flags
#: field); for an ``INFLATED`` sample, inflation_ns: how much of its latency may be its engine
#: thread's own stall; thread, the engine thread that sent it; slot_wait_ns,
#: how long it was due while every slot of its thread was held by the target (never more: the
#: client's own lateness is sent_ns − intended_ns − slot_wait_ns; 0 in packet mode).
SAMPLE_DTYPE = np.dtype({"names": [name for name, _, _ in _core.SAMPLE_FIELDS],
                         "offsets": [offset for _, offset, _ in _core.SAMPLE_FIELDS],
                         "formats": [code for _, _, code in _core.SAMPLE_FIELDS],
                         "itemsize": _core.SAMPLE_BYTES})

#: A sample's flags, the engine's own bits (``_core.SAMPLE_FLAGS``; what each means:
#: crates/tailwise-core/src/record/flags.rs): CENSORED (no reply: the latency is a lower
#: bound), TIMEOUT, NEVER_SENT, FAILED (lost with a connection that failed for good), PENDING
#: (outstanding at a snapshot or the stop), ERROR_REPLY, RESENT, ENGINE_STALL (intended while its
#: engine thread could not run, or in the guard after), INFLATED (outstanding across an engine
#: stall: may include up to inflation_ns of it), KERNEL_RX (the reply time is the kernel's receive
#: stamp), KERNEL_TX (tx_ns is the kernel's transmit stamp of its send), SET (a set: memcached,
#: Redis; without it a get).
Flag = enum.IntFlag("Flag", _core.SAMPLE_FLAGS, module=__name__, qualname="Flag")


def decode_samples(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype=SAMPLE_DTYPE)
