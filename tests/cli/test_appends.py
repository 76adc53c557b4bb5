"""``lakectl fs upload --append``, embedded and against a server (whose client sends the bytes as
blocks, then links them with ``objects/link?append=true``), and the REST upload's ``append=true``."""

from __future__ import annotations

import hashlib
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


def test_the_link_route_appends_signed_blocks_and_refuses_what_an_append_keeps(live: Live) -> None:
    with live.client((live.key_id, live.secret)) as api:
        repo = unique("appends")
        api.post(
            "/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"}
        ).raise_for_status()
        api.post(f"/repositories/{repo}/branches/main/objects", params={"path": "log"}, content=b"foo")
        md5 = hashlib.md5(b"bar").hexdigest()
        signed = api.put(live.url.removesuffix("/api/v1") + f"/blocks/{md5}", content=b"bar").text.strip()
        link = f"/repositories/{repo}/branches/main/objects/link"
        appended = api.post(link, params={"append": "true"}, json={"path": "log", "segments": [signed]})
        assert appended.status_code == 201, appended.text
        assert api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "log"}).content == b"foobar"
        typed = {"path": "log", "segments": [signed], "content_type": "text/csv"}
        refused = api.post(link, params={"append": "true"}, json=typed)
        assert refused.status_code == 400 and "content type" in refused.json()["message"]
        forged = api.post(link, params={"append": "true"}, json={"path": "log", "segments": [f"{md5}+3"]})
        assert forged.status_code >= 400  # an unsigned locator proves nothing: refused
        assert api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "log"}).content == b"foobar"


def _pfs(cli: Cli) -> list[str]:
    """Three commits on main: foo, then bar appended, then buzz appended; their ids, oldest first."""
    cli("repo", "create", "lakefs://R")
    ids = []
    for n, part in enumerate([b"foo", b"bar", b"buzz"]):
        append = ["--append"] if n else []
        cli("fs", "upload", *append, "lakefs://R/main/f", "--source", "-", input=part)
        ids.append(cli("commit", "lakefs://R/main", "-m", part.decode())["id"])
    return ids


def test_cat_and_download_since_read_what_was_appended(cli: Cli, tmp_path: Path) -> None:
    first, second, third = _pfs(cli)
    assert cat_since(cli, "lakefs://R/main/f", first) == "barbuzz"
    assert cat_since(cli, f"lakefs://R/{third}/f", second) == "buzz"
    assert cat_since(cli, f"lakefs://R/{second}/f", first) == "bar"
    target = tmp_path / "tail"
    done = cli("fs", "download", "lakefs://R/main/f", str(target), "--since", first)
    assert target.read_bytes() == b"barbuzz" and done[0]["size_bytes"] == 7
    cli("fs", "cat", f"lakefs://R/{first}/f", "--since", third, code=2)  # no ancestor
    cli("fs", "cat", "lakefs://R/main/missing", "--since", first, code=3)
    cli("fs", "download", "-r", "lakefs://R/main/", str(tmp_path), "--since", first, code=2)


def test_cat_since_restarts_after_a_delete(cli: Cli) -> None:
    first, _, _ = _pfs(cli)
    cli("fs", "rm", "lakefs://R/main/f")
    cli("fs", "upload", "lakefs://R/main/g", "--source", "-", input=b"keeps the commit non-empty")
    cli("commit", "lakefs://R/main", "-m", "deleted")
    cli("fs", "upload", "--append", "lakefs://R/main/f", "--source", "-", input=b"again")
    cli("commit", "lakefs://R/main", "-m", "again")
    assert cat_since(cli, "lakefs://R/main/f", first) == "again"


def cat_since(cli: Cli, uri: str, since: str) -> str:
    return str(cli("fs", "cat", uri, "--since", since, human=True))


def test_the_rest_read_takes_since(live: Live) -> None:
    with live.client((live.key_id, live.secret)) as api:
        repo = unique("since")
        created = api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
        assert created.is_success
        url = f"/repositories/{repo}"
        ids = []
        for n, part in enumerate([b"foo", b"bar", b"buzz"]):
            params = {"path": "f", **({"append": "true"} if n else {})}
            api.post(f"{url}/branches/main/objects", params=params, content=part).raise_for_status()
            ids.append(api.post(f"{url}/branches/main/commits", json={"message": part.decode()}).json()["id"])
        read = f"{url}/refs/main/objects"
        got = api.get(read, params={"path": "f", "since": ids[0]})
        assert got.status_code == 200 and got.content == b"barbuzz" and "etag" not in got.headers
        refused = api.get(f"{url}/refs/{ids[0]}/objects", params={"path": "f", "since": ids[2]})
        assert refused.status_code == 400 and "not an ancestor" in refused.json()["message"]
        ranged = api.get(read, params={"path": "f", "since": ids[0]}, headers={"Range": "bytes=0-1"})
        assert ranged.status_code == 400
