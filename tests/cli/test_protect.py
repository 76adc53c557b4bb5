"""``lakectl branch-protect``, embedded and through a live server: rules listed, added and deleted,
and a protected branch refusing uploads, deletes, commits, resets and manifest imports (exit 8,
nothing staged) while merges, reverts and cherry-picks land."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from tests.cli.both_json import Cli, cli, live
from tests.server.conftest import Live, changes, snapshot, unique

__all__ = ["cli", "live"]


def _refused(out: Any) -> None:
    assert out["code"] == "protected_branch", out


def test_rules_add_list_delete(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    assert cli("branch-protect", "list", "lakefs://R") == []
    assert cli("branch-protect", "add", "lakefs://R", "stable_*") == {"pattern": "stable_*"}
    cli("branch-protect", "add", "lakefs://R", "main")
    assert cli("branch-protect", "list", "lakefs://R") == [{"pattern": "stable_*"}, {"pattern": "main"}]
    assert cli("branch-protect", "add", "lakefs://R", "main", code=4)["code"] == "already_exists"
    assert cli("branch-protect", "delete", "lakefs://R", "nope", code=3)["code"] == "not_found"
    deleted = cli("branch-protect", "delete", "lakefs://R", "stable_*")
    assert deleted["type"] == "branch_protection" and deleted["deleted"] == ["stable_*"]
    assert cli("branch-protect", "list", "lakefs://R") == [{"pattern": "main"}]
    assert cli("branch-protect", "add", "lakefs://R", "", code=2)["code"] == "invalid_argument"
    assert cli("branch-protect", "list", "lakefs://no-such-repo", code=3)["code"] == "repository_not_found"


def test_protected_branch_refuses_direct_writes(cli: Cli, tmp_path: Path) -> None:
    cli("repo", "create", "lakefs://R")
    cli("fs", "upload", "lakefs://R/main/kept.txt", "--source", "-", input=b"kept")
    cli("commit", "lakefs://R/main", "-m", "base")
    manifest = tmp_path / "m.txt"
    manifest.write_text(cli("manifest", "export", "lakefs://R/main/", "--signed")["manifest"])
    cli("branch-protect", "add", "lakefs://R", "ma*")
    _refused(cli("fs", "upload", "lakefs://R/main/new.txt", "--source", "-", input=b"new", code=8))
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "f.txt").write_bytes(b"f")
    _refused(cli("fs", "upload", "-r", "lakefs://R/main/dir/", "--source", str(folder), code=8))
    _refused(cli("fs", "rm", "lakefs://R/main/kept.txt", code=8))
    _refused(cli("fs", "rm", "-r", "lakefs://R/main/", code=8))
    _refused(cli("commit", "lakefs://R/main", "-m", "direct", "--allow-empty", code=8))
    _refused(cli("reset", "lakefs://R/main", code=8))
    _refused(cli("manifest", "import", "lakefs://R/main/copy/", str(manifest), code=8))
    # Nothing was staged by any of them.
    assert cli("diff", "lakefs://R/main") == []
    assert [o["path"] for o in cli("fs", "ls", "-r", "lakefs://R/main/")] == ["kept.txt"]
    cli("branch-protect", "delete", "lakefs://R", "ma*")
    cli("fs", "upload", "lakefs://R/main/new.txt", "--source", "-", input=b"new")


def test_merges_reverts_and_cherry_picks_reach_a_protected_branch(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    cli("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    cli("branch-protect", "add", "lakefs://R", "main")
    cli("fs", "upload", "lakefs://R/dev/a.txt", "--source", "-", input=b"a")
    cli("commit", "lakefs://R/dev", "-m", "add a")
    cli("merge", "lakefs://R/dev", "lakefs://R/main")
    assert cli("fs", "stat", "lakefs://R/main/a.txt")["size_bytes"] == 1
    cli("revert", "lakefs://R/main", "main", "--parent-number", "1")
    cli("fs", "stat", "lakefs://R/main/a.txt", code=3)
    cli("fs", "upload", "lakefs://R/dev/b.txt", "--source", "-", input=b"b")
    cli("commit", "lakefs://R/dev", "-m", "add b")
    cli("cherry-pick", "lakefs://R/dev", "lakefs://R/main")
    assert cli("fs", "stat", "lakefs://R/main/b.txt")["size_bytes"] == 1


def test_a_refused_remote_upload_sends_no_data(live: Live, tmp_path: Path) -> None:
    """The client asks the server (stage_allowed) before it sends any block."""
    env = live.cli_env(tmp_path)
    repo = unique("sent")

    def run(*args: str, input: bytes | None = None, code: int = 0) -> None:
        result = CliRunner().invoke(app, [a.replace("R/", f"{repo}/") for a in args], input=input, env=env)
        assert result.exit_code == code, result.output

    run("repo", "create", f"lakefs://{repo}")
    run("branch-protect", "add", f"lakefs://{repo}", "main")
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "small.txt").write_bytes(os.urandom(100))
    (folder / "large.bin").write_bytes(os.urandom(300_000))
    before = snapshot(live.data_dir)
    run("fs", "upload", "lakefs://R/main/one.bin", "--source", "-", input=os.urandom(5000), code=8)
    run("fs", "upload", "-r", "lakefs://R/main/dir/", "--source", str(folder), code=8)
    assert snapshot(live.data_dir) == before, changes(before, snapshot(live.data_dir))


MOVE_RULES = {"none": [], "plain": ["rel*"], "pulls": ["rel*", "--required-approvals", "1"]}

CLI_VERBS: dict[str, tuple[str, ...]] = {
    "upload": ("fs", "upload", "lakefs://R/release/new.txt", "--source", "-"),
    "rm": ("fs", "rm", "lakefs://R/release/kept.txt"),
    "rm -r": ("fs", "rm", "-r", "lakefs://R/release/"),
    "commit": ("commit", "lakefs://R/release", "-m", "direct", "--allow-empty"),
    "reset": ("reset", "lakefs://R/release"),
    "merge": ("merge", "lakefs://R/dev", "lakefs://R/release"),
    "revert": ("revert", "lakefs://R/release", "release", "--parent-number", "1"),
    "cherry-pick": ("cherry-pick", "lakefs://R/dev", "lakefs://R/release"),
    "branch delete": ("branch", "delete", "lakefs://R/release", "--yes"),
    "import --merge": ("import", "--from", "{dir}", "--to", "lakefs://R/release/imp/", "--merge"),
}

CLI_EXPECTED = {
    "none": dict.fromkeys(CLI_VERBS, 0),
    "plain": dict.fromkeys(CLI_VERBS, 8) | {"merge": 0, "revert": 0, "cherry-pick": 0},
    "pulls": dict.fromkeys(CLI_VERBS, 8),
}


@pytest.mark.parametrize("rule", list(MOVE_RULES))
def test_every_verb_that_moves_a_branch_obeys_its_rule(cli: Cli, tmp_path: Path, rule: str) -> None:
    """Each verb on a fresh repository whose ``release`` branch is under no rule, a plain rule or
    a rule gating pull requests: the exit code ``CLI_EXPECTED`` gives (0, or 8 ``protected_branch``),
    and a refusal changes nothing (head, staged changes, the branch itself)."""
    source = tmp_path / "landing"
    source.mkdir()
    (source / "i.txt").write_bytes(b"i")
    for n, (verb, args) in enumerate(CLI_VERBS.items()):
        if verb.startswith("import") and cli.mode == "remote":
            continue  # a server imports its own directories only: embedded, the CLI's
        r = f"lakefs://R{n}"

        def run(*a: str, code: int = 0, input: bytes | None = None, r: str = r) -> Any:
            return cli(*(x.replace("lakefs://R", r) for x in a), code=code, input=input)

        run("repo", "create", "lakefs://R")
        run("fs", "upload", "lakefs://R/main/kept.txt", "--source", "-", input=b"kept")
        run("commit", "lakefs://R/main", "-m", "base")
        run("branch", "create", "lakefs://R/release", "--source", "lakefs://R/main")
        run("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
        run("fs", "upload", "lakefs://R/dev/dev.txt", "--source", "-", input=b"dev")
        run("commit", "lakefs://R/dev", "-m", "dev work")
        if MOVE_RULES[rule]:
            run("branch-protect", "add", "lakefs://R", *MOVE_RULES[rule])
        before = run("branch", "show", "lakefs://R/release")
        expected = CLI_EXPECTED[rule][verb]
        out = run(*(x.replace("{dir}", str(source)) for x in args), code=expected, input=b"new")
        if expected:
            _refused(out)
            assert run("branch", "show", "lakefs://R/release") == before, verb
            assert run("diff", "lakefs://R/release") == [], verb


def test_revert_and_cherry_pick_are_refused_as_a_direct_merge_is(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    cli("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    cli("fs", "upload", "lakefs://R/dev/a.txt", "--source", "-", input=b"a")
    cli("commit", "lakefs://R/dev", "-m", "add a")
    cli("branch-protect", "add", "lakefs://R", "main", "--required-approvals", "1")
    head = cli("branch", "show", "lakefs://R/main")["commit_id"]
    merged = cli("merge", "lakefs://R/dev", "lakefs://R/main", code=8)
    picked = cli("cherry-pick", "lakefs://R/dev", "lakefs://R/main", code=8)
    reverted = cli("revert", "lakefs://R/main", "main", "--parent-number", "1", code=8)
    for out in (merged, picked, reverted):
        _refused(out)
        assert "takes merges only through a pull request" in out["message"]
    assert cli("branch", "show", "lakefs://R/main")["commit_id"] == head
