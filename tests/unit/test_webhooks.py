"""A server's webhook host policy: which addresses are refused and why, what
``actions.webhook.allowed_hosts`` accepts, and that an allowed host is really called (a real
HTTP server on 127.0.0.1)."""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakectl.core.workflow import hooks
from lakectl.core.workflow.actions import Hook
from lakectl.core.workflow.webhooks import HostPolicy, kind_of
from lakectl.errors import InvalidArgument
from server.config import load_settings

STRICT = HostPolicy.parse([])


def call(url: str, policy: HostPolicy | None) -> hooks.Outcome:
    hook = Hook("h", "webhook", properties={"url": url, "timeout": "5s"})
    return hooks.run(hook, {"event_type": "pre-commit"}, False, {}, policy)


@pytest.mark.parametrize(
    ("url", "refusal"),
    [
        ("http://127.0.0.2:8080/", "loopback address 127.0.0.2"),
        ("http://[::1]/", "loopback address ::1"),
        ("http://0.0.0.0/", "unspecified address 0.0.0.0"),
        ("http://[::]/", "unspecified address ::"),
        ("http://169.254.169.254/latest/meta-data/", "link-local address 169.254.169.254"),
        ("http://[fe80::1]/", "link-local address fe80::1"),
        ("http://10.1.2.3/", "private address 10.1.2.3"),
        ("http://172.16.0.1/", "private address 172.16.0.1"),
        ("http://192.168.1.1/", "private address 192.168.1.1"),
        ("http://[fd12::1]/", "private address fd12::1"),
        ("http://224.0.0.1/", "multicast address 224.0.0.1"),
        ("http://[ff02::1]/", "multicast address ff02::1"),
        ("http://100.64.0.1/", "non-public address 100.64.0.1"),
        ("http://[::ffff:10.0.0.1]/", "private address ::ffff:10.0.0.1"),
        ("http://[::ffff:169.254.169.254]/", "link-local address ::ffff:169.254.169.254"),
        ("http://[2002:7f00:1::]/", "loopback address 2002:7f00:1::"),  # 6to4 of 127.0.0.1
        ("http://[64:ff9b::a9fe:a9fe]/", "link-local address 64:ff9b::a9fe:a9fe"),  # NAT64
        ("http://0x7f.1/", "loopback address 127.0.0.1 (0x7f.1)"),
    ],
)
def test_a_server_refuses_addresses_that_are_not_public(url: str, refusal: str) -> None:
    outcome = call(url, STRICT)
    assert not outcome.passed
    assert f"Request refused: {refusal}: this server sends webhooks only" in outcome.output.decode()


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://127.0.0.1/"])
def test_only_http_urls_are_called_by_any_lake(url: str) -> None:
    for policy in (STRICT, None):
        outcome = call(url, policy)
        assert not outcome.passed and b"webhooks are http or https URLs" in outcome.output


@given(st.ip_addresses(v=4))
def test_an_ipv6_form_of_an_ipv4_address_is_judged_as_that_address(v4: ipaddress.IPv4Address) -> None:
    mapped = ipaddress.IPv6Address(f"::ffff:{v4}")
    sixtofour = ipaddress.IPv6Address((0x2002 << 112) | (int(v4) << 80))
    nat64 = ipaddress.IPv6Address(f"64:ff9b::{v4}")
    assert kind_of(mapped) == kind_of(sixtofour) == kind_of(nat64) == kind_of(v4)


def test_public_addresses_pass() -> None:
    for text in ("93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"):
        assert kind_of(ipaddress.ip_address(text)) is None, text


@pytest.fixture
def receiver() -> Iterator[tuple[int, list[str]]]:
    """A real HTTP server on 127.0.0.1: its port, and the paths it was sent."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("allowed", "host", "passes"),
    [
        (["127.0.0.1"], "127.0.0.1", True),
        (["127.0.0.0/8"], "127.0.0.1", True),
        (["127.0.0.0/8"], "localhost", True),  # the address it resolves to is in the network
        (["LocalHost."], "localhost", True),  # names match whole, case-insensitively
        (["10.0.0.0/8", "::1"], "127.0.0.1", False),
        (["127.0.0.2"], "127.0.0.1", False),
        (["localhost"], "127.0.0.1", False),  # a name allows that name, not its address
        (["sub.localhost"], "localhost", False),
    ],
)
def test_allowed_hosts(receiver: tuple[int, list[str]], allowed: list[str], host: str, passes: bool) -> None:
    port, seen = receiver
    outcome = call(f"http://{host}:{port}/hook", HostPolicy.parse(allowed))
    assert outcome.passed is passes, outcome.output
    assert seen == (["/hook"] if passes else [])
    if not passes:
        assert b"Request refused: loopback address 127.0.0.1" in outcome.output


def test_allowed_hosts_in_the_configuration(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text("actions:\n  webhook:\n    allowed_hosts: [hooks.internal, 10.0.0.0/8, 'fd00::/8']\n")
    from_file = load_settings(str(config), str(tmp_path), environ={}).actions.webhook_hosts
    env = {"LAKECTL_SERVER_ACTIONS_WEBHOOK_ALLOWED_HOSTS": "hooks.internal, 10.0.0.0/8 fd00::/8"}
    from_env = load_settings(None, str(tmp_path), environ=env).actions.webhook_hosts
    lakefs_env = {"LAKEFS_ACTIONS_WEBHOOK_ALLOWED_HOSTS": "hooks.internal,10.0.0.0/8,fd00::/8"}
    from_lakefs_env = load_settings(None, str(tmp_path), environ=lakefs_env).actions.webhook_hosts
    assert from_file == from_env == from_lakefs_env
    assert from_file.names == {"hooks.internal"}
    assert [str(n) for n in from_file.networks] == ["10.0.0.0/8", "fd00::/8"]
    assert load_settings(None, str(tmp_path), environ={}).actions.webhook_hosts == STRICT


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("10.0.0.1/8", "has host bits set"),
        ("300.1.2.3", "is no IP address or network"),
        ("fd00::/200", "is no IP address or network"),
        ("http://hooks.internal", "is no host name, IP address or network"),
        ("-bad-.example", "is no host name, IP address or network"),
    ],
)
def test_a_bad_allowed_host_is_refused_naming_the_key(tmp_path: Path, value: str, needle: str) -> None:
    env = {"LAKECTL_SERVER_ACTIONS_WEBHOOK_ALLOWED_HOSTS": value}
    with pytest.raises(InvalidArgument, match=needle) as refused:
        load_settings(None, str(tmp_path), environ=env)
    assert refused.value.message.startswith("actions.webhook.allowed_hosts: ")


def test_allowed_hosts_is_a_list_in_the_file(tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text("actions:\n  webhook:\n    allowed_hosts: 10.0.0.0/8\n")
    with pytest.raises(InvalidArgument, match="allowed_hosts must be a list of names"):
        load_settings(str(config), str(tmp_path), environ={})


def _certificates(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate it signed for the name ``localhost`` only: (CA, cert, key) files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def make(subject: str, issuer: x509.Name | None, signer: Any, ca: bool) -> tuple[Any, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(issuer or name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), False)
        return key, builder.sign(signer or key, hashes.SHA256())

    ca_key, ca = make("test CA", None, None, True)
    key, cert = make("localhost", ca.subject, ca_key, False)
    paths = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


def test_https_checks_the_urls_host_while_connecting_to_the_checked_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call goes to the address the policy checked, and TLS still verifies the certificate
    against the URL's host (sent as SNI): a certificate for ``localhost`` passes as
    ``https://localhost``, and fails as ``https://127.0.0.1``."""
    import ssl

    ca, cert, key = _certificates(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    server_names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: server_names.append(name)  # type: ignore[func-returns-value]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", "6")
            self.end_headers()
            self.wfile.write(b"secure")

        def log_message(self, *args: Any) -> None:
            pass

    class TLSServer(ThreadingHTTPServer):
        def get_request(self) -> Any:
            sock, address = super().get_request()
            return context.wrap_socket(sock, server_side=True), address

    server = TLSServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tls_port = server.server_address[1]
    try:
        policy = HostPolicy.parse(["127.0.0.1"])
        good = call(f"https://localhost:{tls_port}/", policy)
        assert good.passed, good.output
        assert good.output.endswith(b"200 OK\nsecure") and server_names == ["localhost"]
        bad = call(f"https://127.0.0.1:{tls_port}/", policy)
        assert not bad.passed and b"CERTIFICATE_VERIFY_FAILED" in bad.output
    finally:
        server.shutdown()
        server.server_close()


def test_an_embedded_lake_calls_through_its_proxy_and_a_server_never_does(
    receiver: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver plays the proxy of ``http_proxy``: an embedded lake's webhook reaches a host
    only the proxy knows through it, as urllib did; a server ignores the proxy (it would connect
    to addresses the server never checked) and refuses a loopback address still."""
    port, seen = receiver
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    outcome = call("http://hooks.example.invalid/gate?x=1", None)
    assert outcome.passed, outcome.output
    assert seen == ["http://hooks.example.invalid/gate?x=1"]
    refused = call(f"http://127.0.0.1:{port}/inner", STRICT)
    assert not refused.passed
    assert "loopback address 127.0.0.1" in refused.output.decode()
    assert seen == ["http://hooks.example.invalid/gate?x=1"]
    monkeypatch.setenv("no_proxy", "hooks.example.invalid")
    bypassed = call("http://hooks.example.invalid/gate", None)
    assert not bypassed.passed and "cannot resolve hooks.example.invalid" in bypassed.output.decode()
