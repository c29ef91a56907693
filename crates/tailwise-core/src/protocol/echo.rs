//! UDP echo (as RFC 862's echo service, or any server that sends each datagram back): a datagram
//! of `size` bytes, at least 8 and at most [`MAX_DATAGRAM`],
//!
//! ```text
//! id u64 little-endian | filler: bytes 0x00, 0x01, … (mod 256) up to the size
//! ```
//!
//! The reply is the same datagram. It is matched by the id in its first 8 bytes; a reply of
//! another length is an error reply (`echo of N bytes, expected M`), one shorter than the id is
//! malformed. The filler is not checked: the id is what tells replies apart.

use super::wire::show;
use super::{Codec, Outcome, Parsed, Request};

/// The smallest datagram: the request id.
pub const MIN_DATAGRAM: usize = 8;
/// The largest UDP payload over IPv4: a bigger size could never be sent.
pub const MAX_DATAGRAM: usize = 65_507;

/// Client codec.
pub struct Client {
    size: usize,
    /// The bytes after the id, built once.
    filler: Vec<u8>,
}

impl Client {
    /// Datagrams of `size` bytes, clamped to [`MIN_DATAGRAM`] ..= [`MAX_DATAGRAM`].
    pub fn new(size: usize) -> Client {
        let size = size.clamp(MIN_DATAGRAM, MAX_DATAGRAM);
        Client { size, filler: (0..size - MIN_DATAGRAM).map(|i| i as u8).collect() }
    }
}

impl Codec for Client {
    #[inline]
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        out.extend_from_slice(&req.id.to_le_bytes());
        out.extend_from_slice(&self.filler);
    }

    #[inline]
    fn parse(&mut self, d: &[u8]) -> Parsed {
        let Some(id) = d.first_chunk::<8>() else {
            return Parsed::Malformed {
                reason: format!("echo datagram of {} bytes, shorter than its 8-byte id: {}", d.len(), show(d)),
            };
        };
        let id = Some(u64::from_le_bytes(*id));
        let outcome = if d.len() == self.size {
            Outcome::Done
        } else {
            Outcome::Error(format!("echo of {} bytes, expected {}", d.len(), self.size))
        };
        Parsed::Reply { len: d.len(), id, outcome }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::testutil::*;
    use crate::protocol::OpKind;
    use proptest::prelude::*;

    fn encode(c: &mut Client, id: u64) -> Vec<u8> {
        let mut out = Vec::new();
        c.encode(&Request { id, kind: OpKind::Get, key: b"", value: b"", request: 0 }, &mut out);
        out
    }

    #[test]
    fn request_bytes_are_exact() {
        assert_eq!(encode(&mut Client::new(0), 0x0102_0304_0506_0708), [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(encode(&mut Client::new(12), 1), [1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3]);
        let d = encode(&mut Client::new(300), 5);
        assert_eq!((d.len(), d[8 + 255], d[8 + 256]), (300, 255, 0));
        assert_eq!(Client::new(8).id_mask(), u64::MAX);
        assert_eq!(encode(&mut Client::new(usize::MAX), 0).len(), MAX_DATAGRAM);
    }

    #[test]
    fn replies() {
        let mut c = Client::new(16);
        let d = encode(&mut c, u64::MAX);
        assert_eq!(c.parse(&d), Parsed::Reply { len: 16, id: Some(u64::MAX), outcome: Outcome::Done });
        let outcome = Outcome::Error("echo of 10 bytes, expected 16".into());
        assert_eq!(c.parse(&d[..10]), Parsed::Reply { len: 10, id: Some(u64::MAX), outcome });
        let outcome = Outcome::Error("echo of 8 bytes, expected 16".into());
        assert_eq!(c.parse(&d[..8]), Parsed::Reply { len: 8, id: Some(u64::MAX), outcome });
        let long = [&d[..], b"extra"].concat();
        let outcome = Outcome::Error("echo of 21 bytes, expected 16".into());
        assert_eq!(c.parse(&long), Parsed::Reply { len: 21, id: Some(u64::MAX), outcome });
    }

    #[test]
    fn malformed_datagrams() {
        let mut c = Client::new(8);
        for d in [&b""[..], b"\x01", b"1234567"] {
            assert!(
                matches!(c.parse(d), Parsed::Malformed { ref reason } if reason.contains("shorter than its 8-byte id"))
            );
        }
    }

    proptest! {
        #[test]
        fn arbitrary_datagrams_never_panic(ds in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8), size in 0usize..40) {
            no_panic_datagrams(&mut Client::new(size), &ds);
        }

        #[test]
        fn round_trip(id in any::<u64>(), size in 0usize..2000) {
            let mut c = Client::new(size);
            let d = encode(&mut c, id);
            prop_assert_eq!(d.len(), size.max(8));
            prop_assert_eq!(c.parse(&d), Parsed::Reply { len: d.len(), id: Some(id), outcome: Outcome::Done });
        }
    }
}
