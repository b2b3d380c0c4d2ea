"""TLS for the webhook: a serving certificate from files (a mounted Secret, reloaded when the
files change, which is how a rotated Secret reaches the pod) or generated here (a CA and a
serving certificate for the given names; the CA goes into the webhook configuration's
caBundle)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ReloadingTls", "ServingCert", "generate"]


@dataclass(frozen=True)
class ServingCert:
    cert: Path
    key: Path
    ca: Path  # the CA that signed `cert` (PEM), for caBundle


def generate(folder: Path, hosts: Sequence[str], days: int = 365) -> ServingCert:
    """A new CA and a serving certificate for `hosts` (DNS names or IP addresses), written to
    `folder` (ca.crt, tls.crt, tls.key; the key readable by the owner only)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    if not hosts:
        raise ValueError("--tls-hosts: give at least one DNS name or IP address the API "
                         "server uses to reach the webhook "
                         "(e.g. gpuwarden-webhook.kube-system.svc)")
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuwarden-webhook-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    out = ServingCert(folder / "tls.crt", folder / "tls.key", folder / "ca.crt")
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.touch(mode=0o600)
    out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return out


class ReloadingTls:
    """A server SSLContext that loads the certificate again when its files change (checked every
    `period` seconds): new connections get the new certificate, open ones keep theirs."""

    def __init__(self, cert: Path, key: Path, period: float = 10.0) -> None:
        self.cert, self.key, self.period = cert, key, period
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.loads = 0
        self._stamp: tuple[float, float] | None = None
        self._stop = threading.Event()
        self.reload()

    def _mtimes(self) -> tuple[float, float]:
        return self.cert.stat().st_mtime, self.key.stat().st_mtime

    def reload(self) -> bool:
        """Load the files if they changed since the last load; True when it loaded."""
        try:
            stamp = self._mtimes()
        except OSError as err:
            if self._stamp is None:
                raise ValueError(f"TLS certificate {err.filename}: {err.strerror}") from None
            return False  # a Secret update swaps files: keep the current pair meanwhile
        if stamp == self._stamp:
            return False
        try:
            self.context.load_cert_chain(str(self.cert), str(self.key))
        except (ssl.SSLError, OSError) as err:
            if self._stamp is None:
                raise ValueError(f"TLS certificate {self.cert} / key {self.key}: {err}") from None
            return False
        self._stamp = stamp
        self.loads += 1
        return True

    def start(self) -> ReloadingTls:
        def loop() -> None:
            while not self._stop.wait(self.period):
                self.reload()

        threading.Thread(target=loop, name="tls-reload", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
