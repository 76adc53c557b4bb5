"""What a lake answers at commits past their retention once garbage collection ran: the trees of
every commit stay (listings, stats, diffs and merges over an old merge base work, each command a
fresh process with no cache), the data only retained commits reference goes and reads as
``gone`` (exit 3). A tree an older collection took answers ``gone`` too, never "no block"."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cli.conftest import Run

URI = "lakefs://repo1"


def _upload(run: Run, branch: str, path: str, data: bytes) -> None:
    run("fs", "upload", f"{URI}/{branch}/{path}", "--source", "-", input=data)


def _history(run: Run, js: Callable[..., Any], tmp_path: Path) -> dict[str, str]:
    """main: base (a1, b1) -> a2 -> a3; feature from base: b2. Rules keep heads only, and a
    collection ran: a2 is data of an expired commit alone, the base an expired merge base."""
    run("repo", "create", URI)
    _upload(run, "main", "a.txt", b"a1\n")
    _upload(run, "main", "b.txt", b"b1\n")
    base = js("commit", f"{URI}/main", "-m", "base")["id"]
    run("branch", "create", f"{URI}/feature", "--source", f"{URI}/main")
    _upload(run, "main", "a.txt", b"a2\n")
    middle = js("commit", f"{URI}/main", "-m", "a2")["id"]
    _upload(run, "main", "a.txt", b"a3\n")
    run("commit", f"{URI}/main", "-m", "a3")
    _upload(run, "feature", "b.txt", b"b2\n")
    run("commit", f"{URI}/feature", "-m", "b2")
    rules = tmp_path / "rules.json"
    rules.write_text('{"default_retention_days": 0, "branches": []}')
    run("gc", "set-config", URI, "-f", str(rules))
    time.sleep(1.1)  # commit dates have whole seconds: a commit of this second is not older than now
    collected = js("gc", "run", URI, "--grace-hours", "0")
    assert collected["expired_commits"] == 3 and collected["deleted"] >= 1
    return {"base": base, "middle": middle}


def test_expired_commits_keep_their_trees_and_their_collected_data_reads_gone(
    run: Run, js: Callable[..., Any], tmp_path: Path
) -> None:
    ids = _history(run, js, tmp_path)
    at = f"{URI}/{ids['middle']}"
    listed = js("fs", "ls", f"{at}/")
    assert sorted(o["path"] for o in listed) == ["a.txt", "b.txt"]
    assert js("fs", "stat", f"{at}/a.txt")["size_bytes"] == 3
    changed = js("diff", at, f"{URI}/main")
    assert [(c["path"], c["type"]) for c in changed] == [("a.txt", "changed")]

    refused = js("fs", "cat", f"{at}/a.txt", code=3)
    assert refused["code"] == "gone" and ids["middle"][:12] in refused["message"]
    assert run("fs", "cat", f"{at}/b.txt").stdout == "b1\n"  # data a head still holds stays

    checked = js("fsck")
    assert checked["ok"] is True and checked["expired_commits"] == 3
    assert checked["orphaned"]["count"] == 0, "the trees kept are no orphans"

    merged = js("merge", f"{URI}/feature", f"{URI}/main")  # over the expired base
    assert merged["reference"]
    assert run("fs", "cat", f"{URI}/main/a.txt").stdout == "a3\n"
    assert run("fs", "cat", f"{URI}/main/b.txt").stdout == "b2\n"


def test_a_tree_an_older_collection_took_reads_gone_and_a_retained_one_lost_is_damage(
    run: Run, js: Callable[..., Any], tmp_path: Path, home: Path
) -> None:
    ids = _history(run, js, tmp_path)
    commits = {c["id"]: c for c in js("log", f"{URI}/main", "--amount", "10")}
    _delete_block(home, commits[ids["middle"]]["meta_range_id"])
    at = f"{URI}/{ids['middle']}"
    assert js("fs", "ls", f"{at}/", code=3)["code"] == "gone"
    assert js("diff", at, f"{URI}/main", code=3)["code"] == "gone"
    assert js("gc", "run", URI, "--grace-hours", "0")["expired_commits"] == 3  # passes over it
    assert js("fsck")["ok"] is True

    head = js("log", f"{URI}/feature", "--amount", "1")[0]
    _delete_block(home, head["meta_range_id"])
    lost = js("fs", "ls", f"{URI}/feature/", code=7)
    assert lost["code"] == "missing_data"


def _delete_block(home: Path, locator: str) -> None:
    md5 = locator.split("+", 1)[0]
    (home / "blocks" / md5[:3] / md5).unlink()
