"""Certificates of one test-bed run, made with the openssl CLI (EC P-256 keys: fast to make):
a CA, the apiserver's serving certificate (SAN IP:127.0.0.1), the service-account key pair, and
client certificates whose subject carries the user (CN) and groups (O)."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CertPair", "Pki", "make_pki"]

DAYS = "7"


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


def _openssl(openssl: Path, *args: str) -> None:
    done = subprocess.run([str(openssl), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr}")


def _key(openssl: Path, path: Path) -> Path:
    _openssl(openssl, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", str(path))
    path.chmod(0o600)
    return path


def _subject(cn: str, groups: Sequence[str]) -> str:
    for part in (cn, *groups):
        if "/" in part or "=" in part:
            raise ValueError(f"certificate subject part {part!r} must not contain '/' or '='")
    return "".join(f"/O={g}" for g in groups) + f"/CN={cn}"


@dataclass(frozen=True)
class Pki:
    folder: Path
    openssl: Path
    ca: CertPair
    serving: CertPair
    sa_private: Path
    sa_public: Path

    def issue(self, name: str, cn: str, groups: Sequence[str] = (), *,
              server_sans: Sequence[str] = ()) -> CertPair:
        """A certificate signed by the CA: a client one for user `cn` in `groups`, or a serving
        one when `server_sans` (openssl SAN entries like "IP:127.0.0.1") are given."""
        key = _key(self.openssl, self.folder / f"{name}.key")
        csr, ext, crt = (self.folder / f"{name}.{s}" for s in ("csr", "ext", "crt"))
        _openssl(self.openssl, "req", "-new", "-key", str(key), "-subj", _subject(cn, groups),
                 "-out", str(csr))
        usage = "serverAuth" if server_sans else "clientAuth"
        lines = ["basicConstraints=critical,CA:FALSE",
                 "keyUsage=critical,digitalSignature,keyEncipherment",
                 f"extendedKeyUsage={usage}"]
        if server_sans:
            lines.append("subjectAltName=" + ",".join(server_sans))
        ext.write_text("\n".join(lines) + "\n")
        _openssl(self.openssl, "x509", "-req", "-in", str(csr), "-CA", str(self.ca.cert),
                 "-CAkey", str(self.ca.key), "-set_serial", str(secrets.randbits(63)),
                 "-days", DAYS, "-extfile", str(ext), "-out", str(crt))
        csr.unlink()
        ext.unlink()
        return CertPair(crt, key)


def make_pki(folder: Path, openssl: Path) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    ca = CertPair(folder / "ca.crt", _key(openssl, folder / "ca.key"))
    _openssl(openssl, "req", "-x509", "-new", "-key", str(ca.key), "-subj",
             "/CN=gpuwarden-testbed-ca", "-days", DAYS, "-out", str(ca.cert),
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")
    sa_private = _key(openssl, folder / "sa.key")
    sa_public = folder / "sa.pub"
    _openssl(openssl, "pkey", "-in", str(sa_private), "-pubout", "-out", str(sa_public))
    partial = Pki(folder, openssl, ca, ca, sa_private, sa_public)
    serving = partial.issue("apiserver", "kube-apiserver", server_sans=(
        "IP:127.0.0.1", "IP:10.0.0.1", "DNS:localhost", "DNS:kubernetes",
        "DNS:kubernetes.default", "DNS:kubernetes.default.svc"))
    return Pki(folder, openssl, ca, serving, sa_private, sa_public)
