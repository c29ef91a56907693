//! The open-loop engine.
//!
//! `threads` native threads (no async runtime, no GIL), each pinned to a CPU where allowed, each
//! with its own share of the connections and of the rate. A thread precomputes its arrival
//! schedule and, in its loop, (1) moves every due intended time into a FIFO backlog, (2) hands
//! backlog entries to connections with fewer than `outstanding` requests in flight, (3) writes
//! each connection's new requests with one syscall, stamping the actual send time, and (4) polls
//! for replies, matching each to the oldest request in flight on its connection.
//!
//! Latency is *reply time − intended send time*: a request delayed by the client (backlog, a full
//! connection, preemption) is charged for the delay, so the tool cannot hide its own or the
//! server's stalls (coordinated omission). The send lag, *actual − intended*, is kept on its own.
//! A request without a reply is never dropped: it is recorded *censored*, at the time it has been
//! outstanding (see `thread.rs` for every way a request can end).
//!
//! While the run goes on, [`Engine::take`] asks every thread for a snapshot: each hands over its
//! samples and interval histograms and reports what is outstanding at that instant, so that the
//! coordinator analyses a consistent picture in which a freeze still going on is already visible.
//!
//! Busy-poll mode spins on `epoll_wait(0)`; blocking mode sleeps until the next send less the
//! thread's measured wake-up lateness (time/wake.rs), then spins (timer slack 1 ns); a reply wakes
//! it. With `replies_wait` (`--poll lean`) a reply whose kernel stamp is exact however late it is
//! read waits for the margin before the next send instead (io.rs, `read_then_sleep`).
//!
//! | module | what it holds |
//! |---|---|
//! | `control` | `Engine`: start, take, pause, resume, stop, join |
//! | `connect` | the sockets connected at the start, per thread |
//! | `shared` | what the threads and the caller share: flags, progress, harvest, counters |
//! | `thread` | the one timing loop, generic over its `Path`: the request path or the packet path |
//! | `requests`, `io`, `recover` | the request path: backlog, connections, writes, replies, reconnects |
//! | `setup` | what a connection says before any request (Redis AUTH, SELECT) and its replies |
//! | `tls` | TLS on the request path's connections: configuration, handshakes, records |
//! | `tls_cost` | what `tls`'s record protection costs on this host, client and server in memory (`calibrate`) |
//! | `busy`, `finish`, `handover`, `reach`, `req`, `rx_clock`, `stalls`, `tx_stamps`, `conn` | the loop's parts |

pub(crate) mod busy;
mod config;
mod conn;
mod connect;
mod control;
pub(crate) mod finish;
pub(crate) mod handover;
mod io;
mod problem;
pub(crate) mod reach;
mod recover;
pub(crate) mod req;
mod requests;
pub(crate) mod rx_clock;
pub mod setup;
mod shared;
pub(crate) mod stalls;
#[cfg(any(test, feature = "test-hooks"))]
mod test_hook;
pub(crate) mod thread;
pub mod tls;
pub mod tls_cost;
mod tx_stamps;

pub use config::{ConfigError, EngineConfig, Probe, TestStall, Timestamps};
pub use control::{Engine, EngineResult, Taken};
pub use tls::{TlsConfig, TlsStats};
pub(crate) use connect::Sock;
pub use problem::{Abort, EngineError, Failure, IoErr, Killed, Lost, NoReply};
pub(crate) use shared::{Role, Shared};
pub use shared::{count_reason, Counters, Snapshot};

pub use stalls::STALL_NS;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod stamp_tests;
#[cfg(test)]
mod setup_tests;
#[cfg(test)]
mod tls_tests;
