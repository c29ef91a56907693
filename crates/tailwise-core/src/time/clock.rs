//! Time: one clock for the whole data plane.
//!
//! All timestamps are `CLOCK_MONOTONIC` nanoseconds read through the vDSO (~40 ns on the project's
//! machine: `tailwise calibrate` reports it); a raw TSC read would save ~10 ns but needs calibration and is not
//! comparable with kernel timestamps. Sleeping uses `clock_nanosleep`/`epoll_pwait2` with the
//! thread's timer slack set to 1 ns: the default 50 µs slack overshoots every sleep by ~56 µs.

/// Nanoseconds of `CLOCK_MONOTONIC`.
#[inline(always)]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds of `CLOCK_REALTIME` (the clock of the kernel's software packet stamps).
#[inline(always)]
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_REALTIME − CLOCK_MONOTONIC` in ns (the kernel's software stamps are on realtime):
/// [`offset_to_monotonic_ns`] of realtime, ~40 ns of error here. Realtime moves with NTP, so a
/// user re-reads it now and then (the engine: every millisecond).
pub fn realtime_offset_ns() -> i64 {
    offset_to_monotonic_ns(realtime_ns)
}

/// `clock − CLOCK_MONOTONIC` in ns for another clock read by `read`, from the tightest of three
/// bracketed reads (monotonic, `read`, monotonic): the error is at most half the bracket.
pub fn offset_to_monotonic_ns(read: impl Fn() -> u64) -> i64 {
    let mut best = (u64::MAX, 0i64);
    for _ in 0..3 {
        let a = now_ns();
        let r = read();
        let b = now_ns();
        if b - a < best.0 {
            best = (b - a, r as i64 - (a + (b - a) / 2) as i64);
        }
    }
    best.1
}

/// What one clock read costs, in ns: the median over 101 batches of `per_batch` back-to-back
/// reads of CLOCK_MONOTONIC (`now_ns`, every data-plane stamp) and of CLOCK_REALTIME (the kernel
/// stamps' clock). The median keeps a preemption during a batch out.
pub fn clock_cost_ns(per_batch: u32) -> (f64, f64) {
    let per_batch = per_batch.max(1);
    let batch = |read: fn() -> u64| {
        let mut costs: Vec<f64> = (0..101)
            .map(|_| {
                let a = now_ns();
                let mut sink = 0u64;
                for _ in 0..per_batch {
                    sink = sink.wrapping_add(read());
                }
                std::hint::black_box(sink);
                (now_ns() - a) as f64 / per_batch as f64
            })
            .collect();
        costs.sort_by(|a, b| a.total_cmp(b));
        costs[50]
    };
    (batch(now_ns), batch(realtime_ns))
}

/// Busy-wait until `deadline_ns` (monotonic). Sub-µs precise while the thread is not preempted.
#[inline]
pub fn spin_until(deadline_ns: u64) {
    while now_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

/// Busy-wait for `ns` nanoseconds: the synthetic server's "service time".
#[inline]
pub fn spin_for(ns: u64) {
    if ns > 0 {
        spin_until(now_ns() + ns);
    }
}

/// Set this thread's timer slack to 1 ns so that timed waits wake when asked.
pub fn set_timer_slack_1ns() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long; no pointers involved.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Sleep until `deadline_ns` with `clock_nanosleep(TIMER_ABSTIME)`, then spin the last `spin_ns`.
pub fn sleep_until(deadline_ns: u64, spin_ns: u64) {
    let wake = deadline_ns.saturating_sub(spin_ns);
    if now_ns() < wake {
        let ts = libc::timespec {
            tv_sec: (wake / 1_000_000_000) as libc::time_t,
            tv_nsec: (wake % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: valid timespec; a null remainder is allowed with TIMER_ABSTIME.
        unsafe {
            libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
        };
    }
    spin_until(deadline_ns);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_read_costs_something_and_less_than_a_microsecond() {
        let (mono, real) = clock_cost_ns(1_000);
        // vDSO reads: ~40 ns on the project's machine; a syscall fallback ~220 ns.
        assert!(mono > 1.0 && mono < 1_000.0, "{mono}");
        assert!(real > 1.0 && real < 1_000.0, "{real}");
    }

    #[test]
    fn monotonic_and_spins_at_least_as_asked() {
        let a = now_ns();
        spin_for(20_000);
        let b = now_ns();
        assert!(b >= a + 20_000);
    }

    #[test]
    fn stall_accounting_is_consistent() {
        let s = measure_stalls(2_000_000, 1_000);
        assert!(s.lost_ns <= s.duration_ns + s.max_ns);
        assert!(s.count == 0 || s.max_ns > 1_000);
    }

    #[test]
    fn sleep_until_never_returns_early() {
        set_timer_slack_1ns();
        let d = now_ns() + 200_000;
        sleep_until(d, 10_000);
        assert!(now_ns() >= d);
    }
}

/// What a spinning thread loses to preemption: gaps between consecutive clock reads above a
/// threshold. On this machine kind a lone pinned spinner loses ~1 % of its time in > 5 µs gaps
/// (timer ticks and host preemption of a nested VM): a floor under every send-lag figure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stalls {
    pub duration_ns: u64,
    pub count: u64,
    pub lost_ns: u64,
    pub max_ns: u64,
}

/// Spin for `duration_ns` on the calling thread, counting gaps longer than `threshold_ns`.
pub fn measure_stalls(duration_ns: u64, threshold_ns: u64) -> Stalls {
    let start = now_ns();
    let end = start + duration_ns;
    let mut last = start;
    let mut s = Stalls { duration_ns, ..Default::default() };
    loop {
        let t = now_ns();
        let gap = t - last;
        last = t;
        if gap > threshold_ns {
            s.count += 1;
            s.lost_ns += gap;
            s.max_ns = s.max_ns.max(gap);
        }
        if t >= end {
            return s;
        }
    }
}
