"""A metadata database belongs to its blocks: a missing or emptied database is never silently
replaced by a new lake over them, and garbage collection never runs over blocks a new database
inherited unless told (lakectl.core.identity)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from lakectl.core import identity, keys, opening, porcelain, writes
from lakectl.core.identity import Origin
from lakectl.core.upkeep import gc
from lakectl.errors import PreconditionFailed, StorageError
from lakectl.sparkjobs import gc as spark_gc

CONTENT = b"id\n1\n"


def _lake_with_data(home: Path) -> list[str]:
    """An embedded lake at ``home`` with one committed object; its stored blocks."""
    lake = opening.open_lake(str(home))
    porcelain.create_repo(lake, "data")
    writes.upload(lake, "data", "main", "a.csv", CONTENT)
    porcelain.commit(lake, "data", "main", "one", committer="t")
    blocks = lake.blocks
    lake.close()  # which seals the lake's journal: its batch is one of the blocks left
    return sorted(blocks.list())


def _lose_database(home: Path) -> None:
    for f in home.glob("lake.db*"):
        f.unlink()


def test_a_new_lake_gets_an_identity_once(tmp_path: Path) -> None:
    first = opening.open_lake(str(tmp_path / "lake"))
    assert first.identity is not None and first.identity.origin is Origin.CREATED
    assert first.identity.created_over_blocks == 0
    first.close()
    again = opening.open_lake(str(tmp_path / "lake"))
    assert again.identity is not None and again.identity.origin is Origin.FOUND
    assert again.identity.lake_id == first.identity.lake_id
    again.close()


@pytest.mark.parametrize("loss", ["missing", "zero bytes"])
def test_a_lost_database_over_stored_blocks_is_refused(tmp_path: Path, loss: str) -> None:
    home = tmp_path / "lake"
    stored = _lake_with_data(home)
    _lose_database(home)
    if loss == "zero bytes":
        (home / "lake.db").write_bytes(b"")
    with pytest.raises(StorageError, match=r"lake\.db is (missing|empty).*holds blocks") as refused:
        opening.open_lake(str(home))
    assert refused.value.details["database"] == str(home / "lake.db")
    # Nothing was created in its place, and every block is still there.
    assert [f.name for f in home.glob("lake.db*")] == ([] if loss == "missing" else ["lake.db"])
    assert (home / "lake.db").exists() is (loss != "missing")
    assert loss == "missing" or (home / "lake.db").stat().st_size == 0
    assert sorted(_blocks(home)) == stored


def _blocks(home: Path) -> list[str]:
    from lakectl.core.blocks.local import LocalAdapter

    return list(LocalAdapter(home / "blocks").list())


def test_an_emptied_database_over_stored_blocks_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    _lake_with_data(home)
    with sqlite3.connect(home / "lake.db") as db:
        db.execute("DELETE FROM kv")
    with pytest.raises(StorageError, match="holds no lake"):
        opening.open_lake(str(home))


def test_a_lake_older_than_the_identity_record_is_adopted(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    _lake_with_data(home)
    with sqlite3.connect(home / "lake.db") as db:
        db.execute("DELETE FROM kv WHERE partition = ? AND key = ?", (keys.LAKE, keys.IDENTITY))
    lake = opening.open_lake(str(home))
    assert lake.identity is not None and lake.identity.origin is Origin.ADOPTED
    assert identity.get(lake.kv) is not None and not lake.identity.created_over_blocks
    assert b"".join(porcelain.read(lake, "data", "main", "a.csv")) == b"id\n1\n"
    lake.close()


def test_creating_over_stored_blocks_on_request_holds_back_gc(tmp_path: Path) -> None:
    """``create`` (lakectl init) makes the new lake, but its collector refuses to delete the
    blocks nothing in the new database refers to, until told; dry runs only report."""
    home = tmp_path / "lake"
    stored = _lake_with_data(home)
    _lose_database(home)
    lake = opening.open_lake(str(home), create=True)
    assert lake.identity is not None and lake.identity.created_over_blocks == len(stored)
    assert lake.identity.just_created_over == len(stored)
    porcelain.create_repo(lake, "fresh")
    with pytest.raises(PreconditionFailed, match="--allow-preexisting-blocks"):
        gc.run(lake, "fresh", grace_seconds=0)
    with pytest.raises(PreconditionFailed, match="--allow-preexisting-blocks"):
        spark_gc.run(lake, "fresh", grace_seconds=0)  # refused before any Spark session starts
    assert set(stored) <= set(lake.blocks.list())
    assert gc.run(lake, "fresh", dry_run=True, grace_seconds=0).deleted > 0
    assert set(stored) <= set(lake.blocks.list())
    # Reopening does not forget it.
    lake.close()
    lake = opening.open_lake(str(home))
    assert lake.identity is not None and lake.identity.origin is Origin.FOUND
    with pytest.raises(PreconditionFailed):
        gc.run(lake, "fresh", grace_seconds=0)
    report = gc.run(lake, "fresh", grace_seconds=0, allow_preexisting_blocks=True)
    data = hashlib.md5(CONTENT).hexdigest() + f"+{len(CONTENT)}"  # the old lake's object
    assert report.deleted > 0 and data in stored and data not in set(lake.blocks.list())
    found = identity.get(lake.kv)
    assert found is not None and found.created_over_blocks == 0
    gc.run(lake, "fresh", grace_seconds=0)  # the refusal is lifted for good
    lake.close()


def test_a_home_that_is_a_file_is_one_clear_error(tmp_path: Path) -> None:
    home = tmp_path / "file"
    home.write_text("not a lake")
    with pytest.raises(StorageError, match="is a file, not a directory"):
        opening.open_lake(str(home))


def test_errors_name_a_database_url_without_its_password() -> None:
    named = identity._without_password("postgresql://lake:s3cret@db.example:5432/lake")
    assert named == "postgresql://lake:***@db.example:5432/lake"
    assert identity._without_password("postgresql://lake@db/lake") == "postgresql://lake@db/lake"
