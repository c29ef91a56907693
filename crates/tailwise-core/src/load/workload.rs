//! Workload shape: which key each request names, how long keys and values are, gets vs sets.
//!
//! The shapes are those memcached load generators use (mutilate, Lancet §5): key and value sizes
//! from a fixed, uniform, generalised extreme value (GEV) or generalised Pareto distribution, and
//! the two Facebook shapes measured by Atikoglu et al., "Workload Analysis of a Large-Scale
//! Key-Value Store", SIGMETRICS 2012:
//!
//! * ETC keys: GEV(μ 30.7984, σ 8.20449, ξ 0.078688) bytes; ETC values: generalised Pareto
//!   (θ 0, σ 214.476, k 0.348238) — mutilate's `fb_key` / `fb_value`, which shifts values by
//!   15 bytes (θ = 15) so none is tiny; we follow mutilate so results compare.
//! * USR keys: 16 or 21 bytes; USR values: 2 bytes.
//!
//! Key popularity is uniform or Zipf with exponent s over ranks 1..=keys (rank r is key r − 1, so
//! the hottest keys have the smallest indices).
//!
//! A key's bytes depend on its index only — never on the seed or the thread — so that `tailwise
//! load` stores exactly the keys a later run asks for: its length is the key-size quantile at a
//! hash of the index, its text the index in decimal, zero-padded to that length (never shorter than
//! the digits of the largest index, so distinct indices give distinct keys).

use crate::error::{Kind, Problem};
use crate::protocol::OpKind;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use std::sync::OnceLock;

/// memcached's key length limit (protocol.txt).
pub const MAX_KEY: usize = 250;
/// memcached's default item size limit, 1 MiB, less room for the item header.
pub const MAX_VALUE: usize = 1_000_000;

pub const SIZE_KINDS: &str = "fixed:N, uniform:MIN:MAX, gev:LOC:SCALE:SHAPE, gpareto:LOC:SCALE:SHAPE, etc or usr";

/// A workload setting that does not parse or does not fit.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error("size distribution '{0}' is not valid")]
    BadSize(String),
    #[error("size distribution '{0}' allows sizes below 1 byte")]
    SizeBelowOne(String),
    #[error("Zipf exponent '{0}' must be a number of 0 or more")]
    ZipfExponent(String),
    #[error("unknown key popularity '{0}'")]
    UnknownPopularity(String),
    #[error("the key count must be at least 1")]
    NoKeys,
    #[error("set fraction {0} must be within 0..1")]
    SetFraction(f64),
    #[error("too many keys")]
    TooManyKeys,
    /// The key-size field, named: the problem is in it.
    #[error("key size: {0}")]
    KeySize(Box<WorkloadError>),
    #[error("value size: {0}")]
    ValueSize(Box<WorkloadError>),
}

impl Problem for WorkloadError {
    fn kind(&self) -> Kind {
        Kind::Input
    }

    fn remedy(&self) -> String {
        match self {
            WorkloadError::BadSize(_) => format!("use {SIZE_KINDS} (sizes in bytes)"),
            WorkloadError::SizeBelowOne(_) => "sizes start at 1".into(),
            WorkloadError::ZipfExponent(_) => "write e.g. zipf:0.99".into(),
            WorkloadError::UnknownPopularity(_) => "use uniform or zipf:S (e.g. zipf:0.99)".into(),
            WorkloadError::NoKeys => "give 1 key or more".into(),
            WorkloadError::SetFraction(_) => "give a fraction of sets from 0 to 1".into(),
            WorkloadError::TooManyKeys => format!("give keys whose largest index has at most {MAX_KEY} digits"),
            WorkloadError::KeySize(e) | WorkloadError::ValueSize(e) => e.remedy(),
        }
    }
}

/// A distribution of sizes in bytes, sampled by its quantile function.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    Fixed(f64),
    Uniform { lo: f64, hi: f64 },
    /// Generalised extreme value: Q(u) = μ + σ((−ln u)^−ξ − 1)/ξ.
    Gev { loc: f64, scale: f64, shape: f64 },
    /// Generalised Pareto: Q(u) = μ + σ((1 − u)^−ξ − 1)/ξ.
    GPareto { loc: f64, scale: f64, shape: f64 },
    /// One of a few sizes, equally likely (USR keys: 16 or 21).
    Choice(Vec<f64>),
}

/// Which sizes a named Facebook shape means, for keys and for values.
fn named(name: &str, for_keys: bool) -> Option<SizeDist> {
    match (name, for_keys) {
        ("etc", true) => Some(SizeDist::Gev { loc: 30.7984, scale: 8.20449, shape: 0.078688 }),
        ("etc", false) => Some(SizeDist::GPareto { loc: 15.0, scale: 214.476, shape: 0.348238 }),
        ("usr", true) => Some(SizeDist::Choice(vec![16.0, 21.0])),
        ("usr", false) => Some(SizeDist::Fixed(2.0)),
        _ => None,
    }
}

impl SizeDist {
    /// Parse `fixed:200`, `uniform:10:100`, `gev:30.8:8.2:0.079`, `gpareto:15:214:0.35`, `choice:16:21`
    /// (one of these sizes, equally likely), `etc`,
    /// `usr` (the Facebook shapes, whose meaning depends on `for_keys`), or a bare number.
    pub fn parse(spec: &str, for_keys: bool) -> Result<SizeDist, WorkloadError> {
        let spec = spec.trim().to_ascii_lowercase();
        if let Some(d) = named(&spec, for_keys) {
            return Ok(d);
        }
        let parts: Vec<&str> = spec.split(':').collect();
        let nums: Result<Vec<f64>, _> = parts[1..].iter().map(|p| p.trim_end_matches('b').parse::<f64>()).collect();
        let bad = || WorkloadError::BadSize(spec.clone());
        let nums = nums.map_err(|_| bad())?;
        if nums.iter().any(|v| !v.is_finite()) {
            return Err(bad());
        }
        let d = match (parts[0], nums.as_slice()) {
            (n, []) if n.parse::<f64>().is_ok() => SizeDist::Fixed(n.parse().unwrap()),
            ("fixed", [n]) => SizeDist::Fixed(*n),
            ("uniform", [lo, hi]) if lo <= hi => SizeDist::Uniform { lo: *lo, hi: *hi },
            ("gev", [loc, scale, shape]) if *scale > 0.0 => SizeDist::Gev { loc: *loc, scale: *scale, shape: *shape },
            ("choice", sizes) if !sizes.is_empty() && sizes.iter().all(|n| *n >= 1.0) => SizeDist::Choice(sizes.to_vec()),
            ("gpareto", [loc, scale, shape]) if *scale > 0.0 => {
                SizeDist::GPareto { loc: *loc, scale: *scale, shape: *shape }
            }
            _ => return Err(bad()),
        };
        if let SizeDist::Fixed(n) | SizeDist::Uniform { lo: n, .. } = d {
            if n < 1.0 {
                return Err(WorkloadError::SizeBelowOne(spec));
            }
        }
        Ok(d)
    }

    /// The text `parse` reads back as this distribution (a named shape as its parameters).
    pub fn spec(&self) -> String {
        // f64's Display is the shortest text that parses back to the same number.
        match self {
            SizeDist::Fixed(n) => format!("{n}"),
            SizeDist::Uniform { lo, hi } => format!("uniform:{lo}:{hi}"),
            SizeDist::Gev { loc, scale, shape } => format!("gev:{loc}:{scale}:{shape}"),
            SizeDist::GPareto { loc, scale, shape } => format!("gpareto:{loc}:{scale}:{shape}"),
            SizeDist::Choice(v) => format!("choice:{}", v.iter().map(|x| format!("{x}")).collect::<Vec<_>>().join(":")),
        }
    }

    /// The size at quantile `u` in (0, 1), before clamping.
    pub fn quantile(&self, u: f64) -> f64 {
        match self {
            SizeDist::Fixed(n) => *n,
            SizeDist::Uniform { lo, hi } => lo + u * (hi + 1.0 - lo),
            SizeDist::Gev { loc, scale, shape } => {
                let y = -u.ln();
                if shape.abs() < 1e-12 {
                    loc - scale * y.ln()
                } else {
                    loc + scale * (y.powf(-shape) - 1.0) / shape
                }
            }
            SizeDist::GPareto { loc, scale, shape } => {
                if shape.abs() < 1e-12 {
                    loc - scale * (1.0 - u).ln()
                } else {
                    loc + scale * ((1.0 - u).powf(-shape) - 1.0) / shape
                }
            }
            SizeDist::Choice(v) => v[((u * v.len() as f64) as usize).min(v.len() - 1)],
        }
    }

    /// A size in `[lo, hi]` bytes at quantile `u`.
    pub fn size_at(&self, u: f64, lo: usize, hi: usize) -> usize {
        let q = self.quantile(u.clamp(1e-12, 1.0 - 1e-12));
        if q.is_nan() {
            return lo;
        }
        (q.floor().max(lo as f64) as usize).min(hi)
    }
}

/// How often each key is asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Popularity {
    Uniform,
    /// P(rank r) ∝ r^−s.
    Zipf(f64),
}

impl Popularity {
    /// The text `parse` reads back.
    pub fn spec(&self) -> String {
        match self {
            Popularity::Uniform => "uniform".into(),
            Popularity::Zipf(s) => format!("zipf:{s}"),
        }
    }

    pub fn parse(spec: &str) -> Result<Popularity, WorkloadError> {
        let s = spec.trim().to_ascii_lowercase();
        if s == "uniform" {
            return Ok(Popularity::Uniform);
        }
        match s.split_once(':') {
            Some(("zipf", e)) => match e.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(Popularity::Zipf(v)),
                _ => Err(WorkloadError::ZipfExponent(e.into())),
            },
            _ => Err(WorkloadError::UnknownPopularity(spec.into())),
        }
    }
}

/// The workload of one run; the same for every engine thread. In an engine configuration
/// (JSON), its settings as users write them ([`WorkloadSpec`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "WorkloadSpec", into = "WorkloadSpec")]
pub struct Workload {
    pub keys: u64,
    pub key_size: SizeDist,
    pub value_size: SizeDist,
    pub popularity: Popularity,
    /// Fraction of requests that are sets, in [0, 1].
    pub set_fraction: f64,
}

impl Default for Workload {
    /// mutilate's defaults: 10k keys of 30 bytes, 200-byte values, uniform popularity, gets only.
    fn default() -> Workload {
        Workload {
            keys: 10_000,
            key_size: SizeDist::Fixed(30.0),
            value_size: SizeDist::Fixed(200.0),
            popularity: Popularity::Uniform,
            set_fraction: 0.0,
        }
    }
}

/// A workload as users write it: sizes and popularity by name (`SizeDist::parse`,
/// `Popularity::parse`); a missing field takes [`Workload::default`]'s.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadSpec {
    pub keys: u64,
    pub key_size: String,
    pub value_size: String,
    pub popularity: String,
    pub set_fraction: f64,
}

impl Default for WorkloadSpec {
    fn default() -> WorkloadSpec {
        Workload::default().into()
    }
}

impl From<Workload> for WorkloadSpec {
    fn from(w: Workload) -> WorkloadSpec {
        WorkloadSpec {
            keys: w.keys,
            key_size: w.key_size.spec(),
            value_size: w.value_size.spec(),
            popularity: w.popularity.spec(),
            set_fraction: w.set_fraction,
        }
    }
}

impl TryFrom<WorkloadSpec> for Workload {
    type Error = WorkloadError;

    fn try_from(s: WorkloadSpec) -> Result<Workload, WorkloadError> {
        Workload::parse(s.keys, &s.key_size, &s.value_size, &s.popularity, s.set_fraction)
    }
}

/// SplitMix64 (Steele et al., OOPSLA 2014): a fixed hash from a key index to its size quantile.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Bytes every value is cut from (sets send `&VALUES[..len]`).
fn values() -> &'static [u8] {
    static V: OnceLock<Vec<u8>> = OnceLock::new();
    V.get_or_init(|| (0..MAX_VALUE).map(|i| b'a' + (i % 26) as u8).collect())
}

impl Workload {
    /// A workload from its settings as users write them (`SizeDist::parse`, `Popularity::parse`),
    /// validated.
    pub fn parse(keys: u64, key_size: &str, value_size: &str, popularity: &str, set_fraction: f64) -> Result<Workload, WorkloadError> {
        let w = Workload {
            keys,
            key_size: SizeDist::parse(key_size, true).map_err(|e| WorkloadError::KeySize(Box::new(e)))?,
            value_size: SizeDist::parse(value_size, false).map_err(|e| WorkloadError::ValueSize(Box::new(e)))?,
            popularity: Popularity::parse(popularity)?,
            set_fraction,
        };
        w.validate()?;
        Ok(w)
    }

    pub fn validate(&self) -> Result<(), WorkloadError> {
        if self.keys == 0 {
            return Err(WorkloadError::NoKeys);
        }
        if !(0.0..=1.0).contains(&self.set_fraction) {
            return Err(WorkloadError::SetFraction(self.set_fraction));
        }
        if digits(self.keys - 1) > MAX_KEY {
            return Err(WorkloadError::TooManyKeys);
        }
        Ok(())
    }

    /// Length of key `index` in bytes.
    pub fn key_len(&self, index: u64) -> usize {
        let u = (splitmix64(index) >> 11) as f64 / (1u64 << 53) as f64;
        self.key_size.size_at(u, digits(self.keys - 1), MAX_KEY)
    }

    /// Write key `index` into `out` (cleared first).
    pub fn write_key(&self, index: u64, out: &mut Vec<u8>) {
        let len = self.key_len(index);
        out.clear();
        out.resize(len, b'0');
        let mut n = index;
        for b in out.iter_mut().rev() {
            *b = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
    }

    /// The value `tailwise load` stores for key `index`: its size from a hash of the index.
    pub fn value_for_key(&self, index: u64) -> &'static [u8] {
        let u = (splitmix64(index ^ 0x5EED_0F7A_1100) >> 11) as f64 / (1u64 << 53) as f64;
        self.value(u)
    }

    /// Value for a set at quantile `u`.
    pub fn value(&self, u: f64) -> &'static [u8] {
        &values()[..self.value_size.size_at(u, 1, MAX_VALUE)]
    }
}

/// One request's content, drawn once at its intended time: small, so that a request whose
/// connection closed can be encoded again, identically, on the next one (engine/thread.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    /// Key index (0 … keys − 1); its bytes come from [`Workload::write_key`].
    pub key: u64,
    /// Value bytes of a set (0 for gets); the bytes are [`value_bytes`]`(len)`.
    pub value_len: u32,
    /// Which of the protocol's requests (HTTP: drawn by `protocol::http::Drawer`; 0 otherwise).
    pub request: u16,
}

impl Op {
    /// The request of protocols without keys (synthetic, HTTP, UDP echo).
    pub const KEYLESS: Op = Op { kind: OpKind::Get, key: 0, value_len: 0, request: 0 };
}

/// The bytes of a value of `len` bytes (sets send a prefix of one static buffer).
#[inline]
pub fn value_bytes(len: u32) -> &'static [u8] {
    &values()[..len as usize]
}

/// One thread's request generator.
pub struct OpGen {
    w: Workload,
    rng: SmallRng,
    zipf: Option<Zipf<f64>>,
}

impl OpGen {
    pub fn new(w: Workload, seed: u64) -> OpGen {
        let zipf = match w.popularity {
            Popularity::Zipf(s) => Some(Zipf::new(w.keys as f64, s).expect("validated Zipf parameters")),
            Popularity::Uniform => None,
        };
        OpGen { rng: SmallRng::seed_from_u64(seed), zipf, w }
    }

    pub fn workload(&self) -> &Workload {
        &self.w
    }

    /// The next request: its kind, key and (for sets) value size.
    #[inline]
    pub fn next_op(&mut self) -> Op {
        let key = match &self.zipf {
            Some(z) => (z.sample(&mut self.rng) as u64).clamp(1, self.w.keys) - 1,
            None => self.rng.random_range(0..self.w.keys),
        };
        if self.w.set_fraction > 0.0 && self.rng.random::<f64>() < self.w.set_fraction {
            let value_len = self.w.value(self.rng.random::<f64>()).len() as u32;
            Op { kind: OpKind::Set, key, value_len, request: 0 }
        } else {
            Op { kind: OpKind::Get, key, value_len: 0, request: 0 }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_padded_and_stable() {
        let w = Workload { keys: 1000, key_size: SizeDist::Fixed(8.0), ..Default::default() };
        let mut k = Vec::new();
        w.write_key(42, &mut k);
        assert_eq!(k, b"00000042");
        // Never shorter than the digits of the largest index.
        let w = Workload { keys: 100_000, key_size: SizeDist::Fixed(2.0), ..Default::default() };
        w.write_key(99_999, &mut k);
        assert_eq!(k, b"99999");
        w.write_key(7, &mut k);
        assert_eq!(k, b"00007");
        let etc = Workload { key_size: SizeDist::parse("etc", true).unwrap(), ..Default::default() };
        assert_eq!(etc.key_len(123), etc.key_len(123));
    }

    #[test]
    fn quantiles_match_closed_forms() {
        // GPareto with shape 0 is exponential: median = loc + scale ln 2.
        let g = SizeDist::GPareto { loc: 0.0, scale: 100.0, shape: 0.0 };
        assert!((g.quantile(0.5) - 100.0 * 2f64.ln()).abs() < 1e-9);
        // GEV median = μ + σ((ln 2)^−ξ − 1)/ξ.
        let (m, s, x) = (30.7984, 8.20449, 0.078688);
        let gev = SizeDist::parse("etc", true).unwrap();
        let want = m + s * (2f64.ln().powf(-x) - 1.0) / x;
        assert!((gev.quantile(0.5) - want).abs() < 1e-9);
        // mutilate's fb_value median = 15 + 214.476 (2^0.348238 − 1)/0.348238 = 183.14 bytes.
        let v = SizeDist::parse("etc", false).unwrap();
        assert!((v.quantile(0.5) - 183.14).abs() < 0.01, "{}", v.quantile(0.5));
    }

    #[test]
    fn etc_key_sizes_have_the_published_mean() {
        // The GEV mean is μ + σ(Γ(1 − ξ) − 1)/ξ = 36.2 bytes for ETC keys; flooring to whole bytes
        // takes 0.5 off (scipy.stats.genextreme, floored and clamped as here: 35.72).
        let w = Workload { keys: 1 << 20, key_size: SizeDist::parse("etc", true).unwrap(), ..Default::default() };
        let n = 200_000u64;
        let mean = (0..n).map(|i| w.key_len(i) as f64).sum::<f64>() / n as f64;
        assert!((mean - 35.72).abs() < 0.2, "mean key length {mean}");
    }

    #[test]
    fn mix_and_popularity() {
        let w = Workload { keys: 100, set_fraction: 0.25, popularity: Popularity::Zipf(1.0), ..Default::default() };
        let mut g = OpGen::new(w, 7);
        let (mut sets, mut hot) = (0, 0);
        for _ in 0..100_000 {
            let op = g.next_op();
            if op.kind == OpKind::Set {
                sets += 1;
                assert_eq!(value_bytes(op.value_len).len(), 200);
            }
            if op.key == 0 {
                hot += 1;
            }
        }
        assert!((sets as f64 / 1e5 - 0.25).abs() < 0.01, "{sets}");
        // Zipf(1) over 100 keys: P(rank 1) = 1/H_100 = 0.193.
        assert!((hot as f64 / 1e5 - 0.193).abs() < 0.01, "{hot}");
    }

    #[test]
    fn parse_errors_name_the_fix() {
        assert!(SizeDist::parse("gev:1:0:1", true).unwrap_err().remedy().contains("gpareto"));
        assert!(SizeDist::parse("fixed:0", false).unwrap_err().to_string().contains("1 byte"));
        assert_eq!(SizeDist::parse("200", false).unwrap(), SizeDist::Fixed(200.0));
        assert!(Popularity::parse("zipf:-1").unwrap_err().remedy().contains("zipf:0.99"));
        assert!(Popularity::parse("hot").unwrap_err().remedy().contains("uniform"));
        let e = Workload::parse(10, "gev:1:0:1", "200", "uniform", 0.0).unwrap_err();
        assert!(e.to_string().starts_with("key size: ") && e.remedy().contains("gpareto"), "{e}");
    }
}

#[cfg(test)]
mod spec_tests {
    use super::*;

    #[test]
    fn every_size_and_popularity_reads_back_from_its_spec() {
        for (text, keys) in [("30", true), ("uniform:10:100", false), ("etc", true), ("etc", false), ("usr", true), ("usr", false), ("gev:1.5:2:0.1", false)] {
            let d = SizeDist::parse(text, keys).unwrap();
            assert_eq!(SizeDist::parse(&d.spec(), keys).unwrap(), d, "{text}");
        }
        for text in ["uniform", "zipf:0.99", "zipf:0"] {
            let p = Popularity::parse(text).unwrap();
            assert_eq!(Popularity::parse(&p.spec()).unwrap(), p);
        }
        let w = Workload::parse(500, "usr", "etc", "zipf:1.1", 0.25).unwrap();
        assert_eq!(Workload::try_from(WorkloadSpec::from(w.clone())).unwrap(), w);
    }
}
