//! HTTP/1.1 keep-alive requests, client side (RFC 9112, HTTP/1.1 message syntax; RFC 9110 for
//! methods, fields and status codes).
//!
//! The requests are a user's ([`HttpRequest`]: method, target, header fields, body; one
//! `GET <path>` when none are given), checked as RFC 9110 says and each encoded once
//! ([`Requests`]) before the run; a thread draws which one each request is ([`Drawer`]: in turn,
//! or by weight with its seeded generator) and the codec copies that one's bytes. A reply is
//!
//! ```text
//! HTTP/1.x <3-digit status>[ <reason>]\r\n (<name>:<value>\r\n)* \r\n <body>
//! ```
//!
//! with header names matched case-insensitively and the head at most [`MAX_HEAD`] bytes. The body
//! is framed as RFC 9112 §6.3 says: none for 1xx, 204 and 304; otherwise `Transfer-Encoding`
//! ending in `chunked` (hex chunk sizes with optional `;extensions`, a `0` chunk, trailer fields
//! and an empty line), else `Content-Length`. A reply framed by neither ends when the server
//! closes, which cannot be measured on a keep-alive connection: malformed. Interim 1xx responses
//! (100 Continue, 103 Early Hints) precede the final one and are consumed with it. Status 2xx and
//! 3xx are `Done`, others `Error("HTTP <code> <reason>")`. `Connection: close` is not looked at:
//! the engine sees the end of the connection itself.
//!
//! Lines end in CRLF only (a bare LF is not accepted, RFC 9112 §2.2 allows either choice).

use super::wire::{self, line, Line};
use super::{Codec, Malformed, Outcome, Parsed, Request, MAX_REPLY};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::mem::MaybeUninit;
use std::sync::Arc;

/// Longest status line plus header section (and longest trailer section).
pub const MAX_HEAD: usize = 16 * 1024;
/// Longest chunk-size line, extensions included.
const MAX_CHUNK_LINE: usize = 4096;

/// Client codec. Keeps its progress through a reply between calls, so a reply arriving in many
/// reads is scanned once; `parse` must be called again with the same bytes at the front of the
/// buffer (plus more) after `Incomplete`, as the engine does.
pub struct Client {
    requests: Requests,
    st: State,
}

#[derive(Default)]
struct State {
    /// Buffer length at the last call: a shorter buffer means a new stream, and a fresh start.
    seen: usize,
    /// Start of the response being read (after interim 1xx responses).
    base: usize,
    /// Bytes from `base` searched for the end of the head so far.
    scanned: usize,
    head: Option<Head>,
}

struct Head {
    outcome: Outcome,
    body: Body,
}

enum Body {
    /// The reply ends at this offset.
    Fixed(usize),
    /// Chunked: `pos` is the start of the next chunk-size line (or trailer line).
    Chunked { start: usize, pos: usize, size: usize, trailers: Option<usize> },
}

/// What the head said about the body.
enum Framing {
    Interim,
    Empty,
    Length(usize),
    Chunked,
}

impl Client {
    /// A client that sends `requests` (shared, not copied: every connection's client holds the
    /// same bytes).
    pub fn sending(requests: Requests) -> Client {
        Client { requests, st: State::default() }
    }

    /// `GET path` on `host`, both as checked by [`check_host`] and [`check_path`] (an empty path
    /// is `/`).
    pub fn new(host: &str, path: &str) -> Client {
        Client::sending(Requests::get(host, path).expect("a host and path their checks let through"))
    }
}

fn malformed(reason: String) -> Parsed {
    Parsed::Malformed { reason }
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !is_ows(*first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !is_ows(*last) {
            break;
        }
        s = rest;
    }
    s
}

/// `Content-Length`: digits, or a list of identical values (RFC 9110 §8.6).
fn content_length(v: &[u8]) -> Option<u64> {
    let mut n = None;
    for item in v.split(|&b| b == b',') {
        let m = wire::parse_decimal(trim_ows(item), u64::MAX)?;
        if n.is_some_and(|n| n != m) {
            return None;
        }
        n = Some(m);
    }
    n
}

/// Header fields parsed on the stack; a head with more is parsed again with room for as many as
/// [`MAX_HEAD`] bytes can hold (a field is at least `a:` and an LF).
const HEADERS: usize = 64;

/// httparse as RFC 9112 has a client read a response: folded lines (obs-fold, §5.2) are kept in
/// the value, so that `read_head` can refuse them where they would frame the body.
fn httparse_config() -> httparse::ParserConfig {
    let mut c = httparse::ParserConfig::default();
    c.allow_obsolete_multiline_headers_in_responses(true);
    c
}

/// Status line and header fields of `head` (which ends with the empty line): the syntax by
/// `httparse`, the framing (RFC 9112 §6.3) here.
fn parse_head(head: &[u8]) -> Result<(Framing, Outcome), Malformed> {
    // Uninitialised: httparse writes the fields it finds (zeroing 64 of them cost a third more).
    match read_head(head, &mut [const { MaybeUninit::uninit() }; HEADERS])? {
        Some(h) => Ok(h),
        None => read_head(head, &mut vec![MaybeUninit::uninit(); MAX_HEAD / 3 + 1])?
            .ok_or_else(|| Malformed(format!("reply head with more header fields than {MAX_HEAD} bytes hold"))),
    }
}

/// `parse_head` with room for `headers.len()` fields: `None` if there are more.
fn read_head<'b>(head: &'b [u8], headers: &mut [MaybeUninit<httparse::Header<'b>>]) -> Result<Option<(Framing, Outcome)>, Malformed> {
    let bad_status = || Malformed(format!("bad HTTP status line {}", wire::show(status_line(head))));
    let mut r = httparse::Response::new(&mut []);
    // httparse skips empty lines before the status line; a reply stream has none.
    let parsed = match head.starts_with(b"HTTP/") {
        true => httparse_config().parse_response_with_uninit_headers(&mut r, head, headers),
        false => Err(httparse::Error::Version),
    };
    match parsed {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        // An empty line (by a bare LF) before the CRLF CRLF that ends the head.
        Ok(httparse::Status::Complete(n)) => return Err(Malformed(format!("bad header line {}", wire::show(&head[n..])))),
        Err(httparse::Error::TooManyHeaders) => return Ok(None),
        Ok(httparse::Status::Partial) | Err(httparse::Error::Version | httparse::Error::Status) => return Err(bad_status()),
        Err(_) => return Err(bad_header(head)),
    }
    let code = r.code.unwrap_or_default();
    if code < 100 {
        return Err(bad_status());
    }
    let (mut length, mut chunked): (Option<u64>, Option<bool>) = (None, None);
    for h in r.headers.iter() {
        let is_length = h.name.eq_ignore_ascii_case("content-length");
        if !is_length && !h.name.eq_ignore_ascii_case("transfer-encoding") {
            continue;
        }
        if folded(head, h.value) {
            return Err(Malformed(format!("folded Content-Length or Transfer-Encoding line {}", wire::show(h.value))));
        }
        let value = trim_ows(h.value);
        if is_length {
            let n = content_length(value)
                .filter(|&n| length.is_none_or(|m| m == n))
                .ok_or_else(|| Malformed(format!("bad or conflicting Content-Length {}", wire::show(value))))?;
            length = Some(n);
        } else {
            let last = value.rsplit(|&b| b == b',').next().map(trim_ows).unwrap_or_default();
            chunked = Some(last.eq_ignore_ascii_case(b"chunked"));
        }
    }
    Ok(Some((framing(code, chunked, length)?, outcome(code, head))))
}

/// Whether the field whose value is `value` (a slice of `head`, trimmed by httparse) is folded:
/// continued on a line that starts with whitespace (obs-fold), even one of whitespace alone.
fn folded(head: &[u8], value: &[u8]) -> bool {
    let end = (value.as_ptr() as usize).wrapping_sub(head.as_ptr() as usize).saturating_add(value.len()).min(head.len());
    value.contains(&b'\n') || memchr::memchr(b'\n', &head[end..]).is_some_and(|lf| head.get(end + lf + 1).is_some_and(|&b| is_ows(b)))
}

/// The body's framing by status and framing fields (RFC 9112 §6.3).
fn framing(code: u16, chunked: Option<bool>, length: Option<u64>) -> Result<Framing, Malformed> {
    Ok(match (code, chunked, length) {
        (101, ..) => return Err(Malformed("101 Switching Protocols on a GET: not an HTTP/1.1 reply stream".into())),
        (100..=199, ..) => Framing::Interim,
        (204 | 304, ..) => Framing::Empty,
        // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3 rule 3).
        (_, Some(true), _) => Framing::Chunked,
        (_, None, Some(n)) if n > MAX_REPLY as u64 => {
            return Err(Malformed(format!("body of {n} bytes above the limit {MAX_REPLY}")))
        }
        (_, None, Some(n)) => Framing::Length(n as usize),
        _ => {
            return Err(Malformed(
                "reply without Content-Length or chunked encoding: keep-alive measurement impossible".into(),
            ))
        }
    })
}

/// The first line of `head`, without its line end.
fn status_line(head: &[u8]) -> &[u8] {
    let line = &head[..memchr::memchr(b'\n', head).unwrap_or(head.len())];
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// 2xx and 3xx are done; any other status an error named by its code and reason phrase (taken
/// from the raw status line, which httparse has checked: it empties a phrase with obs-text).
fn outcome(code: u16, head: &[u8]) -> Outcome {
    if (100..400).contains(&code) {
        return Outcome::Done;
    }
    let reason = status_line(head).get(b"HTTP/1.1 200 ".len()..).unwrap_or_default();
    Outcome::Error(format!("HTTP {code} {}", wire::text(trim_ows(reason))).trim_end().to_owned())
}

/// The first header line httparse refuses, as the reason (the head is malformed: a cold path).
fn bad_header(head: &[u8]) -> Malformed {
    let fields = &head[..head.len() - 2];
    let refused = |l: &&[u8]| {
        let folded = l.first().is_some_and(|&b| is_ows(b));
        !folded && httparse::parse_headers(&[l, &b"\r\n"[..]].concat(), &mut [httparse::EMPTY_HEADER; 1]).is_err()
    };
    let line = fields.split_inclusive(|&b| b == b'\n').skip(1).find(refused).unwrap_or(fields);
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    Malformed(format!("bad header line {}", wire::show(line.strip_suffix(b"\r").unwrap_or(line))))
}

/// The length of the head ending in the first CRLF CRLF of `buf`, searching from `from` on (the
/// bytes before were searched by an earlier call).
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    // Back 3 bytes: the CRLF CRLF may straddle the end of the earlier search.
    let from = from.min(buf.len()).saturating_sub(3);
    wire::find_crlf_crlf(&buf[from..]).map(|i| from + i + 4)
}

/// The size of a chunk-size line `<hex>[BWS][;ext...]` (RFC 9112 §7.1); sizes above
/// [`MAX_REPLY`] come out as `MAX_REPLY + 1`, whatever their digits.
fn chunk_size(l: &[u8]) -> Option<usize> {
    let digits = l.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let rest = trim_ows(&l[digits..]);
    if digits == 0 || !(rest.is_empty() || rest[0] == b';') {
        return None;
    }
    let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as usize;
    Some(l[..digits].iter().fold(0, |n, &b| (n * 16 + hex(b)).min(MAX_REPLY + 1)))
}

impl State {
    /// Advance through a chunked body; `Ok(Some(end))` when the reply is complete.
    fn chunks(&mut self, buf: &[u8]) -> Result<Option<usize>, Malformed> {
        let Some(Head { body: Body::Chunked { start, pos, size, trailers }, .. }) = &mut self.head else {
            return Ok(None);
        };
        loop {
            if *pos - *start > MAX_REPLY + MAX_HEAD {
                return Err(Malformed(format!("chunked body longer than {} bytes on the wire", MAX_REPLY + MAX_HEAD)));
            }
            let max = if trailers.is_some() { MAX_HEAD } else { MAX_CHUNK_LINE };
            let end = match line(&buf[*pos..], max) {
                Line::Found { end } => *pos + end,
                Line::Incomplete => return Ok(None),
                Line::TooLong => {
                    return Err(Malformed(format!("chunk line longer than {max} bytes: {}", wire::show(&buf[*pos..]))))
                }
                Line::BareLf { at } => {
                    return Err(Malformed(format!("chunk line ended by LF without CR: {}", wire::show(&buf[*pos..*pos + at + 1]))))
                }
            };
            if let Some(trailer_start) = *trailers {
                if end == *pos {
                    return Ok(Some(end + 2));
                }
                if end - trailer_start > MAX_HEAD {
                    return Err(Malformed(format!("trailer section longer than {MAX_HEAD} bytes")));
                }
                *pos = end + 2;
                continue;
            }
            let l = &buf[*pos..end];
            let n = chunk_size(l).ok_or_else(|| Malformed(format!("bad chunk size line {}", wire::show(l))))?;
            *size += n;
            if *size > MAX_REPLY {
                return Err(Malformed(format!("chunked body above the limit {MAX_REPLY}")));
            }
            if n == 0 {
                *pos = end + 2;
                *trailers = Some(*pos);
                continue;
            }
            let data_end = end + 2 + n;
            if buf.len() < data_end + 2 {
                *size -= n; // this line is read again with more bytes
                return Ok(None);
            }
            if &buf[data_end..data_end + 2] != b"\r\n" {
                return Err(Malformed(format!(
                    "chunk of {n} bytes not followed by CRLF: {}",
                    wire::show(&buf[data_end..data_end + 2])
                )));
            }
            *pos = data_end + 2;
        }
    }
}

impl Codec for Client {
    #[inline]
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        out.extend_from_slice(self.requests.wire(req.request));
    }

    fn parse(&mut self, buf: &[u8]) -> Parsed {
        let st = &mut self.st;
        if buf.len() < st.seen {
            *st = State::default();
        }
        st.seen = buf.len();
        loop {
            if st.head.is_none() {
                let resp = &buf[st.base..];
                let window = &resp[..resp.len().min(MAX_HEAD)];
                let Some(head_len) = head_end(window, st.scanned) else {
                    let n = resp.len().min(5);
                    if resp[..n] != b"HTTP/"[..n] {
                        return malformed(format!("not an HTTP reply: {}", wire::show(resp)));
                    }
                    if resp.len() >= MAX_HEAD {
                        return malformed(format!("reply head longer than {MAX_HEAD} bytes: {}", wire::show(resp)));
                    }
                    st.scanned = resp.len();
                    return Parsed::Incomplete;
                };
                let (framing, outcome) = match parse_head(&resp[..head_len]) {
                    Ok(h) => h,
                    Err(m) => return m.into(),
                };
                let body_start = st.base + head_len;
                let body = match framing {
                    Framing::Interim => {
                        if body_start > MAX_HEAD {
                            return malformed(format!("interim 1xx responses longer than {MAX_HEAD} bytes"));
                        }
                        st.base = body_start;
                        st.scanned = 0;
                        continue;
                    }
                    Framing::Empty => Body::Fixed(body_start),
                    Framing::Length(n) => Body::Fixed(body_start + n),
                    Framing::Chunked => Body::Chunked { start: body_start, pos: body_start, size: 0, trailers: None },
                };
                st.head = Some(Head { outcome, body });
            }
            let end = match &st.head {
                Some(Head { body: Body::Fixed(end), .. }) => (buf.len() >= *end).then_some(*end),
                _ => match st.chunks(buf) {
                    Ok(end) => end,
                    Err(m) => return m.into(),
                },
            };
            let Some(len) = end else {
                return Parsed::Incomplete;
            };
            let head = st.head.take();
            *st = State::default();
            let outcome = head.map_or(Outcome::Done, |h| h.outcome);
            return Parsed::Reply { len, id: None, outcome };
        }
    }
}

/// Longest `Host` value accepted: a DNS name (253) or a bracketed IPv6 literal with a zone, and
/// `:port`.
pub const MAX_HOST: usize = 261;
/// Longest request target accepted: nginx's default `large_client_header_buffers` holds a request
/// line of 8 KiB; this leaves room for the method and version.
pub const MAX_PATH: usize = 8_000;

/// Why a host or path cannot go into a request as written (its words follow the field's name:
/// "path has a space at position 2").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadText {
    #[error("is empty")]
    Empty,
    #[error("is {len} bytes long, over {max}")]
    TooLong { len: usize, max: usize },
    #[error("has a control character (0x{byte:02x}) at position {at}")]
    Control { byte: u8, at: usize },
    #[error("has a space at position {at}")]
    Space { at: usize },
    #[error("has a non-ASCII byte (0x{byte:02x}) at position {at}")]
    NonAscii { byte: u8, at: usize },
    #[error("has '{}' at position {at}, which it may not hold", *.byte as char)]
    Disallowed { byte: u8, at: usize },
    #[error("has a '%' not followed by two hex digits at position {at}")]
    Percent { at: usize },
    #[error("does not start with '/'")]
    NoSlash,
}

/// What to do about a host or path [`check_host`] or [`check_path`] refuses.
pub fn text_remedy(field: &str) -> String {
    format!(
        "give a {field} of at most {} bytes without control characters, spaces or characters RFC 3986 does not allow \
         there; percent-encode what the server should receive (%20, %0D)",
        if field == "host" { MAX_HOST } else { MAX_PATH }
    )
}

/// A host (`name:port` or `[v6]:port`) that can go into a `Host` header as written: RFC 3986's
/// reg-name characters, an IP literal's, and the port's — no control byte, no space, no `/?#@`.
pub fn check_host(host: &str) -> Result<(), BadText> {
    check_text(host, MAX_HOST, |b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:[]%".contains(&b))
}

/// A request target that can go into the request line as written: RFC 3986's path and query
/// characters (pchar, `/`, `?`) and `%` followed by two hex digits — no control byte, no space.
pub fn check_path(path: &str) -> Result<(), BadText> {
    check_text(path, MAX_PATH, |b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&b))?;
    if !path.starts_with('/') {
        return Err(BadText::NoSlash);
    }
    let bytes = path.as_bytes();
    for (at, _) in bytes.iter().enumerate().filter(|(_, &b)| b == b'%') {
        let hex = |k: usize| bytes.get(k).is_some_and(u8::is_ascii_hexdigit);
        if !(hex(at + 1) && hex(at + 2)) {
            return Err(BadText::Percent { at });
        }
    }
    Ok(())
}

fn check_text(text: &str, max: usize, allowed: impl Fn(u8) -> bool) -> Result<(), BadText> {
    if text.is_empty() {
        return Err(BadText::Empty);
    }
    if text.len() > max {
        return Err(BadText::TooLong { len: text.len(), max });
    }
    match text.bytes().enumerate().find(|&(_, b)| !allowed(b)) {
        Some((at, byte)) if byte < 0x20 || byte == 0x7f => Err(BadText::Control { byte, at }),
        Some((at, b' ')) => Err(BadText::Space { at }),
        Some((at, byte)) if byte >= 0x80 => Err(BadText::NonAscii { byte, at }),
        Some((at, byte)) => Err(BadText::Disallowed { byte, at }),
        None => Ok(()),
    }
}

/// Longest request body: as long as the longest reply ([`MAX_REPLY`]), so that a connection's
/// write buffer is bounded as its read buffer is.
pub const MAX_BODY: usize = MAX_REPLY;
/// Most requests in one run: which one a request is travels as a `u16` (`Request::request`).
pub const MAX_REQUESTS: usize = 1 << 16;

/// One HTTP/1.1 request as a user writes it (curl's `-X`, `-H`, `-d`; a target of vegeta's
/// targets file). The Host field is the target's unless `headers` holds one; Content-Length is
/// tailwise's to send (see [`Requests::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// A token (RFC 9110 §9.1), sent as written: methods are case-sensitive.
    pub method: String,
    /// The request target in origin form (RFC 9112 §3.2.1), as [`check_path`] allows it.
    pub path: String,
    /// Field lines in the order given; a name may repeat.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// `GET path`, nothing else: what an `http://` target without requests sends.
    pub fn get(path: &str) -> HttpRequest {
        let path = if path.is_empty() { "/" } else { path };
        HttpRequest { method: "GET".into(), path: path.into(), headers: Vec::new(), body: Vec::new() }
    }

    /// Whether its method has content in its semantics, so that Content-Length goes with it even
    /// when the body is empty (RFC 9110 §8.6: "normally sends Content-Length in a POST request
    /// even when the value is 0"); other methods send it only with a body.
    fn expects_content(&self) -> bool {
        matches!(self.method.as_str(), "POST" | "PUT" | "PATCH")
    }
}

/// How a thread chooses each request of several: `Turn`, the first, the second, … and again (each
/// thread from the first); `Weight`, independently, each with probability weight / total, by the
/// thread's seeded generator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Draw {
    #[default]
    Turn,
    Weight,
}

/// A byte where a method, header name or header value may not have it, and its position there
/// (from 0); named in words for control characters ("CR (0x0d) at position 5").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadByte {
    pub byte: u8,
    pub at: usize,
}

/// ASCII's names for its control characters (C0, then DEL).
const CONTROL_NAMES: [&str; 32] = [
    "NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HTAB", "LF", "VT", "FF", "CR", "SO", "SI", "DLE",
    "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US",
];

impl std::fmt::Display for BadByte {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (b, at) = (self.byte, self.at);
        match b {
            0..0x20 => write!(f, "{} (0x{b:02x}) at position {at}", CONTROL_NAMES[b as usize]),
            0x7f => write!(f, "DEL (0x7f) at position {at}"),
            b' ' => write!(f, "SP (0x20) at position {at}"),
            0x80.. => write!(f, "a non-ASCII byte (0x{b:02x}) at position {at}"),
            _ => write!(f, "'{}' (0x{b:02x}) at position {at}", b as char),
        }
    }
}

/// Why requests cannot be sent as written: which one (`requests[i]`, as the engine's
/// configuration lists them), which of its parts, and the byte or the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    #[error("no requests")]
    Empty,
    #[error("{count} requests, over {max}", max = MAX_REQUESTS)]
    TooMany { count: usize },
    #[error("host {0}")]
    Host(BadText),
    #[error("requests[{index}]: weight 0")]
    ZeroWeight { index: usize },
    /// A weight other than 1 where requests go in turn: it would be ignored.
    #[error("requests[{index}]: weight {weight}, but draw is 'turn'")]
    WeightInTurn { index: usize, weight: u32 },
    #[error("requests[{index}]: method is empty")]
    EmptyMethod { index: usize },
    #[error("requests[{index}]: method has {what}")]
    Method { index: usize, what: BadByte },
    #[error("requests[{index}]: path {what}")]
    Path { index: usize, what: BadText },
    #[error("requests[{index}].headers[{header}]: name is empty")]
    EmptyName { index: usize, header: usize },
    #[error("requests[{index}].headers[{header}]: name has {what}")]
    HeaderName { index: usize, header: usize, what: BadByte },
    #[error("requests[{index}].headers[{header}] ({name}): value has {what}")]
    HeaderValue { index: usize, header: usize, name: String, what: BadByte },
    /// Content-Length, Transfer-Encoding, Expect: the framing is tailwise's, and no request waits.
    #[error("requests[{index}].headers[{header}]: {name} is tailwise's to send, not the request's")]
    Reserved { index: usize, header: usize, name: String },
    #[error("requests[{index}].headers[{header}]: a second Host field")]
    SecondHost { index: usize, header: usize },
    #[error("requests[{index}]: body of {len} bytes, over {max}", max = MAX_BODY)]
    BodyTooLong { index: usize, len: usize },
}

impl BadRequest {
    /// What to do instead (`UnknownScheme::remedy`).
    pub fn remedy(&self) -> String {
        const TCHAR: &str = "letters, digits and !#$%&'*+-.^_`|~";
        match self {
            BadRequest::Empty => "give at least one request, or a path alone for GET".into(),
            BadRequest::TooMany { .. } => format!("give at most {MAX_REQUESTS} requests"),
            BadRequest::Host(_) => text_remedy("host"),
            BadRequest::Path { .. } => text_remedy("path"),
            BadRequest::ZeroWeight { .. } => "give each request a weight of 1 or more (or leave it out)".into(),
            BadRequest::WeightInTurn { .. } => {
                "give draw 'weight' to draw requests by their weights, or leave the weights out to send them in turn".into()
            }
            BadRequest::EmptyMethod { .. } | BadRequest::Method { .. } => {
                format!("a method is a token (RFC 9110 §9.1, §5.6.2): {TCHAR} only, written as the server expects it")
            }
            BadRequest::EmptyName { .. } | BadRequest::HeaderName { .. } => {
                format!("a header name is a token (RFC 9110 §5.1, §5.6.2): {TCHAR} only; write a header as 'Name: value'")
            }
            BadRequest::HeaderValue { .. } => "a header value is visible characters, spaces and tabs, with no space or tab \
                                               at its ends (RFC 9110 §5.5): CR, LF and NUL would end or split the request; \
                                               percent-encode or remove them"
                .into(),
            BadRequest::Reserved { .. } => "leave it out: tailwise sends Content-Length from the body, every body whole and \
                                            at once (no Transfer-Encoding, no Expect: 100-continue)"
                .into(),
            BadRequest::SecondHost { .. } => "give one Host field at most (RFC 9112 §3.2)".into(),
            BadRequest::BodyTooLong { .. } => format!("give a body of at most {MAX_BODY} bytes"),
        }
    }
}

/// A token (RFC 9110 §5.6.2: `1*tchar`), or where it is not one (`None`: empty).
fn check_token(s: &str) -> Result<(), Option<BadByte>> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    match s.bytes().enumerate().find(|&(_, b)| !tchar(b)) {
        _ if s.is_empty() => Err(None),
        Some((at, byte)) => Err(Some(BadByte { byte, at })),
        None => Ok(()),
    }
}

/// A field value (RFC 9110 §5.5): field-vchar (VCHAR, obs-text) with SP and HTAB between them,
/// none at either end (a parser would strip them); no other byte (CR, LF, NUL and the other
/// controls, DEL).
fn check_value(v: &str) -> Result<(), BadByte> {
    let vchar = |b: u8| (0x21..0x7f).contains(&b) || b >= 0x80;
    let bytes = v.as_bytes();
    if let Some((at, &byte)) = bytes.iter().enumerate().find(|&(_, &b)| !(vchar(b) || b == b' ' || b == b'\t')) {
        return Err(BadByte { byte, at });
    }
    match (bytes.first(), bytes.last()) {
        (Some(&byte), _) if !vchar(byte) => Err(BadByte { byte, at: 0 }),
        (_, Some(&byte)) if !vchar(byte) => Err(BadByte { byte, at: bytes.len() - 1 }),
        _ => Ok(()),
    }
}

/// Fields a request may not carry: the message's framing is tailwise's (RFC 9112 §6), and no
/// request waits for a 100 Continue (RFC 9110 §10.1.1) — every byte is sent at once.
const RESERVED: [&str; 3] = ["content-length", "transfer-encoding", "expect"];

impl HttpRequest {
    /// The checks of [`Requests::new`] for the request at `index`.
    fn check(&self, index: usize) -> Result<(), BadRequest> {
        check_token(&self.method).map_err(|e| match e {
            None => BadRequest::EmptyMethod { index },
            Some(what) => BadRequest::Method { index, what },
        })?;
        check_path(&self.path).map_err(|what| BadRequest::Path { index, what })?;
        let mut hosts = 0;
        for (header, (name, value)) in self.headers.iter().enumerate() {
            check_token(name).map_err(|e| match e {
                None => BadRequest::EmptyName { index, header },
                Some(what) => BadRequest::HeaderName { index, header, what },
            })?;
            if RESERVED.iter().any(|r| name.eq_ignore_ascii_case(r)) {
                return Err(BadRequest::Reserved { index, header, name: name.clone() });
            }
            check_value(value).map_err(|what| BadRequest::HeaderValue { index, header, name: name.clone(), what })?;
            hosts += name.eq_ignore_ascii_case("host") as usize;
            if hosts > 1 {
                return Err(BadRequest::SecondHost { index, header });
            }
        }
        if self.body.len() > MAX_BODY {
            return Err(BadRequest::BodyTooLong { index, len: self.body.len() });
        }
        Ok(())
    }

    /// The request's bytes: request line, Host first (RFC 9112 §3.2: the user's if given, else
    /// `host`), the user's other fields in their order, Content-Length when there is a body or
    /// the method expects one, the empty line, the body.
    fn encode(&self, host: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.path.len() + self.body.len());
        let mut put = |parts: &[&[u8]]| parts.iter().for_each(|p| out.extend_from_slice(p));
        put(&[self.method.as_bytes(), b" ", self.path.as_bytes(), b" HTTP/1.1\r\n"]);
        let is_host = |(n, _): &&(String, String)| n.eq_ignore_ascii_case("host");
        match self.headers.iter().find(is_host) {
            Some((name, value)) => put(&[name.as_bytes(), b": ", value.as_bytes(), b"\r\n"]),
            None => put(&[b"Host: ", host.as_bytes(), b"\r\n"]),
        }
        for (name, value) in self.headers.iter().filter(|h| !is_host(h)) {
            put(&[name.as_bytes(), b": ", value.as_bytes(), b"\r\n"]);
        }
        if !self.body.is_empty() || self.expects_content() {
            put(&[b"Content-Length: ", self.body.len().to_string().as_bytes(), b"\r\n"]);
        }
        put(&[b"\r\n", &self.body]);
        out
    }
}

/// The requests of an `http://` target, each checked and encoded once, with their weights and
/// how a thread draws them. Clones share the bytes (one copy per run, not per connection).
#[derive(Clone, Debug, PartialEq)]
pub struct Requests(Arc<Set>);

#[derive(Debug, PartialEq)]
struct Set {
    host: String,
    list: Vec<(HttpRequest, u32)>,
    draw: Draw,
    /// `list[i]`'s bytes on the wire.
    wire: Vec<Box<[u8]>>,
}

impl Requests {
    /// Checked: `host` as [`check_host`] does; each method a token (RFC 9110 §9.1, §5.6.2), path
    /// as [`check_path`] does, header name a token (§5.1), value field-vchar, SP and HTAB only and
    /// not at its ends (§5.5), at most one Host (RFC 9112 §3.2), no Content-Length,
    /// Transfer-Encoding or Expect, a body of at most [`MAX_BODY`]; weights 1 or more, and 1
    /// when drawn in turn; 1 to [`MAX_REQUESTS`] requests.
    pub fn new(host: &str, list: Vec<(HttpRequest, u32)>, draw: Draw) -> Result<Requests, BadRequest> {
        check_host(host).map_err(BadRequest::Host)?;
        match list.len() {
            0 => return Err(BadRequest::Empty),
            count if count > MAX_REQUESTS => return Err(BadRequest::TooMany { count }),
            _ => {}
        }
        for (index, (r, weight)) in list.iter().enumerate() {
            match (*weight, draw) {
                (0, _) => return Err(BadRequest::ZeroWeight { index }),
                (weight @ 2.., Draw::Turn) => return Err(BadRequest::WeightInTurn { index, weight }),
                _ => r.check(index)?,
            }
        }
        let wire = list.iter().map(|(r, _)| r.encode(host).into_boxed_slice()).collect();
        Ok(Requests(Arc::new(Set { host: host.into(), list, draw, wire })))
    }

    /// `GET path` alone (an empty path is `/`).
    pub fn get(host: &str, path: &str) -> Result<Requests, BadRequest> {
        Requests::new(host, vec![(HttpRequest::get(path), 1)], Draw::Turn)
    }

    pub fn host(&self) -> &str {
        &self.0.host
    }

    /// The requests with their weights, as given.
    pub fn list(&self) -> &[(HttpRequest, u32)] {
        &self.0.list
    }

    pub fn draw(&self) -> Draw {
        self.0.draw
    }

    /// The path when these are [`Requests::get`]'s: one `GET`, no field, no body.
    pub fn plain_get(&self) -> Option<&str> {
        match self.list() {
            [(r, 1)] if self.draw() == Draw::Turn && *r == HttpRequest::get(&r.path) => Some(&r.path),
            _ => None,
        }
    }

    /// Request `i`'s bytes (`i` as a [`Drawer`] of these gives it).
    #[inline]
    pub fn wire(&self, i: u16) -> &[u8] {
        &self.0.wire[i as usize]
    }

    /// A thread's drawer, its generator seeded by `seed`.
    pub fn drawer(&self, seed: u64) -> Drawer {
        let mut total = 0u64;
        let cumulative = match self.draw() {
            Draw::Turn => Box::default(),
            Draw::Weight => self.list().iter().map(|&(_, w)| {
                total += u64::from(w);
                total
            })
            .collect(),
        };
        Drawer { n: self.list().len() as u32, next: 0, cumulative, rng: SmallRng::seed_from_u64(seed) }
    }
}

/// Which request comes next, for one thread: in turn, or by weight. Drawn when the request falls
/// due and kept with it (`Op::request`), so that a request sent again is the same one.
pub struct Drawer {
    n: u32,
    next: u32,
    /// By weight: the running sums of the weights (empty: in turn).
    cumulative: Box<[u64]>,
    rng: SmallRng,
}

impl Drawer {
    /// Always request 0: the protocols with one request.
    pub fn single() -> Drawer {
        Drawer { n: 1, next: 0, cumulative: Box::default(), rng: SmallRng::seed_from_u64(0) }
    }

    #[inline]
    pub fn next_request(&mut self) -> u16 {
        match self.cumulative.last() {
            None => {
                let i = self.next;
                self.next = if i + 1 == self.n { 0 } else { i + 1 };
                i as u16
            }
            Some(&total) => {
                let x = self.rng.random_range(0..total);
                self.cumulative.partition_point(|&c| c <= x) as u16
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::*;
    use crate::protocol::OpKind;
    use proptest::prelude::*;

    fn make() -> Box<dyn Codec> {
        Box::new(Client::new("h", "/"))
    }

    fn req(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> HttpRequest {
        let headers = headers.iter().map(|&(n, v)| (n.to_string(), v.to_string())).collect();
        HttpRequest { method: method.into(), path: path.into(), headers, body: body.to_vec() }
    }

    /// The bytes `Requests::new` encodes for `r` alone on host `h:80`, through the codec.
    fn wire(r: HttpRequest) -> Vec<u8> {
        let mut c = Client::sending(Requests::new("h:80", vec![(r, 1)], Draw::Turn).unwrap());
        let mut out = Vec::new();
        c.encode(&Request { id: 0, kind: OpKind::Get, key: b"", value: b"", request: 0 }, &mut out);
        out
    }

    #[test]
    fn requests_are_encoded_byte_for_byte() {
        assert_eq!(wire(HttpRequest::get("/")), b"GET / HTTP/1.1\r\nHost: h:80\r\n\r\n");
        let get = req("GET", "/a?b=1", &[("Accept", "*/*"), ("X-Trace", "a\tb c")], b"");
        assert_eq!(wire(get), b"GET /a?b=1 HTTP/1.1\r\nHost: h:80\r\nAccept: */*\r\nX-Trace: a\tb c\r\n\r\n");
        let post = req("POST", "/api", &[("Content-Type", "application/json")], b"{\"k\": 1}");
        let want = b"POST /api HTTP/1.1\r\nHost: h:80\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{\"k\": 1}";
        assert_eq!(wire(post), want);
        // POST, PUT and PATCH say Content-Length: 0 when empty (RFC 9110 §8.6); the others only with a body.
        assert_eq!(wire(req("PUT", "/k", &[], b"")), b"PUT /k HTTP/1.1\r\nHost: h:80\r\nContent-Length: 0\r\n\r\n");
        let put = req("PUT", "/k", &[("A", "1"), ("A", "2")], &[0, 13, 10, 255]);
        assert_eq!(wire(put), b"PUT /k HTTP/1.1\r\nHost: h:80\r\nA: 1\r\nA: 2\r\nContent-Length: 4\r\n\r\n\x00\r\n\xff");
        assert_eq!(wire(req("DELETE", "/k", &[], b"")), b"DELETE /k HTTP/1.1\r\nHost: h:80\r\n\r\n");
        let delete = req("DELETE", "/k", &[], b"x");
        assert_eq!(wire(delete), b"DELETE /k HTTP/1.1\r\nHost: h:80\r\nContent-Length: 1\r\n\r\nx");
        // A Host field of the user's replaces the target's, first as RFC 9112 §3.2 asks; case kept.
        let vhost = req("get", "/", &[("X-A", "1"), ("host", "example.org")], b"");
        assert_eq!(wire(vhost), b"get / HTTP/1.1\r\nhost: example.org\r\nX-A: 1\r\n\r\n");
        // Non-ASCII (obs-text) values go as their UTF-8 bytes.
        assert_eq!(wire(req("GET", "/", &[("X-Name", "Grüße")], b"")), "GET / HTTP/1.1\r\nHost: h:80\r\nX-Name: Grüße\r\n\r\n".as_bytes());
    }

    #[test]
    fn several_requests_each_send_their_own_bytes() {
        let list = vec![(HttpRequest::get("/a"), 1), (req("POST", "/b", &[], b"xy"), 1)];
        let r = Requests::new("h", list.clone(), Draw::Turn).unwrap();
        assert_eq!(r.list(), &list[..]);
        assert_eq!(r.plain_get(), None);
        assert_eq!(Requests::get("h", "").unwrap().plain_get(), Some("/"));
        let mut c = Client::sending(r.clone());
        let mut out = Vec::new();
        for i in [1, 0, 1] {
            c.encode(&Request { id: 9, kind: OpKind::Get, key: b"", value: b"", request: i }, &mut out);
        }
        let (a, b) = (&b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n"[..], &b"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nxy"[..]);
        assert_eq!(out, [b, a, b].concat());
        // Clones share the bytes: one copy per run, however many connections.
        assert!(std::ptr::eq(r.wire(0), Client::sending(r.clone()).requests.wire(0)));
    }

    fn refused(list: Vec<(HttpRequest, u32)>, draw: Draw) -> String {
        let e = Requests::new("h", list, draw).unwrap_err();
        assert!(!e.remedy().is_empty());
        e.to_string()
    }

    fn one(r: HttpRequest) -> String {
        refused(vec![(HttpRequest::get("/"), 1), (r, 1)], Draw::Turn)
    }

    #[test]
    fn what_rfc_9110_does_not_allow_is_refused_naming_the_byte_and_its_position() {
        // Methods: tokens (§9.1, §5.6.2).
        assert_eq!(one(req("", "/", &[], b"")), "requests[1]: method is empty");
        assert_eq!(one(req("GE T", "/", &[], b"")), "requests[1]: method has SP (0x20) at position 2");
        assert_eq!(one(req("GET\r\nX", "/", &[], b"")), "requests[1]: method has CR (0x0d) at position 3");
        assert_eq!(one(req("GET/", "/", &[], b"")), "requests[1]: method has '/' (0x2f) at position 3");
        assert_eq!(one(req("GÉT", "/", &[], b"")), "requests[1]: method has a non-ASCII byte (0xc3) at position 1");
        // Paths: as check_path.
        assert_eq!(one(req("GET", "/a\nb", &[], b"")), "requests[1]: path has a control character (0x0a) at position 2");
        assert_eq!(one(req("GET", "a", &[], b"")), "requests[1]: path does not start with '/'");
        // Header names: tokens (§5.1).
        let name = |n: &str| one(req("GET", "/", &[("A", "1"), (n, "v")], b""));
        assert_eq!(name(""), "requests[1].headers[1]: name is empty");
        assert_eq!(name("X-A:"), "requests[1].headers[1]: name has ':' (0x3a) at position 3");
        assert_eq!(name("X A"), "requests[1].headers[1]: name has SP (0x20) at position 1");
        assert_eq!(name("X\tA"), "requests[1].headers[1]: name has HTAB (0x09) at position 1");
        assert_eq!(name("X\r\nEvil"), "requests[1].headers[1]: name has CR (0x0d) at position 1");
        assert_eq!(name("Ä"), "requests[1].headers[1]: name has a non-ASCII byte (0xc3) at position 0");
        // Header values: field-vchar, SP, HTAB, none at the ends (§5.5).
        let value = |v: &str| one(req("GET", "/", &[("X-V", v)], b""));
        assert_eq!(value("a\r\nX-Evil: 1"), "requests[1].headers[0] (X-V): value has CR (0x0d) at position 1");
        assert_eq!(value("a\nb"), "requests[1].headers[0] (X-V): value has LF (0x0a) at position 1");
        assert_eq!(value("a\0b"), "requests[1].headers[0] (X-V): value has NUL (0x00) at position 1");
        assert_eq!(value("ab\x1b"), "requests[1].headers[0] (X-V): value has ESC (0x1b) at position 2");
        assert_eq!(value("\x7f"), "requests[1].headers[0] (X-V): value has DEL (0x7f) at position 0");
        assert_eq!(value("\x0b"), "requests[1].headers[0] (X-V): value has VT (0x0b) at position 0");
        assert_eq!(value(" a"), "requests[1].headers[0] (X-V): value has SP (0x20) at position 0");
        assert_eq!(value("a\t"), "requests[1].headers[0] (X-V): value has HTAB (0x09) at position 1");
        // An empty value is a field-value (§5.5: *field-content).
        assert!(Requests::new("h", vec![(req("GET", "/", &[("X-Empty", "")], b""), 1)], Draw::Turn).is_ok());
        // The framing is tailwise's; one Host at most.
        for name in ["Content-Length", "transfer-encoding", "EXPECT"] {
            let r = one(req("POST", "/", &[(name, "1")], b""));
            assert_eq!(r, format!("requests[1].headers[0]: {name} is tailwise's to send, not the request's"));
        }
        let two = one(req("GET", "/", &[("Host", "a"), ("X", "1"), ("host", "b")], b""));
        assert_eq!(two, "requests[1].headers[2]: a second Host field");
        let long = one(req("POST", "/", &[], &vec![b'x'; MAX_BODY + 1]));
        assert_eq!(long, format!("requests[1]: body of {} bytes, over {MAX_BODY}", MAX_BODY + 1));
        // The set: not empty, weights of 1 or more, and 1 in turn.
        assert_eq!(refused(vec![], Draw::Turn), "no requests");
        assert_eq!(refused(vec![(HttpRequest::get("/"), 0)], Draw::Weight), "requests[0]: weight 0");
        assert_eq!(refused(vec![(HttpRequest::get("/"), 3)], Draw::Turn), "requests[0]: weight 3, but draw is 'turn'");
        let many = vec![(HttpRequest::get("/"), 1); MAX_REQUESTS + 1];
        assert_eq!(refused(many, Draw::Turn), format!("{} requests, over {MAX_REQUESTS}", MAX_REQUESTS + 1));
        assert!(Requests::new("h", vec![(HttpRequest::get("/"), 1); MAX_REQUESTS], Draw::Turn).is_ok());
        assert_eq!(Requests::get("h\r\n", "/").unwrap_err().to_string(), "host has a control character (0x0d) at position 1");
    }

    #[test]
    fn in_turn_each_request_in_order_then_again() {
        let r = Requests::new("h", (0..3).map(|i| (HttpRequest::get(&format!("/{i}")), 1)).collect(), Draw::Turn).unwrap();
        let mut d = r.drawer(1);
        assert_eq!((0..7).map(|_| d.next_request()).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 2, 0]);
        // The seed does not matter in turn; one request is always request 0.
        let mut e = r.drawer(99);
        assert_eq!((0..4).map(|_| e.next_request()).collect::<Vec<_>>(), [0, 1, 2, 0]);
        let mut s = Drawer::single();
        assert!((0..5).all(|_| s.next_request() == 0));
        let mut g = Requests::get("h", "/").unwrap().drawer(3);
        assert!((0..5).all(|_| g.next_request() == 0));
    }

    #[test]
    fn by_weight_each_request_takes_its_share_and_the_seed_fixes_the_sequence() {
        let weights = [5u32, 3, 1, 1];
        let list = weights.iter().enumerate().map(|(i, &w)| (HttpRequest::get(&format!("/{i}")), w)).collect();
        let r = Requests::new("h", list, Draw::Weight).unwrap();
        let n = 100_000;
        let mut d = r.drawer(7);
        let mut counts = [0u64; 4];
        for _ in 0..n {
            counts[d.next_request() as usize] += 1;
        }
        let total: u32 = weights.iter().sum();
        for (i, &w) in weights.iter().enumerate() {
            let p = f64::from(w) / f64::from(total);
            let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
            // Within 4.5 standard deviations of the binomial mean (each ~1 in 150,000 by chance).
            assert!((counts[i] as f64 - mean).abs() < 4.5 * sd, "request {i}: {} of {n}, want {mean:.0} ± {sd:.0}", counts[i]);
        }
        let seq = |seed| {
            let mut d = r.drawer(seed);
            (0..64).map(|_| d.next_request()).collect::<Vec<_>>()
        };
        assert_eq!(seq(7), seq(7));
        assert_ne!(seq(7), seq(8));
        // A weight-1 set drawn by weight: every request still drawn.
        let even = Requests::new("h", vec![(HttpRequest::get("/"), 1); 3], Draw::Weight).unwrap();
        let mut d = even.drawer(1);
        let mut seen = [false; 3];
        (0..100).for_each(|_| seen[d.next_request() as usize] = true);
        assert_eq!(seen, [true; 3]);
    }

    /// A header field as a test writes it: a token name and a value of any characters.
    fn field() -> impl Strategy<Value = (String, String)> {
        ("[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}", "\\PC{0,20}|[ -~\t]{0,20}")
    }

    proptest! {
        /// What `Requests::new` lets through reads back, through httparse, as the request given:
        /// no field is added, lost or split, and the body follows the head, as long as it says.
        #[test]
        fn what_the_checks_let_through_is_the_request_given(
            method in "[A-Za-z]{1,8}|\\PC{0,8}",
            path in "/[A-Za-z0-9/?=&%._~-]{0,30}",
            headers in proptest::collection::vec(field(), 0..5),
            raw in proptest::collection::vec(any::<u8>(), 0..12),
            body in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut headers = headers;
            headers.push(("X-Raw".into(), String::from_utf8_lossy(&raw).into_owned()));
            let r = HttpRequest { method, path, headers, body };
            let Ok(set) = Requests::new("h", vec![(r.clone(), 1)], Draw::Turn) else { return Ok(()) };
            let bytes = set.wire(0);
            let mut fields = [httparse::EMPTY_HEADER; 16];
            let mut parsed = httparse::Request::new(&mut fields);
            let head = match parsed.parse(bytes) {
                Ok(httparse::Status::Complete(n)) => n,
                other => return Err(TestCaseError::fail(format!("{other:?}: {}", wire::show(bytes)))),
            };
            prop_assert_eq!(parsed.method, Some(r.method.as_str()));
            prop_assert_eq!(parsed.path, Some(r.path.as_str()));
            let got: Vec<(String, Vec<u8>)> = parsed.headers.iter().map(|h| (h.name.to_string(), h.value.to_vec())).collect();
            let mut want: Vec<(String, Vec<u8>)> = vec![("Host".into(), b"h".to_vec())];
            want.extend(r.headers.iter().map(|(n, v)| (n.clone(), v.as_bytes().to_vec())));
            if !r.body.is_empty() || r.expects_content() {
                want.push(("Content-Length".into(), r.body.len().to_string().into_bytes()));
            }
            prop_assert_eq!(got, want);
            prop_assert_eq!(&bytes[head..], &r.body[..]);
        }
    }

    #[test]
    fn a_host_or_path_with_what_rfc_3986_does_not_allow_is_refused_by_name_and_position() {
        assert!(check_host("127.0.0.1:8080").is_ok() && check_host("[::1]:80").is_ok());
        assert!(check_path("/index.html?q=a%20b&x=1").is_ok() && check_path("/").is_ok());
        let host = check_host("x\r\nX-Injected: 1").unwrap_err().to_string();
        assert_eq!(host, "has a control character (0x0d) at position 1");
        assert_eq!(check_path("/x\nX").unwrap_err().to_string(), "has a control character (0x0a) at position 2");
        assert_eq!(check_path("/a b").unwrap_err().to_string(), "has a space at position 2");
        assert_eq!(check_path("/é").unwrap_err().to_string(), "has a non-ASCII byte (0xc3) at position 1");
        assert_eq!(check_path("/a#b").unwrap_err().to_string(), "has '#' at position 2, which it may not hold");
        assert_eq!(check_path("/%zz").unwrap_err().to_string(), "has a '%' not followed by two hex digits at position 1");
        assert_eq!(check_path("x").unwrap_err().to_string(), "does not start with '/'");
        assert_eq!(check_host("a/b").unwrap_err().to_string(), "has '/' at position 1, which it may not hold");
        assert!(check_host(&"h".repeat(MAX_HOST + 1)).unwrap_err().to_string().contains("over 261"));
        assert!(check_path(&format!("/{}", "p".repeat(MAX_PATH))).unwrap_err().to_string().contains("over 8000"));
    }

    proptest! {
        #[test]
        fn nothing_a_check_lets_through_puts_a_control_byte_in_a_request(host in "\\PC{0,40}", path in "\\PC{0,40}",
                                                                         raw in proptest::collection::vec(any::<u8>(), 0..40)) {
            let raw = String::from_utf8_lossy(&raw).into_owned();
            for (h, p) in [(host.as_str(), path.as_str()), (raw.as_str(), raw.as_str()), ("h", raw.as_str())] {
                let p = format!("/{p}");
                if check_host(h).is_ok() && check_path(&p).is_ok() {
                    let mut c = Client::new(h, &p);
                    let mut out = Vec::new();
                    c.encode(&Request { id: 0, kind: OpKind::Get, key: b"", value: b"", request: 0 }, &mut out);
                    // The request's own three CR LFs, and no other byte below 0x21 but its two spaces.
                    prop_assert_eq!(out.iter().filter(|&&b| b == b'\r' || b == b'\n').count(), 6);
                    prop_assert_eq!(out.iter().filter(|&&b| b < 0x20 || b == 0x7f).count(), 6);
                    prop_assert_eq!(out.iter().filter(|&&b| b == b' ').count(), 3);
                }
            }
        }
    }

    fn parse(buf: &[u8]) -> Parsed {
        Client::new("h", "/").parse(buf)
    }

    fn reply(len: usize, outcome: Outcome) -> Parsed {
        Parsed::Reply { len, id: None, outcome }
    }

    fn bad(p: Parsed, needle: &str) -> bool {
        matches!(p, Parsed::Malformed { ref reason } if reason.contains(needle))
    }

    /// A chunked body cut into chunks of the given sizes (cycled), with optional extensions.
    fn chunked(body: &[u8], sizes: &[usize], ext: bool, trailers: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = body;
        let mut i = 0;
        while !rest.is_empty() {
            let n = sizes[i % sizes.len()].clamp(1, rest.len());
            i += 1;
            out.extend_from_slice(format!("{n:x}{}\r\n", if ext { ";name=\"v\"" } else { "" }).as_bytes());
            out.extend_from_slice(&rest[..n]);
            out.extend_from_slice(b"\r\n");
            rest = &rest[n..];
        }
        out.extend_from_slice(b"0\r\n");
        for t in trailers {
            out.extend_from_slice(t.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    #[test]
    fn request_bytes_are_exact() {
        let mut out = Vec::new();
        let mut c = Client::new("example.org:8080", "/index.html?q=1");
        let req = Request { id: 1, kind: OpKind::Get, key: b"ignored", value: b"", request: 0 };
        c.encode(&req, &mut out);
        c.encode(&req, &mut out);
        let one = b"GET /index.html?q=1 HTTP/1.1\r\nHost: example.org:8080\r\n\r\n";
        assert_eq!(out, [&one[..], one].concat());
        out.clear();
        Client::new("h", "").encode(&req, &mut out);
        assert_eq!(out, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    }

    #[test]
    fn replies_and_their_outcomes() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(parse(r), reply(r.len(), Outcome::Done));
        let r = b"HTTP/1.0 301 Moved\r\ncontent-LENGTH:0\r\nConnection: close\r\n\r\n";
        assert_eq!(parse(r), reply(r.len(), Outcome::Done));
        let r = b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1";
        assert_eq!(parse(r), reply(r.len() - 8, Outcome::Done));
        let r = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n";
        assert_eq!(parse(r), reply(r.len(), Outcome::Done));
        let r = b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno!";
        assert_eq!(parse(r), reply(r.len(), Outcome::Error("HTTP 404 Not Found".into())));
        let r = b"HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse(r), reply(r.len(), Outcome::Error("HTTP 503".into())));
        let r = b"HTTP/1.1 500 \r\nContent-Length: 0\r\n\r\n";
        assert_eq!(parse(r), reply(r.len(), Outcome::Error("HTTP 500".into())));
        let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\nContent-Length: 3\r\n\r\n".to_vec();
        r.extend(chunked(b"hello world", &[4], true, &["X-Checksum: 1", "X-Other: 2"]));
        assert_eq!(parse(&r), reply(r.len(), Outcome::Done));
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\nX-Folded: a\r\n  b\r\n\r\nx";
        assert_eq!(parse(r), reply(r.len(), Outcome::Done));
        // Interim responses go with the final one.
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(parse(r), reply(r.len(), Outcome::Done));
    }

    #[test]
    fn split_and_coalesced_replies() {
        let mut s = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nServer: t\r\n\r\n0123456789".to_vec();
        s.extend_from_slice(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        s.extend(chunked(&[b'c'; 40], &[7, 1, 16], false, &[]));
        s.extend_from_slice(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n:(",
        );
        s.extend_from_slice(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        s.extend(chunked(b"ab", &[1], true, &["T: x"]));
        s.extend_from_slice(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0000000003 \t;e\r\nabc\r\n0\r\n\r\n",
        );
        s.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
        check_all_splits(
            &make,
            &s,
            &[
                (None, Outcome::Done),
                (None, Outcome::Done),
                (None, Outcome::Error("HTTP 500 Internal Server Error".into())),
                (None, Outcome::Done),
                (None, Outcome::Done),
                (None, Outcome::Done),
            ],
        );
    }

    #[test]
    fn malformed_replies() {
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\n\r\n"), "keep-alive measurement impossible"));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n"), "keep-alive"));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), "keep-alive"));
        assert!(bad(parse(b"SSH-2.0"), "not an HTTP reply: \"SSH-2.0\""));
        assert!(bad(parse(b"HTTP/2 200\r\n\r\n"), "bad HTTP status line \"HTTP/2 200\""));
        assert!(bad(parse(b"HTTP/1.1 20 OK\r\n\r\n"), "bad HTTP status line"));
        assert!(bad(parse(b"HTTP/1.1 2000 OK\r\n\r\n"), "bad HTTP status line"));
        assert!(bad(parse(b"HTTP/1.1 099 OK\r\n\r\n"), "bad HTTP status line"));
        assert!(bad(parse(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"), "101 Switching Protocols"));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"), "bad or conflicting Content-Length \"x\""));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n"), "conflicting Content-Length"));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), "conflicting"));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 4194305\r\n\r\n"), "above the limit"));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\n"), "bad header line"));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n"), "bad header line \"NoColon\""));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n 2\r\n\r\n"), "folded"));
        let te = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let with = |body: &[u8]| [&te[..], body].concat();
        assert!(bad(parse(&with(b"x\r\n")), "bad chunk size line \"x\""));
        assert!(bad(parse(&with(b"\r\n")), "bad chunk size line"));
        assert!(bad(parse(&with(b"1 x\r\n")), "bad chunk size line"));
        assert!(bad(parse(&with(b"123456789abcdef0123456789\r\n")), "above the limit"));
        assert!(bad(parse(&with(b"-1\r\n")), "bad chunk size line"));
        assert!(bad(parse(&with(b"400001\r\n")), "above the limit"));
        assert!(bad(parse(&with(b"3\r\nabcd\r\n")), "not followed by CRLF"));
        assert!(bad(parse(&with(b"3\nabc")), "LF without CR"));
        assert!(bad(parse(&with(&[b'1'; MAX_CHUNK_LINE + 2])), "chunk line longer than 4096"));
        let mut head = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        head.resize(MAX_HEAD, b'x');
        assert!(bad(parse(&head), "reply head longer than 16384 bytes"));
        head.truncate(MAX_HEAD - 1);
        assert_eq!(parse(&head), Parsed::Incomplete);
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_HEAD / 25 + 1);
        assert!(bad(parse(&interim), "interim 1xx responses longer than"));
        // Many tiny chunks with long extensions cannot grow a reply without bound.
        let mut many = te.to_vec();
        let ext = format!("1;{}\r\nx\r\n", "e".repeat(4000));
        while many.len() < MAX_REPLY + MAX_HEAD + 8192 {
            many.extend_from_slice(ext.as_bytes());
        }
        assert!(bad(parse(&many), "on the wire"));
    }

    #[test]
    fn heads_parsed_by_httparse_keep_their_limits_and_words() {
        // More fields than the stack holds: parsed again with room for any head.
        let mut r = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..(HEADERS * 3) {
            r.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        r.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
        assert_eq!(parse(&r), reply(r.len(), Outcome::Done));
        // The reason phrase as the server wrote it, obs-text included.
        let r = "HTTP/1.1 503 Überlastet\r\nContent-Length: 0\r\n\r\n".as_bytes();
        assert_eq!(parse(r), reply(r.len(), Outcome::Error("HTTP 503 Überlastet".into())));
        // An empty line before the end of the head, and empty lines before the status line.
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nA: b\n\nContent-Length: 0\r\n\r\n"), "bad header line"));
        assert!(bad(parse(b"\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), "bad HTTP status line"));
        assert!(bad(parse(b"HTTP/1.1 200 OK\r\nA: 1\r\nB\x01: 2\r\n\r\n"), "bad header line \"B\\x01: 2\""));
    }

    #[test]
    fn state_is_kept_between_calls_and_reset_on_a_new_buffer() {
        let mut c = Client::new("h", "/");
        let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        r.extend(chunked(&[b'z'; 1000], &[10], false, &[]));
        assert_eq!(c.parse(&r[..600]), Parsed::Incomplete);
        assert!(matches!(c.st.head, Some(Head { body: Body::Chunked { pos, .. }, .. }) if pos > 500));
        // A shorter buffer is another stream: parsing starts over and stays correct.
        let other = b"HTTP/1.1 404 Gone\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(c.parse(other), reply(other.len(), Outcome::Error("HTTP 404 Gone".into())));
        assert_eq!(c.parse(&r), reply(r.len(), Outcome::Done));
    }

    /// A random response (test-side encoder of the server's format) and its outcome.
    fn response() -> impl Strategy<Value = (Vec<u8>, Outcome)> {
        (
            prop_oneof![Just(200u16), Just(204), Just(302), Just(304), Just(404), Just(503), 100u16..600],
            value(),
            any::<bool>(),
            proptest::collection::vec(1usize..300, 1..4),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(code, body, chunk, sizes, ext, interim)| {
                let code = if code < 200 { 200 } else { code };
                let mut s = Vec::new();
                if interim {
                    s.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                }
                s.extend_from_slice(format!("HTTP/1.1 {code} Reason Phrase\r\nServer: test\r\n").as_bytes());
                let body_allowed = code != 204 && code != 304;
                if chunk {
                    s.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
                    if body_allowed {
                        s.extend(chunked(&body, &sizes, ext, &["Trailer: t"]));
                    }
                } else {
                    s.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
                    if body_allowed {
                        s.extend_from_slice(&body);
                    }
                }
                let outcome = if (200..400).contains(&code) {
                    Outcome::Done
                } else {
                    Outcome::Error(format!("HTTP {code} Reason Phrase"))
                };
                (s, outcome)
            })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic((mut bytes, cuts) in bytes_and_cuts(), head in any::<bool>()) {
            if head {
                bytes.splice(0..0, b"HTTP/1.1 200 OK\r\n".iter().copied());
            }
            no_panic_stream(&mut Client::new("h", "/"), &bytes, &cuts);
        }

        #[test]
        fn edited_replies_never_panic((s, _) in response(), e in edits(), cuts in proptest::collection::vec(any::<usize>(), 0..3)) {
            let s = apply_edits(s, &e);
            let cuts: Vec<usize> = cuts.iter().map(|c| c % (s.len() + 1)).collect();
            no_panic_stream(&mut Client::new("h", "/"), &s, &cuts);
        }

        #[test]
        fn round_trip((a, oa) in response(), (b, ob) in response(), cut in any::<usize>(), cut2 in any::<usize>()) {
            let s = [&a[..], &b[..]].concat();
            let want = vec![(a.len(), None, oa), (b.len(), None, ob)];
            prop_assert_eq!(drive(&mut Client::new("h", "/"), &s, &[]), want.clone());
            let mut cuts = [cut % (s.len() + 1), cut2 % (s.len() + 1)];
            cuts.sort_unstable();
            prop_assert_eq!(drive(&mut Client::new("h", "/"), &s, &cuts), want);
        }
    }
}
