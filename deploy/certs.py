"""A cluster's CA and certificates for mutual TLS (``deploy/make-certs.sh`` runs this).

One CA signs every certificate; a certificate's CN is its principal and its OUs the
principal's groups (:mod:`squall.client.tls`). A host's certificate (``--nimbus`` for a
Nimbus host, ``--supervisor NAME@ADDRESS`` for any other) serves every TLS port of that host
(Nimbus's and DRPC's gRPC, the UI, the logviewer, ``/metrics``) for the addresses it names
(subject alternative names, which clients check against the address they dialled) and calls
Nimbus as its principal; a user's certificate only calls. Keys are EC P-256, written with
mode 0600. ``squall local`` and the tests make throwaway ones with :func:`throwaway`.

Usage::

    python -m squall.deploy.certs DIR --nimbus nimbus1.example,10.0.0.5 \\
        --supervisor supervisor@10.0.0.6 --user alice:analysts,ops --user bob
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from dataclasses import dataclass
from typing import Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..client import config as cfg

CA_CN = "squall-ca"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class Issued:
    """Paths of one certificate and its key (and the CA that signed it)."""

    cert: str
    key: str
    ca: str

    def conf(self) -> dict[str, str]:
        """The squall.tls.* keys of a squall.yaml using this certificate."""
        return {cfg.SQUALL_TLS_CA_FILE: self.ca, cfg.SQUALL_TLS_CERT_FILE: self.cert,
                cfg.SQUALL_TLS_KEY_FILE: self.key}


def _write(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _san(hosts: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for h in dict.fromkeys(hosts):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return out


class CertificateAuthority:
    """The cluster's CA in ``directory`` (``ca.pem``, ``ca.key``), made on first use."""

    def __init__(self, directory: str, days: int = 825):
        self.dir = directory
        self.days = days
        os.makedirs(directory, exist_ok=True)
        self.cert_path = os.path.join(directory, "ca.pem")
        key_path = os.path.join(directory, "ca.key")
        if os.path.exists(self.cert_path) and os.path.exists(key_path):
            with open(key_path, "rb") as fh:
                self._key = serialization.load_pem_private_key(fh.read(), None)
            with open(self.cert_path, "rb") as fh:
                self._cert = x509.load_pem_x509_certificate(fh.read())
            return
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_CN)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                      .public_key(self._key.public_key())
                      .serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(minutes=5))
                      .not_valid_after(now + datetime.timedelta(days=days))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                      .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                                   False, False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        _write(key_path, _key_pem(self._key), 0o600)
        _write(self.cert_path, self._cert.public_bytes(serialization.Encoding.PEM), 0o644)

    def issue(self, cn: str, groups: Iterable[str] = (), hosts: Iterable[str] = (),
              file_stem: str | None = None, server: bool = False) -> Issued:
        """Sign a certificate for principal ``cn`` with ``groups`` (OUs). Only a ``server``
        certificate (a host's) may serve TLS, for ``hosts`` and the host's loopback; the
        others (users') only call, so no user can pose as a daemon."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, g) for g in groups]
        now = datetime.datetime.now(datetime.timezone.utc)
        b = (x509.CertificateBuilder().subject_name(x509.Name(attrs))
             .issuer_name(self._cert.subject).public_key(key.public_key())
             .serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=self.days))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             # digitalSignature: an ECDSA key signs the TLS handshake, on either side.
             .add_extension(x509.KeyUsage(True, False, False, False, False, False, False,
                                          False, False), critical=True)
             .add_extension(x509.ExtendedKeyUsage(
                 [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server
                 else [ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if server:
            b = b.add_extension(x509.SubjectAlternativeName(_san([*hosts, *DEFAULT_HOSTS])),
                                critical=False)
        cert = b.sign(self._key, hashes.SHA256())
        stem = os.path.join(self.dir, file_stem or cn)
        _write(stem + ".key", _key_pem(key), 0o600)
        _write(stem + ".pem", cert.public_bytes(serialization.Encoding.PEM), 0o644)
        return Issued(stem + ".pem", stem + ".key", self.cert_path)


def throwaway(directory: str, principal: str, hosts: Iterable[str] = ()) -> Issued:
    """A fresh CA and one certificate for ``principal``: ``squall local``'s credentials."""
    return CertificateAuthority(directory, days=7).issue(principal, hosts=hosts, server=True)


def _user(spec: str) -> tuple[str, list[str]]:
    name, _, groups = spec.partition(":")
    return name, [g for g in groups.split(",") if g]


def _host_cert(spec: str) -> tuple[str, list[str]]:
    """``NAME@HOST[,HOST...]`` -> (principal, hosts); a bare NAME has no hosts."""
    name, _, hosts = spec.partition("@")
    return name, [h for h in hosts.split(",") if h]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m squall.deploy.certs",
                                description="Make a Squall cluster's CA and certificates.")
    p.add_argument("dir", help="where ca.pem/ca.key and the certificates go")
    p.add_argument("--nimbus", action="append", default=[], metavar="HOST[,HOST...]",
                   help="a Nimbus certificate (CN nimbus) valid for these hosts")
    p.add_argument("--supervisor", action="append", default=[], metavar="NAME@HOST[,HOST...]",
                   help="a host's certificate with CN NAME (put NAME in "
                        "nimbus.supervisor.users): it serves that host's HTTPS ports (metrics, "
                        "logviewer, UI) and DRPC for these addresses and calls Nimbus; without "
                        "@HOST it only calls, and cannot serve")
    p.add_argument("--user", action="append", default=[], metavar="NAME[:GROUP,...]",
                   help="a user certificate; groups become OUs")
    a = p.parse_args(argv)
    ca = CertificateAuthority(a.dir)
    made = []
    for i, hosts in enumerate(a.nimbus):
        made.append(ca.issue("nimbus", hosts=hosts.split(","),
                             file_stem="nimbus" if i == 0 else f"nimbus-{i}", server=True))
    for spec in a.supervisor:
        name, hosts = _host_cert(spec)
        # One file per host: several hosts share a principal but not their addresses.
        made.append(ca.issue(name, hosts=hosts, server=bool(hosts),
                             file_stem=f"{name}-{hosts[0]}" if hosts else name))
    for spec in a.user:
        name, groups = _user(spec)
        made.append(ca.issue(name, groups))
    print(f"CA: {ca.cert_path} (move {os.path.join(a.dir, 'ca.key')} off the daemons' hosts; "
          "keep it offline)")
    for m in made:
        print(f"  {m.cert}  key {m.key}")
    print("In each host's squall.yaml:\n"
          f"  {cfg.SQUALL_TLS_CA_FILE}: {ca.cert_path}\n"
          f"  {cfg.SQUALL_TLS_CERT_FILE}: <its .pem>\n  {cfg.SQUALL_TLS_KEY_FILE}: <its .key>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
