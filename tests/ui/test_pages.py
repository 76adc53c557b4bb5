"""The UI's pages and actions over HTTP against the live server (no browser): paging, what each
role sees and may do, downloads and previews, and errors as pages with their status."""

from __future__ import annotations

import json
import re
from html import unescape

import httpx

from tests.server.conftest import Live, commit, upload
from tests.server.test_policy_surfaces import confined, user_with
from tests.ui.conftest import csrf_of, make_user, new_repo, sign_in


def _links(html: str, rel: str = "next") -> list[str]:
    return [unescape(h) for h in re.findall(rf'<a href="([^"]+)" rel="{rel}">', html)]


def _rows(html: str) -> list[str]:
    """The first cell's link text of each row of the page's first table."""
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [unescape(t) for t in re.findall(r"<tr>\s*<td><a [^>]*>([^<]*)</a>", body)]


def _post_forms(html: str) -> list[str]:
    return re.findall(r'<form method="post" action="([^"]+)"', html)


def test_the_object_browser_pages_through_250_objects(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    names = [f"obj-{i:03d}.txt" for i in range(250)]
    for name in names:
        upload(api, repo, "main", name, name.encode())
    upload(api, repo, "main", "dir/inside.txt", b"x")
    seen: list[str] = []
    url = f"/ui/repos/{repo}/refs/main/objects"
    pages = 0
    while url:
        r = admin.get(url)
        assert r.status_code == 200
        rows = _rows(r.text)
        assert len(rows) <= 100
        seen += rows
        pages += 1
        more = _links(r.text)
        url = more[0] if more else ""
    assert pages == 3
    assert seen == ["dir/", *names]  # each once, in path order, the directory as one row
    inside = admin.get(f"/ui/repos/{repo}/refs/main/objects", params={"prefix": "dir/"})
    assert _rows(inside.text) == ["inside.txt"] and not _links(inside.text)


def test_the_log_pages_by_50(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    for i in range(55):
        upload(api, repo, "main", "f.txt", str(i).encode())
        commit(api, repo, "main", f"change {i}")
    first = admin.get(f"/ui/repos/{repo}/refs/main/log")
    messages = re.findall(r"<td>(change \d+|Repository created)</td>", first.text)
    assert messages == [f"change {i}" for i in range(54, 4, -1)]
    second = admin.get(_links(first.text)[0])
    rest = re.findall(r"<td>(change \d+|Repository created)</td>", second.text)
    assert rest == [f"change {i}" for i in range(4, -1, -1)] + ["Repository created"]
    assert not _links(second.text)


def test_a_viewer_sees_no_write_controls_and_is_refused(live: Live, api: httpx.Client) -> None:
    repo = new_repo(api)
    upload(api, repo, "main", "a.txt", b"a")
    head = commit(api, repo, "main", "add a")["id"]
    upload(api, repo, "main", "b.txt", b"b")  # an uncommitted change the viewer could commit
    viewer = make_user(live, "Viewers")
    pages = [
        "/ui/",
        f"/ui/repos/{repo}",
        f"/ui/repos/{repo}/branches",
        f"/ui/repos/{repo}/refs/main/objects",
        f"/ui/repos/{repo}/refs/main/object?path=a.txt",
        f"/ui/repos/{repo}/refs/main/log",
        f"/ui/repos/{repo}/commits/{head}",
        f"/ui/repos/{repo}/branches/main/changes",
        f"/ui/repos/{repo}/compare?left=main&right=main",
        f"/ui/repos/{repo}/actions",
    ]
    with sign_in(live, viewer.key_id, viewer.secret) as ui:
        for path in pages:
            r = ui.get(path)
            assert r.status_code == 200, path
            assert _post_forms(r.text) == ["/ui/logout"], path  # sign-out is all it may post
            assert "<button" in r.text  # the sign-out button
        token = csrf_of(ui.get("/ui/").text)
        writes = [
            ("/ui/repos", {"name": "viewers-repo"}),
            (f"/ui/repos/{repo}/branches", {"name": "nope", "source": "main"}),
            (f"/ui/repos/{repo}/branches/main/commit", {"message": "by a viewer"}),
            (f"/ui/repos/{repo}/branches/main/reset", {}),
            (f"/ui/repos/{repo}/tags", {"name": "t1", "ref": "main"}),
            (f"/ui/repos/{repo}/revert", {"branch": "main", "commit": head}),
            (f"/ui/repos/{repo}/delete", {"confirm": repo}),
        ]
        for path, data in writes:
            refused = ui.post(path, data={**data, "csrf": token})
            assert refused.status_code == 403, path
            assert "<title>Error 403 · lakectl</title>" in refused.text and "not allowed" in refused.text
        sent = ui.post(
            f"/ui/repos/{repo}/branches/main/upload",
            data={"csrf": token, "path": "c.txt"},
            files={"content": ("c.txt", b"c", "text/plain")},
        )
        assert sent.status_code == 403
    assert [b["id"] for b in api.get(f"/repositories/{repo}/branches").json()["results"]] == ["main"]
    assert api.get(f"/repositories/{repo}/tags").json()["results"] == []
    staged = api.get(f"/repositories/{repo}/branches/main/diff").json()["results"]
    assert [d["path"] for d in staged] == ["b.txt"]
    assert api.get(f"/repositories/{repo}/refs/main/commits").json()["results"][0]["id"] == head
    assert api.get("/repositories/viewers-repo").status_code == 404


def test_a_developer_writes_but_does_not_create_or_delete_repositories(live: Live, api: httpx.Client) -> None:
    repo = new_repo(api)
    developer = make_user(live, "Developers")
    with sign_in(live, developer.key_id, developer.secret) as ui:
        assert "/ui/repos" not in _post_forms(ui.get("/ui/").text)
        for where in (f"/ui/repos/{repo}", f"/ui/repos/{repo}/settings"):
            assert f"/ui/repos/{repo}/delete" not in _post_forms(ui.get(where).text), where
        browser = ui.get(f"/ui/repos/{repo}/refs/main/objects")
        assert f"/ui/repos/{repo}/branches/main/upload" in _post_forms(browser.text)
        token = csrf_of(browser.text)
        made = ui.post(
            f"/ui/repos/{repo}/branches", data={"name": "dev-work", "source": "main", "csrf": token}
        )
        assert made.status_code == 303
        refused = ui.post(f"/ui/repos/{repo}/delete", data={"confirm": repo, "csrf": token})
        assert refused.status_code == 403
    assert api.get(f"/repositories/{repo}/branches/dev-work").status_code == 200


def test_refs_actions(admin: httpx.Client, api: httpx.Client) -> None:
    """Tags, reset and revert do what the API's verbs do, with the signed-in user as committer."""
    repo = new_repo(api)
    upload(api, repo, "main", "a.txt", b"one")
    first = commit(api, repo, "main", "one")["id"]
    token = csrf_of(admin.get(f"/ui/repos/{repo}/branches").text)
    tagged = admin.post(f"/ui/repos/{repo}/tags", data={"name": "v1", "ref": first, "csrf": token})
    assert tagged.status_code == 303
    assert api.get(f"/repositories/{repo}/tags/v1").json()["commit_id"] == first
    listing = admin.get(f"/ui/repos/{repo}/branches")
    assert "v1" in listing.text and f"/ui/repos/{repo}/tags/v1/delete" in _post_forms(listing.text)
    assert admin.post(f"/ui/repos/{repo}/tags/v1/delete", data={"csrf": token}).status_code == 303
    assert api.get(f"/repositories/{repo}/tags/v1").status_code == 404

    upload(api, repo, "main", "scratch.txt", b"discard me")
    reset = admin.post(f"/ui/repos/{repo}/branches/main/reset", data={"csrf": token})
    assert reset.status_code == 303 and reset.headers["location"] == f"/ui/repos/{repo}/branches/main/changes"
    assert api.get(f"/repositories/{repo}/branches/main/diff").json()["results"] == []

    reverted = admin.post(f"/ui/repos/{repo}/revert", data={"branch": "main", "commit": first, "csrf": token})
    assert reverted.status_code == 303
    new_head = api.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
    assert reverted.headers["location"] == f"/ui/repos/{repo}/commits/{new_head}"
    assert api.get(f"/repositories/{repo}/commits/{new_head}").json()["committer"] == "admin"
    assert (
        api.get(f"/repositories/{repo}/refs/main/objects/stat", params={"path": "a.txt"}).status_code == 404
    )


def test_download_and_preview(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    upload(api, repo, "main", "docs/page.html", b"<h1>hi</h1>\n", **{"Content-Type": "text/html"})
    upload(api, repo, "main", "blob.bin", bytes(range(256)))
    got = admin.get(f"/ui/repos/{repo}/refs/main/download", params={"path": "docs/page.html"})
    assert got.status_code == 200 and got.content == b"<h1>hi</h1>\n"
    # never rendered in the UI's origin: saved as a file, and sandboxed if opened anyway
    assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''page.html"
    assert got.headers["content-security-policy"] == "sandbox"
    shown = admin.get(f"/ui/repos/{repo}/refs/main/object", params={"path": "docs/page.html"})
    assert '<pre class="preview"' in shown.text and "&lt;h1&gt;hi&lt;/h1&gt;" in shown.text
    assert "text/html" in shown.text
    binary = admin.get(f"/ui/repos/{repo}/refs/main/object", params={"path": "blob.bin"})
    assert '<pre class="preview"' not in binary.text and "Not shown" in binary.text
    assert admin.get(f"/ui/repos/{repo}/refs/main/download", params={"path": "nope"}).status_code == 404


def test_errors_are_pages_with_their_status(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    token = csrf_of(admin.get(f"/ui/repos/{repo}/branches").text)
    exists = admin.post(f"/ui/repos/{repo}/branches", data={"name": "main", "source": "main", "csrf": token})
    assert exists.status_code == 409 and "<title>Error 409 · lakectl</title>" in exists.text
    assert "already exists" in exists.text
    bad_name = admin.post(f"/ui/repos/{repo}/branches", data={"name": "-x", "source": "main", "csrf": token})
    assert bad_name.status_code == 400 and "invalid branch name" in bad_name.text
    unconfirmed = admin.post(f"/ui/repos/{repo}/delete", data={"confirm": "other", "csrf": token})
    assert unconfirmed.status_code == 400
    assert api.get(f"/repositories/{repo}").status_code == 200
    missing_field = admin.post(f"/ui/repos/{repo}/branches", data={"csrf": token})
    assert missing_field.status_code == 400 and "invalid form" in missing_field.text
    nothing = admin.post(f"/ui/repos/{repo}/branches/main/commit", data={"message": "m", "csrf": token})
    assert nothing.status_code == 412  # nothing to commit
    assert admin.get(f"/ui/repos/{repo}/refs/no-such-ref/objects").status_code == 404


def test_a_commit_page_links_what_it_was_made_from_and_what_was_made_from_it(live: Live) -> None:
    """Three repositories: ``src`` (readable), ``hidden`` (not readable to the viewer) and ``out``
    whose commit records inputs from both. The viewer's pages link the readable input and the
    commit made from ``src``, and name the hidden input without a link or anything of its own."""
    with live.client((live.key_id, live.secret)) as admin:
        src, hidden, out = (new_repo(admin) for _ in range(3))
        heads = {
            r: admin.get(f"/repositories/{r}/refs/main/commits", params={"amount": 1}).json()
            for r in (src, hidden)
        }
        ids = {r: page_["results"][0]["id"] for r, page_ in heads.items()}
        inputs = json.dumps([{"repository": r, "commit": ids[r], "path": "data/"} for r in (src, hidden)])
        upload(admin, out, "main", "report.csv", b"made\n")
        made = commit(admin, out, "main", "a report", lakectl_inputs=inputs)["id"]
        reader = user_with(admin, confined(src, "fs:ReadObject") + confined(out, "fs:ReadObject"))
    with sign_in(live, *reader) as ui:
        report = ui.get(f"/ui/repos/{out}/commits/{made}")
        assert report.status_code == 200, report.text
        assert f'href="/ui/repos/{src}/commits/{ids[src]}"' in report.text
        assert f"/ui/repos/{hidden}/commits" not in report.text and "(not readable)" in report.text
        source = ui.get(f"/ui/repos/{src}/commits/{ids[src]}")
        assert f'href="/ui/repos/{out}/commits/{made}"' in source.text and "a report" in source.text
