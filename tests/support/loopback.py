"""What the scripted servers and the proxies on 127.0.0.1 share: a listener that hands each connection on, closing,
and the certificates of the HTTPS fakes."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HOST = "127.0.0.1"


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago: nothing listens there (yet), so connecting is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class Listener:
    """A socket on 127.0.0.1 (a free port) whose accept thread hands each connection to ``on_accept(conn)``."""

    def __init__(self, name: str, on_accept: Callable[[socket.socket], None]):
        self._sock = socket.create_server((HOST, 0))
        self.host, self.port = HOST, self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, args=(on_accept,), name=name, daemon=True)
        self._thread.start()

    def close(self, timeout: float = 5) -> None:
        """Accept no more; returns once the accept thread is done with a connection it was handing on."""
        # close() alone does not wake a thread blocked in accept(); shutdown() does.
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout)

    def _accept_loop(self, on_accept: Callable[[socket.socket], None]) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            on_accept(conn)


def connect_upstream(client: socket.socket, address: tuple[str, int]) -> socket.socket | None:
    """A proxy's blocking connection to ``address`` for the accepted ``client``; None, ``client`` closed, if none."""
    try:
        upstream = socket.create_connection(address, timeout=5)
    except OSError:
        client.close()
        return None
    upstream.settimeout(None)
    return upstream


def close_socket(sock: socket.socket) -> None:
    """Shut down (which wakes a thread blocked on it) and close, whatever state the socket is in."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def tls_files(directory: Path) -> tuple[Path, Path, Path]:
    """A CA made for this run, and a server certificate it signed for 127.0.0.1: (CA, certificate, key).

    A client trusts the server only when told to (``ca_file``: a bundle holding this CA alone), so TLS stays
    verified; a CA separate from the leaf passes strict verification (RFC 5280 profiles) too.
    """
    now = dt.datetime.now(dt.UTC)

    def build(subject, issuer, public_key, signer, *, ca: bool, issuer_key=None):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key or public_key),
                                  critical=False))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
                critical=True)
        else:
            builder = (builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "loopback test CA")])
    ca = build(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
    cert = build(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]), ca_name, key.public_key(),
                 ca_key, ca=False, issuer_key=ca_key.public_key())
    files = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    files[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return files
