//! Redis, client side: RESP2 (Redis serialization protocol specification,
//! <https://redis.io/docs/latest/develop/reference/protocol-spec/>).
//!
//! Requests are arrays of bulk strings:
//!
//! ```text
//! GET : *2\r\n$3\r\nGET\r\n$<key len>\r\n<key>\r\n
//! SET : *3\r\n$3\r\nSET\r\n$<key len>\r\n<key>\r\n$<value len>\r\n<value>\r\n
//! ```
//!
//! Replies, one value each, in request order:
//!
//! ```text
//! $<n>\r\n<n bytes>\r\n   Hit          $-1\r\n, *-1\r\n, _\r\n (RESP3 null)   Miss
//! +OK\r\n                 Stored       +<other>\r\n                      Done
//! -<message>\r\n          Error(message)
//! :<integer>\r\n          Done         *<n>\r\n<n values>                 Done (nested at most 8 deep)
//! ```
//!
//! A bulk length above [`MAX_REPLY`] or negative other than -1, a simple string or error line over
//! 64 KiB, and any other type byte (including the rest of RESP3, which is only spoken after
//! `HELLO 3`) are malformed.

use super::wire::{self, line, push_decimal, Line};
use super::{Codec, Malformed, OpKind, Outcome, Parsed, Request, MAX_REPLY};

/// Deepest nesting of arrays accepted.
pub const MAX_DEPTH: usize = 8;
/// Longest simple string or error line.
pub const MAX_LINE: usize = 64 * 1024;
/// Longest length or integer line: `-9223372036854775808`.
const MAX_NUMBER: usize = 20;

/// Append a GET or SET command.
#[inline]
pub fn encode_request(req: &Request, out: &mut Vec<u8>) {
    match req.kind {
        OpKind::Get => out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$"),
        OpKind::Set => out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$"),
    }
    push_decimal(out, req.key.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(req.key);
    out.extend_from_slice(b"\r\n");
    if req.kind == OpKind::Set {
        out.push(b'$');
        push_decimal(out, req.value.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(req.value);
        out.extend_from_slice(b"\r\n");
    }
}

/// Incomplete, or (end of the value, its outcome), or why the bytes are not RESP.
///
/// RESP is parsed by hand here, not by a library: it is the timing path (one reply per request,
/// no allocation for a hit) and the grammar is a few line types (see the table above).
type Step = Result<Option<(usize, Outcome)>, Malformed>;

/// The line starting at `start` (after the type byte): its end, `None` if incomplete.
fn line_at(buf: &[u8], start: usize, max: usize) -> Result<Option<usize>, Malformed> {
    match line(&buf[start..], max) {
        Line::Found { end } => Ok(Some(start + end)),
        Line::Incomplete => Ok(None),
        Line::TooLong => Err(Malformed(format!("RESP line longer than {max} bytes: {}", wire::show(&buf[start - 1..])))),
        Line::BareLf { at } => {
            Err(Malformed(format!("RESP line ended by LF without CR: {}", wire::show(&buf[start - 1..start + at + 1]))))
        }
    }
}

/// A length or integer: `-1`, or digits; anything else is an error naming the line.
fn number(s: &[u8], what: &str) -> Result<i64, Malformed> {
    let (neg, digits) = match s.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, s),
    };
    match wire::parse_decimal(digits, i64::MAX as u64) {
        Some(n) if neg => Ok(-(n as i64)),
        Some(n) => Ok(n as i64),
        None => Err(Malformed(format!("bad {what} {}", wire::show(s)))),
    }
}

/// One RESP value at `pos`; `depth` counts the arrays around it. The outcome is only built at the
/// top (`depth == 0`): nested values are Done, sparing an allocation per nested error.
fn parse_value(buf: &[u8], pos: usize, depth: usize) -> Step {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let start = pos + 1;
    let max = match kind {
        b'+' | b'-' => MAX_LINE,
        b'$' | b'*' | b':' | b'_' => MAX_NUMBER,
        _ => return Err(Malformed(format!("unknown RESP type byte {}", wire::show(&buf[pos..buf.len().min(pos + 32)])))),
    };
    let Some(end) = line_at(buf, start, max)? else {
        return Ok(None);
    };
    let text = &buf[start..end];
    let next = end + 2;
    let top = depth == 0;
    match kind {
        b'+' => Ok(Some((next, if top && text == b"OK" { Outcome::Stored } else { Outcome::Done }))),
        b'-' => Ok(Some((next, if top { Outcome::Error(wire::text(text)) } else { Outcome::Done }))),
        b':' => number(text, "integer").map(|_| Some((next, Outcome::Done))),
        b'_' if text.is_empty() => Ok(Some((next, Outcome::Miss))),
        b'_' => Err(Malformed(format!("bad RESP3 null {}", wire::show(&buf[pos..next])))),
        b'$' => match number(text, "bulk length")? {
            -1 => Ok(Some((next, Outcome::Miss))),
            n if n < 0 || n as u64 > MAX_REPLY as u64 => {
                Err(Malformed(format!("bulk length {n} out of range (-1 or 0..={MAX_REPLY})")))
            }
            n => {
                let data_end = next + n as usize;
                if buf.len() < data_end + 2 {
                    return Ok(None);
                }
                if &buf[data_end..data_end + 2] != b"\r\n" {
                    return Err(Malformed(format!(
                        "bulk string of {n} bytes not followed by CRLF: {}",
                        wire::show(&buf[data_end..data_end + 2])
                    )));
                }
                Ok(Some((data_end + 2, Outcome::Hit)))
            }
        },
        _ => match number(text, "array length")? {
            // b'*'
            -1 => Ok(Some((next, Outcome::Miss))),
            n if n < 0 || n as u64 > MAX_REPLY as u64 => {
                Err(Malformed(format!("array length {n} out of range (-1 or 0..={MAX_REPLY})")))
            }
            n => {
                if depth >= MAX_DEPTH {
                    return Err(Malformed(format!("arrays nested more than {MAX_DEPTH} deep")));
                }
                let mut at = next;
                for _ in 0..n {
                    match parse_value(buf, at, depth + 1)? {
                        None => return Ok(None),
                        Some((e, _)) => at = e,
                    }
                    if at > MAX_REPLY {
                        return Err(Malformed(format!("array reply longer than {MAX_REPLY} bytes")));
                    }
                }
                Ok(Some((at, Outcome::Done)))
            }
        },
    }
}

/// Client codec: replies come back in request order (no id).
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
        match parse_value(buf, 0, 0) {
            Ok(None) => Parsed::Incomplete,
            Ok(Some((len, outcome))) => Parsed::Reply { len, id: None, outcome },
            Err(m) => m.into(),
        }
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

    fn parse(buf: &[u8]) -> Parsed {
        Client::new().parse(buf)
    }

    fn reply(len: usize, outcome: Outcome) -> Parsed {
        Parsed::Reply { len, id: None, outcome }
    }

    fn bad(p: Parsed, needle: &str) -> bool {
        matches!(p, Parsed::Malformed { ref reason } if reason.contains(needle))
    }

    fn bulk(v: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(format!("${}\r\n", v.len()).as_bytes());
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }

    #[test]
    fn request_bytes_are_exact() {
        let mut out = Vec::new();
        let mut c = Client::new();
        c.encode(&Request { id: 1, kind: OpKind::Get, key: b"key:12", value: b"", request: 0 }, &mut out);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$6\r\nkey:12\r\n");
        out.clear();
        c.encode(&Request { id: 2, kind: OpKind::Set, key: b"k", value: b"a\r\nb", request: 0 }, &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n");
        out.clear();
        c.encode(&Request { id: 2, kind: OpKind::Set, key: b"", value: b"", request: 0 }, &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$0\r\n\r\n");
    }

    #[test]
    fn replies_and_their_outcomes() {
        assert_eq!(parse(b"$3\r\nabc\r\n"), reply(9, Outcome::Hit));
        assert_eq!(parse(b"$0\r\n\r\n"), reply(6, Outcome::Hit));
        assert_eq!(parse(b"$5\r\na\r\nbc\r\n"), reply(11, Outcome::Hit));
        assert_eq!(parse(b"$-1\r\n+OK\r\n"), reply(5, Outcome::Miss));
        assert_eq!(parse(b"_\r\n"), reply(3, Outcome::Miss));
        assert_eq!(parse(b"*-1\r\n"), reply(5, Outcome::Miss));
        assert_eq!(parse(b"+OK\r\n"), reply(5, Outcome::Stored));
        assert_eq!(parse(b"+PONG\r\n"), reply(7, Outcome::Done));
        assert_eq!(parse(b":-42\r\n"), reply(6, Outcome::Done));
        assert_eq!(
            parse(b"-ERR unknown command 'FOO'\r\n"),
            reply(28, Outcome::Error("ERR unknown command 'FOO'".into()))
        );
        assert_eq!(parse(b"*0\r\n"), reply(4, Outcome::Done));
        let nested = b"*3\r\n$1\r\na\r\n*2\r\n:1\r\n-ERR x\r\n$-1\r\n";
        assert_eq!(parse(nested), reply(nested.len(), Outcome::Done));
    }

    #[test]
    fn split_and_coalesced_replies() {
        let mut s = Vec::new();
        bulk(&[b'v'; 200], &mut s);
        s.extend_from_slice(b"$-1\r\n+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
        s.extend_from_slice(b"*2\r\n*1\r\n+x\r\n$2\r\n\r\n\r\n:7\r\n_\r\n");
        check_all_splits(
            &make,
            &s,
            &[
                (None, Outcome::Hit),
                (None, Outcome::Miss),
                (None, Outcome::Stored),
                (None, Outcome::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into())),
                (None, Outcome::Done),
                (None, Outcome::Done),
                (None, Outcome::Miss),
            ],
        );
    }

    #[test]
    fn malformed_replies() {
        assert!(bad(parse(b"VALUE k 0 1\r\n"), "unknown RESP type byte \"VALUE k 0 1\\r\\n\""));
        assert!(bad(parse(b"%1\r\n"), "unknown RESP type byte"));
        assert!(bad(parse(b"$-2\r\n"), "bulk length -2 out of range"));
        assert!(bad(parse(b"$4194305\r\n"), "bulk length 4194305 out of range"));
        assert!(bad(parse(b"$99999999999999999999\r\n"), "bad bulk length"));
        assert!(bad(parse(b"$1234567890123456789012"), "longer than 20 bytes"));
        assert!(bad(parse(b"$\r\n"), "bad bulk length \"\""));
        assert!(bad(parse(b"$+3\r\n"), "bad bulk length"));
        assert!(bad(parse(b"$3\r\nabcd\r\n"), "not followed by CRLF: \"d\\r\""));
        assert!(bad(parse(b":12a\r\n"), "bad integer \"12a\""));
        assert!(bad(parse(b"*-5\r\n"), "array length -5"));
        assert!(bad(parse(b"*1\r\n!\r\n"), "unknown RESP type byte"));
        assert!(bad(parse(b"_x\r\n"), "bad RESP3 null"));
        assert!(bad(parse(b"+OK\n"), "LF without CR"));
        let deep = "*1\r\n".repeat(MAX_DEPTH) + ":1\r\n";
        assert_eq!(parse(deep.as_bytes()), reply(deep.len(), Outcome::Done));
        let deeper = "*1\r\n".repeat(MAX_DEPTH + 1) + ":1\r\n";
        assert!(bad(parse(deeper.as_bytes()), "nested more than 8 deep"));
        let mut long = b"-".to_vec();
        long.resize(MAX_LINE + 2, b'x');
        assert_eq!(parse(&long), Parsed::Incomplete);
        long.push(b'x');
        assert!(bad(parse(&long), "longer than 65536 bytes"));
        // A declared length is waited for, never trusted as present.
        assert_eq!(parse(b"$4194304\r\nabc"), Parsed::Incomplete);
        assert_eq!(parse(b"*4194304\r\n:1\r\n"), Parsed::Incomplete);
    }

    /// A random RESP value (test-side encoder of the server's format) and the outcome it means at
    /// the top.
    fn resp_value() -> impl Strategy<Value = (Vec<u8>, Outcome)> {
        let leaf = prop_oneof![
            value().prop_map(|v| {
                let mut s = Vec::new();
                bulk(&v, &mut s);
                (s, Outcome::Hit)
            }),
            Just((b"$-1\r\n".to_vec(), Outcome::Miss)),
            Just((b"_\r\n".to_vec(), Outcome::Miss)),
            Just((b"+OK\r\n".to_vec(), Outcome::Stored)),
            "[a-zA-Z ]{0,20}".prop_map(|s| (
                format!("+{s}\r\n").into_bytes(),
                if s == "OK" { Outcome::Stored } else { Outcome::Done }
            )),
            "[a-zA-Z ]{0,40}".prop_map(|s| (format!("-{s}\r\n").into_bytes(), Outcome::Error(s))),
            any::<i64>().prop_map(|n| (format!(":{n}\r\n").into_bytes(), Outcome::Done)),
        ];
        leaf.prop_recursive(MAX_DEPTH as u32, 64, 6, |inner| {
            proptest::collection::vec(inner, 0..6).prop_map(|items| {
                let mut s = format!("*{}\r\n", items.len()).into_bytes();
                for (i, _) in items {
                    s.extend(i);
                }
                (s, Outcome::Done)
            })
        })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic((bytes, cuts) in bytes_and_cuts()) {
            no_panic_stream(&mut Client::new(), &bytes, &cuts);
        }

        #[test]
        fn edited_replies_never_panic((s, _) in resp_value(), e in edits(), cut in any::<usize>()) {
            let s = apply_edits(s, &e);
            no_panic_stream(&mut Client::new(), &s, &[cut % (s.len() + 1)]);
        }

        #[test]
        fn round_trip(key in key(), v in value(), (other, outcome) in resp_value(), cut in any::<usize>()) {
            let mut req = Vec::new();
            encode_request(&Request { id: 0, kind: OpKind::Set, key: &key, value: &v, request: 0 }, &mut req);
            prop_assert!(req.ends_with(&[&v[..], b"\r\n"].concat()));
            let mut s = Vec::new();
            bulk(&v, &mut s);
            let first = s.len();
            s.extend_from_slice(&other);
            let want = vec![(first, None, Outcome::Hit), (other.len(), None, outcome)];
            prop_assert_eq!(drive(&mut Client::new(), &s, &[]), want.clone());
            prop_assert_eq!(drive(&mut Client::new(), &s, &[cut % (s.len() + 1)]), want);
        }
    }
}
