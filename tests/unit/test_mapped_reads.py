"""A download reads a local lake's whole blocks as checked mappings of their files (no copy out of
the page cache, no fresh pages to fault in): the same bytes as a copying read, in order, a rotten
block still refused, and mappings that stay valid for a consumer that keeps every chunk."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from lakectl.core.blocks.data import read_object, write_bytes
from lakectl.core.blocks.local import LocalAdapter
from lakectl.errors import CorruptBlock, MissingData
from tests.rot import flip_byte, lose_block

BLOCK = 1 << 16


def _object(tmp_path: Path) -> tuple[LocalAdapter, bytes, tuple[str, ...]]:
    adapter = LocalAdapter(str(tmp_path / "blocks"))
    data = os.urandom(5 * BLOCK + 123)  # five whole blocks and a short one
    written = write_bytes(adapter, data, BLOCK)
    return adapter, data, written.locators


@pytest.mark.parametrize("ahead", [0, 2])
def test_a_mapped_read_gives_the_bytes_of_a_copying_read(tmp_path: Path, ahead: int) -> None:
    adapter, data, locators = _object(tmp_path)
    chunks = list(read_object(adapter, locators, ahead=ahead, mapped=True))  # every chunk kept
    assert [len(c) for c in chunks] == [BLOCK] * 5 + [123]
    assert not all(isinstance(c, bytes) for c in chunks), "whole blocks come mapped"
    assert b"".join(chunks) == data
    assert (
        b"".join(read_object(adapter, locators, 10, 3 * BLOCK, ahead=ahead, mapped=True))
        == data[10 : 10 + 3 * BLOCK]
    )


@pytest.mark.parametrize("ahead", [0, 2])
def test_a_mapped_read_of_a_rotten_or_lost_block_fails_before_its_bytes(tmp_path: Path, ahead: int) -> None:
    adapter, data, locators = _object(tmp_path)
    third = locators[2].split("+")[0]
    flip_byte(Path(adapter.root), third, 100)
    got = []
    with pytest.raises(CorruptBlock):
        for chunk in read_object(adapter, locators, ahead=ahead, mapped=True):
            got.append(bytes(chunk))
    assert b"".join(got) == data[: 2 * BLOCK], "the blocks before the rotten one, nothing of it"
    lose_block(Path(adapter.root), locators[4].split("+")[0])
    with pytest.raises(MissingData):
        b"".join(read_object(adapter, locators[3:], ahead=ahead, mapped=True))


def test_an_empty_block_reads_empty(tmp_path: Path) -> None:
    adapter = LocalAdapter(str(tmp_path / "blocks"))
    written = write_bytes(adapter, b"", BLOCK)
    assert b"".join(read_object(adapter, written.locators, mapped=True)) == b""
    assert hashlib.md5(b"").hexdigest() == written.checksum
