//! Which requests are kept raw: a random 1-in-k subset, chosen when each request falls due.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Decides, per request, whether it is kept raw: Bernoulli(1/k), drawn by skipping a geometric
/// number of requests so that the cost is one RNG draw per *kept* request.
pub struct Sampler {
    k: u64,
    rng: SmallRng,
    skip: u64,
}

impl Sampler {
    pub fn new(k: u64, seed: u64) -> Sampler {
        let mut s = Sampler { k: k.max(1), rng: SmallRng::seed_from_u64(seed), skip: 0 };
        s.skip = s.draw_skip();
        s
    }
    fn draw_skip(&mut self) -> u64 {
        if self.k == 1 {
            return 0;
        }
        // Geometric(p = 1/k) failures before the next success, by inversion.
        let p = 1.0 / self.k as f64;
        let u: f64 = self.rng.random::<f64>();
        ((1.0 - u).ln() / (1.0 - p).ln()).floor() as u64
    }
    #[inline]
    pub fn take(&mut self) -> bool {
        if self.skip == 0 {
            self.skip = self.draw_skip();
            true
        } else {
            self.skip -= 1;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_keeps_one_in_k() {
        for k in [1u64, 5, 100] {
            let mut s = Sampler::new(k, 3);
            let n = 1_000_000u64;
            let kept = (0..n).filter(|_| s.take()).count() as f64;
            let expect = n as f64 / k as f64;
            // Binomial s.d. is sqrt(n p (1-p)); allow 5 s.d.
            let sd = (n as f64 * (1.0 / k as f64) * (1.0 - 1.0 / k as f64)).sqrt();
            assert!((kept - expect).abs() <= 5.0 * sd + 1e-9, "k {k}: kept {kept}");
        }
    }

    #[test]
    fn sampler_gaps_are_memoryless() {
        // Geometric gaps with p = 1/10 have mean k - 1 = 9 requests skipped and variance (1-p)/p².
        let mut s = Sampler::new(10, 9);
        let mut gaps = Vec::new();
        let mut run = 0u64;
        for _ in 0..2_000_000 {
            if s.take() {
                gaps.push(run as f64);
                run = 0;
            } else {
                run += 1;
            }
        }
        let m = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let v = gaps.iter().map(|g| (g - m) * (g - m)).sum::<f64>() / gaps.len() as f64;
        assert!((m - 9.0).abs() < 0.15, "mean gap {m}");
        assert!((v / 90.0 - 1.0).abs() < 0.05, "var {v}");
    }
}
