"""One contract for every backend: the same CLI session, run against the embedded lake and against
a live server (RemoteBackend) — one keeping its metadata in SQLite, one in PostgreSQL — prints the
same JSON and exits with the same codes.

Ids and times differ between two runs by nature (commit ids hash the commit date), so they are
replaced by placeholders; everything else — paths, sizes, checksums, messages, metadata, diff
entries, conflicts, exit codes — must be identical.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from tests.server.conftest import Live, live, live_pg, unique

__all__ = ["live", "live_pg"]

HEX_ID = re.compile(r"\b[0-9a-f]{12,64}\b")
VOLATILE = {"id", "commit_id", "creation_date", "mtime", "meta_range_id", "parents", "physical_address"}
VOLATILE |= {"commits_meta_range_id", "tags_meta_range_id", "branches_meta_range_id"}  # refs-dump
VOLATILE |= {"run_id", "start_time", "end_time"}  # action runs


def normalize(value: Any, repo: str) -> Any:
    if isinstance(value, dict):
        return {k: ("<volatile>" if k in VOLATILE else normalize(v, repo)) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [normalize(v, repo) for v in value]
    if isinstance(value, str):
        return HEX_ID.sub("<commit>", value.replace(repo, "<repo>"))
    return value


class Session:
    """Runs lakectl commands in-process under one environment and records what they print."""

    def __init__(self, env: dict[str, str], repo: str, work: Path) -> None:
        self.env = env
        self.repo = repo
        self.work = work
        self.transcript: list[tuple[str, int, Any]] = []

    def __call__(self, *args: str, input: bytes | None = None, raw: bool = False) -> Any:
        argv = [a.replace("R/", f"{self.repo}/").replace("lakefs://R", f"lakefs://{self.repo}") for a in args]
        if not raw:
            argv.append("--json")
        result = CliRunner().invoke(app, argv, input=input, env=self.env)
        out: Any = (
            result.stdout_bytes if raw else (json.loads(result.stdout) if result.stdout.strip() else None)
        )
        shown = (
            out
            if raw
            else normalize(json.loads(json.dumps(out).replace(str(self.work), "<work>")), self.repo)
        )
        self.transcript.append((" ".join(args), result.exit_code, shown))
        return out


def scenario(run: Session) -> None:
    data = run.work / "data"
    for rel, content in {"a/1.csv": "id\n1\n", "a/2.csv": "id\n2\n", "b/deep/3.csv": "id\n3\n"}.items():
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / rel).write_text(content)
    run("repo", "create", "lakefs://R")
    run("fs", "upload", "lakefs://R/main/readme.txt", "--source", "-", input=b"hello lake\n")
    run("fs", "upload", "-r", "lakefs://R/main/data/", "--source", str(data))
    run("fs", "ls", "lakefs://R/main/")
    run("fs", "ls", "-r", "lakefs://R/main/data/")
    run("fs", "stat", "lakefs://R/main/data/a/1.csv")
    run("fs", "presign", "lakefs://R/main/nope.csv")
    run("fs", "cat", "lakefs://R/main/readme.txt", raw=True)
    run("diff", "lakefs://R/main")
    run("commit", "lakefs://R/main", "-m", "raw data", "--meta", "source=test")
    run("commit", "lakefs://R/main", "-m", "nothing")
    run("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    run("fs", "upload", "lakefs://R/dev/data/a/1.csv", "--source", "-", input=b"id\n100\n")
    run("fs", "rm", "lakefs://R/dev/data/a/2.csv")
    run("fs", "upload", "lakefs://R/dev/data/c.csv", "--source", "-", input=b"id\n4\n")
    run("diff", "lakefs://R/dev")
    run("commit", "lakefs://R/dev", "-m", "dev changes")
    run("diff", "lakefs://R/main", "lakefs://R/dev")
    run("diff", "lakefs://R/dev", "lakefs://R/main", "--two-way", "--prefix", "data/a/")
    run("fs", "upload", "lakefs://R/main/data/a/1.csv", "--source", "-", input=b"id\n-1\n")
    run("commit", "lakefs://R/main", "-m", "main changes")
    run("merge", "lakefs://R/dev", "lakefs://R/main")
    run("merge", "lakefs://R/dev", "lakefs://R/main", "--strategy", "data/a/*=source-wins")
    run("fs", "cat", "lakefs://R/main/data/a/1.csv", raw=True)
    # Same-generation commits order by date, which two runs need not share: first parents only.
    run("log", "lakefs://R/main", "--amount", "10", "--first-parent")
    run("log", "lakefs://R/main", "--no-merges", "--prefixes", "data/b/")
    run("log", "lakefs://R/main", "--first-parent", "--objects", "data/a/1.csv")
    run("log", "lakefs://R/main", "--first-parent", "--objects", "data/a/1.csv,readme.txt", "--amount", "2")
    run("log", "lakefs://R/main", "--first-parent", "--prefixes", "data/b/,readme", "--after", "main~1")
    run("log", "lakefs://R/main", "--since", "not a date")
    run("log", "lakefs://R/main", "--objects", "readme.txt,")
    run("fs", "ls", "-r", "lakefs://R/main/", "--amount", "2", "--after", "data/a/1.csv")
    run("show", "commit", "lakefs://R/main~1")
    run("annotate", "lakefs://R/main/", "--recursive")
    run("annotate", "lakefs://R/main/data/")
    run("tag", "create", "lakefs://R/v1", "lakefs://R/main")
    run("tag", "list", "lakefs://R")
    run("show", "commit", "lakefs://R/main~1", "--show-meta-range-id")
    run("tag", "create", "lakefs://R/v1", "lakefs://R/main~1")
    run("tag", "create", "lakefs://R/v1", "lakefs://R/main~1", "--force")
    run("tag", "create", "lakefs://R/v1", "lakefs://R/main", "-f")
    run("commit", "lakefs://R/main", "--allow-empty")
    run("commit", "lakefs://R/main", "--allow-empty", "--allow-empty-message")
    run("repo", "create", "lakefs://R-ns", "s3://bucket/prefix", "-d", "trunk")
    run("repo", "create", "lakefs://R-gs", "gs://bucket")
    run("repo", "create-bare", "lakefs://R-copy", "local://copy")
    run("branch", "list", "lakefs://R-copy")
    refs = run.work / "refs.json"
    run("refs-dump", "lakefs://R", "-o", str(refs))
    run("refs-restore", "lakefs://R-copy", "--manifest", str(refs))
    run("log", "lakefs://R-copy/main", "--first-parent")
    run("tag", "list", "lakefs://R-copy")
    run("refs-restore", "lakefs://R-copy", "--manifest", str(refs))
    run("refs-restore", "lakefs://R-ns", "--manifest", "-", input=b"{}")
    run("branch", "list", "lakefs://R")
    run("branch", "list", "lakefs://R", "--amount", "1", "--after", "dev")
    run("tag", "list", "lakefs://R", "--amount", "1")
    run("fs", "upload", "lakefs://R/main/tmp.txt", "--source", "-", input=b"scratch")
    run("diff", "lakefs://R/main@", "lakefs://R/main$", "--two-way")
    run("diff", "lakefs://R/dev", "lakefs://R/main$", "--prefix", "tmp")
    run("diff", "lakefs://R/main", "lakefs://R/v1$")
    run("fs", "cat", "lakefs://R/main$/tmp.txt", raw=True)
    run("fs", "stat", "lakefs://R/main@/tmp.txt")
    run("reset", "lakefs://R/main")
    run("diff", "lakefs://R/main")
    run("revert", "lakefs://R/main", "main", "--parent-number", "1")
    run("fs", "ls", "-r", "lakefs://R/main/")
    run("cherry-pick", "lakefs://R/dev", "lakefs://R/main")
    # lakeFS's forms of revert, cherry-pick and merge: -m for a merge commit, --squash.
    run("branch", "create", "lakefs://R/side", "--source", "lakefs://R/main~1")
    run("revert", "lakefs://R/main", "main~1")
    run("branch", "revert", "lakefs://R/main", "main~1", "-m", "1")
    run("cherry-pick", "lakefs://R/main~2", "lakefs://R/side", "-m", "2")
    run("fs", "upload", "lakefs://R/side/squashed.txt", "--source", "-", input=b"sq")
    run("commit", "lakefs://R/side", "-m", "side work")
    run("merge", "lakefs://R/side", "lakefs://R/main", "--squash", "-m", "squashed side")
    run("log", "lakefs://R/main", "--amount", "1")
    run("manifest", "export", "lakefs://R/v1/data")
    run("gc", "get-config", "lakefs://R")
    rules = run.work / "rules.json"
    rules.write_text(
        '{"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 28}]}'
    )
    run("gc", "set-config", "lakefs://R", "-f", str(rules))
    run("gc", "get-config", "lakefs://R")
    run("gc", "set-config", "lakefs://R", "-f", "-", input=b'{"default_retention_days": -1}')
    run("gc", "delete-config", "lakefs://R")
    run("gc", "get-config", "lakefs://R")
    run("branch-protect", "add", "lakefs://R", "ma*")
    run("branch-protect", "add", "lakefs://R", "ma*")
    run("branch-protect", "list", "lakefs://R")
    run("fs", "upload", "lakefs://R/main/p.txt", "--source", "-", input=b"protected")
    run("commit", "lakefs://R/main", "-m", "direct", "--allow-empty")
    run("branch-protect", "delete", "lakefs://R", "nope")
    run("branch-protect", "delete", "lakefs://R", "ma*")
    # Actions: a pre-commit webhook nobody answers refuses the commit, and the run is listed.
    gate = run.work / "gate.yaml"
    hook = {"id": "ask", "type": "webhook", "properties": {"url": "http://127.0.0.1:9/", "timeout": "5s"}}
    gate.write_text(json.dumps({"on": {"pre-commit": None}, "hooks": [hook]}))
    run("actions", "validate", str(gate))
    run("fs", "upload", "lakefs://R/main/_lakefs_actions/gate.yaml", "--source", str(gate))
    run("commit", "lakefs://R/main", "-m", "gated")
    run("actions", "runs", "list", "lakefs://R")
    run("fs", "rm", "lakefs://R/main/_lakefs_actions/gate.yaml")
    # Refusals, identical on both sides.
    run("fs", "stat", "lakefs://R/main/nope")
    run("branch", "create", "lakefs://R/bad.name", "--source", "lakefs://R/main")
    run("repo", "create", "lakefs://R")
    run("branch", "delete", "lakefs://R/main", "--yes")
    run("fs", "upload", "lakefs://R/v1/x", "--source", "-", input=b"x")
    out = run.work / "out"
    run("fs", "download", "-r", "lakefs://R/v1/data/", str(out), "--parallel", "3")
    run.transcript.append(
        (
            "downloaded",
            0,
            sorted((p.relative_to(out).as_posix(), p.read_bytes()) for p in out.rglob("*") if p.is_file()),
        )
    )


@pytest.fixture
def local_env(tmp_path: Path) -> dict[str, str]:
    return {
        "LAKECTL_HOME": str(tmp_path / "lake"),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_COMMITTER": "admin",
    }


@pytest.fixture(params=["live", "live_pg"], ids=["sqlite-server", "postgres-server"])
def remote_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A live server whose metadata database is SQLite, or PostgreSQL."""
    live: Live = request.getfixturevalue(request.param)
    yield live.cli_env(tmp_path)


def test_every_command_behaves_the_same_embedded_and_remote(
    tmp_path: Path, local_env: dict[str, str], remote_env: dict[str, str]
) -> None:
    repo = unique("contract")
    (tmp_path / "l").mkdir()
    (tmp_path / "r").mkdir()
    local = Session(local_env, repo, tmp_path / "l")
    remote = Session(remote_env, repo, tmp_path / "r")
    scenario(local)
    scenario(remote)
    assert not os.path.exists(remote_env["LAKECTL_HOME"]), "the remote session must not open a local lake"
    for (cmd, code_l, out_l), (_, code_r, out_r) in zip(local.transcript, remote.transcript, strict=True):
        assert (cmd, code_r, out_r) == (cmd, code_l, out_l)
    codes = [code for _, code, _ in local.transcript]
    assert 0 in codes and {2, 3, 4, 5, 6, 8} <= set(codes)
