//! The packet mode's wire: one UDP datagram per packet, its size given as the Ethernet frame it
//! makes (RFC 2544's count: Ethernet header 14 + IP header + UDP 8 + payload + FCS 4), so the UDP
//! payload is `size − 46` over IPv4 and `size − 66` over IPv6. The payload, little-endian, then
//! zeros to its length:
//!
//! ```text
//! magic u16 = 0x5477 ("Tw") | flow u16 | seq u64 (per flow, from 0) | stamp u48 (opaque)
//! ```
//!
//! The network functions (reflector, forwarder) never look past the magic; the client matches a
//! datagram to its packet by flow and seq.

use super::codec::{Codec, Outcome, Parsed, Request};

pub const MAGIC: u16 = 0x5477;
/// Bytes of the header above: 2 + 2 + 8 + 6 = 18, the payload of a 64-byte frame over IPv4.
pub const HEADER: usize = 18;
/// Frame sizes: the Ethernet minimum, a 9000-byte jumbo payload's frame, and the default.
pub const FRAME_MIN: usize = 64;
pub const FRAME_MAX: usize = 9018;
pub const FRAME_DEFAULT: usize = 64;
/// Flows per run, at most, and by default.
pub const MAX_FLOWS: usize = 1024;
pub const DEFAULT_FLOWS: usize = 1;
/// Frame bytes that are not UDP payload: Ethernet 14 + FCS 4 + UDP 8 + IPv4 20 (IPv6 40).
const OVERHEAD_V4: usize = 46;
const OVERHEAD_V6: usize = 66;

/// The UDP payload of a `frame`-byte frame (never shorter than the header).
pub fn payload_len(frame: usize, ipv6: bool) -> usize {
    frame.saturating_sub(if ipv6 { OVERHEAD_V6 } else { OVERHEAD_V4 }).max(HEADER)
}

/// Write a packet's header into the front of `buf` (at least `HEADER` bytes; the rest is left
/// as it is: zeros, written once). `stamp`: its low 48 bits.
#[inline]
pub fn write(buf: &mut [u8], flow: u16, seq: u64, stamp: u64) {
    buf[0..2].copy_from_slice(&MAGIC.to_le_bytes());
    buf[2..4].copy_from_slice(&flow.to_le_bytes());
    buf[4..12].copy_from_slice(&seq.to_le_bytes());
    buf[12..18].copy_from_slice(&stamp.to_le_bytes()[..6]);
}

/// A datagram's flow and seq, if it is a packet of ours.
#[inline]
pub fn read(d: &[u8]) -> Option<(u16, u64)> {
    let h = d.first_chunk::<12>()?;
    if u16::from_le_bytes([h[0], h[1]]) != MAGIC {
        return None;
    }
    let flow = u16::from_le_bytes([h[2], h[3]]);
    let seq = u64::from_le_bytes(h[4..12].try_into().expect("8 bytes"));
    Some((flow, seq))
}

/// The packet wire as a [`Codec`] (flow 0, the request id as seq), for the protocol table and
/// the codec benches; the packet path (packet/) writes and reads packets itself.
pub struct Client {
    payload: usize,
}

impl Client {
    pub fn new(frame: usize) -> Client {
        Client { payload: payload_len(frame, false) }
    }
}

impl Codec for Client {
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + self.payload, 0);
        write(&mut out[at..], 0, req.id, 0);
    }

    fn parse(&mut self, d: &[u8]) -> Parsed {
        match read(d) {
            Some((_, seq)) => Parsed::Reply { len: d.len(), id: Some(seq), outcome: Outcome::Done },
            None => Parsed::Malformed { reason: format!("datagram of {} bytes without the packet magic", d.len()) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_round_trips_and_fits_the_smallest_frame() {
        assert_eq!(payload_len(64, false), 18);
        assert_eq!(payload_len(9018, false), 8972);
        assert_eq!(payload_len(64, true), HEADER);
        let mut buf = vec![0u8; payload_len(64, false)];
        write(&mut buf, 513, 0x0102_0304_0506_0708, 0xABCD_1234_5678);
        assert_eq!(&buf[..2], &[0x77, 0x54], "magic 0x5477, little-endian");
        assert_eq!(read(&buf), Some((513, 0x0102_0304_0506_0708)));
        assert_eq!(&buf[12..18], &[0x78, 0x56, 0x34, 0x12, 0xCD, 0xAB], "the stamp's 48 bits");
        assert_eq!(read(&buf[..11]), None, "shorter than flow and seq");
        buf[0] = 0;
        assert_eq!(read(&buf), None, "no magic");
    }

    #[test]
    fn the_codec_carries_the_id_as_seq() {
        let mut c = Client::new(100);
        let mut out = Vec::new();
        c.encode(&Request { id: 42, kind: crate::protocol::OpKind::Get, key: b"", value: b"", request: 0 }, &mut out);
        assert_eq!(out.len(), 54);
        assert_eq!(c.parse(&out), Parsed::Reply { len: 54, id: Some(42), outcome: Outcome::Done });
        assert!(matches!(c.parse(b"nope"), Parsed::Malformed { .. }));
    }
}
