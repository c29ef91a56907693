//! Open-loop arrival schedules.
//!
//! Each engine thread owns one schedule for its share `rate / threads` of the offered load and
//! precomputes it in chunks ahead of the timing loop, so the loop only reads the next intended
//! send time. Latency is measured from that *intended* time (no coordinated omission, as in
//! wrk2 and Lancet; Schroeder et al., NSDI'06).

use crate::error::{Kind, Problem};
use crate::load::dist::Dist;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The inter-arrival process. In an engine configuration (JSON), its name (`"lognormal:2"`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Arrival {
    /// Exponential gaps: a Poisson process.
    Exp,
    /// Constant gaps.
    Fixed,
    /// Gaps uniform on [0, 2/λ] (CV 0.58).
    Uniform,
    /// Log-normal gaps with mean 1/λ and log-space standard deviation `sigma` (bursty when > 1).
    LogNormal { sigma: f64 },
}

/// An inter-arrival process that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArrivalError {
    #[error("lognormal arrivals need a shape > 0, not '{0}'")]
    Shape(String),
    #[error("unknown arrival process '{0}'")]
    Unknown(String),
}

impl Problem for ArrivalError {
    fn kind(&self) -> Kind {
        Kind::Input
    }

    fn remedy(&self) -> String {
        match self {
            ArrivalError::Shape(_) => "write e.g. lognormal:1.0".into(),
            ArrivalError::Unknown(_) => "use exp (Poisson), fixed, uniform or lognormal:SIGMA".into(),
        }
    }
}

impl Arrival {
    pub fn parse(text: &str) -> Result<Arrival, ArrivalError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "exp" | "poisson" => Ok(Arrival::Exp),
            "fixed" | "uniform-spacing" => Ok(Arrival::Fixed),
            "uniform" => Ok(Arrival::Uniform),
            "lognormal" => Ok(Arrival::LogNormal { sigma: 1.0 }),
            other => match other.split_once(':') {
                Some(("lognormal", s)) => match s.parse::<f64>() {
                    Ok(sigma) if sigma.is_finite() && sigma > 0.0 => Ok(Arrival::LogNormal { sigma }),
                    _ => Err(ArrivalError::Shape(s.into())),
                },
                _ => Err(ArrivalError::Unknown(other.into())),
            },
        }
    }
    /// The name `parse` reads back.
    pub fn name(&self) -> String {
        match self {
            Arrival::Exp => "exp".into(),
            Arrival::Fixed => "fixed".into(),
            Arrival::Uniform => "uniform".into(),
            Arrival::LogNormal { sigma } => format!("lognormal:{sigma}"),
        }
    }
}

impl TryFrom<String> for Arrival {
    type Error = ArrivalError;

    fn try_from(text: String) -> Result<Arrival, ArrivalError> {
        Arrival::parse(&text)
    }
}

impl From<Arrival> for String {
    fn from(a: Arrival) -> String {
        a.name()
    }
}

const CHUNK: usize = 4096;

/// Intended send times (ns, absolute on the engine clock) for one thread.
pub struct Schedule {
    gaps: Dist,
    rng: SmallRng,
    /// Next time, kept in f64 so that rounding does not accumulate into a rate error.
    t: f64,
    buf: Vec<u64>,
    pos: usize,
}

impl Schedule {
    /// `rate_rps` is this thread's share; `phase` in [0, 1) staggers fixed schedules of several
    /// threads so that their union is evenly spaced.
    pub fn new(arrival: Arrival, rate_rps: f64, start_ns: u64, phase: f64, seed: u64) -> Schedule {
        assert!(rate_rps > 0.0 && rate_rps.is_finite());
        let gap_ns = 1e9 / rate_rps;
        let mut rng = SmallRng::seed_from_u64(seed);
        let (gaps, first) = match arrival {
            Arrival::Exp => {
                let d = Dist::Exp { mean_ns: gap_ns };
                let first = d.sample_ns(&mut rng);
                (d, first)
            }
            Arrival::Fixed => (Dist::Fixed { ns: gap_ns }, phase * gap_ns),
            Arrival::Uniform | Arrival::LogNormal { .. } => {
                let d = match arrival {
                    Arrival::Uniform => Dist::Uniform { low_ns: 0.0, high_ns: 2.0 * gap_ns },
                    Arrival::LogNormal { sigma } => Dist::lognormal(gap_ns, sigma),
                    _ => unreachable!(),
                };
                let first = rng.random::<f64>() * gap_ns;
                (d, first)
            }
        };
        Schedule { gaps, rng, t: start_ns as f64 + first, buf: Vec::with_capacity(CHUNK), pos: 0 }
    }

    fn refill(&mut self) {
        self.buf.clear();
        self.pos = 0;
        for _ in 0..CHUNK {
            self.buf.push(self.t as u64);
            self.t += self.gaps.sample_ns(&mut self.rng);
        }
    }

    /// Move every time not yet handed out `ns` later: the schedule goes on after a pause as if
    /// the pause had not been (for Poisson arrivals, memorylessness makes that exact).
    pub fn shift(&mut self, ns: u64) {
        for t in &mut self.buf[self.pos..] {
            *t += ns;
        }
        self.t += ns as f64;
    }

    /// The next intended send time.
    #[inline]
    pub fn next_ns(&mut self) -> u64 {
        if self.pos == self.buf.len() {
            self.refill();
        }
        let t = self.buf[self.pos];
        self.pos += 1;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(arrival: Arrival, rate: f64, n: usize) -> Vec<f64> {
        let mut s = Schedule::new(arrival, rate, 1_000_000, 0.0, 42);
        let times: Vec<u64> = (0..=n).map(|_| s.next_ns()).collect();
        times.windows(2).map(|w| (w[1] - w[0]) as f64).collect()
    }

    fn mean_cv(x: &[f64]) -> (f64, f64) {
        let m = x.iter().sum::<f64>() / x.len() as f64;
        let var = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64;
        (m, var.sqrt() / m)
    }

    #[test]
    fn poisson_rate_and_cv() {
        // 200k gaps: the sample mean's relative s.e. is 1/sqrt(n) = 0.22 %, so 1 % is > 4 s.e.
        let (m, cv) = mean_cv(&gaps(Arrival::Exp, 50_000.0, 200_000));
        assert!((m / 20_000.0 - 1.0).abs() < 0.01, "mean gap {m}");
        assert!((cv - 1.0).abs() < 0.01, "cv {cv}");
    }

    #[test]
    fn fixed_rate_and_cv() {
        let (m, cv) = mean_cv(&gaps(Arrival::Fixed, 3_000.0, 10_000));
        // Truncation to whole ns leaves a jitter of < 1 ns on a 333 µs gap.
        assert!((m - 1e9 / 3_000.0).abs() < 1.0, "mean gap {m}");
        assert!(cv < 1e-5, "cv {cv}");
    }

    #[test]
    fn fractional_and_tiny_rates_hold_their_mean() {
        let (m, _) = mean_cv(&gaps(Arrival::Fixed, 0.5, 100));
        assert!((m - 2e9).abs() < 1.0);
    }

    #[test]
    fn times_are_monotone_and_start_after_start() {
        let mut s = Schedule::new(Arrival::Exp, 1e6, 5_000, 0.0, 1);
        let mut last = 0;
        for _ in 0..20_000 {
            let t = s.next_ns();
            assert!(t >= last && t >= 5_000);
            last = t;
        }
    }

    #[test]
    fn uniform_and_lognormal_hold_rate_and_shape() {
        let (m, cv) = mean_cv(&gaps(Arrival::Uniform, 10_000.0, 200_000));
        assert!((m / 100_000.0 - 1.0).abs() < 0.01, "mean gap {m}");
        // U[0, 2m] has CV 1/sqrt(3).
        assert!((cv - 1.0 / 3f64.sqrt()).abs() < 0.01, "cv {cv}");
        let (m, cv) = mean_cv(&gaps(Arrival::LogNormal { sigma: 0.5 }, 10_000.0, 200_000));
        assert!((m / 100_000.0 - 1.0).abs() < 0.01, "mean gap {m}");
        // Log-normal CV = sqrt(exp(σ²) − 1) = 0.533 at σ 0.5.
        assert!((cv - (0.25f64.exp() - 1.0).sqrt()).abs() < 0.01, "cv {cv}");
    }

    #[test]
    fn parses_names() {
        assert_eq!(Arrival::parse("lognormal:2").unwrap(), Arrival::LogNormal { sigma: 2.0 });
        assert_eq!(Arrival::parse(&Arrival::Uniform.name()).unwrap(), Arrival::Uniform);
        assert!(Arrival::parse("lognormal:0").is_err());
        assert_eq!(Arrival::parse("poisson").unwrap(), Arrival::Exp);
        assert!(Arrival::parse("gamma").unwrap_err().remedy().contains("use exp"));
    }
}
