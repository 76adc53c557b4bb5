"""Staging through a backing address in-process: a slot is bound to its branch and path, its
bytes are spared by a collection while it waits, and linking stages them without a copy."""

from __future__ import annotations

import hashlib
import io

import pytest

from lakectl.core import backing, porcelain
from lakectl.core import lake as lake_floor
from lakectl.core.lake import Lake
from lakectl.core.upkeep import gc
from lakectl.errors import InvalidArgument, SignatureError
from tests.unit.graphkit import REPO, T0
from tests.unit.test_gc_run import age_everything


def _write(lake: Lake, slot: backing.Slot, data: bytes) -> str:
    md5 = hashlib.md5(data).hexdigest()
    backing.write(lake, REPO, slot.upload_id, io.BytesIO(data), md5)
    return md5


def test_a_waiting_slot_keeps_its_blocks_through_a_collection_and_links_without_a_copy(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [T0]
    monkeypatch.setattr(lake_floor, "clock", lambda: clock[0])
    slot = backing.reserve(lake, REPO, "main", "late.bin")
    data = b"written, linked a day later" * 100
    md5 = _write(lake, slot, data)
    abandoned = backing.reserve(lake, REPO, "main", "never.bin")
    _write(lake, abandoned, b"never linked")
    age_everything(lake)
    clock[0] += 86_400
    gc.run(lake, REPO, grace_seconds=0)
    info = backing.link(lake, REPO, "main", "late.bin", slot.address, md5, len(data))
    assert b"".join(porcelain.read(lake, REPO, "main", "late.bin")) == data
    assert info.entry is not None and info.entry.checksum == md5
    clock[0] += (gc.UPLOAD_DAYS + 1) * 86_400  # the other slot, never linked, is dropped with its bytes
    age_everything(lake)
    before = set(lake.blocks.list())
    report = gc.run(lake, REPO, grace_seconds=0)
    assert report.uploads_aborted == 1
    gone = before - set(lake.blocks.list())
    assert gone == {f"{hashlib.md5(b'never linked').hexdigest()}+12"}
    assert b"".join(porcelain.read(lake, REPO, "main", "late.bin")) == data
    with pytest.raises(InvalidArgument, match="linked already, or expired"):
        backing.link(lake, REPO, "main", "never.bin", abandoned.address, "0" * 32, 12)


def test_write_tokens_are_signed_for_their_user_and_expire(lake: Lake) -> None:
    slot = backing.reserve(lake, REPO, "main", "x.bin")
    signed, expiry = backing.sign_write(lake, REPO, slot, "ada", "tok-1", expires_in=60, now=1000)
    assert expiry == 1060 and backing.is_write_token(signed)
    granted = backing.verify_write(lake, signed, lambda user: "tok-1", now=1059)
    assert (granted.repo, granted.upload_id, granted.user) == (REPO, slot.upload_id, "ada")
    for token, token_of, now in [
        (signed, lambda user: "tok-1", 1061),  # expired
        (signed, lambda user: "tok-2", 1000),  # the user's incarnation changed (deleted, recreated)
        (signed[:-1] + ("0" if signed[-1] != "0" else "1"), lambda user: "tok-1", 1000),
        ("w" + signed[2:], lambda user: "tok-1", 1000),
        ("wnot-base64!.00", lambda user: "tok-1", 1000),
    ]:
        with pytest.raises(SignatureError):
            backing.verify_write(lake, token, token_of, now=now)
