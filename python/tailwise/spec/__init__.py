"""What to measure: every setting parsed once (flags over a workload file over defaults) and validated."""
