//! The protocols a target URL names ([`Protocol`]), as a configuration writes them
//! ([`ProtocolSpec`], [`UnknownScheme`] when it names none or gives a parameter out of range),
//! and each one's client codec.

use super::codec::Codec;
use super::{echo, flow, http, memcached, redis, synthetic};

/// The protocols a target URL can name. In an engine configuration (JSON), an object named by
/// its scheme with the parameters it has ([`ProtocolSpec`]): `{"scheme": "http", "path": "/"}`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "ProtocolSpec", into = "ProtocolSpec")]
pub enum Protocol {
    /// `synthetic://`: tailwise's own; the request may carry its service time.
    Synthetic { service_ns: Option<u32>, reply_pad: u32 },
    MemcachedAscii,
    MemcachedBinary,
    MemcachedUdp,
    /// `redis://[user:]password@host:port/N`: `AUTH` (with the user, if any) and `SELECT N` on
    /// every connection before any request (engine/setup.rs), each only when given.
    Redis { auth: Option<RedisAuth>, db: Option<u64> },
    /// `http://host/path`: `GET path` with `host` in the Host field, or the requests given
    /// (`requests` in its [`ProtocolSpec`]), each checked and encoded once.
    Http(http::Requests),
    /// UDP datagrams of `size` bytes (at least 8: the id), echoed back.
    UdpEcho { size: usize },
    /// Packet mode (packet/): `flows` UDP flows of `size`-byte Ethernet frames, each datagram
    /// carrying its flow and sequence number, reflected or forwarded back.
    UdpFlow { size: usize, flows: usize },
}

/// A protocol as written in a configuration: its scheme ([`Protocol::name`]) and, of the
/// parameters, only those its protocol has; a missing one takes [`Protocol::each`]'s. (Serde's
/// own enum tagging would let a parameter given to the wrong protocol pass unseen.)
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolSpec {
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_ns: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_pad: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<usize>,
    /// http: the requests, instead of `GET path` (not with `path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<Vec<RequestSpec>>,
    /// http: how each request is chosen of `requests` (default: in turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw: Option<http::Draw>,
    /// redis: `AUTH [user] password` on every connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<RedisAuth>,
    /// redis: `SELECT db` on every connection (the server refuses one it does not have).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db: Option<u64>,
}

/// Redis `AUTH` (<https://redis.io/docs/latest/commands/auth/>): the password alone for the
/// `default` user, or an ACL user's name and password: `{"user": "app", "password": "…"}`.
/// Serialised as given (the configuration travels in memory, and to an agent); never shown:
/// `Debug` writes `***` for the password.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub password: String,
}

impl std::fmt::Debug for RedisAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisAuth").field("user", &self.user).field("password", &"***").finish()
    }
}

/// One of an http target's `requests`, as a configuration writes it:
/// `{"method": "POST", "path": "/api", "headers": [["Content-Type", "application/json"]],
/// "body": "{}", "weight": 3}`. Only `path` is required (method `GET`, no field, no body,
/// weight 1). A body is a string when it is UTF-8, else an array of its bytes.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    #[serde(default = "get")]
    pub method: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Body::is_empty")]
    pub body: Body,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub weight: u32,
}

fn get() -> String {
    "GET".into()
}

fn one() -> u32 {
    1
}

fn is_one(w: &u32) -> bool {
    *w == 1
}

/// A request body in JSON: text when it is UTF-8 (most are), else its bytes as numbers.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum Body {
    Text(String),
    Bytes(Vec<u8>),
}

impl Default for Body {
    fn default() -> Body {
        Body::Text(String::new())
    }
}

impl Body {
    fn is_empty(&self) -> bool {
        match self {
            Body::Text(t) => t.is_empty(),
            Body::Bytes(b) => b.is_empty(),
        }
    }
}

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Body {
        String::from_utf8(bytes).map_or_else(|e| Body::Bytes(e.into_bytes()), Body::Text)
    }
}

impl From<Body> for Vec<u8> {
    fn from(b: Body) -> Vec<u8> {
        match b {
            Body::Text(t) => t.into_bytes(),
            Body::Bytes(b) => b,
        }
    }
}

impl From<RequestSpec> for (http::HttpRequest, u32) {
    fn from(r: RequestSpec) -> (http::HttpRequest, u32) {
        (http::HttpRequest { method: r.method, path: r.path, headers: r.headers, body: r.body.into() }, r.weight)
    }
}

impl From<&(http::HttpRequest, u32)> for RequestSpec {
    fn from((r, weight): &(http::HttpRequest, u32)) -> RequestSpec {
        let (method, path, headers) = (r.method.clone(), r.path.clone(), r.headers.clone());
        RequestSpec { method, path, headers, body: r.body.clone().into(), weight: *weight }
    }
}

impl From<Protocol> for ProtocolSpec {
    fn from(p: Protocol) -> ProtocolSpec {
        let scheme = p.name().to_string();
        match p {
            Protocol::Synthetic { service_ns, reply_pad } => {
                ProtocolSpec { scheme, service_ns, reply_pad: Some(reply_pad), ..Default::default() }
            }
            Protocol::Http(r) => {
                let host = Some(r.host().to_string());
                match r.plain_get() {
                    Some(path) => ProtocolSpec { scheme, host, path: Some(path.into()), ..Default::default() },
                    None => ProtocolSpec {
                        scheme,
                        host,
                        requests: Some(r.list().iter().map(RequestSpec::from).collect()),
                        draw: (r.draw() != http::Draw::default()).then_some(r.draw()),
                        ..Default::default()
                    },
                }
            }
            Protocol::UdpEcho { size } => ProtocolSpec { scheme, size: Some(size), ..Default::default() },
            Protocol::UdpFlow { size, flows } => {
                ProtocolSpec { scheme, size: Some(size), flows: Some(flows), ..Default::default() }
            }
            Protocol::Redis { auth, db } => ProtocolSpec { scheme, auth, db, ..Default::default() },
            _ => ProtocolSpec { scheme, ..Default::default() },
        }
    }
}

impl TryFrom<ProtocolSpec> for Protocol {
    type Error = UnknownScheme;

    fn try_from(s: ProtocolSpec) -> Result<Protocol, UnknownScheme> {
        let p = match Protocol::named(&s.scheme)? {
            Protocol::Synthetic { .. } => {
                Protocol::Synthetic { service_ns: s.service_ns, reply_pad: s.reply_pad.unwrap_or(0) }
            }
            Protocol::Http(_) => http_protocol(&s)?,
            Protocol::UdpEcho { .. } => Protocol::UdpEcho { size: s.size.unwrap_or(UDP_SIZE) },
            Protocol::UdpFlow { .. } => flow_protocol(&s)?,
            Protocol::Redis { .. } => Protocol::Redis { auth: redis_auth(&s)?, db: s.db },
            other => other,
        };
        // A parameter its protocol does not have: refused, not ignored.
        let (given, kept) = (s, ProtocolSpec::from(p.clone()));
        let http = matches!(p, Protocol::Http(_));
        let extra = [
            ("service_ns", given.service_ns.is_some() && kept.service_ns.is_none()),
            ("reply_pad", given.reply_pad.is_some() && kept.reply_pad.is_none()),
            ("host", given.host.is_some() && kept.host.is_none()),
            ("path", given.path.is_some() && kept.path.is_none()),
            ("size", given.size.is_some() && kept.size.is_none()),
            ("flows", given.flows.is_some() && kept.flows.is_none()),
            ("requests", given.requests.is_some() && !http),
            ("draw", given.draw.is_some() && !http),
            ("auth", given.auth.is_some() && kept.auth.is_none()),
            ("db", given.db.is_some() && kept.db.is_none()),
        ];
        match extra.iter().find(|(_, bad)| *bad) {
            Some((field, _)) => Err(UnknownScheme::Parameter { scheme: given.scheme, field }),
            None => Ok(p),
        }
    }
}

/// `http`'s parameters: `GET path` (as today's configurations say, and refused as they were), or
/// the requests given, checked by `http::Requests::new`.
fn http_protocol(s: &ProtocolSpec) -> Result<Protocol, UnknownScheme> {
    let host = s.host.clone().unwrap_or_else(|| "localhost".into());
    let refuse = |field, what| UnknownScheme::Text { scheme: s.scheme.clone(), field, what };
    http::check_host(&host).map_err(|w| refuse("host", w))?;
    let draw = s.draw.unwrap_or_default();
    let requests = match (&s.path, &s.requests) {
        (Some(_), Some(_)) => return Err(UnknownScheme::PathAndRequests { scheme: s.scheme.clone() }),
        (_, Some(list)) => http::Requests::new(&host, list.iter().cloned().map(Into::into).collect(), draw),
        (path, None) => {
            let path = path.as_deref().unwrap_or("/");
            http::check_path(path).map_err(|w| refuse("path", w))?;
            http::Requests::new(&host, vec![(http::HttpRequest::get(path), 1)], draw)
        }
    };
    let request = |what| UnknownScheme::Request { scheme: s.scheme.clone(), what };
    Ok(Protocol::Http(requests.map_err(request)?))
}

/// redis's `auth`: a user name and a password go into a RESP bulk string as they are (any bytes);
/// an empty one is refused here rather than by the server at every connection.
fn redis_auth(s: &ProtocolSpec) -> Result<Option<RedisAuth>, UnknownScheme> {
    let Some(auth) = &s.auth else { return Ok(None) };
    let empty = |field| UnknownScheme::Empty { scheme: s.scheme.clone(), field };
    if auth.password.is_empty() {
        return Err(empty("auth.password"));
    }
    if auth.user.as_deref() == Some("") {
        return Err(empty("auth.user"));
    }
    Ok(Some(auth.clone()))
}

/// A datagram's bytes when a `udp://` URL gives no `?size=`.
pub const UDP_SIZE: usize = 64;

/// `udp+flow`'s parameters, each in its range (flow.rs: `FRAME_MIN..=FRAME_MAX`, `MAX_FLOWS`).
fn flow_protocol(s: &ProtocolSpec) -> Result<Protocol, UnknownScheme> {
    use super::flow::{DEFAULT_FLOWS, FRAME_DEFAULT, FRAME_MAX, FRAME_MIN, MAX_FLOWS};
    let (size, flows) = (s.size.unwrap_or(FRAME_DEFAULT), s.flows.unwrap_or(DEFAULT_FLOWS));
    let range = |field, value, min, max| UnknownScheme::Range { scheme: s.scheme.clone(), field, value, min, max };
    if !(FRAME_MIN..=FRAME_MAX).contains(&size) {
        return Err(range("size", size, FRAME_MIN, FRAME_MAX));
    }
    if !(1..=MAX_FLOWS).contains(&flows) {
        return Err(range("flows", flows, 1, MAX_FLOWS));
    }
    Ok(Protocol::UdpFlow { size, flows })
}

/// A URL scheme that names no protocol, or a parameter its protocol does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnknownScheme {
    #[error("unknown protocol '{0}'")]
    Scheme(String),
    #[error("protocol '{scheme}' has no parameter '{field}'")]
    Parameter { scheme: String, field: &'static str },
    #[error("protocol '{scheme}': {field} {value} is out of range")]
    Range { scheme: String, field: &'static str, value: usize, min: usize, max: usize },
    /// An HTTP target's host or path holds a byte that RFC 3986 does not allow there, or is too
    /// long: it would go into every request as written (a CR LF would add headers or requests).
    #[error("protocol '{scheme}': {field} {what}")]
    Text { scheme: String, field: &'static str, what: http::BadText },
    /// An HTTP target's requests that cannot be sent as written (http.rs: `Requests::new`).
    #[error("protocol '{scheme}': {what}")]
    Request { scheme: String, what: http::BadRequest },
    #[error("protocol '{scheme}': both path and requests")]
    PathAndRequests { scheme: String },
    #[error("protocol '{scheme}': {field} is empty")]
    Empty { scheme: String, field: &'static str },
}

impl crate::error::Problem for UnknownScheme {
    fn kind(&self) -> crate::error::Kind {
        crate::error::Kind::Input
    }

    fn remedy(&self) -> String {
        match self {
            UnknownScheme::Scheme(_) => {
                let names: Vec<&str> = Protocol::each().iter().map(Protocol::name).collect();
                format!("use one of {}", names.join(", "))
            }
            UnknownScheme::Parameter { .. } => {
                "service_ns and reply_pad are synthetic's, host, path, requests and draw http's, size udp's and \
                 udp+flow's, flows udp+flow's, auth and db redis's"
                    .into()
            }
            UnknownScheme::Range { field, min, max, .. } => format!("give {field} from {min} to {max}"),
            UnknownScheme::Text { field, .. } => http::text_remedy(field),
            UnknownScheme::Request { what, .. } => what.remedy(),
            UnknownScheme::PathAndRequests { .. } => "give each request its path, and no path beside them".into(),
            UnknownScheme::Empty { field, .. } => format!("give a {field}, or leave it out"),
        }
    }
}

impl Protocol {
    pub fn codec(&self) -> Box<dyn Codec> {
        match self {
            Protocol::Synthetic { service_ns, reply_pad } => {
                Box::new(synthetic::Client::new(*service_ns, *reply_pad))
            }
            Protocol::MemcachedAscii => Box::new(memcached::ascii::Client::new()),
            Protocol::MemcachedBinary => Box::new(memcached::binary::Client::new()),
            Protocol::MemcachedUdp => Box::new(memcached::udp::Client::new()),
            Protocol::Redis { .. } => Box::new(redis::Client::new()),
            Protocol::Http(r) => Box::new(http::Client::sending(r.clone())),
            Protocol::UdpEcho { size } => Box::new(echo::Client::new(*size)),
            Protocol::UdpFlow { size, .. } => Box::new(flow::Client::new(*size)),
        }
    }

    /// One of each protocol (default parameters), in the order the command line lists them:
    /// `tailwise._core.PROTOCOLS` names them with [`Protocol::has_keys`] and
    /// [`Protocol::is_datagram`], and Python's scheme lists are built from it.
    pub fn each() -> [Protocol; 8] {
        [
            Protocol::Synthetic { service_ns: None, reply_pad: 0 },
            Protocol::MemcachedAscii,
            Protocol::MemcachedBinary,
            Protocol::MemcachedUdp,
            Protocol::Redis { auth: None, db: None },
            Protocol::Http(http::Requests::get("localhost", "/").expect("a valid host and path")),
            Protocol::UdpEcho { size: UDP_SIZE },
            Protocol::UdpFlow { size: flow::FRAME_DEFAULT, flows: flow::DEFAULT_FLOWS },
        ]
    }

    /// The protocol `scheme` names, with its default parameters.
    pub fn named(scheme: &str) -> Result<Protocol, UnknownScheme> {
        Protocol::each().into_iter().find(|p| p.name() == scheme).ok_or_else(|| UnknownScheme::Scheme(scheme.into()))
    }

    /// The URL scheme that names it.
    pub fn name(&self) -> &'static str {
        match self {
            Protocol::Synthetic { .. } => "synthetic",
            Protocol::MemcachedAscii => "memcached",
            Protocol::MemcachedBinary => "memcached+binary",
            Protocol::MemcachedUdp => "memcached+udp",
            Protocol::Redis { .. } => "redis",
            Protocol::Http(_) => "http",
            Protocol::UdpEcho { .. } => "udp",
            Protocol::UdpFlow { .. } => "udp+flow",
        }
    }

    /// A thread's drawer of which request each one is (http's several; the others have one).
    pub fn drawer(&self, seed: u64) -> http::Drawer {
        match self {
            Protocol::Http(r) => r.drawer(seed),
            _ => http::Drawer::single(),
        }
    }

    /// One request per datagram over UDP; replies may be lost or reordered and are matched by id.
    pub fn is_datagram(&self) -> bool {
        matches!(self, Protocol::MemcachedUdp | Protocol::UdpEcho { .. } | Protocol::UdpFlow { .. })
    }

    /// Packet mode: the engine's threads run the packet path (packet/) instead of requests on
    /// connections.
    pub fn is_packet(&self) -> bool {
        matches!(self, Protocol::UdpFlow { .. })
    }

    /// Whether requests carry keys (and the workload's key/value shape applies).
    pub fn has_keys(&self) -> bool {
        matches!(self, Protocol::MemcachedAscii | Protocol::MemcachedBinary | Protocol::MemcachedUdp | Protocol::Redis { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::Protocol;

    #[test]
    fn each_names_every_protocol_once() {
        // Exhaustive: a new protocol fails to compile here until `each` lists it too.
        let variant = |p: &Protocol| match p {
            Protocol::Synthetic { .. } => 0,
            Protocol::MemcachedAscii => 1,
            Protocol::MemcachedBinary => 2,
            Protocol::MemcachedUdp => 3,
            Protocol::Redis { .. } => 4,
            Protocol::Http(_) => 5,
            Protocol::UdpEcho { .. } => 6,
            Protocol::UdpFlow { .. } => 7,
        };
        let each = Protocol::each();
        assert_eq!(each.iter().map(variant).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
        let mut names: Vec<_> = each.iter().map(Protocol::name).collect();
        names.dedup();
        assert_eq!(names.len(), 8);
    }

    #[test]
    fn udp_flow_parameters_are_held_to_their_ranges() {
        use super::{ProtocolSpec, UnknownScheme};
        let spec = |size, flows| ProtocolSpec { scheme: "udp+flow".into(), size, flows, ..Default::default() };
        assert_eq!(Protocol::try_from(spec(None, None)), Ok(Protocol::UdpFlow { size: 64, flows: 1 }));
        assert_eq!(Protocol::try_from(spec(Some(9018), Some(1024))), Ok(Protocol::UdpFlow { size: 9018, flows: 1024 }));
        for (size, flows, field) in [(63, 1, "size"), (9019, 1, "size"), (64, 0, "flows"), (64, 1025, "flows")] {
            match Protocol::try_from(spec(Some(size), Some(flows))) {
                Err(UnknownScheme::Range { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{size} {flows}: {other:?}"),
            }
        }
        let echo_with_flows = ProtocolSpec { scheme: "udp".into(), flows: Some(2), ..Default::default() };
        assert!(matches!(Protocol::try_from(echo_with_flows), Err(UnknownScheme::Parameter { field: "flows", .. })));
    }

    /// http.rs's `check_host` and `check_path`: the engine's configuration refuses what they
    /// refuse, as an agent receives it.
    #[test]
    fn an_http_host_or_path_its_checks_refuse_is_refused() {
        use super::ProtocolSpec;
        let spec = |host: &str, path: &str| ProtocolSpec {
            scheme: "http".into(), host: Some(host.into()), path: Some(path.into()), ..Default::default()
        };
        let e = Protocol::try_from(spec("h", "/x\r\nX: 1")).unwrap_err();
        assert_eq!(e.to_string(), "protocol 'http': path has a control character (0x0d) at position 2");
        assert!(Protocol::try_from(spec("h:80", "/ok")).is_ok());
    }

    /// An http target's requests as a configuration gives them: kept through JSON (a body that
    /// is not UTF-8 as its bytes), today's `path` alone written as it was, and what
    /// `Requests::new` refuses refused with its words.
    #[test]
    fn http_requests_round_trip_and_are_refused_as_requests_new_refuses_them() {
        use super::ProtocolSpec;
        use crate::protocol::http::{Draw, HttpRequest};
        let text = r#"{"scheme": "http", "host": "h:8080", "draw": "weight", "requests": [
            {"path": "/a"},
            {"method": "POST", "path": "/b", "headers": [["Content-Type", "text/plain"], ["X-A", "1"]], "body": "hi", "weight": 3},
            {"method": "PUT", "path": "/c", "body": [0, 255, 13, 10]}]}"#;
        let p: Protocol = serde_json::from_str(text).unwrap();
        let Protocol::Http(r) = &p else { panic!("{p:?}") };
        assert_eq!((r.host(), r.draw()), ("h:8080", Draw::Weight));
        let headers = vec![("Content-Type".to_string(), "text/plain".to_string()), ("X-A".into(), "1".into())];
        let post = HttpRequest { method: "POST".into(), path: "/b".into(), headers, body: b"hi".to_vec() };
        let put = HttpRequest { method: "PUT".into(), path: "/c".into(), headers: vec![], body: vec![0, 255, 13, 10] };
        assert_eq!(r.list(), &[(HttpRequest::get("/a"), 1), (post, 3), (put, 1)][..]);
        assert_eq!(r.wire(2), b"PUT /c HTTP/1.1\r\nHost: h:8080\r\nContent-Length: 4\r\n\r\n\x00\xff\r\n");
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains(r#""body":[0,255,13,10]"#) && json.contains(r#""body":"hi""#), "{json}");
        assert_eq!(serde_json::from_str::<Protocol>(&json).unwrap(), p);
        // Without requests: GET path, written as before.
        let get: Protocol = serde_json::from_str(r#"{"scheme": "http", "host": "x", "path": "/p"}"#).unwrap();
        assert_eq!(serde_json::to_string(&get).unwrap(), r#"{"scheme":"http","host":"x","path":"/p"}"#);
        let one = r#"{"scheme": "http", "host": "x", "requests": [{"path": "/p"}]}"#;
        assert_eq!(serde_json::from_str::<Protocol>(one).unwrap(), get);
        // Refused: by Requests::new, with both path and requests, on another protocol.
        let spec = |json: &str| serde_json::from_str::<ProtocolSpec>(json).unwrap();
        let bad = spec(r#"{"scheme": "http", "requests": [{"path": "/", "headers": [["X", "a\r\nY: b"]]}]}"#);
        let e = Protocol::try_from(bad).unwrap_err();
        assert_eq!(e.to_string(), "protocol 'http': requests[0].headers[0] (X): value has CR (0x0d) at position 1");
        assert!(crate::error::Problem::remedy(&e).contains("RFC 9110 §5.5"));
        let e = Protocol::try_from(spec(r#"{"scheme": "http", "requests": [{"path": "/", "weight": 2}]}"#)).unwrap_err();
        assert!(crate::error::Problem::remedy(&e).contains("draw 'weight'"), "{e}");
        let both = spec(r#"{"scheme": "http", "path": "/", "requests": [{"path": "/"}]}"#);
        assert_eq!(Protocol::try_from(both).unwrap_err().to_string(), "protocol 'http': both path and requests");
        let memcached = spec(r#"{"scheme": "memcached", "requests": [{"path": "/"}]}"#);
        assert_eq!(Protocol::try_from(memcached).unwrap_err().to_string(), "protocol 'memcached' has no parameter 'requests'");
        let redis = spec(r#"{"scheme": "redis", "draw": "turn"}"#);
        assert_eq!(Protocol::try_from(redis).unwrap_err().to_string(), "protocol 'redis' has no parameter 'draw'");
        for unknown in [r#"{"scheme": "http", "requests": [{"path": "/", "hdrs": []}]}"#, r#"{"scheme": "http", "draw": "random"}"#] {
            assert!(serde_json::from_str::<ProtocolSpec>(unknown).is_err(), "{unknown}");
        }
    }
    /// redis's `auth` and `db`: kept through JSON, refused on another protocol or empty, the
    /// password never in a `Debug` form.
    #[test]
    fn redis_auth_and_db_round_trip_and_are_refused_elsewhere() {
        use super::{ProtocolSpec, RedisAuth};
        let text = r#"{"scheme": "redis", "auth": {"user": "app", "password": "p@ss:w/rd"}, "db": 3}"#;
        let p: Protocol = serde_json::from_str(text).unwrap();
        let auth = Some(RedisAuth { user: Some("app".into()), password: "p@ss:w/rd".into() });
        assert_eq!(p, Protocol::Redis { auth, db: Some(3) });
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, r#"{"scheme":"redis","auth":{"user":"app","password":"p@ss:w/rd"},"db":3}"#);
        assert!(!format!("{p:?}").contains("p@ss"), "{p:?}");
        let plain: Protocol = serde_json::from_str(r#"{"scheme": "redis", "auth": {"password": "x"}}"#).unwrap();
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"scheme":"redis","auth":{"password":"x"}}"#);
        assert_eq!(serde_json::to_string(&Protocol::named("redis").unwrap()).unwrap(), r#"{"scheme":"redis"}"#);
        let spec = |json: &str| serde_json::from_str::<ProtocolSpec>(json).unwrap();
        let e = Protocol::try_from(spec(r#"{"scheme": "memcached", "auth": {"password": "x"}}"#)).unwrap_err();
        assert_eq!(e.to_string(), "protocol 'memcached' has no parameter 'auth'");
        let e = Protocol::try_from(spec(r#"{"scheme": "http", "db": 1}"#)).unwrap_err();
        assert_eq!(e.to_string(), "protocol 'http' has no parameter 'db'");
        let e = Protocol::try_from(spec(r#"{"scheme": "redis", "auth": {"password": ""}}"#)).unwrap_err();
        assert_eq!(e.to_string(), "protocol 'redis': auth.password is empty");
        let e = Protocol::try_from(spec(r#"{"scheme": "redis", "auth": {"user": "", "password": "x"}}"#)).unwrap_err();
        assert_eq!(e.to_string(), "protocol 'redis': auth.user is empty");
        for bad in [r#"{"scheme": "redis", "db": -1}"#, r#"{"scheme": "redis", "auth": {"pass": "x"}}"#] {
            assert!(serde_json::from_str::<ProtocolSpec>(bad).is_err(), "{bad}");
        }
    }
}
