//! memcached binary protocol, client side (memcached's `doc/protocol-binary.xml`, "Memcache Binary
//! Protocol" draft, 2008).
//!
//! Every packet is a 24-byte big-endian header followed by extras, key and value:
//!
//! ```text
//! offset  0: magic u8 (0x80 request, 0x81 response) | opcode u8 | key length u16
//! offset  4: extras length u8 | data type u8 | vbucket u16 (request) / status u16 (response)
//! offset  8: total body length u32 (extras + key + value)
//! offset 12: opaque u32 (echoed back by the server)
//! offset 16: CAS u64
//! offset 24: extras, key, value
//! ```
//!
//! A get is sent as GETK (0x0c), a set as SET (0x01) with 8 bytes of extras (flags 0, expiration
//! 0). The request id goes in the opaque, so replies are matched by id. Status 0x0000 is a hit
//! (GET family) or stored (SET), 0x0001 a miss; any other status is an error reply. Wrong magic or
//! lengths that do not add up are malformed.

use super::super::{Codec, OpKind, Outcome, Parsed, Request, MAX_REPLY};

pub const HEADER_LEN: usize = 24;
pub const MAGIC_REQUEST: u8 = 0x80;
pub const MAGIC_RESPONSE: u8 = 0x81;
pub const OP_GET: u8 = 0x00;
pub const OP_SET: u8 = 0x01;
pub const OP_GETQ: u8 = 0x09;
pub const OP_GETK: u8 = 0x0c;
pub const OP_GETKQ: u8 = 0x0d;
pub const STATUS_OK: u16 = 0x0000;
pub const STATUS_KEY_NOT_FOUND: u16 = 0x0001;

/// The response statuses protocol-binary.xml defines.
pub fn status_name(status: u16) -> &'static str {
    match status {
        0x0000 => "no error",
        0x0001 => "key not found",
        0x0002 => "key exists",
        0x0003 => "value too large",
        0x0004 => "invalid arguments",
        0x0005 => "item not stored",
        0x0006 => "incr/decr on non-numeric value",
        0x0007 => "vbucket belongs to another server",
        0x0008 => "authentication error",
        0x0009 => "authentication continue",
        0x0081 => "unknown command",
        0x0082 => "out of memory",
        0x0083 => "not supported",
        0x0084 => "internal error",
        0x0085 => "busy",
        0x0086 => "temporary failure",
        _ => "unknown status",
    }
}

#[allow(clippy::too_many_arguments)]
fn header(out: &mut Vec<u8>, magic: u8, opcode: u8, key_len: u16, extras: u8, status: u16, body: u32, opaque: u32) {
    out.push(magic);
    out.push(opcode);
    out.extend_from_slice(&key_len.to_be_bytes());
    out.push(extras);
    out.push(0);
    out.extend_from_slice(&status.to_be_bytes());
    out.extend_from_slice(&body.to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&0u64.to_be_bytes());
}

/// Append a GETK or SET request. Keys are at most 250 bytes in memcached, so the u16 key length
/// never truncates for a valid key.
#[inline]
pub fn encode_request(req: &Request, out: &mut Vec<u8>) {
    let opaque = req.id as u32;
    let key_len = req.key.len() as u16;
    match req.kind {
        OpKind::Get => {
            header(out, MAGIC_REQUEST, OP_GETK, key_len, 0, 0, req.key.len() as u32, opaque);
            out.extend_from_slice(req.key);
        }
        OpKind::Set => {
            let body = 8 + req.key.len() + req.value.len();
            header(out, MAGIC_REQUEST, OP_SET, key_len, 8, 0, body as u32, opaque);
            out.extend_from_slice(&[0; 8]);
            out.extend_from_slice(req.key);
            out.extend_from_slice(req.value);
        }
    }
}

/// Server side (tests, benchmarks, fuzz seeds): a response packet. Extras (the 4-byte flags) are
/// sent for successful gets, as memcached does.
pub fn encode_reply(opcode: u8, status: u16, opaque: u32, key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let get_hit = status == STATUS_OK && matches!(opcode, OP_GET | OP_GETQ | OP_GETK | OP_GETKQ);
    let extras: &[u8] = if get_hit { &[0, 0, 0, 0] } else { &[] };
    let body = extras.len() + key.len() + value.len();
    header(out, MAGIC_RESPONSE, opcode, key.len() as u16, extras.len() as u8, status, body as u32, opaque);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Client codec: replies carry the request's id in the opaque.
#[derive(Debug, Default)]
pub struct Client;

impl Client {
    pub fn new() -> Client {
        Client
    }
}

impl Codec for Client {
    #[inline]
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        encode_request(req, out);
    }

    #[inline]
    fn parse(&mut self, buf: &[u8]) -> Parsed {
        let Some(&magic) = buf.first() else {
            return Parsed::Incomplete;
        };
        if magic != MAGIC_RESPONSE {
            return Parsed::Malformed {
                reason: format!(
                    "not a memcached binary response: magic 0x{magic:02x}, expected 0x81 (first bytes {})",
                    super::super::wire::show(&buf[..buf.len().min(24)])
                ),
            };
        }
        if buf.len() < HEADER_LEN {
            return Parsed::Incomplete;
        }
        let h: &[u8; HEADER_LEN] = buf[..HEADER_LEN].try_into().unwrap();
        let opcode = h[1];
        let key_len = u16::from_be_bytes([h[2], h[3]]) as usize;
        let extras = h[4] as usize;
        let status = u16::from_be_bytes([h[6], h[7]]);
        let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        let opaque = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        if body > MAX_REPLY {
            return Parsed::Malformed { reason: format!("response body of {body} bytes above the limit {MAX_REPLY}") };
        }
        if key_len + extras > body {
            return Parsed::Malformed {
                reason: format!("response body of {body} bytes shorter than its key ({key_len}) and extras ({extras})"),
            };
        }
        let len = HEADER_LEN + body;
        if buf.len() < len {
            return Parsed::Incomplete;
        }
        let outcome = match status {
            STATUS_OK if opcode == OP_SET => Outcome::Stored,
            STATUS_OK if matches!(opcode, OP_GET | OP_GETQ | OP_GETK | OP_GETKQ) => Outcome::Hit,
            STATUS_OK => Outcome::Done,
            STATUS_KEY_NOT_FOUND => Outcome::Miss,
            s => Outcome::Error(format!("status 0x{s:04x} {}", status_name(s))),
        };
        Parsed::Reply { len, id: Some(opaque as u64), outcome }
    }

    fn id_mask(&self) -> u64 {
        0xFFFF_FFFF
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::*;
    use proptest::prelude::*;

    fn make() -> Box<dyn Codec> {
        Box::new(Client::new())
    }

    fn reply(opcode: u8, status: u16, opaque: u32, key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_reply(opcode, status, opaque, key, value, &mut out);
        out
    }

    #[test]
    fn request_bytes_are_exact() {
        let mut out = Vec::new();
        let mut c = Client::new();
        c.encode(&Request { id: 0x1_0203_0405, kind: OpKind::Get, key: b"foo", value: b"", request: 0 }, &mut out);
        #[rustfmt::skip]
        assert_eq!(out, [
            0x80, 0x0c, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x03, 0x02, 0x03, 0x04, 0x05,
            0, 0, 0, 0, 0, 0, 0, 0,
            b'f', b'o', b'o',
        ]);
        out.clear();
        c.encode(&Request { id: 9, kind: OpKind::Set, key: b"k", value: b"vv", request: 0 }, &mut out);
        #[rustfmt::skip]
        assert_eq!(out, [
            0x80, 0x01, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x0b, 0x00, 0x00, 0x00, 0x09,
            0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0,
            b'k', b'v', b'v',
        ]);
        assert_eq!(c.id_mask(), 0xFFFF_FFFF);
    }

    #[test]
    fn reply_bytes_and_outcomes() {
        let hit = reply(OP_GETK, 0, 7, b"foo", b"bar");
        #[rustfmt::skip]
        assert_eq!(hit, [
            0x81, 0x0c, 0x00, 0x03, 0x04, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x07,
            0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, b'f', b'o', b'o', b'b', b'a', b'r',
        ]);
        let mut c = Client::new();
        assert_eq!(c.parse(&hit), Parsed::Reply { len: 34, id: Some(7), outcome: Outcome::Hit });
        let miss = reply(OP_GETK, 1, 8, b"", b"Not found");
        assert_eq!(c.parse(&miss), Parsed::Reply { len: 33, id: Some(8), outcome: Outcome::Miss });
        let stored = reply(OP_SET, 0, 0xFFFF_FFFF, b"", b"");
        assert_eq!(c.parse(&stored), Parsed::Reply { len: 24, id: Some(0xFFFF_FFFF), outcome: Outcome::Stored });
        let noop = reply(0x0a, 0, 1, b"", b"");
        assert_eq!(c.parse(&noop), Parsed::Reply { len: 24, id: Some(1), outcome: Outcome::Done });
        for (status, text) in [
            (0x0003, "status 0x0003 value too large"),
            (0x0082, "status 0x0082 out of memory"),
            (0x0086, "status 0x0086 temporary failure"),
            (0x1234, "status 0x1234 unknown status"),
        ] {
            let r = reply(OP_SET, status, 3, b"", b"err");
            assert_eq!(c.parse(&r), Parsed::Reply { len: 27, id: Some(3), outcome: Outcome::Error(text.into()) });
        }
    }

    #[test]
    fn split_and_coalesced_replies() {
        let mut s = reply(OP_GETK, 0, 1, b"key", &[0x81; 40]);
        s.extend(reply(OP_GETK, 1, 2, b"", b"Not found"));
        s.extend(reply(OP_SET, 0, 3, b"", b""));
        s.extend(reply(OP_SET, 5, 4, b"", b"Not stored"));
        check_all_splits(
            &make,
            &s,
            &[
                (Some(1), Outcome::Hit),
                (Some(2), Outcome::Miss),
                (Some(3), Outcome::Stored),
                (Some(4), Outcome::Error("status 0x0005 item not stored".into())),
            ],
        );
    }

    #[test]
    fn malformed_replies() {
        let mut c = Client::new();
        let bad = |p: Parsed, needle: &str| matches!(p, Parsed::Malformed { ref reason } if reason.contains(needle));
        assert!(bad(c.parse(b"VALUE"), "magic 0x56, expected 0x81 (first bytes \"VALUE\")"));
        assert!(bad(c.parse(&[0x80]), "magic 0x80"));
        let mut r = reply(OP_GETK, 0, 1, b"", b"");
        r[8..12].copy_from_slice(&((MAX_REPLY + 1) as u32).to_be_bytes());
        assert!(bad(c.parse(&r), "above the limit"));
        let mut r = reply(OP_GETK, 0, 1, b"abc", b"");
        r[8..12].copy_from_slice(&6u32.to_be_bytes());
        assert!(bad(c.parse(&r), "shorter than its key (3) and extras (4)"));
        // A body of exactly MAX_REPLY is accepted, and waited for.
        let mut r = reply(OP_GETK, 0, 1, b"", b"");
        r[8..12].copy_from_slice(&(MAX_REPLY as u32).to_be_bytes());
        assert_eq!(c.parse(&r), Parsed::Incomplete);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic((mut bytes, cuts) in bytes_and_cuts(), magic in any::<bool>()) {
            if magic && !bytes.is_empty() {
                bytes[0] = MAGIC_RESPONSE;
            }
            no_panic_stream(&mut Client::new(), &bytes, &cuts);
        }

        #[test]
        fn edited_replies_never_panic(v in value(), e in edits(), cut in any::<usize>()) {
            let mut s = reply(OP_GETK, 0, 1, b"key", &v);
            s.extend(reply(OP_SET, 0, 2, b"", b""));
            let s = apply_edits(s, &e);
            no_panic_stream(&mut Client::new(), &s, &[cut % (s.len() + 1)]);
        }

        #[test]
        fn round_trip(key in key(), v in value(), id in any::<u64>(), status in 0u16..0x90, cut in any::<usize>()) {
            let mut req = Vec::new();
            encode_request(&Request { id, kind: OpKind::Get, key: &key, value: b"", request: 0 }, &mut req);
            let opaque = u32::from_be_bytes(req[12..16].try_into().unwrap());
            prop_assert_eq!(opaque as u64, id & Client::new().id_mask());
            let s = reply(OP_GETK, status, opaque, &key, &v);
            let outcome = match status {
                0 => Outcome::Hit,
                1 => Outcome::Miss,
                s => Outcome::Error(format!("status 0x{s:04x} {}", status_name(s))),
            };
            let want = vec![(s.len(), Some(opaque as u64), outcome)];
            prop_assert_eq!(drive(&mut Client::new(), &s, &[]), want.clone());
            prop_assert_eq!(drive(&mut Client::new(), &s, &[cut % (s.len() + 1)]), want);
        }
    }
}
