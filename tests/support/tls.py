"""Certificates for the tests: self-signed, for localhost, 127.0.0.1 and any other addresses
given, with their keys (PEM)."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from pathlib import Path

import pytest


def self_signed(tmp_path: Path, ips: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    """A certificate for localhost and 127.0.0.1 with its key (PEM): by the cryptography package,
    else openssl; skip when neither is here."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        return _openssl_self_signed(tmp_path, ips)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"), *(
                x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", *ips))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _openssl_self_signed(tmp_path: Path, ips: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("neither the cryptography package nor openssl is here to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost," + ",".join(f"IP:{ip}" for ip in ("127.0.0.1", *ips)),
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert.read_bytes(), key.read_bytes()


def write_pair(where: Path, ips: tuple[str, ...] = (), name: str = "") -> tuple[Path, Path]:
    """A self-signed pair written as ``where/{name}cert.pem`` and ``{name}key.pem`` (the key 0600)."""
    where.mkdir(parents=True, exist_ok=True)
    cert, key = self_signed(where / f"{name}gen" if name else where, ips)
    cert_path, key_path = where / f"{name}cert.pem", where / f"{name}key.pem"
    cert_path.write_bytes(cert)
    key_path.write_bytes(key)
    key_path.chmod(0o600)
    return cert_path, key_path
