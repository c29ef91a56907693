//! memcached text protocol, server side: `get`/`gets`, `set`, `delete`, `version`, `stats`,
//! `quit` — what load generators send (protocol.txt of memcached 1.6).

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

fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

/// Execute one command from the front of `buf`, appending its reply to `out`.
pub fn serve_one(store: &Store, buf: &[u8], out: &mut Vec<u8>) -> Step {
    let Some(eol) = find_crlf(buf) else {
        if buf.len() > MAX_LINE {
            out.extend_from_slice(b"CLIENT_ERROR line too long\r\n");
            return Step::Done { len: buf.len(), close: true };
        }
        return Step::Incomplete;
    };
    let line = &buf[..eol];
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let cmd = words.next().unwrap_or(b"");
    let mut len = eol + 2;
    match cmd {
        b"get" | b"gets" => {
            let items = store.items.lock().unwrap();
            for key in words {
                store.cmd_get.fetch_add(1, Relaxed);
                if let Some((flags, value)) = items.get(key) {
                    store.get_hits.fetch_add(1, Relaxed);
                    out.extend_from_slice(b"VALUE ");
                    out.extend_from_slice(key);
                    out.extend_from_slice(format!(" {flags} {}", value.len()).as_bytes());
                    if cmd == b"gets" {
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
        b"set" | b"add" | b"replace" => {
            let args: Vec<&[u8]> = words.collect();
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
            len += bytes + 2;
            store.cmd_set.fetch_add(1, Relaxed);
            store.items.lock().unwrap().insert(key.to_vec(), (flags as u32, value));
            if args.get(4) != Some(&&b"noreply"[..]) {
                out.extend_from_slice(b"STORED\r\n");
            }
        }
        b"delete" => {
            let removed = words.next().map(|k| store.items.lock().unwrap().remove(k).is_some());
            out.extend_from_slice(if removed == Some(true) { b"DELETED\r\n" } else { b"NOT_FOUND\r\n" });
        }
        b"version" => out.extend_from_slice(concat!("VERSION tailwise-", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes()),
        b"stats" => {
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
        b"quit" => return Step::Done { len, close: true },
        _ => out.extend_from_slice(b"ERROR\r\n"),
    }
    Step::Done { len, close: false }
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

/// Client codec (STUB: to be written).
pub struct Client;

impl Client {
    pub fn new() -> Client {
        Client
    }
}

impl super::super::Codec for Client {
    fn encode(&mut self, _req: &super::super::Request, _out: &mut Vec<u8>) {}
    fn parse(&mut self, _buf: &[u8]) -> super::super::Parsed {
        super::super::Parsed::Malformed { reason: "not implemented".into() }
    }
}
