"""Porcelain of the Keep-style block API: signed locators, missing blocks, objects linked from blocks.

A client that uploads blocks gets signed locators back (proof that it wrote them); it can only
link an object from locators whose signatures are valid for its own token, so it can never claim
a block it has not uploaded or been granted, even when dedup means the block was already there.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from lakectl.core import keys, writes
from lakectl.core.blocks.data import EMPTY_LOCATOR, get_checked, parse_segment, read_object, segment_token
from lakectl.core.blocks.signing import new_secret, sign, verify
from lakectl.core.graph.tree import Update
from lakectl.core.lake import Lake
from lakectl.core.model import Entry, ObjectInfo, PathType
from lakectl.core.uri import check_new_path
from lakectl.errors import (
    BlockNotFound,
    InvalidArgument,
    InvalidLocator,
    KeyNotFound,
    PredicateFailed,
    SignatureError,
)

SIGNATURE_TTL = 14 * 24 * 3600
"""How long a signed locator stays valid (Keep's default blob signature TTL is two weeks)."""

_MD5 = re.compile(r"^[0-9a-f]{32}\Z")  # \Z: $ would take a trailing newline
_DIGITS = re.compile(r"[0-9]{1,20}\Z")

__all__ = [
    "SIGNATURE_TTL",
    "Link",
    "Receipted",
    "challenge",
    "get_block",
    "link_object",
    "link_objects",
    "missing_blocks",
    "prove",
    "prove_answer",
    "put_block",
    "put_pack",
    "sign_locator",
    "signing_key",
]


def signing_key(lake: Lake) -> bytes:
    """The lake's secret for signing locators, created on first use (one per lake, all processes)."""
    try:
        return lake.kv.get(keys.LAKE, keys.SIGNING_SECRET)
    except KeyNotFound:
        pass
    # If another process created it first, set_if fails and we use theirs.
    with contextlib.suppress(PredicateFailed):
        lake.kv.set_if(keys.LAKE, keys.SIGNING_SECRET, new_secret(), None)
    return lake.kv.get(keys.LAKE, keys.SIGNING_SECRET)


def sign_locator(lake: Lake, bare: str, token: str, ttl: int = SIGNATURE_TTL) -> str:
    return sign(bare, signing_key(lake), token, int(time.time()) + ttl)


def put_block(lake: Lake, md5: str, data: bytes | memoryview, token: str) -> str:
    """Store one block whose md5 the client claims; return its signed locator."""
    bare = _put_checked(lake, md5, data)
    lake.blocks.sync()  # a signed locator promises a durable block: objects link to it next
    return sign_locator(lake, bare, token)


MAX_BATCH = 1024
"""Blocks one :func:`put_blocks` stores at most."""


def put_blocks(
    lake: Lake,
    bares: Sequence[str],
    data: bytes | memoryview,
    token: str,
    layouts: Sequence[Sequence[int] | None] | None = None,
) -> list[Receipted]:
    """Store consecutive blocks of one body (``bares``: each one's md5 and size, in order; their
    sizes add up to the body's), each checked as :func:`put_block` checks one, and make them
    durable together (one sync: many small files of a client's upload cost one barrier, not
    one each); their signed locators, in order, each with a receipt per segment when
    ``layouts`` gives the block's segment lengths (a client's pack, as :func:`put_pack`).
    Nothing is signed unless every block is good."""
    if not bares or len(bares) > MAX_BATCH:
        raise InvalidArgument(f"a batch holds 1 to {MAX_BATCH} blocks, not {len(bares)}")
    if layouts is not None and len(layouts) != len(bares):
        raise InvalidArgument(f"the batch names {len(bares)} blocks and {len(layouts)} layouts")
    view = memoryview(data)
    sizes = []
    for bare in bares:
        md5, plus, size = bare.partition("+")
        if not plus or not size.isdigit() or not _MD5.match(md5):
            raise InvalidLocator(f"invalid block locator {bare!r} in a batch: expected <md5>+<size>")
        sizes.append(int(size))
    if sum(sizes) != len(view):
        raise InvalidArgument(f"the batch's blocks hold {sum(sizes)} bytes; its body has {len(view)}")
    for lengths, whole in zip(layouts or (), sizes, strict=False):
        if lengths is not None:
            _check_layout(lengths, whole)
    offset = 0
    receipts: list[list[str]] = []
    for i, (bare, length) in enumerate(zip(bares, sizes, strict=True)):
        piece = view[offset : offset + length]
        _put_checked(lake, bare.partition("+")[0], piece)
        lengths = layouts[i] if layouts is not None else None
        receipts.append([] if lengths is None else _receipts(lake, bare, piece, lengths, token))
        offset += length
    lake.blocks.sync()
    return [
        Receipted(sign_locator(lake, bare, token), got) for bare, got in zip(bares, receipts, strict=True)
    ]


def _put_checked(lake: Lake, md5: str, data: bytes | memoryview) -> str:
    """Store a block whose md5 the client claims, once its bytes are checked; its bare locator."""
    if not _MD5.match(md5):
        raise InvalidLocator(f"invalid block hash {md5!r}: expected 32 lowercase hex digits")
    actual = hashlib.md5(data).hexdigest()
    if actual != md5:
        raise InvalidArgument(f"block content does not match its hash: got {actual}, expected {md5}")
    bare = f"{md5}+{len(data)}"
    # A stored copy is compared with these bytes and rewritten if rotten (BlockAdapter.put);
    # clients send only blocks the lake lacks or could not prove, so the barrier is rarely idle.
    lake.blocks.put(bare, data)
    return bare


MAX_RECEIPTS = 65_536
"""Segments one block may be receipted for at once (a pack of 1 MiB holds 256 files of 4 KiB)."""


@dataclass(frozen=True, slots=True)
class Receipted:
    """A block's signed locator and a receipt for each of its consecutive segments: the server's
    signed word that the segment at that offset and length has that md5, so that an object
    linked from it later is staged without reading the block again."""

    locator: str
    receipts: list[str]


def put_pack(lake: Lake, md5: str, data: bytes | memoryview, token: str, lengths: Sequence[int]) -> Receipted:
    """Store a block of consecutive segments (a client's pack of small files) as
    :func:`put_block` stores any block, and receipt each segment's md5, hashed from the bytes
    in hand: linking its files then reads nothing."""
    _check_layout(lengths, len(data))
    signed = put_block(lake, md5, data, token)
    return Receipted(signed, _receipts(lake, f"{md5}+{len(data)}", data, lengths, token))


def _check_layout(lengths: Sequence[int], size: int) -> None:
    if len(lengths) > MAX_RECEIPTS:
        raise InvalidArgument(f"more than {MAX_RECEIPTS} segments in one block")
    if any(n <= 0 for n in lengths) or sum(lengths) != size:
        raise InvalidArgument(f"segment lengths must be positive and add up to the block's {size} bytes")


def _receipts(
    lake: Lake, bare: str, data: bytes | memoryview, lengths: Sequence[int], token: str
) -> list[str]:
    key = signing_key(lake)
    view = memoryview(data)
    out = []
    offset = 0
    for length in lengths:
        md5 = hashlib.md5(view[offset : offset + length]).hexdigest()
        out.append(_receipt(key, bare, offset, length, md5, token))
        offset += length
    return out


def _receipt(key: bytes, bare: str, offset: int, length: int, md5: str, token: str) -> str:
    message = f"segment@{bare}@{offset}@{length}@{md5}@{token}".encode("utf-8", "surrogatepass")
    return hmac.digest(key, message, "sha1").hex()


def get_block(
    lake: Lake, signed: str, token: str, offset: int = 0, length: int | None = None, md5: str = ""
) -> bytes:
    """The block's bytes (or a range), after checking the signature and its expiry. ``md5``: a
    range's own md5, which the client knows (a packed object's checksum): the range is read alone
    and checked against it, not the whole block (:func:`~lakectl.core.blocks.data.get_checked`;
    a range that does not match is served only once its whole block is verified)."""
    locator = verify(signed, signing_key(lake), token)
    if md5 and length is not None:
        return get_checked(lake.blocks, locator.bare, offset, length, md5.lower())
    return lake.blocks.get(locator.bare, offset, length)


def missing_blocks(lake: Lake, locators: Sequence[str]) -> list[str]:
    """Which of these bare locators the lake lacks (a client then uploads only those)."""
    from lakectl.core.blocks.locator import parse_locator

    return [loc for loc in locators if not lake.blocks.exists(parse_locator(loc).bare)]


CHALLENGE_TTL = 600


def challenge(lake: Lake, bare: str, token: str, ttl: int = CHALLENGE_TTL) -> str:
    """A nonce for proving knowledge of a stored block without sending it: the client answers
    ``md5(nonce + block bytes)``, which only a holder of the bytes can compute. Stateless: the
    nonce carries its expiry and an HMAC the server can recheck."""
    expiry = f"{int(time.time()) + ttl:08x}"
    mac = hmac.new(signing_key(lake), f"challenge@{bare}@{token}@{expiry}".encode(), "sha256")
    return f"{expiry}.{mac.hexdigest()}"


def prove(lake: Lake, bare: str, nonce: str, answer: str, token: str) -> str:
    """The signed locator of a stored block, for a correct answer to :func:`challenge`."""
    return _prove(lake, bare, nonce, answer, token, None).locator


def prove_pack(
    lake: Lake, bare: str, nonce: str, answer: str, token: str, lengths: Sequence[int]
) -> Receipted:
    """:func:`prove`, and receipts for the block's consecutive segments (as :func:`put_pack`
    gives them), hashed from the bytes the proof reads anyway."""
    return _prove(lake, bare, nonce, answer, token, lengths)


def _prove(
    lake: Lake, bare: str, nonce: str, answer: str, token: str, lengths: Sequence[int] | None
) -> Receipted:
    from lakectl.core.blocks.locator import parse_locator

    bare = parse_locator(bare).bare
    expiry, _, mac = nonce.partition(".")
    expected = hmac.new(signing_key(lake), f"challenge@{bare}@{token}@{expiry}".encode(), "sha256")
    if not hmac.compare_digest(mac, expected.hexdigest()):
        raise SignatureError(f"invalid challenge for block {bare}")
    if int(expiry, 16) <= int(time.time()):
        raise SignatureError(f"the challenge for block {bare} expired")
    if lengths is not None:
        _check_layout(lengths, int(bare.split("+")[1]))
    data = lake.blocks.get(bare)
    digest = hashlib.md5(nonce.encode())
    digest.update(data)
    if not hmac.compare_digest(answer, digest.hexdigest()):
        raise SignatureError(f"wrong proof of knowledge for block {bare}")
    lake.blocks.touch(bare)  # the client links it next, as if it had just uploaded it
    receipts = [] if lengths is None else _receipts(lake, bare, data, lengths, token)
    return Receipted(sign_locator(lake, bare, token), receipts)


def prove_answer(nonce: str, data: bytes) -> str:
    """What a client answers to a challenge for a block it holds."""
    digest = hashlib.md5(nonce.encode())
    digest.update(data)
    return digest.hexdigest()


def link_object(
    lake: Lake,
    repo: str,
    branch: str,
    path: str,
    signed_segments: Sequence[str],
    token: str,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
) -> ObjectInfo:
    """Stage an object made of already-stored blocks. Each token is a signed locator, optionally
    followed by ``:offset:length`` for part of a block; every signature must verify for ``token``
    and every block must exist, else nothing is staged."""
    return link_objects(
        lake, repo, branch, [Link(path, tuple(signed_segments), content_type, metadata)], token
    )[0]


@dataclass(frozen=True, slots=True)
class Link:
    """One object to link: its path and signed segments, as :func:`link_object` takes them."""

    path: str
    signed_segments: tuple[str, ...]
    content_type: str | None = None
    metadata: Mapping[str, str] | None = None
    checksum: str | None = None
    """The object's md5, vouched for by ``receipt`` (of its one segment): nothing is read."""
    receipt: str | None = None


READ_CACHE = 64 * 1024 * 1024
"""Bytes of blocks :func:`link_objects` keeps read at once (each is read, and its md5 checked,
once for all the segments of it that follow one another, such as a pack's small files)."""


def link_objects(lake: Lake, repo: str, branch: str, links: Sequence[Link], token: str) -> list[ObjectInfo]:
    """Stage many objects made of already-stored blocks as one staged change, as
    :func:`link_object` stages one: every signature is verified and every block touched (once
    each, however many objects share it), a part of a block is read and hashed for the object's
    checksum (each block read once while the objects that use it follow one another) unless a
    receipt vouches for it (:func:`put_pack`); if one fails, nothing is staged."""
    key = signing_key(lake)
    verified: dict[str, str] = {}
    cache: dict[str, bytes] = {}
    infos: list[ObjectInfo] = []
    updates: list[Update] = []
    seen: set[str] = set()
    for link in links:
        path = check_new_path(link.path)
        if path in seen:
            raise InvalidArgument(f"object {path!r} is linked twice in one request")
        seen.add(path)
        parts = [_segment(text, key, token, verified, lake) for text in link.signed_segments]
        if link.receipt is not None or link.checksum is not None:
            entry = _receipted_entry(key, token, link, parts)
        else:
            segments = [segment_token(*part) for part in parts]
            entry = _entry_of(lake, segments, link.content_type, link.metadata, cache)
        infos.append(ObjectInfo(path, PathType.OBJECT, entry))
        updates.append((path, entry.to_row()))
    writes.stage_rows(lake, repo, branch, sorted(updates, key=lambda update: update[0]))
    return infos


def append_linked(
    lake: Lake, repo: str, branch: str, path: str, signed: Sequence[str], token: str
) -> ObjectInfo:
    """Append already-stored blocks to an object (:func:`~lakectl.core.writes.append_blocks`),
    their signatures verified and blocks touched as :func:`link_objects` does: a remote client's
    ``fs upload --append``, its bytes sent first as blocks (idempotent, so retried), then this
    one request (not retried: an append is not idempotent)."""
    key = signing_key(lake)
    verified: dict[str, str] = {}
    segments = [segment_token(*_segment(text, key, token, verified, lake)) for text in signed]
    return writes.append_blocks(lake, repo, branch, path, segments)


def _segment(text: str, key: bytes, token: str, verified: dict[str, str], lake: Lake) -> tuple[str, int, int]:
    """``(bare locator, offset, length)`` of a signed segment (``<signed>[:<offset>:<length>]``),
    its signature verified and its block touched once per request (``verified``)."""
    signed, colon, rest = text.partition(":")
    bare = verified.get(signed)
    if bare is None:
        bare = verify(signed, key, token).bare
        if not lake.blocks.touch(bare):  # touched: a concurrent GC spares what is linked now
            raise BlockNotFound(f"block {bare} is not stored")
        verified[signed] = bare
    size = int(bare.rpartition("+")[2])
    if not colon:
        return bare, 0, size
    off, _, ln = rest.partition(":")
    if not (_DIGITS.match(off) and _DIGITS.match(ln)):
        raise InvalidLocator(f"invalid segment {text!r}")
    offset, length = int(off), int(ln)
    if offset + length > size:
        raise InvalidLocator(f"segment {text!r} runs past the end of its block")
    return bare, offset, length


def _receipted_entry(key: bytes, token: str, link: Link, parts: list[tuple[str, int, int]]) -> Entry:
    """The entry of an object of one segment whose md5 a receipt vouches for (:func:`put_pack`)."""
    if len(parts) != 1 or link.checksum is None or link.receipt is None:
        raise InvalidArgument(f"object {link.path!r}: a receipt needs a checksum and exactly one segment")
    if not _MD5.match(link.checksum):
        raise InvalidArgument(f"object {link.path!r}: invalid checksum {link.checksum!r}")
    bare, offset, length = parts[0]
    expected = _receipt(key, bare, offset, length, link.checksum, token)
    if not hmac.compare_digest(link.receipt, expected):
        raise SignatureError(f"object {link.path!r}: its receipt does not vouch for checksum {link.checksum}")
    token_ = segment_token(bare, offset, length)
    return writes.entry_for(length, link.checksum, (token_,), link.content_type, link.metadata)


def _entry_of(
    lake: Lake,
    segments: list[str],
    content_type: str | None,
    metadata: Mapping[str, str] | None,
    cache: dict[str, bytes] | None = None,
) -> Entry:
    if segments and all(":" not in s for s in segments):
        md5s = [s.split("+")[0] for s in segments]
        size = sum(int(s.split("+")[1]) for s in segments)
        if len(md5s) == 1:
            checksum = md5s[0]
        else:
            joined = b"".join(bytes.fromhex(m) for m in md5s)
            checksum = f"{hashlib.md5(joined).hexdigest()}-{len(md5s)}"
    elif cache is not None and len(segments) == 1:
        bare, _, offset, length = parse_segment(segments[0])
        data = cache.get(bare)
        if data is None:
            data = lake.blocks.get(bare)  # the whole block, its md5 checked
            if sum(map(len, cache.values())) + len(data) > READ_CACHE:
                cache.clear()
            cache[bare] = data
        checksum = hashlib.md5(memoryview(data)[offset : offset + length]).hexdigest()
        size = length
    else:
        digest = hashlib.md5()
        size = 0
        for chunk in _read(lake, segments):
            digest.update(chunk)
            size += len(chunk)
        checksum = digest.hexdigest()
    return writes.entry_for(size, checksum, tuple(segments) or (EMPTY_LOCATOR,), content_type, metadata)


def _read(lake: Lake, segments: list[str]) -> Iterator[bytes]:
    return read_object(lake.blocks, segments)
