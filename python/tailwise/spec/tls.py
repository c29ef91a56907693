"""TLS to the target: which schemes speak it, the --tls-* flags, and the engine configuration's
``tls`` (crates/tailwise-core/src/engine/config.rs).

The protocol stays the scheme's own (``https://`` is http, ``redis+tls://`` is redis): TLS is
the configuration's ``tls`` field, absent for plaintext. Files are named, never read here beyond
checking that they can be: the engine reads them, and config.json records their names only.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailwise.errors import InputError

#: A TLS scheme → its protocol (``https`` is HTTP over TLS, RFC 9110 §4.2.2); any other TCP
#: protocol takes ``+tls``.
HTTPS = "https"
SUFFIX = "+tls"
#: Ports a URL may leave out (RFC 9110 §4.2.2: https's is 443).
DEFAULT_PORTS = {HTTPS: 443}
#: ALPN's protocol id for HTTP/1.1 (RFC 7301 §6, the IANA registry): the engine speaks no other.
ALPN_HTTP = "http/1.1"

#: The flags of TLS to the target, named as the settings (spec/workload.py's DEFAULTS).
FLAGS = {"tls_ca": "--tls-ca", "tls_insecure": "--tls-insecure", "tls_cert": "--tls-cert", "tls_key": "--tls-key",
         "tls_sni": "--tls-sni", "tls_no_resume": "--tls-no-resume"}


#: ``latency.source_note``'s sentence for packet stamps over TLS (--timestamps kernel or nic).
STAMPS_NOTE = ("over TLS the send stamp is the write of the request's last encrypted byte and the receive stamp the "
               "arrival of the segment that completed the reply's record: the request's encryption comes before "
               "that write and is inside the latency, the reply's decryption comes after the receive stamp and is "
               "not (tailwise calibrate's tls row gives both costs on this host)")


def source_note(note: str | None, source: str, tls: bool) -> str | None:
    """``latency.source_note`` with, for packet stamps over TLS, what they stamp."""
    if not tls or source not in ("kernel", "nic"):
        return note
    return f"{note}; {STAMPS_NOTE}" if note else STAMPS_NOTE[0].upper() + STAMPS_NOTE[1:]


def tls_scheme(scheme: str, schemes: tuple[str, ...], datagram: tuple[str, ...]) -> tuple[str, bool] | None:
    """A URL's scheme (lower case) → (its protocol, whether over TLS); None when it names no
    protocol. A datagram protocol with ``+tls`` is refused: TLS needs a stream (DTLS is not spoken)."""
    if scheme == HTTPS:
        return "http", True
    if scheme in schemes:
        return scheme, False
    base = scheme.removesuffix(SUFFIX)
    if base == scheme or base not in schemes:
        return None
    if base in datagram:
        raise InputError(f"{scheme}:// is TLS over a datagram protocol, which tailwise does not speak (no DTLS)",
                         f"use {base}:// in the clear, or a TCP protocol with +tls (e.g. memcached+tls://)")
    if base == "http":
        raise InputError("http+tls:// is written https://", "write https://HOST:PORT/PATH")
    return base, True


def url_scheme(protocol: str, tls: bool) -> str:
    """The scheme a URL writes for a protocol, over TLS or not."""
    if not tls:
        return protocol
    return HTTPS if protocol == "http" else protocol + SUFFIX


def readable(path: str, flag: str) -> str:
    """A file a flag names, checked to exist and be readable: the path as given."""
    p = Path(path)
    if not p.is_file():
        why = "does not exist" if not p.exists() else "is not a file"
        raise InputError(f"{flag} {path}: the file {why}", f"give the path of a PEM file to {flag}")
    if not os.access(p, os.R_OK):
        raise InputError(f"{flag} {path}: the file is not readable by this user", "check its permissions")
    return path


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class TlsSpec:
    """TLS to the target, as the flags asked."""

    #: The CA certificates (PEM) to trust; None: the system's roots.
    ca_file: str | None
    #: No verification of the server's certificate at all (--tls-insecure).
    insecure: bool
    #: A client certificate and its key (PEM), for servers that ask for one.
    cert_file: str | None
    key_file: str | None
    #: The name sent in the ClientHello and verified in the certificate; None: no SNI (an IP target).
    sni: str | None
    alpn: tuple[str, ...]
    #: Reconnects resume the session (TLS 1.3 tickets, TLS 1.2 session ids) unless --tls-no-resume.
    resume: bool

    def engine(self) -> dict[str, Any]:
        """The engine configuration's ``tls``."""
        return {"ca_file": self.ca_file, "insecure": self.insecure, "cert_file": self.cert_file,
                "key_file": self.key_file, "sni": self.sni, "alpn": list(self.alpn), "resume": self.resume}

    @classmethod
    def from_engine(cls, tls: dict[str, Any] | None) -> TlsSpec | None:
        """The inverse of ``engine`` (an agent's side of the wire)."""
        if not tls:
            return None
        return cls(ca_file=tls.get("ca_file"), insecure=bool(tls.get("insecure")), cert_file=tls.get("cert_file"),
                   key_file=tls.get("key_file"), sni=tls.get("sni"), alpn=tuple(tls.get("alpn") or ()),
                   resume=bool(tls.get("resume", True)))


def tls_settings(st: dict[str, Any], targets: tuple, given: set[str] | frozenset[str] = frozenset()) -> TlsSpec | None:
    """The --tls-* settings for these targets (``spec.target.Target``s): a TlsSpec when they speak
    TLS, None in the clear — where a --tls-* flag given is refused in one line."""
    asked = [FLAGS[name] for name in FLAGS if st.get(name) not in (None, False)]
    if not targets or not targets[0].tls:
        where = targets[0].url.split("://")[0] + "://" if targets else "the built-in server"
        if asked:
            fix = (f"use {url_scheme(targets[0].scheme, True)}:// to speak TLS, or drop {asked[0]}" if targets else
                   "start `tailwise serve --tls-cert FILE --tls-key FILE` and give synthetic+tls://HOST:PORT")
            raise InputError(f"{asked[0]} with {where}, which is plaintext", fix)
        return None
    if len({t.tls for t in targets}) > 1:
        raise InputError("targets mix TLS and plaintext", "give every target the same scheme")
    insecure = bool(st.get("tls_insecure"))
    ca = st.get("tls_ca")
    if ca is not None and insecure:
        raise InputError("--tls-ca with --tls-insecure: nothing is verified, so no CA is needed",
                         "drop --tls-insecure to verify the server against --tls-ca, or drop --tls-ca")
    cert, key = st.get("tls_cert"), st.get("tls_key")
    if (cert is None) != (key is None):
        have, lack = ("--tls-cert", "--tls-key") if cert is not None else ("--tls-key", "--tls-cert")
        raise InputError(f"{have} without {lack}", "a client certificate needs both --tls-cert FILE and --tls-key FILE")
    for name in ("tls_ca", "tls_cert", "tls_key"):
        if st.get(name) is not None:
            readable(str(st[name]), FLAGS[name])
    sni = st.get("tls_sni")
    if sni is not None:
        if not sni or is_ip(sni) or any(c in sni for c in " /:@\\") or not sni.isascii():
            raise InputError(f"--tls-sni {sni!r} is not a DNS name (RFC 6066 §3: a host name, not an address)",
                             "give the name the server's certificate is for, e.g. --tls-sni www.example.com")
    else:
        host = targets[0].host
        sni = None if is_ip(host) else host
    return TlsSpec(ca_file=None if ca is None else str(ca), insecure=insecure,
                   cert_file=None if cert is None else str(cert), key_file=None if key is None else str(key),
                   sni=sni, alpn=(ALPN_HTTP,) if targets[0].scheme == "http" else (),
                   resume=not st.get("tls_no_resume"))
