//! How late a timed wait wakes, measured as it happens: `--poll block` sleeps until this much
//! before a send and spins only the rest (engine/thread.rs), instead of a fixed margin.
//!
//! On the project's machine a 1 ns-slack sleep overshoots by ~6–18 µs at the median and ~30 µs at
//! p90 depending on the host's load (a nested VM: the timer interrupt is the hypervisor's), with
//! a tail of preemptions in ms. A fixed 50 µs spin before every send cost ~50 µs of CPU per
//! request at 10k req/s (issue 23); waking at a high quantile of the thread's own recent
//! overshoots spins only their spread, and follows the host as its load changes.

/// Recent overshoots kept (a ring): 64 wake-ups, a few ms at the rates block mode serves.
pub const WINDOW: usize = 64;
/// The estimate is this quantile of the window (nearest rank, in tenths): one send in ten may
/// wake after its time, late by the overshoot's excess over the estimate only.
const QUANTILE_TENTHS: usize = 9;
/// Below this many overshoots the estimate is `MAX_EARLY_NS`.
pub const MIN_SAMPLES: usize = 16;
/// Never wake earlier than this: the fixed margin the estimate replaced. An overshoot beyond it is
/// a preemption, not a timer's lateness, and waking earlier for it would spin most of each gap.
pub const MAX_EARLY_NS: u64 = 50_000;

/// A thread's recent wake-up overshoots and the margin they give.
#[derive(Clone, Debug)]
pub struct WakeLateness {
    recent: [u32; WINDOW],
    len: usize,
    next: usize,
    early: u64,
}

impl Default for WakeLateness {
    fn default() -> Self {
        WakeLateness { recent: [0; WINDOW], len: 0, next: 0, early: MAX_EARLY_NS }
    }
}

impl WakeLateness {
    /// How long before a deadline to wake: the window's 90th percentile overshoot, at most
    /// `MAX_EARLY_NS` (and that until `MIN_SAMPLES` are known).
    #[inline]
    pub fn early_ns(&self) -> u64 {
        self.early
    }

    /// A timed wait asked to end at some instant ended `overshoot_ns` after it.
    pub fn record(&mut self, overshoot_ns: u64) {
        self.recent[self.next] = overshoot_ns.min(MAX_EARLY_NS) as u32;
        self.next = (self.next + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
        if self.len >= MIN_SAMPLES {
            let mut sorted = self.recent;
            let window = &mut sorted[..self.len];
            let rank = (self.len * QUANTILE_TENTHS).div_ceil(10) - 1;
            self.early = *window.select_nth_unstable(rank).1 as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(samples: impl IntoIterator<Item = u64>) -> WakeLateness {
        let mut w = WakeLateness::default();
        samples.into_iter().for_each(|s| w.record(s));
        w
    }

    #[test]
    fn the_fixed_margin_until_enough_wake_ups_are_known() {
        assert_eq!(WakeLateness::default().early_ns(), MAX_EARLY_NS);
        assert_eq!(fed([1_000; MIN_SAMPLES - 1]).early_ns(), MAX_EARLY_NS);
        assert_eq!(fed([1_000; MIN_SAMPLES]).early_ns(), 1_000);
    }

    #[test]
    fn the_ninetieth_percentile_of_the_window_by_nearest_rank() {
        // 0.5, 1.0, … 32 µs: the 58th of 64 (ceil(0.9 × 64)) is 29 µs.
        assert_eq!(fed((1..=64).map(|i| i * 500)).early_ns(), 29_000);
        // Order does not matter.
        assert_eq!(fed((1..=64).rev().map(|i| i * 500)).early_ns(), 29_000);
        // A partial window: 20 samples 1..=20 µs → the 18th.
        assert_eq!(fed((1..=20).map(|i| i * 1_000)).early_ns(), 18_000);
    }

    #[test]
    fn a_few_preemptions_do_not_move_it_and_many_are_capped() {
        let few = (0..64).map(|i| if i % 11 == 0 { 5_000_000 } else { 10_000 });
        assert_eq!(fed(few).early_ns(), 10_000);
        assert_eq!(fed([5_000_000; 64]).early_ns(), MAX_EARLY_NS);
    }

    #[test]
    fn only_the_latest_window_counts() {
        let busy_then_quiet = std::iter::repeat_n(40_000, 64).chain(std::iter::repeat_n(6_000, 64));
        assert_eq!(fed(busy_then_quiet).early_ns(), 6_000);
        let quiet_then_busy = std::iter::repeat_n(6_000, 64).chain(std::iter::repeat_n(40_000, 7));
        assert_eq!(fed(quiet_then_busy).early_ns(), 40_000);
        let quiet_then_busy = std::iter::repeat_n(6_000, 64).chain(std::iter::repeat_n(40_000, 6));
        assert_eq!(fed(quiet_then_busy).early_ns(), 6_000);
    }
}
