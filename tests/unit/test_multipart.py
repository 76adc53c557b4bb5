"""Multipart uploads in the core (the library the S3 gateway calls): parts, completion rules, abort."""

from __future__ import annotations

import hashlib
import io
import os

import pytest

from lakectl.core import multipart as mp
from lakectl.core import porcelain, writes
from lakectl.core.lake import Lake
from lakectl.errors import (
    EntityTooSmall,
    InvalidArgument,
    InvalidPart,
    InvalidPartOrder,
    InvalidRef,
    UploadNotFound,
)
from tests.unit.graphkit import REPO, commit, view

BIG = mp.MIN_PART


def part(lake: Lake, upload: mp.Upload, number: int, data: bytes, in_memory: bool = True) -> mp.Part:
    source = data if in_memory else io.BytesIO(data)
    return mp.put_part(lake, REPO, upload.id, number, source, hashlib.md5(data).hexdigest())


def test_parts_become_one_object_without_copies(lake: Lake) -> None:
    upload = mp.create(lake, REPO, "main", "big.bin", "application/x-test", {"k": "v"})
    one, two = os.urandom(BIG), os.urandom(100)
    p2 = part(lake, upload, 2, two, in_memory=False)
    p1 = part(lake, upload, 1, one)
    assert [p.number for p in mp.list_parts(lake, REPO, upload.id)] == [1, 2]
    info = mp.complete(lake, REPO, upload.id, [(1, p1.etag), (2, f'"{p2.etag}"')])
    entry = info.entry
    assert entry is not None and entry.size == BIG + 100
    assert entry.locators == p1.locators + p2.locators, "the parts' blocks, linked as they are"
    assert entry.checksum == mp.multipart_etag([p1.etag, p2.etag]) and entry.checksum.endswith("-2")
    assert entry.content_type == "application/x-test" and dict(entry.metadata) == {"k": "v"}
    assert view(lake, "main") == {"big.bin": one + two}
    assert list(mp.list_uploads(lake, REPO)) == []
    with pytest.raises(UploadNotFound):
        mp.list_parts(lake, REPO, upload.id)


def test_completion_rules_stage_nothing_when_broken(lake: Lake) -> None:
    upload = mp.create(lake, REPO, "main", "x.bin")
    p1, p2 = part(lake, upload, 1, b"small"), part(lake, upload, 2, b"end")
    with pytest.raises(InvalidPartOrder):
        mp.complete(lake, REPO, upload.id, [(2, p2.etag), (1, p1.etag)])
    with pytest.raises(InvalidPart):
        mp.complete(lake, REPO, upload.id, [(1, p1.etag), (2, p1.etag)])
    with pytest.raises(InvalidPart):
        mp.complete(lake, REPO, upload.id, [(1, p1.etag), (3, p2.etag)])
    with pytest.raises(EntityTooSmall):
        mp.complete(lake, REPO, upload.id, [(1, p1.etag), (2, p2.etag)])
    with pytest.raises(InvalidArgument):
        mp.complete(lake, REPO, upload.id, [])
    assert view(lake, "main") == {}
    assert mp.complete(lake, REPO, upload.id, [(2, p2.etag)]).entry is not None  # the last part alone
    assert view(lake, "main") == {"x.bin": b"end"}


def test_a_part_uploaded_again_replaces_the_earlier_one(lake: Lake) -> None:
    upload = mp.create(lake, REPO, "main", "r.bin")
    part(lake, upload, 1, b"first")
    again = part(lake, upload, 1, b"second")
    assert [p.etag for p in mp.list_parts(lake, REPO, upload.id)] == [again.etag]
    mp.complete(lake, REPO, upload.id, [(1, again.etag)])
    assert view(lake, "main") == {"r.bin": b"second"}


def test_abort_forgets_the_upload(lake: Lake) -> None:
    upload = mp.create(lake, REPO, "main", "a.bin")
    part(lake, upload, 1, b"data")
    other = mp.create(lake, REPO, "main", "b.bin")
    mp.abort(lake, REPO, upload.id)
    assert [u.id for u in mp.list_uploads(lake, REPO)] == [other.id]
    for call in (
        lambda: part(lake, upload, 2, b"late"),
        lambda: mp.complete(lake, REPO, upload.id, [(1, "x")]),
        lambda: mp.abort(lake, REPO, upload.id),
    ):
        with pytest.raises(UploadNotFound):
            call()
    with pytest.raises(UploadNotFound):
        mp.get(lake, REPO, "../not-an-id")


def test_part_copies_cut_the_source_locators(lake: Lake) -> None:
    data = os.urandom(3000)
    commit(lake, "main", "source", placeholder="x")
    writes.upload(lake, REPO, "main", "src.bin", data)
    source = porcelain.stat(lake, REPO, "main", "src.bin").entry
    assert source is not None
    upload = mp.create(lake, REPO, "main", "copy.bin")
    copied = mp.copy_part(lake, REPO, upload.id, 1, source, 100, 1100)
    assert copied.etag == hashlib.md5(data[100:1100]).hexdigest() and copied.size == 1000
    with pytest.raises(InvalidArgument):
        mp.copy_part(lake, REPO, upload.id, 2, source, 10, 5000)
    mp.complete(lake, REPO, upload.id, [(1, copied.etag)])
    assert view(lake, "main")["copy.bin"] == data[100:1100]


def test_uploads_go_to_branches_and_numbers_are_bounded(lake: Lake) -> None:
    porcelain.create_tag(lake, REPO, "v1", "main")
    with pytest.raises(InvalidRef):
        mp.create(lake, REPO, "v1", "x.bin")
    upload = mp.create(lake, REPO, "main", "n.bin")
    for number in (0, mp.MAX_PART_NUMBER + 1):
        with pytest.raises(InvalidArgument):
            part(lake, upload, number, b"x")
