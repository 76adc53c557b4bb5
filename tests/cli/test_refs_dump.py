"""lakeFS's repository and commit forms, embedded and against a live server: storage namespaces,
bare repositories, refs dump and restore, ``show commit --show-meta-range-id``, ``tag create
--force`` and ``commit --allow-empty-message``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from lakectl.cli.app import app
from tests.server.conftest import live, unique

__all__ = ["live"]


class Lakectl:
    """``lakectl`` in-process under one environment (embedded lake, or a live server)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, *args: str, input: str | bytes | None = None, code: int = 0) -> Result:
        result = CliRunner().invoke(app, list(args), input=input, env=self.env)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
        if code and not result.stderr.startswith("Usage:"):  # typer's usage errors are its own
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            assert len(lines) <= 1 and all(line.startswith("error: ") for line in lines), result.stderr
        return result

    def js(self, *args: str, input: str | bytes | None = None, code: int = 0) -> Any:
        return json.loads(self(*args, "--json", input=input, code=code).stdout)


@pytest.fixture(params=["embedded", "remote"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lakectl]:
    if request.param == "embedded":
        env = {
            "LAKECTL_HOME": str(tmp_path / "lake"),
            "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
            "LAKECTL_SERVER_ENDPOINT_URL": "",
            "LAKECTL_COMMITTER": "tester",
        }
    else:
        env = request.getfixturevalue("live").cli_env(tmp_path)
    yield Lakectl(env)


def _put(cli: Lakectl, uri: str, data: bytes) -> None:
    cli("fs", "upload", uri, "--source", "-", input=data)


def _history(cli: Lakectl, repo: str) -> dict[str, Any]:
    """Everything a restore must reproduce: each branch's log (ids included), heads and tags."""
    branches = cli.js("branch", "list", f"lakefs://{repo}")
    return {
        "branches": branches,
        "tags": cli.js("tag", "list", f"lakefs://{repo}"),
        "logs": {b["id"]: cli.js("log", f"lakefs://{repo}/{b['id']}") for b in branches},
    }


def test_repo_create_records_the_storage_namespace(cli: Lakectl) -> None:
    named, default = unique("ns"), unique("ns")
    created = cli.js("repo", "create", f"lakefs://{named}", "s3://bucket/some/prefix", "-d", "trunk")
    assert created["storage_namespace"] == "s3://bucket/some/prefix" and created["default_branch"] == "trunk"
    assert cli.js("repo", "show", f"lakefs://{named}")["storage_namespace"] == "s3://bucket/some/prefix"
    assert "s3://bucket/some/prefix" in cli("repo", "show", f"lakefs://{named}").stdout
    assert f"'local://{default}'" in cli("repo", "create", f"lakefs://{default}").stdout
    listed = {r["id"]: r["storage_namespace"] for r in cli.js("repo", "list")}
    assert listed[named] == "s3://bucket/some/prefix" and listed[default] == f"local://{default}"
    assert "s3://bucket/some/prefix" in cli("repo", "list").stdout

    for bad in ("gs://bucket", "bucket/prefix", "s3://", "local://x\x1b[2J"):
        refused = unique("ns")
        err = cli.js("repo", "create", f"lakefs://{refused}", bad, code=2)
        assert err["code"] == "invalid_argument" and "storage namespace" in err["message"], bad
        cli("repo", "show", f"lakefs://{refused}", code=3)
    assert "expected local://<location> or s3://<location>" in (
        cli("repo", "create", f"lakefs://{unique('ns')}", "gs://b", code=2).stderr
    )


def test_create_bare_has_no_commit_and_no_branch(cli: Lakectl) -> None:
    name = unique("bare")
    bare = cli.js("repo", "create-bare", f"lakefs://{name}", "local://somewhere", "-d", "trunk")
    assert set(bare) == {"id", "creation_date", "default_branch", "storage_namespace"}
    assert (bare["default_branch"], bare["storage_namespace"]) == ("trunk", "local://somewhere")
    assert cli.js("repo", "show", f"lakefs://{name}")["default_branch"] == "trunk"
    assert cli.js("branch", "list", f"lakefs://{name}") == []
    assert cli.js("log", f"lakefs://{name}/trunk", code=3)["code"] == "ref_not_found"
    assert "not created" in cli("repo", "create-bare", f"lakefs://{unique('bare')}").stdout
    assert cli.js("repo", "create-bare", f"lakefs://{name}", code=4)["code"] == "already_exists"
    assert cli.js("repo", "create-bare", f"lakefs://{unique('bare')}", "gs://x", code=2)["code"] == (
        "invalid_argument"
    )


def test_refs_dump_and_restore_reproduce_ids_and_heads(cli: Lakectl, tmp_path: Path) -> None:
    src, dst = unique("src"), unique("dst")
    cli("repo", "create", f"lakefs://{src}")
    _put(cli, f"lakefs://{src}/main/a.csv", b"1,2\n")
    cli("commit", f"lakefs://{src}/main", "-m", "first", "--meta", "k=v")
    cli("branch", "create", f"lakefs://{src}/dev", "--source", f"lakefs://{src}/main")
    _put(cli, f"lakefs://{src}/dev/b.csv", b"3,4\n")
    cli("commit", f"lakefs://{src}/dev", "-m", "on dev")
    _put(cli, f"lakefs://{src}/main/c.csv", b"5\n")
    cli("commit", f"lakefs://{src}/main", "-m", "on main")
    cli("merge", f"lakefs://{src}/dev", f"lakefs://{src}/main")
    cli("tag", "create", f"lakefs://{src}/v1", f"lakefs://{src}/main~1")
    _put(cli, f"lakefs://{src}/main/staged.csv", b"not committed\n")  # staging is not dumped
    before = _history(cli, src)

    manifest = cli.js("refs-dump", f"lakefs://{src}")
    assert set(manifest) == {"commits_meta_range_id", "tags_meta_range_id", "branches_meta_range_id"}
    assert json.loads(cli("refs-dump", f"lakefs://{src}").stdout) == manifest  # content-addressed
    out = tmp_path / "refs.json"
    assert str(out) in cli("refs-dump", f"lakefs://{src}", "-o", str(out)).stdout
    assert json.loads(out.read_text()) == manifest

    cli("repo", "create-bare", f"lakefs://{dst}", f"local://{dst}")
    done = cli.js("refs-restore", f"lakefs://{dst}", "--manifest", str(out))
    assert done == {"id": dst, "message": "All references restored successfully!"}
    assert _history(cli, dst) == before
    assert cli("fs", "cat", f"lakefs://{dst}/main/c.csv").stdout == "5\n"
    cli("fs", "cat", f"lakefs://{dst}/v1/b.csv", code=3)
    cli("fs", "stat", f"lakefs://{dst}/main/staged.csv", code=3)
    # The restored repository works on: a commit on it gets a new id of its own.
    _put(cli, f"lakefs://{dst}/dev/d.csv", b"6\n")
    assert cli.js("commit", f"lakefs://{dst}/dev", "-m", "after")["parents"] == [
        before["logs"]["dev"][0]["id"]
    ]

    # Into a repository that is not bare: refused, and nothing written.
    again = cli.js("refs-restore", f"lakefs://{dst}", "--manifest", "-", input=json.dumps(manifest), code=5)
    assert again["code"] == "conflict" and "not bare" in again["message"]
    plain = unique("plain")
    cli("repo", "create", f"lakefs://{plain}")
    plain_before = _history(cli, plain)
    assert "create-bare" in cli("refs-restore", f"lakefs://{plain}", "--manifest", str(out), code=5).stderr
    assert _history(cli, plain) == plain_before


def test_refs_restore_refuses_bad_manifests_and_stores_nothing(cli: Lakectl, tmp_path: Path) -> None:
    src, dst = unique("src"), unique("dst")
    cli("repo", "create", f"lakefs://{src}")
    manifest = cli.js("refs-dump", f"lakefs://{src}")
    cli("repo", "create-bare", f"lakefs://{dst}", "-d", "trunk")
    restore = ("refs-restore", f"lakefs://{dst}", "--manifest", "-")
    # The dump has no branch 'trunk', the bare repository's default branch.
    assert "trunk" in cli.js(*restore, input=json.dumps(manifest), code=2)["message"]
    assert cli.js(*restore, input="not json", code=2)["code"] == "invalid_argument"
    assert cli.js(*restore, input="[1, 2]", code=2)["code"] == "invalid_argument"
    partial = {"commits_meta_range_id": manifest["commits_meta_range_id"]}
    assert cli.js(*restore, input=json.dumps(partial), code=2)["code"] == "invalid_argument"
    assert cli.js(*restore, input=json.dumps({**manifest, "colour": "red"}), code=2)["code"] == (
        "invalid_argument"
    )
    bad_locator = {**manifest, "tags_meta_range_id": "not-a-locator"}
    assert cli.js(*restore, input=json.dumps(bad_locator), code=2)["code"] == "invalid_locator"
    absent = {**manifest, "tags_meta_range_id": "0" * 32 + "+10"}
    assert cli.js(*restore, input=json.dumps(absent), code=3)["code"] == "not_found"
    swapped = {**manifest, "tags_meta_range_id": manifest["commits_meta_range_id"]}
    assert "not a tags document" in cli.js(*restore, input=json.dumps(swapped), code=2)["message"]
    cli("refs-restore", f"lakefs://{dst}", "--manifest", str(tmp_path / "missing.json"), code=3)
    cli("refs-restore", f"lakefs://{dst}", code=2)  # --manifest is required
    assert cli.js("branch", "list", f"lakefs://{dst}") == []
    assert cli.js("refs-dump", f"lakefs://{unique('none')}", code=3)["code"] == "repository_not_found"
    assert cli.js("refs-restore", f"lakefs://{unique('none')}", "--manifest", "-", input="{}", code=2)
    cli("refs-dump", f"lakefs://{src}", "-o", str(tmp_path / "no" / "such" / "dir.json"), code=3)


def test_show_commit_prints_the_meta_range_id_on_request(cli: Lakectl) -> None:
    name = unique("show")
    cli("repo", "create", f"lakefs://{name}")
    head = cli.js("show", "commit", f"lakefs://{name}/main")
    plain = cli("show", "commit", f"lakefs://{name}/main").stdout
    assert head["id"] in plain and "Meta Range ID" not in plain and head["meta_range_id"] not in plain
    shown = cli("show", "commit", f"lakefs://{name}/main", "--show-meta-range-id").stdout
    assert f"Meta Range ID: {head['meta_range_id']}" in shown
    assert cli.js("show", "commit", f"lakefs://{name}/main", "--show-meta-range-id") == head


def test_tag_create_force_replaces_a_tag(cli: Lakectl) -> None:
    name = unique("tags")
    cli("repo", "create", f"lakefs://{name}")
    _put(cli, f"lakefs://{name}/main/a", b"a")
    head = cli.js("commit", f"lakefs://{name}/main", "-m", "a")["id"]
    first = cli.js("tag", "create", f"lakefs://{name}/v1", f"lakefs://{name}/main~1")["commit_id"]
    assert cli.js("tag", "create", f"lakefs://{name}/v1", f"lakefs://{name}/main", code=4)["code"] == (
        "already_exists"
    )
    assert cli.js("tag", "show", f"lakefs://{name}/v1")["commit_id"] == first
    moved = cli.js("tag", "create", f"lakefs://{name}/v1", f"lakefs://{name}/main", "--force")
    assert moved == {"id": "v1", "commit_id": head}
    assert cli.js("tag", "show", f"lakefs://{name}/v1")["commit_id"] == head
    assert cli.js("tag", "create", f"lakefs://{name}/v2", f"lakefs://{name}/main", "-f")["commit_id"] == head
    # --force replaces tags, never lets a tag shadow a branch.
    assert cli.js("tag", "create", f"lakefs://{name}/main", f"lakefs://{name}/main", "-f", code=4)[
        "code"
    ] == ("already_exists")
    assert [t["id"] for t in cli.js("tag", "list", f"lakefs://{name}")] == ["v1", "v2"]


def test_commit_needs_a_message_unless_allow_empty_message(cli: Lakectl) -> None:
    name = unique("msg")
    cli("repo", "create", f"lakefs://{name}")
    _put(cli, f"lakefs://{name}/main/a", b"a")
    err = cli.js("commit", f"lakefs://{name}/main", code=2)
    assert err["code"] == "invalid_argument" and "--allow-empty-message" in err["message"]
    cli("commit", f"lakefs://{name}/main", "-m", "", code=2)
    assert cli.js("diff", f"lakefs://{name}/main") != []  # still staged
    c = cli.js("commit", f"lakefs://{name}/main", "--allow-empty-message")
    assert c["message"] == "" and cli.js("diff", f"lakefs://{name}/main") == []
    assert cli.js("log", f"lakefs://{name}/main", "-n", "1")[0]["id"] == c["id"]
