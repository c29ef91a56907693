//! TLS on a request path's connections (rustls, ring): the configuration a run asks for
//! (`TlsConfig`, the `tls` field of `EngineConfig`), the one client configuration an engine
//! builds from it (`Client`: roots, verifier, client certificate, ALPN, the session store every
//! connection of the engine shares), the handshake driven on a non-blocking socket (blocking with
//! a deadline for the connections an engine starts with, step by step from epoll events for a
//! reconnect), and the record layer around the codecs: a request encrypted into the connection's
//! write buffer, one read's ciphertext decrypted into its read buffer. Handshakes are counted
//! (full, resumed, failed) and timed apart (`TlsStats`); no request is charged for one.

use crate::error::{Kind, Problem};
use crate::io::socket;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, Resumption};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{AlertDescription, CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, HandshakeKind};
use rustls::{ProtocolVersion, RootCertStore, SignatureScheme};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// What a run asks of TLS (`EngineConfig::tls`; absent or null: plaintext).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificates to trust; None: the system's roots (rustls-native-certs).
    pub ca_file: Option<PathBuf>,
    /// Accept any server certificate (its signature over the handshake is still checked).
    pub insecure: bool,
    /// A client certificate chain (PEM) and its key: both or neither.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// The server name sent (SNI) and verified; an IP address (or None: the target's) is sent as
    /// no SNI and verified against the certificate's IP SANs.
    pub sni: Option<String>,
    /// ALPN protocols offered, e.g. ["http/1.1"].
    pub alpn: Vec<String>,
    /// Resume sessions (TLS 1.3 tickets, TLS 1.2 ids or tickets) on reconnects.
    pub resume: bool,
}

impl Default for TlsConfig {
    fn default() -> TlsConfig {
        TlsConfig { ca_file: None, insecure: false, cert_file: None, key_file: None, sni: None, alpn: Vec::new(), resume: true }
    }
}

impl TlsConfig {
    /// What can be refused without reading a file.
    pub fn validate(&self) -> Result<(), TlsError> {
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => return Err(TlsError::CertWithoutKey),
            (None, Some(_)) => return Err(TlsError::KeyWithoutCert),
            _ => {}
        }
        if let Some(name) = &self.sni {
            ServerName::try_from(name.as_str()).map_err(|_| TlsError::Sni(name.clone()))?;
        }
        Ok(())
    }
}

/// Why TLS could not be set up (`EngineError::Tls`), before any connect.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS over {0}: TLS is for TCP protocols only")]
    NotTcp(&'static str),
    #[error("TLS client certificate given without its key")]
    CertWithoutKey,
    #[error("TLS client key given without its certificate")]
    KeyWithoutCert,
    #[error("TLS server name {0:?} is neither a DNS name nor an IP address")]
    Sni(String),
    #[error("cannot read the {what} {}: {err}", .path.display())]
    Read { what: &'static str, path: PathBuf, err: String },
    #[error("the {what} {} holds no PEM certificate", .path.display())]
    NoCertificate { what: &'static str, path: PathBuf },
    #[error("the client key file {} holds no PEM private key", .0.display())]
    NoKey(PathBuf),
    #[error("the CA file {}: {err}", .path.display())]
    BadCa { path: PathBuf, err: rustls::Error },
    #[error("no system root certificates found ({0})")]
    NoRoots(String),
    #[error("TLS client certificate and key refused: {0}")]
    ClientCert(rustls::Error),
    #[error("TLS configuration: {0}")]
    Config(rustls::Error),
}

impl Problem for TlsError {
    fn kind(&self) -> Kind {
        match self {
            TlsError::NoRoots(_) => Kind::Host,
            _ => Kind::Input,
        }
    }

    fn remedy(&self) -> String {
        match self {
            TlsError::NotTcp(_) => "use the plaintext scheme for a UDP protocol".into(),
            TlsError::CertWithoutKey | TlsError::KeyWithoutCert => "give both --tls-cert FILE and --tls-key FILE".into(),
            TlsError::Sni(_) => "give --tls-sni a host name as the server's certificate names it".into(),
            TlsError::Read { .. } => "check the path and that this user may read it".into(),
            TlsError::NoCertificate { .. } | TlsError::BadCa { .. } => {
                "give a PEM file with -----BEGIN CERTIFICATE----- blocks".into()
            }
            TlsError::NoRoots(_) => "install the system's CA certificates (ca-certificates), or give --tls-ca FILE".into(),
            TlsError::ClientCert(_) | TlsError::NoKey(_) => {
                "give --tls-key the PEM private key (PKCS#8, PKCS#1 or SEC1) of the --tls-cert certificate".into()
            }
            TlsError::Config(_) => String::new(),
        }
    }
}

/// Why a handshake failed: at `Engine::start` an `EngineError`, on a reconnect a `Failure`.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("{0}")]
    Tls(rustls::Error),
    #[error("{0}")]
    Io(io::Error),
    #[error("the server closed the connection during the handshake")]
    Closed,
    #[error("no handshake within {} ms", .0 / 1_000_000)]
    TimedOut(u64),
}

impl HandshakeError {
    /// What to do about it, by the certificate problem or alert rustls names.
    pub fn remedy(&self) -> &'static str {
        use rustls::Error as E;
        use CertificateError as C;
        match self {
            HandshakeError::Tls(E::InvalidCertificate(c)) => match c {
                C::UnknownIssuer | C::BadSignature | C::UnhandledCriticalExtension => {
                    "give the CA that signed the server's certificate with --tls-ca FILE (or accept any with --tls-insecure)"
                }
                C::NotValidForName | C::NotValidForNameContext { .. } => {
                    "give the name the server's certificate is for with --tls-sni NAME (or accept any with --tls-insecure)"
                }
                C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. } => {
                    "renew the server's certificate or check this host's clock (or accept any with --tls-insecure)"
                }
                _ => "check the server's certificate (or accept any with --tls-insecure)",
            },
            HandshakeError::Tls(E::AlertReceived(a)) => match a {
                AlertDescription::CertificateRequired => {
                    "the server wants a client certificate: give --tls-cert FILE --tls-key FILE"
                }
                AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateUnknown
                | AlertDescription::AccessDenied => {
                    "the server refused the client certificate: give --tls-cert/--tls-key one it trusts"
                }
                AlertDescription::NoApplicationProtocol => "the server speaks none of the ALPN protocols offered",
                _ => "the server shares no TLS version or cipher suite with tailwise (TLS 1.2 and 1.3, ECDHE)",
            },
            HandshakeError::Tls(E::InvalidMessage(_) | E::InappropriateMessage { .. } | E::General(_)) => {
                "the target does not speak TLS there: check the port, or use the plaintext scheme"
            }
            HandshakeError::Closed | HandshakeError::TimedOut(_) | HandshakeError::Io(_) => {
                "check that the server speaks TLS on that port (and its log: it may want a client certificate)"
            }
            _ => "",
        }
    }
}

/// The engine's handshakes so far (`Engine::take`'s and `join`'s `tls`): every connection's,
/// initial and reconnects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsStats {
    pub full: u64,
    pub resumed: u64,
    /// Reconnect handshakes that failed or timed out (a failed initial one stops the start).
    pub failed: u64,
    /// Each handshake's duration (ns), in the order they ended, the first `MAX_HANDSHAKES`.
    pub handshake_ns: Vec<u64>,
}

/// Handshake durations kept, at most (their count stays exact in `full + resumed`).
pub const MAX_HANDSHAKES: usize = 65_536;

/// One engine's TLS client: one rustls configuration (and so one session store) for every
/// connection, and its handshake counts.
pub struct Client {
    config: Arc<ClientConfig>,
    sni: Option<ServerName<'static>>,
    stats: Mutex<TlsStats>,
    /// The server asked for a client certificate (since the flag was last cleared).
    asked: Arc<AtomicBool>,
}

impl Client {
    /// Read the files and build the configuration.
    pub fn build(spec: &TlsConfig) -> Result<Client, TlsError> {
        spec.validate()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let builder = if spec.insecure {
            let any = AcceptAnyServerCertificate(provider.signature_verification_algorithms);
            builder.dangerous().with_custom_certificate_verifier(Arc::new(any))
        } else {
            builder.with_root_certificates(roots(spec.ca_file.as_ref())?)
        };
        let mut config = match (&spec.cert_file, &spec.key_file) {
            (Some(cert), Some(key)) => {
                let chain = certificates("client certificate file", cert)?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| match e {
                    rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey(key.clone()),
                    e => TlsError::Read { what: "client key file", path: key.clone(), err: e.to_string() },
                })?;
                builder.with_client_auth_cert(chain, key).map_err(TlsError::ClientCert)?
            }
            _ => builder.with_no_client_auth(),
        };
        let asked = Arc::new(AtomicBool::new(false));
        let inner = config.client_auth_cert_resolver.clone();
        config.client_auth_cert_resolver = Arc::new(AskedFor { inner, asked: asked.clone() });
        config.alpn_protocols = spec.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        // rustls' in-memory store (256 servers, a few TLS 1.3 tickets each), shared by every
        // connection of the engine through the one `Arc<ClientConfig>`.
        config.resumption = if spec.resume { Resumption::default() } else { Resumption::disabled() };
        let sni = spec.sni.as_ref().map(|n| ServerName::try_from(n.clone()).map_err(|_| TlsError::Sni(n.clone()))).transpose()?;
        Ok(Client { config: Arc::new(config), sni, stats: Mutex::new(TlsStats::default()), asked })
    }

    /// The handshake of a connection an engine starts with (connected to `addr` on `fd`),
    /// waiting up to `timeout_ns`; timed and counted. Returns the session and the bytes it wrote.
    ///
    /// In TLS 1.3 the client's part of the handshake ends before the server has checked its
    /// certificate (RFC 8446 §4.4.2): a server that asked for one and refuses what it got (or
    /// that none came) says so by an alert after it. So when asked, wait for the server's next
    /// word — its session tickets (RFC 8446 §4.6.1) or that alert — twice the handshake's time
    /// and 20 ms more at most (a server that sends no tickets and lets the certificate be
    /// optional costs that wait), so that the refusal stops `Engine::start` in one line.
    pub fn connect(&self, addr: &SocketAddr, fd: RawFd, timeout_ns: u64) -> Result<(Box<ClientConnection>, u64), HandshakeError> {
        let mut session = self.session(addr).map_err(HandshakeError::Tls)?;
        self.asked.store(false, Relaxed);
        let since = crate::time::clock::now_ns();
        let deadline = since + timeout_ns;
        let mut wrote = 0;
        handshake_blocking(&mut session, fd, deadline, timeout_ns, &mut wrote)?;
        let ns = crate::time::clock::now_ns() - since;
        if self.asked.load(Relaxed) && session.protocol_version() == Some(ProtocolVersion::TLSv1_3) {
            await_verdict(&mut session, fd, (since + 3 * ns + 20_000_000).min(deadline))?;
        }
        self.done(session.handshake_kind(), ns);
        Ok((session, wrote))
    }

    /// A new client session to `addr`: the configured name, else the target's IP (no SNI).
    pub fn session(&self, addr: &SocketAddr) -> Result<Box<ClientConnection>, rustls::Error> {
        let name = self.sni.clone().unwrap_or_else(|| ServerName::IpAddress(addr.ip().into()));
        ClientConnection::new(self.config.clone(), name).map(Box::new)
    }

    /// A handshake ended, of `kind`, after `ns`.
    pub fn done(&self, kind: Option<HandshakeKind>, ns: u64) {
        let mut s = self.stats.lock().unwrap();
        match kind {
            Some(HandshakeKind::Resumed) => s.resumed += 1,
            _ => s.full += 1,
        }
        if s.handshake_ns.len() < MAX_HANDSHAKES {
            s.handshake_ns.push(ns);
        }
    }

    pub fn failed(&self) {
        self.stats.lock().unwrap().failed += 1;
    }

    pub fn stats(&self) -> TlsStats {
        self.stats.lock().unwrap().clone()
    }
}

/// The CA file's certificates, or the system's roots.
fn roots(ca_file: Option<&PathBuf>) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            for c in certificates("CA file", path)? {
                store.add(c).map_err(|err| TlsError::BadCa { path: path.clone(), err })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (_, ignored) = store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                let why = found.errors.first().map_or_else(|| format!("{ignored} unusable"), |e| e.to_string());
                return Err(TlsError::NoRoots(why));
            }
        }
    }
    Ok(store)
}

fn certificates(what: &'static str, path: &PathBuf) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let read = |e: rustls::pki_types::pem::Error| TlsError::Read { what, path: path.clone(), err: e.to_string() };
    let certs = CertificateDer::pem_file_iter(path).map_err(read)?.collect::<Result<Vec<_>, _>>().map_err(read)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { what, path: path.clone() });
    }
    Ok(certs)
}

/// The configured client certificate resolver, noting that the server asked for a certificate.
#[derive(Debug)]
struct AskedFor {
    inner: Arc<dyn ResolvesClientCert>,
    asked: Arc<AtomicBool>,
}

impl ResolvesClientCert for AskedFor {
    fn resolve(&self, hints: &[&[u8]], schemes: &[SignatureScheme]) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.asked.store(true, Relaxed);
        self.inner.resolve(hints, schemes)
    }

    fn has_certs(&self) -> bool {
        self.inner.has_certs()
    }
}

/// After a TLS 1.3 handshake the server asked a certificate in: its first records until
/// `until_ns` (an alert is its refusal); nothing by then is taken as acceptance.
fn await_verdict(tls: &mut ClientConnection, fd: RawFd, until_ns: u64) -> Result<(), HandshakeError> {
    loop {
        let now = crate::time::clock::now_ns();
        if now >= until_ns {
            return Ok(());
        }
        let ms = (until_ns - now).div_ceil(1_000_000).min(i32::MAX as u64) as i32;
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, ms) } <= 0 {
            continue;
        }
        match tls.read_tls(&mut Fd(fd)) {
            Ok(0) => return Err(HandshakeError::Closed),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => continue,
            Err(e) => return Err(HandshakeError::Io(e)),
        }
        // A ticket (or the first reply bytes, kept for the reader) means the server went on.
        return tls.process_new_packets().map(|_| ()).map_err(HandshakeError::Tls);
    }
}

/// `--tls-insecure`: any certificate chain for any name is accepted; the server must still sign
/// the handshake with the key of the certificate it sent (so the run still measures a real
/// handshake's cost). Named as what it is.
#[derive(Debug)]
struct AcceptAnyServerCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AcceptAnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// A socket as rustls' reader and writer.
struct Fd(RawFd);

impl Read for Fd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        socket::read(self.0, buf)
    }
}

impl Write for Fd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        socket::write(self.0, buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A blocking socket under a `rustls::Stream` that counts the bytes written (the socket's
/// transmit-stamp keys count them): what is said before the schedule (setup.rs) and preload.
pub struct Counted<S> {
    inner: S,
    pub wrote: u64,
}

impl<S> Counted<S> {
    pub fn new(inner: S) -> Counted<S> {
        Counted { inner, wrote: 0 }
    }
}

impl<S: Read> Read for Counted<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }
}

impl<S: Write> Write for Counted<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.wrote += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Where a non-blocking handshake stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Done,
    /// Waiting for the server (EPOLLIN).
    Read,
    /// Waiting for room to write (EPOLLOUT).
    Write,
}

/// Drive a handshake on the non-blocking socket `fd` as far as it goes now; `wrote` counts the
/// bytes written (the socket's transmit-stamp keys count them).
pub fn handshake(tls: &mut ClientConnection, fd: RawFd, wrote: &mut u64) -> Result<Step, HandshakeError> {
    loop {
        while tls.wants_write() {
            match tls.write_tls(&mut Fd(fd)) {
                Ok(n) => *wrote += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Write),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(heard_out(tls, fd, e)),
            }
        }
        if !tls.is_handshaking() {
            return Ok(Step::Done);
        }
        match tls.read_tls(&mut Fd(fd)) {
            Ok(0) => return Err(HandshakeError::Closed),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Read),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(heard_out(tls, fd, e)),
        }
        if let Err(e) = tls.process_new_packets() {
            // The alert rustls queued tells the server why (best effort).
            let _ = tls.write_tls(&mut Fd(fd));
            return Err(HandshakeError::Tls(e));
        }
    }
}

/// A socket error in a handshake: the server may have said why before it closed (an alert
/// still in the receive queue, e.g. a TLS 1.2 server that wants a client certificate): that
/// is the error to report.
fn heard_out(tls: &mut ClientConnection, fd: RawFd, err: io::Error) -> HandshakeError {
    if let Ok(1..) = tls.read_tls(&mut Fd(fd)) {
        if let Err(e) = tls.process_new_packets() {
            return HandshakeError::Tls(e);
        }
    }
    HandshakeError::Io(err)
}

/// A handshake to its end, waiting in poll(2) until `deadline_ns` (CLOCK_MONOTONIC) at most.
pub fn handshake_blocking(tls: &mut ClientConnection, fd: RawFd, deadline_ns: u64, timeout_ns: u64, wrote: &mut u64) -> Result<(), HandshakeError> {
    loop {
        let events = match handshake(tls, fd, wrote)? {
            Step::Done => return Ok(()),
            Step::Read => libc::POLLIN,
            Step::Write => libc::POLLOUT,
        };
        let now = crate::time::clock::now_ns();
        if now >= deadline_ns {
            return Err(HandshakeError::TimedOut(timeout_ns));
        }
        let ms = (deadline_ns - now).div_ceil(1_000_000).min(i32::MAX as u64) as i32;
        let mut p = libc::pollfd { fd, events, revents: 0 };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, ms) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(HandshakeError::Io(e));
            }
        }
    }
}

/// Encrypt `plain` (one encoded request) onto the end of `wire`: its last byte there is the
/// request's last byte on the wire (a transmit stamp's key). rustls cuts records of ≤ 16 KiB.
#[inline]
pub fn encrypt(tls: &mut ClientConnection, mut plain: &[u8], wire: &mut Vec<u8>) {
    loop {
        // rustls takes what its outgoing buffer holds room for; it is emptied into `wire` each turn.
        let n = tls.writer().write(plain).unwrap_or(0);
        plain = &plain[n..];
        while tls.wants_write() {
            let _ = tls.write_tls(wire); // a Vec takes everything
        }
        if plain.is_empty() || n == 0 {
            debug_assert!(plain.is_empty(), "rustls refused plaintext after the handshake");
            return;
        }
    }
}

/// What rustls has to send by itself (a KeyUpdate's answer, an alert), onto `wire`: whether any.
#[inline]
pub fn pending(tls: &mut ClientConnection, wire: &mut Vec<u8>) -> bool {
    let mut any = false;
    while tls.wants_write() {
        any |= tls.write_tls(wire).unwrap_or(0) > 0;
    }
    any
}

/// Say the session's end to the server (close_notify, RFC 8446 §6.1), best effort, not waiting.
pub fn close(tls: &mut ClientConnection, fd: RawFd) {
    tls.send_close_notify();
    let _ = tls.write_tls(&mut Fd(fd));
}

/// One read's ciphertext in, its plaintext appended to `plain` (a reply may end in a later read,
/// a record may span reads: rustls keeps the partial record). Ok(true): the server ended the
/// session (close_notify), after what `plain` got.
pub fn decrypt(tls: &mut ClientConnection, mut cipher: &[u8], plain: &mut Vec<u8>) -> Result<bool, rustls::Error> {
    loop {
        let mut stalled = false;
        if !cipher.is_empty() {
            match tls.read_tls(&mut cipher) {
                Ok(n) => stalled = n == 0,
                Err(e) => return Err(rustls::Error::General(e.to_string())),
            }
        }
        let state = tls.process_new_packets()?;
        take_plaintext(tls.reader(), plain);
        if state.peer_has_closed() {
            return Ok(true);
        }
        if cipher.is_empty() {
            return Ok(false);
        }
        if stalled {
            return Err(rustls::Error::General("TLS records stalled".into()));
        }
    }
}

/// Every plaintext byte a session has decrypted so far, appended to `plain` (a client's or a
/// server's: engine/tls_cost reads both sides this way).
pub(crate) fn take_plaintext(mut r: rustls::Reader<'_>, plain: &mut Vec<u8>) {
    use std::io::BufRead;
    while let Ok(chunk) = r.fill_buf() {
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len();
        plain.extend_from_slice(chunk);
        r.consume(n);
    }
}

/// The crypto provider every TLS config of the crate uses (the tests' servers too).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
