"""Small objects packed into shared blocks: segments, dedup, reproducible packs, manifests."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lakectl.core import changes, manifests, opening, porcelain, writes
from lakectl.core.blocks.data import (
    PACK_MAX,
    SMALL_OBJECT,
    AdapterPacks,
    Packer,
    Unpacked,
    WrittenObject,
    pack_files,
    parse_segment,
    read_object,
    segment_token,
)
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.journal import journal
from lakectl.core.lake import PROGRESS_EVERY, Lake
from lakectl.errors import InvalidLocator, StorageError


def blobs(n: int, size: int = 4096, seed: int = 0) -> dict[str, bytes]:
    return {f"f{i:05d}": bytes([(i + seed) % 251]) * 7 + os.urandom(size - 7) for i in range(n)}


def test_packed_objects_read_back_and_share_few_blocks(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path)
    data = blobs(600)
    packer = Packer(AdapterPacks(adapter))
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
    first = Packer(AdapterPacks(adapter))
    for key in sorted(data):
        first.add(key, data[key])
    one = first.close()
    assert one["dup"].locators == one["f00007"].locators
    before = set(adapter.list())
    again = Packer(AdapterPacks(adapter))
    for key in sorted(data):
        again.add(key, data[key])
    assert again.close() == one
    assert set(adapter.list()) == before  # the same files make the same packs: nothing new


def test_objects_are_handed_out_as_their_packs_are_cut_each_once(tmp_path: Path) -> None:
    """take_cut gives, in order, the objects whose packs are cut (what a remote client links while
    it packs the next files), each pack given to the sink with its layout; with close() they are
    the results a packer gives at the end."""
    data = blobs(700)
    data["f00003-dup"] = data["f00003"]  # stored once, handed out after its pack is cut
    data["f00004-empty"] = b""
    adapter = LocalAdapter(tmp_path / "a")
    sink = _Recording(adapter)
    packer = Packer(sink)
    taken: dict[str, object] = {}
    for key in sorted(data):
        packer.add(key, data[key])
        batch = packer.take_cut()
        assert not taken.keys() & batch.keys()
        taken.update(batch)
        assert packer.waiting + len(taken) == sorted(data).index(key) + 1
    assert len(sink.packs) >= 2 and len(taken) < len(data)  # some packs were cut before the end
    packer.cut()
    taken.update(packer.take_cut())
    assert list(taken) == sorted(data)
    whole = Packer(AdapterPacks(LocalAdapter(tmp_path / "b")))
    for key in sorted(data):
        whole.add(key, data[key])
    assert taken == whole.close()
    layouts = [lengths for _, lengths in sink.packs]
    assert sum(map(sum, layouts)) == sum(len(v) for k, v in data.items() if k != "f00003-dup")
    assert all(n > 0 for layout in layouts for n in layout)
    assert {locator for locator, _ in sink.packs} == set(adapter.list())  # every pack, stored


class _Recording(AdapterPacks):
    """Packs stored in a block adapter, each one's locator and segment lengths recorded."""

    def __init__(self, adapter: LocalAdapter) -> None:
        super().__init__(adapter)
        self.packs: list[tuple[str, list[int]]] = []

    def put_pack(self, locator: str, data: bytes, lengths: list[int]) -> None:
        self.packs.append((locator, lengths))
        super().put_pack(locator, data, lengths)


def _local_files(tmp_path: Path, data: dict[str, bytes]) -> list[tuple[str, str]]:
    for name, content in data.items():
        (tmp_path / name).write_bytes(content)
    return [(f"k/{name}", str(tmp_path / name)) for name in sorted(data)]


def test_pack_files_hands_out_each_packed_file_once_and_leaves_large_ones_to_the_caller(
    tmp_path: Path,
) -> None:
    """The loop both uploads run: large files yielded in their place, unread; with ``hand_out``
    the packed ones come in batches as their packs are cut, and add up to what packing every
    file at the end gives; progress counts every file read."""
    (tmp_path / "src").mkdir()
    data = blobs(700)
    data["f00100-large"] = os.urandom(SMALL_OBJECT + 1)
    files = _local_files(tmp_path / "src", data)
    calls: list[int] = []
    sink = AdapterPacks(LocalAdapter(tmp_path / "a"))
    steps = list(pack_files(files, sink, hand_out=50, progress=calls.append, every=64))
    large = Unpacked("k/f00100-large", str(tmp_path / "src" / "f00100-large"))
    assert [s for s in steps if isinstance(s, Unpacked)] == [large]
    batches = [s for s in steps if not isinstance(s, Unpacked)]
    assert len(batches) >= 2 and all(batches)
    handed: dict[str, WrittenObject] = {}
    for batch in batches:
        assert not handed.keys() & batch.keys()
        handed.update(batch)
    assert list(handed) == [key for key, _ in files if key != large.path]
    # Without hand_out: the large file in its place, then every packed one at the end, the same.
    assert list(pack_files(files, AdapterPacks(LocalAdapter(tmp_path / "b")))) == [large, handed]
    assert calls == [64, 102 - 64, *[64] * 9, 701 - 102 - 9 * 64]  # groups, the large file, the tail


def test_segment_tokens_are_validated() -> None:
    loc = "0" * 32 + "+10"
    assert parse_segment(loc) == (loc, 10, 0, 10)
    assert parse_segment(f"{loc}:2:3") == (loc, 10, 2, 3)
    assert segment_token(loc, 0, 10) == loc
    for bad in (f"{loc}:8:3", f"{loc}:1", "../x", f"{loc}:-1:2"):
        with pytest.raises(InvalidLocator):
            parse_segment(bad)


def test_upload_files_packs_and_manifest_round_trip_copies_nothing(tmp_path: Path) -> None:
    lake = opening.open_lake(str(tmp_path / "lake"))
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
    writes.upload_files(lake, "packs", "main", files)
    porcelain.commit(lake, "packs", "main", "packed")
    for path, local in files:
        assert b"".join(porcelain.read(lake, "packs", "main", path)) == Path(local).read_bytes()

    def stored() -> set[str]:
        """The blocks but the journal's (sealed, so that none is left in its log)."""
        journal.flush(lake)
        return set(lake.blocks.list()) - journal.sealed_blocks(lake.kv)

    blocks_before = stored()
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
    assert stored() == blocks_before


class _Failing:
    """A pack sink whose second pack fails, as a full disk would."""

    def __init__(self) -> None:
        self.puts = 0

    def put_pack(self, locator: str, data: bytes, lengths: list[int]) -> None:
        self.puts += 1
        if self.puts == 2:
            raise StorageError(f"cannot write block {locator}: no space left", locator=locator)


def test_packs_stored_by_a_pool_are_the_packs_stored_in_line(tmp_path: Path) -> None:
    data = blobs(900)
    data["dup-late"] = data["f00003"]  # its first copy is in a pack long stored by then
    data["f00899-dup"] = data["f00899"]  # its first copy is in the pack still being filled
    inline = Packer(AdapterPacks(LocalAdapter(tmp_path / "inline")))
    with ThreadPoolExecutor(1) as pool:
        pooled = Packer(AdapterPacks(LocalAdapter(tmp_path / "pooled")), pool)
        for key in sorted(data):
            inline.add(key, data[key])
            pooled.add(key, data[key])
        assert pooled.close() == inline.close()
    assert pooled.results["dup-late"] == pooled.results["f00003"]
    assert pooled.results["f00899-dup"] == pooled.results["f00899"]
    assert len({parse_segment(w.locators[0])[0] for w in pooled.results.values()}) > 2


def test_a_pack_that_cannot_be_stored_fails_the_packer() -> None:
    with ThreadPoolExecutor(1) as pool:
        packer = Packer(_Failing(), pool)
        with pytest.raises(StorageError, match="no space left"):
            for key, content in sorted(blobs(900).items()):
                packer.add(key, content)
            packer.close()


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[Lake]:
    lake = opening.open_lake(str(tmp_path / "lake"))
    porcelain.create_repo(lake, "uploads")
    yield lake
    lake.close()


def test_upload_files_at_the_small_object_bound(lake: Lake, tmp_path: Path) -> None:
    sizes = {"empty": 0, "small": SMALL_OBJECT, "large": SMALL_OBJECT + 1}
    files = []
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(os.urandom(size))
        files.append((f"b/{name}", str(tmp_path / name)))
    infos = writes.upload_files(lake, "uploads", "main", files)
    assert [i.path for i in infos] == ["b/empty", "b/large", "b/small"]
    for info in infos:
        content = (tmp_path / info.path[2:]).read_bytes()
        assert info.entry is not None and info.entry.size == len(content)
        assert info.entry.checksum == hashlib.md5(content).hexdigest()
        assert b"".join(porcelain.read(lake, "uploads", "main", info.path)) == content
    large = next(i.entry for i in infos if i.path == "b/large")
    assert large is not None and large.locators == (f"{large.checksum}+{SMALL_OBJECT + 1}",)  # its own block


def test_upload_files_reads_past_short_reads(
    lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem may return fewer bytes than asked before the end (FUSE, network): reading
    goes on to the end, and no object is stored cut short."""
    content = os.urandom(10_000)
    (tmp_path / "f").write_bytes(content)
    real = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real(fd, min(n, 1000)))
    (info,) = writes.upload_files(lake, "uploads", "main", [("f", str(tmp_path / "f"))])
    monkeypatch.undo()
    assert info.entry is not None and info.entry.size == len(content)
    assert b"".join(porcelain.read(lake, "uploads", "main", "f")) == content


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_upload_files_names_the_file_it_cannot_read_and_stages_nothing(
    lake: Lake, tmp_path: Path, kind: str
) -> None:
    (tmp_path / "good").write_bytes(b"good")
    bad = tmp_path / "bad"
    if kind == "directory":
        bad.mkdir()
    files = [("a/good", str(tmp_path / "good")), ("a/bad", str(bad))]
    with pytest.raises(OSError) as caught:
        writes.upload_files(lake, "uploads", "main", files)
    assert caught.value.filename == str(bad)
    assert isinstance(caught.value, FileNotFoundError if kind == "missing" else IsADirectoryError)
    assert changes.diff_uncommitted(lake, "uploads", "main") == []  # nothing staged


def test_upload_files_reports_every_file_to_progress(lake: Lake, tmp_path: Path) -> None:
    """Small files in groups (a bar's update costs more than a 4 KiB file), a large one at once."""
    files = []
    for i in range(150):
        (tmp_path / f"s{i:03d}").write_bytes(b"%d" % i)
        files.append((f"s/{i:03d}", str(tmp_path / f"s{i:03d}")))
    (tmp_path / "large").write_bytes(os.urandom(SMALL_OBJECT + 1))
    files.append(("s/100-large", str(tmp_path / "large")))  # the 102nd in path order
    calls: list[int] = []
    writes.upload_files(lake, "uploads", "main", files, progress=calls.append)
    every = PROGRESS_EVERY
    assert calls == [every, 102 - every, 49]  # a group, the rest up to the large file, the tail


def test_upload_files_stages_nothing_when_the_blocks_cannot_be_made_durable(
    lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "f").write_bytes(b"data")

    def failing_sync() -> None:
        raise StorageError("syncfs failed: input/output error")

    monkeypatch.setattr(lake.blocks, "sync", failing_sync)
    with pytest.raises(StorageError, match="syncfs failed"):
        writes.upload_files(lake, "uploads", "main", [("f", str(tmp_path / "f"))])
    assert changes.diff_uncommitted(lake, "uploads", "main") == []
