//! Per-thread recording: every request into histograms, a random 1-in-k subset raw.
//!
//! As in HdrHistogram_rust, each engine thread owns its recorder and nothing is shared while the
//! timing loop runs; the threads' histograms are merged (added) — never their percentiles
//! averaged. The raw samples are what the statistics use: order-statistic confidence intervals
//! need independent draws, and a random 1-in-k subset of the requests, chosen when each request
//! falls due, is the standard way to get them (Lancet §4.3).
//!
//! *Every* request ends in the histograms and, if sampled, in the samples — answered ones with
//! their latency, the others (timed out, never sent, lost with their connection, still
//! outstanding) *censored*: with the time they have been outstanding since their intended send,
//! a lower bound of their latency, flagged so. A freeze can therefore only push the tail up.
//!
//! Besides the whole-run histogram, [`Intervals`](interval::Intervals) keeps one histogram per
//! 100 ms of *intended* send time, so that the coordinator can read the every-request distribution
//! over exactly the window of intended times its statistics used (the `consistency` check).
//!
//! | module | what it holds |
//! |---|---|
//! | [`histogram`] | the whole-run histograms (1 ns–1 h, 3 digits) every thread keeps, their V2 encoding |
//! | [`linear`] | packet mode: every answered packet at 100 ns (KBNets'17), 0–10 ms, merged by adding |
//! | [`interval`] | every-request histograms per 100 ms of intended time (2 digits), done and pending-at-snapshot |
//! | [`sample`] | a kept request ([`sample::Sample`], 48 bytes), the chunked store, the row layout Python reads |
//! | [`flags`] | what a sample's flags say, by name |
//! | [`sampler`] | the random 1-in-k choice of the requests kept raw |
//! | [`thin`] | the kept rows thinned by the statistics' own keys, for a caller that bounds them |

pub mod flags;
pub mod histogram;
pub mod interval;
pub mod linear;
pub mod sample;
pub mod sampler;
pub mod thin;
