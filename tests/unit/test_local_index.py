"""The working copy's index: save/load round trip and updates, against a plain dict."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.client.workcopy.index import Index, scan
from lakectl.core.blocks.data import BLOCK_SIZE, Checksummer, file_checksum, object_checksum

Entry = tuple[int, int, int, str]
names = st.text(
    st.characters(blacklist_characters="\0/", blacklist_categories=("Cs",)), min_size=1, max_size=8
)
entries = st.dictionaries(
    names,
    st.tuples(
        st.integers(0, 2**40),
        st.integers(-1, 2**62),
        st.integers(-1, 2**40),
        st.text("0123456789abcdef", min_size=32, max_size=32),
    ),
)


def as_dict(index: Index) -> dict[str, Entry]:
    return {p: (s, m, i, c) for p, s, m, i, c in index.entries()}


@settings(max_examples=60, deadline=None)
@given(entries, entries, st.sets(names), st.lists(names, unique=True), names)
def test_updates_and_round_trip(
    tmp_path_factory: object,
    base: dict[str, Entry],
    updates: dict[str, Entry],
    removed: set[str],
    pending: list[str],
    token: str,
) -> None:
    root = Path(tmp_path_factory.mktemp("ix"))  # type: ignore[attr-defined]
    index = Index.build((p, *v) for p, v in base.items())
    index.token, index.pending = token, pending
    fresh = index.updated(updates, removed)
    want = {p: v for p, v in base.items() if p not in removed or p in updates}
    want.update(updates)
    assert as_dict(fresh) == want
    assert fresh.paths == sorted(want)  # kept sorted: lookups and directories by bisection
    assert all(fresh.find(p) == i for i, p in enumerate(fresh.paths))
    # the monitor's token stays; a path set or removed is no longer pending
    assert fresh.token == token
    assert fresh.pending == [p for p in pending if p not in updates and p not in removed]
    fresh.save(str(root))
    loaded = Index.load(str(root))
    assert loaded is not None and as_dict(loaded) == want
    assert (loaded.token, loaded.pending) == (fresh.token, fresh.pending)


def test_an_index_of_the_first_format_is_read_and_saved_in_the_current_one(tmp_path: Path) -> None:
    # LKIX1: the stats, then each path and its checksum interleaved, NUL after each
    want = {"a/b.csv": (3, 10, 20, "a" * 32), "é": (0, -1, -1, "b" * 32 + "-2")}
    stats = b"".join(struct.pack("<qqq", *v[:3]) for v in want.values())
    texts = "".join(f"{p}\0{v[3]}\0" for p, v in want.items()).encode()
    (tmp_path / ".lakectl").mkdir()
    (tmp_path / ".lakectl" / "index").write_bytes(b"LKIX1\n" + struct.pack("<Q", 2) + stats + texts)
    old = Index.load(str(tmp_path))
    assert old is not None and as_dict(old) == want
    old.save(str(tmp_path))
    assert (tmp_path / ".lakectl" / "index").read_bytes().startswith(b"LKIX3\n")
    again = Index.load(str(tmp_path))
    assert again is not None and as_dict(again) == want


def test_an_index_of_the_second_format_is_read_without_a_token(tmp_path: Path) -> None:
    # LKIX2: the stats, the paths (their size first), then the checksums, NUL after each; new
    # paths were appended, so the entries may be out of order
    want = {"a/b.csv": (3, 10, 20, "a" * 32), "é": (0, -1, -1, "b" * 32 + "-2"), "a/a": (1, 2, 3, "c" * 32)}
    stats = b"".join(struct.pack("<qqq", *v[:3]) for v in want.values())
    paths = "".join(p + "\0" for p in want).encode()
    sums = "".join(v[3] + "\0" for v in want.values()).encode()
    (tmp_path / ".lakectl").mkdir()
    blob = b"LKIX2\n" + struct.pack("<Q", 3) + stats + struct.pack("<Q", len(paths)) + paths + sums
    (tmp_path / ".lakectl" / "index").write_bytes(blob)
    old = Index.load(str(tmp_path))
    assert old is not None and as_dict(old) == want and (old.token, old.pending) == ("", [])
    assert old.paths == ["a/a", "a/b.csv", "é"] and old.find("a/b.csv") == 1
    assert list(old.under("a/")) == [0, 1]


def test_a_damaged_index_is_not_read(tmp_path: Path) -> None:
    Index.build((f"d/f{i}", i, i, i, f"{i:032x}") for i in range(50)).save(str(tmp_path))
    path = tmp_path / ".lakectl" / "index"
    whole = path.read_bytes()
    for cut in (3, 10, 100, len(whole) // 2, len(whole) - 1):
        path.write_bytes(whole[:cut])
        assert Index.load(str(tmp_path)) is None, cut  # the caller builds it again from the lake
    path.write_bytes(whole)
    loaded = Index.load(str(tmp_path))
    assert loaded is not None and len(loaded) == 50


def test_many_removals_take_the_rebuilding_path() -> None:
    index = Index.build((f"f{i}", i, i, i, f"{i:032x}") for i in range(500))
    fresh = index.updated({"new": (1, 2, 3, "c" * 32)}, [f"f{i}" for i in range(0, 500, 2)])
    assert as_dict(fresh) == {
        **{f"f{i}": (i, i, i, f"{i:032x}") for i in range(1, 500, 2)},
        "new": (1, 2, 3, "c" * 32),
    }


def test_file_checksum_is_the_objects_checksum(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = os.urandom(3000)
    path.write_bytes(data)
    summer = Checksummer(1000)
    summer.update(data[:1234])
    summer.update(data[1234:])
    import hashlib

    digests = [hashlib.md5(data[i : i + 1000]).digest() for i in range(0, 3000, 1000)]
    assert file_checksum(str(path), 1000) == summer.hexdigest() == object_checksum(digests)
    assert file_checksum(str(path)) == hashlib.md5(data).hexdigest()  # one block of BLOCK_SIZE
    assert BLOCK_SIZE > 3000


def test_scan_of_an_empty_index_finds_everything_added(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_bytes(b"x")
    (tmp_path / ".lakefs_ref.yaml").write_text("src: lakefs://r/main/\n")
    os.symlink(tmp_path / "d" / "x", tmp_path / "link")
    found = scan(str(tmp_path), Index())
    assert (found.added, found.changed, found.removed) == (["d/x"], [], [])


def test_a_scan_shared_with_a_forked_walker_finds_what_one_process_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakectl.client.workcopy import index as ix

    root = tmp_path / "wc"
    # One top directory holding the rest: the scan goes a level deeper to find shares.
    files = {f"tables/t{t}/part-{i}.csv": b"%d,%d\n" % (t, i) for t in range(5) for i in range(40)}
    files.update({"top.txt": b"top\n", "tables/readme": b"r\n"})
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    entries = []
    for rel in files:
        st = (root / rel).stat()
        entries.append((rel, st.st_size, st.st_mtime_ns, st.st_ino, file_checksum(str(root / rel))))
    index = Index.build(entries)
    index.stamp_ns = max(e[2] for e in entries) + 10 * ix.RACY_NS  # no entry is racy
    (root / "tables/t0/part-1.csv").write_bytes(b"longer now\n")  # changed: size
    (root / "tables/t3/part-2.csv").write_bytes(b"3,9\n")  # changed: same size, new bytes
    same = root / "tables/t4/part-3.csv"
    same.write_bytes(same.read_bytes())  # touched: read, found unchanged
    (root / "tables/t2/part-5.csv").unlink()  # removed
    (root / "tables/t1/new.csv").write_bytes(b"new\n")  # added
    (root / "tables/t9").mkdir()
    (root / "tables/t9/x").write_bytes(b"x\n")  # added, in a new directory

    forks: list[int] = []
    real_fork = ix._fork
    monkeypatch.setattr(ix, "_fork", lambda *a: forks.append(1) or real_fork(*a))
    monkeypatch.setattr(ix, "FORK_FROM", 10**9)
    alone = scan(str(root), index)
    assert not forks
    monkeypatch.setattr(ix, "FORK_FROM", 0)
    shared = scan(str(root), index)
    assert forks == [1]
    assert (shared.added, shared.changed, shared.removed) == (
        ["tables/t1/new.csv", "tables/t9/x"],
        ["tables/t0/part-1.csv", "tables/t3/part-2.csv"],
        ["tables/t2/part-5.csv"],
    )
    assert (shared.added, shared.changed, shared.removed) == (alone.added, alone.changed, alone.removed)
    assert shared.stats == alone.stats and shared.hashed == alone.hashed
    assert set(shared.hashed) == {"tables/t3/part-2.csv", "tables/t4/part-3.csv"}


def test_a_scan_whose_own_share_fails_leaves_no_forked_walker_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakectl.client.workcopy import index as ix

    for d in range(4):
        for i in range(3000):  # a share big enough that the child's answer fills a pipe
            (tmp_path / f"d{d}").mkdir(exist_ok=True)
            (tmp_path / f"d{d}" / f"f{i}").write_bytes(b"")
    children: list[int] = []
    real_fork, real_walk = ix._fork, ix._Walk.walk

    def fork(*args: object) -> tuple[int, int] | None:
        child = real_fork(*args)  # type: ignore[arg-type]
        assert child is not None
        children.append(child[0])
        return child

    def walk(self: ix._Walk, units: list[tuple[str, str]], into: list[tuple[str, str]] | None = None) -> None:
        if into is None:  # the parent's share, once the child walks its own
            raise PermissionError(13, "Permission denied", units[0][0])
        real_walk(self, units, into)

    monkeypatch.setattr(ix, "FORK_FROM", 0)
    monkeypatch.setattr(ix, "_fork", fork)
    monkeypatch.setattr(ix._Walk, "walk", walk)
    with pytest.raises(PermissionError):
        scan(str(tmp_path), Index())
    assert len(children) == 1
    with pytest.raises(ChildProcessError):  # reaped: no child of this process is left
        os.waitpid(children[0], os.WNOHANG)


@settings(max_examples=100, deadline=None)
@given(
    st.sets(st.tuples(*[st.sampled_from(["a", "a.b", "a0", "b", "é", "a-"])] * 3)),
    st.lists(st.sampled_from(["a", "a.b", "a0", "é"]), min_size=1, max_size=2),
)
def test_the_entries_below_a_directory_are_one_slice(
    paths: set[tuple[str, ...]], directory: list[str]
) -> None:
    index = Index.build(("/".join(p), 1, 1, 1, "0" * 32) for p in paths)
    prefix = "/".join(directory) + "/"
    assert [index.paths[i] for i in index.under(prefix)] == [p for p in index.paths if p.startswith(prefix)]
