"""``lakectl log --since-commit FROM REF`` (git's ``FROM..REF``), embedded and against a server;
the server's ``ancestor-of`` answer."""

from __future__ import annotations

from tests.cli.both_json import Cli, cli, live
from tests.server.conftest import Live, unique

__all__ = ["cli", "live"]


def _history(cli: Cli) -> None:
    """main: first - m1 - merge(dev) - m2; dev (from first): d1."""
    cli("repo", "create", "lakefs://R")
    cli("fs", "upload", "lakefs://R/main/a", "--source", "-", input=b"1")
    cli("commit", "lakefs://R/main", "-m", "first")
    cli("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    for branch, path, message in [("main", "m1", "m1"), ("dev", "d1", "d1")]:
        cli("fs", "upload", f"lakefs://R/{branch}/{path}", "--source", "-", input=b"x")
        cli("commit", f"lakefs://R/{branch}", "-m", message)
    cli("merge", "lakefs://R/dev", "lakefs://R/main")
    cli("fs", "upload", "lakefs://R/main/m2", "--source", "-", input=b"y")
    cli("commit", "lakefs://R/main", "-m", "m2")


def messages(cli: Cli, *args: str) -> list[str]:
    return [c["message"] for c in cli("log", *args)]


def test_log_since_commit_lists_what_from_does_not_reach(cli: Cli) -> None:
    _history(cli)
    merge = "Merge 'dev' into 'main'"
    assert messages(cli, "lakefs://R/main", "--since-commit", "main~2") == ["m2", merge, "d1"]
    assert messages(cli, "lakefs://R/main", "--since-commit", "dev") == ["m2", merge, "m1"]
    assert messages(cli, "lakefs://R/dev", "--since-commit", "main") == []
    first_parent = messages(cli, "lakefs://R/main", "--since-commit", "main~3", "--first-parent")
    assert first_parent == ["m2", merge, "m1"]
    page = messages(cli, "lakefs://R/main", "--since-commit", "main~3", "--amount", "2", "--limit")
    assert page == ["m2", merge]
    cli("log", "lakefs://R/main", "--since-commit", "nothing-here", code=3)


def test_ancestor_of(live: Live) -> None:
    with live.client((live.key_id, live.secret)) as api:
        repo = unique("ancestry")
        assert api.post(
            "/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"}
        ).is_success
        url = f"/repositories/{repo}"
        api.post(f"{url}/branches/main/objects", params={"path": "a"}, content=b"1").raise_for_status()
        head = api.post(f"{url}/branches/main/commits", json={"message": "a"}).json()["id"]
        first = api.get(f"{url}/refs/main~1/commits", params={"amount": 1}).json()["results"][0]["id"]
        answer = api.get(f"{url}/refs/main~1/ancestor-of/main").json()
        assert answer == {"ancestor": True, "commit_id": first, "other_commit_id": head}
        assert api.get(f"{url}/refs/main/ancestor-of/main~1").json()["ancestor"] is False
        assert api.get(f"{url}/refs/main/ancestor-of/main").json()["ancestor"] is True
        assert api.get(f"{url}/refs/main/ancestor-of/no-such-ref").status_code == 404


def paths(changes: list[dict[str, str]]) -> list[str]:
    return sorted(c["path"] for c in changes)


def test_diff_since_reads_a_range_of_the_refs_history(cli: Cli) -> None:
    _history(cli)
    assert paths(cli("diff", "lakefs://R/main", "--since", "main~2")) == ["d1", "m2"]
    assert paths(cli("diff", "lakefs://R/main", "--since", "main~3")) == ["d1", "m1", "m2"]
    assert paths(cli("diff", "lakefs://R/main", "--since", "dev")) == ["m1", "m2"]
    assert not cli("diff", "lakefs://R/main", "--since", "main")  # an empty range
    cli("diff", "lakefs://R/dev", "--since", "main", code=2)  # main is no ancestor of dev
    cli("diff", "lakefs://R/main", "lakefs://R/dev", "--since", "main~1", code=2)
