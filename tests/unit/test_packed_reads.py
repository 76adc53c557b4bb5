"""A packed small object is read alone and checked against its own md5, not by reading and
hashing its whole pack (up to 1 MiB for a file of a few KiB); a rotten byte in it is still caught,
and one elsewhere in the pack no longer keeps it from being read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakectl.core import listing, opening, porcelain, writes
from lakectl.core.blocks.data import parse_segment
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.lake import Lake
from lakectl.errors import CorruptBlock
from tests.rot import flip_byte


def _packed(tmp_path: Path) -> tuple[Lake, dict[str, bytes], dict[str, tuple[str, int, int]]]:
    """A lake with three small files packed into one block; each file's (pack md5, offset, length)."""
    lake = opening.open_lake(str(tmp_path / "lake"))
    porcelain.create_repo(lake, "repo")
    data = {name: os.urandom(3000 + i) for i, name in enumerate(("a.bin", "b.bin", "c.bin"))}
    for name, content in data.items():
        (tmp_path / name).write_bytes(content)
    writes.upload_files(lake, "repo", "main", [(name, str(tmp_path / name)) for name in data])
    where = {}
    for info in listing.list_objects(lake, "repo", "main"):
        assert info.entry is not None and len(info.entry.locators) == 1
        bare, _, offset, length = parse_segment(info.entry.locators[0])
        where[info.path] = (bare.split("+")[0], offset, length)
    assert len({md5 for md5, _, _ in where.values()}) == 1, "the three files share one pack"
    return lake, data, where


def test_a_rotten_byte_elsewhere_in_the_pack_does_not_keep_an_object_from_being_read(tmp_path: Path) -> None:
    lake, data, where = _packed(tmp_path)
    md5, offset, _ = where["b.bin"]
    assert isinstance(lake.blocks, LocalAdapter)
    flip_byte(Path(lake.blocks.root), md5, offset + 10)
    for name in ("a.bin", "c.bin"):
        assert b"".join(porcelain.read(lake, "repo", "main", name)) == data[name]
    with pytest.raises(CorruptBlock):
        b"".join(porcelain.read(lake, "repo", "main", "b.bin"))
    # A range of an object reads and verifies its whole pack, as before: rotten is rotten.
    with pytest.raises(CorruptBlock):
        b"".join(porcelain.read(lake, "repo", "main", "a.bin", 0, 10))


def test_a_rotten_byte_in_the_object_itself_is_caught(tmp_path: Path) -> None:
    lake, _, where = _packed(tmp_path)
    md5, offset, length = where["c.bin"]
    assert isinstance(lake.blocks, LocalAdapter)
    flip_byte(Path(lake.blocks.root), md5, offset + length - 1)
    with pytest.raises(CorruptBlock):
        b"".join(porcelain.read(lake, "repo", "main", "c.bin"))


def test_many_packed_objects_read_a_block_at_a_time_and_a_rotten_pack_is_caught(tmp_path: Path) -> None:
    """``read_small_objects``: the objects of one pack from one read of the pack, verified whole
    (a rotten byte anywhere in it is ``CorruptBlock``: its objects are not handed out)."""
    from lakectl.core.blocks.data import read_small_objects

    lake, data, where = _packed(tmp_path)
    infos = {i.path: i for i in listing.list_objects(lake, "repo", "main")}
    names = sorted(data)
    tokens = [infos[n].entry.locators for n in names]  # type: ignore[union-attr]
    calls = []
    real_get = lake.blocks.get

    def counting_get(*args: object, **kwargs: object) -> bytes:
        calls.append(args)
        return real_get(*args, **kwargs)  # type: ignore[arg-type]

    lake.blocks.get = counting_get  # type: ignore[method-assign]
    assert read_small_objects(lake.blocks, tokens) == [data[n] for n in names]
    assert len(calls) == 1
    lake.blocks.get = real_get  # type: ignore[method-assign]
    md5, offset, _ = where["c.bin"]
    assert isinstance(lake.blocks, LocalAdapter)
    flip_byte(Path(lake.blocks.root), md5, offset + 10)
    with pytest.raises(CorruptBlock):
        read_small_objects(lake.blocks, tokens)
    lake.close()
