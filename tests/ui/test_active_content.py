"""An uploaded HTML page opened by its presigned link in a real browser (headless Chromium), by a
user signed in to the UI: its script, which would read the session's cookies and the page's
CSRF token, never runs on the server's origin. The link is a file to save."""

from __future__ import annotations

from typing import Any

import httpx

from tests.server.conftest import Live, upload
from tests.ui.conftest import base_url, new_repo

ATTACK = b"""<!doctype html><html><head><title>harmless</title></head><body><script>
document.title = "ran:" + document.cookie;
fetch("/ui/").then(r => r.text()).then(t => { document.title = "read:" + t.length; });
</script></body></html>"""
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>document.title = "ran";</script></svg>'


def test_a_presigned_html_page_does_not_run_in_a_signed_in_browser(
    live: Live, api: httpx.Client, page: Any
) -> None:
    repo = new_repo(api)
    upload(api, repo, "main", "x.html", ATTACK, **{"Content-Type": "text/html"})
    upload(api, repo, "main", "x.svg", SVG, **{"Content-Type": "image/svg+xml"})
    page.goto(base_url(live) + "/ui/")
    page.get_by_label("Access key ID").fill(live.key_id)
    page.get_by_label("Secret access key").fill(live.secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url("**/ui/")
    signed_in = page.title()
    assert page.context.cookies(), "the browser holds a session"
    for path in ("x.html", "x.svg"):
        stat = api.get(f"/repositories/{repo}/refs/main/objects/stat", params={"path": path, "presign": True})
        link = stat.json()["physical_address"]
        assert link.startswith(base_url(live))  # the UI's own origin
        with page.expect_download() as download:
            page.evaluate("url => { window.location.href = url; }", link)  # as a click on the link
        with open(download.value.path(), "rb") as saved:
            assert saved.read() in (ATTACK, SVG)
        assert download.value.suggested_filename == path
        page.wait_for_timeout(300)  # time enough for a script that did run to change the title
        assert page.title() == signed_in, "the page's script ran"
        assert page.url.endswith("/ui/")
