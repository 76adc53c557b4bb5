"""Every verb that moves a branch, over the REST API and the S3 gateway of a live server (SQLite
and PostgreSQL), against a branch under no rule, a plain rule and a rule gating pull requests:
table first, the outcome of each verb under each rule, and nothing changed by a refusal. A
gated branch refuses a revert and a cherry-pick as it refuses a direct merge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.server.conftest import Live, commit, unique, upload

RULES = {
    "none": None,
    "plain": {"pattern": "rel*"},
    "pulls": {"pattern": "rel*", "required_approvals": 1},
}

OK, REFUSED, EXISTS = "ok", "refused", "exists"


class World:
    """A repository: ``main`` with ``kept.txt`` committed, ``release`` (the branch under test)
    from it, and ``dev`` one commit ahead (``dev.txt``)."""

    def __init__(self, live: Live, api: httpx.Client, rule: dict[str, Any] | None) -> None:
        self.live, self.api = live, api
        self.repo = unique("moves")
        r = api.post("/repositories", json={"name": self.repo, "storage_namespace": f"local://{self.repo}"})
        assert r.status_code == 201, r.text
        upload(api, self.repo, "main", "kept.txt", b"kept")
        upload(api, self.repo, "main", "dir/a.txt", b"a")
        commit(api, self.repo, "main", "base")
        for name in ("release", "dev"):
            made = api.post(f"/repositories/{self.repo}/branches", json={"name": name, "source": "main"})
            assert made.status_code == 201, made.text
        upload(api, self.repo, "dev", "dev.txt", b"dev")
        self.dev_head = commit(api, self.repo, "dev", "dev work")["id"]
        if rule is not None:
            put = api.put(f"/repositories/{self.repo}/settings/branch_protection", json=[rule])
            assert put.status_code == 204, put.text

    @property
    def base(self) -> str:
        return f"/repositories/{self.repo}/branches/release"

    def state(self) -> tuple[str, Any]:
        head = self.api.get(self.base).json()["commit_id"]
        staged = self.api.get(f"{self.base}/diff").json()["results"]
        return head, staged


def _s3_put(w: World) -> httpx.Response | int:
    s3 = boto3.client(
        "s3",
        endpoint_url=w.live.s3_endpoint,
        aws_access_key_id=w.live.key_id,
        aws_secret_access_key=w.live.secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    try:
        s3.put_object(Bucket=w.repo, Key="release/s3.txt", Body=b"s3")
    except ClientError as e:
        assert e.response["Error"]["Code"] == "AccessDenied", e.response
        return 403
    return 200


VERBS: dict[str, Callable[[World], httpx.Response | int]] = {
    "upload": lambda w: w.api.post(f"{w.base}/objects", params={"path": "new.txt"}, content=b"new"),
    "s3 put": _s3_put,
    "delete object": lambda w: w.api.delete(f"{w.base}/objects", params={"path": "kept.txt"}),
    "delete objects": lambda w: w.api.post(f"{w.base}/objects/delete", json={"paths": ["kept.txt"]}),
    "copy": lambda w: w.api.post(
        f"{w.base}/objects/copy", params={"dest_path": "c.txt"}, json={"src_path": "kept.txt"}
    ),
    "user metadata": lambda w: w.api.put(
        f"{w.base}/objects/stat/user_metadata", params={"path": "kept.txt"}, json={"set": {"k": "v"}}
    ),
    "commit": lambda w: w.api.post(f"{w.base}/commits", json={"message": "direct", "allow_empty": True}),
    "reset": lambda w: w.api.put(w.base, json={"type": "reset"}),
    "reset prefix": lambda w: w.api.put(w.base, json={"type": "common_prefix", "path": "dir/"}),
    "reset object": lambda w: w.api.put(w.base, json={"type": "object", "path": "kept.txt"}),
    "merge": lambda w: w.api.post(f"/repositories/{w.repo}/refs/dev/merge/release", json={}),
    "revert": lambda w: w.api.post(f"{w.base}/revert", json={"ref": "release", "parent_number": 1}),
    "cherry-pick": lambda w: w.api.post(f"{w.base}/cherry-pick", json={"ref": w.dev_head}),
    "delete branch": lambda w: w.api.delete(w.base),
    "create matching": lambda w: w.api.post(
        f"/repositories/{w.repo}/branches", json={"name": "release-2", "source": "dev"}
    ),
    "tag": lambda w: w.api.post(f"/repositories/{w.repo}/tags", json={"id": "v1", "ref": "release"}),
    "create over it": lambda w: w.api.post(
        f"/repositories/{w.repo}/branches", json={"name": "release", "source": "dev"}
    ),
}

# What each rule does to each verb (docs/pulls.md's table).
EXPECTED = {
    "none": dict.fromkeys(VERBS, OK) | {"create over it": EXISTS},
    "plain": dict.fromkeys(VERBS, REFUSED)
    | {
        "merge": OK,
        "revert": OK,
        "cherry-pick": OK,
        "create matching": OK,
        "tag": OK,
        "create over it": EXISTS,
    },
    "pulls": dict.fromkeys(VERBS, REFUSED) | {"create matching": OK, "tag": OK, "create over it": EXISTS},
}


def _outcome(r: httpx.Response | int) -> str:
    status = r if isinstance(r, int) else r.status_code
    if status < 300:
        return OK
    if status == 409:
        return EXISTS
    assert status == 403, r.text if isinstance(r, httpx.Response) else r
    if isinstance(r, httpx.Response):
        assert r.json()["code"] == "protected_branch", r.text
    return REFUSED


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> Live:
    live: Live = request.getfixturevalue("live" if request.param == "sqlite" else "live_pg")
    return live


@pytest.mark.parametrize("rule", list(RULES))
def test_every_verb_that_moves_a_branch_obeys_its_rule(server: Live, rule: str) -> None:
    found: dict[str, str] = {}
    with server.client((server.key_id, server.secret)) as api:
        for verb, call in VERBS.items():
            w = World(server, api, RULES[rule])  # each verb on a fresh repository
            before = w.state()
            found[verb] = _outcome(call(w))
            if found[verb] != OK:
                assert w.state() == before, f"{verb} was refused but changed the branch"
    assert found == EXPECTED[rule]


def test_revert_and_cherry_pick_are_refused_as_a_direct_merge_is(live: Live, api: httpx.Client) -> None:
    """With approvals required, the issue's walk-arounds: the same 403 ``protected_branch`` as a
    direct merge, and no pull request was needed to get it."""
    w = World(live, api, {"pattern": "main", "required_approvals": 1})
    main = f"/repositories/{w.repo}/branches/main"
    head = api.get(main).json()["commit_id"]
    merged = api.post(f"/repositories/{w.repo}/refs/dev/merge/main", json={})
    picked = api.post(f"{main}/cherry-pick", json={"ref": w.dev_head})
    reverted = api.post(f"{main}/revert", json={"ref": "main", "parent_number": 1})
    for r in (merged, picked, reverted):
        assert r.status_code == 403, r.text
        assert r.json()["code"] == "protected_branch"
        assert "takes merges only through a pull request" in r.json()["message"]
    assert api.get(main).json()["commit_id"] == head
    assert (
        api.get(f"/repositories/{w.repo}/refs/main/objects/stat", params={"path": "dev.txt"}).status_code
        == 404
    )
