//! memcached text protocol (memcached's `doc/protocol.txt`, 1.6): the client codec tailwise
//! measures with, and the server side used by `tailwise serve`.
//!
//! Client requests and the replies it accepts:
//!
//! ```text
//! get <key>\r\n                        -> VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\nEND\r\n  Hit
//!                                      -> END\r\n                                              Miss
//! set <key> 0 0 <bytes>\r\n<data>\r\n   -> STORED\r\n                                           Stored
//!                                      -> NOT_STORED | EXISTS | NOT_FOUND\r\n                  Error(word)
//! either                               -> ERROR | CLIENT_ERROR <msg> | SERVER_ERROR <msg>\r\n  Error(line)
//! ```
//!
//! Replies carry no id: they come back in request order. A reply line over [`MAX_LINE`] bytes, a
//! value over [`MAX_REPLY`](crate::protocol::MAX_REPLY) or any other line is malformed.
//!
//! Server side: `get`/`gets`, `set`, `delete`, `version`, `stats`, `quit` — what load generators
//! send.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Longest command line accepted before the connection is refused (memcached's own limit is 2048
/// for keys plus arguments; keys are at most 250 bytes).
pub const MAX_LINE: usize = 2048;
/// Largest value accepted by `set` (memcached's default item size limit, 1 MiB).
pub const MAX_VALUE: usize = 1 << 20;

/// key → (flags, value).
type Items = HashMap<Vec<u8>, (u32, Vec<u8>)>;

/// The key-value store shared by all server workers, with the counters `stats` reports.
#[derive(Default)]
pub struct Store {
    items: Mutex<Items>,
    pub cmd_get: AtomicU64,
    pub cmd_set: AtomicU64,
    pub get_hits: AtomicU64,
    pub get_misses: AtomicU64,
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
}

/// What one parsed command asks of the connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Need more bytes.
    Incomplete,
    /// Consumed `len` bytes; the reply was appended. Close afterwards if `close`.
    Done { len: usize, close: bool },
}

/// Execute one command from the front of `buf`, appending its reply to `out`.
pub fn serve_one(store: &Store, buf: &[u8], out: &mut Vec<u8>) -> Step {
    let Some(eol) = super::super::wire::find_crlf(buf) else {
        if buf.len() > MAX_LINE {
            out.extend_from_slice(b"CLIENT_ERROR line too long\r\n");
            return Step::Done { len: buf.len(), close: true };
        }
        return Step::Incomplete;
    };
    let line = &buf[..eol];
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let cmd = words.next().unwrap_or(b"");
    let len = eol + 2;
    match cmd {
        b"get" | b"gets" => serve_get(store, cmd == b"gets", words, out),
        b"set" | b"add" | b"replace" => return serve_set(store, buf, len, &words.collect::<Vec<_>>(), out),
        b"delete" => {
            let removed = words.next().map(|k| store.items.lock().unwrap().remove(k).is_some());
            out.extend_from_slice(if removed == Some(true) { b"DELETED\r\n" } else { b"NOT_FOUND\r\n" });
        }
        b"version" => out.extend_from_slice(concat!("VERSION tailwise-", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes()),
        b"stats" => serve_stats(store, out),
        b"quit" => return Step::Done { len, close: true },
        _ => out.extend_from_slice(b"ERROR\r\n"),
    }
    Step::Done { len, close: false }
}

/// `get`/`gets` of `keys`: a VALUE block per key found (with a cas of 0 for `gets`), then END.
fn serve_get<'a>(store: &Store, gets: bool, keys: impl Iterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    let items = store.items.lock().unwrap();
    for key in keys {
        store.cmd_get.fetch_add(1, Relaxed);
        if let Some((flags, value)) = items.get(key) {
            store.get_hits.fetch_add(1, Relaxed);
            out.extend_from_slice(b"VALUE ");
            out.extend_from_slice(key);
            out.extend_from_slice(format!(" {flags} {}", value.len()).as_bytes());
            if gets {
                out.extend_from_slice(b" 0");
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        } else {
            store.get_misses.fetch_add(1, Relaxed);
        }
    }
    out.extend_from_slice(b"END\r\n");
}

/// `set`/`add`/`replace <key> <flags> <exptime> <bytes> [noreply]` (its line `len` bytes long)
/// and its data block; all three store.
fn serve_set(store: &Store, buf: &[u8], len: usize, args: &[&[u8]], out: &mut Vec<u8>) -> Step {
    let num = |i: usize| -> Option<usize> { std::str::from_utf8(args.get(i)?).ok()?.parse().ok() };
    let (Some(key), Some(flags), Some(_exp), Some(bytes)) = (args.first(), num(1), num(2), num(3)) else {
        out.extend_from_slice(b"CLIENT_ERROR bad command line format\r\n");
        return Step::Done { len, close: false };
    };
    if bytes > MAX_VALUE {
        out.extend_from_slice(b"SERVER_ERROR object too large for cache\r\n");
        return Step::Done { len: buf.len(), close: true };
    }
    if buf.len() < len + bytes + 2 {
        return Step::Incomplete;
    }
    let value = buf[len..len + bytes].to_vec();
    if &buf[len + bytes..len + bytes + 2] != b"\r\n" {
        out.extend_from_slice(b"CLIENT_ERROR bad data chunk\r\n");
        return Step::Done { len: len + bytes + 2, close: true };
    }
    store.cmd_set.fetch_add(1, Relaxed);
    store.items.lock().unwrap().insert(key.to_vec(), (flags as u32, value));
    if args.get(4) != Some(&&b"noreply"[..]) {
        out.extend_from_slice(b"STORED\r\n");
    }
    Step::Done { len: len + bytes + 2, close: false }
}

/// `stats`: the counters load generators and `tailwise run` read.
fn serve_stats(store: &Store, out: &mut Vec<u8>) {
    let items = store.items.lock().unwrap().len();
    for (name, v) in [
        ("cmd_get", store.cmd_get.load(Relaxed)),
        ("cmd_set", store.cmd_set.load(Relaxed)),
        ("get_hits", store.get_hits.load(Relaxed)),
        ("get_misses", store.get_misses.load(Relaxed)),
        ("curr_connections", store.curr_connections.load(Relaxed)),
        ("total_connections", store.total_connections.load(Relaxed)),
        ("curr_items", items as u64),
    ] {
        out.extend_from_slice(format!("STAT {name} {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"END\r\n");
}

// ---------------------------------------------------------------------------------------------
// Client side.

use super::super::wire::{self, line, push_decimal, Line};
use super::super::{Codec, Malformed, OpKind, Outcome, Parsed, Request, MAX_REPLY};

/// Reply lines a server may start with; anything else is not memcached.
const REPLY_WORDS: [&[u8]; 9] =
    [b"VALUE", b"END", b"STORED", b"NOT_STORED", b"EXISTS", b"NOT_FOUND", b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR"];

/// Append one text-protocol request (shared with the UDP codec).
#[inline]
pub fn encode_request(req: &Request, out: &mut Vec<u8>) {
    match req.kind {
        OpKind::Get => {
            out.extend_from_slice(b"get ");
            out.extend_from_slice(req.key);
            out.extend_from_slice(b"\r\n");
        }
        OpKind::Set => {
            out.extend_from_slice(b"set ");
            out.extend_from_slice(req.key);
            out.extend_from_slice(b" 0 0 ");
            push_decimal(out, req.value.len() as u64);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(req.value);
            out.extend_from_slice(b"\r\n");
        }
    }
}

fn malformed(reason: String) -> Parsed {
    Parsed::Malformed { reason }
}

/// Whether an unfinished line could still become a reply line: fails fast on another protocol
/// instead of waiting for [`MAX_LINE`] bytes or the timeout.
fn plausible_start(rest: &[u8]) -> bool {
    let word_end = rest.iter().position(|&b| b == b' ' || b == b'\r');
    match word_end {
        Some(e) => REPLY_WORDS.contains(&&rest[..e]),
        None => REPLY_WORDS.iter().any(|w| w.starts_with(rest)),
    }
}

/// The `<bytes>` of a `VALUE <key> <flags> <bytes>[ <cas>]` line (given without `VALUE `).
fn value_len(args: &[u8]) -> Result<usize, Malformed> {
    let mut it = args.split(|&b| b == b' ');
    let (key, flags, bytes, cas) = (it.next(), it.next(), it.next(), it.next());
    let bad = || Malformed(format!("bad VALUE line {}", wire::show(args)));
    if it.next().is_some() || key.is_none_or(|k| k.is_empty()) {
        return Err(bad());
    }
    flags.and_then(|f| wire::parse_decimal(f, u32::MAX as u64)).ok_or_else(bad)?;
    if let Some(cas) = cas {
        wire::parse_decimal(cas, u64::MAX).ok_or_else(bad)?;
    }
    let n = bytes.and_then(|b| wire::parse_decimal(b, u64::MAX)).ok_or_else(bad)?;
    if n > MAX_REPLY as u64 {
        return Err(Malformed(format!("value of {n} bytes above the limit {MAX_REPLY}")));
    }
    Ok(n as usize)
}

/// One text-protocol reply from the front of `buf` (shared with the UDP codec). Parsed by hand, not
/// by a library: it is the timing path, and a reply is a few fixed line shapes.
pub fn parse_reply(buf: &[u8]) -> Parsed {
    let mut pos = 0;
    let mut hit = false;
    loop {
        let rest = &buf[pos..];
        let end = match line(rest, MAX_LINE) {
            Line::Found { end } => end,
            Line::Incomplete if plausible_start(rest) => return Parsed::Incomplete,
            Line::Incomplete => return malformed(format!("not a memcached reply: {}", wire::show(rest))),
            Line::TooLong => {
                return malformed(format!("reply line longer than {MAX_LINE} bytes: {}", wire::show(rest)))
            }
            Line::BareLf { at } => {
                return malformed(format!("reply line ended by LF without CR: {}", wire::show(&rest[..at + 1])))
            }
        };
        let l = &rest[..end];
        if l == b"END" {
            let outcome = if hit { Outcome::Hit } else { Outcome::Miss };
            return Parsed::Reply { len: pos + end + 2, id: None, outcome };
        }
        if let Some(args) = l.strip_prefix(b"VALUE ") {
            let n = match value_len(args) {
                Ok(n) => n,
                Err(m) => return m.into(),
            };
            let data = pos + end + 2;
            // Several VALUE blocks (never for one key, but harmless) stay within the bound too.
            if data + n > MAX_REPLY + MAX_LINE + 2 {
                return malformed(format!("reply longer than {MAX_REPLY} bytes"));
            }
            let next = data + n + 2;
            if buf.len() < next {
                return Parsed::Incomplete;
            }
            if &buf[data + n..next] != b"\r\n" {
                return malformed(format!(
                    "value of {n} bytes not followed by CRLF: {}",
                    wire::show(&buf[data + n..next])
                ));
            }
            hit = true;
            pos = next;
            continue;
        }
        if hit {
            return malformed(format!("expected END after a value, got {}", wire::show(l)));
        }
        let outcome = match l {
            b"STORED" => Outcome::Stored,
            b"NOT_STORED" | b"EXISTS" | b"NOT_FOUND" => Outcome::Error(wire::text(l)),
            _ if [&b"ERROR"[..], b"CLIENT_ERROR", b"SERVER_ERROR"]
                .iter()
                .any(|w| l.starts_with(w) && (l.len() == w.len() || l[w.len()] == b' ')) =>
            {
                Outcome::Error(wire::text(l))
            }
            _ => return malformed(format!("unexpected reply line {}", wire::show(l))),
        };
        return Parsed::Reply { len: end + 2, id: None, outcome };
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
        parse_reply(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(store: &Store, input: &[u8]) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let mut pos = 0;
        while let Step::Done { len, .. } = serve_one(store, &input[pos..], &mut out) {
            pos += len;
            if pos == input.len() {
                break;
            }
        }
        (out, pos)
    }

    #[test]
    fn set_then_get_hits_and_miss_counts() {
        let s = Store::default();
        let (out, used) = run(&s, b"set k 5 0 3\r\nabc\r\nget k nokey\r\n");
        assert_eq!(used, 31);
        assert_eq!(out, b"STORED\r\nVALUE k 5 3\r\nabc\r\nEND\r\n");
        assert_eq!((s.get_hits.load(Relaxed), s.get_misses.load(Relaxed)), (1, 1));
    }

    #[test]
    fn partial_commands_wait_for_more() {
        let s = Store::default();
        let mut out = Vec::new();
        assert_eq!(serve_one(&s, b"get k", &mut out), Step::Incomplete);
        assert_eq!(serve_one(&s, b"set k 0 0 10\r\nabc", &mut out), Step::Incomplete);
        assert!(out.is_empty());
    }

    #[test]
    fn bad_input_gets_an_error_not_a_panic() {
        let s = Store::default();
        let mut out = Vec::new();
        assert_eq!(serve_one(&s, b"set k x 0 3\r\n", &mut out), Step::Done { len: 13, close: false });
        assert!(out.starts_with(b"CLIENT_ERROR"));
        out.clear();
        assert_eq!(serve_one(&s, b"bogus\r\n", &mut out), Step::Done { len: 7, close: false });
        assert_eq!(out, b"ERROR\r\n");
        let long = vec![b'a'; MAX_LINE + 1];
        out.clear();
        assert!(matches!(serve_one(&s, &long, &mut out), Step::Done { close: true, .. }));
    }
}

#[cfg(test)]
mod client_tests {
    use super::*;
    use crate::protocol::testutil::*;
    use proptest::prelude::*;

    fn get(key: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Client::new().encode(&Request { id: 7, kind: OpKind::Get, key, value: b"", request: 0 }, &mut out);
        out
    }

    fn set(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        Client::new().encode(&Request { id: 7, kind: OpKind::Set, key, value, request: 0 }, &mut out);
        out
    }

    /// What a memcached server sends for a hit (test-side encoder of the server's format).
    fn value_reply(key: &[u8], flags: u32, value: &[u8], cas: Option<u64>, out: &mut Vec<u8>) {
        out.extend_from_slice(b"VALUE ");
        out.extend_from_slice(key);
        out.extend_from_slice(format!(" {flags} {}", value.len()).as_bytes());
        if let Some(cas) = cas {
            out.extend_from_slice(format!(" {cas}").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\nEND\r\n");
    }

    fn parse(buf: &[u8]) -> Parsed {
        Client::new().parse(buf)
    }

    fn reply(len: usize, outcome: Outcome) -> Parsed {
        Parsed::Reply { len, id: None, outcome }
    }

    fn is_malformed(p: Parsed, needle: &str) -> bool {
        matches!(p, Parsed::Malformed { ref reason } if reason.contains(needle))
    }

    fn make() -> Box<dyn Codec> {
        Box::new(Client::new())
    }

    #[test]
    fn request_bytes_are_exact() {
        assert_eq!(get(b"key:1"), b"get key:1\r\n");
        assert_eq!(set(b"k", b"hello"), b"set k 0 0 5\r\nhello\r\n");
        assert_eq!(set(b"k", b""), b"set k 0 0 0\r\n\r\n");
        let mut out = b"get a\r\n".to_vec();
        let v = vec![b'x'; 1234];
        Client::new().encode(&Request { id: 0, kind: OpKind::Set, key: b"b", value: &v, request: 0 }, &mut out);
        assert!(out.starts_with(b"get a\r\nset b 0 0 1234\r\nxxx"));
        assert_eq!(out.len(), 7 + 16 + 1234 + 2);
    }

    #[test]
    fn replies_and_their_outcomes() {
        assert_eq!(parse(b"VALUE k 0 3\r\nabc\r\nEND\r\n"), reply(23, Outcome::Hit));
        assert_eq!(parse(b"VALUE k 42 3 99\r\nabc\r\nEND\r\nEND\r\n"), reply(27, Outcome::Hit));
        assert_eq!(parse(b"VALUE k 0 0\r\n\r\nEND\r\n"), reply(20, Outcome::Hit));
        assert_eq!(parse(b"END\r\n"), reply(5, Outcome::Miss));
        assert_eq!(parse(b"STORED\r\n"), reply(8, Outcome::Stored));
        // A value may contain CRLF and "END": only the declared length counts.
        assert_eq!(parse(b"VALUE k 0 7\r\nEND\r\n\r\n\r\nEND\r\n"), reply(27, Outcome::Hit));
    }

    #[test]
    fn error_replies_keep_the_stream_in_sync() {
        for (line, text) in [
            (&b"NOT_STORED\r\n"[..], "NOT_STORED"),
            (b"EXISTS\r\n", "EXISTS"),
            (b"NOT_FOUND\r\n", "NOT_FOUND"),
            (b"ERROR\r\n", "ERROR"),
            (b"CLIENT_ERROR bad data chunk\r\n", "CLIENT_ERROR bad data chunk"),
            (b"SERVER_ERROR out of memory storing object\r\n", "SERVER_ERROR out of memory storing object"),
        ] {
            let mut stream = line.to_vec();
            stream.extend_from_slice(b"STORED\r\n");
            check_all_splits(&make, &stream, &[(None, Outcome::Error(text.into())), (None, Outcome::Stored)]);
        }
    }

    #[test]
    fn split_and_coalesced_replies() {
        let mut stream = Vec::new();
        value_reply(b"alpha", 1, b"one\r\nEND\r\n", None, &mut stream);
        stream.extend_from_slice(b"END\r\nSTORED\r\n");
        value_reply(b"b", 0, &[0u8, 255, 13, 10], Some(12345), &mut stream);
        stream.extend_from_slice(b"SERVER_ERROR busy\r\n");
        check_all_splits(
            &make,
            &stream,
            &[
                (None, Outcome::Hit),
                (None, Outcome::Miss),
                (None, Outcome::Stored),
                (None, Outcome::Hit),
                (None, Outcome::Error("SERVER_ERROR busy".into())),
            ],
        );
    }

    #[test]
    fn malformed_replies() {
        // Another protocol is refused at once, before a whole line arrived.
        assert!(is_malformed(parse(b"HTTP/1.1 200"), "not a memcached reply: \"HTTP/1.1 200\""));
        assert!(is_malformed(parse(b"+OK"), "not a memcached reply"));
        assert!(is_malformed(parse(b"ENDX"), "not a memcached reply"));
        assert!(is_malformed(parse(b"OK\r\n"), "unexpected reply line \"OK\""));
        assert!(is_malformed(parse(b"VERSION 1.6\r\n"), "unexpected reply line \"VERSION 1.6\""));
        assert!(is_malformed(parse(b"STORED now\r\n"), "unexpected reply line"));
        assert!(is_malformed(parse(b"ERRORS\r\n"), "unexpected reply line"));
        assert!(is_malformed(parse(b"END\n"), "LF without CR"));
        assert!(is_malformed(parse(b"VALUE k 0 x\r\n"), "bad VALUE line \"k 0 x\""));
        assert!(is_malformed(parse(b"VALUE k 0\r\n"), "bad VALUE line"));
        assert!(is_malformed(parse(b"VALUE  0 3\r\n"), "bad VALUE line"));
        assert!(is_malformed(parse(b"VALUE k -1 3\r\n"), "bad VALUE line"));
        assert!(is_malformed(parse(b"VALUE k 0 3 1 2\r\n"), "bad VALUE line"));
        assert!(is_malformed(parse(b"VALUE k 4294967296 3\r\n"), "bad VALUE line"));
        assert!(is_malformed(parse(b"VALUE k 0 4194305\r\n"), "above the limit"));
        assert!(is_malformed(parse(b"VALUE k 0 99999999999999999999999\r\n"), "bad VALUE line"));
        assert!(is_malformed(parse(b"VALUE k 0 3\r\nabcd\r\n"), "not followed by CRLF: \"d\\r\""));
        assert!(is_malformed(parse(b"VALUE k 0 3\r\nabc\r\nSTORED\r\n"), "expected END after a value"));
        let mut long = b"SERVER_ERROR ".to_vec();
        long.resize(MAX_LINE + 1, b'x');
        assert_eq!(parse(&long), Parsed::Incomplete);
        long.push(b'x');
        assert!(is_malformed(parse(&long), "longer than 2048 bytes"));
        // The declared length alone is not trusted: a big value stays Incomplete until it arrives.
        assert_eq!(parse(b"VALUE k 0 1048576\r\nabc"), Parsed::Incomplete);
    }

    #[test]
    fn against_the_server_side() {
        let store = Store::default();
        let mut wire = Vec::new();
        for req in [set(b"k", b"v\r\nal"), get(b"k"), get(b"missing"), b"bogus\r\n".to_vec()] {
            assert!(matches!(serve_one(&store, &req, &mut wire), Step::Done { close: false, .. }));
        }
        check_all_splits(
            &make,
            &wire,
            &[
                (None, Outcome::Stored),
                (None, Outcome::Hit),
                (None, Outcome::Miss),
                (None, Outcome::Error("ERROR".into())),
            ],
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic((bytes, cuts) in bytes_and_cuts()) {
            no_panic_stream(&mut Client::new(), &bytes, &cuts);
        }

        #[test]
        fn edited_replies_never_panic(v in value(), e in edits(), cut in any::<usize>()) {
            let mut s = Vec::new();
            value_reply(b"k", 3, &v, Some(1), &mut s);
            s.extend_from_slice(b"STORED\r\nSERVER_ERROR x\r\n");
            let s = apply_edits(s, &e);
            no_panic_stream(&mut Client::new(), &s, &[cut % (s.len() + 1)]);
        }

        #[test]
        fn round_trip(key in key(), v in value(), flags in any::<u32>(), cas in any::<Option<u64>>(),
                      cut in any::<usize>(), stored in any::<bool>()) {
            let mut s = Vec::new();
            value_reply(&key, flags, &v, cas, &mut s);
            s.extend_from_slice(if stored { b"STORED\r\n" } else { b"END\r\n" });
            let second = if stored { Outcome::Stored } else { Outcome::Miss };
            let want = vec![(s.len() - if stored { 8 } else { 5 }, None, Outcome::Hit), (if stored { 8 } else { 5 }, None, second)];
            prop_assert_eq!(drive(&mut Client::new(), &s, &[]), want.clone());
            prop_assert_eq!(drive(&mut Client::new(), &s, &[cut % (s.len() + 1)]), want);
        }
    }
}
