"""The Spark garbage-collection job against the in-process one: on copies of the same lake, the
same reports and the same blocks left; a dry run deletes nothing; everything retained reads back.

The lake is built once, with history: branches, merges, a deleted branch, a tag, resets, staged
objects, small objects packed into shared blocks, content shared with a second repository,
multipart uploads (one stale), commits past their retention, every block aged past the grace
period but one unreferenced young block. Each test runs on copies of it (``cp`` keeps mtimes).
Spark runs on the session-wide ``local[2]`` of tests/spark/conftest.py; each run costs seconds,
so the tests make few.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from lakectl.core import lake as lake_floor
from lakectl.core import listing, merging, multipart, opening, porcelain, writes
from lakectl.core.blocks.volumes import local_volumes
from lakectl.core.journal import journal, log
from lakectl.core.kv.memory import MemoryStore
from lakectl.core.lake import Lake
from lakectl.core.model import ResetKind
from lakectl.core.upkeep import gc, retention
from lakectl.errors import BlockNotFound, Gone, InvalidArgument
from lakectl.sparkjobs import gc as spark_gc

REPO, OTHER = "repo", "other"
T0 = 1_800_000_000
DAY = retention.DAY


@dataclass(frozen=True)
class Built:
    home: Path
    kept: dict[str, dict[str, bytes]]
    """ref (commit id, branch or tag) -> its objects (staged ones too, for a branch)."""
    other: dict[str, bytes]
    expired: tuple[str, ...]
    """Commits past retention whose own blocks a collection deletes."""
    shared: str
    """A block an expired commit shares with the other repository: it must stay."""
    young: str
    """An unreferenced block written after the aging: spared by the grace period."""


def snapshot(lake: Lake, repo: str, ref: str) -> dict[str, bytes]:
    return {
        o.path: b"".join(porcelain.read(lake, repo, ref, o.path))
        for o in listing.list_objects(lake, repo, ref)
    }


def bare(lake: Lake, repo: str, ref: str, path: str) -> set[str]:
    entry = porcelain.stat(lake, repo, ref, path).entry
    assert entry is not None
    return {token.split(":", 1)[0] for token in entry.locators}


def age_blocks(home: Path, seconds: float) -> None:
    past = time.time() - seconds
    for directory, _, files in os.walk(home / "blocks"):
        for name in files:
            os.utime(os.path.join(directory, name), (past, past))


def leave_temporary(home: Path, data: bytes) -> None:
    """A temporary block file, as a put in flight (or a killed one) has it."""
    md5 = hashlib.md5(data).hexdigest()
    (home / "blocks" / md5[:3]).mkdir(parents=True, exist_ok=True)
    (home / "blocks" / md5[:3] / f".{md5}.{os.urandom(8).hex()}.tmp").write_bytes(data)


def temporaries(lake: Lake) -> set[str]:
    return {p.name for p in Path(lake.blocks.root).glob("*/.*.tmp")}  # type: ignore[attr-defined]


def build(home: Path, work: Path) -> Built:
    clock = [T0 - 45 * DAY]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lake_floor, "clock", lambda: clock[0])
        lake = opening.open_lake(str(home))

        def commit(branch: str, message: str, **files: str) -> str:
            for path, content in files.items():
                writes.upload(lake, REPO, branch, path.replace("__", "/"), content.encode())
            clock[0] += 60
            return porcelain.commit(lake, REPO, branch, message, committer="t").id

        def day(offset: int) -> None:
            clock[0] = T0 + offset * DAY

        porcelain.create_repo(lake, REPO)
        porcelain.create_repo(lake, OTHER)
        day(-40)
        first = commit("main", "first", a="a v1", keep="unchanged since day -40", shared="shared v1")
        shared = bare(lake, REPO, first, "shared").pop()
        small = work / "small"
        small.mkdir()
        for i in range(5):  # packed into one shared block: tokens <md5>+<size>:off:len
            (small / f"s{i}.txt").write_text(f"small file {i}\n")
        writes.upload_files(
            lake, REPO, "main", [(f"small/s{i}.txt", str(small / f"s{i}.txt")) for i in range(5)]
        )
        packed = commit("main", "small files")
        day(-35)
        porcelain.create_branch(lake, REPO, "feature", "main")
        commit("feature", "feature", f__x="feature x")
        day(-30)
        second = commit("main", "a v2", a="a v2", shared="shared v2")
        day(-25)
        merging.merge(lake, REPO, "feature", "main", committer="t")
        day(-20)
        porcelain.create_branch(lake, REPO, "gone", "main")
        dropped = commit("gone", "on a branch deleted later", g="only on gone")
        porcelain.delete_branch(lake, REPO, "gone")
        porcelain.create_tag(lake, REPO, "v1", "main")
        day(-15)
        writes.delete_objects(lake, REPO, "main", ["small/s0.txt"])
        commit("main", "a v3", a="a v3")
        day(-10)
        porcelain.create_branch(lake, REPO, "dev", "main")
        commit("dev", "dev", d="dev d")
        writes.upload(lake, REPO, "dev", "draft", b"staged, then reset")
        merging.reset(lake, REPO, "dev")
        day(-8)
        stale = multipart.create(lake, REPO, "main", "stale.bin")
        part = b"a part abandoned for 8 days"
        multipart.put_part(lake, REPO, stale.id, 1, part, hashlib.md5(part).hexdigest())
        day(-3)
        commit("main", "a v4", a="a v4", b__c="b c")
        day(-1)
        fresh = multipart.create(lake, REPO, "main", "fresh.bin")
        part = b"a part in flight"
        multipart.put_part(lake, REPO, fresh.id, 1, part, hashlib.md5(part).hexdigest())
        writes.upload(lake, REPO, "main", "staged", b"staged, not committed")
        writes.upload(lake, REPO, "dev", "staged-dev", b"staged on dev")
        writes.upload(lake, OTHER, "main", "copy", b"shared v1")  # deduplicated: the same block
        porcelain.commit(lake, OTHER, "main", "shares a block", committer="t")
        day(0)
        retention.set_rules(
            lake,
            REPO,
            retention.GCRules.from_dict(
                {"default_retention_days": 7, "branches": [{"branch_id": "dev", "retention_days": 20}]}
            ),
        )
        # Kept: the heads, the tag (the merge), and dev~1 (within dev's 20 days); every other
        # commit is past its branch's days.
        kept_refs = ["main", "feature", "dev", "v1", "dev~1"]
        kept = {ref: snapshot(lake, REPO, ref) for ref in kept_refs}
        other = snapshot(lake, OTHER, "main")
        leave_temporary(home, b"a put killed half-way, 30 days ago")
        age_blocks(home, 30 * DAY)
        leave_temporary(home, b"a put in flight")
        writes.upload(lake, REPO, "main", "young", b"written just now, then reset")
        young = bare(lake, REPO, "main", "young").pop()
        merging.reset(lake, REPO, "main", ResetKind.OBJECT, "young")
        lake.close()
    return Built(home, kept, other, (first, packed, second, dropped), shared, young)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    work = tmp_path_factory.mktemp("gc-spark")
    return build(work / "lake", work)


def copy(built: Built, to: Path) -> Path:
    shutil.copytree(built.home, to)  # copy2: the aged mtimes stay
    return to


@pytest.fixture
def lakes(built: Built, tmp_path: Path) -> Iterator[tuple[Lake, Lake]]:
    """Two copies of the built lake: one for the in-process collector, one for the Spark job."""
    a = opening.open_lake(str(copy(built, tmp_path / "in-process")))
    b = opening.open_lake(str(copy(built, tmp_path / "spark")))
    yield a, b
    a.close()
    b.close()


def stored(lake: Lake) -> set[str]:
    """The lake's stored blocks but its journal's sealed batches: each lake seals its own entries
    (a collection's among them) when its keeper's interval comes, which a slower run reaches
    first."""
    return set(lake.blocks.list()) - set(journal.sealed_blocks(lake.kv))


def test_the_spark_job_collects_exactly_what_the_in_process_collector_does(
    spark: object, built: Built, lakes: tuple[Lake, Lake]
) -> None:
    here, there = lakes
    before = stored(there)
    assert stored(here) == before

    dry = spark_gc.run(there, REPO, dry_run=True, now=T0)
    assert stored(there) == before, "a dry run deletes nothing"
    assert len(list(multipart.list_uploads(there, REPO))) == 2, "a dry run aborts no upload"
    assert dry == gc.run(here, REPO, dry_run=True, now=T0)

    report = spark_gc.run(there, REPO, now=T0)
    expected = gc.run(here, REPO, now=T0)
    assert report == expected
    assert report.to_dict() == {**dry.to_dict(), "dry_run": False}, "a dry run reports what a run does"
    assert stored(there) == stored(here), "the same blocks are left"
    assert report.deleted == len(before - stored(there)) > 0
    assert (report.retained_commits, report.expired_commits, report.uploads_aborted) == (5, 5, 1)
    assert report.young == 1 and built.young in stored(there)
    assert (report.temporaries_deleted, report.temporaries_bytes_freed) == (1, 34)
    assert len(temporaries(there)) == 1, "the young temporary file stays"
    assert temporaries(there) == temporaries(here)
    assert [u.path for u in multipart.list_uploads(there, REPO)] == ["fresh.bin"]

    for ref, objects in built.kept.items():
        assert snapshot(there, REPO, ref) == objects, f"{ref} must read back byte for byte"
    assert snapshot(there, OTHER, "main") == built.other
    assert built.shared in stored(there), "a block the other repository shares stays"
    gone = 0
    for commit in built.expired:  # its tree stays, the data only it names is gone
        assert list(listing.list_objects(there, REPO, commit)), "the tree of an expired commit stays"
        try:
            snapshot(there, REPO, commit)
        except Gone:
            gone += 1
    assert gone > 0


def test_a_missing_range_fails_the_job_before_anything_is_deleted(
    spark: object, built: Built, tmp_path: Path
) -> None:
    lake = opening.open_lake(str(copy(built, tmp_path / "lake")))
    mid = porcelain.get_commit(lake, REPO, "main").meta_range_id
    missing = lake.trees.ranges(mid)[0].id
    os.unlink(tmp_path / "lake" / "blocks" / missing[:3] / missing.split("+")[0])
    before = stored(lake)
    with pytest.raises(BlockNotFound, match=re.escape(missing)):
        gc.run(lake, REPO, now=T0)
    with pytest.raises(BlockNotFound, match=re.escape(missing)):
        spark_gc.run(lake, REPO, now=T0)
    assert stored(lake) == before
    lake.close()


def test_other_block_stores_are_refused_before_anything_changes(tmp_path: Path) -> None:
    lake = Lake(kv=MemoryStore(), blocks=local_volumes([tmp_path / "v1", tmp_path / "v2"]))
    porcelain.create_repo(lake, REPO)
    upload = multipart.create(lake, REPO, "main", "stale.bin")
    with pytest.raises(InvalidArgument, match="without --spark"):
        spark_gc.run(lake, REPO, now=time.time() + 30 * DAY)
    assert [u.id for u in multipart.list_uploads(lake, REPO)] == [upload.id]
    local = opening.open_lake(str(tmp_path / "lake"))
    with pytest.raises(InvalidArgument, match="grace period"):
        spark_gc.run(local, REPO, grace_seconds=-1)
    local.close()


def cli(home: Path, *args: str) -> dict[str, object]:
    env = {
        "LAKECTL_HOME": str(home),
        "LAKECTL_CONFIG": str(home.parent / "no-config.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_COMMITTER": "tester",
    }
    result = CliRunner().invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    answer: dict[str, object] = json.loads(result.stdout)
    return answer


def spark_jobs(spark: Any) -> int:
    """The id of the last Spark job started (job ids count up; only the latest jobs are kept)."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)


def test_gc_run_spark_on_the_command_line(spark: object, tmp_path: Path) -> None:
    """Without rules: every commit stays, and only what nothing references goes."""
    home = tmp_path / "lake"
    cli(home, "repo", "create", f"lakefs://{REPO}")
    for version in ("one", "two"):
        (tmp_path / "data.txt").write_text(f"version {version}\n")
        cli(home, "fs", "upload", f"lakefs://{REPO}/main/data.txt", "--source", str(tmp_path / "data.txt"))
        cli(home, "commit", f"lakefs://{REPO}/main", "-m", version)
    (tmp_path / "draft.txt").write_text("reset before any commit\n")
    cli(home, "fs", "upload", f"lakefs://{REPO}/main/draft.txt", "--source", str(tmp_path / "draft.txt"))
    cli(home, "reset", f"lakefs://{REPO}/main")
    age_blocks(home, 7 * DAY)
    shutil.copytree(home, tmp_path / "in-process")

    jobs = spark_jobs(spark)
    report = cli(home, "gc", "run", f"lakefs://{REPO}", "--spark", "local[2]")
    assert spark_jobs(spark) > jobs, "the collection ran on Spark"
    expected = cli(tmp_path / "in-process", "gc", "run", f"lakefs://{REPO}")
    assert report == expected
    assert report["deleted"] == 1 and report["expired_commits"] == 0
    assert data_blocks(home) == data_blocks(tmp_path / "in-process")
    # The same verb: the journal has its entry (with the report), as it has the in-process one's.
    entries = cli(home, "journal", "tail", "--repo", f"lakefs://{REPO}", "-n", "1")
    assert [(e["event_type"], e["event_payload"]["report"]) for e in entries] == [
        ("garbage-collection", report)
    ]


def data_blocks(home: Path) -> set[str]:
    """The names of the lake's stored blocks but the journal's sealed batches and log files (each
    lake seals and logs its own entries, with its own writers and times)."""
    lake = opening.open_lake(str(home))
    try:
        batches = {locator.split("+")[0] for locator in journal.sealed_blocks(lake.kv)}
    finally:
        lake.close()
    stored = {p.name for p in (home / "blocks").glob("*/*") if p.parent.name != log.LOG_DIRECTORY}
    return stored - batches


def test_gc_run_spark_through_a_lakectl_server(spark: object, tmp_path: Path) -> None:
    """The server runs the job on the master the client names; the report has the same shape
    and counts as the server's in-process collection (dry runs, on the same lake)."""
    from server.config import load_settings
    from tests.server.conftest import serve

    data_dir = tmp_path / "server"
    with serve(load_settings(None, str(data_dir), environ={})) as live:
        env = live.cli_env(tmp_path)

        def remote(*args: str) -> dict[str, object]:
            result = CliRunner().invoke(app, [*args, "--json"], env=env)
            assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
            answer: dict[str, object] = json.loads(result.stdout)
            return answer

        remote("repo", "create", f"lakefs://{REPO}")
        (tmp_path / "data.txt").write_text("committed\n")
        remote("fs", "upload", f"lakefs://{REPO}/main/data.txt", "--source", str(tmp_path / "data.txt"))
        remote("commit", f"lakefs://{REPO}/main", "-m", "one")
        (tmp_path / "draft.txt").write_text("reset before any commit\n")
        remote("fs", "upload", f"lakefs://{REPO}/main/draft.txt", "--source", str(tmp_path / "draft.txt"))
        remote("reset", f"lakefs://{REPO}/main")
        age_blocks(data_dir, 7 * DAY)

        jobs = spark_jobs(spark)
        report = remote("gc", "run", f"lakefs://{REPO}", "--dry-run", "--spark", "local[2]")
        assert spark_jobs(spark) > jobs, "the server ran the collection on Spark"
        assert report == remote("gc", "run", f"lakefs://{REPO}", "--dry-run")
        assert report["deleted"] == 1 and report["dry_run"] is True


_CONCURRENT = """
import sys, threading
from pyspark.sql import SparkSession
from lakectl.core import opening
from lakectl.sparkjobs import gc as spark_gc

lakes = [opening.open_lake(home) for home in sys.argv[1:]]
reports, errors = [], []

def collect(lake):
    try:
        reports.append(spark_gc.run(lake, "repo", dry_run=True, grace_seconds=0).to_dict())
    except Exception as e:  # reported below
        errors.append(repr(e))

threads = [threading.Thread(target=collect, args=(lake,)) for lake in lakes]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
assert len(reports) == 2 and reports[0] == reports[1], reports
assert SparkSession.getActiveSession() is None, "the last collection out stops the session"
print("ok", reports[0]["blocks"])
"""


def test_concurrent_collections_share_the_session_they_start(spark: object, tmp_path: Path) -> None:
    """Two collections at once (as in a server) without a session of their own: one session is
    started for both, neither stops it under the other, and the last one stops it. In a child
    process: this one has the tests' session active."""
    import subprocess
    import sys

    homes = []
    for side in ("a", "b"):
        lake = opening.open_lake(str(tmp_path / side))
        porcelain.create_repo(lake, "repo")
        writes.upload(lake, "repo", "main", "data.txt", b"the same bytes on both sides")
        porcelain.commit(lake, "repo", "main", "one object")
        lake.close()
        homes.append(str(tmp_path / side))
    done = subprocess.run(
        [sys.executable, "-c", _CONCURRENT, *homes], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok ")
