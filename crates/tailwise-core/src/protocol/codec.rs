//! What a client codec is: a [`Request`] encoded, one reply parsed from the front of a buffer
//! ([`Parsed`]: a reply with its [`Outcome`], more bytes needed, or [`Malformed`]), the [`Codec`]
//! every protocol family implements, and [`MAX_REPLY`], which bounds every read buffer.

/// Longest reply a client codec accepts (memcached's item limit is 1 MiB): a longer one is
/// malformed, which bounds a connection's read buffer whatever the server sends.
pub const MAX_REPLY: usize = 4 << 20;

/// The kind of request; protocols without keys (synthetic, http, udp echo) send `Get` only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Get,
    Set,
}

/// One request as the workload generator made it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// Sequence number; protocols that carry an id (synthetic, memcached binary's opaque, the
    /// memcached UDP request id, udp echo) send `id & id_mask()`.
    pub id: u64,
    pub kind: OpKind,
    pub key: &'a [u8],
    /// The value to store (`Set` only).
    pub value: &'a [u8],
    /// Which of the protocol's requests it is (HTTP: the index of its [`super::http::Requests`]
    /// as the thread's drawer chose it); 0 for the protocols with one kind of request.
    pub request: u16,
}

/// What a well-formed reply said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A get that found its key.
    Hit,
    /// A get whose key was absent.
    Miss,
    /// A set the server stored.
    Stored,
    /// A reply to a request without keys (synthetic, HTTP 2xx/3xx, echo).
    Done,
    /// The server answered with an error (memcached `SERVER_ERROR`, Redis `-ERR`, HTTP 5xx, …);
    /// the stream stays in sync and the connection goes on.
    Error(String),
}

/// Result of trying to parse one reply from the front of a byte stream (or one datagram).
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Need more bytes (stream), or the datagram was one fragment of a multi-datagram reply.
    Incomplete,
    /// One well-formed reply of `len` bytes; `id` where the protocol carries one (already masked).
    Reply { len: usize, id: Option<u64>, outcome: Outcome },
    /// The stream is not this protocol: `reason` names what was wrong. A stream connection cannot
    /// be resynchronised and is closed; a bad datagram is dropped.
    Malformed { reason: String },
}

/// Why bytes are not the protocol, in words (`wire::show` excerpts of them): only ever shown — as
/// a reply's [`Parsed::Malformed`] reason or a server's refusal — never matched on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

impl crate::error::Problem for Malformed {
    fn kind(&self) -> crate::error::Kind {
        crate::error::Kind::Target
    }

    fn remedy(&self) -> String {
        String::new()
    }
}

impl From<Malformed> for Parsed {
    fn from(m: Malformed) -> Parsed {
        Parsed::Malformed { reason: m.0 }
    }
}

/// The client side of a request/response protocol.
pub trait Codec: Send {
    /// Append `req` to `out` (for a datagram codec, `out` is empty and receives one datagram).
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>);
    /// Parse one reply from the front of `buf` (a datagram codec: `buf` is one whole datagram).
    fn parse(&mut self, buf: &[u8]) -> Parsed;
    /// The bits of `Request::id` that a reply's id carries back.
    fn id_mask(&self) -> u64 {
        u64::MAX
    }
}
