//! The engine's configuration: one serialisable type, [`EngineConfig`], and the one place its
//! defaults are written ([`EngineConfig::default`]).
//!
//! It is what the Python control plane hands the engine (`tailwise._core.Engine(json)`) and what
//! an agent receives over the wire: JSON, every field named as here, every field optional (a
//! missing one takes its default), an unknown one refused (a coordinator newer than its agent
//! must not have a setting silently ignored). Python reads the defaults from
//! `_core.ENGINE_DEFAULTS` rather than writing them again.
//!
//! ```json
//! {"targets": ["127.0.0.1:11211"], "rate_rps": 10000, "duration_ns": 1000000000,
//!  "protocol": {"scheme": "memcached"}, "workload": {"keys": 10000, "value_size": "etc"},
//!  "conns": 8, "outstanding": 4, "arrival": "exp", "timestamps": "kernel",
//!  "probe": {"conns": 4, "rate_rps": 2000}}
//! ```

use super::problem::EngineError;
use super::tls::{TlsConfig, TlsError};
use crate::error::{Kind, Problem};
use crate::load::schedule::Arrival;
use crate::load::workload::Workload;
use crate::protocol::Protocol;
use crate::stamp::StampClock;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// IP:PORT (names are resolved by whoever writes the configuration).
    pub targets: Vec<SocketAddr>,
    pub protocol: Protocol,
    /// Keys, sizes and mix (used by the protocols with keys).
    pub workload: Workload,
    /// No default: 0 is refused (`EngineError::Rate`).
    pub rate_rps: f64,
    /// No default: 0 is refused (`EngineError::Duration`).
    pub duration_ns: u64,
    pub threads: usize,
    /// Connections in all, spread over threads and targets.
    pub conns: usize,
    /// Requests in flight per connection, at most.
    pub outstanding: usize,
    pub arrival: Arrival,
    /// Keep a random 1 in `sample_every` requests raw.
    pub sample_every: u64,
    /// A request without reply after this long is a timeout.
    pub timeout_ns: u64,
    /// A request sent more than this after its intended time is late.
    pub late_ns: u64,
    pub connect_timeout_ns: u64,
    /// A thread whose target has not replied for this long, with its connections refused or
    /// closed by the target meanwhile, ends the run (a frozen target that accepts is only slow).
    pub unreachable_ns: u64,
    pub seed: u64,
    pub pin: bool,
    pub busy_poll: bool,
    /// `--poll lean` (the request path; packets ignore it): blocking, and a reply whose receive stamp
    /// makes its time exact however late it is read does not wake the thread but waits for the
    /// margin before the next send (engine/io.rs, `replies_can_wait`): one sleep a request instead
    /// of two. Not the default: the built-in server's median round trip measured 2.5–3.2 µs longer
    /// with it, memcached's within noise (BENCHMARKS.md, bench/engine/replies.py).
    pub replies_wait: bool,
    /// Tests only: each engine thread stops as a preemption would (and says so on stderr).
    /// Refused by builds without the `test-hooks` feature (`EngineError::NoTestHooks`).
    pub test_stall: Option<TestStall>,
    /// Where a reply's receive time comes from (`Timestamps`).
    pub timestamps: Timestamps,
    /// The latency probe: when set, the threads above only load the target and the probe's
    /// requests are the only ones whose latency is recorded (`Probe`).
    pub probe: Option<Probe>,
    /// Whether the threads above time their requests (`false`: they only count them, as a load
    /// agent does beside agents that measure).
    pub timed: bool,
    /// The schedule's time zero on this host's CLOCK_MONOTONIC, so that agents on several hosts
    /// start together; `None`: 5 ms after the connections are up. A time nearer than that (or
    /// past) is moved to it: `Engine::start_mono_ns` says when the schedule really began.
    pub start_at_ns: Option<u64>,
    /// TLS on every connection (TCP protocols only); None: plaintext (tls.rs). Written only when
    /// set, so that a plaintext configuration reads as before TLS (absent and null alike mean none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsConfig>,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            targets: Vec::new(),
            protocol: Protocol::Synthetic { service_ns: None, reply_pad: 0 },
            // mutilate's: 10k keys of 30 bytes, 200-byte values, uniform popularity, gets only.
            workload: Workload::default(),
            rate_rps: 0.0,
            duration_ns: 0,
            threads: 1,
            // mutilate's -c 8 … -d 4 style: enough connections and depth that a client-side
            // queue does not form at the rates one thread sends.
            conns: 8,
            outstanding: 4,
            // Poisson: what Lancet and the Killer Microsecond paper use for open-loop load.
            arrival: Arrival::Exp,
            sample_every: 1,
            timeout_ns: 1_000_000_000,
            late_ns: 50_000,
            connect_timeout_ns: 2_000_000_000,
            unreachable_ns: 2_000_000_000,
            seed: 1,
            pin: true,
            // Sleeping until each send less the measured wake-up lateness (time/wake.rs) is as
            // close to the model as spinning with kernel receive stamps, at half the CPU or less
            // (BENCHMARKS.md, issue 23 item 5); on a 2-CPU machine it leaves the coordinator a CPU.
            busy_poll: false,
            replies_wait: false,
            test_stall: None,
            timestamps: Timestamps::User,
            probe: None,
            timed: true,
            start_at_ns: None,
            tls: None,
        }
    }
}

/// A configuration that does not parse: its JSON, or the protocol it names (whose own remedy —
/// an HTTP path to percent-encode, a parameter out of range — is worth more than the generic one).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("engine configuration: {0}")]
    Json(#[from] serde_json::Error),
    #[error("engine configuration: {0}")]
    Protocol(#[from] crate::protocol::UnknownScheme),
}

impl Problem for ConfigError {
    fn kind(&self) -> Kind {
        Kind::Input
    }

    fn remedy(&self) -> String {
        match self {
            ConfigError::Json(_) => "give the fields of tailwise._core.ENGINE_DEFAULTS only (coordinator and agent \
                                     must run the same tailwise version)"
                .into(),
            ConfigError::Protocol(e) => e.remedy(),
        }
    }
}

impl EngineConfig {
    pub fn from_json(text: &str) -> Result<EngineConfig, ConfigError> {
        serde_json::from_str(text).map_err(|e| {
            // serde keeps only the protocol error's words: build the protocol again to keep its type.
            let spec = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| serde_json::from_value::<crate::protocol::ProtocolSpec>(v.get("protocol")?.clone()).ok());
            match spec.map(Protocol::try_from) {
                Some(Err(p)) => ConfigError::Protocol(p),
                _ => ConfigError::Json(e),
            }
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an engine configuration always serialises")
    }

    /// What the engine refuses before it connects anywhere.
    pub fn validate(&self) -> Result<(), EngineError> {
        if !(self.rate_rps > 0.0 && self.rate_rps.is_finite()) {
            return Err(EngineError::Rate(self.rate_rps));
        }
        let per_thread = self.rate_rps / self.threads.max(1) as f64;
        if per_thread > MAX_RATE_PER_THREAD {
            let threads_needed = (self.rate_rps / MAX_RATE_PER_THREAD).ceil();
            return Err(EngineError::RatePerThread { per_thread, threads_needed });
        }
        if self.threads == 0 || self.conns == 0 || self.outstanding == 0 {
            return Err(EngineError::Zero);
        }
        if let Protocol::UdpFlow { flows, .. } = self.protocol {
            self.validate_packets(flows)?;
        } else if self.conns < self.threads {
            return Err(EngineError::ConnsBelowThreads { conns: self.conns, threads: self.threads });
        }
        if self.targets.is_empty() {
            return Err(EngineError::NoTarget);
        }
        if self.duration_ns == 0 {
            return Err(EngineError::Duration);
        }
        if let Some(p) = self.probe {
            if p.conns == 0 || !(p.rate_rps > 0.0 && p.rate_rps.is_finite()) {
                return Err(EngineError::Probe);
            }
        }
        if let Some(tls) = &self.tls {
            if self.protocol.is_datagram() || self.protocol.is_packet() {
                return Err(EngineError::Tls(TlsError::NotTcp(self.protocol.name())));
            }
            tls.validate().map_err(EngineError::Tls)?;
        }
        if self.test_stall.is_some() && !cfg!(any(test, feature = "test-hooks")) {
            return Err(EngineError::NoTestHooks);
        }
        self.workload.validate().map_err(EngineError::Workload)
    }
}

impl EngineConfig {
    /// Packet mode (packet/): every thread sends flows of its own; no probe, no test hook.
    fn validate_packets(&self, flows: usize) -> Result<(), EngineError> {
        if flows < self.threads {
            return Err(EngineError::FlowsBelowThreads { flows, threads: self.threads });
        }
        if self.probe.is_some() {
            return Err(EngineError::NotForPackets { what: "latency probe" });
        }
        if self.test_stall.is_some() {
            return Err(EngineError::NotForPackets { what: "test hook (test_stall)" });
        }
        Ok(())
    }
}

/// Above this a thread's schedule outruns any socket: refuse rather than queue without end
/// (bench/engine: one thread sustains 1.5M req/s pipelined on this machine kind).
const MAX_RATE_PER_THREAD: f64 = 10_000_000.0;

/// Lancet's latency agent in its asymmetric mode (Lancet, ATC'19, §4.2): beside the open-loop
/// load, a thread of its own (pinned to the next CPU the engine takes) sends Poisson requests at
/// `rate_rps` over `conns` connections with one request outstanding each, spinning on its
/// sockets (SO_BUSY_POLL where the driver polls; lo and veth do not). Its requests wait behind
/// no earlier request of the client's own, and its receive path is never busy with load replies,
/// so their latency is the server's and the network's. The load threads' requests go
/// unrecorded (counted, not timed). What the probe cannot see: queueing behind the client's own
/// pipelined requests on a load connection, which its requests never share.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    pub conns: usize,
    pub rate_rps: f64,
}

/// The source of receive times. `User`: the clock read after `read` returns (a stalled engine
/// thread adds its stall to every reply that arrives meanwhile). `Kernel`: the kernel's software
/// stamp of the packet's arrival (SO_TIMESTAMPING), converted to CLOCK_MONOTONIC; taken whether
/// or not the engine runs. `Nic`: the NIC's hardware stamp of the packet on the wire, on its PTP
/// clock converted to CLOCK_MONOTONIC (stamp/nic.rs); the interface that routes to the targets is
/// switched to stamp every packet for the run (`Engine::start` fails, saying why, where it
/// cannot). For TCP a read's stamp is that of the last segment it took bytes from, and every
/// reply completed by that read gets it: a reply that arrived in an earlier segment of the same
/// read is overstated by the gap between the two segments, never understated. `Kernel` and `Nic`
/// also stamp every send (the transmit stamp, kept beside the user-space send time): a request
/// gets the stamp of the send that carried its last byte (tx_stamps.rs). The
/// user-space stamps are kept with every sample either way, for comparison.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timestamps {
    #[default]
    User,
    Kernel,
    Nic,
}

impl Timestamps {
    /// The clock that stamps packets, if any.
    pub fn clock(self) -> Option<StampClock> {
        match self {
            Timestamps::User => None,
            Timestamps::Kernel => Some(StampClock::Kernel),
            Timestamps::Nic => Some(StampClock::Nic),
        }
    }
}

/// Tests only (`test_hook.rs`): stop each engine thread for `for_ns`, first `at_ns` into the
/// schedule, then every `every_ns` after the previous stop began, `count` times in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestStall {
    pub at_ns: u64,
    pub for_ns: u64,
    pub every_ns: u64,
    pub count: u32,
}

impl TestStall {
    pub fn once(at_ns: u64, for_ns: u64) -> TestStall {
        TestStall { at_ns, for_ns, every_ns: 0, count: 1 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_through_json() {
        let d = EngineConfig::default();
        assert_eq!(EngineConfig::from_json(&d.to_json()).unwrap(), d);
        assert_eq!(EngineConfig::from_json("{}").unwrap(), d);
    }

    #[test]
    fn every_protocol_is_named_by_its_scheme() {
        for p in Protocol::each() {
            let cfg = EngineConfig { protocol: p.clone(), ..EngineConfig::default() };
            let v: serde_json::Value = serde_json::from_str(&cfg.to_json()).unwrap();
            assert_eq!(v["protocol"]["scheme"], p.name());
            assert_eq!(EngineConfig::from_json(&cfg.to_json()).unwrap().protocol, p);
        }
        let http = r#"{"protocol": {"scheme": "http", "host": "x"}}"#;
        let want = Protocol::Http(crate::protocol::http::Requests::get("x", "/").unwrap());
        assert_eq!(EngineConfig::from_json(http).unwrap().protocol, want);
    }

    #[test]
    fn a_protocol_refused_keeps_its_own_remedy() {
        let bad = r#"{"protocol": {"scheme": "http", "host": "x", "path": "/a\r\nX: 1"}}"#;
        let e = EngineConfig::from_json(bad).unwrap_err();
        assert!(matches!(e, ConfigError::Protocol(_)), "{e:?}");
        assert!(e.to_string().contains("path has a control character (0x0d) at position 2"), "{e}");
        assert!(e.remedy().contains("percent-encode"), "{}", e.remedy());
        let e = EngineConfig::from_json(r#"{"rate_rps": "fast"}"#).unwrap_err();
        assert!(matches!(e, ConfigError::Json(_)) && e.remedy().contains("ENGINE_DEFAULTS"));
    }

    #[test]
    fn a_full_configuration_parses() {
        let text = r#"{"targets": ["127.0.0.1:11211"], "rate_rps": 1e4, "duration_ns": 1000000000,
            "protocol": {"scheme": "memcached"}, "workload": {"keys": 100, "value_size": "etc", "popularity": "zipf:0.9"},
            "arrival": "lognormal:2", "timestamps": "kernel", "probe": {"conns": 4, "rate_rps": 2000},
            "test_stall": {"at_ns": 1, "for_ns": 2, "every_ns": 0, "count": 1}}"#;
        let c = EngineConfig::from_json(text).unwrap();
        assert_eq!(c.targets, vec!["127.0.0.1:11211".parse::<SocketAddr>().unwrap()]);
        assert_eq!(c.protocol, Protocol::MemcachedAscii);
        assert_eq!(c.workload, Workload::parse(100, "30", "etc", "zipf:0.9", 0.0).unwrap());
        assert_eq!(c.arrival, Arrival::LogNormal { sigma: 2.0 });
        assert_eq!(c.timestamps, Timestamps::Kernel);
        assert_eq!(c.probe, Some(Probe { conns: 4, rate_rps: 2000.0 }));
        assert_eq!(c.test_stall, Some(TestStall::once(1, 2)));
        assert_eq!(c.conns, 8);
        assert_eq!(EngineConfig::from_json(&c.to_json()).unwrap(), c);
        c.validate().unwrap();
    }

    #[test]
    fn unknown_or_malformed_fields_are_refused() {
        for bad in [
            r#"{"conn": 8}"#,
            r#"{"protocol": {"scheme": "gopher"}}"#,
            r#"{"protocol": {"scheme": "memcached", "size": 3}}"#,
            r#"{"workload": {"keys": 10, "values": "1"}}"#,
            r#"{"workload": {"key_size": "huge"}}"#,
            r#"{"arrival": "bursty"}"#,
            r#"{"timestamps": "ptp"}"#,
            r#"{"targets": ["localhost"]}"#,
            r#"{"probe": {"conns": 1}}"#,
        ] {
            let e = EngineConfig::from_json(bad).unwrap_err();
            assert!(e.to_string().starts_with("engine configuration: "), "{bad}: {e}");
            assert_eq!(e.kind(), Kind::Input);
        }
    }

    #[test]
    fn packet_mode_is_validated_as_its_own() {
        let ok = EngineConfig {
            targets: vec!["127.0.0.1:1".parse().unwrap()],
            rate_rps: 1.0,
            duration_ns: 1,
            protocol: Protocol::UdpFlow { size: 64, flows: 2 },
            threads: 2,
            conns: 1,
            ..EngineConfig::default()
        };
        ok.validate().unwrap();
        let three = EngineConfig { threads: 3, ..ok.clone() };
        assert!(matches!(three.validate(), Err(EngineError::FlowsBelowThreads { flows: 2, threads: 3 })));
        let probe = EngineConfig { probe: Some(Probe { conns: 1, rate_rps: 1.0 }), ..ok.clone() };
        assert!(matches!(probe.validate(), Err(EngineError::NotForPackets { .. })));
        let text = r#"{"protocol": {"scheme": "udp+flow", "size": 1500, "flows": 8}}"#;
        assert_eq!(EngineConfig::from_json(text).unwrap().protocol, Protocol::UdpFlow { size: 1500, flows: 8 });
        for bad in [r#"{"protocol": {"scheme": "udp+flow", "size": 40}}"#, r#"{"protocol": {"scheme": "udp+flow", "flows": 0}}"#] {
            assert!(EngineConfig::from_json(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn what_has_no_default_is_refused_by_validate() {
        assert!(matches!(EngineConfig::default().validate(), Err(EngineError::Rate(_))));
        let c = EngineConfig { rate_rps: 1.0, ..EngineConfig::default() };
        assert!(matches!(c.validate(), Err(EngineError::NoTarget)));
        let c = EngineConfig { targets: vec!["127.0.0.1:1".parse().unwrap()], ..c };
        assert!(matches!(c.validate(), Err(EngineError::Duration)));
    }
}
