"""fsck in-process: damage found and named, what is stored for nothing listed, copies repaired."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from lakectl.core import multipart, opening, porcelain, writes
from lakectl.core.blocks.volumes import VolumeSet, local_volumes
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.lake import Lake
from lakectl.core.upkeep import fsck
from lakectl.errors import RepositoryNotFound

REPO, OTHER = "repo", "other"


def block_of(lake: Lake, repo: str, ref: str, path: str) -> str:
    entry = porcelain.stat(lake, repo, ref, path).entry
    assert entry is not None and len(entry.locators) == 1
    return entry.locators[0].split(":", 1)[0]


def file_of(root: str | Path, locator: str) -> Path:
    md5 = locator.split("+")[0]
    return Path(root) / md5[:3] / md5


def flip_byte(path: Path, offset: int = 0) -> None:
    os.chmod(path, 0o644)  # blocks are read-only files
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def leave_temporary(root: str | Path, data: bytes) -> str:
    md5 = hashlib.md5(data).hexdigest()
    name = f"{md5[:3]}/.{md5}.{os.urandom(8).hex()}.tmp"
    (Path(root) / md5[:3]).mkdir(exist_ok=True)
    (Path(root) / name).write_bytes(data[: len(data) // 2])
    return name


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lk = opening.open_lake(str(tmp_path / "lake"))
    porcelain.create_repo(lk, REPO)
    porcelain.create_repo(lk, OTHER)
    for name in ("a.txt", "b.txt", "c.txt"):
        writes.upload(lk, REPO, "main", f"data/{name}", f"the content of {name}\n".encode())
    porcelain.commit(lk, REPO, "main", "three files", committer="t")
    writes.upload(lk, OTHER, "main", "x.txt", b"in the other repository\n")
    porcelain.commit(lk, OTHER, "main", "one file", committer="t")
    return lk


def root(lake: Lake) -> str:
    return str(lake.blocks.root)  # type: ignore[attr-defined]


def test_a_healthy_lake_is_ok(lake: Lake) -> None:
    report = fsck.check(lake)
    assert report.ok and report.damaged == ()
    assert (report.repositories, report.commits) == (2, 4)  # each repository's initial commit too
    assert report.blocks == len(set(lake.blocks.list())), "every stored block is referenced"
    assert report.bytes == sum(int(b.split("+")[1]) for b in lake.blocks.list())
    assert report.to_dict()["orphaned"] == {"count": 0, "bytes": 0, "locators": []}
    assert report.to_dict()["temporaries"] == {"count": 0, "bytes": 0, "files": []}


def test_damage_is_named_and_what_is_stored_for_nothing_is_listed(lake: Lake) -> None:
    corrupt = block_of(lake, REPO, "main", "data/a.txt")
    missing = block_of(lake, REPO, "main", "data/b.txt")
    flip_byte(file_of(root(lake), corrupt), 3)
    os.unlink(file_of(root(lake), missing))
    orphan = b"written, never linked"
    orphan_locator = f"{hashlib.md5(orphan).hexdigest()}+{len(orphan)}"
    lake.blocks.put(orphan_locator, orphan)
    temporary = leave_temporary(root(lake), b"a put killed half-way")
    head = porcelain.get_commit(lake, REPO, "main").id

    report = fsck.check(lake)
    assert not report.ok
    d = report.to_dict()
    assert d["ok"] is False and d["repaired"] == 0 and d["unrepaired"] == 2
    assert d["corrupt"] == [
        {
            "locator": corrupt,
            "kind": "data",
            "repository": REPO,
            "commit": head,
            "branch": None,
            "upload": None,
            "path": "data/a.txt",
            "volume": None,
            "repaired": False,
        }
    ]
    assert [(m["locator"], m["commit"], m["path"]) for m in d["missing"]] == [(missing, head, "data/b.txt")]
    assert d["orphaned"] == {"count": 1, "bytes": len(orphan), "locators": [orphan_locator]}
    [found] = d["temporaries"]["files"]
    assert (found["name"], found["volume"], found["size"]) == (temporary, None, 10)
    assert fsck.check(lake, OTHER).ok, "the other repository references none of it"


def test_one_repository_is_checked_alone(lake: Lake) -> None:
    os.unlink(file_of(root(lake), block_of(lake, OTHER, "main", "x.txt")))
    lake.blocks.put(f"{hashlib.md5(b'orphan').hexdigest()}+6", b"orphan")
    report = fsck.check(lake, REPO)
    assert report.ok and (report.repositories, report.commits) == (1, 2)
    assert report.to_dict()["orphaned"] is None and report.to_dict()["temporaries"] is None
    [damage] = fsck.check(lake, OTHER).damaged
    assert (damage.problem, damage.origin.path) == (fsck.Problem.MISSING, "x.txt")
    with pytest.raises(RepositoryNotFound):
        fsck.check(lake, "nope")


def test_a_missing_range_or_metarange_names_its_commit(lake: Lake) -> None:
    head = porcelain.get_commit(lake, REPO, "main")
    [info] = lake.trees.ranges(head.meta_range_id)
    os.unlink(file_of(root(lake), info.id))
    flip_byte(file_of(root(lake), porcelain.get_commit(lake, OTHER, "main").meta_range_id), 10)
    d = fsck.check(lake).to_dict()
    assert [(m["kind"], m["repository"], m["commit"], m["path"]) for m in d["missing"]] == [
        ("range", REPO, head.id, None)
    ]
    other = porcelain.get_commit(lake, OTHER, "main")
    assert [(c["kind"], c["repository"], c["commit"]) for c in d["corrupt"]] == [
        ("metarange", OTHER, other.id)
    ]
    # What an unreadable range or metarange names is not walked: the three files' blocks, and
    # the other repository's page, range and file, count as orphaned.
    assert d["orphaned"]["count"] == 6


def test_a_missing_page_names_its_commit_and_hides_what_it_names(lake: Lake) -> None:
    head = porcelain.get_commit(lake, REPO, "main")
    [page] = lake.ranges.pages(head.meta_range_id)
    [info] = lake.trees.ranges(head.meta_range_id)
    os.unlink(file_of(root(lake), page.id))
    d = fsck.check(lake, REPO).to_dict()
    assert [(m["kind"], m["commit"], m["locator"]) for m in d["missing"]] == [("page", head.id, page.id)]
    d = fsck.check(lake).to_dict()
    assert info.id in d["orphaned"]["locators"]


def test_staged_entries_and_uploads_in_flight_are_checked(lake: Lake) -> None:
    writes.upload(lake, REPO, "main", "staged.txt", b"staged, not committed\n")
    staged = block_of(lake, REPO, "main", "staged.txt")
    upload = multipart.create(lake, REPO, "main", "big.bin")
    part = b"a part in flight"
    multipart.put_part(lake, REPO, upload.id, 1, part, hashlib.md5(part).hexdigest())
    os.unlink(file_of(root(lake), staged))
    os.unlink(file_of(root(lake), f"{hashlib.md5(part).hexdigest()}+{len(part)}"))
    missing = {m["path"]: m for m in fsck.check(lake).to_dict()["missing"]}
    assert missing["staged.txt"]["branch"] == "main" and missing["staged.txt"]["commit"] is None
    assert missing["big.bin"]["upload"] == upload.id and missing["big.bin"]["commit"] is None


def test_progress_counts_every_byte(lake: Lake) -> None:
    seen: list[tuple[int, int]] = []
    report = fsck.check(lake, progress=lambda done, total: seen.append((done, total)))
    assert len(seen) == report.blocks and seen[-1] == (report.bytes, report.bytes)


# -- volume sets ---------------------------------------------------------------------------------


@pytest.fixture
def replicated(tmp_path: Path) -> Lake:
    lk = Lake(kv=MemoryStore(), blocks=local_volumes([tmp_path / "v1", tmp_path / "v2"], replicas=2))
    porcelain.create_repo(lk, REPO)
    for i in range(4):
        writes.upload(lk, REPO, "main", f"f{i}.txt", f"file {i}\n".encode())
    porcelain.commit(lk, REPO, "main", "four files", committer="t")
    return lk


def test_repair_rewrites_bad_copies_from_intact_replicas(replicated: Lake) -> None:
    volumes = replicated.blocks
    assert isinstance(volumes, VolumeSet)
    v1, v2 = volumes.volume_ids
    corrupt = block_of(replicated, REPO, "main", "f0.txt")
    missing = block_of(replicated, REPO, "main", "f1.txt")
    lost = block_of(replicated, REPO, "main", "f2.txt")
    flip_byte(file_of(v1, corrupt))
    os.unlink(file_of(v2, missing))
    os.unlink(file_of(v1, lost))
    os.unlink(file_of(v2, lost))
    assert b"".join(porcelain.read(replicated, REPO, "main", "f0.txt")) == b"file 0\n", "reads fall back"

    found = fsck.check(replicated)
    assert {(d.locator, d.problem, d.volume, d.repaired) for d in found.damaged} == {
        (corrupt, fsck.Problem.CORRUPT, v1, False),
        (missing, fsck.Problem.MISSING, v2, False),
        (lost, fsck.Problem.MISSING, v1, False),
        (lost, fsck.Problem.MISSING, v2, False),
    }, "a bad copy is found even where a read through the set hides it"

    repaired = fsck.check(replicated, repair=True)
    assert {(d.locator, d.volume, d.repaired) for d in repaired.damaged} == {
        (corrupt, v1, True),
        (missing, v2, True),
        (lost, v1, False),
        (lost, v2, False),
    }
    assert repaired.to_dict()["repaired"] == 2 and repaired.to_dict()["unrepaired"] == 2
    assert volumes.volume(v1).get(corrupt) == b"file 0\n"
    assert volumes.volume(v2).get(missing) == b"file 1\n"
    again = fsck.check(replicated)
    assert {d.locator for d in again.damaged} == {lost}, "only the block with no intact copy is left"


def test_repair_leaves_a_lake_whose_damage_it_could_mend_ok(replicated: Lake) -> None:
    v1, _ = replicated.blocks.volume_ids  # type: ignore[attr-defined]
    flip_byte(file_of(v1, block_of(replicated, REPO, "main", "f3.txt")))
    assert not fsck.check(replicated).ok
    assert fsck.check(replicated, repair=True).ok
    assert fsck.check(replicated).ok and fsck.check(replicated).damaged == ()


def test_temporaries_of_a_volume_set_name_their_volume(replicated: Lake) -> None:
    v1, _ = replicated.blocks.volume_ids  # type: ignore[attr-defined]
    name = leave_temporary(v1, b"half a block")
    [found] = fsck.check(replicated).temporaries or ()
    assert (found.volume, found.name) == (v1, name) and found.modified <= time.time()
