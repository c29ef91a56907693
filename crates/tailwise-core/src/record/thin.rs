//! Thinning the kept rows by the statistics' own keys (python/tailwise/stats/subsample.py): a
//! row's key is SplitMix64 of its intended time and its source (its engine thread plus the
//! agent's base: `AGENT_THREADS` × the agent's index), and at level `d` a row is kept iff its
//! key's top `d` bits are zero. The levels nest (a row kept at d + 1 is kept at d), so rows thinned
//! here at `d` are exactly those a subsample at `d` or above keeps: an agent whose engine thins
//! them tells its coordinator the level, which raises its own to it (agents/held.py, `Held`).
//!
//! Used only when the caller bounds the rows a thread gathers between two takes
//! ([`crate::engine::Engine::thin_rows`]): an agent whose keeper holds its rows for a silent
//! coordinator. Otherwise every sampled row is kept, as ever.

use super::sample::{Sample, SampleStore};

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
const M1: u64 = 0xBF58_476D_1CE4_E5B9;
const M2: u64 = 0x94D0_49BB_1331_11EB;

/// The highest level: 1 in 2⁶³.
pub const MAX_LEVEL: u32 = 63;

#[inline]
fn mix(z: u64) -> u64 {
    let z = z.wrapping_add(GOLDEN);
    let z = (z ^ (z >> 30)).wrapping_mul(M1);
    let z = (z ^ (z >> 27)).wrapping_mul(M2);
    z ^ (z >> 31)
}

/// A row's key, as `subsample.keys` computes it: source 0 keeps the time's own key.
#[inline]
pub fn key(intended_ns: u64, source: u64) -> u64 {
    let z = mix(intended_ns);
    if source == 0 {
        z
    } else {
        mix(z ^ source)
    }
}

/// Whether a subsample at `level` keeps the row of `key` (`subsample.kept`).
#[inline]
pub fn kept(key: u64, level: u32) -> bool {
    level == 0 || key >> (64 - level.min(MAX_LEVEL)) == 0
}

/// Whether a subsample at `level` keeps `s`, its source being its thread plus `base`.
#[inline]
pub fn keeps(s: &Sample, level: u32, base: u64) -> bool {
    level == 0 || kept(key(s.intended_ns, s.thread as u64 + base), level)
}

/// One thread's thinning: its level now, and the rows it may gather between two hand-overs
/// before it raises the level by one (and thins what it holds again).
#[derive(Clone, Copy, Debug)]
pub struct Thin {
    pub level: u32,
    /// Rows at most (`usize::MAX`: no bound, never thinned).
    pub bound: usize,
    /// Added to a row's thread for its key (the agent's index × `AGENT_THREADS`).
    pub base: u64,
}

impl Default for Thin {
    fn default() -> Thin {
        Thin { level: 0, bound: usize::MAX, base: 0 }
    }
}

impl Thin {
    #[inline]
    pub fn keeps(&self, s: &Sample) -> bool {
        keeps(s, self.level, self.base)
    }

    /// `store` has passed the bound: the level up by one (more while still over it), and the
    /// rows it holds thinned to it.
    pub fn raise(&mut self, store: &mut SampleStore) {
        while store.len() > self.bound && self.level < MAX_LEVEL {
            self.level += 1;
            let (level, base) = (self.level, self.base);
            store.retain(|s| keeps(s, level, base));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys python/tailwise/stats/subsample.py `keys` gives (computed there).
    #[test]
    fn keys_are_the_subsamples() {
        let times = [0u64, 1, 123_456_789, 1_000_000_000_000, (1 << 63) + 5];
        let want: [(u64, [u64; 5]); 3] = [
            (0, [0xe220a8397b1dcdaf, 0x910a2dec89025cc1, 0x223c74d93deb7679, 0xf321eacbea530978, 0x54a64d19d7534f30]),
            (1, [0x08b4fda8c892b50e, 0xe9fd6049d65af21e, 0xde59600dbe390422, 0xeb178fc5c9b6300d, 0xba16740d528574fa]),
            (65536 * 3 + 2, [0x5862499c9f38aa24, 0x3df40a6206a43336, 0xc76401911d89587a, 0x6cb7eb79d97dde1a, 0x051c71c031c8a97f]),
        ];
        for (source, keys) in want {
            for (t, k) in times.iter().zip(keys) {
                assert_eq!(key(*t, source), k, "time {t}, source {source}");
            }
        }
        assert!(kept(0xe220a8397b1dcdaf, 0) && !kept(0xe220a8397b1dcdaf, 1));
        assert!(kept(0x08b4fda8c892b50e, 4) && !kept(0x08b4fda8c892b50e, 5), "top four bits zero");
    }

    #[test]
    fn raising_keeps_one_level_of_rows_within_the_bound() {
        let mut store = SampleStore::default();
        for i in 0..10_000u64 {
            store.push(Sample { intended_ns: i * 1_000, thread: (i % 2) as u32, ..Default::default() });
        }
        let all: Vec<Sample> = store.iter().copied().collect();
        let mut thin = Thin { level: 0, bound: 1_000, base: 7 << 16 };
        thin.raise(&mut store);
        assert!(thin.level >= 3 && store.len() <= 1_000 && store.len() > 250, "{} at {}", store.len(), thin.level);
        // Exactly the rows of that level, in their order: a function of the key alone.
        let want: Vec<Sample> = all.iter().filter(|s| keeps(s, thin.level, 7 << 16)).copied().collect();
        assert_eq!(store.iter().copied().collect::<Vec<_>>(), want);
    }
}
