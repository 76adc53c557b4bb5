"""The Spark fsck job against the in-process check: on the same damaged lake, the same report.

The lake has history (branches, a merge, a tag), small objects packed into one shared block,
content shared by two repositories, staged objects and an upload in flight; then damage of every
kind: a flipped byte, missing data blocks (committed, packed, staged), a missing range, a corrupt
metarange, an orphaned block and a leftover temporary file. Spark runs on the session-wide
``local[2]`` of tests/spark/conftest.py.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from lakectl.core import merging, multipart, opening, porcelain, writes
from lakectl.core.lake import Lake
from lakectl.core.upkeep import fsck
from lakectl.sparkjobs import fsck as spark_fsck

REPO, OTHER = "repo", "other"


def block_file(lake: Lake, locator: str) -> Path:
    md5 = locator.split("+")[0]
    return Path(lake.blocks.root) / md5[:3] / md5  # type: ignore[attr-defined]


def block_of(lake: Lake, repo: str, ref: str, path: str) -> str:
    entry = porcelain.stat(lake, repo, ref, path).entry
    assert entry is not None
    return entry.locators[0].split(":", 1)[0]


def flip(path: Path) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("fsck-spark")
    home = work / "lake"
    lake = opening.open_lake(str(home))
    porcelain.create_repo(lake, REPO)
    porcelain.create_repo(lake, OTHER)
    writes.upload(lake, REPO, "main", "a", b"a v1")
    writes.upload(lake, REPO, "main", "shared", b"in both repositories")
    first = porcelain.commit(lake, REPO, "main", "first", committer="t").id
    small = work / "small"
    small.mkdir()
    for i in range(5):
        (small / f"s{i}.txt").write_text(f"small file {i}\n")
    writes.upload_files(lake, REPO, "main", [(f"small/s{i}.txt", str(small / f"s{i}.txt")) for i in range(5)])
    porcelain.commit(lake, REPO, "main", "small files", committer="t")
    porcelain.create_branch(lake, REPO, "feature", "main")
    writes.upload(lake, REPO, "feature", "f", b"on feature")
    porcelain.commit(lake, REPO, "feature", "feature", committer="t")
    writes.upload(lake, REPO, "main", "a", b"a v2")
    porcelain.commit(lake, REPO, "main", "a v2", committer="t")
    merging.merge(lake, REPO, "feature", "main", committer="t")
    porcelain.create_tag(lake, REPO, "v1", "main")
    writes.upload(lake, REPO, "main", "staged", b"staged, not committed")
    upload = multipart.create(lake, REPO, "main", "big.bin")
    part = b"a part in flight"
    multipart.put_part(lake, REPO, upload.id, 1, part, hashlib.md5(part).hexdigest())
    writes.upload(lake, OTHER, "main", "copy", b"in both repositories")
    writes.upload(lake, OTHER, "main", "own", b"only in the other repository")
    porcelain.commit(lake, OTHER, "main", "other", committer="t")

    flip(block_file(lake, block_of(lake, REPO, first, "a")))  # a v1: only in old commits
    os.unlink(block_file(lake, block_of(lake, REPO, "main", "small/s2.txt")))  # the packed block
    os.unlink(block_file(lake, block_of(lake, REPO, "main", "staged")))
    os.unlink(block_file(lake, block_of(lake, REPO, "main", "shared")))  # named by both repositories
    feature = porcelain.get_commit(lake, REPO, "feature").meta_range_id
    os.unlink(block_file(lake, lake.trees.ranges(feature)[0].id))
    flip(block_file(lake, porcelain.get_commit(lake, OTHER, "main").meta_range_id))
    lake.blocks.put(f"{hashlib.md5(b'orphan').hexdigest()}+6", b"orphan")
    md5 = hashlib.md5(b"killed").hexdigest()
    (home / "blocks" / md5[:3]).mkdir(exist_ok=True)
    (home / "blocks" / md5[:3] / f".{md5}.{'1' * 16}.tmp").write_bytes(b"kil")
    lake.close()
    return home


def test_the_spark_job_reports_what_the_in_process_check_does(spark: object, damaged: Path) -> None:
    lake = opening.open_lake(str(damaged))
    try:
        expected = fsck.check(lake)
        assert spark_fsck.check(lake) == expected
        d = expected.to_dict()
        assert not expected.ok and d["unrepaired"] == len(d["missing"]) + len(d["corrupt"]) == 6
        assert {(m["kind"], m["path"]) for m in d["missing"]} == {
            ("data", "small/s0.txt"),  # the first path of the range naming the packed block
            ("data", "staged"),
            ("data", "shared"),
            ("range", None),
        }
        assert {(c["kind"], c["repository"]) for c in d["corrupt"]} == {("data", REPO), ("metarange", OTHER)}
        assert d["temporaries"]["count"] == 1 and d["orphaned"]["count"] >= 1
        for repo in (REPO, OTHER):
            assert spark_fsck.check(lake, repo) == fsck.check(lake, repo)
    finally:
        lake.close()


def test_fsck_spark_on_the_command_line(spark: object, damaged: Path, tmp_path: Path) -> None:
    env = {
        "LAKECTL_HOME": str(damaged),
        "LAKECTL_CONFIG": str(tmp_path / "no-config.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
    }

    def cli(*args: str) -> dict[str, object]:
        result = CliRunner().invoke(app, [*args, "--json"], env=env)
        assert result.exit_code == 7, (result.stdout, result.stderr, result.exception)
        answer: dict[str, object] = json.loads(result.stdout)
        return answer

    assert cli("fsck", "--spark", "local[2]") == cli("fsck")
