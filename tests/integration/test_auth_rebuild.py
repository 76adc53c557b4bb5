"""A server's users survive the loss of its metadata database (docs/journal.md, "What a rebuild
gives back"). A ``lakectl server run`` process on the default layout (a data directory holding
the SQLite ``lake.db`` and ``blocks/``; the journal on, as for every new lake) gets users, a
group with a policy, a policy attached to a user, access keys, an external principal, a deleted
user and a deleted key. The server is stopped, ``lake.db`` moved aside, ``lakectl admin rebuild
--from-journal`` rebuilds it, and the server is started again with the same configuration (the
same ``auth.encrypt.secret_key``). Then every key authenticates as before (REST with basic auth,
and S3 requests signed with it through boto3), each user is allowed and refused exactly what it
was, the deleted user and the deleted key stay refused, and nobody can set the server up again.
The same from a journal compacted before the rebuild.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.test_two_servers import _free_port, _lakectl, _stop, _wait_healthy

ROOT = Path(__file__).resolve().parents[2]
SECRET = "a-rebuilt-server-keeps-this-secret"
HTTP_TIMEOUT_S = 30.0
REBUILD_TIMEOUT_S = 120.0
READ_DATA = [
    {
        "effect": "allow",
        "action": ["fs:Read*", "fs:List*"],
        "resource": ["arn:lakefs:fs:::repository/data", "arn:lakefs:fs:::repository/data/*"],
    }
]
WRITE_DATA = [
    {
        "effect": "allow",
        "action": ["fs:*"],
        "resource": ["arn:lakefs:fs:::repository/data", "arn:lakefs:fs:::repository/data/*"],
    }
]
ARN = "arn:aws:iam::123456789012:role/alice"
OK = "ok"
EXPECTED = {
    "admin REST list users": 200,
    "alice REST read data": 200,
    "alice REST write data": 403,
    "alice S3 read data": OK,
    "alice S3 write data": "AccessDenied",
    "bob REST write data": 201,
    "bob REST read other": 403,
    "bob S3 write data": OK,
    "bob S3 read other": "AccessDenied",
    "dave REST who am I": 200,
    "dave REST write data": 403,
    "dave S3 list buckets": OK,
    "carol REST who am I": 401,
    "carol S3 list buckets": "InvalidAccessKeyId",
    "dave-gone REST who am I": 401,
    "dave-gone S3 list buckets": "InvalidAccessKeyId",
}
"""What each key may do, as the server answers it (REST: the status; S3: ``ok`` or the error
code). alice reads ``data`` through her group's policy, bob writes it through his own policy,
dave is a Viewer (a built-in group); carol's user was deleted, and so was dave's second key
(``dave-gone``)."""


class Server:
    """One ``lakectl server run`` of a configuration file, started and stopped as asked."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        api, s3 = _free_port(), _free_port()
        self.url, self.s3_url = f"http://127.0.0.1:{api}/api/v1", f"http://127.0.0.1:{s3}"
        self.conf = tmp / "server.yaml"
        self.conf.write_text(
            f"listen_address: 127.0.0.1:{api}\n"
            f"gateways: {{s3: {{listen_address: '127.0.0.1:{s3}'}}}}\n"
            f"data_dir: {self.home}\n"
            "logging: {level: warn}\n"
            f"auth: {{encrypt: {{secret_key: {SECRET}}}}}\n"
        )
        own = ("LAKECTL_SERVER_", "LAKECTL_HOME")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
        # The processes run this checkout's code, whichever checkout the environment installed.
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        self.proc: subprocess.Popen[bytes] | None = None

    def lakectl(self, *args: str, home: bool = False) -> str:
        env = {**self.env, "LAKECTL_HOME": str(self.home)} if home else self.env
        done = subprocess.run(
            [*_lakectl(), *args], env=env, capture_output=True, text=True, timeout=REBUILD_TIMEOUT_S
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self) -> None:
        with open(self.tmp / "s0.log", "ab") as log:
            self.proc = subprocess.Popen(
                [*_lakectl(), "server", "run", "--config", str(self.conf)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        _wait_healthy([(self.proc, self.url)], self.tmp)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    made = Server(tmp_path)
    try:
        yield made
    finally:
        made.stop()


def populate(api: httpx.Client) -> dict[str, tuple[str, str]]:
    """Repositories, users, a group with a policy, a user's policy, keys, an external principal,
    a deleted user and a deleted key; the keys by name: (key id, secret)."""
    for repo in ("data", "other"):
        ok(api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"}))
        base = {"path": "base.csv"}
        ok(api.post(f"/repositories/{repo}/branches/main/objects", params=base, content=b"1\n"))
    ok(api.post("/auth/policies", json={"id": "read-data", "statement": READ_DATA}))
    ok(api.post("/auth/policies", json={"id": "write-data", "statement": WRITE_DATA}))
    ok(api.post("/auth/groups", json={"id": "readers"}))
    ok(api.put("/auth/groups/readers/policies/read-data"))
    keys: dict[str, tuple[str, str]] = {}
    for user in ("alice", "bob", "carol", "dave"):
        ok(api.post("/auth/users", json={"id": user}))
        keys[user] = new_key(api, user)
    ok(api.put("/auth/groups/readers/members/alice"))
    ok(api.put("/auth/groups/Viewers/members/dave"))
    ok(api.put("/auth/users/bob/policies/write-data"))
    ok(api.post("/auth/users/alice/external/principals", params={"principalId": ARN}))
    keys["dave-gone"] = new_key(api, "dave")
    ok(api.delete(f"/auth/users/dave/credentials/{keys['dave-gone'][0]}"))
    ok(api.delete("/auth/users/carol"))
    return keys


def ok(response: httpx.Response) -> httpx.Response:
    assert response.is_success, (response.request.url, response.status_code, response.text)
    return response


def new_key(api: httpx.Client, user: str) -> tuple[str, str]:
    made = ok(api.post(f"/auth/users/{user}/credentials")).json()
    return made["access_key_id"], made["secret_access_key"]


def directory(api: httpx.Client) -> dict[str, Any]:
    """What the admin sees of the users: every user, group, policy and membership, each user's
    effective policies and access key ids, the external principal."""
    users = [u["id"] for u in ok(api.get("/auth/users")).json()["results"]]
    seen: dict[str, Any] = {
        "users": ok(api.get("/auth/users")).json()["results"],
        "groups": ok(api.get("/auth/groups")).json()["results"],
        "policies": ok(api.get("/auth/policies")).json()["results"],
        "members": ok(api.get("/auth/groups/readers/members")).json()["results"],
        "principal": ok(api.get("/auth/external/principals", params={"principalId": ARN})).json(),
    }
    for user in users:
        policies = api.get(f"/auth/users/{user}/policies", params={"effective": "true"})
        seen[f"{user} policies"] = ok(policies).json()["results"]
        keys = ok(api.get(f"/auth/users/{user}/credentials")).json()["results"]
        seen[f"{user} keys"] = [c["access_key_id"] for c in keys]
    return seen


_writes = itertools.count()


def answers(server: Server, keys: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """What the server answers each key (the rows of :data:`EXPECTED`)."""
    n = next(_writes)
    out: dict[str, Any] = {}
    for who, key in keys.items():
        out |= {f"{who} REST {what}": status for what, status in rest_answers(server, key, f"{who}-{n}")}
        out |= {f"{who} S3 {what}": outcome for what, outcome in s3_answers(server, key, f"{who}-s3-{n}")}
    return {k: v for k, v in out.items() if k in EXPECTED}


def rest_answers(server: Server, key: tuple[str, str], path: str) -> Iterator[tuple[str, int]]:
    """The status of each REST request with ``key`` (basic auth); a write goes to ``path``."""
    read = {"path": "base.csv"}
    with httpx.Client(base_url=server.url, auth=key, timeout=HTTP_TIMEOUT_S) as c:
        yield "list users", c.get("/auth/users").status_code
        yield "read data", c.get("/repositories/data/refs/main/objects", params=read).status_code
        written = c.post("/repositories/data/branches/main/objects", params={"path": path}, content=b"x")
        yield "write data", written.status_code
        yield "read other", c.get("/repositories/other/refs/main/objects", params=read).status_code
        yield "who am I", c.get("/user").status_code


def s3_answers(server: Server, key: tuple[str, str], path: str) -> Iterator[tuple[str, str]]:
    """``ok`` or the error code of each S3 request signed with ``key``; a write goes to ``path``."""
    s3 = s3_client(server, key)
    yield "read data", s3_outcome(lambda: s3.get_object(Bucket="data", Key="main/base.csv")["Body"].read())
    yield "write data", s3_outcome(lambda: s3.put_object(Bucket="data", Key=f"main/{path}", Body=b"x"))
    yield "read other", s3_outcome(lambda: s3.get_object(Bucket="other", Key="main/base.csv")["Body"].read())
    yield "list buckets", s3_outcome(lambda: s3.list_buckets())


def s3_client(server: Server, key: tuple[str, str]) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        s3={"addressing_style": "path"},
        retries={"max_attempts": 1},
        connect_timeout=HTTP_TIMEOUT_S,
        read_timeout=HTTP_TIMEOUT_S,
    )
    return boto3.client(
        "s3",
        endpoint_url=server.s3_url,
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        region_name="us-east-1",
        config=config,
    )


def s3_outcome(call: Any) -> str:
    from botocore.exceptions import ClientError

    try:
        call()
    except ClientError as e:
        return str(e.response["Error"]["Code"])
    return OK


@pytest.mark.slow
@pytest.mark.parametrize("compacted", [False, True], ids=["journal", "compacted-journal"])
def test_a_server_rebuilt_from_its_journal_has_its_users_back(server: Server, compacted: bool) -> None:
    admin = json.loads(server.lakectl("server", "setup", "--config", str(server.conf), "--json"))
    keys = {"admin": (admin["access_key_id"], admin["secret_access_key"])}
    server.start()
    with httpx.Client(base_url=server.url, auth=keys["admin"], timeout=HTTP_TIMEOUT_S) as api:
        keys |= populate(api)
        before = directory(api)
    assert answers(server, keys) == EXPECTED
    server.stop()
    if compacted:  # what compaction keeps of the records is enough to rebuild them
        done = json.loads(server.lakectl("journal", "compact", "--json", home=True))
        assert done["dropped"] > 0

    aside = server.tmp / "lost"
    aside.mkdir()
    for name in ("lake.db", "lake.db-wal", "lake.db-shm"):
        if (server.home / name).exists():
            (server.home / name).rename(aside / name)
    # Embedded, without the server's secret to verify its users' records with: refused.
    env = {**server.env, "LAKECTL_HOME": str(server.home)}
    bare = [*_lakectl(), "admin", "rebuild", "--from-journal"]
    refused = subprocess.run(bare, env=env, capture_output=True, text=True, timeout=REBUILD_TIMEOUT_S)
    assert refused.returncode == 2 and "--server-config" in refused.stderr, refused.stderr
    assert not (server.home / "lake.db").exists(), "nothing half-built is left"
    server.lakectl("admin", "rebuild", "--from-journal", "--server-config", str(server.conf), "--json")
    server.start()

    assert answers(server, keys) == EXPECTED
    with httpx.Client(base_url=server.url, auth=keys["admin"], timeout=HTTP_TIMEOUT_S) as api:
        assert directory(api) == before
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT_S) as anon:
        assert anon.get("/setup_lakefs").json()["state"] == "initialized"
        assert anon.post("/setup_lakefs", json={"username": "intruder"}).status_code == 409
