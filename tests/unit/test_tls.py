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


# --- a daemon's certificate must be able to serve its port ----------------------------------

def _serving(tmp_path, issued, host, **extra):
    conf = {**issued.conf(), **extra}
    return tls.serving_problem(conf, host)


def test_a_host_certificate_from_make_certs_serves_its_address_and_calls_nimbus(tmp_path,
                                                                               capsys):
    """`make-certs.sh --supervisor NAME@ADDR` gives that host a certificate its /metrics and
    logviewer can serve HTTPS with (the README's host B had a client-only one, so Prometheus
    failed with "unsuitable certificate purpose"); a bare NAME still only calls."""
    from cryptography import x509
    from squall.deploy import certs

    assert certs.main([str(tmp_path), "--nimbus", "10.0.0.1",
                       "--supervisor", "supervisor@10.0.0.2,hostb.example",
                       "--supervisor", "supervisor@10.0.0.3", "--supervisor", "caller",
                       "--user", "alice"]) == 0
    out = capsys.readouterr().out
    assert "ca.key" in out and "off the daemons' hosts" in out
    b = certs.Issued(str(tmp_path / "supervisor-10.0.0.2.pem"),
                     str(tmp_path / "supervisor-10.0.0.2.key"), str(tmp_path / "ca.pem"))
    c = certs.Issued(str(tmp_path / "supervisor-10.0.0.3.pem"),
                     str(tmp_path / "supervisor-10.0.0.3.key"), str(tmp_path / "ca.pem"))
    assert _serving(tmp_path, b, "10.0.0.2") is None
    assert _serving(tmp_path, b, "127.0.0.1") is None      # its own loopback too
    assert _serving(tmp_path, b, "hostb.example") is None
    assert _serving(tmp_path, c, "10.0.0.3") is None
    # Both hosts' certificates name the same principal, the one nimbus.supervisor.users lists.
    with open(b.cert, "rb") as fb, open(c.cert, "rb") as fc:
        assert tls.principal_of_pem(fb.read()) == tls.principal_of_pem(fc.read()) == \
            tls.Principal("supervisor")
    with open(b.cert, "rb") as fh:
        ku = x509.load_pem_x509_certificate(fh.read()).extensions.get_extension_for_class(
            x509.KeyUsage)
    assert ku.critical and ku.value.digital_signature
    caller = certs.Issued(str(tmp_path / "caller.pem"), str(tmp_path / "caller.key"),
                          str(tmp_path / "ca.pem"))
    reason, certain = _serving(tmp_path, caller, "10.0.0.4")
    assert certain and "client-only" in reason and "serverAuth" in reason


def test_a_daemon_refuses_to_serve_with_a_certificate_that_cannot(tmp_path):
    """One line naming the certificate, the port and why, and how to make a right one."""
    ca = CertificateAuthority(str(tmp_path / "pki"))
    user = ca.issue("alice")
    with pytest.raises(ConfigError) as e:
        tls.check_serving(user.conf(), "10.0.0.2", 8000, "logviewer")
    msg = str(e.value)
    assert "\n" not in msg and user.cert in msg and "10.0.0.2:8000" in msg
    assert "client-only" in msg and "make-certs.sh" in msg and "--supervisor NAME@ADDRESS" in msg
    # Signed by another CA than the one the host trusts.
    other = CertificateAuthority(str(tmp_path / "other")).issue("x", hosts=["10.0.0.2"],
                                                                server=True)
    conf = {**other.conf(), cfg.SQUALL_TLS_CA_FILE: ca.cert_path}
    with pytest.raises(ConfigError, match="not signed by a CA in"):
        tls.check_serving(conf, "10.0.0.2", 8000, "logviewer")
    # A bundle of two CAs (one being rotated in) serves a certificate of either.
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes((tmp_path / "pki" / "ca.pem").read_bytes() +
                       (tmp_path / "other" / "ca.pem").read_bytes())
    tls.check_serving({**other.conf(), cfg.SQUALL_TLS_CA_FILE: str(bundle)}, "10.0.0.2", 8000,
                      "logviewer")
    # A key that is not the certificate's.
    good = ca.issue("supervisor", hosts=["10.0.0.2"], server=True, file_stem="b")
    conf = {**good.conf(), cfg.SQUALL_TLS_KEY_FILE: user.key}
    with pytest.raises(ConfigError, match="is not the certificate's"):
        tls.check_serving(conf, "10.0.0.2", 8000, "logviewer")
    # An address the certificate does not name (it names no host name either: certain).
    with pytest.raises(ConfigError, match="it names localhost, 10.0.0.2, 127.0.0.1, not 10.0.0.9"):
        tls.check_serving(good.conf(), "10.0.0.9", 8000, "logviewer")
    # On every address, the host's own name (storm.local.hostname) is what clients dial.
    with pytest.raises(ConfigError, match="not 10.0.0.9"):
        tls.check_serving({**good.conf(), cfg.STORM_LOCAL_HOSTNAME: "10.0.0.9"}, "0.0.0.0",
                          8000, "logviewer")
    tls.check_serving({**good.conf(), cfg.STORM_LOCAL_HOSTNAME: "10.0.0.2"}, "0.0.0.0", 8000,
                      "logviewer")
    tls.check_serving(good.conf(), "0.0.0.0", 8000, "logviewer")  # nothing to check against


def test_an_address_a_host_name_in_the_certificate_may_resolve_to_is_only_a_warning(tmp_path,
                                                                                    caplog):
    ca = CertificateAuthority(str(tmp_path))
    named = ca.issue("nimbus", hosts=["nimbus1.example"], server=True)
    with caplog.at_level("WARNING", logger="squall.tls"):
        tls.check_serving(named.conf(), "10.0.0.5", 6627, "Nimbus")
    assert "unless a name in it resolves there" in caplog.text
    assert "nimbus1.example" in caplog.text


def test_an_expired_certificate_is_refused(tmp_path):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca = CertificateAuthority(str(tmp_path))
    with open(tmp_path / "ca.key", "rb") as fh:
        ca_key = serialization.load_pem_private_key(fh.read(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "old")]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "squall-ca")]))
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(past).not_valid_after(past + datetime.timedelta(days=1))
            .sign(ca_key, hashes.SHA256()))
    (tmp_path / "old.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "old.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    conf = {cfg.SQUALL_TLS_CA_FILE: ca.cert_path, cfg.SQUALL_TLS_CERT_FILE: str(tmp_path / "old.pem"),
            cfg.SQUALL_TLS_KEY_FILE: str(tmp_path / "old.key")}
    with pytest.raises(ConfigError, match="valid from 2020-01-01 to 2020-01-02 only"):
        tls.check_serving(conf, "127.0.0.1", 1, "ui")
