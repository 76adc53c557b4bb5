"""Presigned object URLs: ``GET /presigned/<token>`` answers one version of one object to any
HTTP client, without credentials, until the token's expiry (:mod:`lakectl.core.presign`).

The REST API hands them out as lakeFS does: ``GET .../objects/stat?presign=true`` puts the URL
in ``physical_address`` (with ``physical_address_expiry``), and ``GET .../objects?presign=true``
redirects to it (302). ``presign_expiry`` (seconds) is a lakectl extension.
"""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.concurrency import run_in_threadpool

from lakectl.core import journal, presign
from lakectl.core import porcelain as p
from server.api.deps import PUBLIC, AuthFirstRoute
from server.api.ranges import byte_span
from server.auth import Auth, User
from server.headers import as_header
from server.reads import object_body

router = APIRouter(route_class=AuthFirstRoute)
ROUTE = "/presigned/{token}"


def url_for(
    request: Request, lake: p.Lake, user: User, repo: str, ref: str, path: str, expires_in: int | None
) -> tuple[str, int]:
    """A presigned URL (on the host the request came to) for ``path`` at ``ref``, and its expiry."""
    token, expiry = presign.presign(
        lake, repo, ref, path, user.id, user.signing_token, expires_in or presign.DEFAULT_EXPIRY
    )
    return str(request.url_for("read_presigned", token=token)), expiry


@router.get(ROUTE, dependencies=[PUBLIC])
async def read_presigned(
    request: Request, token: str, range_: str | None = Header(None, alias="Range")
) -> Response:
    """The bytes (``Range`` for part of them, 206), or 403 ``signature_error`` for a token that
    was altered, has expired, or whose signer is gone."""
    lake: p.Lake = request.app.state.lake
    auth: Auth = request.app.state.auth

    def signer(user_id: str) -> str:
        return auth.get_user(user_id).signing_token

    granted = await run_in_threadpool(presign.verify, lake, token, signer)
    assert granted.found is not None
    journal.CLIENT.set(granted.user)  # an audited read is the signer's: the URL reads as them
    entry = granted.entry
    headers: dict[str, Any] = {
        "ETag": f'"{entry.checksum}"',
        "Last-Modified": formatdate(entry.mtime, usegmt=True),
        "Accept-Ranges": "bytes",
        "Content-Type": as_header(entry.content_type),
        "Cache-Control": "private",
    }
    span = byte_span(entry.size, range_, headers)
    if not isinstance(span, tuple):  # the 416 answer
        return span
    start, end, status = span
    return await object_body(lake, granted.found, start, end, status, headers, request.app.state.inline_reads)
