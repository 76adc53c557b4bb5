"""Fixtures of the web UI tests: the live servers of tests/server (SQLite and PostgreSQL), clients
signed in through the sign-in form as a user would be, users of a role, and one headless Chromium
(Debian's, at /usr/bin/chromium) driven by Playwright for the whole session.

Chromium comes from ``scripts/ensure-chromium.sh`` (run here when it is missing, and by ``make
test``); Playwright's own browser downloads are never used. Without it the browser tests skip,
loudly, except under CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import Live, live, live_pg, unique

__all__ = ["live", "live_pg"]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1200, "height": 800}


def base_url(server: Live) -> str:
    """The server's root (the UI is under ``/ui``)."""
    return server.url.removesuffix("/api/v1")


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    found = re.search(r'name="csrf" value="([^"]*)"', html)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


@contextmanager
def sign_in(server: Live, key_id: str, secret: str) -> Iterator[httpx.Client]:
    """A client signed in through the sign-in form (its cookies kept), as a browser would be."""
    with httpx.Client(base_url=base_url(server), timeout=30.0) as client:
        form = client.get("/ui/login")
        assert form.status_code == 200, form.text
        done = client.post(
            "/ui/login",
            data={"access_key_id": key_id, "secret_access_key": secret, "csrf": csrf_of(form.text)},
        )
        assert done.status_code == 303, done.text
        yield client


@dataclass(frozen=True)
class Person:
    """A user of the server with an access key."""

    id: str
    key_id: str
    secret: str


def make_user(server: Live, group: str) -> Person:
    """A new user in one of lakeFS's built-in groups (``Viewers``: the Analyst role, read only;
    ``Developers``: read and write), made through the auth API as an admin would."""
    name = unique(group.lower())
    with server.client((server.key_id, server.secret)) as api:
        assert api.post("/auth/users", json={"id": name}).status_code == 201
        assert api.put(f"/auth/groups/{group}/members/{name}").status_code == 201
        creds = api.post(f"/auth/users/{name}/credentials").json()
    return Person(name, creds["access_key_id"], creds["secret_access_key"])


def new_repo(api: httpx.Client) -> str:
    """A repository made through the REST API (not under test here)."""
    name = unique("ui")
    r = api.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
    assert r.status_code == 201, r.text
    return name


@pytest.fixture
def admin(live: Live) -> Iterator[httpx.Client]:
    """The admin of the SQLite server, signed in to the UI."""
    with sign_in(live, live.key_id, live.secret) as client:
        yield client


@pytest.fixture
def api(live: Live) -> Iterator[httpx.Client]:
    """The REST API of the same server, as admin: to set up and check what the UI shows and did."""
    with live.client((live.key_id, live.secret)) as client:
        yield client


def _no_browser(reason: str) -> None:
    message = f"NO BROWSER TESTS: {reason} (run scripts/ensure-chromium.sh as root)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium under Playwright, one for the session."""
    if not os.access(CHROMIUM, os.X_OK):
        subprocess.run(["bash", str(ROOT / "scripts" / "ensure-chromium.sh")], check=False, timeout=900)
    if not os.access(CHROMIUM, os.X_OK):
        _no_browser(f"{CHROMIUM} is missing and could not be installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _no_browser("the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (no cookies) and page; confirmation dialogs are accepted."""
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    context.set_default_timeout(10_000)
    tab = context.new_page()
    tab.on("dialog", lambda dialog: dialog.accept())
    try:
        yield tab
    finally:
        context.close()
