"""Presigned object URLs: a token a server puts in a URL so that a plain HTTP client, without
credentials, may read one version of one object until an expiry.

The token names the data itself (the entry's locators, size, checksum and content type), as a
lakeFS presigned URL names a physical object: it keeps serving the version it was made for after
the branch moves on. It is signed with the lake's signing key (HMAC-SHA256) for the signer's
incarnation (the ``token`` of :mod:`lakectl.core.blockaccess`), so it stops working when the
user who made it is deleted, and any change to it or its expiry breaks the signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from lakectl.core import blockaccess, porcelain, reads
from lakectl.core.lake import Lake
from lakectl.core.model import Entry, External, ObjectInfo, PathType, RepositoryId
from lakectl.errors import InvalidArgument, NotFound, SignatureError

DEFAULT_EXPIRY = 15 * 60
"""Seconds a URL stays valid unless asked otherwise (lakeFS's default presigned expiry)."""
MAX_EXPIRY = 7 * 24 * 3600
"""The longest validity asked for (as S3's presigned URLs)."""
MAX_TOKEN = 6000
"""Characters of a token at most, so that the URL stays within what servers and proxies take
(about 90 blocks of 64 MiB: objects larger than ~5.6 GiB cannot be presigned)."""


@dataclass(frozen=True, slots=True)
class Presigned:
    """What a presigned URL grants: the object's path (for its name) and entry, and whose it is."""

    path: str
    entry: Entry
    user: str
    expiry: int
    found: reads.ObjectRead | None = None
    """The read it was made from (repository, ref as asked, commit, branch), for the journal."""


def check_expiry(seconds: int) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= MAX_EXPIRY:
        raise InvalidArgument(f"a presigned URL's expiry must be 1 to {MAX_EXPIRY} seconds, got {seconds!r}")
    return seconds


def mac(lake: Lake, body: str, token: str, purpose: str = "presign") -> str:
    """The signature of a URL token's ``body`` for the signer incarnation ``token``: HMAC-SHA256
    under the lake's signing key, ``purpose`` keeping the kinds of token apart (a read token's
    never verifies as a write token's)."""
    key = blockaccess.signing_key(lake)
    return hmac.new(key, f"{purpose}@{body}@{token}".encode(), hashlib.sha256).hexdigest()


def presign(
    lake: Lake,
    repo: str,
    ref: str,
    path: str,
    user: str,
    token: str,
    expires_in: int = DEFAULT_EXPIRY,
    now: int | None = None,
) -> tuple[str, int]:
    """The token of a URL reading ``path`` at ``ref`` as it is now, for ``user`` (whose signing
    incarnation is ``token``), and its expiry (Unix seconds)."""
    expires_in = check_expiry(expires_in)
    found = porcelain.open_object(lake, repo, ref, path)
    info = ObjectInfo(found.path, PathType.OBJECT, found.entry)
    porcelain.check_blocks(lake, repo, ref, info)  # a URL to data gone would fail only later
    e = found.entry
    expiry = (int(time.time()) if now is None else now) + expires_in
    record = {
        # What a read through the URL tells the journal: the ref as asked and what it resolved to.
        "r": found.repo,
        "f": found.ref,
        "k": found.commit_id,
        "b": found.branch,
        "g": reads.staged(lake, found),
        "p": info.path,
        "l": list(e.locators),
        "s": e.size,
        "c": e.checksum,
        "t": e.content_type,
        "m": e.mtime,
        "u": user,
        "x": expiry,
    }
    if e.external is not None:  # an imported object: the URL reads its source, through its guard
        record["e"] = e.external.encode()
    packed = zlib.compress(json.dumps(record, separators=(",", ":")).encode(), 9)
    body = base64.urlsafe_b64encode(packed).decode().rstrip("=")
    signed = f"{body}.{mac(lake, body, token)}"
    if len(signed) > MAX_TOKEN:
        raise InvalidArgument(
            f"object {path!r} has too many blocks ({len(e.locators)}) for a presigned URL", path=path
        )
    return signed, expiry


def verify(lake: Lake, signed: str, token_of: Callable[[str], str], now: int | None = None) -> Presigned:
    """What ``signed`` grants; ``SignatureError`` when it is malformed, altered, made for another
    lake or a user since deleted (``token_of`` raises ``NotFound`` for those), or expired."""
    body, _, signature = signed.partition(".")
    if len(signed) > MAX_TOKEN:
        raise SignatureError("not a valid presigned URL")
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        # Bounded: the record is read before its signature can be checked (it names the signer).
        record = json.loads(zlib.decompressobj().decompress(packed, 16 * MAX_TOKEN))
        user = record["u"]
        entry = Entry(
            size=int(record["s"]),
            checksum=str(record["c"]),
            locators=tuple(str(x) for x in record["l"]),
            mtime=int(record["m"]),
            content_type=str(record["t"]),
            metadata={},
            external=External.decode(str(record["e"])) if "e" in record else None,
        )
        path, expiry = str(record["p"]), int(record["x"])
        found = reads.ObjectRead(
            RepositoryId(str(record.get("r", ""))),
            str(record.get("f", "")),
            path,
            entry,
            str(record.get("k", "")),
            str(record.get("b", "")),
            staged=bool(record.get("g", False)),
            presigned=True,
        )
    except (ValueError, KeyError, TypeError, zlib.error, binascii.Error) as exc:
        raise SignatureError("not a valid presigned URL") from exc
    try:
        token = token_of(str(user))
    except NotFound:
        raise SignatureError("the presigned URL was made by a user who no longer exists") from None
    if not hmac.compare_digest(mac(lake, body, token), signature):
        raise SignatureError("invalid signature on the presigned URL")
    if expiry <= (int(time.time()) if now is None else now):
        raise SignatureError(f"the presigned URL expired at {expiry}")
    return Presigned(path, entry, str(user), expiry, found)
