//! TLS end to end (tls.rs): the engine against an in-process rustls server on 127.0.0.1 that
//! answers the synthetic protocol, with certificates made by rcgen; and the record layer's read
//! helper fed replies split across records and records split across reads.

use super::tls::{self, TlsConfig};
use super::*;
use crate::error::Problem;
use crate::protocol::{synthetic, Parsed, Protocol};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConnection, ServerConfig, ServerConnection};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// A test CA and a server certificate it signed for localhost and 127.0.0.1 (setup_tests too).
pub(super) struct Pki {
    ca_pem: String,
    ca: CertificateDer<'static>,
    chain: Vec<CertificateDer<'static>>,
    key: Vec<u8>,
    /// A client certificate the CA signed, and its key (PEM).
    client_pem: String,
    client_key_pem: String,
}

impl Pki {
    pub(super) fn new(name: &str) -> Pki {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, name);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        let client_key = KeyPair::generate().unwrap();
        let client = CertificateParams::new(vec!["client.example".to_string()]).unwrap().signed_by(&client_key, &ca).unwrap();
        Pki {
            ca_pem: ca.pem(),
            ca: ca.der().clone(),
            chain: vec![leaf.der().clone()],
            key: key.serialize_der(),
            client_pem: client.pem(),
            client_key_pem: client_key.serialize_pem(),
        }
    }

    pub(super) fn server_config(&self) -> ServerConfig {
        self.server_config_for(false, rustls::DEFAULT_VERSIONS)
    }

    /// With `client_auth`, a client certificate the CA signed is required.
    fn server_config_for(&self, client_auth: bool, versions: &[&'static rustls::SupportedProtocolVersion]) -> ServerConfig {
        let b = ServerConfig::builder_with_provider(tls::provider()).with_protocol_versions(versions).unwrap();
        let b = if client_auth {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.ca.clone()).unwrap();
            let v = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), tls::provider()).build().unwrap();
            b.with_client_cert_verifier(v)
        } else {
            b.with_no_client_auth()
        };
        b.with_single_cert(self.chain.clone(), PrivateKeyDer::Pkcs8(self.key.clone().into())).unwrap()
    }

    /// Its CA written to a file of its own (removed with the returned guard).
    pub(super) fn ca_file(&self) -> TempFile {
        TempFile::new("ca.pem", self.ca_pem.as_bytes())
    }
}

pub(super) struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, content: &[u8]) -> TempFile {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!("tailwise-tls-{}-{}", std::process::id(), N.fetch_add(1, Relaxed)));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        TempFile(p)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

#[derive(Clone, Copy, Default)]
struct Behaviour {
    /// Close (close_notify, then the socket) after this many replies on a connection; 0: never.
    close_every: u64,
    /// Largest record the server sends (rustls: ≥ 32).
    fragment: Option<usize>,
    /// Write the ciphertext a few bytes at a time, so that records span reads.
    dribble: bool,
    /// Require a client certificate the CA signed.
    client_auth: bool,
    /// TLS 1.2 only.
    tls12: bool,
    /// With `close_every`: the last write's ciphertext corrupted (one bit) instead of a clean close.
    corrupt: bool,
    /// Connections after this many are closed at once, before any handshake; 0: never.
    refuse_after: u64,
}

/// A TLS server answering the synthetic protocol, one thread per connection; stopped on drop.
struct TlsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    served: Arc<AtomicU64>,
    accepted: Arc<AtomicU64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl TlsServer {
    fn start(pki: &Pki, how: Behaviour) -> TlsServer {
        let versions: &[&'static rustls::SupportedProtocolVersion] =
            if how.tls12 { &[&rustls::version::TLS12] } else { rustls::DEFAULT_VERSIONS };
        let mut cfg = pki.server_config_for(how.client_auth, versions);
        cfg.max_fragment_size = how.fragment;
        let cfg = Arc::new(cfg);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let (stop, served, accepted) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (st, sv, ac) = (stop.clone(), served.clone(), accepted.clone());
        let handle = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !st.load(Relaxed) {
                match l.accept() {
                    Ok((s, _)) => {
                        if ac.fetch_add(1, Relaxed) >= how.refuse_after && how.refuse_after > 0 {
                            drop(s);
                            continue;
                        }
                        let (cfg, sv, st) = (cfg.clone(), sv.clone(), st.clone());
                        conns.push(std::thread::spawn(move || serve(s, cfg, how, &sv, &st)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        TlsServer { addr, stop, served, accepted, handle: Some(handle) }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(mut tcp: TcpStream, cfg: Arc<ServerConfig>, how: Behaviour, served: &AtomicU64, stop: &AtomicBool) {
    tcp.set_nodelay(true).unwrap();
    tcp.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut tls = ServerConnection::new(cfg).unwrap();
    let (mut plain, mut answered) = (Vec::new(), 0u64);
    let mut wire = Vec::new();
    while !stop.load(Relaxed) {
        match tls.read_tls(&mut tcp) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(_) => return,
        }
        if tls.process_new_packets().is_err() {
            let _ = tls.write_tls(&mut tcp); // the alert
            return;
        }
        let mut chunk = [0u8; 4096];
        while let Ok(n) = tls.reader().read(&mut chunk) {
            if n == 0 {
                break;
            }
            plain.extend_from_slice(&chunk[..n]);
        }
        let mut out = Vec::new();
        let mut close = false;
        while let Ok(Some((len, r))) = synthetic::parse_request(&plain) {
            plain.drain(..len);
            synthetic::encode_reply(r.id, 0, r.reply_pad, &mut out);
            answered += 1;
            served.fetch_add(1, Relaxed);
            if how.close_every > 0 && answered % how.close_every == 0 {
                close = true;
                break;
            }
        }
        tls.writer().write_all(&out).unwrap();
        if close {
            tls.send_close_notify();
        }
        wire.clear();
        while tls.wants_write() {
            tls.write_tls(&mut wire).unwrap();
        }
        if close && how.corrupt {
            let last = wire.len() - 1;
            wire[last] ^= 1;
        }
        let step = if how.dribble { 7 } else { wire.len().max(1) };
        for piece in wire.chunks(step) {
            if tcp.write_all(piece).is_err() {
                return;
            }
            if how.dribble {
                std::thread::sleep(Duration::from_micros(30));
            }
        }
        if close {
            let _ = tcp.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

fn config(addr: SocketAddr, tls: TlsConfig, rate: f64, duration_ms: u64) -> EngineConfig {
    EngineConfig { unreachable_ns: 1_000_000_000, seed: 5, tls: Some(tls), ..super::tests::config(addr, rate, duration_ms) }
}

pub(super) fn trusting(ca: &TempFile) -> TlsConfig {
    TlsConfig { ca_file: Some(ca.0.clone()), ..TlsConfig::default() }
}

/// A problem as users read it: the problem, then its remedy.
fn line(e: &impl Problem) -> String {
    format!("{e}: {}", e.remedy())
}

fn all_answered(r: &EngineResult) {
    let c = r.counters;
    assert!(r.error.is_none(), "{:?} {:?}", r.error, r.error_reasons);
    assert_eq!(c.intended, c.sent + c.never_sent);
    assert_eq!((c.never_sent, c.errors, c.timeouts, c.unfinished), (0, 0, 0, 0), "{c:?} {:?}", r.error_reasons);
    assert_eq!(c.received, c.sent, "{c:?}");
    assert!(c.sent > 0);
}

#[test]
fn a_run_over_tls_answers_every_request_and_times_each_handshake() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let s = TlsServer::start(&pki, Behaviour::default());
    // No server name: none sent, the certificate's IP SAN verified.
    let r = Engine::start(config(s.addr, trusting(&ca), 2_000.0, 300)).unwrap().join();
    all_answered(&r);
    assert_eq!(s.served.load(Relaxed), r.counters.received);
    let t = r.tls.expect("a TLS run reports its handshakes");
    assert_eq!((t.full, t.resumed, t.failed, t.handshake_ns.len()), (2, 0, 0, 2), "{t:?}");
    assert!(t.handshake_ns.iter().all(|&ns| ns > 0 && ns < 1_000_000_000), "{t:?}");
    // The same by name, with ALPN offered.
    let spec = TlsConfig { sni: Some("localhost".into()), alpn: vec!["http/1.1".into()], ..trusting(&ca) };
    let r = Engine::start(config(s.addr, spec, 2_000.0, 100)).unwrap().join();
    all_answered(&r);
}

#[test]
fn kernel_stamps_count_the_encrypted_stream() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let s = TlsServer::start(&pki, Behaviour::default());
    let cfg = EngineConfig { timestamps: Timestamps::Kernel, ..config(s.addr, trusting(&ca), 2_000.0, 300) };
    let r = Engine::start(cfg).unwrap().join();
    all_answered(&r);
    // Every request's transmit stamp found by its last encrypted byte (the handshake's bytes
    // counted first): none lost to misplaced keys.
    let c = r.counters;
    assert!(c.tx_kernel as f64 >= 0.95 * c.received as f64, "{c:?}");
    for smp in r.samples.iter().filter(|s| s.tx_ns > 0) {
        assert!(smp.tx_ns >= smp.sent_ns && smp.tx_ns - smp.sent_ns < 50_000_000, "{smp:?}");
    }
}

#[test]
fn a_wrong_ca_is_refused_at_start_in_one_line_and_insecure_accepts_it() {
    let pki = Pki::new("tailwise test CA");
    let other = Pki::new("another CA").ca_file();
    let s = TlsServer::start(&pki, Behaviour::default());
    let e = Engine::start(config(s.addr, trusting(&other), 1_000.0, 100)).err().expect("refused");
    let text = line(&e);
    assert!(!text.contains('\n'), "{text}");
    assert!(text.starts_with(&format!("TLS handshake with {} failed: ", s.addr)), "{text}");
    assert!(text.contains("UnknownIssuer") && text.contains("--tls-ca FILE") && text.contains("--tls-insecure"), "{text}");
    assert_eq!(e.kind(), crate::error::Kind::Target);
    // A name the certificate is not for.
    let ca = pki.ca_file();
    let spec = TlsConfig { sni: Some("elsewhere.example".into()), ..trusting(&ca) };
    let e = Engine::start(config(s.addr, spec, 1_000.0, 100)).err().expect("refused");
    assert!(line(&e).contains("certificate not valid for name \"elsewhere.example\"") && line(&e).contains("--tls-sni NAME"), "{}", line(&e));
    // --tls-insecure: any certificate, any name.
    let spec = TlsConfig { insecure: true, sni: Some("elsewhere.example".into()), ..trusting(&other) };
    let r = Engine::start(config(s.addr, spec, 2_000.0, 200)).unwrap().join();
    all_answered(&r);
}

#[test]
fn a_server_that_wants_a_client_certificate_is_refused_without_and_answers_with() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let (cert, key) = (TempFile::new("client.pem", pki.client_pem.as_bytes()), TempFile::new("client.key", pki.client_key_pem.as_bytes()));
    for tls12 in [false, true] {
        let s = TlsServer::start(&pki, Behaviour { client_auth: true, tls12, ..Behaviour::default() });
        let e = Engine::start(config(s.addr, trusting(&ca), 1_000.0, 100)).err().expect("refused without a certificate");
        let text = line(&e);
        assert!(!text.contains('\n') && text.contains("--tls-cert FILE --tls-key FILE"), "TLS 1.2 only: {tls12}: {text}");
        let spec = TlsConfig { cert_file: Some(cert.0.clone()), key_file: Some(key.0.clone()), ..trusting(&ca) };
        let r = Engine::start(config(s.addr, spec, 2_000.0, 200)).unwrap().join();
        all_answered(&r);
    }
    // A certificate the server's CA did not sign.
    let other = Pki::new("another CA");
    let (cert, key) = (TempFile::new("client.pem", other.client_pem.as_bytes()), TempFile::new("client.key", other.client_key_pem.as_bytes()));
    let s = TlsServer::start(&pki, Behaviour { client_auth: true, ..Behaviour::default() });
    let spec = TlsConfig { cert_file: Some(cert.0.clone()), key_file: Some(key.0.clone()), ..trusting(&ca) };
    let e = Engine::start(config(s.addr, spec, 1_000.0, 100)).err().expect("refused");
    assert!(line(&e).contains("refused the client certificate"), "{}", line(&e));
}

#[test]
fn plaintext_spoken_to_a_tls_client_is_refused_at_start() {
    // The built-in synthetic server speaks no TLS: it sees garbage and closes, or answers it.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let _ = s.write_all(b"ERROR\r\n");
        std::thread::sleep(Duration::from_millis(50));
    });
    let spec = TlsConfig { insecure: true, ..TlsConfig::default() };
    let e = Engine::start(EngineConfig { conns: 1, threads: 1, ..config(addr, spec, 1_000.0, 100) }).err().expect("refused");
    assert!(line(&e).contains("does not speak TLS there"), "{}", line(&e));
    h.join().unwrap();
}

#[test]
fn reconnects_resume_the_session_and_lose_nothing() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let s = TlsServer::start(&pki, Behaviour { close_every: 20, ..Behaviour::default() });
    let r = Engine::start(config(s.addr, trusting(&ca), 2_000.0, 500)).unwrap().join();
    all_answered(&r);
    let t = r.tls.unwrap();
    let c = r.counters;
    assert!(c.reconnects >= 20, "{c:?}");
    assert_eq!(t.full + t.resumed, 2 + c.reconnects, "{t:?} {c:?}");
    assert_eq!(t.handshake_ns.len() as u64, t.full + t.resumed);
    assert!(t.resumed >= c.reconnects / 2, "reconnects resume: {t:?}");
    assert_eq!(t.failed, 0);
    // Each connection the server accepted had its handshake, but for a reconnect the run's end cut.
    let accepted = s.accepted.load(Relaxed);
    assert!((t.full + t.resumed..=t.full + t.resumed + 2).contains(&accepted), "{accepted} {t:?}");
    // Without resumption every handshake is full.
    let spec = TlsConfig { resume: false, ..trusting(&ca) };
    let r = Engine::start(config(s.addr, spec, 2_000.0, 300)).unwrap().join();
    all_answered(&r);
    let t = r.tls.unwrap();
    assert!(r.counters.reconnects >= 10, "{:?}", r.counters);
    assert_eq!((t.resumed, t.full), (0, 2 + r.counters.reconnects), "{t:?}");
    // TLS 1.2: resumed by the server's session id.
    let s = TlsServer::start(&pki, Behaviour { close_every: 20, tls12: true, ..Behaviour::default() });
    let r = Engine::start(config(s.addr, trusting(&ca), 2_000.0, 300)).unwrap().join();
    all_answered(&r);
    let t = r.tls.unwrap();
    assert!(t.resumed >= r.counters.reconnects / 2 && t.full + t.resumed == 2 + r.counters.reconnects, "{t:?}");
}

#[test]
fn a_corrupt_record_loses_the_connection_with_the_reason_and_nothing_else() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let s = TlsServer::start(&pki, Behaviour { close_every: 25, corrupt: true, ..Behaviour::default() });
    let r = Engine::start(config(s.addr, trusting(&ca), 2_000.0, 300)).unwrap().join();
    all_answered(&r);
    assert!(r.counters.reconnects >= 5, "{:?}", r.counters);
    let (why, n) = &r.error_reasons[0];
    assert!(why.starts_with("TLS: ") && *n >= 5, "{:?}", r.error_reasons);
}

#[test]
fn failed_reconnect_handshakes_are_counted_and_end_the_run_with_their_reason() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    let s = TlsServer::start(&pki, Behaviour { close_every: 10, refuse_after: 2, ..Behaviour::default() });
    let cfg = EngineConfig { unreachable_ns: 300_000_000, ..config(s.addr, trusting(&ca), 1_000.0, 2_000) };
    let r = Engine::start(cfg).unwrap().join();
    let t = r.tls.unwrap();
    assert_eq!((t.full + t.resumed, r.counters.reconnects), (2, 0), "{t:?}");
    assert!(t.failed >= 2, "{t:?}");
    let e = r.error.expect("unreachable");
    let text = line(&e);
    assert!(text.contains("TLS handshake with") && text.contains("speaks TLS on that port"), "{text}");
}

#[test]
fn replies_split_across_records_and_reads_are_answered() {
    let pki = Pki::new("tailwise test CA");
    let ca = pki.ca_file();
    // 32-byte records (rustls' least) of 24 + 100-byte replies, a few bytes per TCP write.
    let s = TlsServer::start(&pki, Behaviour { fragment: Some(32), dribble: true, ..Behaviour::default() });
    let proto = Protocol::Synthetic { service_ns: None, reply_pad: 100 };
    let r = Engine::start(EngineConfig { protocol: proto, ..config(s.addr, trusting(&ca), 1_000.0, 300) }).unwrap().join();
    all_answered(&r);
}

#[test]
fn tls_settings_are_refused_before_any_connect() {
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap(); // nothing is dialled
    let start = |tls: TlsConfig, proto: Protocol| Engine::start(EngineConfig { protocol: proto, ..config(addr, tls, 1_000.0, 100) }).err().unwrap();
    let synthetic = Protocol::Synthetic { service_ns: None, reply_pad: 0 };
    let e = start(TlsConfig::default(), Protocol::UdpEcho { size: 64 });
    assert_eq!(line(&e), "TLS over udp: TLS is for TCP protocols only: use the plaintext scheme for a UDP protocol");
    let e = start(TlsConfig { cert_file: Some("c.pem".into()), ..TlsConfig::default() }, synthetic.clone());
    assert!(line(&e).contains("without its key") && line(&e).contains("--tls-key FILE"), "{}", line(&e));
    let e = start(TlsConfig { ca_file: Some("/nonexistent/ca.pem".into()), ..TlsConfig::default() }, synthetic.clone());
    assert!(line(&e).starts_with("cannot read the CA file /nonexistent/ca.pem: "), "{}", line(&e));
    let empty = TempFile::new("empty.pem", b"not a certificate\n");
    let e = start(TlsConfig { ca_file: Some(empty.0.clone()), ..TlsConfig::default() }, synthetic.clone());
    assert!(line(&e).contains("holds no PEM certificate"), "{}", line(&e));
    let pki = Pki::new("tailwise test CA");
    let cert = pki.ca_file();
    let key = TempFile::new("key.pem", b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    let e = start(TlsConfig { cert_file: Some(cert.0.clone()), key_file: Some(key.0.clone()), ..TlsConfig::default() }, synthetic.clone());
    assert!(!line(&e).contains('\n') && line(&e).contains("--tls-key"), "{}", line(&e));
    let e = start(TlsConfig { cert_file: Some(cert.0.clone()), key_file: Some(empty.0.clone()), ..TlsConfig::default() }, synthetic.clone());
    assert!(line(&e).contains("holds no PEM private key") && line(&e).contains("--tls-key"), "{}", line(&e));
    let e = start(TlsConfig { sni: Some("bad name!".into()), ..TlsConfig::default() }, synthetic);
    assert!(line(&e).contains("--tls-sni"), "{}", line(&e));
    // The JSON names.
    let c = EngineConfig::from_json(
        r#"{"tls": {"ca_file": null, "insecure": true, "cert_file": null, "key_file": null, "sni": "x", "alpn": ["http/1.1"], "resume": false}}"#,
    )
    .unwrap();
    assert_eq!(c.tls, Some(TlsConfig { insecure: true, sni: Some("x".into()), alpn: vec!["http/1.1".into()], resume: false, ..TlsConfig::default() }));
    assert_eq!(EngineConfig::from_json(r#"{"tls": {}}"#).unwrap().tls, Some(TlsConfig::default()));
    assert!(TlsConfig::default().resume);
    assert_eq!(EngineConfig::from_json(r#"{"tls": null}"#).unwrap().tls, None);
    assert!(!EngineConfig::default().to_json().contains("tls"), "a plaintext configuration is written as before");
    assert_eq!(EngineConfig::from_json(&c.to_json()).unwrap(), c);
    assert!(EngineConfig::from_json(r#"{"tls": {"verify": false}}"#).is_err());
}

/// A client and a server session, handshake done in memory.
fn pair(pki: &Pki, fragment: Option<usize>) -> (ClientConnection, ServerConnection) {
    let ca = pki.ca_file();
    let client = tls::Client::build(&trusting(&ca)).unwrap();
    let mut c = *client.session(&"127.0.0.1:1".parse().unwrap()).unwrap();
    let mut cfg = pki.server_config();
    cfg.max_fragment_size = fragment;
    let mut s = ServerConnection::new(Arc::new(cfg)).unwrap();
    while c.is_handshaking() || s.is_handshaking() {
        let mut buf = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut buf).unwrap();
        }
        s.read_tls(&mut &buf[..]).unwrap();
        s.process_new_packets().unwrap();
        buf.clear();
        while s.wants_write() {
            s.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
            c.process_new_packets().unwrap();
        }
    }
    (c, s)
}

#[test]
fn the_read_helper_rebuilds_replies_from_any_records_and_reads() {
    let pki = Pki::new("tailwise test CA");
    let mut replies = Vec::new();
    for id in 0..40u64 {
        synthetic::encode_reply(id, 0, (id * 37 % 300) as u32, &mut replies);
    }
    for (fragment, step) in [(None, 1), (Some(32), 5), (Some(50), 4096), (Some(1000), 17), (None, 100_000)] {
        let (mut c, mut s) = pair(&pki, fragment);
        // Written in pieces of 33 bytes: records end at other places than replies.
        let mut wire = Vec::new();
        for piece in replies.chunks(33) {
            s.writer().write_all(piece).unwrap();
        }
        s.send_close_notify();
        while s.wants_write() {
            s.write_tls(&mut wire).unwrap();
        }
        let (mut plain, mut closed, mut ids) = (Vec::new(), false, Vec::new());
        let mut codec = Protocol::Synthetic { service_ns: None, reply_pad: 0 }.codec();
        let mut pos = 0;
        for read in wire.chunks(step) {
            assert!(!closed, "nothing after close_notify");
            closed = tls::decrypt(&mut c, read, &mut plain).unwrap();
            while let Parsed::Reply { len, id, .. } = codec.parse(&plain[pos..]) {
                pos += len;
                ids.push(id.unwrap());
            }
        }
        assert!(closed, "close_notify seen");
        assert_eq!(plain, replies, "fragment {fragment:?}, reads of {step}");
        assert_eq!(ids, (0..40).collect::<Vec<_>>());
    }
}

#[test]
fn a_corrupt_record_is_an_error_not_a_reply() {
    let pki = Pki::new("tailwise test CA");
    let (mut c, mut s) = pair(&pki, None);
    s.writer().write_all(b"0123456789").unwrap();
    let mut wire = Vec::new();
    while s.wants_write() {
        s.write_tls(&mut wire).unwrap();
    }
    let last = wire.len() - 1;
    wire[last] ^= 1;
    let mut plain = Vec::new();
    assert!(tls::decrypt(&mut c, &wire, &mut plain).is_err());
    assert!(plain.is_empty());
}
