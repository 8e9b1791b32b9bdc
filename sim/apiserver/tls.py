"""A throwaway self-signed TLS identity for the embedded API server.

client-go (kubectl) never sends a bearer token over plain HTTP, so a token-protected server must
speak TLS: each server start mints an ECDSA P-256 certificate for 127.0.0.1/localhost, valid for a
day, whose PEM goes into the kubeconfig as ``certificate-authority-data``. ``cryptography`` is
already installed as a dependency of kfp.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsIdentity:
    cert_pem: bytes
    key_pem: bytes

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        # load_cert_chain only reads files: write them to a private directory and remove them at once
        with tempfile.TemporaryDirectory(prefix="lwsflow-tls-") as d:
            cert, key = Path(d) / "tls.crt", Path(d) / "tls.key"
            cert.write_bytes(self.cert_pem)
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(self.key_pem)
            ctx.load_cert_chain(cert, key)
        return ctx


def self_signed(host: str = "127.0.0.1") -> TlsIdentity:
    """A fresh self-signed certificate (also its own CA) for ``host``, ``127.0.0.1`` and ``localhost``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lwsflow-sim-apiserver")])
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    try:
        if host != "127.0.0.1":
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        sans.append(x509.DNSName(host))
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return TlsIdentity(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
