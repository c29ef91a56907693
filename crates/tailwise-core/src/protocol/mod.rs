//! Wire protocols, one module per family (as in rpc-perf's `protocol/`).
//!
//! | module | scheme | transport |
//! |---|---|---|
//! | [`synthetic`] | `synthetic://` | TCP; tailwise's own, spoken by `tailwise serve` |
//! | [`memcached::ascii`] | `memcached://` | TCP; text protocol `get`/`set` |
//! | [`memcached::binary`] | `memcached+binary://` | TCP; binary protocol GETK/SET |
//! | [`memcached::udp`] | `memcached+udp://` | UDP; text protocol behind the 8-byte UDP frame header |
//! | [`redis`] | `redis://` | TCP; RESP `GET`/`SET` |
//! | [`http`] | `http://host:port/path` | TCP; HTTP/1.1 keep-alive requests (`GET path`, or the user's) |
//! | [`echo`] | `udp://` | UDP; N-byte datagrams echoed back |
//! | [`flow`] | `udp+flow://` | UDP; packet mode: flows of sequenced datagrams, sent and read by packet/ |
//!
//! A client codec encodes requests into a connection's output buffer and parses any number of
//! complete replies from its input byte stream (partial reads, several replies per read). A
//! datagram codec gets one whole datagram per `parse` call. The server side of the same protocols
//! lives next to the client side so the two share constants. `codec` says what a client codec is,
//! `scheme` which protocol a URL names and its codec; `wire` holds the codecs' byte-level helpers.

mod codec;
pub mod echo;
pub mod flow;
pub mod http;
pub mod memcached;
pub mod redis;
mod scheme;
pub mod synthetic;
#[cfg(test)]
mod testutil;
mod wire;

pub use codec::{Codec, Malformed, OpKind, Outcome, Parsed, Request, MAX_REPLY};
pub use scheme::{Body, Protocol, ProtocolSpec, RedisAuth, RequestSpec, UnknownScheme, UDP_SIZE};
