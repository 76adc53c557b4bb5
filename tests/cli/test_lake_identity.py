"""``lakectl init`` and a lost ``lake.db``: the CLI never starts a new lake over stored blocks
unless asked, and never collects them until told."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Run

STORAGE, PRECONDITION = 9, 6


def test_a_lost_database_is_refused_until_init_and_gc_waits_to_be_told(
    run: Run, js, home: Path, tmp_path: Path
) -> None:
    run("repo", "create", "lakefs://old")
    run("fs", "upload", "lakefs://old/main/keep/a.csv", "--source", "-", input=b"id\n1\n")
    run("fs", "upload", "lakefs://old/main/drop/b.csv", "--source", "-", input=b"id\n2\n")
    run("commit", "lakefs://old/main", "-m", "data")
    manifest = tmp_path / "keep.manifest"
    manifest.write_text(run("manifest", "export", "lakefs://old/main/keep").stdout)
    for f in home.glob("lake.db*"):
        f.unlink()

    refused = run("repo", "list", code=STORAGE)
    assert refused.stderr.count("\n") == 1 and str(home / "lake.db") in refused.stderr
    assert "lakectl init" in refused.stderr
    assert js("gc", "run", "lakefs://old", code=STORAGE)["code"] == "storage_error"
    assert not (home / "lake.db").exists()

    created = run("init")
    assert "warning: created a new metadata database over" in created.stderr and str(home) in created.stdout
    assert js("init") == {"home": str(home), "message": f"Lake at {home}"}  # the lake exists now
    run("repo", "create", "lakefs://new")
    run("manifest", "import", "lakefs://new/main/keep", str(manifest))
    run("commit", "lakefs://new/main", "-m", "re-imported")

    held = js("gc", "run", "lakefs://new", "--grace-hours", "0", code=PRECONDITION)
    assert held["code"] == "precondition_failed" and "--allow-preexisting-blocks" in held["message"]
    assert js("gc", "run", "lakefs://new", "--grace-hours", "0", "--dry-run")["deleted"] > 0
    report = js("gc", "run", "lakefs://new", "--grace-hours", "0", "--allow-preexisting-blocks")
    assert report["deleted"] > 0  # drop/b.csv's block, which nothing refers to any more
    assert run("fs", "cat", "lakefs://new/main/keep/a.csv").stdout == "id\n1\n"
    run("gc", "run", "lakefs://new", "--grace-hours", "0")  # lifted for good


def test_a_home_that_is_a_file_is_one_error_line(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "a-file"
    file.write_text("not a lake")
    monkeypatch.setenv("LAKECTL_HOME", str(file))
    result = run("repo", "list", code=STORAGE)
    assert result.stderr == f"error: the lake's home {file} is a file, not a directory (see LAKECTL_HOME)\n"
