#![no_main]
//! The TLS record boundary in reply parsing (engine/tls.rs `decrypt`): a reply stream cut into
//! records at any place and its ciphertext into reads at any place must parse exactly as the
//! plaintext does in one read. Input: byte 0 picks a stream codec, byte 1 the record size
//! (plaintext bytes per write, 1..=256; × 64 when bit 7 of byte 0 is set, up to rustls' 16 KiB),
//! byte 2 the read size (1..=256; × 97 when bit 6 of byte 0 is set); the rest is the stream.

use libfuzzer_sys::fuzz_target;
use rustls::pki_types::PrivateKeyDer;
use rustls::{ClientConnection, ServerConfig, ServerConnection};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use tailwise_core::engine::tls::{self, Client, TlsConfig};
use tailwise_core::protocol::{Codec, Parsed, Protocol};

/// One client and server session for the whole run, handshake done in memory: every input ends
/// on a record boundary, so the next one starts clean.
fn pair() -> &'static Mutex<(ClientConnection, ServerConnection)> {
    static PAIR: OnceLock<Mutex<(ClientConnection, ServerConnection)>> = OnceLock::new();
    PAIR.get_or_init(|| {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().self_signed(&key).unwrap();
        let server = ServerConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], PrivateKeyDer::Pkcs8(key.serialize_der().into()))
            .unwrap();
        let client = Client::build(&TlsConfig { insecure: true, ..TlsConfig::default() }).unwrap();
        let mut c = *client.session(&"127.0.0.1:1".parse().unwrap()).unwrap();
        let mut s = ServerConnection::new(Arc::new(server)).unwrap();
        while c.is_handshaking() || s.is_handshaking() {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                s.read_tls(&mut rd).unwrap();
                s.process_new_packets().unwrap();
            }
            buf.clear();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            let mut plain = Vec::new();
            tls::decrypt(&mut c, &buf, &mut plain).unwrap();
        }
        Mutex::new((c, s))
    })
}

/// Replies parsed as the engine does: `parse` until `Incomplete`, consuming each reply's `len`,
/// after each piece appended; stops at the first `Malformed`.
fn replies(codec: &mut dyn Codec, pieces: &[Vec<u8>]) -> (Vec<(usize, Option<u64>)>, bool) {
    let (mut buf, mut pos, mut got) = (Vec::new(), 0, Vec::new());
    for p in pieces {
        buf.extend_from_slice(p);
        loop {
            match codec.parse(&buf[pos..]) {
                Parsed::Incomplete => break,
                Parsed::Reply { len, id, .. } => {
                    got.push((len, id));
                    pos += len;
                }
                Parsed::Malformed { .. } => return (got, true),
            }
        }
    }
    (got, false)
}

fuzz_target!(|data: &[u8]| {
    let [pick, record, read, stream @ ..] = data else { return };
    let protocols: Vec<Protocol> = Protocol::each().into_iter().filter(|p| !p.is_datagram() && !p.is_packet()).collect();
    let proto = &protocols[(*pick & 0x3f) as usize % protocols.len()];
    let record = (*record as usize + 1) * if pick & 0x80 != 0 { 64 } else { 1 };
    let read = (*read as usize + 1) * if pick & 0x40 != 0 { 97 } else { 1 };

    let mut guard = pair().lock().unwrap();
    let (c, s) = &mut *guard;
    let mut wire = Vec::new();
    for chunk in stream.chunks(record) {
        s.writer().write_all(chunk).unwrap();
        while s.wants_write() {
            s.write_tls(&mut wire).unwrap();
        }
    }
    // The client's reads: each read's plaintext is what the engine appends before parsing.
    let mut pieces = Vec::new();
    for r in wire.chunks(read) {
        let mut plain = Vec::new();
        let closed = tls::decrypt(c, r, &mut plain).expect("records of a good session decrypt");
        assert!(!closed);
        pieces.push(plain);
    }
    assert_eq!(pieces.concat(), stream, "plaintext lost or changed across records and reads");
    assert!(c.process_new_packets().unwrap().plaintext_bytes_to_read() == 0);
    let whole = replies(&mut *proto.codec(), &[stream.to_vec()]);
    let split = replies(&mut *proto.codec(), &pieces);
    assert_eq!(whole, split, "{} over TLS: records of {record}, reads of {read}", proto.name());
});
