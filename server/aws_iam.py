"""AWS IAM login: who signed a client's presigned STS ``GetCallerIdentity`` request, asked of STS.

A lakeFS client (the ``lakefs`` Python package's ``from_aws_role``, lakectl, the Hadoop
filesystem) presigns ``POST /?Action=GetCallerIdentity&Version=2011-06-15`` with its AWS
credentials and sends the query's parts as ``identityRequest: {"identity_token": base64(JSON
{method, host, region, action, date, expiration_duration, access_key_id, signature,
signed_headers, version, algorithm, security_token})}``. This module rebuilds that request, sends
it to STS and reads the caller's ARN from the answer: only STS can check the signature, and it
answers for whoever signed. The request goes only to the configured STS endpoint (by default
AWS's STS hosts): otherwise anyone could name a "STS" of their own that vouches for any ARN.

Signed headers other than ``host`` must be sent with the values the client signed; the only one
accepted is lakeFS's ``X-LakeFS-Server-ID`` (the server the request was signed for, against
replaying a request signed for another server), sent as the configured server id, else as the
host name the login request addressed.

The only importer of httpx on the server: its errors become ``StorageError`` here.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import json
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from lakectl.errors import InvalidArgument, StorageError, Unauthenticated

IDENTITY_TOKEN = "identity_token"
ACTION, VERSION, ALGORITHM = "GetCallerIdentity", "2011-06-15", "AWS4-HMAC-SHA256"
SERVER_ID_HEADER = "x-lakefs-server-id"
MAX_AGE_S = 15 * 60
"""How old a signed request may be (lakeFS's default ``get_caller_identity_max_age``)."""
MAX_SKEW_S = 5 * 60
"""How far in the future its date may be (clocks differ)."""
TIMEOUT_S = 10.0
MAX_TOKEN_CHARS = 16384
MAX_ANSWER_BYTES = 64 * 1024

AWS_STS_HOST = re.compile(r"sts(-fips)?(\.[a-z0-9-]+)?\.amazonaws\.com(\.cn)?")
"""AWS's STS hosts: global, regional and FIPS (the default endpoint)."""
_ASSUMED_ROLE = re.compile(r"arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([^/]+)/(.+)")
_FIELDS = {
    "host": re.compile(r"[A-Za-z0-9.-]{1,253}(:\d{1,5})?"),
    "region": re.compile(r"[a-z0-9-]{1,32}"),
    "date": re.compile(r"\d{8}T\d{6}Z"),
    "expiration_duration": re.compile(r"\d{1,6}"),
    "access_key_id": re.compile(r"[A-Z0-9]{16,128}"),
    "signature": re.compile(r"[0-9a-f]{64}"),
}


@dataclass(frozen=True, slots=True)
class IdentityRequest:
    """The parts of a presigned ``GetCallerIdentity`` request, as a lakeFS client sends them."""

    host: str
    region: str
    date: str
    expires: str
    access_key_id: str
    signature: str
    signed_headers: tuple[str, ...]
    security_token: str = ""

    def __repr__(self) -> str:  # the signature and token are credentials for a while
        return f"IdentityRequest(host={self.host!r}, access_key_id={self.access_key_id!r})"

    def query(self) -> str:
        params = [
            ("Action", ACTION),
            ("Version", VERSION),
            ("X-Amz-Algorithm", ALGORITHM),
            ("X-Amz-Credential", f"{self.access_key_id}/{self.date[:8]}/{self.region}/sts/aws4_request"),
            ("X-Amz-Date", self.date),
            ("X-Amz-Expires", self.expires),
            ("X-Amz-SignedHeaders", ";".join(self.signed_headers)),
        ]
        if self.security_token:
            params.append(("X-Amz-Security-Token", self.security_token))
        params.append(("X-Amz-Signature", self.signature))
        return urlencode(params)


def parse_identity_request(raw: Mapping[str, Any]) -> IdentityRequest:
    """The request of ``identityRequest``; ``InvalidArgument`` when it is not one, and
    ``Unauthenticated`` when it asks STS anything but ``GetCallerIdentity``."""
    token = raw.get(IDENTITY_TOKEN)
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
        raise InvalidArgument(f"identityRequest needs {IDENTITY_TOKEN!r}: a presigned STS GetCallerIdentity")
    try:
        info = json.loads(base64.b64decode(token, validate=True))
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"{IDENTITY_TOKEN} is not base64 of a JSON object") from None
    if not isinstance(info, dict):
        raise InvalidArgument(f"{IDENTITY_TOKEN} is not base64 of a JSON object")
    for name, pattern in _FIELDS.items():
        value = info.get(name)
        if not isinstance(value, str) or pattern.fullmatch(value) is None:
            raise InvalidArgument(f"{IDENTITY_TOKEN}: invalid or missing {name!r}")
    signed = info.get("signed_headers")
    if not isinstance(signed, list) or not signed or not all(isinstance(h, str) for h in signed):
        raise InvalidArgument(f"{IDENTITY_TOKEN}: signed_headers is a list of header names")
    security_token = info.get("security_token") or ""
    if not isinstance(security_token, str) or not security_token.isprintable():
        raise InvalidArgument(f"{IDENTITY_TOKEN}: invalid security_token")
    asked = (info.get("method", "POST"), info.get("action"), info.get("version"), info.get("algorithm"))
    if asked != ("POST", ACTION, VERSION, ALGORITHM):
        raise Unauthenticated(
            f"the identity request must be a presigned POST {ACTION} ({VERSION}, {ALGORITHM})"
        )
    return IdentityRequest(
        info["host"].lower(),
        info["region"],
        info["date"],
        info["expiration_duration"],
        info["access_key_id"],
        info["signature"],
        tuple(h.lower() for h in signed),
        security_token,
    )


def principal_ids(arn: str) -> tuple[str, ...]:
    """The external principal ids ``arn`` logs in as, most specific first: itself, and for an
    assumed role's session the role whatever the session (lakeFS's ``.../assumed-role/<role>``,
    and the role's IAM ARN ``arn:aws:iam::<account>:role/<role>``)."""
    m = _ASSUMED_ROLE.fullmatch(arn)
    if m is None:
        return (arn,)
    partition, account, role, _session = m.groups()
    return (
        arn,
        f"arn:{partition}:sts::{account}:assumed-role/{role}",
        f"arn:{partition}:iam::{account}:role/{role}",
    )


class StsLogin:
    """Asks one STS endpoint who signed identity requests."""

    def __init__(
        self,
        endpoint: str | None = None,
        server_id: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``endpoint``: ``http(s)://host[:port]`` of the only STS asked; None: AWS's STS hosts
        (https). ``server_id``: the ``X-LakeFS-Server-ID`` clients must sign; None: any request
        may omit it, and one that signs it is sent the host name it addressed."""
        self.endpoint = urlsplit(endpoint) if endpoint else None
        self.server_id = server_id
        self._transport = transport

    def _url(self, host: str) -> str:
        """Where to send a request signed for ``host``; ``Unauthenticated`` for any other STS."""
        if self.endpoint is None:
            if AWS_STS_HOST.fullmatch(host) is None:
                raise Unauthenticated(f"{host!r} is not an AWS STS host: the identity request is refused")
            return f"https://{host}/"
        # Clients name the host with its port (Go) or without (Python): both are this endpoint.
        if host not in (self.endpoint.netloc.lower(), (self.endpoint.hostname or "").lower()):
            raise Unauthenticated(
                f"{host!r} is not this server's STS endpoint: the identity request is refused"
            )
        return f"{self.endpoint.scheme}://{self.endpoint.netloc}/"

    def _headers(self, request: IdentityRequest, addressed: str) -> dict[str, str]:
        signed = set(request.signed_headers)
        if "host" not in signed or not signed <= {"host", SERVER_ID_HEADER}:
            raise Unauthenticated(
                f"the identity request may sign only the headers host and {SERVER_ID_HEADER}, "
                f"not {sorted(signed - {'host'})}"
            )
        if SERVER_ID_HEADER not in signed:
            if self.server_id is not None:
                raise Unauthenticated(f"the identity request must sign {SERVER_ID_HEADER}: {self.server_id}")
            return {}
        return {SERVER_ID_HEADER: self.server_id if self.server_id is not None else addressed}

    def caller_arn(self, request: IdentityRequest, addressed: str, now: float | None = None) -> str:
        """The ARN of whoever signed ``request``, as STS says; ``Unauthenticated`` when the
        request is for another host, too old, or STS refuses it; ``StorageError`` when STS
        cannot be asked. ``addressed``: the host name the login request was sent to."""
        url = self._url(request.host)
        headers = self._headers(request, addressed)
        try:
            signed_at = calendar.timegm(time.strptime(request.date, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            raise InvalidArgument(f"{IDENTITY_TOKEN}: {request.date!r} is no date") from None
        age = (time.time() if now is None else now) - signed_at
        if age > MAX_AGE_S or age < -MAX_SKEW_S:
            raise Unauthenticated(f"the identity request was signed {int(age)} s ago: sign a fresh one")
        try:
            with httpx.Client(transport=self._transport, timeout=TIMEOUT_S, follow_redirects=False) as http:
                answer = http.post(f"{url}?{request.query()}", headers=headers)
        except httpx.HTTPError as e:
            raise StorageError(f"cannot reach STS at {url}: {e}") from e
        if answer.status_code >= 500:
            raise StorageError(f"STS at {url} answered {answer.status_code}")
        if answer.status_code != 200:
            raise Unauthenticated(
                f"STS refused the identity request ({answer.status_code} {_error_code(answer)})"
            )
        return _arn(answer.content)


def _error_code(answer: httpx.Response) -> str:
    m = re.search(rb"<Code>([A-Za-z0-9.]{1,64})</Code>", answer.content[:MAX_ANSWER_BYTES])
    return m.group(1).decode() if m else "no error code"


def _arn(body: bytes) -> str:
    """The caller's ARN from STS's ``GetCallerIdentityResponse``; ``Unauthenticated`` without one."""
    arn = None
    if len(body) <= MAX_ANSWER_BYTES:
        try:
            root = ET.fromstring(body)
        except ET.ParseError:
            root = None
        if root is not None and root.tag.rpartition("}")[2] == "GetCallerIdentityResponse":
            arn = next((el.text for el in root.iter() if el.tag.rpartition("}")[2] == "Arn"), None)
    if not arn or not arn.startswith("arn:") or not arn.isprintable() or len(arn) > 2048:
        raise Unauthenticated("STS's answer names no caller")
    return arn
