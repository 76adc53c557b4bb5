"""The UI's forms take text as the browser sent it, UTF-8: a name with accents is stored as
typed, and a field (URL-encoded or multipart) whose bytes are not UTF-8 is refused with a 400
page and nothing stored, never stored with replacement characters or as latin-1."""

from __future__ import annotations

import httpx

from tests.server.conftest import Live, snapshot
from tests.ui.conftest import csrf_of, new_repo


def test_utf8_text_is_stored_as_typed(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    csrf = csrf_of(admin.get(f"/ui/repos/{repo}/branches").text)
    path = "données/café.csv"
    done = admin.post(
        f"/ui/repos/{repo}/branches/main/upload",
        data={"csrf": csrf, "path": path},
        files={"content": ("ignored.csv", b"a,b\n")},
    )
    assert done.status_code == 303, done.text
    stat = api.get(f"/repositories/{repo}/refs/main/objects/stat", params={"path": path})
    assert stat.status_code == 200 and stat.json()["path"] == path
    done = admin.post(f"/ui/repos/{repo}/branches/main/commit", data={"csrf": csrf, "message": "résumé ✓"})
    assert done.status_code == 303, done.text
    log = api.get(f"/repositories/{repo}/refs/main/commits", params={"amount": 1}).json()["results"]
    assert log[0]["message"] == "résumé ✓"


def test_text_that_is_not_utf8_is_refused_and_nothing_stored(
    live: Live, admin: httpx.Client, api: httpx.Client
) -> None:
    repo = new_repo(api)
    csrf = csrf_of(admin.get(f"/ui/repos/{repo}/branches").text)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    before = snapshot(live.data_dir)
    sent = [
        # URL-encoded: %FF, and %ED%B3%BF (a surrogate's bytes) would become U+FFFD
        admin.post(f"/ui/repos/{repo}/branches", content=f"csrf={csrf}&name=a%FFb&source=main", headers=form),
        admin.post(
            f"/ui/repos/{repo}/branches", content=f"csrf={csrf}&name=a%ED%B3%BFb&source=main", headers=form
        ),
        admin.post(f"/ui/repos/{repo}/branches", content=f"csrf={csrf}&source=main&n%FFame=x", headers=form),
        # multipart: a field, and a file's name, that are not UTF-8 would become latin-1
        admin.post(
            f"/ui/repos/{repo}/branches/main/upload",
            data={"csrf": csrf, "path": b"caf\xe9.csv"},
            files={"content": ("f.csv", b"a\n")},
        ),
        admin.post(
            f"/ui/repos/{repo}/branches/main/upload",
            content=_multipart(("csrf", None, csrf.encode()), ("content", b"caf\xe9.csv", b"a\n")),
            headers={"Content-Type": "multipart/form-data; boundary=BOUNDARY"},
        ),
        # the path or query of a UI address
        admin.post(f"/ui/repos/{repo}/branches/a%FFb/delete", data={"csrf": csrf}),
        admin.get(f"/ui/repos/{repo}/refs/main/objects?prefix=caf%E9"),
    ]
    for r in sent:
        assert r.status_code == 400, (r.request.url, r.status_code, r.text[:300])
        assert "not UTF-8" in r.text
    assert snapshot(live.data_dir) == before


def _multipart(*parts: tuple[str, bytes | None, bytes]) -> bytes:
    """A multipart body as a client may send it: (name, file name or None, content)."""
    body = b""
    for name, filename, content in parts:
        disposition = b'form-data; name="' + name.encode() + b'"'
        if filename is not None:
            disposition += b'; filename="' + filename + b'"'
        body += b"--BOUNDARY\r\nContent-Disposition: " + disposition + b"\r\n\r\n" + content + b"\r\n"
    return body + b"--BOUNDARY--\r\n"
