//! TLS for the synthetic server (`tailwise serve --tls-cert FILE --tls-key FILE`): rustls'
//! `ServerConnection` between a worker's socket and its plaintext buffers, so that the engine's
//! `synthetic+tls://` (and `memcached+tls://` against the same server) has a server here.
//!
//! A worker's plaintext path is unchanged: `server::read_input` and `server::flush` call these
//! only for a connection that has a `Tls`. Reads decrypt into the connection's read buffer;
//! writes hand the reply to rustls, which keeps the records it could not yet write (bounded by
//! its buffer limit, 64 KiB by default) and writes them when the socket takes more.
//!
//! Session resumption: rustls' default server keeps 256 sessions in memory; we keep
//! `SESSION_CACHE` so that every connection of a run can resume after a reconnect, and send
//! TLS 1.3 tickets (RFC 8446 §4.6.1) naming them, as the default does (two per handshake).

use crate::error::{Kind, Problem};
use rustls::server::ServerSessionMemoryCache;
use rustls::ServerConnection;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::io::{self, Read};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Sessions kept for resumption: more than the connections a run opens (`--conns` ≤ a few
/// thousand), at ~1 KiB each.
const SESSION_CACHE: usize = 16_384;

/// Why the server's certificate or key cannot be used: the file named, never its contents.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {err}")]
    Read { what: &'static str, path: PathBuf, err: String },
    #[error("{what} {path} holds no PEM {kind}")]
    Empty { what: &'static str, path: PathBuf, kind: &'static str },
    #[error("the certificate {cert} and the key {key} do not go together: {err}")]
    Mismatch { cert: PathBuf, key: PathBuf, err: String },
}

impl Problem for TlsError {
    fn kind(&self) -> Kind {
        Kind::Input
    }

    fn remedy(&self) -> String {
        match self {
            TlsError::Read { .. } => "give a file this user may read".into(),
            TlsError::Empty { kind, .. } => format!("give a PEM file with a {kind} (-----BEGIN …-----)"),
            TlsError::Mismatch { .. } => "give the key of that certificate (the first certificate in the file is the server's)".into(),
        }
    }
}

/// The server's TLS configuration from a PEM certificate chain (the server's first) and its
/// private key (PKCS#8, PKCS#1 or SEC1).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let read = |what: &'static str, path: &Path, err: rustls_pki_types::pem::Error| TlsError::Read {
        what,
        path: path.to_path_buf(),
        err: err.to_string(),
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| read("certificate", cert, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| read("certificate", cert, e))?;
    if chain.is_empty() {
        return Err(TlsError::Empty { what: "certificate", path: cert.to_path_buf(), kind: "certificate" });
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => {
            TlsError::Empty { what: "key", path: key.to_path_buf(), kind: "private key" }
        }
        e => read("key", key, e),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key_der))
        .map_err(|e| TlsError::Mismatch { cert: cert.to_path_buf(), key: key.to_path_buf(), err: e.to_string() })?;
    cfg.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    Ok(Arc::new(cfg))
}

/// One connection's TLS state.
pub struct Tls {
    conn: ServerConnection,
}

impl Tls {
    pub fn new(cfg: &Arc<rustls::ServerConfig>) -> io::Result<Tls> {
        ServerConnection::new(cfg.clone()).map(|conn| Tls { conn }).map_err(io::Error::other)
    }

    /// Read what the socket holds, decrypt it and append the plaintext to `rbuf` (at most
    /// `max` bytes in all): whether the client closed its side; Err on a broken connection or a
    /// TLS error (the alert is written before). What a handshake step answers is written here too.
    pub fn read(&mut self, stream: &TcpStream, rbuf: &mut Vec<u8>, max: usize) -> io::Result<bool> {
        let mut eof = false;
        loop {
            let mut s = stream;
            match self.conn.read_tls(&mut s) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if let Err(e) = self.conn.process_new_packets() {
                let _ = self.write_out(stream); // the alert, if it can go
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            if self.drain_plain(rbuf, max)? {
                break;
            }
        }
        if let Err(e) = self.conn.process_new_packets() {
            let _ = self.write_out(stream);
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        self.drain_plain(rbuf, max)?;
        self.write_out(stream)?; // handshake messages, tickets
        Ok(eof)
    }

    /// Move the decrypted bytes into `rbuf`: whether it is full.
    fn drain_plain(&mut self, rbuf: &mut Vec<u8>, max: usize) -> io::Result<bool> {
        let mut chunk = [0u8; 16 << 10];
        while rbuf.len() < max {
            match self.conn.reader().read(&mut chunk) {
                Ok(0) => return Ok(false), // close_notify: the socket's EOF follows
                Ok(n) => rbuf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Encrypt as much of `plain` as rustls takes (its buffer limit) and write the records the
    /// socket takes: the plaintext bytes taken.
    pub fn write(&mut self, stream: &TcpStream, plain: &[u8]) -> io::Result<usize> {
        let n = if plain.is_empty() { 0 } else { io::Write::write(&mut self.conn.writer(), plain)? };
        self.write_out(stream)?;
        Ok(n)
    }

    /// Write the records waiting until the socket would block.
    fn write_out(&mut self, stream: &TcpStream) -> io::Result<()> {
        while self.conn.wants_write() {
            let mut s = stream;
            match self.conn.write_tls(&mut s) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Records still waiting for the socket.
    pub fn pending(&self) -> bool {
        self.conn.wants_write()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_and_an_empty_one_are_named() {
        let dir = std::env::temp_dir().join(format!("tw-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let e = server_config(&dir.join("none.pem"), &empty).unwrap_err();
        assert!(e.to_string().contains("none.pem"), "{e}");
        let e = server_config(&empty, &empty).unwrap_err();
        assert!(matches!(e, TlsError::Empty { .. }), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
