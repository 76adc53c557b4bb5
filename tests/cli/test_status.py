"""``lakectl status``, embedded and through a live server: a branch's uncommitted changes and how
many commits it is ahead of and behind its upstream (the default branch, or --upstream); a local
working copy's changes and the commits its ref gained since."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.both_json import Cli, cli, live

__all__ = ["cli", "live"]


def put(cli: Cli, uri: str, body: bytes = b"x") -> None:
    cli("fs", "upload", uri, "--source", "-", input=body)


def test_a_branch_ahead_behind_and_its_uncommitted_changes(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    cli("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    for n in (1, 2):
        put(cli, f"lakefs://R/dev/d{n}.txt")
        cli("commit", "lakefs://R/dev", "-m", f"dev {n}")
    put(cli, "lakefs://R/main/m.txt")
    cli("commit", "lakefs://R/main", "-m", "main moves on")
    put(cli, "lakefs://R/dev/staged.txt")

    found = cli("status", "lakefs://R/dev")
    assert (found["branch"], found["upstream"], found["ahead"], found["behind"]) == ("dev", "main", 2, 1)
    assert [(c["type"], c["path"]) for c in found["changes"]] == [("added", "staged.txt")]
    text = cli("status", "lakefs://R/dev", human=True)
    assert "2 commits ahead of main, 1 commit behind main" in text and "+ staged.txt" in text

    assert cli("status", "lakefs://R/main", "--upstream", "dev")["ahead"] == 1
    default = cli("status", "lakefs://R/main", human=True)
    assert "ahead" not in default and "behind" not in default and "Nothing uncommitted." in default
    cli("commit", "lakefs://R/dev", "-m", "staged")
    cli("merge", "lakefs://R/main", "lakefs://R/dev")  # main into dev: dev is behind no more
    merged = cli("status", "lakefs://R/dev")
    assert (merged["ahead"], merged["behind"], merged["changes"]) == (4, 0, [])  # 3 commits and the merge
    cli("merge", "lakefs://R/dev", "lakefs://R/main")  # a merge commit on main: dev one behind
    assert "1 commit behind main" in cli("status", "lakefs://R/dev", human=True)
    cli("branch", "create", "lakefs://R/fresh", "--source", "lakefs://R/main")
    assert "Up to date with main" in cli("status", "lakefs://R/fresh", human=True)
    cli("status", "lakefs://R/nope", code=3)


def test_a_working_copy_behind_its_ref_with_local_changes(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli("repo", "create", "lakefs://R")
    put(cli, "lakefs://R/main/data/a.txt")
    cli("commit", "lakefs://R/main", "-m", "a")
    copy = tmp_path / "copy"
    cli("local", "clone", "lakefs://R/main/data/", str(copy))
    put(cli, "lakefs://R/main/data/b.txt")
    cli("commit", "lakefs://R/main", "-m", "b, after the clone")
    (copy / "a.txt").write_text("edited here")
    monkeypatch.chdir(copy)
    found = cli("status")
    assert (found["kind"], found["upstream"], found["ahead"], found["behind"]) == ("local", "main", 0, 1)
    assert [(c["type"], c["path"]) for c in found["changes"]] == [("changed", "a.txt")]
    assert "1 commit behind main" in cli("status", human=True)
    cli("status", "--upstream", "dev", code=2)
