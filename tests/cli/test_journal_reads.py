"""Read auditing (``lakectl journal enable --reads``): every object read is a ``read-object`` entry
of the journal with its reader, the ref as asked, what it resolved to and any range -- for
``fs cat`` and ``fs download`` embedded and remote, the REST read, the S3 gateway's GET (boto3)
and presigned URLs; off by default; a failed read records nothing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from server.config import load_settings
from tests.cli.both import Lakectl
from tests.cli.test_journal import either, embedded_cli, session, views
from tests.server.conftest import Live, serve, unique


@pytest.fixture(scope="module")
def reads_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server of its own: its journal's setting changes for every later request."""
    with serve(load_settings(None, str(tmp_path_factory.mktemp("reads-server")), environ={})) as server:
        yield server


@pytest.fixture(params=["embedded", "remote"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Lakectl:
    return either(request, tmp_path, "reads_server")


def reads_of(cli: Lakectl, repo: str) -> list[dict[str, Any]]:
    found = cli.js("journal", "tail", "--repo", f"lakefs://{repo}", "-n", "1000")
    return [e for e in found if e["event_type"] == "read-object"]


def setup_repo(cli: Lakectl) -> tuple[str, str]:
    """A repository with ``a.csv`` committed on main (tagged v1) and ``b.csv`` staged; its head."""
    repo = unique("rd")
    cli("repo", "create", f"lakefs://{repo}")
    cli("fs", "upload", f"lakefs://{repo}/main/a.csv", "-s", "-", input=b"1,2,3\n")
    head = cli.js("commit", f"lakefs://{repo}/main", "-m", "first")["id"]
    cli("tag", "create", f"lakefs://{repo}/v1", f"lakefs://{repo}/main")
    cli("fs", "upload", f"lakefs://{repo}/main/b.csv", "-s", "-", input=b"staged\n")
    return repo, head


def test_reads_audited_say_who_read_which_object_at_which_ref(cli: Lakectl, tmp_path: Path) -> None:
    setting = cli.js("journal", "enable", "--reads")
    assert (setting["enabled"], setting["reads"]) == (True, True)
    assert cli.js("journal", "enable")["reads"] is True, "enable alone keeps the setting"
    repo, head = setup_repo(cli)
    assert cli("fs", "cat", f"lakefs://{repo}/main/a.csv").stdout == "1,2,3\n"
    assert cli("fs", "cat", f"lakefs://{repo}/v1/a.csv").stdout == "1,2,3\n"
    assert cli("fs", "cat", f"lakefs://{repo}/main/b.csv").stdout == "staged\n"
    cli("fs", "download", f"lakefs://{repo}/{head}/a.csv", str(tmp_path / "a.csv"))
    assert (tmp_path / "a.csv").read_bytes() == b"1,2,3\n"
    found = reads_of(cli, repo)
    client = "admin" if cli.mode == "remote" else "tester"
    assert {(e["client_id"], e["repo_id"]) for e in found} == {(client, repo)}
    shape = {"logical_timestamp", "time", "client_id", "repo_id", "event_type", "event_payload"}
    assert all(set(e) == shape for e in found), "one shape for every entry"
    payloads = [e["event_payload"] for e in found]
    assert [(p["ref"], p["path"], p["commit_id"]) for p in payloads] == [
        ("main", "a.csv", head),
        ("v1", "a.csv", head),
        ("main", "b.csv", head),
        (head, "a.csv", head),
    ]
    assert [(p.get("branch"), p.get("staged")) for p in payloads] == [
        ("main", False),
        (None, None),
        ("main", True),
        (None, None),
    ]
    assert all("range" not in p for p in payloads), "whole-object reads name no range"
    assert payloads[0]["checksum"] == cli.js("fs", "stat", f"lakefs://{repo}/main/a.csv")["checksum"]
    # The mutations around them are journalled as before; the human form names ref and path.
    every = [e["event_type"] for e in cli.js("journal", "tail", "--repo", f"lakefs://{repo}", "-n", "100")]
    assert every[:4] == ["create-repository", "write-objects", "commit", "create-tag"]
    line = cli("journal", "tail", "--repo", f"lakefs://{repo}", "-n", "1").stdout
    assert "read-object" in line and f"ref={head}" in line and "path=a.csv" in line


def test_reads_are_not_audited_unless_asked_and_stop_when_asked(cli: Lakectl) -> None:
    assert cli.js("journal", "enable", "--no-reads")["reads"] is False
    repo, _ = setup_repo(cli)
    cli("fs", "cat", f"lakefs://{repo}/main/a.csv")
    assert reads_of(cli, repo) == []
    assert "reads audited" in cli("journal", "enable", "--reads").stdout
    cli("fs", "cat", f"lakefs://{repo}/main/a.csv")
    assert len(reads_of(cli, repo)) == 1
    cli("journal", "enable", "--no-reads")
    cli("fs", "cat", f"lakefs://{repo}/main/a.csv")
    assert len(reads_of(cli, repo)) == 1


def test_a_failed_read_records_nothing(cli: Lakectl) -> None:
    cli("journal", "enable", "--reads")
    repo, _ = setup_repo(cli)
    missing = cli("fs", "cat", f"lakefs://{repo}/main/nope.csv", code=None)
    assert missing.exit_code != 0 and missing.stderr.startswith("error:")
    cli("fs", "cat", f"lakefs://{repo}/nobranch/a.csv", code=None)
    assert reads_of(cli, repo) == []


def test_reads_off_by_default_on_a_new_lake(tmp_path: Path) -> None:
    env = {
        "LAKECTL_HOME": str(tmp_path / "lake"),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_BASE_URI": "",
    }
    cli = Lakectl("embedded", env, tmp_path)
    assert cli.js("journal", "enable")["reads"] is False
    repo, _ = setup_repo(cli)
    cli("fs", "cat", f"lakefs://{repo}/main/a.csv")
    assert [e["event_type"] for e in cli.js("journal", "tail", "-n", "100")].count("read-object") == 0


# -- the server's other read paths: REST, S3 gateway, presigned URLs -------------------------


Audited = tuple[Lakectl, str, str, str, tuple[str, str]]


@pytest.fixture
def audited(reads_server: Live, tmp_path: Path) -> Audited:
    """Reads audited on the server, a repository, its head, a Developer and its keys."""
    cli = Lakectl("remote", {**reads_server.cli_env(tmp_path), "LAKECTL_BASE_URI": ""}, tmp_path)
    cli("journal", "enable", "--reads")
    repo, head = setup_repo(cli)
    with reads_server.client((reads_server.key_id, reads_server.secret)) as admin:
        user = unique("dev")
        assert admin.post("/auth/users", json={"id": user}).status_code == 201
        assert admin.put(f"/auth/groups/Developers/members/{user}").status_code == 201
        creds = admin.post(f"/auth/users/{user}/credentials").json()
    return cli, repo, head, user, (creds["access_key_id"], creds["secret_access_key"])


def test_rest_reads_record_the_reader_and_the_range(reads_server: Live, audited: Audited) -> None:
    cli, repo, head, user, dev = audited
    url = f"/repositories/{repo}/refs/main/objects"
    with reads_server.client(dev) as api:
        assert api.get(url, params={"path": "a.csv"}).content == b"1,2,3\n"
        part = api.get(url, params={"path": "a.csv"}, headers={"Range": "bytes=2-3"})
        assert (part.status_code, part.content) == (206, b"2,")
        # Neither a stat, a HEAD, a 304, a 404 nor a 416 reads the bytes: none is recorded.
        assert api.get(url + "/stat", params={"path": "a.csv"}).status_code == 200
        assert api.head(url, params={"path": "a.csv"}).status_code == 200
        etag = part.headers["ETag"]
        assert api.get(url, params={"path": "a.csv"}, headers={"If-None-Match": etag}).status_code == 304
        assert api.get(url, params={"path": "nope"}).status_code == 404
        assert api.get(url, params={"path": "a.csv"}, headers={"Range": "bytes=99-"}).status_code == 416
    found = reads_of(cli, repo)
    assert [e["client_id"] for e in found] == [user, user]
    payloads = [e["event_payload"] for e in found]
    assert [(p["ref"], p["commit_id"], p.get("range")) for p in payloads] == [
        ("main", head, None),
        ("main", head, "bytes=2-3"),
    ]


def test_s3_gateway_reads_are_recorded_with_their_range(reads_server: Live, audited: Audited) -> None:
    cli, repo, head, user, dev = audited
    s3 = boto3.client(
        "s3",
        endpoint_url=reads_server.s3_endpoint,
        aws_access_key_id=dev[0],
        aws_secret_access_key=dev[1],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    assert s3.get_object(Bucket=repo, Key="v1/a.csv")["Body"].read() == b"1,2,3\n"
    assert s3.get_object(Bucket=repo, Key="main/b.csv", Range="bytes=0-2")["Body"].read() == b"sta"
    s3.head_object(Bucket=repo, Key="main/a.csv")  # a stat, not a read
    with pytest.raises(ClientError):
        s3.get_object(Bucket=repo, Key="main/nope")
    with pytest.raises(ClientError):
        s3.get_object(Bucket=repo, Key="main/a.csv", Range="bytes=50-60")
    found = reads_of(cli, repo)
    assert [e["client_id"] for e in found] == [user, user]
    payloads = [e["event_payload"] for e in found]
    assert [(p["ref"], p["path"], p["commit_id"], p.get("staged"), p.get("range")) for p in payloads] == [
        ("v1", "a.csv", head, None, None),
        ("main", "b.csv", head, True, "bytes=0-2"),
    ]
    # The gateway's writes are journalled as their user too (they were the server's committer's).
    s3.put_object(Bucket=repo, Key="main/c.csv", Body=b"c")
    every = cli.js("journal", "tail", "--repo", f"lakefs://{repo}", "-n", "1")
    assert [(e["event_type"], e["client_id"]) for e in every] == [("write-objects", user)]


def test_presigned_reads_are_the_signers(reads_server: Live, audited: Audited) -> None:
    cli, repo, head, user, dev = audited
    stat = presigned(reads_server, dev, repo)
    assert reads_of(cli, repo) == [], "making a presigned URL reads nothing"
    with httpx.Client(timeout=30) as anon:  # no credentials: the URL is the grant
        assert anon.get(stat).content == b"1,2,3\n"
        assert anon.get(stat, headers={"Range": "bytes=1-"}).content == b",2,3\n"
        assert anon.get(stat, headers={"Range": "bytes=40-"}).status_code == 416
    found = reads_of(cli, repo)
    assert [e["client_id"] for e in found] == [user, user]
    payloads = [e["event_payload"] for e in found]
    assert [(p["ref"], p["commit_id"], p["presigned"], p.get("range")) for p in payloads] == [
        ("v1", head, True, None),
        ("v1", head, True, "bytes=1-5"),
    ]


def presigned(server: Live, keys: tuple[str, str], repo: str) -> str:
    with server.client(keys) as api:
        stat = api.get(
            f"/repositories/{repo}/refs/v1/objects/stat", params={"path": "a.csv", "presign": "true"}
        )
    assert stat.status_code == 200, stat.text
    return str(stat.json()["physical_address"])


def test_admin_rebuild_with_reads_audited_gives_the_same_lake(tmp_path: Path) -> None:
    cli = embedded_cli(tmp_path)
    cli("journal", "enable", "--reads")
    repo = session(cli)
    cli("fs", "upload", f"lakefs://{repo}/main/staged.csv", "-s", "-", input=b"staged\n")
    before = views(cli, repo)  # reads every object: read entries among the mutations
    entries = cli.js("journal", "tail", "-n", "1000")
    assert [e["event_type"] for e in entries].count("read-object") >= 2
    os.remove(tmp_path / "lake" / "lake.db")
    done = cli.js("admin", "rebuild", "--from-journal")
    assert done["entries"] == len(entries)
    assert views(cli, repo) == before
