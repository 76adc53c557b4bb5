"""Upkeep of a shared lake, as an operator runs it: two ``lakectl server run`` processes on one
PostgreSQL database and one S3 bucket, concurrent writers and committers through both, a branch
deleted, retention rules that keep branch heads only; then ``lakectl gc run`` and ``lakectl
fsck`` from the CLI directly against the same configuration (no server in between).

After the collection fsck passes (exit 0, the expired commits counted, no orphans), and both
servers answer the same at an expired commit whatever they cached before it: its listing (the
trees of every commit stay), 410 ``gone`` for its collected data on the REST API and the S3
gateway alike.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.client import Config
from botocore.exceptions import ClientError

from tests import moto_s3
from tests.integration.test_concurrency import SPAWN_GRACE_S, _acked, _checksum, _content, _run
from tests.integration.test_two_servers import (
    HTTP_TIMEOUT_S,
    REPO,
    _free_port,
    _http_committer,
    _http_writer,
    _lakectl,
    _lakectl_json,
    _stop,
    _wait_healthy,
)
from tests.integration.test_upkeep_embedded import gc_then_fsck

s3_endpoint = moto_s3.s3_endpoint

BUCKET = "shared-lake"
RUN_S = 4.0


def _conf(tmp: Path, name: str, pg_url: str, s3: str) -> tuple[Path, str, str]:
    """A server's configuration on PostgreSQL and the S3 bucket, under the test's own prefix (the
    bucket outlives a test); its API and S3 gateway URLs."""
    api, gateway = _free_port(), _free_port()
    conf = tmp / f"{name}.yaml"
    conf.write_text(
        f"listen_address: 127.0.0.1:{api}\n"
        f"gateways: {{s3: {{listen_address: '127.0.0.1:{gateway}'}}}}\n"
        f"data_dir: {tmp / name}\n"
        "logging: {level: warn}\n"
        f"database: {{type: postgres, connection_string: '{pg_url}'}}\n"
        f"blockstore: {{type: s3, s3: {{bucket: {BUCKET}, prefix: {tmp.name}, endpoint: '{s3}', "
        "region: us-east-1, "
        "access_key_id: testing, secret_access_key: testing}}\n"
        "auth: {encrypt: {secret_key: upkeep-servers-share-this-secret}}\n"
    )
    return conf, f"http://127.0.0.1:{api}/api/v1", f"http://127.0.0.1:{gateway}"


class Servers:
    """``lakectl server run`` processes of this test, each on a configuration of its own."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[tuple[subprocess.Popen[bytes], str]] = []

    def start(self, *confs: tuple[Path, str, str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_SERVER_")}
        started = []
        for conf, api, _ in confs:
            with open(self.tmp / f"s{len(self.procs)}.log", "wb") as log:
                cmd = [*_lakectl(), "server", "run", "--config", str(conf)]
                proc = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
                )
            self.procs.append((proc, api))
            started.append((proc, api))
        _wait_healthy(started, self.tmp)

    def stop(self) -> None:
        for proc, _ in self.procs:
            _stop(proc)


@pytest.fixture
def servers(tmp_path: Path, s3_endpoint: str) -> Iterator[Servers]:
    """The bucket, and the servers a test starts (stopped after it)."""
    boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).create_bucket(Bucket=BUCKET)
    running = Servers(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _cli(conf: Path, *args: str, code: int = 0) -> Any:
    """``lakectl <args> --server-config <conf> --json``, on no server and no client config."""
    no_client = str(conf.parent / "no-client-config.yaml")
    return _lakectl_json(*args, "--server-config", str(conf), code=code, LAKECTL_CONFIG=no_client)


def _doomed_commit(api: httpx.Client) -> str:
    """A branch with a commit of data no other ref holds, then deleted: the commit's id."""
    assert (
        api.post(f"/repositories/{REPO}/branches", json={"name": "doomed", "source": "main"}).status_code
        == 201
    )
    r = api.post(
        f"/repositories/{REPO}/branches/doomed/objects",
        params={"path": "doomed/only.txt"},
        content=b"only here\n",
    )
    assert r.status_code == 201, r.text
    r = api.post(f"/repositories/{REPO}/branches/doomed/commits", json={"message": "doomed"})
    assert r.status_code == 201, r.text
    assert api.delete(f"/repositories/{REPO}/branches/doomed").status_code == 204
    return str(r.json()["id"])


def _answers(api: httpx.Client, commit: str) -> tuple[int, str, list[str]]:
    """At ``commit``: the object's status and error code, and the paths its listing shows."""
    got = api.get(f"/repositories/{REPO}/refs/{commit}/objects", params={"path": "doomed/only.txt"})
    listed = api.get(f"/repositories/{REPO}/refs/{commit}/objects/ls", params={"prefix": "doomed/"})
    assert listed.status_code == 200, listed.text
    code = got.json().get("code", "") if got.status_code >= 400 else ""
    return got.status_code, code, [o["path"] for o in listed.json()["results"]]


def _gateway_status(gateway: str, auth: tuple[str, str], commit: str) -> int:
    s3 = boto3.client(
        "s3",
        endpoint_url=gateway,
        region_name="us-east-1",
        aws_access_key_id=auth[0],
        aws_secret_access_key=auth[1],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    try:
        s3.get_object(Bucket=REPO, Key=f"{commit}/doomed/only.txt")["Body"].read()
    except ClientError as exc:
        return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
    return 200


def _busy_lake(apis: list[httpx.Client], auth: tuple[str, str], out: Path) -> str:
    """The repository, written and committed through both servers at once, then a deleted
    branch's commit (:func:`_doomed_commit`) both servers have read: its id."""
    r = apis[1].post("/repositories", json={"name": REPO, "storage_namespace": f"s3://{BUCKET}/{REPO}"})
    assert r.status_code == 201, r.text
    start_at = time.time() + SPAWN_GRACE_S
    args = ([str(api.base_url).rstrip("/") for api in apis], auth, str(out))
    workers = [(_http_writer, f"w{i}", (*args, i, start_at, start_at + RUN_S)) for i in range(2)]
    workers += [(_http_committer, f"c{i}", (*args, i, start_at, start_at + RUN_S)) for i in range(2)]
    _run(out, workers)
    last = apis[0].post(f"/repositories/{REPO}/branches/main/commits", json={"message": "last"})
    assert last.status_code in (201, 412), last.text  # 412: nothing left to commit
    doomed = _doomed_commit(apis[0])
    before = [_answers(api, doomed) for api in apis]  # both servers read it: their caches hold it
    assert before == [(200, "", ["doomed/only.txt"])] * 2
    return doomed


def _collect_and_check(conf: Path, api: httpx.Client) -> None:
    """Rules that keep branch heads only; ``gc run`` and ``fsck`` from the CLI on ``conf``."""
    rules = {"default_retention_days": 0, "branches": []}
    assert api.put(f"/repositories/{REPO}/settings/gc_rules", json=rules).status_code == 204
    gc_then_fsck(lambda *args: _cli(conf, *args), expired=2)


def _main(api: httpx.Client) -> tuple[str, dict[str, str]]:
    """``main``'s head commit id and every path it holds with its checksum."""
    head = api.get(f"/repositories/{REPO}/branches/main").json()["commit_id"]
    found: dict[str, str] = {}
    after = ""
    while True:
        page = api.get(f"/repositories/{REPO}/refs/main/objects/ls", params={"after": after, "amount": 1000})
        assert page.status_code == 200, page.text
        found.update((o["path"], o["checksum"]) for o in page.json()["results"])
        if not page.json()["pagination"]["has_more"]:
            return head, found
        after = page.json()["pagination"]["next_offset"]


@pytest.mark.slow
def test_gc_and_fsck_from_the_cli_on_a_shared_lake_and_one_answer_for_expired_data(
    servers: Servers, tmp_path: Path, pg_url: str, s3_endpoint: str
) -> None:
    shared = [_conf(tmp_path, f"s{i}", pg_url, s3_endpoint) for i in range(2)]
    servers.start(*shared)
    (conf, api0, gw0), (_, api1, gw1) = shared
    with httpx.Client(base_url=api0, timeout=HTTP_TIMEOUT_S) as anon:
        r = anon.post("/setup_lakefs", json={"username": "admin"})
        assert r.status_code == 200, r.text
    auth = (r.json()["access_key_id"], r.json()["secret_access_key"])
    apis = [httpx.Client(base_url=u, auth=auth, timeout=HTTP_TIMEOUT_S) for u in (api0, api1)]
    out = tmp_path / "out"
    out.mkdir()
    doomed = _busy_lake(apis, auth, out)
    _collect_and_check(conf, apis[1])

    after = [_answers(api, doomed) for api in apis]
    assert after == [(410, "gone", ["doomed/only.txt"])] * 2
    assert [_gateway_status(gw, auth, doomed) for gw in (gw0, gw1)] == [410, 410]
    heads = [_main(api) for api in apis]
    acked = _acked(out)  # however many the machine's speed let through: each is on main, intact
    assert heads[0] == heads[1] and len(acked) >= 4
    assert {p: heads[0][1].get(p) for p in acked} == {p: _checksum(_content(p)) for p in acked}
    for api in apis:  # what the branch holds reads back, from both servers
        for path in sorted(heads[0][1])[:5]:
            r = api.get(f"/repositories/{REPO}/refs/main/objects", params={"path": path})
            assert r.status_code == 200, r.text
    for api in apis:
        api.close()


@pytest.fixture
def second_database(postgres_server: Any) -> Iterator[str]:
    """Another empty database on the same PostgreSQL server: where a lost one is rebuilt."""
    url = postgres_server.take_database()
    try:
        yield str(url)
    finally:
        postgres_server.give_back(url)


@pytest.mark.slow
def test_a_shared_lake_is_rebuilt_from_its_journal_into_a_new_database_with_its_users(
    servers: Servers, tmp_path: Path, pg_url: str, second_database: str, s3_endpoint: str
) -> None:
    lost = _conf(tmp_path, "lost", pg_url, s3_endpoint)
    servers.start(lost)
    with httpx.Client(base_url=lost[1], timeout=HTTP_TIMEOUT_S) as anon:
        r = anon.post("/setup_lakefs", json={"username": "admin"})
        assert r.status_code == 200, r.text
    auth = (r.json()["access_key_id"], r.json()["secret_access_key"])
    with httpx.Client(base_url=lost[1], auth=auth, timeout=HTTP_TIMEOUT_S) as api:
        r = api.post("/repositories", json={"name": REPO, "storage_namespace": f"s3://{BUCKET}/{REPO}"})
        assert r.status_code == 201, r.text
        for n in range(3):
            path = f"data/{n}.csv"
            r = api.post(
                f"/repositories/{REPO}/branches/main/objects", params={"path": path}, content=b"%d\n" % n
            )
            assert r.status_code == 201, r.text
            assert (
                api.post(f"/repositories/{REPO}/branches/main/commits", json={"message": path}).status_code
                == 201
            )
        staged = api.post(
            f"/repositories/{REPO}/branches/main/objects", params={"path": "staged.csv"}, content=b"s\n"
        )
        assert staged.status_code == 201, staged.text
        before = _main(api)
    servers.stop()

    rebuilt = _conf(tmp_path, "rebuilt", second_database, s3_endpoint)
    done = _cli(rebuilt[0], "admin", "rebuild", "--from-journal")
    assert done["repositories"] == 1 and pg_url.split("@")[-1] != done["database"]
    assert _cli(rebuilt[0], "admin", "rebuild", "--from-journal", code=4)["code"] == "already_exists"
    checked = _cli(rebuilt[0], "fsck")
    assert checked["ok"] is True and checked["commits"] >= 4
    servers.start(rebuilt)
    with httpx.Client(base_url=rebuilt[1], timeout=HTTP_TIMEOUT_S) as anon:
        assert anon.post("/setup_lakefs", json={"username": "admin"}).status_code == 409, "set up already"
    with httpx.Client(base_url=rebuilt[1], auth=auth, timeout=HTTP_TIMEOUT_S) as api:  # the same key
        assert _main(api) == before
        assert (
            api.get(f"/repositories/{REPO}/refs/main/objects", params={"path": "staged.csv"}).content
            == b"s\n"
        )
