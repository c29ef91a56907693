"""This host: the facts every summary carries (CPUs, kernel, steal) and doctor's tuning knobs."""
