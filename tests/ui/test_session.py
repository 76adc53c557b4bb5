"""Sign-in, the session cookie and CSRF, over HTTP against the live server (no browser): what a
browser relies on, checked at the level of requests and headers."""

from __future__ import annotations

import time
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from server.auth.secret import load_secret_key
from server.auth.store import Auth
from server.ui import links
from tests.server.conftest import Live, plumbing
from tests.ui.conftest import base_url, csrf_of, new_repo, sign_in


def _set_cookies(response: httpx.Response) -> dict[str, SimpleCookie]:
    jar = {}
    for header in response.headers.get_list("set-cookie"):
        cookie: SimpleCookie = SimpleCookie()
        cookie.load(header)
        jar.update({name: cookie for name in cookie})
    return jar


def test_pages_need_a_session_and_come_back_after_sign_in(live: Live) -> None:
    with httpx.Client(base_url=base_url(live), timeout=30.0) as browser:
        root = browser.get("/")
        assert root.status_code in (302, 307) and root.headers["location"] == "/ui/"
        where = "/ui/repos/some-repo/refs/main/objects?prefix=a%2F"
        away = browser.get(where)
        assert away.status_code == 303
        login = urlsplit(away.headers["location"])
        assert login.path == "/ui/login" and parse_qs(login.query)["next"] == [where]
        form = browser.get(away.headers["location"])
        assert form.status_code == 200 and "<title>Sign in · lakectl</title>" in form.text
        signed = browser.post(
            "/ui/login",
            data={
                "access_key_id": live.key_id,
                "secret_access_key": live.secret,
                "next": parse_qs(login.query)["next"][0],
                "csrf": csrf_of(form.text),
            },
        )
        assert signed.status_code == 303 and signed.headers["location"] == where
        home = browser.get("/ui/")
        assert home.status_code == 200 and "Signed in as <strong" in home.text


def test_a_wrong_secret_is_refused(live: Live) -> None:
    with httpx.Client(base_url=base_url(live), timeout=30.0) as browser:
        form = browser.get("/ui/login")
        refused = browser.post(
            "/ui/login",
            data={"access_key_id": live.key_id, "secret_access_key": "x" * 40, "csrf": csrf_of(form.text)},
        )
        assert refused.status_code == 401
        assert "invalid access key id or secret access key" in refused.text
        assert "lakectl_session" not in _set_cookies(refused)
        assert browser.get("/ui/").status_code == 303  # still signed out


def test_next_never_leaves_the_ui(live: Live) -> None:
    with httpx.Client(base_url=base_url(live), timeout=30.0) as browser:
        for target in (
            "https://evil.example/",
            "//evil.example/ui/",
            "/api/v1/repositories",
            "/\\evil.example/",
        ):
            form = browser.get("/ui/login")
            signed = browser.post(
                "/ui/login",
                data={
                    "access_key_id": live.key_id,
                    "secret_access_key": live.secret,
                    "next": target,
                    "csrf": csrf_of(form.text),
                },
            )
            assert signed.headers["location"] == "/ui/", target
            browser.cookies.clear()


def test_cookie_flags(live: Live) -> None:
    with httpx.Client(base_url=base_url(live), timeout=30.0) as browser:
        form = browser.get("/ui/login")
        nonce = _set_cookies(form)["lakectl_login"]["lakectl_login"]
        assert nonce["httponly"] and nonce["samesite"].lower() == "lax" and nonce["path"] == "/ui/login"
        signed = browser.post(
            "/ui/login",
            data={"access_key_id": live.key_id, "secret_access_key": live.secret, "csrf": csrf_of(form.text)},
        )
        session = _set_cookies(signed)["lakectl_session"]["lakectl_session"]
        assert session["httponly"] is True
        assert session["samesite"].lower() == "lax"
        assert session["path"] == "/"
        assert not session["secure"]  # plain http here: a Secure cookie would never come back
        assert 0 < int(session["max-age"]) <= 24 * 3600


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    admin: httpx.Client, api: httpx.Client
) -> None:
    repo = new_repo(api)
    token = csrf_of(admin.get(f"/ui/repos/{repo}/branches").text)
    for sent in (
        {},
        {"csrf": ""},
        {"csrf": "0" * 64},
        {"csrf": token[:-1] + ("0" if token[-1] != "0" else "1")},
    ):
        refused = admin.post(f"/ui/repos/{repo}/branches", data={"name": "sneaky", "source": "main", **sent})
        assert refused.status_code == 403, sent
        assert "CSRF token" in refused.text and "<title>Error 403" in refused.text
    upload = admin.post(
        f"/ui/repos/{repo}/branches/main/upload",
        data={"path": "sneaky.txt"},
        files={"content": ("sneaky.txt", b"x", "text/plain")},
    )
    assert upload.status_code == 403
    deleted = admin.post(f"/ui/repos/{repo}/delete", data={"confirm": repo})
    assert deleted.status_code == 403
    assert [b["id"] for b in api.get(f"/repositories/{repo}/branches").json()["results"]] == ["main"]
    assert api.get(f"/repositories/{repo}/branches/main/diff").json()["results"] == []
    made = admin.post(f"/ui/repos/{repo}/branches", data={"name": "fine", "source": "main", "csrf": token})
    assert made.status_code == 303  # the same form with its token goes through


def test_a_token_of_another_session_is_refused(live: Live, api: httpx.Client) -> None:
    """The token is bound to the session: one copied from another user's page does not work."""
    repo = new_repo(api)
    with sign_in(live, live.key_id, live.secret) as one, sign_in(live, live.key_id, live.secret) as two:
        theirs = csrf_of(one.get("/ui/").text)
        assert csrf_of(two.get("/ui/").text) != theirs
        refused = two.post(f"/ui/repos/{repo}/branches", data={"name": "x", "source": "main", "csrf": theirs})
        assert refused.status_code == 403


def test_the_sign_in_form_needs_its_nonce(live: Live) -> None:
    with httpx.Client(base_url=base_url(live), timeout=30.0) as browser:
        refused = browser.post(
            "/ui/login", data={"access_key_id": live.key_id, "secret_access_key": live.secret, "csrf": "x"}
        )
        assert refused.status_code == 403 and "lakectl_session" not in _set_cookies(refused)


def test_output_is_escaped(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    evil = "<script>alert(1)</script>"
    path = f"x{evil}.txt"
    r = api.post(
        f"/repositories/{repo}/branches/main/objects",
        params={"path": path},
        content=f"{evil}\n".encode(),
        headers={"x-lakefs-meta-note": evil},
    )
    assert r.status_code == 201
    assert api.post(f"/repositories/{repo}/branches/main/commits", json={"message": evil}).status_code == 201
    pages = [
        admin.get(f"/ui/repos/{repo}/refs/main/objects", params={"prefix": "x<script>alert(1)<"}),
        admin.get(f"/ui/repos/{repo}/refs/main/object", params={"path": path}),
        admin.get(f"/ui/repos/{repo}/refs/main/log"),
        admin.get(f"/ui/repos/{repo}/commits/main"),
        admin.get(f"/ui/repos/{repo}/refs/{evil}/log"),  # an error page names the bad ref
    ]
    for page in pages:
        assert "<script>alert" not in page.text, page.url
        assert "&lt;script&gt;alert(1)&lt;" in page.text, page.url
        assert "script-src 'self'" in page.headers["content-security-policy"]
    assert pages[-1].status_code in (400, 404)


def test_sign_out_ends_the_session(live: Live) -> None:
    with sign_in(live, live.key_id, live.secret) as client:
        home = client.get("/ui/")
        kept = client.cookies["lakectl_session"]
        out = client.post("/ui/logout", data={"csrf": csrf_of(home.text)})
        assert out.status_code == 303 and out.headers["location"] == "/ui/login"
        assert client.get("/ui/").status_code == 303
    # a copy of the cookie kept from before stops working too
    with httpx.Client(base_url=base_url(live), cookies={"lakectl_session": kept}, timeout=30.0) as copy:
        assert copy.get("/ui/").status_code == 303


@pytest.mark.parametrize("server_name", ["live", "live_pg"])
def test_sign_out_revokes_the_token_inside_the_cookie(
    request: pytest.FixtureRequest, server_name: str
) -> None:
    """The cookie holds a login token: taken out of it, it worked as the API's bearer token after
    the sign-out. It is refused there too from the sign-out on; another session's is not."""
    server: Live = request.getfixturevalue(server_name)

    def whoami(token: str) -> httpx.Response:
        with httpx.Client(base_url=server.url, timeout=30.0) as api:
            return api.get("/user", headers={"Authorization": f"Bearer {token}"})

    with sign_in(server, server.key_id, server.secret) as other:
        others = other.cookies["lakectl_session"].rpartition(":")[0]
        with sign_in(server, server.key_id, server.secret) as client:
            home = client.get("/ui/")
            token = client.cookies["lakectl_session"].rpartition(":")[0]
            assert token != others
            assert whoami(token).status_code == 200
            out = client.post("/ui/logout", data={"csrf": csrf_of(home.text)})
            assert out.status_code == 303
        refused = whoami(token)
        assert refused.status_code == 401 and refused.json()["code"] == "unauthenticated", refused.text
        assert "signed out" in refused.json()["message"]
        assert whoami(others).status_code == 200
        assert other.get("/ui/").status_code == 200


def test_one_time_links_sign_in_once(live: Live) -> None:
    with plumbing(live.data_dir) as lake:
        auth = Auth(lake.kv, load_secret_key("", str(live.data_dir)))
        token = links.issue(auth, auth.get_user("admin"))
        stale = links.issue(auth, auth.get_user("admin"), ttl=60, now=time.time() - 120)
    with httpx.Client(base_url=base_url(live), timeout=30.0) as browser:
        first = browser.get("/ui/login", params={"token": token})
        assert first.status_code == 303 and "lakectl_session" in _set_cookies(first)
        assert browser.get("/ui/").status_code == 200
    with httpx.Client(base_url=base_url(live), timeout=30.0) as other:
        again = other.get("/ui/login", params={"token": token})
        assert again.status_code == 401 and "already used" in again.text
        assert other.get("/ui/login", params={"token": stale}).status_code == 401
        assert other.get("/ui/").status_code == 303


def test_unknown_pages_are_404_pages(admin: httpx.Client) -> None:
    missing = admin.get("/ui/no/such/page")
    assert missing.status_code == 404 and "<title>Error 404 · lakectl</title>" in missing.text
    repo = admin.get("/ui/repos/no-such-repo")
    assert repo.status_code == 404 and "not found" in repo.text
