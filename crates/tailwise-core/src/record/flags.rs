//! What a sample's `flags` say about it (bits; several may be set). [`ALL`] lists them by
//! name: the one table `tailwise._core.SAMPLE_FLAGS` exports and Python's `Flag` is built from.

/// Each flag a `pub const`, and all of them by name in [`ALL`], from one list.
macro_rules! flags {
    ($($(#[$doc:meta])* $name:ident = $value:expr;)*) => {
        $($(#[$doc])* pub const $name: u32 = $value;)*
        /// Every flag as (name, bit), in bit order.
        pub const ALL: &[(&str, u32)] = &[$((stringify!($name), $name)),*];
    };
}

flags! {
    /// The latency is a lower bound: the request had no reply (it is at least this late).
    CENSORED = 1;
    /// No reply within the timeout, counted from the intended send time.
    TIMEOUT = 1 << 1;
    /// Never sent: still waiting for a free connection at the timeout or at the end of the run.
    NEVER_SENT = 1 << 2;
    /// Lost with its connection (a reply that was not the protocol, a target that stayed away).
    FAILED = 1 << 3;
    /// Still outstanding when the samples were taken (a snapshot) or when the run was stopped.
    PENDING = 1 << 4;
    /// The server answered with an error.
    ERROR_REPLY = 1 << 5;
    /// Sent again on a new connection after its first one closed.
    RESENT = 1 << 6;
    /// Intended while its engine thread could not run (a stall of ≥ 200 µs), or in the guard
    /// after it while the backlog the stall built was being sent: the client's delay, decided by
    /// the clock — the statistics keep these as intervals (python/tailwise/stats/bounds.py).
    ENGINE_STALL = 1 << 8;
    /// Outstanding across a stall of its engine thread: its latency may include up to
    /// `inflation_ns` of the client's own pause (it stays in; it can only be overstated).
    INFLATED = 1 << 9;
    /// The reply time is the kernel's receive stamp (else the user-space clock after the read).
    KERNEL_RX = 1 << 10;
    /// `tx_ns` is the kernel's transmit stamp of the send that carried the request.
    KERNEL_TX = 1 << 11;
    /// A set (memcached, Redis); a request without it is a get (issue 36: latency per kind).
    SET = 1 << 12;
}

/// The row keeps the flags in 16 bits (record/sample.rs).
const _: () = {
    let mut i = 0;
    while i < ALL.len() {
        assert!(ALL[i].1 <= u16::MAX as u32, "a sample's flags are 16 bits");
        i += 1;
    }
};

/// A request's flags as the row keeps them (16 bits; every flag fits, checked above).
#[inline]
pub fn in_row(flags: u32) -> u16 {
    flags as u16
}

#[cfg(test)]
mod tests {
    use crate::record::flags;

    #[test]
    fn flags_are_distinct_single_bits_in_order() {
        let mut seen = 0u32;
        for (name, bit) in flags::ALL {
            assert_eq!(bit.count_ones(), 1, "{name}");
            assert_eq!(seen & bit, 0, "{name} reuses a bit");
            assert!(*bit > seen, "{name} out of bit order");
            seen |= bit;
        }
        assert_eq!(flags::ALL.len(), 12);
        assert_eq!(flags::ALL[0], ("CENSORED", flags::CENSORED));
        assert_eq!(flags::ALL[11], ("SET", flags::SET));
        assert!(seen <= u16::MAX as u32, "flags fit the row's 16 bits");
    }
}
