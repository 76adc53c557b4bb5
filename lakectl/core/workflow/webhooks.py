"""Sending one webhook: a POST over http(s) to an address checked against the host policy of a
server (none embedded), connected to the very address checked, within one deadline for the whole
call, redirects not followed, and at most :data:`MAX_ANSWER` bytes of the answer read.

A server's webhooks go only to public addresses, and to the hosts its operator allows
(``actions.webhook.allowed_hosts``): an action file is written by anyone who may write to a
branch, and a hook's output is read by anyone who may read the repository, so a webhook to
``http://127.0.0.1:…`` or ``http://169.254.169.254/`` would hand them the server's own network.
The host is resolved once and the connection made to the address that passed the check, so a
DNS answer changed in between (rebinding) reaches nothing new."""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    import http.client

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_ANSWER = 1 << 20
"""Bytes of an answer's body read and kept: the start of it; the rest is never read."""
ALLOWED_HOSTS_KEY = "actions.webhook.allowed_hosts"

_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*")
_IP_LIKE = re.compile(r"([0-9.]+|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*)(/.*)?")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_V4_COMPATIBLE = ipaddress.IPv6Network("::/96")


class Refused(Exception):
    """The call was not made: its URL or its host's address is refused; the message says why."""


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Where a server's webhooks may go: public addresses, and the hosts its operator allows.

    An allowed entry is a host name (matched whole and case-insensitively against the URL's host:
    every address it resolves to is then allowed), an IP address, or a network in CIDR notation
    (``10.0.0.0/8``, ``fd00::/8``): an address in one is allowed whatever name led to it."""

    names: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> HostPolicy:
        """The policy allowing ``entries``; :class:`InvalidArgument` names a bad one."""
        names: set[str] = set()
        networks: list[Network] = []
        for entry in entries:
            text = entry.strip()
            try:
                networks.append(ipaddress.ip_network(text))
                continue
            except ValueError as e:
                if _IP_LIKE.fullmatch(text):
                    raise InvalidArgument(f"{text!r} is no IP address or network: {e}", entry=text) from None
            if not _NAME.fullmatch(text.rstrip(".")):
                raise InvalidArgument(
                    f"{text!r} is no host name, IP address or network (CIDR, e.g. 10.0.0.0/8)", entry=text
                )
            names.add(text.rstrip(".").lower())
        return cls(frozenset(names), tuple(networks))

    def refusal(self, host: str, address: Address) -> str | None:
        """Why ``address`` (``host`` resolved) may not be called, or None when it may."""
        if host.rstrip(".").lower() in self.names:
            return None
        if any(address.version == n.version and address in n for n in self.networks):
            return None
        kind = kind_of(address)
        if kind is None:
            return None
        shown = host if _same(host, address) else f"{address} ({host})"
        return (
            f"Request refused: {kind} address {shown}: this server sends webhooks only to public "
            f"addresses and to the hosts in {ALLOWED_HOSTS_KEY}"
        )


def _same(host: str, address: Address) -> bool:
    """Whether ``host`` is ``address`` written out (``::ffff:10.0.0.1`` is ``::ffff:a00:1``)."""
    try:
        return ipaddress.ip_address(host) == address
    except ValueError:
        return False


def kind_of(address: Address) -> str | None:
    """What makes ``address`` not public (``loopback``, ``private``, ...), or None: public. An
    IPv6 address carrying an IPv4 one (mapped, compatible, 6to4, NAT64) is judged by the latter."""
    if isinstance(address, ipaddress.IPv6Address):
        address = address.ipv4_mapped or address.sixtofour or _embedded(address) or address
    for kind, test in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("non-public", not address.is_global),
    ):
        if test:
            return kind
    return None


def _embedded(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address in _NAT64 or (address in _V4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def post(
    url: str, headers: Mapping[str, str], body: bytes, timeout: float, policy: HostPolicy | None
) -> tuple[int, str, bytes, str]:
    """POST ``body`` to ``url`` within ``timeout`` seconds in all (resolving, connecting, sending
    and reading the answer), calling only addresses ``policy`` allows (None: any). Answers the
    status, reason, the start of the body (at most :data:`MAX_ANSWER` bytes) and a note (the body
    was cut; a redirect, not followed). Raises :class:`Refused`, or ``OSError`` when the call
    fails (``TimeoutError`` past the deadline)."""
    import http.client  # here: http.client and ssl cost a commit 12 ms, and most have no webhook

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        what = f"a {scheme!r} URL" if scheme else "a URL without a scheme"
        raise Refused(f"Request refused: {what}: webhooks are http or https URLs")
    host = parts.hostname
    if not host:
        raise Refused(f"Request refused: {url!r} names no host")
    port = parts.port or (443 if scheme == "https" else 80)
    deadline = time.monotonic() + timeout
    # A server connects to the address it checked, never through a proxy (which would connect
    # anywhere); an embedded lake goes through the proxy its environment names, as urllib would.
    proxy = _proxy(scheme, host) if policy is None else None
    via_host, via_port = (proxy[0], proxy[1]) if proxy else (host, port)
    addresses = _resolve(via_host, via_port, policy)
    send = dict(headers)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn: http.client.HTTPConnection
    if scheme == "https":
        import ssl

        conn = http.client.HTTPSConnection(
            via_host, via_port, timeout=timeout, context=ssl.create_default_context()
        )
        if proxy:
            conn.set_tunnel(host, port, headers=proxy[2])
    else:
        conn = http.client.HTTPConnection(via_host, via_port, timeout=timeout)
        if proxy:
            path = url.split("#", 1)[0]  # a proxy is sent the absolute URL
            send.update(proxy[2])
    watchdog = _Watchdog(conn, deadline)
    conn._create_connection = lambda *_: _connect(addresses, watchdog)  # type: ignore[attr-defined]
    try:
        conn.request("POST", path, body, send)
        answer = conn.getresponse()
        data = answer.read(MAX_ANSWER + 1)
        status, reason = answer.status, answer.reason
        location = answer.getheader("Location")
    except OSError as e:
        if watchdog.fired:
            raise TimeoutError(f"timed out after {timeout:g}s") from e
        raise
    except http.client.HTTPException as e:  # a malformed answer, or one cut by the watchdog
        if watchdog.fired:
            raise TimeoutError(f"timed out after {timeout:g}s") from e
        raise OSError(f"bad answer: {type(e).__name__} {e}".strip()) from e
    finally:
        watchdog.cancel()
        conn.close()
    if watchdog.fired:
        raise TimeoutError(f"timed out after {timeout:g}s")
    note = ""
    if len(data) > MAX_ANSWER:
        data = data[:MAX_ANSWER]
        note = f"answer cut at its first {MAX_ANSWER} bytes"
    if 300 <= status < 400:
        note = f"redirect to {location or '(no Location)'} not followed" + (f"; {note}" if note else "")
    return status, reason, data, note


def _proxy(scheme: str, host: str) -> tuple[str, int, dict[str, str]] | None:
    """The proxy the environment names for ``scheme`` (``http_proxy``, ``https_proxy``, ``no_proxy``
    as urllib reads them) and the headers it is sent (its credentials), or None: connect directly."""
    import urllib.request

    named = urllib.request.getproxies().get(scheme)
    if not named or urllib.request.proxy_bypass(host):
        return None
    proxy = urlsplit(named if "://" in named else f"http://{named}")
    if not proxy.hostname:
        return None
    sent: dict[str, str] = {}
    if proxy.username is not None:
        import base64
        from urllib.parse import unquote

        pair = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}".encode()
        sent["Proxy-Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return proxy.hostname, proxy.port or 80, sent


def _resolve(host: str, port: int, policy: HostPolicy | None) -> list[tuple[Any, ...]]:
    """``host``'s addresses (``getaddrinfo`` rows) that ``policy`` allows: none allowed refuses
    the call, saying why the first was refused."""
    try:
        rows = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise OSError(f"cannot resolve {host}: {e.strerror}") from e
    if policy is None:
        return rows
    allowed, refusals = [], []
    for row in rows:
        why = policy.refusal(host, ipaddress.ip_address(str(row[4][0]).split("%", 1)[0]))
        if why is None:
            allowed.append(row)
        else:
            refusals.append(why)
    if not allowed:
        raise Refused(refusals[0])
    return allowed


def _connect(rows: list[tuple[Any, ...]], watchdog: _Watchdog) -> socket.socket:
    """A connection to the first of ``rows`` (checked addresses) that answers in time."""
    error: OSError = TimeoutError("timed out")
    for family, kind, proto, _, address in rows:
        left = watchdog.deadline - time.monotonic()
        if left <= 0 or watchdog.fired:
            break
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(left)
            watchdog.raw = sock
            sock.connect(address)
            return sock
        except OSError as e:
            sock.close()
            error = e
    raise error


class _Watchdog:
    """Shuts the connection's socket down at the deadline: a socket's timeout bounds each read,
    and an answer dripping a byte at a time would hold the call for ever."""

    def __init__(self, conn: http.client.HTTPConnection, deadline: float) -> None:
        self.fired = False
        self.deadline = deadline
        self.raw: socket.socket | None = None
        """The socket being connected (TLS then wraps it into ``conn.sock``)."""
        self._conn = conn
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        for sock in (self._conn.sock, self.raw):
            if sock is not None:  # the plain socket's shutdown, also under TLS: a read wakes with EOF
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()
