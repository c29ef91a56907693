//! The load offered: what is sent and when, described before a run and drawn from inside it.
//!
//! | module | what it holds |
//! |---|---|
//! | [`dist`] | service-time / gap distributions parsed from `fixed:10us`, `exp:10us`, … |
//! | [`schedule`] | precomputed open-loop arrival schedules (Poisson, fixed, uniform or log-normal gaps) |
//! | [`workload`] | keys, key and value sizes, Zipf popularity, get:set mix; the `Op` each request sends |

pub mod dist;
pub mod schedule;
pub mod workload;
