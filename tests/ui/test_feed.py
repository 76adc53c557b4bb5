"""The activity feed in the web UI, on servers of its own (switching the journal on would change
the shared ``live`` server for every other test): ``quiet`` keeps the journal off (the feed is
made of commits), ``journaled`` has it on. In a real browser, both ways: a commit made through
the REST API appears on the open page without a reload. Over HTTP: entries newest first with
their links, only of repositories the user may read, the fragment the page polls (a cursor, the
mode), messages shown as text, and the per-repository view."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.config import load_settings
from tests.server.conftest import Live, commit, serve, unique, upload, without_journal
from tests.ui.conftest import base_url, new_repo, sign_in


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server whose journal was switched off (a new lake has it on)."""
    with serve(load_settings(None, str(tmp_path_factory.mktemp("feed-quiet")), environ={})) as server:
        without_journal(server)
        yield server


@pytest.fixture(scope="module")
def journaled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server whose journal was switched on through the REST API."""
    data_dir: Path = tmp_path_factory.mktemp("feed-journal")
    with serve(load_settings(None, str(data_dir), environ={})) as server:
        with server.client((server.key_id, server.secret)) as api:
            on = api.post("/journal/enable", json={})
            assert on.status_code == 200 and on.json()["enabled"] is True, on.text
        yield server


def _api(server: Live) -> httpx.Client:
    return server.client((server.key_id, server.secret))


def _keys(html: str) -> list[str]:
    return re.findall(r'<tr data-key="([^"]+)"', html)


def _rows(html: str) -> list[str]:
    """Each row's text, whitespace collapsed."""
    rows = re.findall(r'<tr data-key="[^"]+".*?</tr>', html, re.S)
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", r)).split()) for r in rows]


def _reader_of(server: Live, repo: str) -> tuple[str, str, str]:
    """A user who may read ``repo`` only (a policy of its own): (id, key id, secret)."""
    name = unique("reader")
    with _api(server) as api:
        statement = [
            {"effect": "allow", "action": ["fs:*"], "resource": f"arn:lakefs:fs:::repository/{repo}"}
        ]
        assert (
            api.post("/auth/policies", json={"id": f"{name}-read", "statement": statement}).status_code == 201
        )
        assert api.post("/auth/users", json={"id": name}).status_code == 201
        assert api.put(f"/auth/users/{name}/policies/{name}-read").status_code == 201
        creds = api.post(f"/auth/users/{name}/credentials").json()
    return name, creds["access_key_id"], creds["secret_access_key"]


@pytest.mark.parametrize("server_name", ["quiet", "journaled"])
def test_the_feed_shows_a_new_commit_without_a_reload(
    server_name: str, request: pytest.FixtureRequest, page: Any
) -> None:
    from playwright.sync_api import expect

    server: Live = request.getfixturevalue(server_name)
    with _api(server) as api:
        repo = new_repo(api)
    page.goto(base_url(server) + "/ui/login")
    page.get_by_label("Access key ID").fill(server.key_id)
    page.get_by_label("Secret access key").fill(server.secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url("**/ui/")
    page.get_by_role("navigation", name="Site").get_by_role("link", name="Activity").click()
    assert page.title() == "Activity · lakectl"
    off = page.get_by_text("The journal is off: showing commits")
    expect(off).to_have_count(1 if server_name == "quiet" else 0)
    page.evaluate("window.stillThisPage = true")

    message = f"Load the orders {unique('m')}"
    with _api(server) as api:
        upload(api, repo, "main", "orders.csv", b"id\n1\n")
        made = commit(api, repo, "main", message)
    first = page.locator("#feed-entries tr").first
    expect(first).to_contain_text(message, timeout=15_000)
    expect(first).to_contain_text("commit")
    expect(first).to_contain_text(repo)
    expect(first).to_contain_text("admin")
    expect(first.get_by_role("link", name=made["id"][:12])).to_have_attribute(
        "href", f"/ui/repos/{repo}/commits/{made['id']}"
    )
    expect(page.locator("#feed-status")).to_contain_text("new event")
    assert page.evaluate("window.stillThisPage") is True  # no reload happened
    assert page.locator(f"#feed-entries tr:has-text('{message}')").count() == 1  # shown once


def test_the_journal_feed_lists_every_kind_of_event_with_its_link(journaled: Live) -> None:
    with _api(journaled) as api:
        repo = new_repo(api)
        upload(api, repo, "main", "a.csv", b"a\n")
        head = commit(api, repo, "main", "first\n\nwith a body")["id"]
        assert (
            api.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"}).status_code
            == 201
        )
        assert api.post(f"/repositories/{repo}/tags", json={"id": "v1", "ref": "main"}).status_code == 201
        pull = api.post(
            f"/repositories/{repo}/pulls",
            json={"title": "t", "source_branch": "dev", "destination_branch": "main"},
        ).json()["id"]
        assert api.put(
            f"/repositories/{repo}/settings/branch_protection", json=[{"pattern": "main"}]
        ).is_success
    with sign_in(journaled, journaled.key_id, journaled.secret) as ui:
        shown = ui.get("/ui/feed", params={"repo": repo})
        assert shown.status_code == 200
        assert "The journal is off" not in shown.text
        rows = _rows(shown.text)
        kinds = [r.split()[4] for r in rows]  # time (3 words), user, kind: no repository column
        assert kinds == [
            "settings",
            "pull-request",
            "create-tag",
            "create-branch",
            "commit",
            "write-objects",
            "create-repository",
        ], rows
        assert rows[4].endswith(f"on main: first {head[:12]}") and "admin" in rows[4]
        for link in (
            f"/ui/repos/{repo}/settings",
            f"/ui/repos/{repo}/pulls/{pull}",
            f"/ui/repos/{repo}/refs/v1/objects",
            f"/ui/repos/{repo}/refs/dev/objects",
            f"/ui/repos/{repo}/commits/{head}",
            f"/ui/repos/{repo}/branches/main/changes",
        ):
            assert f'href="{link}"' in shown.text, link
        # the repository's tab leads here
        tab = ui.get(f"/ui/repos/{repo}/activity")
        assert tab.status_code == 303 and tab.headers["location"] == f"/ui/feed?repo={repo}"


@pytest.mark.parametrize("server_name", ["quiet", "journaled"])
def test_the_polled_fragment_has_only_newer_entries(server_name: str, request: pytest.FixtureRequest) -> None:
    server: Live = request.getfixturevalue(server_name)
    mode = "commits" if server_name == "quiet" else "journal"
    with _api(server) as api:
        repo = new_repo(api)
        upload(api, repo, "main", "a.csv", b"a\n")
        commit(api, repo, "main", "one")
    with sign_in(server, server.key_id, server.secret) as ui:
        shown = ui.get("/ui/feed", params={"repo": repo})
        found = re.search(r'data-after="(\d+)"', shown.text)
        assert found is not None
        cursor = found.group(1)
        assert f'data-mode="{mode}"' in shown.text
        same = ui.get("/ui/feed/entries", params={"repo": repo, "after": cursor, "mode": mode})
        assert same.status_code == 200 and same.headers["x-feed-mode"] == mode
        # nothing newer (the commits' feed repeats the newest second's commits: the page skips them)
        assert set(_keys(same.text)) <= set(_keys(shown.text))
        with _api(server) as api:
            upload(api, repo, "main", "b.csv", b"b\n")
            two = commit(api, repo, "main", "two <script>alert(1)</script>")
        newer = ui.get("/ui/feed/entries", params={"repo": repo, "after": cursor, "mode": mode})
        assert int(newer.headers["x-feed-cursor"]) >= int(cursor)
        new_keys = [k for k in _keys(newer.text) if k not in _keys(shown.text)]
        assert new_keys and (mode == "commits" or len(new_keys) == 2)  # journal: the upload, the commit
        assert two["id"][:12] in newer.text
        assert "<script>alert(1)</script>" not in newer.text
        assert "two &lt;script&gt;alert(1)&lt;/script&gt;" in newer.text
        # another mode than the server's: no rows (the page reloads)
        other = "journal" if mode == "commits" else "commits"
        switched = ui.get("/ui/feed/entries", params={"repo": repo, "after": cursor, "mode": other})
        assert switched.headers["x-feed-mode"] == mode and _keys(switched.text) == []
        assert ui.get("/ui/feed/entries", params={"after": "-1"}).status_code == 400


@pytest.mark.parametrize("server_name", ["quiet", "journaled"])
def test_only_repositories_the_user_may_read(server_name: str, request: pytest.FixtureRequest) -> None:
    server: Live = request.getfixturevalue(server_name)
    with _api(server) as api:
        mine, secret_repo = new_repo(api), new_repo(api)
        for repo in (mine, secret_repo):
            upload(api, repo, "main", "a.csv", b"a\n")
            commit(api, repo, "main", f"work in {repo}")
    name, key_id, secret = _reader_of(server, mine)
    with sign_in(server, key_id, secret) as ui:
        shown = ui.get("/ui/feed")
        assert shown.status_code == 200
        assert f"work in {mine}" in shown.text
        assert secret_repo not in shown.text
        polled = ui.get("/ui/feed/entries", params={"after": "0"})
        assert f"work in {mine}" in polled.text and secret_repo not in polled.text
        assert ui.get("/ui/feed", params={"repo": secret_repo}).status_code == 403
        assert ui.get("/ui/feed/entries", params={"repo": secret_repo}).status_code == 403
        assert "Administration" not in shown.text
    with sign_in(server, server.key_id, server.secret) as ui:
        assert ui.get("/ui/feed", params={"repo": "no-such-repo"}).status_code == 404
    assert name


def test_the_feed_needs_a_session(quiet: Live) -> None:
    with httpx.Client(base_url=base_url(quiet)) as anon:
        page = anon.get("/ui/feed")
        assert page.status_code == 303 and page.headers["location"].startswith("/ui/login")
        fragment = anon.get("/ui/feed/entries")
        assert fragment.status_code == 303 and "x-feed-mode" not in fragment.headers


def test_the_journal_feed_leaves_out_the_servers_users(journaled: Live) -> None:
    """Who may use the server is no repository's activity: its journal entries stay out."""
    name = unique("journalled-user")
    with _api(journaled) as api:
        assert api.post("/auth/users", json={"id": name}).status_code == 201
        repo = new_repo(api)
        found = api.get("/journal", params={"amount": 1000}).json()["results"]
    assert "auth" in {e["event_type"] for e in found}
    with sign_in(journaled, journaled.key_id, journaled.secret) as ui:
        rows = _rows(ui.get("/ui/feed").text)
    assert any(repo in row for row in rows)
    assert not [row for row in rows if "auth" in row.split() or name in row]
