"""client/tls.py and deploy/certs.py: principals from certificates, config checks, redaction."""

import pytest

from squall.client import config as cfg
from squall.client import tls
from squall.client.errors import ConfigError
from squall.deploy.certs import CertificateAuthority


def test_principal_and_groups_come_from_cn_and_ou(tmp_path):
    issued = CertificateAuthority(str(tmp_path)).issue("alice", ["analysts", "ops"])
    p = tls.own_principal(issued.conf())
    assert p == tls.Principal("alice", frozenset({"analysts", "ops"}))
    assert str(p) == "alice"
    assert (tmp_path / "alice.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "ca.key").stat().st_mode & 0o777 == 0o600


def test_the_ca_is_reused_when_its_directory_has_one(tmp_path):
    first = (tmp_path / "ca.pem").read_bytes() if (tmp_path / "ca.pem").exists() else None
    CertificateAuthority(str(tmp_path)).issue("a")
    ca_pem = (tmp_path / "ca.pem").read_bytes()
    CertificateAuthority(str(tmp_path)).issue("b")
    assert first is None and (tmp_path / "ca.pem").read_bytes() == ca_pem


def test_partial_tls_configuration_names_the_missing_keys(tmp_path):
    issued = CertificateAuthority(str(tmp_path)).issue("alice")
    conf = issued.conf()
    del conf[cfg.SQUALL_TLS_KEY_FILE]
    with pytest.raises(ConfigError, match="squall.tls.key.file"):
        tls.enabled(conf)
    assert tls.enabled({}) is False and tls.own_principal({}) is None
    with pytest.raises(ConfigError, match="cannot read /nonexistent"):
        tls.channel_credentials(dict(issued.conf(), **{cfg.SQUALL_TLS_CA_FILE: "/nonexistent"}))


def test_redaction_of_secret_keys_nested_and_listed():
    conf = {"trident.redis.password": "p", "storm.zookeeper.auth.payload": "u:p",
            "topology.curve.secret.key": "k", "topology.curve.public.key": "pub",
            "my.API_TOKEN": "t", "db": {"credentials": "c", "host": "h"},
            "squall.secret.keys": ["db.url"], "db.url": "postgres://u:pw@h",
            "topology.workers": 2, "unset.password": None,
            "sinks": [{"url": "u", "API_KEY": "k"}, "plain"], "db.passwd": "pw"}
    shown = cfg.redact(conf)
    assert shown == {"trident.redis.password": "<redacted>",
                     "storm.zookeeper.auth.payload": "<redacted>",
                     "topology.curve.secret.key": "<redacted>",
                     "topology.curve.public.key": "pub", "my.API_TOKEN": "<redacted>",
                     "db": {"credentials": "<redacted>", "host": "h"},
                     "squall.secret.keys": ["db.url"], "db.url": "<redacted>",
                     "topology.workers": 2, "unset.password": None,
                     "sinks": [{"url": "u", "API_KEY": "<redacted>"}, "plain"],
                     "db.passwd": "<redacted>"}
    assert cfg.redact({"db.host": "h"}, extra_keys=["db.host"]) == {"db.host": "<redacted>"}


def test_only_a_server_certificate_may_serve_tls(tmp_path):
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID
    ca = CertificateAuthority(str(tmp_path))

    def load(issued):
        with open(issued.cert, "rb") as fh:
            return x509.load_pem_x509_certificate(fh.read())
    nimbus = load(ca.issue("nimbus", hosts=["10.0.0.5"], server=True))
    user = load(ca.issue("alice"))
    eku = x509.ExtendedKeyUsage
    assert ExtendedKeyUsageOID.SERVER_AUTH in nimbus.extensions.get_extension_for_class(eku).value
    sans = nimbus.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "10.0.0.5" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert list(user.extensions.get_extension_for_class(eku).value) == \
        [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        user.extensions.get_extension_for_class(x509.SubjectAlternativeName)
