"""``lakectl fs upload --append`` (issue 30), embedded and against a server, and the REST upload's
``append=true`` that the remote backend sends."""

from __future__ import annotations

from pathlib import Path

from tests.cli.both_json import Cli, cli, live
from tests.server.conftest import Live, unique

__all__ = ["cli", "live"]


def cat(cli: Cli, uri: str) -> str:
    return str(cli("fs", "cat", uri, human=True))


def test_append_adds_to_the_end_and_creates_a_missing_object(cli: Cli, tmp_path: Path) -> None:
    cli("repo", "create", "lakefs://R")
    made = cli("fs", "upload", "--append", "lakefs://R/main/log", "--source", "-", input=b"foo")
    assert made["size_bytes"] == 3 and cat(cli, "lakefs://R/main/log") == "foo"
    local = tmp_path / "more"
    local.write_bytes(b"bar")
    grown = cli("fs", "upload", "--append", "lakefs://R/main/log", "--source", str(local))
    assert grown["size_bytes"] == 6 and grown["checksum"].endswith("-2")
    cli("commit", "lakefs://R/main", "-m", "foobar")
    cli("fs", "upload", "--append", "lakefs://R/main/log", "--source", "-", input=b"buzz")
    assert cat(cli, "lakefs://R/main/log") == "foobarbuzz"
    assert cat(cli, "lakefs://R/main~0/log") == "foobar"  # the commit, before the last append


def test_append_keeps_the_content_type_and_refuses_what_it_cannot_do(cli: Cli, tmp_path: Path) -> None:
    cli("repo", "create", "lakefs://R")
    cli("fs", "upload", "lakefs://R/main/t.txt", "--source", "-", "--content-type", "text/plain", input=b"a")
    cli("fs", "upload", "--append", "lakefs://R/main/t.txt", "--source", "-", input=b"b")
    assert cli("fs", "stat", "lakefs://R/main/t.txt")["content_type"] == "text/plain"
    args = ("fs", "upload", "--append", "lakefs://R/main/t.txt", "--source", "-")
    cli(*args, "--content-type", "text/csv", input=b"c", code=2)
    (tmp_path / "d").mkdir()
    cli("fs", "upload", "--append", "-r", "lakefs://R/main/d/", "--source", str(tmp_path / "d"), code=2)
    cli("fs", "upload", "--append", "lakefs://R/no-branch/x", "--source", "-", input=b"c", code=3)
    assert cat(cli, "lakefs://R/main/t.txt") == "ab"  # nothing refused was written


def test_the_rest_upload_appends_with_append_true(live: Live) -> None:
    with live.client((live.key_id, live.secret)) as api:
        repo = unique("appends")
        created = api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
        assert created.is_success
        url = f"/repositories/{repo}/branches/main/objects"
        for part in (b"foo", b"bar"):
            answer = api.post(url, params={"path": "log", "append": "true"}, content=part)
            assert answer.status_code == 201, answer.text
        assert answer.json()["size_bytes"] == 6
        assert api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "log"}).content == b"foobar"
        meta = {"x-lakefs-meta-k": "v"}
        refused = api.post(url, params={"path": "log", "append": "true"}, content=b"x", headers=meta)
        assert refused.status_code == 400 and "metadata" in refused.json()["message"]
        api.post(url, params={"path": "log"}, content=b"plain").raise_for_status()  # no append: replaced
        assert api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "log"}).content == b"plain"
