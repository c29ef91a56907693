"""One measurement: the built-in server, the target's counters, a point measured end to end, calibration."""
