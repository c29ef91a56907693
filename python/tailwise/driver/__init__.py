"""The engine's Python driver: start the in-process Rust engine, take snapshots, pause, stop, finish."""
