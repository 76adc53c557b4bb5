"""Staging through a backing address (lakeFS's ``staging/backing`` and ``stage_object``): get an
address, write the object's bytes there, then link the address to a path on a branch.

lakeFS hands out an address in the repository's storage namespace that the client writes to
directly. Here blocks are named by their content, so no address can be known before the bytes
are: an address names a *slot*, a one-part multipart upload (:mod:`lakectl.core.multipart`)
bound to the branch and path it was asked for. The bytes reach it through a signed URL
(:func:`sign_write`, answered by the server's ``PUT /presigned/<token>``), are stored as blocks
like any upload (deduplicated, durable before they are recorded), and linking stages the object
from them, checking the checksum and size the client states against what arrived. Nothing else
can name those blocks: the slot holds them, and only a caller who may write the branch links it.

The garbage collector treats a slot as the upload it is: its blocks are live while the slot is,
and a slot never linked is dropped with the multipart uploads older than
:data:`lakectl.core.upkeep.gc.UPLOAD_DAYS`; its blocks are then garbage like any unreferenced block.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import hmac
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO

from lakectl.core import multipart, porcelain, presign, writes
from lakectl.core.lake import Lake
from lakectl.core.model import ObjectInfo, PathType
from lakectl.core.uri import check_new_path
from lakectl.errors import InvalidArgument, NotFound, SignatureError, UploadNotFound

SLOTS = "_lakectl/staging/"
"""Where in a repository's storage namespace slot addresses are named."""
PART = 1
"""The one part a slot holds."""
WRITE = "backing"
"""The purpose of a write token's signature (:func:`lakectl.core.presign.mac`)."""


@dataclass(frozen=True, slots=True)
class Slot:
    """An address to write an object's bytes to before linking it."""

    address: str
    upload_id: str
    branch: str
    path: str


@dataclass(frozen=True, slots=True)
class Write:
    """What a signed write URL lets its bearer do: write the bytes of one slot, as ``user``."""

    repo: str
    upload_id: str
    user: str
    expiry: int


def address_of(lake: Lake, repo: str, upload_id: str) -> str:
    namespace = porcelain.get_repo(lake, repo).storage_namespace.rstrip("/")
    return f"{namespace}/{SLOTS}{upload_id}"


def reserve(lake: Lake, repo: str, branch: str, path: str) -> Slot:
    """A new slot for ``path`` on ``branch`` (which must take writes now, and at link time)."""
    upload = multipart.create(lake, repo, branch, path)
    return Slot(address_of(lake, repo, upload.id), upload.id, upload.branch, upload.path)


def slot_of(lake: Lake, repo: str, address: str) -> Slot:
    """The slot ``address`` names in ``repo``; ``InvalidArgument`` for an address that is not
    one of this repository's slots, or one linked or dropped since."""
    if not isinstance(address, str):
        raise InvalidArgument("a physical address must be text")
    prefix = address_of(lake, repo, "")
    if not address.startswith(prefix):
        raise InvalidArgument(
            f"physical address {address[:200]!r} was not handed out by this server for repository "
            f"{repo!r}: get one from .../staging/backing first",
            physical_address=address[:200],
        )
    return check_slot(lake, repo, address[len(prefix) :])


def check_slot(lake: Lake, repo: str, upload_id: str) -> Slot:
    """The slot of that id, still waiting to be linked; else ``InvalidArgument``."""
    try:
        upload = multipart.get(lake, repo, upload_id)
    except UploadNotFound:
        raise InvalidArgument(
            f"physical address {address_of(lake, repo, upload_id)[:200]!r} is linked already, or expired "
            "unlinked: get a new one",
            physical_address=address_of(lake, repo, upload_id)[:200],
        ) from None
    return Slot(address_of(lake, repo, upload.id), upload.id, upload.branch, upload.path)


# -- writing a slot's bytes ----------------------------------------------------------------------


def sign_write(
    lake: Lake,
    repo: str,
    slot: Slot,
    user: str,
    token: str,
    expires_in: int = presign.DEFAULT_EXPIRY,
    now: int | None = None,
) -> tuple[str, int]:
    """A token for a URL that writes ``slot``'s bytes as ``user`` (whose signing incarnation is
    ``token``) until its expiry, and that expiry (Unix seconds)."""
    expiry = (int(time.time()) if now is None else now) + presign.check_expiry(expires_in)
    record = {"r": repo, "i": slot.upload_id, "u": user, "x": expiry}
    body = base64.urlsafe_b64encode(json.dumps(record, separators=(",", ":")).encode()).decode()
    return f"w{body.rstrip('=')}.{presign.mac(lake, body.rstrip('='), token, WRITE)}", expiry


def is_write_token(signed: str) -> bool:
    """Whether ``signed`` is a write token (read tokens of :mod:`lakectl.core.presign` are
    base64 of compressed JSON, which never starts with ``w``)."""
    return signed.startswith("w")


def verify_write(lake: Lake, signed: str, token_of: Callable[[str], str], now: int | None = None) -> Write:
    """What ``signed`` grants; ``SignatureError`` when it is malformed, altered, made for another
    lake or a user since deleted, or expired."""
    body, _, mac = signed[1:].partition(".")
    if len(signed) > presign.MAX_TOKEN or not is_write_token(signed):
        raise SignatureError("not a valid upload URL")
    try:
        record = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        grant = Write(str(record["r"]), str(record["i"]), str(record["u"]), int(record["x"]))
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise SignatureError("not a valid upload URL") from exc
    try:
        token = token_of(grant.user)
    except NotFound:
        raise SignatureError("the upload URL's signer no longer exists") from None
    if not hmac.compare_digest(mac, presign.mac(lake, body, token, WRITE)):
        raise SignatureError("the upload URL's signature does not match")
    if grant.expiry < (int(time.time()) if now is None else now):
        raise SignatureError("the upload URL has expired")
    return grant


def write(lake: Lake, repo: str, upload_id: str, source: BinaryIO, etag: str) -> multipart.Part:
    """Store the bytes of a slot (``etag``: their hex md5, computed while they arrived); a second
    write replaces the first, as a second PUT of an S3 key does."""
    return multipart.put_part(lake, repo, upload_id, PART, source, etag)


# -- linking -------------------------------------------------------------------------------------


def link(
    lake: Lake,
    repo: str,
    branch: str,
    path: str,
    address: str,
    checksum: str,
    size: int,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    mtime: int | None = None,
) -> ObjectInfo:
    """Stage the bytes written to ``address`` at ``path`` on ``branch``, then forget the slot
    (an address links once). The branch and path must be the ones the address was asked for;
    ``checksum`` (hex md5, an ETag's quotes allowed) and ``size`` must be what was written.
    On any refusal nothing is staged and the slot stays."""
    path = check_new_path(path)
    slot = slot_of(lake, repo, address)
    if (slot.branch, slot.path) != (branch, path):
        raise InvalidArgument(
            f"physical address {address!r} was handed out for {slot.path!r} on branch {slot.branch!r}, "
            f"not {path!r} on {branch!r}",
            physical_address=address,
        )
    part = next((p for p in multipart.list_parts(lake, repo, slot.upload_id) if p.number == PART), None)
    if part is None:
        raise InvalidArgument(f"nothing was written to {address!r} yet", physical_address=address)
    if checksum.strip().strip('"').lower() != part.etag:
        raise InvalidArgument(
            f"checksum {checksum!r} does not match the bytes written to {address!r} ({part.etag})",
            physical_address=address,
        )
    if size != part.size:
        raise InvalidArgument(
            f"size {size} does not match the {part.size} bytes written to {address!r}",
            physical_address=address,
        )
    entry = writes.entry_for(part.size, part.etag, part.locators, content_type, metadata)
    if mtime is not None:
        if isinstance(mtime, bool) or not isinstance(mtime, int) or mtime < 0:
            raise InvalidArgument(f"mtime must be Unix seconds, got {mtime!r}")
        entry = dataclasses.replace(entry, mtime=mtime)
    writes.touch_blocks(lake, entry)  # written maybe hours ago: spared by a collection running now
    writes.stage_rows(lake, repo, branch, [(path, entry.to_row())])
    with contextlib.suppress(UploadNotFound):  # linked twice at once: both staged the same bytes
        multipart.abort(lake, repo, slot.upload_id)  # the records only: the blocks are the object's now
    return ObjectInfo(path, PathType.OBJECT, entry)
