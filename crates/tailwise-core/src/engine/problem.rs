//! The engine's problems, typed: what keeps it from starting ([`EngineError`]), what the target
//! did to a connection ([`Lost`], [`Killed`], [`Failure`]: for the error reasons and the
//! reachability verdict), and why a run ended early ([`Abort`]). Each says its problem in one line
//! (`Display`) and its remedy apart (`Problem::remedy`); nothing branches on the text.

use super::setup::{Refused, SetupError};
use super::tls::{HandshakeError, TlsError};
use crate::error::{Kind, Problem};
use crate::io::route::RouteError;
use crate::load::workload::WorkloadError;
use crate::stamp::StampClock;
use crate::stamp::nic::NicError;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

/// What the target's own words are when nothing listens on a TCP port (a refused connect).
const TCP_NOTHING_LISTENS: &str = "nothing listens there: start the server (or `tailwise serve`) or fix the port";
const UDP_NOTHING_LISTENS: &str = "nothing listens on that UDP port: start the server or fix the port";
const NO_ANSWER: &str = "no answer: check the address and that the host is up";
const CHECK_TARGET: &str = "check the target address and that the server runs";

/// Why [`super::Engine::start`] refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("rate must be a positive number of requests per second, got {0}")]
    Rate(f64),
    #[error("{per_thread:.0} req/s per engine thread is beyond what one thread can send (~2M req/s pipelined here)")]
    RatePerThread { per_thread: f64, threads_needed: f64 },
    #[error("threads, connections and outstanding requests must each be at least 1")]
    Zero,
    #[error("{conns} connections cannot feed {threads} threads")]
    ConnsBelowThreads { conns: usize, threads: usize },
    /// Packet mode: each thread sends its own flows.
    #[error("{flows} flows cannot feed {threads} threads")]
    FlowsBelowThreads { flows: usize, threads: usize },
    /// Packet mode has no latency probe nor test hook: `what` names the one asked for.
    #[error("udp+flow (packet mode) has no {what}")]
    NotForPackets { what: &'static str },
    #[error("no target address")]
    NoTarget,
    #[error("duration must be above zero")]
    Duration,
    #[error("the probe needs at least 1 connection and a positive rate")]
    Probe,
    /// The workload's own check (load/workload.rs).
    #[error("{0}")]
    Workload(WorkloadError),
    #[error("cannot open a UDP socket: {0}")]
    UdpSocket(io::Error),
    #[error("cannot connect to {addr} (UDP): {err}")]
    ConnectUdp { addr: SocketAddr, err: io::Error },
    #[error("cannot connect to {addr}: {err}")]
    Connect { addr: SocketAddr, err: io::Error },
    /// What a connection says first (setup.rs: Redis AUTH, SELECT) failed or was refused.
    #[error("{addr}: {err}")]
    Setup { addr: SocketAddr, err: SetupError },
    #[error("{what} on {addr}: {err}")]
    SocketOption { what: &'static str, addr: SocketAddr, err: io::Error },
    #[error("{clock:?} timestamps (SO_TIMESTAMPING) refused: {err}")]
    Timestamps { clock: StampClock, err: io::Error },
    /// `--timestamps nic`: the route to a target (io/route.rs).
    #[error("--timestamps nic: {0}")]
    Route(RouteError),
    #[error(
        "--timestamps nic: the targets are reached through {} interfaces ({}); a run reads one NIC's clock",
        .0.len(), .0.join(", ")
    )]
    Interfaces(Vec<String>),
    /// `--timestamps nic`: the interface cannot stamp (stamp/nic.rs says why).
    #[error("--timestamps nic: {iface} cannot stamp in hardware: {err}")]
    NoHardwareStamps { iface: String, err: NicError },
    /// TLS asked for and not possible (files, names, protocol).
    #[error("{0}")]
    Tls(TlsError),
    /// An initial connection's handshake failed (rustls names the certificate problem).
    #[error("TLS handshake with {addr} failed: {err}")]
    Handshake { addr: SocketAddr, err: HandshakeError },
    #[error("cannot start engine thread: {0}")]
    Spawn(io::Error),
    /// A test hook asked of a build without them (the `test-hooks` feature).
    #[error("the engine's test hook (TAILWISE_TEST_ENGINE_STALL, a configuration's test_stall) is not in this build")]
    NoTestHooks,
}

impl Problem for EngineError {
    fn kind(&self) -> Kind {
        use EngineError::*;
        match self {
            Connect { .. } | ConnectUdp { .. } | Setup { .. } | Handshake { .. } => Kind::Target,
            Tls(e) => e.kind(),
            UdpSocket(_) | SocketOption { .. } | Timestamps { .. } | Route(_) | NoHardwareStamps { .. } | Spawn(_) => {
                Kind::Host
            }
            _ => Kind::Input,
        }
    }

    fn remedy(&self) -> String {
        use EngineError::*;
        match self {
            RatePerThread { threads_needed, .. } => format!("use --threads {threads_needed} or more, or a lower --rate"),
            ConnsBelowThreads { threads, .. } => format!("use --conns {threads} or more, or fewer --threads"),
            FlowsBelowThreads { threads, .. } => format!("use --flows {threads} or more, or fewer --threads"),
            NotForPackets { .. } => "leave it out: every packet is timed".into(),
            Connect { err, .. } => match err.kind() {
                io::ErrorKind::ConnectionRefused => TCP_NOTHING_LISTENS.into(),
                io::ErrorKind::TimedOut => NO_ANSWER.into(),
                _ => CHECK_TARGET.into(),
            },
            ConnectUdp { .. } => CHECK_TARGET.into(),
            Setup { err, .. } => err.remedy(),
            Interfaces(_) => "give targets behind one interface, or use --timestamps kernel".into(),
            Workload(e) => e.remedy(),
            Tls(e) => e.remedy(),
            Handshake { err, .. } => err.remedy().into(),
            Route(e) => e.remedy(),
            NoHardwareStamps { err, .. } => err.remedy(),
            NoTestHooks => "unset TAILWISE_TEST_ENGINE_STALL, or build with the test-hooks feature \
                            (MATURIN_PEP517_ARGS=\"--features test-hooks\", as scripts/test does)"
                .into(),
            _ => String::new(),
        }
    }
}

/// An I/O error that can be kept twice (the first and the latest failure of a target).
#[derive(Clone, Debug)]
pub struct IoErr(pub Arc<io::Error>);

impl From<io::Error> for IoErr {
    fn from(e: io::Error) -> IoErr {
        IoErr(Arc::new(e))
    }
}

impl std::fmt::Display for IoErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a stream connection ended (its requests are sent again on a new one).
#[derive(Clone, Debug, thiserror::Error)]
pub enum Lost {
    #[error("the target closed the connection")]
    Closed,
    #[error("the target closed the connection (reset)")]
    Reset,
    #[error("the connection to the target failed: {0}")]
    Failed(IoErr),
    #[error("send failed: {0}")]
    Send(IoErr),
    /// The TLS layer refused what the target sent (a bad record, an alert).
    #[error("TLS: {0}")]
    Tls(rustls::Error),
    /// Closed by us: its oldest request had no reply for this long (ns; twice the timeout).
    #[error("no reply within {} ms", .0 / 1_000_000)]
    Silent(u64),
}

impl Lost {
    /// The target closed it (not a failure of ours, nor a timeout).
    pub fn closed_by_target(&self) -> bool {
        matches!(self, Lost::Closed | Lost::Reset)
    }
}

/// Why a connection was closed for good: the target does not speak the protocol.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Killed {
    #[error("a reply arrived with no request outstanding")]
    NoRequest,
    #[error("reply id {got} does not match the oldest request {want}")]
    WrongId { got: u64, want: u64 },
    #[error("malformed reply: {0}")]
    Malformed(String),
    #[error("reply longer than {0} bytes")]
    TooLong(usize),
    /// A datagram socket has no connection to lose: what would have lost one ends it.
    #[error(transparent)]
    Lost(Lost),
    /// A reconnect's setup command refused (setup.rs): the server's words.
    #[error(transparent)]
    Setup(Refused),
}

/// A failure the target caused, for its reachability: a refusal, a close before any reply.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Failure {
    #[error("cannot reconnect to {addr}: {err}")]
    Reconnect { addr: SocketAddr, err: IoErr },
    #[error("cannot reconnect to {addr}: no answer within {} ms", .ns / 1_000_000)]
    ReconnectSilent { addr: SocketAddr, ns: u64 },
    /// A reconnect's TLS handshake failed or timed out.
    #[error("TLS handshake with {addr} failed: {err}")]
    Handshake { addr: SocketAddr, err: Arc<HandshakeError> },
    #[error("cannot watch the connection to {0}")]
    Watch(SocketAddr),
    /// A connection lost before any reply on it.
    #[error("{lost}{}", if .0.closed_by_target() { " before replying" } else { "" }, lost = .0)]
    LostBeforeReply(Lost),
    #[error("send to {addr} failed: {err}")]
    SendDatagram { addr: SocketAddr, err: IoErr },
    #[error("receive from {addr} failed: {err}")]
    Receive { addr: SocketAddr, err: IoErr },
}

impl Failure {
    /// The target closed a connection before replying on it.
    pub fn closed_before_reply(&self) -> bool {
        matches!(self, Failure::LostBeforeReply(l) if l.closed_by_target())
    }

    pub fn remedy(&self) -> &'static str {
        match self {
            Failure::Receive { err, .. } if err.0.kind() == io::ErrorKind::ConnectionRefused => UDP_NOTHING_LISTENS,
            Failure::Handshake { err, .. } => err.remedy(),
            _ => "",
        }
    }

    /// As an error reason (counted, shown): the problem with its remedy.
    pub fn reason(&self) -> String {
        match self.remedy() {
            "" => self.to_string(),
            remedy => format!("{self} — {remedy}"),
        }
    }
}

/// Why the engine ended a run before its end; `EngineResult::error`.
#[derive(Debug, thiserror::Error)]
pub enum Abort {
    #[error("the target closed every connection before replying for {secs:.1} s ({replies} replies received before)")]
    ClosedEvery { secs: f64, replies: u64 },
    #[error(
        "the target {}stays unreachable ({last}) for {secs:.1} s ({replies} replies received before)",
        if *.closed { "closed the connection and " } else { "" }
    )]
    Unreachable { last: Failure, closed: bool, secs: f64, replies: u64 },
    #[error("every connection of engine thread {thread} failed; last: {last}")]
    ConnsFailed { thread: usize, last: Killed },
    #[error("the target answered none of the {sent} requests sent ({why})")]
    NoneAnswered { sent: u64, why: NoReply },
    #[error("epoll failed: {0}")]
    Epoll(io::Error),
    #[error("an engine thread panicked (a bug: please report it)")]
    Panicked,
}

/// What the target did instead of answering: its first failure, else the first error reason.
#[derive(Debug, thiserror::Error)]
pub enum NoReply {
    #[error(transparent)]
    Failure(Failure),
    #[error("{0}")]
    Reason(String),
    #[error("no reply")]
    Silent,
}

impl Problem for Abort {
    fn kind(&self) -> Kind {
        match self {
            Abort::Epoll(_) | Abort::Panicked => Kind::Host,
            _ => Kind::Target,
        }
    }

    fn remedy(&self) -> String {
        match self {
            Abort::Unreachable { last: f, .. } | Abort::NoneAnswered { why: NoReply::Failure(f), .. } => f.remedy().into(),
            Abort::ConnsFailed { last: Killed::Setup(r), .. } => r.remedy(),
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> IoErr {
        io::Error::from(io::ErrorKind::ConnectionRefused).into()
    }

    #[test]
    fn a_refused_connect_names_the_fix_apart_from_the_problem() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let e = EngineError::Connect { addr, err: io::Error::from(io::ErrorKind::ConnectionRefused) };
        assert!(e.to_string().starts_with("cannot connect to 127.0.0.1:9: "), "{e}");
        assert!(e.remedy().starts_with("nothing listens there"));
        assert_eq!(e.kind(), Kind::Target);
        let e = EngineError::RatePerThread { per_thread: 1e12, threads_needed: 100_000.0 };
        assert_eq!(e.remedy(), "use --threads 100000 or more, or a lower --rate");
        assert_eq!(e.kind(), Kind::Input);
    }

    #[test]
    fn a_close_before_any_reply_says_so_and_other_losses_do_not() {
        assert_eq!(Failure::LostBeforeReply(Lost::Closed).to_string(), "the target closed the connection before replying");
        assert!(Failure::LostBeforeReply(Lost::Reset).closed_before_reply());
        let send = Failure::LostBeforeReply(Lost::Send(refused()));
        assert!(!send.closed_before_reply() && !send.to_string().contains("before replying"));
        assert_eq!(Lost::Silent(2_000_000_000).to_string(), "no reply within 2000 ms");
    }

    #[test]
    fn an_unreachable_udp_target_carries_the_remedy_of_its_last_failure() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let last = Failure::Receive { addr, err: refused() };
        assert!(last.reason().ends_with(" — nothing listens on that UDP port: start the server or fix the port"));
        let a = Abort::Unreachable { last, closed: false, secs: 2.04, replies: 3 };
        let text = a.to_string();
        assert!(text.starts_with("the target stays unreachable (receive from 127.0.0.1:9 failed: "), "{text}");
        assert!(text.ends_with(") for 2.0 s (3 replies received before)") && !text.contains("nothing listens"), "{text}");
        assert!(a.remedy().starts_with("nothing listens on that UDP port"));
        let a = Abort::Unreachable { last: Failure::Watch(addr), closed: true, secs: 2.0, replies: 0 };
        assert!(a.to_string().starts_with("the target closed the connection and stays unreachable (cannot watch"));
        assert_eq!(a.remedy(), "");
    }
}
