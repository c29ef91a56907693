//! What TLS record protection costs on this host (`tailwise calibrate`'s `tls` entry): a rustls
//! client and server joined in memory — no socket, no network: each one's records are handed to
//! the other from a buffer —, the handshake done first, then per iteration the monotonic clock
//! read around the engine's own `tls::encrypt` of a request and around its `tls::decrypt` of a
//! reply record, as the request path calls them (engine/io.rs). The client is configured as an
//! engine's (`tls::provider()`, rustls' safe default versions), the server as `tailwise serve
//! --tls-cert/--tls-key`'s, so the version and cipher suite are what a run against it negotiates.

use super::tls;
use crate::error::{Kind, Problem};
use crate::time::clock::now_ns;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, ConnectionCommon, RootCertStore, ServerConfig, ServerConnection};
use std::sync::Arc;

// The crate's TLS test certificates (server/testdata: a CA, and a certificate for localhost it
// signed, valid for a century, made once with openssl for tests), compiled in so that the
// measurement reads no file. Their key protects nothing: these sessions never meet a network.
const CA_PEM: &str = include_str!("../server/testdata/ca.pem");
const CERT_PEM: &str = include_str!("../server/testdata/cert.pem");
const KEY_PEM: &str = include_str!("../server/testdata/key.pem");

/// The same three PEMs by name (ca, cert, key), for `calibrate`'s ping over TLS on loopback
/// (`tailwise serve --tls-cert/--tls-key` with them, the engine trusting the CA): `_core.TLS_CALIBRATE_PEM`.
pub const IDENTITY_PEM: [(&str, &str); 3] = [("ca", CA_PEM), ("cert", CERT_PEM), ("key", KEY_PEM)];

/// A record's plaintext is at most 2^14 bytes (RFC 8446 §5.1, RFC 5246 §6.2.1): the measurement
/// is of one record each way.
pub const MAX_RECORD_BYTES: usize = 1 << 14;
/// Iterations at most (two u64 per iteration kept: 16 MB).
pub const MAX_ITERATIONS: usize = 1_000_000;

/// Each iteration's encrypt and decrypt (ns, one clock read's cost included), and what the
/// handshake agreed.
#[derive(Clone, Debug)]
pub struct RecordCost {
    pub encrypt_ns: Vec<u64>,
    pub decrypt_ns: Vec<u64>,
    /// "TLSv1.3" or "TLSv1.2".
    pub version: String,
    /// The IANA name, e.g. "TLS13_AES_256_GCM_SHA384".
    pub cipher: String,
}

/// Why the cost could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    #[error("{what} {got} is out of range 1..={max}")]
    Range { what: &'static str, got: usize, max: usize },
    #[error("TLS in memory: {0}")]
    Tls(#[from] rustls::Error),
    #[error("TLS in memory: {0}")]
    Broken(&'static str),
}

impl Problem for CostError {
    fn kind(&self) -> Kind {
        match self {
            CostError::Range { .. } => Kind::Input,
            _ => Kind::Host,
        }
    }

    fn remedy(&self) -> String {
        match self {
            CostError::Range { what, max, .. } => format!("give {what} between 1 and {max}"),
            _ => "report it: rustls failed with its own certificate, in memory".into(),
        }
    }
}

/// A client and a server session whose records pass through memory.
pub struct Pair {
    pub client: ClientConnection,
    pub server: ServerConnection,
}

impl Pair {
    /// Both sessions, handshake done (and the server's TLS 1.3 tickets taken by the client, so
    /// that no handshake message is left to process in a measured call).
    pub fn new() -> Result<Pair, CostError> {
        let chain = CertificateDer::pem_slice_iter(CERT_PEM.as_bytes()).collect::<Result<Vec<_>, _>>().map_err(|_| CostError::Broken("the certificate"))?;
        let key = PrivateKeyDer::from_pem_slice(KEY_PEM.as_bytes()).map_err(|_| CostError::Broken("the key"))?;
        let server = ServerConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        let mut roots = RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(CA_PEM.as_bytes()).map_err(|_| CostError::Broken("the CA"))?)?;
        let client = ClientConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from("localhost").map_err(|_| CostError::Broken("the name"))?;
        let mut pair = Pair {
            client: ClientConnection::new(Arc::new(client), name)?,
            server: ServerConnection::new(Arc::new(server))?,
        };
        pair.handshake()?;
        Ok(pair)
    }

    /// Records back and forth until neither side has any to send: a full TLS 1.3 handshake is
    /// three flights and the tickets (RFC 8446 §2), TLS 1.2's four.
    fn handshake(&mut self) -> Result<(), CostError> {
        let mut wire = Vec::new();
        for _ in 0..16 {
            wire.clear();
            drain(&mut self.client, &mut wire);
            let from_client = !wire.is_empty();
            feed(&mut self.server, &wire)?;
            wire.clear();
            drain(&mut self.server, &mut wire);
            let from_server = !wire.is_empty();
            feed(&mut self.client, &wire)?;
            if !from_client && !from_server {
                return match self.client.is_handshaking() || self.server.is_handshaking() {
                    true => Err(CostError::Broken("the handshake stopped half way")),
                    false => Ok(()),
                };
            }
        }
        Err(CostError::Broken("the handshake did not end"))
    }

    /// The server reads `wire` (the client's records): its plaintext appended to `plain`.
    pub fn server_reads(&mut self, wire: &[u8], plain: &mut Vec<u8>) -> Result<(), CostError> {
        feed(&mut self.server, wire)?;
        tls::take_plaintext(self.server.reader(), plain);
        Ok(())
    }

    /// The server encrypts `plain` (a reply) onto `wire`.
    pub fn server_writes(&mut self, plain: &[u8], wire: &mut Vec<u8>) -> Result<(), CostError> {
        std::io::Write::write_all(&mut self.server.writer(), plain).map_err(|_| CostError::Broken("the server's writer"))?;
        drain(&mut self.server, wire);
        Ok(())
    }
}

/// Everything `conn` has to send, onto `wire` (a Vec takes it all).
fn drain<D>(conn: &mut ConnectionCommon<D>, wire: &mut Vec<u8>) {
    while conn.wants_write() {
        let _ = conn.write_tls(wire);
    }
}

/// `wire` (whole records or not) into `conn`, processed.
fn feed<D>(conn: &mut ConnectionCommon<D>, mut wire: &[u8]) -> Result<(), CostError> {
    while !wire.is_empty() {
        match conn.read_tls(&mut wire) {
            Ok(0) => return Err(CostError::Broken("a session took no more records")),
            Ok(_) => {}
            Err(_) => return Err(CostError::Broken("a session's buffer is full")),
        }
        conn.process_new_packets()?;
    }
    Ok(())
}

/// `iterations` times: the clock around `tls::encrypt` of a `request_bytes` plaintext into a Vec
/// (the client's record), and around `tls::decrypt` of the server's record of a `reply_bytes`
/// reply. Each side's output is checked outside the clock reads: the server reads the request
/// back, the client the reply. Buffers are allocated before the first iteration.
pub fn record_cost(iterations: usize, request_bytes: usize, reply_bytes: usize) -> Result<RecordCost, CostError> {
    for (what, got, max) in [
        ("iterations", iterations, MAX_ITERATIONS),
        ("request_bytes", request_bytes, MAX_RECORD_BYTES),
        ("reply_bytes", reply_bytes, MAX_RECORD_BYTES),
    ] {
        if !(1..=max).contains(&got) {
            return Err(CostError::Range { what, got, max });
        }
    }
    let mut pair = Pair::new()?;
    let request: Vec<u8> = (0..request_bytes).map(|i| i as u8).collect();
    let reply: Vec<u8> = (0..reply_bytes).map(|i| (i as u8) ^ 0x5a).collect();
    // Room for a record's header, content type and AEAD tag (RFC 8446 §5.2: < 256 bytes).
    let mut wire = Vec::with_capacity(request_bytes + 256);
    let mut record = Vec::with_capacity(reply_bytes + 256);
    let mut plain = Vec::with_capacity(request_bytes.max(reply_bytes));
    let mut out = RecordCost {
        encrypt_ns: Vec::with_capacity(iterations),
        decrypt_ns: Vec::with_capacity(iterations),
        version: version_name(pair.client.protocol_version()),
        cipher: pair.client.negotiated_cipher_suite().map_or("unknown".into(), |s| {
            s.suite().as_str().map_or_else(|| format!("{:?}", s.suite()), str::to_string)
        }),
    };
    for _ in 0..iterations {
        wire.clear();
        let a = now_ns();
        tls::encrypt(&mut pair.client, &request, &mut wire);
        let b = now_ns();
        plain.clear();
        pair.server_reads(&wire, &mut plain)?;
        if plain != request {
            return Err(CostError::Broken("the server read another request than the client encrypted"));
        }
        record.clear();
        pair.server_writes(&reply, &mut record)?;
        plain.clear();
        let c = now_ns();
        let closed = tls::decrypt(&mut pair.client, &record, &mut plain)?;
        let d = now_ns();
        if closed || plain != reply {
            return Err(CostError::Broken("the client decrypted another reply than the server sent"));
        }
        out.encrypt_ns.push(b - a);
        out.decrypt_ns.push(d - c);
    }
    Ok(out)
}

fn version_name(v: Option<rustls::ProtocolVersion>) -> String {
    match v {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".into(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".into(),
        Some(other) => format!("{other:?}"),
        None => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encrypted_requests_and_decrypted_replies_round_trip_and_every_figure_is_positive() {
        let cost = record_cost(500, 64, 128).unwrap();
        assert_eq!((cost.encrypt_ns.len(), cost.decrypt_ns.len()), (500, 500));
        // Each includes a clock read (tens of ns) and an AEAD pass: never 0.
        assert!(cost.encrypt_ns.iter().chain(&cost.decrypt_ns).all(|&ns| ns > 0));
        assert_eq!(cost.version, "TLSv1.3");
        assert!(cost.cipher.starts_with("TLS13_"), "{}", cost.cipher);
    }

    #[test]
    fn what_encrypt_made_the_server_reads_and_what_it_sends_decrypt_gives_back() {
        let mut pair = Pair::new().unwrap();
        for (i, len) in [1usize, 64, 4096, MAX_RECORD_BYTES].into_iter().enumerate() {
            let request: Vec<u8> = (0..len).map(|b| (b * 7 + i) as u8).collect();
            let mut wire = Vec::new();
            tls::encrypt(&mut pair.client, &request, &mut wire);
            // Longer by the record's overhead, and no plaintext in it.
            assert!(wire.len() > len, "{len}");
            assert!(len < 64 || !wire.windows(32).any(|w| w == &request[..32]), "{len}");
            let mut plain = Vec::new();
            pair.server_reads(&wire, &mut plain).unwrap();
            assert_eq!(plain, request, "{len}");
            let mut record = Vec::new();
            pair.server_writes(&request, &mut record).unwrap();
            plain.clear();
            assert!(!tls::decrypt(&mut pair.client, &record, &mut plain).unwrap());
            assert_eq!(plain, request, "{len}");
        }
    }

    #[test]
    fn out_of_range_arguments_are_named() {
        for (args, what) in [((0, 64, 128), "iterations"), ((1, 0, 128), "request_bytes"), ((1, 64, MAX_RECORD_BYTES + 1), "reply_bytes")] {
            let e = record_cost(args.0, args.1, args.2).unwrap_err();
            assert!(matches!(e, CostError::Range { .. }) && e.to_string().starts_with(what), "{e}");
            assert!(e.remedy().contains(what));
        }
    }
}
