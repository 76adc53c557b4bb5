"""A protected branch's gates are its own: the pre-merge actions committed at its head judge every
merge into it, whatever the source did to ``_lakefs_actions/``, and they are the checks a rule's
``required_checks`` asks for. Attacked over the REST API of a live server (SQLite and PostgreSQL)
with real webhooks; a merge into an unprotected branch still runs the source's actions (lakeFS)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.hookd import Hookd, hookd
from tests.server.conftest import Live, commit, unique, upload

__all__ = ["hookd"]

GATE = "_lakefs_actions/gate.yaml"


def _action(name: str, url: str, **on: str) -> bytes:
    """An action file: a webhook at ``url`` on each event ``on`` names (``pre_merge="main"``)."""
    return json.dumps(
        {
            "name": name,
            "on": {event.replace("_", "-"): {"branches": [branch]} for event, branch in on.items()},
            "hooks": [{"id": name, "type": "webhook", "properties": {"url": url}}],
        }
    ).encode()


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> Live:
    live: Live = request.getfixturevalue("live" if request.param == "sqlite" else "live_pg")
    return live


def _attack(api: httpx.Client, hookd: Hookd, dest: str, rule: dict[str, object] | None) -> str:
    """A repository whose ``dest`` holds a committed gate (a pre-merge webhook at /gate), and a
    pull request #1 from ``attack``, which deletes the gate and adds an action of its own that
    always passes (/pass, on pre-merge into ``dest`` and on its own commits)."""
    base = hookd.url.rsplit("/", 1)[0]
    repo = unique("gates")
    r = api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
    assert r.status_code == 201, r.text
    branches = f"/repositories/{repo}/branches"
    if dest != "main":
        assert api.post(branches, json={"name": dest, "source": "main"}).status_code == 201
    upload(api, repo, dest, GATE, _action("gate", f"{base}/gate", pre_merge=dest))
    commit(api, repo, dest, "the gate")
    assert api.post(branches, json={"name": "attack", "source": dest}).status_code == 201
    if rule is not None:
        put = api.put(f"/repositories/{repo}/settings/branch_protection", json=[rule])
        assert put.status_code == 204, put.text
    gone = api.delete(f"{branches}/attack/objects", params={"path": GATE})
    assert gone.status_code == 204, gone.text
    mine = _action("pass", f"{base}/pass", pre_merge=dest, pre_commit="attack")
    upload(api, repo, "attack", "_lakefs_actions/pass.yaml", mine)
    upload(api, repo, "attack", "data.csv", b"unreviewed\n")
    commit(api, repo, "attack", "drop the gate, bring my own")
    opened = api.post(
        f"/repositories/{repo}/pulls",
        json={"title": "t", "source_branch": "attack", "destination_branch": dest},
    )
    assert opened.status_code == 201, opened.text
    return repo


def _merge_events(hookd: Hookd) -> list[str]:
    return [r["path"] for r in hookd.received if r["event"]["event_type"] == "pre-merge"]


def test_a_pull_request_cannot_replace_the_gate_that_judges_it(server: Live, hookd: Hookd) -> None:
    hookd.statuses = {"/gate": 412, "/pass": 200}
    with server.client((server.key_id, server.secret)) as api:
        repo = _attack(api, hookd, "main", {"pattern": "main", "required_checks": True})
        main = api.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
        status = api.get(f"/repositories/{repo}/pulls/1/status").json()
        refused = api.put(f"/repositories/{repo}/pulls/1/merge", json={})
        assert refused.status_code == 412, refused.text
        assert (
            refused.json()["code"] == "hook_failed" and "pre-merge hook aborted" in refused.json()["message"]
        )
        assert _merge_events(hookd) == ["/gate"]
        assert api.get(f"/repositories/{repo}/branches/main").json()["commit_id"] == main
        kept = api.get(f"/repositories/{repo}/refs/main/objects", params={"path": GATE})
        assert kept.status_code == 200 and b"/gate" in kept.content
        assert api.get(f"/repositories/{repo}/pulls/1").json()["status"] == "open"
        # The source's own check passed, and counts for nothing: main's gate is what ran.
        assert [c["status"] for c in status["checks"]] == ["completed"]
        assert status["destination_checks"] == ["gate"] and status["mergeable"]

        # When main's own gate passes the change (even one that edits the gate), it merges.
        hookd.statuses["/gate"] = 200
        merged = api.put(f"/repositories/{repo}/pulls/1/merge", json={})
        assert merged.status_code == 200, merged.text
        assert _merge_events(hookd) == ["/gate", "/gate"]
        assert api.get(f"/repositories/{repo}/pulls/1").json()["status"] == "merged"


def test_a_plain_rule_runs_the_destinations_gate_on_a_direct_merge(server: Live, hookd: Hookd) -> None:
    hookd.statuses = {"/gate": 412, "/pass": 200}
    with server.client((server.key_id, server.secret)) as api:
        repo = _attack(api, hookd, "main", {"pattern": "main"})
        refused = api.post(f"/repositories/{repo}/refs/attack/merge/main", json={})
        assert refused.status_code == 412 and refused.json()["code"] == "hook_failed", refused.text
        assert _merge_events(hookd) == ["/gate"]


def test_an_unprotected_branch_runs_the_sources_actions_as_lakefs_does(server: Live, hookd: Hookd) -> None:
    hookd.statuses = {"/gate": 412, "/pass": 200}
    with server.client((server.key_id, server.secret)) as api:
        repo = _attack(api, hookd, "staging", None)
        merged = api.post(f"/repositories/{repo}/refs/attack/merge/staging", json={})
        assert merged.status_code == 200, merged.text
        assert _merge_events(hookd) == ["/pass"]


def test_required_checks_need_a_gate_on_the_destination(server: Live, hookd: Hookd) -> None:
    """A destination without a pre-merge action of its own has nothing to check a merge with: the
    source's passing runs do not make up for it."""
    hookd.statuses = {"/pass": 200}
    with server.client((server.key_id, server.secret)) as api:
        repo = unique("gates")
        r = api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
        assert r.status_code == 201, r.text
        assert (
            api.post(f"/repositories/{repo}/branches", json={"name": "next", "source": "main"}).status_code
            == 201
        )
        mine = _action("pass", hookd.url.rsplit("/", 1)[0] + "/pass", pre_merge="main", pre_commit="next")
        upload(api, repo, "next", "_lakefs_actions/pass.yaml", mine)
        commit(api, repo, "next", "more")
        rule = [{"pattern": "main", "required_checks": True}]
        assert api.put(f"/repositories/{repo}/settings/branch_protection", json=rule).status_code == 204
        opened = api.post(
            f"/repositories/{repo}/pulls",
            json={"title": "t", "source_branch": "next", "destination_branch": "main"},
        )
        assert opened.status_code == 201, opened.text
        refused = api.put(f"/repositories/{repo}/pulls/1/merge", json={})
        assert refused.status_code == 412 and refused.json()["code"] == "precondition_failed", refused.text
        assert _merge_events(hookd) == []
        status = api.get(f"/repositories/{repo}/pulls/1/status").json()
        assert [c["status"] for c in status["checks"]] == ["completed"]
        assert status["destination_checks"] == [] and not status["mergeable"]
        assert "no pre-merge action" in " ".join(status["reasons"])
