//! memcached over UDP, client side (memcached's `doc/protocol.txt`, section "UDP protocol").
//!
//! Every datagram starts with an 8-byte frame header, then text-protocol bytes (see
//! [`ascii`](super::ascii)):
//!
//! ```text
//! request id u16 | sequence number u16 | total datagrams u16 | reserved u16   (big-endian)
//! ```
//!
//! A request is one datagram: request id = `Request::id & 0xFFFF`, sequence 0, total 1. A reply
//! may span several datagrams (large values); the server numbers them 0..total and they may arrive
//! in any order. The codec keeps the fragments of unfinished replies by request id — at most
//! [`MAX_PARTIALS`] replies and [`MAX_REPLY`] bytes in all, the least recently touched dropped
//! beyond — and answers `Incomplete` for each fragment but the last, whose `Reply` carries the
//! outcome of the reassembled text. A fragment that does not fit the reply kept under its id (a
//! different total, or a sequence number seen already) means that reply was lost and its id
//! reused: the old fragments are dropped and a new reply started.

use std::collections::VecDeque;

use super::super::wire::show;
use super::super::{Codec, Parsed, Request, MAX_REPLY};
use super::ascii;

pub const FRAME_HEADER: usize = 8;
/// Unfinished multi-datagram replies kept at once.
pub const MAX_PARTIALS: usize = 64;
/// Charged per fragment on top of its bytes, so that empty fragments are bounded too.
const FRAGMENT_COST: usize = 64;

/// Append one request datagram.
#[inline]
pub fn encode_request(req: &Request, out: &mut Vec<u8>) {
    out.extend_from_slice(&(req.id as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 1, 0, 0]);
    ascii::encode_request(req, out);
}

/// Server side (tests, benchmarks, fuzz seeds): split a text reply into datagrams of at most
/// `max_payload` text bytes each (memcached uses about 1400).
pub fn encode_reply(request_id: u16, text: &[u8], max_payload: usize) -> Vec<Vec<u8>> {
    let chunks: Vec<&[u8]> = if text.is_empty() { vec![text] } else { text.chunks(max_payload.max(1)).collect() };
    let total = chunks.len() as u16;
    chunks
        .iter()
        .enumerate()
        .map(|(seq, chunk)| {
            let mut d = Vec::with_capacity(FRAME_HEADER + chunk.len());
            d.extend_from_slice(&request_id.to_be_bytes());
            d.extend_from_slice(&(seq as u16).to_be_bytes());
            d.extend_from_slice(&total.to_be_bytes());
            d.extend_from_slice(&[0, 0]);
            d.extend_from_slice(chunk);
            d
        })
        .collect()
}

/// The fragments received so far of one multi-datagram reply.
struct Partial {
    request_id: u16,
    total: u16,
    /// (sequence number, text bytes).
    fragments: Vec<(u16, Vec<u8>)>,
    cost: usize,
}

/// Client codec: replies are matched by their 16-bit request id.
#[derive(Default)]
pub struct Client {
    /// Least recently touched first.
    partials: VecDeque<Partial>,
    /// Sum of the partials' costs.
    cost: usize,
}

impl Client {
    pub fn new() -> Client {
        Client::default()
    }

    fn take_partial(&mut self, request_id: u16) -> Option<Partial> {
        let i = self.partials.iter().position(|p| p.request_id == request_id)?;
        let p = self.partials.remove(i)?;
        self.cost -= p.cost;
        Some(p)
    }

    /// The outcome of a whole reply text, which must hold exactly one reply.
    fn finish(len: usize, request_id: u16, text: &[u8]) -> Parsed {
        match ascii::parse_reply(text) {
            Parsed::Reply { len: n, outcome, .. } if n == text.len() => {
                Parsed::Reply { len, id: Some(request_id as u64), outcome }
            }
            Parsed::Reply { len: n, .. } => Parsed::Malformed {
                reason: format!("{} bytes after the reply in its datagrams: {}", text.len() - n, show(&text[n..])),
            },
            Parsed::Incomplete => Parsed::Malformed { reason: format!("reply cut short: {}", show(text)) },
            m @ Parsed::Malformed { .. } => m,
        }
    }
}

impl Codec for Client {
    #[inline]
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        encode_request(req, out);
    }

    fn parse(&mut self, d: &[u8]) -> Parsed {
        if d.len() < FRAME_HEADER {
            return Parsed::Malformed {
                reason: format!("datagram of {} bytes, shorter than the 8-byte frame header: {}", d.len(), show(d)),
            };
        }
        let request_id = u16::from_be_bytes([d[0], d[1]]);
        let seq = u16::from_be_bytes([d[2], d[3]]);
        let total = u16::from_be_bytes([d[4], d[5]]);
        if seq >= total {
            return Parsed::Malformed { reason: format!("datagram {seq} of {total} (request id {request_id})") };
        }
        let text = &d[FRAME_HEADER..];
        // Fast path, no copy: the whole reply in one datagram.
        if total == 1 {
            self.take_partial(request_id);
            return Self::finish(d.len(), request_id, text);
        }
        let mut p = match self.take_partial(request_id) {
            Some(p) if p.total == total && p.fragments.iter().all(|f| f.0 != seq) => p,
            _ => Partial { request_id, total, fragments: Vec::new(), cost: 0 },
        };
        p.cost += text.len() + FRAGMENT_COST;
        if p.cost > MAX_REPLY {
            return Parsed::Malformed {
                reason: format!("reply to request id {request_id} longer than {MAX_REPLY} bytes in {total} datagrams"),
            };
        }
        p.fragments.push((seq, text.to_vec()));
        if p.fragments.len() == total as usize {
            p.fragments.sort_unstable_by_key(|f| f.0);
            let whole: Vec<u8> = p.fragments.iter().flat_map(|f| f.1.iter().copied()).collect();
            return Self::finish(d.len(), request_id, &whole);
        }
        while self.partials.len() >= MAX_PARTIALS || self.cost + p.cost > MAX_REPLY {
            let Some(old) = self.partials.pop_front() else { break };
            self.cost -= old.cost;
        }
        self.cost += p.cost;
        self.partials.push_back(p);
        Parsed::Incomplete
    }

    fn id_mask(&self) -> u64 {
        0xFFFF
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::*;
    use crate::protocol::{OpKind, Outcome};
    use proptest::prelude::*;

    fn hit_text(value: &[u8]) -> Vec<u8> {
        let mut t = format!("VALUE k 0 {}\r\n", value.len()).into_bytes();
        t.extend_from_slice(value);
        t.extend_from_slice(b"\r\nEND\r\n");
        t
    }

    fn bad(p: Parsed, needle: &str) -> bool {
        matches!(p, Parsed::Malformed { ref reason } if reason.contains(needle))
    }

    #[test]
    fn request_bytes_are_exact() {
        let mut out = Vec::new();
        let mut c = Client::new();
        c.encode(&Request { id: 0x12_3456, kind: OpKind::Get, key: b"k1", value: b"", request: 0 }, &mut out);
        assert_eq!(out, b"\x34\x56\x00\x00\x00\x01\x00\x00get k1\r\n");
        out.clear();
        c.encode(&Request { id: 1, kind: OpKind::Set, key: b"k", value: b"ab", request: 0 }, &mut out);
        assert_eq!(out, b"\x00\x01\x00\x00\x00\x01\x00\x00set k 0 0 2\r\nab\r\n");
        assert_eq!(c.id_mask(), 0xFFFF);
    }

    #[test]
    fn single_datagram_replies() {
        let mut c = Client::new();
        let d = b"\x00\x07\x00\x00\x00\x01\x00\x00END\r\n";
        assert_eq!(c.parse(d), Parsed::Reply { len: 13, id: Some(7), outcome: Outcome::Miss });
        let d = &encode_reply(9, &hit_text(b"abc"), 1400)[0];
        assert_eq!(c.parse(d), Parsed::Reply { len: d.len(), id: Some(9), outcome: Outcome::Hit });
        let d = &encode_reply(0xFFFF, b"SERVER_ERROR out of memory\r\n", 1400)[0];
        let outcome = Outcome::Error("SERVER_ERROR out of memory".into());
        assert_eq!(c.parse(d), Parsed::Reply { len: d.len(), id: Some(0xFFFF), outcome });
    }

    #[test]
    fn multi_datagram_reply_in_any_order() {
        let text = hit_text(&[b'v'; 3000]);
        let ds = encode_reply(5, &text, 1400);
        assert_eq!(ds.len(), 3);
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let mut c = Client::new();
            // Another reply interleaved with the fragments.
            assert_eq!(c.parse(&ds[order[0]]), Parsed::Incomplete);
            let other = &encode_reply(6, b"STORED\r\n", 1400)[0];
            assert_eq!(c.parse(other), Parsed::Reply { len: 16, id: Some(6), outcome: Outcome::Stored });
            assert_eq!(c.parse(&ds[order[1]]), Parsed::Incomplete);
            let last = &ds[order[2]];
            assert_eq!(c.parse(last), Parsed::Reply { len: last.len(), id: Some(5), outcome: Outcome::Hit });
            assert!(c.partials.is_empty() && c.cost == 0);
        }
    }

    #[test]
    fn malformed_datagrams() {
        let mut c = Client::new();
        assert!(bad(c.parse(b"\x00\x01\x00"), "shorter than the 8-byte frame header"));
        assert!(bad(c.parse(b"\x00\x01\x00\x00\x00\x00\x00\x00END\r\n"), "datagram 0 of 0"));
        assert!(bad(c.parse(b"\x00\x01\x00\x02\x00\x02\x00\x00END\r\n"), "datagram 2 of 2"));
        assert!(bad(c.parse(b"\x00\x01\x00\x00\x00\x01\x00\x00END\r\nEND\r\n"), "5 bytes after the reply"));
        assert!(bad(c.parse(b"\x00\x01\x00\x00\x00\x01\x00\x00VALUE k 0 5\r\nab"), "reply cut short"));
        assert!(bad(c.parse(b"\x00\x01\x00\x00\x00\x01\x00\x00"), "reply cut short"));
        assert!(bad(c.parse(b"\x00\x01\x00\x00\x00\x01\x00\x00HTTP/1.1"), "not a memcached reply"));
        // A multi-datagram reply that reassembles to garbage.
        let ds = encode_reply(3, b"STORED\r\nSTORED\r\n", 8);
        assert_eq!(c.parse(&ds[1]), Parsed::Incomplete);
        assert!(bad(c.parse(&ds[0]), "8 bytes after the reply"));
    }

    #[test]
    fn stale_fragments_of_a_reused_id_are_replaced() {
        let mut c = Client::new();
        let lost = encode_reply(4, &hit_text(&[b'x'; 100]), 40);
        assert_eq!(c.parse(&lost[0]), Parsed::Incomplete);
        // The id comes round again with a different reply: same sequence number seen already.
        let fresh = encode_reply(4, &hit_text(&[b'y'; 10]), 20);
        assert_eq!(c.parse(&fresh[0]), Parsed::Incomplete);
        assert_eq!(c.parse(&fresh[1]), Parsed::Reply { len: fresh[1].len(), id: Some(4), outcome: Outcome::Hit });
        // A single-datagram reply under the id drops the leftovers too.
        assert_eq!(c.parse(&lost[1]), Parsed::Incomplete);
        let d = &encode_reply(4, b"END\r\n", 1400)[0];
        assert_eq!(c.parse(d), Parsed::Reply { len: 13, id: Some(4), outcome: Outcome::Miss });
        assert!(c.partials.is_empty() && c.cost == 0);
    }

    #[test]
    fn partial_replies_are_bounded() {
        let mut c = Client::new();
        for id in 0..200u16 {
            let ds = encode_reply(id, &hit_text(&[b'z'; 3000]), 1400);
            assert_eq!(c.parse(&ds[0]), Parsed::Incomplete);
        }
        assert_eq!(c.partials.len(), MAX_PARTIALS);
        assert_eq!(c.partials[0].request_id, 200 - MAX_PARTIALS as u16);
        // Big fragments: the byte budget evicts before the count does.
        let big = hit_text(&vec![b'w'; 600_000]);
        for id in 1000..1010u16 {
            let ds = encode_reply(id, &big, 500_000);
            assert_eq!(c.parse(&ds[0]), Parsed::Incomplete);
            assert!(c.cost <= MAX_REPLY);
        }
        assert!(c.partials.len() <= MAX_REPLY / 500_000);
        // One reply above the limit on its own.
        let huge = encode_reply(7, &vec![b'h'; MAX_REPLY + 10], 60_000);
        let mut last = Parsed::Incomplete;
        for d in &huge {
            last = c.parse(d);
            if last != Parsed::Incomplete {
                break;
            }
        }
        assert!(bad(last, "longer than"));
        assert!(c.cost <= MAX_REPLY);
    }

    proptest! {
        #[test]
        fn arbitrary_datagrams_never_panic(ds in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16),
                                           headers in proptest::collection::vec((0u16..3, 0u16..4, 0u16..4), 0..16)) {
            // Frame headers from a small range so that fragments meet each other.
            let ds: Vec<Vec<u8>> = ds.into_iter().zip(headers.iter().chain(std::iter::repeat(&(0, 0, 1)))).map(|(mut d, &(id, seq, total))| {
                if d.len() >= 8 && id != 0 {
                    d[..6].copy_from_slice(&[0, id as u8, 0, seq as u8, 0, total as u8]);
                }
                d
            }).collect();
            no_panic_datagrams(&mut Client::new(), &ds);
        }

        #[test]
        fn round_trip(v in value(), id in any::<u16>(), payload in 1usize..2000, seed in any::<u64>(), stored in any::<bool>()) {
            let text = if stored { b"STORED\r\n".to_vec() } else { hit_text(&v) };
            let mut ds = encode_reply(id, &text, payload);
            // Any arrival order (a rotation and a reversal picked by the seed).
            let n = ds.len();
            ds.rotate_left((seed as usize) % n);
            if seed & (1 << 63) != 0 {
                ds.reverse();
            }
            let mut c = Client::new();
            for d in &ds[..n - 1] {
                prop_assert_eq!(c.parse(d), Parsed::Incomplete);
            }
            let outcome = if stored { Outcome::Stored } else { Outcome::Hit };
            prop_assert_eq!(c.parse(&ds[n - 1]), Parsed::Reply { len: ds[n - 1].len(), id: Some(id as u64), outcome });
            prop_assert!(c.partials.is_empty());
        }
    }
}
