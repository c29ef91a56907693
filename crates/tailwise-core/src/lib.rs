//! # tailwise-core: the data plane of tailwise
//!
//! tailwise measures the open-loop tail latency of µs-scale network services. This crate is the
//! part that must be fast and precise; the statistics and the user interface live in Python
//! (`python/tailwise/`) and reach this crate through the thin PyO3 module in `crates/tailwise-py`.
//!
//! | module | what it holds |
//! |---|---|
//! | [`time::clock`] | the monotonic ns clock, spinning, precise sleeps (timer slack 1 ns) |
//! | [`time::stall`] | stalls (≥ 200 µs) of the spinning engine and server threads, logged and turned into per-request flags |
//! | [`load::dist`] | service-time / gap distributions parsed from `fixed:10us`, `exp:10us`, … |
//! | [`load::schedule`] | precomputed open-loop arrival schedules (Poisson, fixed, uniform or log-normal gaps) |
//! | [`load::workload`] | keys, key and value sizes (fixed, uniform, GEV, generalised Pareto, Facebook ETC/USR), Zipf popularity, get:set mix |
//! | [`record::histogram`] | per-thread HDR histograms of the whole run (latency, send lag), merged by adding |
//! | [`record::interval`] | every-request histograms per 100 ms of intended time, handed over at each snapshot |
//! | [`record::sample`] | the raw sample store (48-byte rows) and the row layout Python reads |
//! | [`record::flags`] | per-request flags of a sample, by name |
//! | [`record::sampler`] | the random 1-in-k choice of the requests kept raw |
//! | [`protocol`] | client codecs and server-side parsers, one module per protocol family |
//! | [`io::poll`] | epoll with ns timeouts, the eventfd waker |
//! | [`io::socket`] | non-blocking socket read, write and connect; socket options |
//! | [`io::route`] | the interface the kernel routes a target through |
//! | [`io::cpu`] | CPU pinning |
//! | [`stamp`] | kernel and NIC timestamps on sockets: SO_TIMESTAMPING on a [`stamp::StampClock`], stamps read from control messages and the error queue |
//! | [`stamp::nic`] | NIC hardware timestamps: whether a driver can stamp every packet, switching it to, its PTP clock's offset |
//! | [`packet`] | packet mode (`udp+flow://`): sequenced UDP flows through a network function, sendmmsg/recvmmsg, loss, reordering, duplicates |
//! | [`engine`] | the open-loop load generator: threads, connections (reconnected when the target closes them), backlog, matching replies, snapshots, pauses |
//! | [`server`] | the synthetic server behind `tailwise serve` |
//! | [`preload`] | `tailwise load`: store every key of a workload before a run |
//! | [`error`] | the typed problems every public function returns ([`error::Problem`]: problem, remedy, kind) |
//! | [`model`] | queueing-model ground truth: M/G/1 (Lindley) and M/G/k (Kiefer–Wolfowitz) sojourn times |
//!
//! ## Concepts
//! * **Intended send time**: each request has a time fixed in advance by the schedule. Latency is
//!   counted from it, so a client that falls behind is charged for it (no coordinated omission).
//! * **Send lag**: actual − intended send time, kept in its own histogram: it is the client's
//!   own error, reported rather than hidden.
//! * **Histograms and samples**: every request goes into HDR histograms (mergeable across threads
//!   and agents); a random 1-in-k subset, chosen when each request falls due, is kept raw (48 bytes
//!   each) for the statistics, which need the samples rather than bucketed counts.
//! * **Censoring**: a request without a reply (timed out from its intended time, never sent, lost
//!   with its connection, outstanding at a snapshot or at the end) is recorded at the time it has
//!   waited, flagged: a lower bound of its latency. Nothing is dropped, so a freeze of the target
//!   can only push the tail up.
//! * **Stalls**: a spinning thread that sees a gap of ≥ 200 µs between two clock reads did not
//!   run. The engine flags, per request and by the clock, the requests due during its own stalls
//!   (the statistics leave them out and count them) and those outstanding across one (kept, marked
//!   as possibly inflated by the part of the stall they span).

pub mod engine;
pub mod error;
pub mod io;
pub mod load;
pub mod model;
pub mod packet;
pub mod preload;
pub mod protocol;
pub mod record;
pub mod server;
pub mod stamp;
pub mod time;
