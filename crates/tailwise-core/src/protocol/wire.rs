//! Small byte-level helpers shared by the codecs: decimal formatting without `format!`, line
//! finding, number parsing, and printable excerpts of bad input for `Malformed` reasons.

use memchr::memmem::Finder;
use std::sync::LazyLock;

/// Append `n` in decimal (the request encoders' hot path: no allocation beyond `out`).
#[inline]
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

/// What `line` found at the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The line's content is `buf[..end]`; the CRLF follows it.
    Found { end: usize },
    /// No LF within the first `max + 2` bytes.
    Incomplete,
    /// Longer than `max` without a line end.
    TooLong,
    /// An LF not preceded by CR at `at`.
    BareLf { at: usize },
}

/// Find the CRLF ending the line at the front of `buf`, looking at no more than `max + 2` bytes.
#[inline]
pub fn line(buf: &[u8], max: usize) -> Line {
    let window = &buf[..buf.len().min(max + 2)];
    // The LF, not the CRLF (`memmem`), is searched: a bare LF before the first CRLF must be seen.
    // memchr pays off beyond a few dozen bytes; Redis length lines are shorter.
    let lf = if window.len() <= 32 { window.iter().position(|&b| b == b'\n') } else { memchr::memchr(b'\n', window) };
    match lf {
        Some(0) => Line::BareLf { at: 0 },
        Some(lf) if window[lf - 1] != b'\r' => Line::BareLf { at: lf },
        Some(lf) => Line::Found { end: lf - 1 },
        None if buf.len() > max + 1 => Line::TooLong,
        None => Line::Incomplete,
    }
}

/// The first CRLF in `buf`, by a searcher built once (building one per search cost more than the
/// search on short lines).
#[inline]
pub fn find_crlf(buf: &[u8]) -> Option<usize> {
    static CRLF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n"));
    CRLF.find(buf)
}

/// The first CRLF CRLF (the end of an HTTP head) in `buf`.
#[inline]
pub fn find_crlf_crlf(buf: &[u8]) -> Option<usize> {
    static CRLF_CRLF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n\r\n"));
    CRLF_CRLF.find(buf)
}

/// A non-empty run of ASCII digits as a number, `None` if empty, not digits or above `max`.
#[inline]
pub fn parse_decimal(s: &[u8], max: u64) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(d as u64)?;
    }
    (n <= max).then_some(n)
}

/// Up to 48 bytes of `b`, escaped, with an ellipsis if cut: for error messages.
pub fn show(b: &[u8]) -> String {
    const MAX: usize = 48;
    let mut s = format!("\"{}\"", b[..b.len().min(MAX)].escape_ascii());
    if b.len() > MAX {
        s.push_str(&format!("… ({} bytes)", b.len()));
    }
    s
}

/// `b` as text for an `Outcome::Error`, at most 256 bytes.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(256)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_round_trips() {
        for n in [0u64, 1, 9, 10, 99, 100, 12345, u32::MAX as u64, u64::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(&out[1..], n.to_string().as_bytes());
            assert_eq!(parse_decimal(&out[1..], u64::MAX), Some(n));
        }
        assert_eq!(parse_decimal(b"", 10), None);
        assert_eq!(parse_decimal(b"11", 10), None);
        assert_eq!(parse_decimal(b"1a", 100), None);
        assert_eq!(parse_decimal(b"18446744073709551616", u64::MAX), None);
    }

    #[test]
    fn lines() {
        assert_eq!(line(b"END\r\nx", 10), Line::Found { end: 3 });
        assert_eq!(line(b"END\r", 10), Line::Incomplete);
        assert_eq!(line(b"END\n", 10), Line::BareLf { at: 3 });
        assert_eq!(line(b"\n", 10), Line::BareLf { at: 0 });
        assert_eq!(line(b"0123456789\r\n", 10), Line::Found { end: 10 });
        assert_eq!(line(b"0123456789\r", 10), Line::Incomplete);
        assert_eq!(line(b"0123456789ab", 10), Line::TooLong);
    }

    #[test]
    fn show_is_bounded_and_printable() {
        assert_eq!(show(b"a\r\n\x00"), "\"a\\r\\n\\x00\"");
        assert!(show(&[b'x'; 1000]).ends_with("… (1000 bytes)"));
    }
}
