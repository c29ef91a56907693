//! Wire protocols, one module per family (as in rpc-perf's `protocol/`).
//!
//! A client codec encodes requests into a connection's output buffer and parses any number of
//! complete replies from its input byte stream (partial reads, several replies per read). The
//! server side of the same protocols lives next to the client side so the two share constants.

pub mod memcached;
pub mod synthetic;

/// Result of trying to parse one reply from the front of a byte stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Need more bytes.
    Incomplete,
    /// One well-formed reply of `len` bytes; `id` where the protocol carries one.
    Reply { len: usize, id: Option<u64> },
    /// The stream is not this protocol: `reason` names what was wrong. The connection cannot be
    /// resynchronised and must be closed.
    Malformed { reason: String },
}

/// The client side of a request/response protocol.
pub trait Codec: Send {
    /// Append the request with sequence number `id` to `out`.
    fn encode(&mut self, id: u64, out: &mut Vec<u8>);
    /// Parse one reply from the front of `buf`.
    fn parse(&mut self, buf: &[u8]) -> Parsed;
}

/// The protocols a target URL can name.
#[derive(Clone, Debug, PartialEq)]
pub enum Protocol {
    /// `synthetic://`: tailwise's own; the request may carry its service time.
    Synthetic { service_ns: Option<u32>, reply_pad: u32 },
}

impl Protocol {
    pub fn codec(&self) -> Box<dyn Codec> {
        match self {
            Protocol::Synthetic { service_ns, reply_pad } => {
                Box::new(synthetic::Client::new(*service_ns, *reply_pad))
            }
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            Protocol::Synthetic { .. } => "synthetic",
        }
    }
}
