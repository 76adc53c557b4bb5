"""Stored objects are never served as active content: every path that answers an object's bytes
(a presigned URL, the REST API's GET and HEAD, the S3 gateway's GET and HEAD, its presigned URLs
with response overrides, the UI's download) says ``nosniff`` and ``sandbox``, and sends any type
a browser could run (HTML, SVG, XML, JavaScript, and whatever is not a known passive type) as a
file to save. Real uploads through REST and S3, real requests against a live server."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from lakectl.core import writes
from server.served import is_passive, served_headers
from tests.server.conftest import Live, plumbing, unique, upload
from tests.ui.conftest import sign_in

ACTIVE_TYPES = (
    "text/html",
    "TEXT/HTML",
    "text/html; charset=utf-8",
    "  text/html ;charset=utf-8",
    "application/xhtml+xml",
    "image/svg+xml",
    "Image/SVG+XML; charset=utf-8",
    "text/xml",
    "application/xml",
    "application/rss+xml",
    "text/javascript",
    "application/javascript",
    "application/ecmascript",
    "text/xsl",
    "multipart/x-mixed-replace; boundary=x",
    "application/pdf",
    "text/plain, text/html",  # a browser reads a list of types as its last one
    "text/plain;,text/html",
    "text/html\x00",
    "text/htmlx",
    "x",
)
PASSIVE_TYPES = (
    "text/plain",
    "text/plain; charset=utf-8",
    "Text/CSV",
    "application/json",
    "application/octet-stream",
    "binary/octet-stream",
    "image/png",
    "image/jpeg",
    "application/vnd.apache.parquet",
)


@pytest.mark.parametrize("content_type", ACTIVE_TYPES)
def test_a_type_a_browser_could_run_is_never_passive(content_type: str) -> None:
    assert not is_passive(content_type)
    headers = served_headers("dir/x.bin", content_type, "inline")
    assert headers["Content-Disposition"] == "attachment; filename*=UTF-8''x.bin"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Security-Policy"] == "sandbox"


@pytest.mark.parametrize("content_type", PASSIVE_TYPES)
def test_passive_types_stay_inline(content_type: str) -> None:
    assert is_passive(content_type)
    assert "Content-Disposition" not in served_headers("x", content_type)


def test_an_object_without_a_type_is_an_octet_stream() -> None:
    headers = served_headers("page.html", " ")
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["X-Content-Type-Options"] == "nosniff"


PAGE = b"<html><script>document.title = document.cookie</script></html>"
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.cookie)</script></svg>'
OBJECTS: dict[str, tuple[bytes, str | None, bool]] = {
    # path: (bytes, content type as uploaded, whether a browser may show it inline)
    "x.html": (PAGE, "text/html; charset=utf-8", False),
    "x.svg": (SVG, "image/svg+xml", False),
    "x.js": (b"alert(1)", "text/javascript", False),
    "x.xml": (b"<x/>", "Application/XML", False),
    "x.png": (b"\x89PNG\r\n\x1a\n", "image/png", True),
    "x.csv": (b"a,b\n1,2\n", "text/csv", True),
    "untyped.html": (PAGE, None, True),  # stored as application/octet-stream: a download anyway
}


@pytest.fixture(scope="module")
def stored(live: Live) -> Iterator[str]:
    """A repository holding :data:`OBJECTS` under ``rest/`` (uploaded through the REST API) and
    ``s3/`` (through the S3 gateway)."""
    repo = unique("served")
    s3 = live.s3()
    with live.client((live.key_id, live.secret)) as api:
        r = api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
        assert r.status_code == 201, r.text
        for path, (data, content_type, _) in OBJECTS.items():
            upload(
                api,
                repo,
                "main",
                f"rest/{path}",
                data,
                **({"Content-Type": content_type} if content_type else {}),
            )
            extra = {"ContentType": content_type} if content_type else {}
            s3.put_object(Bucket=repo, Key=f"main/s3/{path}", Body=data, **extra)
    yield repo


def _fetchers(live: Live, repo: str) -> dict[str, Callable[[str], httpx.Response]]:
    """Every way an object's bytes are answered, each a function of its path on main."""
    admin = (live.key_id, live.secret)
    s3 = live.s3()
    objects = f"{live.url}/repositories/{repo}/refs/main/objects"

    def presigned(path: str) -> httpx.Response:
        stat = httpx.get(f"{objects}/stat", params={"path": path, "presign": True}, auth=admin)
        return httpx.get(stat.json()["physical_address"])  # no credentials: anyone with the link

    def redirected(path: str) -> httpx.Response:
        return httpx.get(objects, params={"path": path, "presign": True}, auth=admin, follow_redirects=True)

    def s3_presigned(path: str) -> httpx.Response:
        url = s3.generate_presigned_url("get_object", Params={"Bucket": repo, "Key": f"main/{path}"})
        return httpx.get(url)

    def ui(path: str) -> httpx.Response:
        with sign_in(live, *admin) as browser:
            return browser.get(f"/ui/repos/{repo}/refs/main/download", params={"path": path})

    return {
        "presigned URL": presigned,
        "REST GET with presign (302 followed)": redirected,
        "REST GET": lambda path: httpx.get(objects, params={"path": path}, auth=admin),
        "REST HEAD": lambda path: httpx.head(objects, params={"path": path}, auth=admin),
        "S3 presigned GET": s3_presigned,
        "S3 HEAD": lambda path: _s3_head(s3, repo, path),
        "UI download": ui,
    }


def _s3_head(s3: Any, repo: str, path: str) -> httpx.Response:
    url = s3.generate_presigned_url("head_object", Params={"Bucket": repo, "Key": f"main/{path}"})
    return httpx.head(url)


@pytest.mark.parametrize("uploaded", ["rest", "s3"])
def test_every_path_serving_bytes_keeps_active_types_from_running(
    live: Live, stored: str, uploaded: str
) -> None:
    problems = []
    for how, fetch in _fetchers(live, stored).items():
        for name, (data, content_type, passive) in OBJECTS.items():
            got = fetch(f"{uploaded}/{name}")
            seen = f"{how} of {uploaded}/{name} ({content_type}): {got.status_code} {dict(got.headers)}"
            if got.status_code != 200 or (got.request.method == "GET" and got.content != data):
                problems.append(f"not served: {seen}")
                continue
            h = got.headers
            if h.get("x-content-type-options") != "nosniff" or h.get("content-security-policy") != "sandbox":
                problems.append(f"no nosniff or sandbox: {seen}")
            saved = h.get("content-disposition", "").startswith("attachment")
            if how != "UI download" and saved == passive:  # the UI's link always saves a file
                problems.append(f"{'saved' if saved else 'inline'}: {seen}")
            if content_type is None and h["content-type"] != "application/octet-stream":
                problems.append(f"untyped not an octet stream: {seen}")
    assert not problems, "\n".join(problems)


def test_s3_response_overrides_cannot_make_an_object_active(live: Live, stored: str) -> None:
    """A presigned URL may ask for any ``response-content-type`` and ``-disposition``: the
    answer is still a sandboxed file to save when the type asked is active."""
    s3 = live.s3()
    params = {
        "Bucket": stored,
        "Key": "main/s3/x.png",
        "ResponseContentType": "text/html",
        "ResponseContentDisposition": "inline",
    }
    got = httpx.get(s3.generate_presigned_url("get_object", Params=params))
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/html")
    assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''x.png"
    assert got.headers["content-security-policy"] == "sandbox"
    params.update(ResponseContentType="text/plain", ResponseContentDisposition="inline; filename=a.txt")
    got = httpx.get(s3.generate_presigned_url("get_object", Params=params))
    assert got.headers["content-disposition"] == "inline; filename=a.txt"  # passive: as asked


def test_an_object_stored_without_a_type_is_sent_as_an_octet_stream(live: Live, stored: str) -> None:
    """Stored by another tool with an empty type: without a type a browser sniffs the bytes,
    nosniff or not."""
    with plumbing(live.data_dir) as lake:
        writes.upload(lake, stored, "main", "blank.html", io.BytesIO(PAGE), "")
    got = httpx.get(
        f"{live.url}/repositories/{stored}/refs/main/objects",
        params={"path": "blank.html"},
        auth=(live.key_id, live.secret),
    )
    assert got.status_code == 200 and got.content == PAGE
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["x-content-type-options"] == "nosniff"
