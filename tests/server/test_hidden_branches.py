"""Hidden branches, as lakeFS serves them: created with ``hidden: true``, left out of branch
lists unless ``show_hidden`` asks for them, otherwise ordinary branches; so lakeFS's own Python
wrapper runs its transactions (on hidden branches) against this server."""

from __future__ import annotations

from typing import Any

from tests.server.conftest import Live, unique
from tests.server.wrapped import wrapped


def test_a_hidden_branch_is_listed_only_when_asked_for(api: Any) -> None:
    repo = unique("hidden")
    api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"}).raise_for_status()
    made = api.post(f"/repositories/{repo}/branches", json={"name": "tx-1", "source": "main", "hidden": True})
    assert made.status_code == 201, made.text
    api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"}).raise_for_status()

    def listed(**params: Any) -> list[str]:
        answer = api.get(f"/repositories/{repo}/branches", params=params)
        answer.raise_for_status()
        return [r["id"] for r in answer.json()["results"]]

    assert listed() == ["dev", "main"]
    assert listed(show_hidden="true") == ["dev", "main", "tx-1"]
    assert listed(show_hidden="true", amount=1, after="dev") == ["main"]
    # Otherwise ordinary: read, written, committed and deleted by name.
    assert api.get(f"/repositories/{repo}/branches/tx-1").status_code == 200
    up = api.post(f"/repositories/{repo}/branches/tx-1/objects", params={"path": "a.txt"}, content=b"a")
    assert up.status_code == 201, up.text
    done = api.post(f"/repositories/{repo}/branches/tx-1/commits", json={"message": "on a hidden branch"})
    assert done.status_code == 201, done.text
    assert api.delete(f"/repositories/{repo}/branches/tx-1").status_code == 204
    assert listed(show_hidden="true") == ["dev", "main"]


def test_the_lakefs_wrapper_s_transaction_runs_against_this_server(live: Live) -> None:
    lakefs = wrapped("lakefs")
    client = lakefs.Client(host=live.url.removesuffix("/api/v1"), username=live.key_id, password=live.secret)
    name = unique("tx")
    repo = lakefs.Repository(name, client=client).create(storage_namespace=f"local://{name}")
    main = repo.branch("main")
    with main.transact(commit_message="load") as tx:
        tx.object("orders.csv").upload(data=b"id\n1\n")
        assert [b.id for b in repo.branches()] == ["main"]
    assert main.object("orders.csv").exists()
    assert "load" in [c.message for c in main.log(max_amount=5)]
    assert [b.id for b in repo.branches(show_hidden=True)] == ["main"]
