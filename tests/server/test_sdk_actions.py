"""The lakeFS SDK's ActionsApi (``lakefs_sdk``) against this server's action runs, and a server's
refusals: a failed pre-hook answers 412, command hooks run only when the operator enables them."""

from __future__ import annotations

import json
import sys

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.hookd import Hookd, hookd
from tests.server.conftest import commit, upload

__all__ = ["hookd"]


def _action(hook: dict) -> bytes:
    return json.dumps(
        {"name": "gate", "on": {"pre-commit": None, "post-commit": None}, "hooks": [hook]}
    ).encode()


def test_runs_through_the_sdk(sdk: lakefs_sdk.ApiClient, api: httpx.Client, repo: str, hookd: Hookd) -> None:
    # A webhook nobody listens on fails: a refused pre-commit, recorded with its output.
    dead = {"id": "dead", "type": "webhook", "properties": {"url": "http://127.0.0.1:9/x", "timeout": "2s"}}
    upload(api, repo, "main", "_lakefs_actions/gate.yaml", _action(dead))
    refused = api.post(f"/repositories/{repo}/branches/main/commits", json={"message": "gated"})
    assert refused.status_code == 412, refused.text
    body = refused.json()
    assert body["message"].startswith("pre-commit hook aborted, run id '")
    actions = lakefs_sdk.ActionsApi(sdk)
    listed = actions.list_repository_runs(repo)
    (run,) = listed.results
    assert (run.event_type, run.status, run.branch, run.commit_id) == ("pre-commit", "failed", "main", "")
    assert listed.pagination.has_more is False
    assert actions.get_run(repo, run.run_id) == run
    (hook,) = actions.list_run_hooks(repo, run.run_id).results
    assert (hook.hook_run_id, hook.hook_id, hook.action, hook.status) == (
        "0000_0000",
        "dead",
        "gate",
        "failed",
    )
    output = actions.get_run_hook_output(repo, run.run_id, hook.hook_run_id)
    assert b"Request failed" in bytes(output)
    with pytest.raises(ApiException) as missing:
        actions.get_run(repo, "ffff")
    assert missing.value.status == 404

    # Replaced by a passing action: runs for the commit, found by the commit and the branch.
    ok = {"id": "ok", "type": "webhook", "properties": {"url": hookd.url}}
    upload(api, repo, "main", "_lakefs_actions/gate.yaml", _action(ok))
    done = commit(api, repo, "main", "gated, passing")
    by_commit = actions.list_repository_runs(repo, commit=done["id"]).results
    assert [r.event_type for r in by_commit] == ["post-commit", "pre-commit"]
    assert all(r.status == "completed" and r.commit_id == done["id"] for r in by_commit)
    page = actions.list_repository_runs(repo, branch="main", amount=1)
    assert page.pagination.has_more and page.results == by_commit[:1]
    rest = actions.list_repository_runs(repo, branch="main", after=page.pagination.next_offset).results
    assert [r.run_id for r in rest] == [by_commit[1].run_id, run.run_id]


def test_command_hooks_wait_for_the_operator(api: httpx.Client, repo: str) -> None:
    hook = {"id": "cmd", "type": "command", "properties": {"command": [sys.executable, "-c", "pass"]}}
    upload(api, repo, "main", "_lakefs_actions/gate.yaml", _action(hook))
    refused = api.post(f"/repositories/{repo}/branches/main/commits", json={"message": "gated"})
    assert refused.status_code == 412
    assert "actions.command.enabled" in refused.json()["message"]
    log = api.get(f"/repositories/{repo}/refs/main/commits").json()["results"]
    assert [c["message"] for c in log] == ["Repository created"]  # nothing committed
