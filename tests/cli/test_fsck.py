"""``lakectl fsck`` and ``lakectl doctor``, embedded and through a live server: a flipped byte, a
missing block and a leftover temporary file found in one run, exit 7, the report as JSON."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from lakectl.cli.app import app
from server.config import load_settings
from tests.cli.conftest import Run
from tests.server.conftest import serve

REPO = "demo"
FILES = {"a/x.csv": b"1,2,3\n", "a/y.csv": b"4,5,6\n", "b/z.csv": b"7,8,9\n"}


def block_file(blocks: Path, data: bytes) -> Path:
    md5 = hashlib.md5(data).hexdigest()
    return blocks / md5[:3] / md5


def damage(blocks: Path) -> str:
    """Flip a byte of a/x.csv's block, delete b/z.csv's, leave a killed writer's temporary file;
    return the temporary file's name."""
    flipped = block_file(blocks, FILES["a/x.csv"])
    os.chmod(flipped, 0o644)  # blocks are read-only files
    flipped.write_bytes(b"9" + flipped.read_bytes()[1:])
    block_file(blocks, FILES["b/z.csv"]).unlink()
    data = os.urandom(4096)
    md5 = hashlib.md5(data).hexdigest()
    (blocks / md5[:3]).mkdir(exist_ok=True)
    name = f"{md5[:3]}/.{md5}.{'0f' * 8}.tmp"
    (blocks / name).write_bytes(data[:1000])
    return name


def populate(cli: Callable[..., Any]) -> str:
    """Repository demo with one commit of FILES; the commit id."""
    cli("repo", "create", f"lakefs://{REPO}")
    for path, data in FILES.items():
        cli("fs", "upload", f"lakefs://{REPO}/main/{path}", "--source", "-", input=data)
    return str(cli("commit", f"lakefs://{REPO}/main", "-m", "first")["id"])


def check_damage_report(details: dict[str, Any], commit: str, temporary: str) -> None:
    assert details["ok"] is False and details["repository"] is None
    assert [(d["kind"], d["repository"], d["commit"], d["path"]) for d in details["corrupt"]] == [
        ("data", REPO, commit, "a/x.csv")
    ]
    assert [(d["kind"], d["repository"], d["commit"], d["path"]) for d in details["missing"]] == [
        ("data", REPO, commit, "b/z.csv")
    ]
    assert (details["repaired"], details["unrepaired"]) == (0, 2)
    assert [(f["name"], f["size"]) for f in details["temporaries"]["files"]] == [(temporary, 1000)]
    assert details["orphaned"]["count"] == 0


def test_fsck_finds_a_flipped_byte_a_missing_block_and_a_leftover_temporary_file(
    run: Run, js: Callable[..., Any], home: Path
) -> None:
    commit = populate(js)
    healthy = js("fsck")
    assert healthy["ok"] is True and healthy["missing"] == healthy["corrupt"] == []
    assert healthy["blocks"] > len(FILES) and healthy["commits"] == 2
    temporary = damage(home / "blocks")

    error = js("fsck", code=7)
    assert error["code"] == "integrity_error"
    assert error["message"] == "1 missing and 1 corrupt block copies referenced"
    check_damage_report(error["details"], commit, temporary)

    human = run("fsck", code=7)
    assert "a/x.csv" in human.stdout and "b/z.csv" in human.stdout and temporary in human.stdout
    assert "corrupt" in human.stdout and "missing" in human.stdout
    assert "error: 1 missing and 1 corrupt" in human.stderr

    one = js("fsck", f"lakefs://{REPO}", code=7)["details"]
    assert one["repository"] == REPO and one["orphaned"] is None and one["temporaries"] is None
    repaired = js("fsck", "--repair", code=7)["details"]
    assert repaired["repair"] is True and repaired["unrepaired"] == 2, "one copy only: nothing to repair from"
    assert js("fsck", "lakefs://nope", code=3)["code"] == "repository_not_found"


def test_doctor_opens_the_lake_and_verifies_it_on_request(
    run: Run, js: Callable[..., Any], home: Path
) -> None:
    commit = populate(js)
    found = js("doctor")
    assert found == {
        "backend": "embedded",
        "location": str(home),
        "access_key_id": None,
        "repositories": 1,
        "fsck": None,
    }
    assert js("doctor", "--verify")["fsck"]["ok"] is True
    temporary = damage(home / "blocks")
    assert js("doctor")["fsck"] is None, "without --verify, blocks are not read"
    error = js("doctor", "--verify", code=7)
    assert error["details"]["backend"] == "embedded"
    check_damage_report(error["details"]["fsck"], commit, temporary)
    human = run("doctor", "--verify", code=7)
    assert f"ok      lake opens: {home}\n" in human.stdout
    assert "failed  blocks verified: 2 missing or corrupt block copies\n" in human.stdout
    assert "a/x.csv" in human.stdout and human.stderr.endswith(
        "error: 1 missing and 1 corrupt block copies referenced\n"
    )


def test_doctor_refuses_a_lost_database_and_never_replaces_it(js: Callable[..., Any], home: Path) -> None:
    """doctor opens the lake as every command does: over stored blocks whose lake.db is gone it
    reports the loss (exit 9) instead of creating a new, empty lake there."""
    populate(js)
    (home / "lake.db").unlink()
    refused = js("doctor", code=9)
    assert refused["code"] == "storage_error" and "lake.db" in refused["message"]
    assert not (home / "lake.db").exists()


def test_fsck_and_doctor_through_a_lakectl_server(tmp_path: Path) -> None:
    data_dir = tmp_path / "server"
    with serve(load_settings(None, str(data_dir), environ={})) as live:
        env = live.cli_env(tmp_path)

        def remote(*args: str, input: bytes | None = None, code: int = 0) -> Any:
            result: Result = CliRunner().invoke(app, [*args, "--json"], env=env, input=input)
            assert result.exit_code == code, (args, result.stdout, result.stderr, result.exception)
            return json.loads(result.stdout)

        commit = populate(remote)
        assert remote("fsck")["ok"] is True
        doctor = remote("doctor")
        assert (doctor["backend"], doctor["access_key_id"], doctor["repositories"]) == (
            "remote",
            live.key_id,
            1,
        )
        temporary = damage(data_dir / "blocks")
        error = remote("fsck", code=7)
        assert error["code"] == "integrity_error"
        check_damage_report(error["details"], commit, temporary)
        assert remote("doctor", "--verify", code=7)["details"]["fsck"]["unrepaired"] == 2
        assert remote("fsck", f"lakefs://{REPO}", code=7)["details"]["repository"] == REPO

        wrong = {**env, "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "x" * 40}
        refused = CliRunner().invoke(app, ["doctor", "--json"], env=wrong)
        assert refused.exit_code == 10, refused.stdout
    gone = CliRunner().invoke(app, ["doctor", "--json"], env=env)  # the server has stopped
    assert gone.exit_code == 9, gone.stdout


def test_fsck_after_a_gc_that_expired_commits_counts_them_and_passes(
    run: Run, js: Callable[..., Any], tmp_path: Path
) -> None:
    """Garbage collection takes the trees of commits past retention (a deleted branch's): fsck
    counts those commits as expired and checks what retention keeps, exit 0, not a missing
    metarange."""
    run("repo", "create", "lakefs://repo1")
    run("branch", "create", "lakefs://repo1/doomed", "--source", "lakefs://repo1/main")
    (tmp_path / "f").write_text("doomed data\n")
    run("fs", "upload", "lakefs://repo1/doomed/a.txt", "--source", str(tmp_path / "f"))
    run("commit", "lakefs://repo1/doomed", "-m", "x")
    run("branch", "delete", "lakefs://repo1/doomed", "--yes")
    rules = tmp_path / "rules.json"
    rules.write_text('{"default_retention_days": 21, "branches": []}')
    run("gc", "set-config", "lakefs://repo1", "-f", str(rules))
    collected = js("gc", "run", "lakefs://repo1", "--grace-hours", "0")
    assert collected["expired_commits"] >= 1

    checked = js("fsck")
    assert checked["ok"] is True and checked["missing"] == [] and checked["expired_commits"] == 1
    human = run("fsck")
    assert "1 commit(s) past their retention not checked" in human.stderr + human.stdout
