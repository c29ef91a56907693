//! Time: the one clock of the data plane, and the stalls of its spinning threads.
//!
//! | module | what it holds |
//! |---|---|
//! | [`clock`] | the monotonic ns clock, other clocks' offsets to it, spinning, precise sleeps (timer slack 1 ns) |
//! | [`stall`] | stalls (≥ 200 µs) of the spinning engine and server threads, logged for the engine to flag requests by |
//! | [`wake`] | how late a timed wait wakes: a high quantile of a thread's recent overshoots, the margin `--poll block` wakes early by |

pub mod clock;
pub mod stall;
pub mod wake;
