"""Porcelain for Keep manifests: export a tree as a normalized manifest, import one as staged objects."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from lakectl.core import blockaccess, listing, writes
from lakectl.core.blocks.data import EMPTY_LOCATOR, parse_segment, read_object, segment_token
from lakectl.core.blocks.locator import parse_locator
from lakectl.core.blocks.manifest import Segment, format_manifest, parse_manifest
from lakectl.core.blocks.signing import verify
from lakectl.core.graph.tree import Update
from lakectl.core.lake import Lake, now
from lakectl.core.model import Entry
from lakectl.core.uri import check_new_path, check_path
from lakectl.errors import BlockNotFound, InvalidArgument, SignatureError


def export_manifest(
    lake: Lake, repo: str, ref: str, prefix: str = "", sign: Callable[[str], str] | None = None
) -> str:
    """The normalized Keep manifest of the objects under ``prefix`` at ``ref`` (paths relative to it).

    With ``sign``, every block is named by ``sign(bare locator)`` (a signed locator, as Keep's API
    hands out manifests): what a client needs to fetch the blocks itself."""
    base = _directory(check_path(prefix, allow_empty=True))
    files: dict[str, list[Segment]] = {}
    signed: dict[str, str] = {}
    for info in listing.list_objects(lake, repo, ref, base):
        assert info.entry is not None
        if info.entry.external is not None:
            raise InvalidArgument(
                f"object {info.path!r} is imported (its bytes stay at {info.entry.external.address}): "
                "a Keep manifest names blocks of the lake; export a prefix without imported objects"
            )
        segments = [parse_segment(token) for token in info.entry.locators]
        if sign is not None:
            for loc, *_ in segments:
                if loc not in signed:
                    signed[loc] = sign(loc)
        files[info.path[len(base) :]] = [
            Segment(signed.get(loc, loc), offset, length) for loc, _, offset, length in segments if length
        ]
    return format_manifest(files)


def _etag(locators: list[str]) -> str:
    md5s = [loc.split("+")[0] for loc in locators]
    if len(md5s) == 1:
        return md5s[0]
    joined = b"".join(bytes.fromhex(m) for m in md5s)
    return f"{hashlib.md5(joined).hexdigest()}-{len(md5s)}"


def import_manifest(
    lake: Lake,
    repo: str,
    branch: str,
    prefix: str,
    text: str,
    replace: bool = False,
    token: str | None = None,
) -> list[str]:
    """Stage every file of the manifest under ``prefix``. Every block must already be stored;
    otherwise BlockNotFound and nothing is staged. Returns the staged paths.

    With ``token`` (a server's caller, docs/decisions/0006), every locator must carry a valid
    signature for that token, else SignatureError and nothing is staged: knowing a block's md5
    and size is no proof of having read it. Without it (the embedded lake, whose user owns the
    whole block directory), plain locators are enough.

    With ``replace``, every other object under ``prefix`` is deleted in the same staged write:
    readers see the old tree or the new one, never a mix (an overwriting Spark job's output)."""
    base = _directory(check_path(prefix, allow_empty=True))
    writes.check_writable(lake, repo, branch)
    files = parse_manifest(text).files()
    key = blockaccess.signing_key(lake) if token is not None else b""
    bare: dict[str, str] = {}
    for segments in files.values():
        for seg in segments:
            if seg.locator in bare:
                continue
            b = parse_locator(seg.locator).bare
            if token is not None:
                _verify(seg.locator, b, key, token)
            if not lake.blocks.touch(b):  # touched: a concurrent GC spares what is imported
                raise BlockNotFound(f"block {b} of the manifest is not stored in this lake; nothing imported")
            bare[seg.locator] = b
    mtime = now()
    updates: list[Update] = []
    for name, segments in sorted(files.items()):
        path = check_new_path(base + name)
        # Segments are referenced where they are, whole blocks or parts of blocks: no copy.
        tokens = [segment_token(bare[s.locator], s.offset, s.length) for s in segments if s.length]
        size = sum(s.length for s in segments)
        if tokens and all(":" not in t for t in tokens):  # whole blocks: the S3 ETag from their md5s
            checksum = _etag(tokens)
        else:
            md5 = hashlib.md5()
            for chunk in read_object(lake.blocks, tokens):
                md5.update(chunk)
            checksum = md5.hexdigest()
        entry = Entry(size, checksum, tuple(tokens) or (EMPTY_LOCATOR,), mtime)
        updates.append((path, entry.to_row()))
    staged = [p for p, _ in updates]
    if replace:
        new = set(staged)
        gone = [o.path for o in listing.list_objects(lake, repo, branch, base) if o.path not in new]
        updates.extend((path, None) for path in gone)
        updates.sort(key=lambda update: update[0])
    if not updates:
        return []
    lake.blocks.sync()
    writes.stage_rows(lake, repo, branch, updates)
    return staged


def _verify(locator: str, bare: str, key: bytes, token: str) -> None:
    try:
        verify(locator, key, token)
    except SignatureError as e:
        raise SignatureError(
            f"{e.message}; nothing imported: a manifest imported through a server must name its "
            "blocks by locators signed for you: export it with `lakectl manifest export --signed` "
            "(GET .../manifest?signed=true)",
            locator=bare,
        ) from None


def _directory(prefix: str) -> str:
    """A prefix names a directory: ``data`` and ``data/`` both mean ``data/``."""
    return prefix if not prefix or prefix.endswith("/") else prefix + "/"


def _size(bare: str) -> int:
    return int(bare.split("+")[1])
