"""Presigned object URLs: ``GET /presigned/<token>`` answers one version of one object to any
HTTP client, without credentials, until the token's expiry (:mod:`lakectl.core.presign`);
``PUT /presigned/<token>`` writes the bytes of a staging address (:mod:`lakectl.core.backing`).

The REST API hands them out as lakeFS does: ``GET .../objects/stat?presign=true`` puts the URL
in ``physical_address`` (with ``physical_address_expiry``), and ``GET .../objects?presign=true``
redirects to it (302). ``presign_expiry`` (seconds) is a lakectl extension.
"""

from __future__ import annotations

import hashlib
from email.utils import formatdate
from tempfile import SpooledTemporaryFile
from typing import Any, BinaryIO, cast

from fastapi import APIRouter, Header, Request, Response
from fastapi.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from lakectl.core import backing, presign
from lakectl.core.journal import journal
from lakectl.core.lake import Lake
from lakectl.errors import InvalidArgument, SignatureError
from server.api.deps import PUBLIC, AuthFirstRoute, forbidden
from server.api.ranges import byte_span
from server.auth.store import Auth
from server.auth.users import User
from server.policies import Permission
from server.reads import object_body
from server.served import served_headers

router = APIRouter(route_class=AuthFirstRoute)
ROUTE = "/presigned/{token}"
SPOOL_BYTES = 8 * 1024 * 1024


def url_for(
    request: Request, lake: Lake, user: User, repo: str, ref: str, path: str, expires_in: int | None
) -> tuple[str, int]:
    """A presigned URL (on the host the request came to) for ``path`` at ``ref``, and its expiry."""
    token, expiry = presign.presign(
        lake, repo, ref, path, user.id, user.signing_token, expires_in or presign.DEFAULT_EXPIRY
    )
    return str(request.url_for("read_presigned", token=token)), expiry


def write_url_for(
    request: Request, lake: Lake, user: User, repo: str, slot: backing.Slot, expires_in: int | None
) -> tuple[str, int]:
    """A URL that writes ``slot``'s bytes (any HTTP client, ``PUT``), and its expiry."""
    token, expiry = backing.sign_write(
        lake, repo, slot, user.id, user.signing_token, expires_in or presign.DEFAULT_EXPIRY
    )
    return str(request.url_for("write_presigned", token=token)), expiry


class _Signer:
    """``token_of`` for the verifiers: the signing token of a URL's signer, keeping the user it
    read, so that the URL is then checked against that user's access of now (:meth:`check`)
    without reading the user again."""

    def __init__(self, auth: Auth) -> None:
        self.auth = auth
        self.user: User | None = None

    def __call__(self, user_id: str) -> str:
        self.user = self.auth.get_user(user_id)
        return self.user.signing_token

    def check(self, permission: Permission, repository: str) -> None:
        """A URL acts with its signer's access of now: a policy changed since it was made (the
        signer confined to another repository, say) refuses it, as the S3 gateway's presigned
        URLs are."""
        assert self.user is not None
        if not self.user.allows(permission, repository):
            raise forbidden(self.user, permission, repository)


@router.get(ROUTE, dependencies=[PUBLIC])
async def read_presigned(
    request: Request, token: str, range_: str | None = Header(None, alias="Range")
) -> Response:
    """The bytes (``Range`` for part of them, 206), or 403 ``signature_error`` for a token that
    was altered, has expired, or whose signer is gone."""
    lake: Lake = request.app.state.lake
    signer = _Signer(request.app.state.auth)
    if backing.is_write_token(token):
        raise SignatureError("an upload URL is for PUT, not for reading")
    granted = await run_in_threadpool(presign.verify, lake, token, signer)
    assert granted.found is not None
    signer.check(Permission.READ_REPO, granted.found.repo)
    journal.CLIENT.set(granted.user)  # an audited read is the signer's: the URL reads as them
    entry = granted.entry
    headers: dict[str, Any] = {
        "ETag": f'"{entry.checksum}"',
        "Last-Modified": formatdate(entry.mtime, usegmt=True),
        "Accept-Ranges": "bytes",
        "Cache-Control": "private",
        **served_headers(granted.found.path, entry.content_type),  # never active content
    }
    span = byte_span(entry.size, range_, headers)
    if not isinstance(span, tuple):  # the 416 answer
        return span
    start, end, status = span
    return await object_body(lake, granted.found, start, end, status, headers, request.app.state.inline_reads)


@router.put(ROUTE, dependencies=[PUBLIC])
async def write_presigned(request: Request, token: str) -> Response:
    """Store the body as the bytes of the staging address the token names (a second PUT
    replaces the first); the ``ETag`` answered is their md5, the checksum to link them with.
    Nothing is recorded unless the whole body arrived."""
    lake: Lake = request.app.state.lake
    signer = _Signer(request.app.state.auth)
    granted = await run_in_threadpool(backing.verify_write, lake, token, signer)
    signer.check(Permission.WRITE_REPO, granted.repo)
    await run_in_threadpool(backing.check_slot, lake, granted.repo, granted.upload_id)  # before the body
    md5 = hashlib.md5()
    with SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        try:
            async for chunk in request.stream():
                md5.update(chunk)
                spool.write(chunk)
        except ClientDisconnect:
            raise InvalidArgument("upload interrupted: the request body did not arrive whole") from None
        spool.seek(0)
        journal.CLIENT.set(granted.user)
        source = cast(BinaryIO, spool)
        await run_in_threadpool(backing.write, lake, granted.repo, granted.upload_id, source, md5.hexdigest())
    return Response(status_code=200, headers={"ETag": f'"{md5.hexdigest()}"'})
