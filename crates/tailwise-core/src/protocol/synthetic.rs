//! tailwise's own "synthetic" protocol, spoken by `tailwise serve`.
//!
//! Fixed 24-byte little-endian header both ways, so the server's parse cost is tiny and constant:
//!
//! ```text
//! request : magic[4] = A7 'T' 'W' 01 | service_ns u32 | reply_pad u32 | reserved u32 | id u64
//! reply   : magic[4]                  | service_ns u32 | reply_pad u32 | status u32   | id u64
//!           followed by reply_pad zero bytes
//! ```
//!
//! `service_ns = 0xFFFF_FFFF` asks the server to draw the service time from its own
//! distribution (`--service`); any other value is spun for exactly that long. The reply echoes the
//! id and the service time actually spun. The first byte 0xA7 is not ASCII, which lets the server
//! tell this protocol apart from memcached's text protocol on the same port.

use super::{Codec, Malformed, Outcome, Parsed, Request as Req};

pub const MAGIC: [u8; 4] = [0xA7, b'T', b'W', 0x01];
pub const HEADER_LEN: usize = 24;
pub const SERVER_CHOOSES: u32 = u32::MAX;
/// Largest reply padding a server accepts: bounds the bytes one request can make it send.
pub const MAX_PAD: u32 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub service_ns: u32,
    pub reply_pad: u32,
    pub id: u64,
}

pub fn encode_request(r: &Request, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&r.service_ns.to_le_bytes());
    out.extend_from_slice(&r.reply_pad.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&r.id.to_le_bytes());
}

pub fn encode_reply(id: u64, service_ns: u32, reply_pad: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&service_ns.to_le_bytes());
    out.extend_from_slice(&reply_pad.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.resize(out.len() + reply_pad as usize, 0);
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap())
}

fn check_magic(buf: &[u8], what: &str) -> Result<(), Malformed> {
    let n = buf.len().min(4);
    if buf[..n] != MAGIC[..n] {
        return Err(Malformed(format!(
            "not a synthetic-protocol {what}: first bytes {:02x?}, expected {:02x?}",
            &buf[..n],
            &MAGIC[..n]
        )));
    }
    Ok(())
}

/// Server side: one request from the front of `buf`, `Ok(None)` if incomplete.
pub fn parse_request(buf: &[u8]) -> Result<Option<(usize, Request)>, Malformed> {
    check_magic(buf, "request")?;
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let r = Request { service_ns: u32_at(buf, 4), reply_pad: u32_at(buf, 8), id: u64_at(buf, 16) };
    if r.reply_pad > MAX_PAD {
        return Err(Malformed(format!("reply_pad {} above the limit {MAX_PAD}", r.reply_pad)));
    }
    Ok(Some((HEADER_LEN, r)))
}

/// Client codec.
pub struct Client {
    service_ns: u32,
    reply_pad: u32,
}

impl Client {
    /// `service_ns = None` lets the server draw from its own distribution.
    pub fn new(service_ns: Option<u32>, reply_pad: u32) -> Client {
        Client { service_ns: service_ns.unwrap_or(SERVER_CHOOSES), reply_pad }
    }
}

impl Codec for Client {
    #[inline]
    fn encode(&mut self, req: &Req, out: &mut Vec<u8>) {
        encode_request(&Request { service_ns: self.service_ns, reply_pad: self.reply_pad, id: req.id }, out);
    }

    #[inline]
    fn parse(&mut self, buf: &[u8]) -> Parsed {
        if buf.is_empty() {
            return Parsed::Incomplete;
        }
        if let Err(m) = check_magic(buf, "reply") {
            return m.into();
        }
        if buf.len() < HEADER_LEN {
            return Parsed::Incomplete;
        }
        let pad = u32_at(buf, 8);
        if pad > MAX_PAD {
            return Parsed::Malformed { reason: format!("reply padding {pad} above the limit {MAX_PAD}") };
        }
        let len = HEADER_LEN + pad as usize;
        if buf.len() < len {
            return Parsed::Incomplete;
        }
        let status = u32_at(buf, 12);
        let outcome = if status == 0 { Outcome::Done } else { Outcome::Error(format!("server status {status}")) };
        Parsed::Reply { len, id: Some(u64_at(buf, 16)), outcome }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_bytes_are_exact() {
        let mut out = Vec::new();
        encode_request(&Request { service_ns: 10_000, reply_pad: 0, id: 0x0102 }, &mut out);
        assert_eq!(
            out,
            [0xA7, b'T', b'W', 1, 0x10, 0x27, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(parse_request(&out).unwrap(), Some((24, Request { service_ns: 10_000, reply_pad: 0, id: 0x0102 })));
        assert_eq!(parse_request(&out[..10]).unwrap(), None);
        assert!(parse_request(b"get k\r\n").is_err());
    }

    #[test]
    fn client_parses_split_and_coalesced_replies() {
        let mut stream = Vec::new();
        encode_reply(1, 5, 0, &mut stream);
        encode_reply(2, 5, 7, &mut stream);
        let mut c = Client::new(None, 0);
        assert_eq!(c.parse(&stream[..23]), Parsed::Incomplete);
        assert_eq!(c.parse(&stream), Parsed::Reply { len: 24, id: Some(1), outcome: Outcome::Done });
        assert_eq!(c.parse(&stream[24..40]), Parsed::Incomplete);
        assert_eq!(c.parse(&stream[24..]), Parsed::Reply { len: 31, id: Some(2), outcome: Outcome::Done });
    }

    #[test]
    fn garbage_is_malformed_not_a_hang() {
        let mut c = Client::new(None, 0);
        assert!(matches!(c.parse(b"HTTP/1.1 400"), Parsed::Malformed { .. }));
        assert!(matches!(c.parse(&[0xA7, b'X']), Parsed::Malformed { .. }));
        let mut huge = Vec::new();
        encode_reply(1, 0, 0, &mut huge);
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(c.parse(&huge), Parsed::Malformed { .. }));
    }

    mod props {
        use super::*;
        use crate::protocol::testutil::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn arbitrary_bytes_never_panic((mut bytes, cuts) in bytes_and_cuts(), magic in any::<bool>()) {
                if magic {
                    bytes.splice(0..0, MAGIC);
                }
                no_panic_stream(&mut Client::new(None, 0), &bytes, &cuts);
            }

            #[test]
            fn round_trip(ids in proptest::collection::vec(any::<u64>(), 1..4), pad in 0u32..3000, cut in any::<usize>()) {
                let mut s = Vec::new();
                for &id in &ids {
                    encode_reply(id, 7, pad, &mut s);
                }
                let want: Vec<_> = ids.iter().map(|&id| (24 + pad as usize, Some(id), Outcome::Done)).collect();
                prop_assert_eq!(drive(&mut Client::new(None, 0), &s, &[]), want.clone());
                prop_assert_eq!(drive(&mut Client::new(None, 0), &s, &[cut % (s.len() + 1)]), want);
            }
        }
    }
}
