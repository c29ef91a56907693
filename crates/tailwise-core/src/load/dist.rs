//! Distributions of service times and inter-arrival gaps, parsed from `KIND:MEAN[:PARAM]`.
//!
//! | spec | meaning |
//! |---|---|
//! | `fixed:10us` | always 10 µs |
//! | `exp:10us` | exponential, mean 10 µs (Poisson arrivals when used for gaps) |
//! | `bimodal:10us` | 90 % at `a`, 10 % at `10a`, with `0.9a + 0.1·10a = 1.9a` = the mean |
//! | `lognormal:10us:1.0` | log-normal with mean 10 µs and shape σ = 1.0 (μ = ln mean − σ²/2) |
//!
//! Times take a unit: `ns`, `us` (or `µs`), `ms`, `s`; a bare `0` is allowed.

use crate::error::{Kind, Problem};
use rand::Rng;
use rand_distr::{Distribution, Exp1, LogNormal};

#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    Fixed { ns: f64 },
    Exp { mean_ns: f64 },
    /// 90 % at `low_ns`, 10 % at `10 * low_ns`.
    Bimodal { low_ns: f64 },
    LogNormal { mean_ns: f64, sigma: f64, mu: f64 },
    /// Uniform on [low, high].
    Uniform { low_ns: f64, high_ns: f64 },
}

pub const KINDS: &str = "fixed:10us, exp:10us, bimodal:10us, uniform:5us:15us or lognormal:10us:1.0";

/// A time or a distribution that does not parse.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DistError {
    #[error("'{0}' is not a time")]
    NotATime(String),
    #[error("'{text}' has no unit")]
    NoUnit { text: String, value: f64 },
    #[error("unknown time unit '{unit}' in '{text}'")]
    UnknownUnit { unit: String, text: String },
    #[error("'{0}' must be a finite time of zero or more")]
    NotFinite(String),
    #[error("distribution '{0}' has the wrong number of fields")]
    Fields(String),
    #[error("uniform bounds in '{0}' are reversed")]
    Reversed(String),
    #[error("lognormal shape '{shape}' in '{spec}' must be a number > 0")]
    Shape { shape: String, spec: String },
    #[error("lognormal mean in '{0}' must be above zero")]
    LogNormalMean(String),
    #[error("unknown distribution '{kind}' in '{spec}'")]
    UnknownKind { kind: String, spec: String },
}

impl Problem for DistError {
    fn kind(&self) -> Kind {
        Kind::Input
    }

    fn remedy(&self) -> String {
        match self {
            DistError::NotATime(_) => "write a number and a unit, like 10us".into(),
            DistError::NoUnit { value, .. } => format!("write e.g. {value}us (units: ns, us, ms, s, m, h)"),
            DistError::UnknownUnit { .. } => "use ns, us, ms, s, m or h".into(),
            DistError::Fields(_) | DistError::UnknownKind { .. } => format!("use {KINDS}"),
            DistError::Reversed(_) => "write uniform:LOW:HIGH".into(),
            DistError::Shape { .. } => "write e.g. lognormal:10us:1.0".into(),
            DistError::NotFinite(_) | DistError::LogNormalMean(_) => String::new(),
        }
    }
}

/// Parse a duration such as `10us`, `1.5ms`, `250ns`, `2s` into nanoseconds.
pub fn parse_duration_ns(text: &str) -> Result<f64, DistError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| DistError::NotATime(text.into()))?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        // The units of every option (python/tailwise/units.py TIME_UNITS): one set everywhere.
        "us" | "µs" | "μs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "" if value == 0.0 => 1.0,
        "" => return Err(DistError::NoUnit { text: text.into(), value }),
        u => return Err(DistError::UnknownUnit { unit: u.into(), text: text.into() }),
    };
    let ns = value * scale;
    if !ns.is_finite() || ns < 0.0 {
        return Err(DistError::NotFinite(text.into()));
    }
    Ok(ns)
}

impl Dist {
    pub fn parse(spec: &str) -> Result<Dist, DistError> {
        let parts: Vec<&str> = spec.trim().split(':').collect();
        let kind = parts[0].to_ascii_lowercase();
        let want = |n: usize| -> Result<(), DistError> {
            if parts.len() == n {
                Ok(())
            } else {
                Err(DistError::Fields(spec.into()))
            }
        };
        let dist = match kind.as_str() {
            "fixed" => {
                want(2)?;
                Dist::Fixed { ns: parse_duration_ns(parts[1])? }
            }
            "exp" => {
                want(2)?;
                Dist::Exp { mean_ns: parse_duration_ns(parts[1])? }
            }
            "uniform" => {
                want(3)?;
                let (low_ns, high_ns) = (parse_duration_ns(parts[1])?, parse_duration_ns(parts[2])?);
                if low_ns > high_ns {
                    return Err(DistError::Reversed(spec.into()));
                }
                Dist::Uniform { low_ns, high_ns }
            }
            "bimodal" => {
                want(2)?;
                Dist::Bimodal { low_ns: parse_duration_ns(parts[1])? / 1.9 }
            }
            "lognormal" => {
                want(3)?;
                let mean_ns = parse_duration_ns(parts[1])?;
                let sigma: f64 = parts[2]
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| DistError::Shape { shape: parts[2].into(), spec: spec.into() })?;
                if mean_ns <= 0.0 {
                    return Err(DistError::LogNormalMean(spec.into()));
                }
                Dist::lognormal(mean_ns, sigma)
            }
            _ => return Err(DistError::UnknownKind { kind: parts[0].into(), spec: spec.into() }),
        };
        Ok(dist)
    }

    /// Log-normal with the given mean and log-space standard deviation.
    pub fn lognormal(mean_ns: f64, sigma: f64) -> Dist {
        Dist::LogNormal { mean_ns, sigma, mu: mean_ns.ln() - sigma * sigma / 2.0 }
    }

    /// The mean, in nanoseconds.
    pub fn mean_ns(&self) -> f64 {
        match *self {
            Dist::Fixed { ns } => ns,
            Dist::Exp { mean_ns } => mean_ns,
            Dist::Bimodal { low_ns } => 1.9 * low_ns,
            Dist::LogNormal { mean_ns, .. } => mean_ns,
            Dist::Uniform { low_ns, high_ns } => (low_ns + high_ns) / 2.0,
        }
    }

    /// One draw, in nanoseconds (never negative).
    #[inline]
    pub fn sample_ns<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match *self {
            Dist::Fixed { ns } => ns,
            Dist::Exp { mean_ns } => {
                let e: f64 = Exp1.sample(rng);
                e * mean_ns
            }
            Dist::Bimodal { low_ns } => {
                if rng.random::<f64>() < 0.9 {
                    low_ns
                } else {
                    10.0 * low_ns
                }
            }
            Dist::LogNormal { sigma, mu, .. } => LogNormal::new(mu, sigma).map(|d| d.sample(rng)).unwrap_or(0.0),
            Dist::Uniform { low_ns, high_ns } => low_ns + rng.random::<f64>() * (high_ns - low_ns),
        }
    }

    /// A canonical text form that `parse` reads back.
    pub fn spec(&self) -> String {
        match *self {
            Dist::Fixed { ns } => format!("fixed:{ns}ns"),
            Dist::Exp { mean_ns } => format!("exp:{mean_ns}ns"),
            Dist::Bimodal { low_ns } => format!("bimodal:{}ns", 1.9 * low_ns),
            Dist::LogNormal { mean_ns, sigma, .. } => format!("lognormal:{mean_ns}ns:{sigma}"),
            Dist::Uniform { low_ns, high_ns } => format!("uniform:{low_ns}ns:{high_ns}ns"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn mean_of(d: &Dist, n: usize) -> f64 {
        let mut rng = SmallRng::seed_from_u64(7);
        (0..n).map(|_| d.sample_ns(&mut rng)).sum::<f64>() / n as f64
    }

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration_ns("10us").unwrap(), 10_000.0);
        assert_eq!(parse_duration_ns("1.5ms").unwrap(), 1_500_000.0);
        assert_eq!(parse_duration_ns("250ns").unwrap(), 250.0);
        assert_eq!(parse_duration_ns("10µs").unwrap(), 10_000.0);
        assert_eq!(parse_duration_ns("2m").unwrap(), 120e9);
        assert_eq!(parse_duration_ns("1h").unwrap(), 3600e9);
        assert_eq!(parse_duration_ns("0").unwrap(), 0.0);
        assert!(parse_duration_ns("10").unwrap_err().to_string().contains("no unit"));
        assert!(parse_duration_ns("10parsecs").unwrap_err().to_string().contains("unknown time unit"));
    }

    #[test]
    fn rejects_unknown_kind_with_the_choices() {
        let e = Dist::parse("pareto:10us").unwrap_err();
        assert!(e.to_string().contains("unknown distribution 'pareto'") && e.remedy().contains("fixed:10us"), "{e}");
        assert!(Dist::parse("lognormal:10us").is_err());
        assert!(Dist::parse("lognormal:10us:-1").is_err());
    }

    #[test]
    fn means_match_the_spec() {
        for spec in ["fixed:10us", "exp:10us", "bimodal:10us", "lognormal:10us:1.0"] {
            let d = Dist::parse(spec).unwrap();
            assert!((d.mean_ns() - 10_000.0).abs() < 1e-6, "{spec}");
            let m = mean_of(&d, 400_000);
            assert!((m / 10_000.0 - 1.0).abs() < 0.02, "{spec}: sample mean {m}");
            assert_eq!(Dist::parse(&d.spec()).unwrap().mean_ns(), d.mean_ns());
        }
    }

    #[test]
    fn bimodal_has_two_values_in_nine_to_one() {
        let d = Dist::parse("bimodal:19us").unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let n = 100_000;
        let high = (0..n).filter(|_| d.sample_ns(&mut rng) > 50_000.0).count();
        assert!((high as f64 / n as f64 - 0.1).abs() < 0.005);
    }
}
