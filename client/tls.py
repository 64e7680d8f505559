"""Mutual TLS for Nimbus's gRPC service: credentials from conf, principals from certificates.

Every daemon and user holds a certificate signed by the cluster's CA
(``deploy/make-certs.sh``). Nimbus requires one from every caller
(``require_client_auth``), so the TLS handshake itself authenticates: the certificate's
common name (CN) is the principal, its organizational units (OU) the principal's groups
(``topology.groups``, ``nimbus.admins.groups``). Why certificates rather than tokens is in
SECURITY.md.

The three files come from ``squall.tls.ca.file``, ``squall.tls.cert.file`` and
``squall.tls.key.file``; all three or none.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
from dataclasses import dataclass
from typing import Any, Mapping

import grpc
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from . import config as cfg
from .errors import ConfigError

log = logging.getLogger("squall.tls")

_KEYS = (cfg.SQUALL_TLS_CA_FILE, cfg.SQUALL_TLS_CERT_FILE, cfg.SQUALL_TLS_KEY_FILE)


@dataclass(frozen=True)
class Principal:
    """Who called: the certificate's CN and OUs."""

    name: str
    groups: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return self.name


def loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts; ``0.0.0.0`` does not)."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse_plaintext(conf: Mapping[str, Any], host: str, port: int, who: str, bind_key: str,
                     insecure: bool) -> bool:
    """Whether a gRPC daemon listens with mutual TLS; raises OSError naming what to set when
    it would listen in the clear on a non-loopback address without ``insecure`` (every
    daemon port is authenticated: Nimbus's and DRPC's rule)."""
    secure = enabled(conf)
    if not secure and not insecure and not loopback(host):
        raise OSError(f"{who} will not listen on {host}:{port} without authentication: set "
                      f"{cfg.SQUALL_TLS_CA_FILE}, {cfg.SQUALL_TLS_CERT_FILE} and "
                      f"{cfg.SQUALL_TLS_KEY_FILE} (deploy/make-certs.sh makes them), bind "
                      f"{bind_key} to 127.0.0.1, or start it with --insecure")
    return secure


def enabled(conf: Mapping[str, Any]) -> bool:
    """Whether ``conf`` configures TLS; a partial configuration is a ConfigError."""
    given = [k for k in _KEYS if conf.get(k)]
    if given and len(given) != len(_KEYS):
        missing = ", ".join(k for k in _KEYS if k not in given)
        raise ConfigError(missing, "TLS needs the CA, the certificate and its key; set "
                                   f"{missing} too (deploy/make-certs.sh makes them)")
    return bool(given)


def _read(conf: Mapping[str, Any]) -> tuple[bytes, bytes, bytes]:
    out = []
    for key in _KEYS:
        try:
            with open(conf[key], "rb") as fh:
                out.append(fh.read())
        except OSError as e:
            raise ConfigError(key, f"cannot read {conf[key]}: {e.strerror}") from None
    return out[0], out[1], out[2]


def channel_credentials(conf: Mapping[str, Any]) -> grpc.ChannelCredentials:
    """What a client (the CLI, a supervisor, another Nimbus) presents and trusts."""
    ca, cert, key = _read(conf)
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                        certificate_chain=cert)


#: Every gRPC port's transport bounds (Nimbus, DRPC): a connection that has not finished its
#: TLS and HTTP/2 handshakes within GRPC_HANDSHAKE_MS is closed, a port holds at most
#: GRPC_MAX_CONNECTIONS at once (more are refused at accept: 20,000 idle connections took
#: Nimbus to its descriptor limit and +900 MiB), and one without a call for GRPC_IDLE_MS is
#: closed (clients reconnect on their next call).
GRPC_HANDSHAKE_MS = 5000
GRPC_MAX_CONNECTIONS = 1000
GRPC_IDLE_MS = 600_000


def server_options() -> list[tuple[str, Any]]:
    """The options every gRPC server of Squall is made with (no SO_REUSEPORT: a second
    daemon on one port must fail, not start silently)."""
    raise_fd_limit()
    return [("grpc.so_reuseport", 0),
            ("grpc.server_handshake_timeout_ms", GRPC_HANDSHAKE_MS),
            ("grpc.max_allowed_incoming_connections", GRPC_MAX_CONNECTIONS),
            ("grpc.max_connection_idle_ms", GRPC_IDLE_MS)]


def raise_fd_limit() -> None:
    """The soft descriptor limit up to the hard one (at most 65,536): the connection bound,
    not the default 1,024, is what stops a flood of connections."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):
        pass  # not permitted here: the OS's limit stands


#: What to run when a host has no certificate that may serve (deploy/make-certs.sh).
_MAKE_ONE = ("make one for this host with `deploy/make-certs.sh DIR --supervisor NAME@ADDRESS` "
             "(or --nimbus ADDRESS)")
_WILDCARD = ("0.0.0.0", "::", "")


def serving_problem(conf: Mapping[str, Any], host: str) -> tuple[str, bool] | None:
    """Why this process's certificate cannot serve TLS on ``host`` (a bind address), or None.
    The bool says whether the problem is certain (the daemon must refuse to start) or only
    likely (a host name in the certificate may still resolve to ``host``: a warning)."""
    ca_pem, cert_pem, key_pem = _read(conf)
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        cas = x509.load_pem_x509_certificates(ca_pem)  # a bundle while a CA is rotated
    except ValueError as e:
        return f"it or the CA file is not PEM certificates ({e})", True
    now = datetime.datetime.now(datetime.timezone.utc)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        return (f"it is valid from {cert.not_valid_before_utc:%Y-%m-%d} to "
                f"{cert.not_valid_after_utc:%Y-%m-%d} only"), True
    if not any(_issued_by(cert, ca) for ca in cas):
        return f"it is not signed by a CA in {conf[cfg.SQUALL_TLS_CA_FILE]}", True
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        if ExtendedKeyUsageOID.SERVER_AUTH not in eku:
            return ("it is a client-only certificate (extended key usage "
                    f"{', '.join(getattr(u, '_name', u.dotted_string) for u in eku)}, "
                    "no serverAuth)"), True
    except x509.ExtensionNotFound:
        pass  # no EKU extension: any use (RFC 5280)
    try:
        ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
        if not ku.digital_signature:
            return "its key usage lacks digitalSignature, which a TLS server needs", True
    except x509.ExtensionNotFound:
        pass
    try:
        key = serialization.load_pem_private_key(key_pem, None)
    except (ValueError, TypeError) as e:
        return f"its key {conf[cfg.SQUALL_TLS_KEY_FILE]} cannot be read ({e})", True
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        return f"its key {conf[cfg.SQUALL_TLS_KEY_FILE]} is not the certificate's", True
    if host in _WILDCARD:
        host = str(conf.get(cfg.STORM_LOCAL_HOSTNAME) or "")
        if not host:
            return None  # clients dial a name we cannot know here
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return f"it names no address or host name (no subjectAltName), not {host}", True
    ips = [str(a) for a in sans.get_values_for_type(x509.IPAddress)]
    names = sans.get_values_for_type(x509.DNSName)
    try:
        ip = str(ipaddress.ip_address(host))
    except ValueError:
        if host.lower() in (n.lower() for n in names):
            return None
        return f"it names {', '.join([*names, *ips])}, not {host}", not names
    if ip in ips:
        return None
    # Clients may dial one of the names, which may resolve to this address: not certain
    # (localhost aside, which never resolves to another host's address).
    return (f"it names {', '.join([*names, *ips])}, not {ip}",
            not any(n.lower() != "localhost" for n in names))


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def check_serving(conf: Mapping[str, Any], host: str, port: int, who: str) -> None:
    """Refuse to serve TLS on ``host:port`` with a certificate that cannot: one line naming
    the certificate and why (a client-only certificate made Prometheus fail with "unsuitable
    certificate purpose" while the daemon started without a word)."""
    problem = serving_problem(conf, host)
    if problem is None:
        return
    reason, certain = problem
    line = (f"{who} cannot serve TLS on {host}:{port} with {conf[cfg.SQUALL_TLS_CERT_FILE]}: "
            f"{reason}")
    if certain:
        raise ConfigError(cfg.SQUALL_TLS_CERT_FILE, f"{line}; {_MAKE_ONE}")
    log.warning("%s: clients that dial %s will refuse it unless a name in it resolves there",
                line, host)


def server_credentials(conf: Mapping[str, Any]) -> grpc.ServerCredentials:
    """Nimbus's side: its certificate, and a client certificate required from every caller."""
    ca, cert, key = _read(conf)
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                       require_client_auth=True)


def principal_of_pem(pem: bytes) -> Principal:
    """The principal a PEM certificate names (CN, OU values as groups)."""
    cert = x509.load_pem_x509_certificate(pem)
    subject = cert.subject
    cns = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not cns:
        raise ValueError("certificate has no common name (CN)")
    ous = subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    return Principal(str(cns[0].value), frozenset(str(o.value) for o in ous))


def own_principal(conf: Mapping[str, Any]) -> Principal | None:
    """The principal this process's own certificate names (None without TLS)."""
    if not enabled(conf):
        return None
    return principal_of_pem(_read(conf)[1])


def principal_of(context: grpc.ServicerContext) -> Principal | None:
    """The caller of one RPC, from its verified client certificate (None on an insecure port)."""
    auth = context.auth_context()
    pem = auth.get("x509_pem_cert")
    if not pem:
        return None
    return principal_of_pem(pem[0])
