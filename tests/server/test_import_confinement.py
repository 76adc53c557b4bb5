"""Zero-copy import on a server reads no host file outside ``blockstore.local.allowed_external_prefixes``:
real HTTP requests, as a Developer and as a user allowed on one repository, against a live
server (SQLite and PostgreSQL metadata) whose data directory, block volumes and configuration
file all lie inside the allowed prefix; real symbolic links, swapped after the import too. An
import from object storage needs ``fs:Import`` (moto's real S3 protocol)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from lakectl.core import porcelain, writes
from lakectl.core.model import Entry, External
from server.app import open_lake
from server.config import Settings, load_settings
from tests import moto_s3
from tests.pg import PostgresServer
from tests.server.conftest import Live, commit, serve, unique

s3_endpoint = moto_s3.s3_endpoint


@dataclass(frozen=True)
class Host:
    """A live server and the host around it: ``base`` is the allowed prefix, and holds the
    server's data directory, its two block volumes and its configuration file."""

    live: Live
    settings: Settings
    base: Path
    allowed: Path
    """A directory of plain data under ``base``, where users drop what they import."""
    users: dict[str, tuple[str, str]]
    """Credentials by caller: ``admin``, ``dev`` (Developers), ``one`` (one repository's policy)."""
    repo: str
    """The repository ``one`` may write (and ``dev`` too)."""

    def client(self, who: str) -> httpx.Client:
        return self.live.client(self.users[who])


def _users(live: Live, repo: str) -> dict[str, tuple[str, str]]:
    users = {"admin": (live.key_id, live.secret)}
    with live.client(users["admin"]) as api:
        policy = {
            "id": f"only-{repo}",
            "statement": [
                {
                    "effect": "allow",
                    "action": ["fs:*"],
                    "resource": f"arn:lakefs:fs:::repository/{repo}",
                },
                {
                    "effect": "deny",
                    "action": ["fs:Import"],
                    "resource": f"arn:lakefs:fs:::repository/{repo}",
                },
            ],
        }
        assert api.post("/auth/policies", json=policy).status_code == 201
        for user_id, group, attach in (("dev", "Developers", None), ("one", None, policy["id"])):
            assert api.post("/auth/users", json={"id": user_id}).status_code == 201
            if group:
                assert api.put(f"/auth/groups/{group}/members/{user_id}").status_code == 201
            if attach:
                assert api.put(f"/auth/users/{user_id}/policies/{attach}").status_code == 201
            creds = api.post(f"/auth/users/{user_id}/credentials").json()
            users[user_id] = (creds["access_key_id"], creds["secret_access_key"])
        r = api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
        assert r.status_code == 201, r.text
    return users


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def host(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    base = tmp_path_factory.mktemp("host").resolve()
    allowed = base / "drop"
    allowed.mkdir()
    config = base / "server.yaml"
    config.write_text(
        "blockstore:\n"
        "  local:\n"
        f"    volumes: [{base / 'vol1'}, {base / 'vol2'}]\n"
        f"    allowed_external_prefixes: [{base}]\n"
    )
    env: dict[str, str] = {}
    pg_url = ""
    if request.param == "postgres":
        postgres: PostgresServer = request.getfixturevalue("postgres_server")
        pg_url = postgres.create_database()
        env = {
            "LAKECTL_SERVER_DATABASE_TYPE": "postgres",
            "LAKECTL_SERVER_DATABASE_CONNECTION_STRING": pg_url,
        }
    settings = load_settings(str(config), str(base / "data"), environ=env)
    try:
        with serve(settings) as live:
            repo = unique("confined")
            yield Host(live, settings, base, allowed, _users(live, repo), repo)
    finally:
        if pg_url:
            request.getfixturevalue("postgres_server").drop_database(pg_url)


def _start(api: httpx.Client, repo: str, path: str, kind: str = "common_prefix", branch: str = "main") -> Any:
    body = {"paths": [{"type": kind, "path": path, "destination": "in/"}], "commit": {"message": "import"}}
    return api.post(f"/repositories/{repo}/branches/{branch}/import", json=body)


def _wait(api: httpx.Client, repo: str, import_id: str, branch: str = "main") -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        status = api.get(f"/repositories/{repo}/branches/{branch}/import", params={"id": import_id}).json()
        if status["completed"] or status["error"]:
            return status
        assert time.monotonic() < deadline, "the import did not end in time"
        time.sleep(0.05)


def _imported(api: httpx.Client, repo: str, path: str, kind: str = "common_prefix") -> list[str]:
    """Import ``path`` into a fresh branch, wait, and list what landed."""
    branch = unique("b")
    assert (
        api.post(f"/repositories/{repo}/branches", json={"name": branch, "source": "main"}).status_code == 201
    )
    r = _start(api, repo, path, kind, branch)
    assert r.status_code == 202, r.text
    status = _wait(api, repo, r.json()["id"], branch)
    assert status["completed"], status
    listed = api.get(f"/repositories/{repo}/refs/{branch}/objects/ls", params={"prefix": "in/"}).json()
    return [o["path"] for o in listed["results"]]


def _branches(api: httpx.Client, repo: str) -> list[str]:
    return sorted(b["id"] for b in api.get(f"/repositories/{repo}/branches").json()["results"])


def test_the_servers_own_files_and_the_hosts_are_refused(host: Host) -> None:
    data = Path(host.settings.data_dir)
    assert (data / "auth-secret").is_file() and (host.base / "vol1").is_dir()
    refused = [
        ("common_prefix", str(data)),  # its data directory (inside the allowed prefix)
        ("object", str(data / "auth-secret")),
        ("object", str(data / "lake.db")),
        ("common_prefix", str(host.base / "vol1")),  # a block volume: other repositories' blocks
        ("object", str(host.base / "server.yaml")),  # its configuration
        ("common_prefix", str(host.base)),  # the allowed prefix itself holds all of them
        ("common_prefix", f"local://{host.allowed}/../data"),
        ("object", f"{host.allowed}/../data/auth-secret"),
        ("common_prefix", "/etc"),
        ("object", "/etc/shadow"),
        ("object", f"{host.allowed}/../../../../../../../../etc/passwd"),
        ("common_prefix", "/proc/self"),
        ("common_prefix", "/no/such/directory"),  # outside: refused before it is looked at
    ]
    before = _branches(host.client("admin"), host.repo)
    for who in ("dev", "one", "admin"):  # the allow-list binds admins too: it is the host's
        with host.client(who) as api:
            for kind, path in refused:
                r = _start(api, host.repo, path, kind)
                assert r.status_code == 403, (who, path, r.text)
                assert r.json()["code"] == "forbidden", r.text
                assert "may not be read by this server" in r.json()["message"]
    assert _branches(host.client("admin"), host.repo) == before  # no task, no import branch


def test_an_allowed_directory_imports_without_following_links_out_of_it(host: Host) -> None:
    src = host.allowed / unique("src")
    (src / "sub").mkdir(parents=True)
    (src / "a.csv").write_bytes(b"1,2\n")
    (src / "sub" / "b.csv").write_bytes(b"3,4\n")
    os.symlink(src / "a.csv", src / "inside")  # a link to a file of the source: taken
    os.symlink("/etc/passwd", src / "to-etc")
    os.symlink(Path(host.settings.data_dir) / "auth-secret", src / "to-secret")
    os.symlink(host.base / "vol1", src / "to-blocks")  # a directory link: not walked
    os.symlink("/etc", src / "etc-dir")
    for who in ("dev", "one"):
        with host.client(who) as api:
            paths = _imported(api, host.repo, str(src))
            assert paths == ["in/a.csv", "in/inside", "in/sub/b.csv"], (who, paths)
            branch = unique("one-object")
            api.post(f"/repositories/{host.repo}/branches", json={"name": branch, "source": "main"})
            r = _start(api, host.repo, str(src / "to-etc"), "object", branch)
            assert r.status_code == 403, r.text  # a single object resolved through its link
    with host.client("dev") as api:
        branch = unique("read")
        api.post(f"/repositories/{host.repo}/branches", json={"name": branch, "source": "main"})
        r = _start(api, host.repo, str(src), branch=branch)
        assert _wait(api, host.repo, r.json()["id"], branch)["completed"]
        read = api.get(f"/repositories/{host.repo}/refs/{branch}/objects", params={"path": "in/inside"})
        assert read.status_code == 200 and read.content == b"1,2\n"
        stat = api.get(f"/repositories/{host.repo}/refs/{branch}/objects/stat", params={"path": "in/inside"})
        assert stat.json()["physical_address"] == str(src / "a.csv")  # the resolved path


def _mimic(path: Path, target: Path) -> None:
    """Give ``path`` the size and mtime of ``target``: what a read's version guard compares."""
    st = target.stat()
    path.write_bytes(b"x" * st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _reads(host: Host, api: httpx.Client, branch: str, path: str) -> list[httpx.Response]:
    """The object read every way a user can: REST GET, a presigned URL, the S3 gateway, and
    ``import copy`` (the server reads the source to own its bytes)."""
    r = host.repo
    rest = api.get(f"/repositories/{r}/refs/{branch}/objects", params={"path": path})
    stat = api.get(f"/repositories/{r}/refs/{branch}/objects/stat", params={"path": path, "presign": "true"})
    assert stat.status_code == 200, stat.text
    presigned = httpx.get(stat.json()["physical_address"], timeout=30)
    copy = api.post(f"/repositories/{r}/branches/{branch}/import/copy", params={"prefix": path})
    return [rest, presigned, copy]


def _gateway_read(host: Host, who: str, branch: str, path: str) -> Any:
    key_id, secret = host.users[who]
    gateway = boto3.client(
        "s3",
        endpoint_url=host.live.s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    try:
        return gateway.get_object(Bucket=host.repo, Key=f"{branch}/{path}")["Body"].read()
    except gateway.exceptions.ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"]


def test_a_file_or_directory_swapped_for_a_link_after_the_import_is_not_served(host: Host) -> None:
    secret = Path(host.settings.data_dir) / "auth-secret"
    src = host.allowed / unique("swap")
    (src / "d").mkdir(parents=True)
    _mimic(src / "auth-secret", secret)  # same size and mtime: the version guard cannot tell
    _mimic(src / "d" / "auth-secret", secret)
    with host.client("dev") as api:
        branch = unique("swap")
        api.post(f"/repositories/{host.repo}/branches", json={"name": branch, "source": "main"})
        r = _start(api, host.repo, str(src), branch=branch)
        assert _wait(api, host.repo, r.json()["id"], branch)["completed"]
        assert (
            api.get(
                f"/repositories/{host.repo}/refs/{branch}/objects", params={"path": "in/auth-secret"}
            ).content
            == b"x" * secret.stat().st_size
        )
        # The file itself becomes a link to the server's secret...
        (src / "auth-secret").unlink()
        os.symlink(secret, src / "auth-secret")
        # ...and its directory a link to the data directory.
        (src / "d").rename(src / "d-gone")
        os.symlink(secret.parent, src / "d")
        for path in ("in/auth-secret", "in/d/auth-secret"):
            for answer in _reads(host, api, branch, path):
                assert answer.status_code in (403, 503), (path, answer.status_code, answer.text)
                assert secret.read_bytes() not in answer.content
            assert _gateway_read(host, "dev", branch, path) in (403, 503)
        # Reading it as another object's copy source does not reach it either.
        r = api.post(
            f"/repositories/{host.repo}/branches/{branch}/objects/copy",
            params={"dest_path": "copied"},
            json={"src_path": "in/d/auth-secret"},
        )
        if r.status_code == 201:
            got = api.get(f"/repositories/{host.repo}/refs/{branch}/objects", params={"path": "copied"})
            assert got.status_code in (403, 503) and secret.read_bytes() not in got.content


def test_an_entry_naming_a_host_file_is_never_read(host: Host) -> None:
    """An imported entry whose address lies outside the allowed prefixes (written before the
    operator narrowed them, or by another tool) is refused at the read, whatever its guard says."""
    target = Path(host.settings.data_dir) / "auth-secret"
    st = target.stat()
    lake = open_lake(host.settings)
    try:
        branch = unique("planted")
        porcelain.create_branch(lake, host.repo, branch, "main")
        entry = Entry(
            st.st_size, "x", (), int(st.st_mtime), external=External(str(target), mtime_ns=st.st_mtime_ns)
        )
        writes.stage_rows(lake, host.repo, branch, [("planted", entry.to_row())])
    finally:
        lake.close()
    with host.client("dev") as api:
        r = api.get(f"/repositories/{host.repo}/refs/{branch}/objects", params={"path": "planted"})
        assert r.status_code == 403 and target.read_bytes() not in r.content, r.text
        assert "may not be read by this server" in r.json()["message"]


def test_an_import_from_object_storage_needs_fs_import(
    host: Host, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in (
        ("AWS_ENDPOINT_URL", s3_endpoint),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(name, value)  # the server's credentials (its process's environment)
    source = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )
    bucket = f"confined-{time.time_ns() % 10**9}"
    source.create_bucket(Bucket=bucket)
    source.put_object(Bucket=bucket, Key="ev/1.json", Body=b"{}\n")
    uri = f"s3://{bucket}/ev/"
    before = _branches(host.client("admin"), host.repo)
    for who in ("dev", "one"):
        with host.client(who) as api:
            for kind, path in (("common_prefix", uri), ("object", uri + "1.json")):
                r = _start(api, host.repo, path, kind)
                assert r.status_code == 403, (who, r.text)
                assert "fs:Import" in r.json()["message"] and "credentials" in r.json()["message"]
    assert _branches(host.client("admin"), host.repo) == before
    # A policy granting fs:Import on this repository lets a Developer import from it.
    with host.client("admin") as admin:
        grant = {
            "id": unique("import"),
            "statement": [
                {
                    "effect": "allow",
                    "action": ["fs:Import"],
                    "resource": f"arn:lakefs:fs:::repository/{host.repo}",
                }
            ],
        }
        assert admin.post("/auth/policies", json=grant).status_code == 201
        assert admin.put(f"/auth/users/dev/policies/{grant['id']}").status_code == 201
    try:
        with host.client("dev") as api:
            assert _imported(api, host.repo, uri) == ["in/1.json"]
    finally:
        with host.client("admin") as admin:
            admin.delete(f"/auth/users/dev/policies/{grant['id']}")
    with host.client("admin") as admin:  # Admins hold fs:Import (FSFullAccess)
        assert _imported(admin, host.repo, uri) == ["in/1.json"]


def test_the_lakes_own_block_bucket_is_never_imported(tmp_path: Path, s3_endpoint: str) -> None:
    """A server whose blocks are in S3: no import, an admin's included, lists or names them (S3
    prefixes are lexical: ``lake`` lists ``lake/blocks/...``), and no entry naming one is read."""
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(s3={"addressing_style": "path"}),
    )
    bucket = f"blocks-{time.time_ns() % 10**9}"
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="other/data.json", Body=b"{}\n")
    conf = tmp_path / "server.yaml"
    conf.write_text(
        f"blockstore:\n  type: s3\n  s3:\n    bucket: {bucket}\n    prefix: lake/blocks\n"
        f"    endpoint: '{s3_endpoint}'\n    region: us-east-1\n"
        "    access_key_id: testing\n    secret_access_key: testing\n"
    )
    settings = load_settings(str(conf), str(tmp_path / "data"), environ={})
    with serve(settings) as live, live.client((live.key_id, live.secret)) as admin:
        repo = unique("s3lake")
        admin.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
        r = admin.post(
            f"/repositories/{repo}/branches/main/objects", params={"path": "x"}, content=b"private"
        )
        assert r.status_code == 201, r.text
        commit(admin, repo, "main", "a private object")
        block = next(
            o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="lake/blocks/")["Contents"]
        )
        for kind, path in (
            ("common_prefix", f"s3://{bucket}/lake/blocks/"),
            ("common_prefix", f"s3://{bucket}/lake"),
            ("common_prefix", f"s3://{bucket}/"),
            ("object", f"s3://{bucket}/{block}"),
        ):
            r = _start(admin, repo, path, kind)
            assert r.status_code == 403, (path, r.text)
            assert "the lake's own blocks" in r.json()["message"]
        assert _imported(admin, repo, f"s3://{bucket}/other/") == ["in/data.json"]
        lake = open_lake(settings)
        try:
            etag = client.head_object(Bucket=bucket, Key=block)["ETag"].strip('"')
            size = client.head_object(Bucket=bucket, Key=block)["ContentLength"]
            entry = Entry(size, etag, (), 0, external=External(f"s3://{bucket}/{block}", etag))
            writes.stage_rows(lake, repo, "main", [("planted", entry.to_row())])
        finally:
            lake.close()
        r = admin.get(f"/repositories/{repo}/refs/main/objects", params={"path": "planted"})
        assert r.status_code == 403 and b"private" not in r.content, r.text
