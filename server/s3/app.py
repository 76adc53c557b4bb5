"""The S3 gateway's ASGI app: addressing, authentication and access of each request, then dispatch.

Bucket = repository, key = ``<ref>/<path>``. Requests are addressed path-style
(``/bucket/key``) or virtual-host-style (``bucket.<domain_name>``). Every request is signed
(SigV4 or SigV2, in headers or the query) with the access keys of the REST API, and needs the
role permission its operation names (:func:`server.s3.routes.route`). Errors of every kind are
answered as S3 XML from one table (:mod:`server.s3.xml`); a bug is a logged ``InternalError``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from urllib.parse import parse_qsl, unquote

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from lakectl.core.journal import journal
from lakectl.core.lake import Lake
from lakectl.errors import Forbidden, InvalidArgument, LakectlError
from server.auth.store import Auth
from server.auth.users import User
from server.blocks import BlockBuffers
from server.config import S3GatewaySettings
from server.s3 import sigv4, xml
from server.s3.call import Call
from server.s3.routes import route

log = logging.getLogger("lakectl.server.s3")


def _headers(request: Request) -> dict[str, str]:
    """Lower-case names → values as sent; a repeated header's values joined with ``,`` (as
    signatures canonicalize them)."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in request.scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    return headers


def _query(request: Request) -> dict[str, str]:
    """The query parameters, percent-decoded as UTF-8 (never with replacement characters)."""
    try:
        return dict(parse_qsl(request.url.query, keep_blank_values=True, errors="strict"))
    except UnicodeDecodeError:
        raise InvalidArgument("the query string is not UTF-8 once percent-decoded") from None


def _unread(request: Request, response: Response) -> Response:
    """Close the connection after a refusal that left a body unread. The client may be sending it
    still, or have held it back after ``Expect: 100-continue``. Either way the connection is out
    of step for the next request."""
    has_body = request.headers.get("content-length", "0") != "0" or "transfer-encoding" in request.headers
    if has_body and not getattr(request, "_stream_consumed", False):
        response.headers["Connection"] = "close"
    return response


class Gateway:
    """The ASGI application of the S3 gateway over an open lake."""

    def __init__(
        self, lake: Lake, auth: Auth, settings: S3GatewaySettings, inline_reads: bool, buffers: BlockBuffers
    ) -> None:
        self.lake = lake
        self.auth = auth
        self.settings = settings
        self.inline_reads = inline_reads
        self.buffers = buffers
        suffix = settings.domain_name.lower().strip(".")
        self._host_suffix = "." + suffix if suffix else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan belongs to the REST API app, which owns the lake
        request = Request(scope, receive)
        response = await self.handle(request)
        await response(scope, receive, send)

    def _address(self, request: Request) -> tuple[str, str]:
        """``(bucket, key)`` from the virtual host or the path (percent-decoded)."""
        raw = request.scope.get("raw_path") or request.url.path.encode()
        path = unquote(raw.decode("latin-1").split("?", 1)[0], encoding="utf-8", errors="strict")
        host = request.headers.get("host", "").rsplit(":", 1)[0].lower()
        if self._host_suffix and host.endswith(self._host_suffix) and len(host) > len(self._host_suffix):
            return host[: -len(self._host_suffix)], path[1:]
        bucket, _, key = path[1:].partition("/")
        return bucket, key

    async def handle(self, request: Request) -> Response:
        head = request.method == "HEAD"
        resource = request.url.path
        try:
            bucket, key = self._address(request)
            resource = f"/{bucket}/{key}" if key else f"/{bucket}"
            headers = _headers(request)
            query = _query(request)
            verified, user = self._authenticate(request, headers)
            journal.CLIENT.set(user.id)  # the journal's client_id, for this request's context
            operation = route(request.method, bucket, key, query, headers)
            if not user.allows(operation.permission, bucket or None):
                raise Forbidden(f"user {user.id!r} may not {operation.name}: its policies do not allow it")
            call = Call(
                request=request,
                lake=self.lake,
                user=user,
                verified=verified,
                bucket=bucket,
                key=key,
                query=query,
                settings=self.settings,
                inline_reads=self.inline_reads,
                buffers=self.buffers,
                headers=headers,
            )
            return await operation.handler(call)
        except LakectlError as exc:
            if exc.http_status >= 500:
                log.error("%s %s failed: %s", request.method, resource, exc.message)
            return _unread(request, xml.error_response(exc, resource, head))
        except UnicodeDecodeError:
            error = InvalidArgument("the request path is not UTF-8")
            return _unread(request, xml.error_response(error, resource, head))
        except Exception:
            log.exception("%s %s: internal error", request.method, resource)
            return _unread(request, xml.error_response(LakectlError("internal error"), resource, head))

    def _authenticate(self, request: Request, headers: Mapping[str, str]) -> tuple[sigv4.Verified, User]:
        users: dict[str, User] = {}

        def secret_of(access_key_id: str) -> str | None:
            found = self.auth.secret_of(access_key_id)
            if found is None:
                return None
            users[access_key_id] = found[0]
            return found[1]

        raw_path = (request.scope.get("raw_path") or b"").decode("latin-1") or request.url.path
        signed = sigv4.Request(
            method=request.method,
            raw_path=raw_path.split("?", 1)[0],
            raw_query=request.scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
        )
        verified = sigv4.authenticate(signed, secret_of, region=self.settings.region)
        return verified, users[verified.access_key_id]
