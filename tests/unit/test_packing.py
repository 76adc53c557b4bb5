"""Small objects packed into shared blocks: segments, dedup, reproducible packs, manifests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakectl.core import manifests, porcelain
from lakectl.core.blocks.data import (
    PACK_MAX,
    Packer,
    parse_segment,
    read_object,
    segment_token,
)
from lakectl.core.blocks.local import LocalAdapter
from lakectl.errors import InvalidLocator


def blobs(n: int, size: int = 4096, seed: int = 0) -> dict[str, bytes]:
    return {f"f{i:05d}": bytes([(i + seed) % 251]) * 7 + os.urandom(size - 7) for i in range(n)}


def test_packed_objects_read_back_and_share_few_blocks(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path)
    data = blobs(600)
    packer = Packer(adapter)
    for key in sorted(data):
        packer.add(key, data[key])
    results = packer.close()
    for key, content in data.items():
        written = results[key]
        assert written.size == len(content)
        assert b"".join(read_object(adapter, written.locators)) == content
        assert b"".join(read_object(adapter, written.locators, 100, 50)) == content[100:150]
    blocks = list(adapter.list())
    assert 1 < len(blocks) <= 600 * 4096 // (PACK_MAX // 2) + 1


def test_equal_contents_are_stored_once_and_packs_are_reproducible(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path)
    data = blobs(300)
    data["dup"] = data["f00007"]
    first = Packer(adapter)
    for key in sorted(data):
        first.add(key, data[key])
    one = first.close()
    assert one["dup"].locators == one["f00007"].locators
    before = set(adapter.list())
    again = Packer(adapter)
    for key in sorted(data):
        again.add(key, data[key])
    assert again.close() == one
    assert set(adapter.list()) == before  # the same files make the same packs: nothing new


def test_segment_tokens_are_validated() -> None:
    loc = "0" * 32 + "+10"
    assert parse_segment(loc) == (loc, 10, 0, 10)
    assert parse_segment(f"{loc}:2:3") == (loc, 10, 2, 3)
    assert segment_token(loc, 0, 10) == loc
    for bad in (f"{loc}:8:3", f"{loc}:1", "../x", f"{loc}:-1:2"):
        with pytest.raises(InvalidLocator):
            parse_segment(bad)


def test_upload_files_packs_and_manifest_round_trip_copies_nothing(tmp_path: Path) -> None:
    lake = porcelain.open_lake(str(tmp_path / "lake"))
    porcelain.create_repo(lake, "packs")
    src = tmp_path / "src"
    files = []
    for i, (name, content) in enumerate(blobs(200).items()):
        local = src / f"d{i % 5}" / name
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(content)
        files.append((f"data/d{i % 5}/{name}", str(local)))
    big = src / "big.bin"
    big.write_bytes(os.urandom(200_000))
    files.append(("data/big.bin", str(big)))
    porcelain.upload_files(lake, "packs", "main", files)
    porcelain.commit(lake, "packs", "main", "packed")
    for path, local in files:
        assert b"".join(porcelain.read(lake, "packs", "main", path)) == Path(local).read_bytes()
    blocks_before = set(lake.blocks.list())
    text = manifests.export_manifest(lake, "packs", "main", "data")
    porcelain.create_branch(lake, "packs", "copy", "main")
    manifests.import_manifest(lake, "packs", "copy", "again", text)
    for path, local in files:
        copied = "again/" + path[len("data/") :]
        assert b"".join(porcelain.read(lake, "packs", "copy", copied)) == Path(local).read_bytes()
        assert (
            porcelain.stat(lake, "packs", "copy", copied).entry.checksum
            == porcelain.stat(lake, "packs", "main", path).entry.checksum
        )
    assert set(lake.blocks.list()) == blocks_before
