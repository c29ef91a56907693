//! # tailwise-core: the data plane of tailwise
//!
//! tailwise measures the open-loop tail latency of µs-scale network services. This crate is the
//! part that must be fast and precise; the statistics and the user interface live in Python
//! (`python/tailwise/`) and reach this crate through the thin PyO3 module in `crates/tailwise-py`.
//!
//! | module | what it holds |
//! |---|---|
//! | [`clock`] | the monotonic ns clock, spinning, precise sleeps (timer slack 1 ns) |
//! | [`stall`] | stalls (≥ 200 µs) of the spinning engine and server threads, logged for masking |
//! | [`dist`] | service-time / gap distributions parsed from `fixed:10us`, `exp:10us`, … |
//! | [`schedule`] | precomputed open-loop arrival schedules (Poisson, fixed, uniform or log-normal gaps) |
//! | [`workload`] | keys, key and value sizes (fixed, uniform, GEV, generalised Pareto, Facebook ETC/USR), Zipf popularity, get:set mix |
//! | [`recorder`] | per-thread HDR histograms, the random 1-in-k sampler, the raw sample store |
//! | [`preload`] | `tailwise load`: store every key of a workload before a run |
//! | [`protocol`] | client codecs and server-side parsers, one module per protocol family |
//! | [`net`] | epoll with ns timeouts, non-blocking socket I/O, CPU pinning |
//! | [`engine`] | the open-loop load generator: threads, connections, backlog, matching replies |
//! | [`server`] | the synthetic server behind `tailwise serve` |
//! | [`model`] | queueing-model ground truth: M/G/1 (Lindley) and M/G/k (Kiefer–Wolfowitz) sojourn times |
//!
//! ## Concepts
//! * **Intended send time**: each request has a time fixed in advance by the schedule. Latency is
//!   counted from it, so a client that falls behind is charged for it (no coordinated omission).
//! * **Send lag**: actual − intended send time, kept in its own histogram: it is the client's
//!   own error, reported rather than hidden.
//! * **Histograms and samples**: every reply goes into an HDR histogram (mergeable across threads
//!   and agents); a random 1-in-k subset is kept raw (24 bytes each) for the statistics, which
//!   need independent samples rather than bucketed counts.
//! * **Stalls**: a spinning thread that sees a gap of ≥ 200 µs between two clock reads did not
//!   run; it logs the interval so that the coordinator can leave out the requests it disturbed.

pub mod clock;
pub mod dist;
pub mod engine;
pub mod model;
pub mod net;
pub mod preload;
pub mod protocol;
pub mod recorder;
pub mod schedule;
pub mod workload;
pub mod server;
pub mod stall;
