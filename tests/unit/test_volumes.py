"""VolumeSet: Keep's rendezvous placement, replicas on distinct volumes, fallback reads, failing volumes."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakectl.core.blocks import BlockAdapter
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.blocks.volumes import VolumeSet, local_volumes
from lakectl.errors import (
    BlockNotFound,
    CorruptBlock,
    InvalidArgument,
    InvalidLocator,
    StorageError,
)


def loc(data: bytes) -> str:
    return f"{hashlib.md5(data).hexdigest()}+{len(data)}"


def blocks(n: int) -> list[bytes]:
    return [f"block number {i}".encode() for i in range(n)]


def keep_order(locator: str, volume_ids: list[str]) -> list[str]:
    """Keep's probe order, computed independently: md5(hash + id) as hex, descending."""
    md5 = locator.split("+")[0]
    return sorted(volume_ids, key=lambda v: hashlib.md5((md5 + v).encode()).hexdigest(), reverse=True)


def block_file(root: Path, locator: str) -> Path:
    md5 = locator.split("+")[0]
    return root / md5[:3] / md5


class Breakable:
    """A local volume that can be switched to fail every call, and that counts syncs."""

    def __init__(self, root: Path) -> None:
        self.inner = LocalAdapter(root)
        self.broken = False
        self.syncs = 0

    def _check(self) -> None:
        if self.broken:
            raise StorageError("volume offline")

    def put(self, locator: str, data: bytes) -> None:
        self._check()
        self.inner.put(locator, data)

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        self._check()
        return self.inner.get(locator, offset, length)

    def exists(self, locator: str) -> bool:
        self._check()
        return self.inner.exists(locator)

    def touch(self, locator: str) -> bool:
        self._check()
        return self.inner.touch(locator)

    def modified(self, locator: str) -> float:
        self._check()
        return self.inner.modified(locator)

    def delete(self, locator: str) -> None:
        self._check()
        self.inner.delete(locator)

    def list(self) -> Iterator[str]:
        self._check()
        return self.inner.list()

    def sync(self) -> None:
        self._check()
        self.syncs += 1
        self.inner.sync()


def breakable_set(tmp_path: Path, n: int, replicas: int) -> tuple[VolumeSet, dict[str, Breakable]]:
    volumes = {f"vol{i}": Breakable(tmp_path / f"vol{i}") for i in range(n)}
    pairs: list[tuple[str, BlockAdapter]] = list(volumes.items())
    return VolumeSet(pairs, replicas), volumes


class Unused:
    """A volume for tests that only look at placement."""

    def put(self, locator: str, data: bytes) -> None:
        raise AssertionError("placement tests do no I/O")

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        raise AssertionError("placement tests do no I/O")

    def exists(self, locator: str) -> bool:
        raise AssertionError("placement tests do no I/O")

    def touch(self, locator: str) -> bool:
        raise AssertionError("placement tests do no I/O")

    def modified(self, locator: str) -> float:
        raise AssertionError("placement tests do no I/O")

    def delete(self, locator: str) -> None:
        raise AssertionError("placement tests do no I/O")

    def list(self) -> Iterator[str]:
        raise AssertionError("placement tests do no I/O")

    def sync(self) -> None:
        raise AssertionError("placement tests do no I/O")


def _fake(ids: list[str]) -> list[tuple[str, BlockAdapter]]:
    return [(v, Unused()) for v in ids]


# --- placement ------------------------------------------------------------------------------


def test_probe_order_is_keeps_rendezvous_order_whatever_the_configured_order() -> None:
    ids = ["zzzzz-bi6l4-000000000000000", "zzzzz-bi6l4-000000000000001", "disk-a", "disk-b"]
    forward = VolumeSet(_fake(ids))
    backward = VolumeSet(_fake(list(reversed(ids))))
    for data in blocks(200):
        expected = keep_order(loc(data), ids)
        assert forward.probe_order(loc(data)) == expected
        assert backward.probe_order(loc(data)) == expected


def test_a_thousand_blocks_spread_over_four_volumes(tmp_path: Path) -> None:
    roots = [tmp_path / f"disk{i}" for i in range(4)]
    volumes = local_volumes(roots)
    for data in blocks(1000):
        volumes.put(loc(data), data)
    per_volume = [len(list(LocalAdapter(root).list())) for root in roots]
    assert sum(per_volume) == 1000  # replicas=1: exactly one copy each
    for count in per_volume:
        assert 150 <= count <= 350, per_volume
    again = local_volumes(roots)  # a new process places (and finds) every block the same way
    for data in blocks(1000)[:50]:
        first = again.probe_order(loc(data))[0]
        assert block_file(Path(first), loc(data)).exists()


def test_adding_a_volume_moves_about_one_block_in_n() -> None:
    ids = [f"vol{i}" for i in range(4)]
    before = VolumeSet(_fake(ids))
    after = VolumeSet(_fake([*ids, "vol4"]))
    locators = [loc(d) for d in blocks(2000)]
    moved = [x for x in locators if before.probe_order(x)[0] != after.probe_order(x)[0]]
    assert 0.15 <= len(moved) / len(locators) <= 0.25  # ideal: 1/5
    assert all(after.probe_order(x)[0] == "vol4" for x in moved)  # only onto the new volume
    for x in locators:  # the old volumes keep their relative order
        assert [v for v in after.probe_order(x) if v != "vol4"] == before.probe_order(x)


def test_removing_a_volume_moves_only_its_blocks() -> None:
    ids = [f"vol{i}" for i in range(5)]
    before = VolumeSet(_fake(ids))
    after = VolumeSet(_fake(ids[:-1]))
    for x in (loc(d) for d in blocks(1000)):
        if before.probe_order(x)[0] != "vol4":
            assert after.probe_order(x)[0] == before.probe_order(x)[0]


def test_replicas_land_on_the_first_distinct_volumes_of_the_probe_order(tmp_path: Path) -> None:
    roots = [tmp_path / f"disk{i}" for i in range(3)]
    volumes = local_volumes(roots, replicas=2)
    for data in blocks(200):
        locator = loc(data)
        volumes.put(locator, data)
        holders = [str(r) for r in roots if block_file(r, locator).exists()]
        assert sorted(holders) == sorted(volumes.probe_order(locator)[:2])
    assert sorted(volumes.list()) == sorted(loc(d) for d in blocks(200))  # listed once each


def test_replicas_equal_to_the_volume_count_puts_everywhere(tmp_path: Path) -> None:
    roots = [tmp_path / f"disk{i}" for i in range(3)]
    volumes = local_volumes(roots, replicas=3)
    volumes.put(loc(b"everywhere"), b"everywhere")
    assert all(block_file(r, loc(b"everywhere")).exists() for r in roots)


# --- reads fall back ------------------------------------------------------------------------


def test_reads_fall_back_when_a_volume_directory_is_deleted(tmp_path: Path) -> None:
    roots = [tmp_path / f"disk{i}" for i in range(3)]
    volumes = local_volumes(roots, replicas=2)
    data = blocks(100)
    for d in data:
        volumes.put(loc(d), d)
    shutil.rmtree(roots[1])
    for d in data:
        assert volumes.get(loc(d)) == d
        assert volumes.get(loc(d), 3, 4) == d[3:7]
        assert volumes.exists(loc(d))


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_corrupt_copy_does_not_fail_the_read(tmp_path: Path, damage: str) -> None:
    roots = [tmp_path / f"disk{i}" for i in range(3)]
    volumes = local_volumes(roots, replicas=2)
    data = os.urandom(10_000)
    locator = loc(data)
    volumes.put(locator, data)
    first = Path(volumes.probe_order(locator)[0])
    path = block_file(first, locator)
    path.chmod(0o644)
    path.write_bytes(bytes([data[0] ^ 1]) + data[1:] if damage == "flip" else data[:10])
    assert volumes.get(locator) == data
    assert volumes.get(locator, 5000, 10) == data[5000:5010]


def test_a_put_of_the_same_bytes_heals_every_replica(tmp_path: Path) -> None:
    roots = [tmp_path / f"disk{i}" for i in range(3)]
    volumes = local_volumes(roots, replicas=2)
    data = os.urandom(10_000)
    volumes.put(loc(data), data)
    holders = volumes.probe_order(loc(data))[:2]
    for holder in holders:
        path = block_file(Path(holder), loc(data))
        path.chmod(0o644)
        path.write_bytes(bytes([data[0] ^ 1]) + data[1:])
    volumes.put(loc(data), data)
    for holder in holders:  # each copy on its own, not just the first intact one
        assert volumes.volume(holder).get(loc(data)) == data


def test_every_copy_corrupt_is_a_corrupt_block(tmp_path: Path) -> None:
    roots = [tmp_path / f"disk{i}" for i in range(3)]
    volumes = local_volumes(roots, replicas=2)
    data = b"x" * 100
    volumes.put(loc(data), data)
    for holder in volumes.probe_order(loc(data))[:2]:
        path = block_file(Path(holder), loc(data))
        path.chmod(0o644)
        path.write_bytes(b"y" * 100)
    with pytest.raises(CorruptBlock) as info:
        volumes.get(loc(data))
    assert isinstance(info.value.__cause__, CorruptBlock)


def test_no_copy_anywhere_is_block_not_found(tmp_path: Path) -> None:
    volumes = local_volumes([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(BlockNotFound):
        volumes.get(loc(b"absent"))
    assert not volumes.exists(loc(b"absent"))


# --- failing volumes ------------------------------------------------------------------------


def test_a_put_with_one_broken_volume_still_succeeds_with_one_replica(tmp_path: Path) -> None:
    volumes, parts = breakable_set(tmp_path, 3, replicas=1)
    parts["vol1"].broken = True
    data = blocks(60)
    for d in data:
        volumes.put(loc(d), d)
    diverted = [d for d in data if volumes.probe_order(loc(d))[0] == "vol1"]
    assert diverted  # some blocks would have gone to the broken volume...
    for d in diverted:  # ...and went to the next volume of their probe order instead
        assert parts[volumes.probe_order(loc(d))[1]].inner.exists(loc(d))
    for d in data:
        assert volumes.get(loc(d)) == d  # the broken volume's StorageError is skipped
        assert volumes.exists(loc(d))
    volumes.sync()  # the broken volume got no write, so it needs no barrier


def test_a_put_that_cannot_reach_its_replica_count_fails(tmp_path: Path) -> None:
    volumes, parts = breakable_set(tmp_path, 2, replicas=2)
    parts["vol0"].broken = True
    with pytest.raises(StorageError) as info:
        volumes.put(loc(b"data"), b"data")
    assert "stored 1 of 2 copies" in str(info.value)
    assert info.value.details["volumes"] == {"vol0": "volume offline"}
    assert isinstance(info.value.__cause__, StorageError)
    assert parts["vol1"].inner.exists(loc(b"data"))  # the copy made stays: harmless, reused


def test_get_reports_a_failing_volume_rather_than_not_found(tmp_path: Path) -> None:
    volumes, parts = breakable_set(tmp_path, 3, replicas=1)
    parts["vol2"].broken = True
    with pytest.raises(StorageError):  # the block may be on the volume that is down
        volumes.get(loc(b"absent"))
    assert not volumes.exists(loc(b"absent"))  # a false "no" only costs a put
    for part in parts.values():
        part.broken = True
    with pytest.raises(StorageError):
        volumes.exists(loc(b"absent"))


def test_delete_removes_every_copy_and_reports_one_it_could_not(tmp_path: Path) -> None:
    volumes, parts = breakable_set(tmp_path, 3, replicas=3)
    volumes.put(loc(b"gone"), b"gone")
    parts["vol0"].broken = True
    with pytest.raises(StorageError):
        volumes.delete(loc(b"gone"))
    assert not parts["vol1"].inner.exists(loc(b"gone"))
    assert not parts["vol2"].inner.exists(loc(b"gone"))
    parts["vol0"].broken = False
    volumes.delete(loc(b"gone"))
    assert not volumes.exists(loc(b"gone"))


def test_list_fails_rather_than_return_a_partial_listing(tmp_path: Path) -> None:
    volumes, parts = breakable_set(tmp_path, 3, replicas=1)
    for d in blocks(10):
        volumes.put(loc(d), d)
    parts["vol2"].broken = True
    with pytest.raises(StorageError, match="vol2"):
        list(volumes.list())


def test_sync_covers_only_written_volumes_and_retries_a_failed_one(tmp_path: Path) -> None:
    volumes, parts = breakable_set(tmp_path, 3, replicas=3)
    volumes.sync()
    assert [p.syncs for p in parts.values()] == [0, 0, 0]  # nothing written yet
    volumes.put(loc(b"a"), b"a")
    parts["vol1"].broken = True
    with pytest.raises(StorageError):
        volumes.sync()
    parts["vol1"].broken = False
    volumes.sync()  # vol1 is still owed its barrier
    assert [p.syncs for p in parts.values()] == [1, 1, 1]
    volumes.sync()
    assert [p.syncs for p in parts.values()] == [1, 1, 1]


# --- arguments ------------------------------------------------------------------------------


def test_put_of_data_of_another_size_touches_no_volume(tmp_path: Path) -> None:
    volumes, _ = breakable_set(tmp_path, 3, replicas=2)
    with pytest.raises(InvalidLocator):
        volumes.put(loc(b"abc"), b"abcd")
    assert list(volumes.list()) == []


@pytest.mark.parametrize(
    ("pairs", "replicas"),
    [
        ([], 1),
        (["a"], 0),
        (["a", "b"], 3),
        (["a", "b"], True),
        (["a", "a"], 1),
        ([""], 1),
    ],
)
def test_bad_volume_sets_are_refused(pairs: list[str], replicas: int) -> None:
    with pytest.raises(InvalidArgument):
        VolumeSet(_fake(pairs), replicas)


def test_a_volume_must_be_a_block_adapter() -> None:
    with pytest.raises(InvalidArgument):
        VolumeSet([("a", object())])  # type: ignore[list-item]


def test_local_volumes_are_named_by_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    volumes = local_volumes(["one", "./two/", tmp_path / "three"], replicas=2)
    assert volumes.volume_ids == [str(tmp_path / "one"), str(tmp_path / "two"), str(tmp_path / "three")]
    assert volumes.replicas == 2
    with pytest.raises(InvalidArgument):
        local_volumes("one")
    with pytest.raises(InvalidArgument):
        local_volumes(["one", "one/"])  # the same directory twice
    assert Counter(type(volumes.volume(v)) for v in volumes.volume_ids) == {LocalAdapter: 3}


def test_temporary_files_of_every_volume_name_their_volume(tmp_path: Path) -> None:
    from lakectl.core.blocks import HasTemporaries

    volumes = local_volumes([tmp_path / "v1", tmp_path / "v2"])
    md5 = "0" * 32
    for vid in volumes.volume_ids:
        os.makedirs(os.path.join(vid, "000"), exist_ok=True)
        with open(os.path.join(vid, "000", f".{md5}.{'ab' * 8}.tmp"), "wb") as f:
            f.write(b"x" * 3)
    assert isinstance(volumes, HasTemporaries)
    found = sorted(volumes.temporaries(), key=lambda t: t.volume or "")
    assert [(t.volume, t.name, t.size) for t in found] == [
        (vid, f"000/.{md5}.{'ab' * 8}.tmp", 3) for vid in sorted(volumes.volume_ids)
    ]
    assert volumes.remove_temporary(found[0]) is True
    assert [t.volume for t in volumes.temporaries()] == [found[1].volume]
    assert not os.path.exists(os.path.join(str(found[0].volume), found[0].name))
