"""Object previews on an object's page (CSV, TSV, JSON, JSON Lines, images, Parquet, text), over
HTTP against the live server and once in Chromium; what a malformed object shows; the presigned
link; and the bytes a Parquet preview reads through the core's ranged file object."""

from __future__ import annotations

import io
import json
import os
import re
import struct
import zlib
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakectl.core import objectfile, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks import BlockAdapter
from lakectl.core.blocks.data import write_object
from lakectl.core.journal import journal
from server.ui import previews
from tests.server.conftest import Live, upload
from tests.ui.conftest import base_url, new_repo, sign_in


def _page(admin: httpx.Client, repo: str, path: str, **query: Any) -> str:
    r = admin.get(f"/ui/repos/{repo}/refs/main/object", params={"path": path, **query})
    assert r.status_code == 200, r.text
    return r.text


def _preview(html: str) -> str:
    """The page from its Preview heading on."""
    return html.split("<h2>Preview</h2>", 1)[1]


def _table(html: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and the body rows of the preview's table, unescaped."""
    table = html.split('<table class="preview-rows">', 1)[1].split("</table>", 1)[0]
    head, body = table.split("<tbody>", 1)
    header = [unescape(h) for h in re.findall(r'<th scope="col">(.*?)</th>', head)]
    rows = [
        [unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]
    return header, rows


def _parquet(table: pa.Table, **options: Any) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **options)
    return out.getvalue()


def _png(width: int = 2, height: int = 2) -> bytes:
    """A valid (tiny, red) PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\0" + b"\xff\0\0" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("path", "content_type", "kind"),
    [
        ("a/b.csv", "application/octet-stream", previews.Kind.CSV),
        ("b.TSV", "text/plain", previews.Kind.TSV),
        ("export", "text/csv; charset=utf-8", previews.Kind.CSV),
        ("events.jsonl", "application/json", previews.Kind.JSON_LINES),
        ("doc", "application/ld+json", previews.Kind.JSON),
        ("t.parquet", "binary/octet-stream", previews.Kind.PARQUET),
        ("part-0", "application/vnd.apache.parquet", previews.Kind.PARQUET),
        ("pic.JPG", "application/octet-stream", previews.Kind.IMAGE),
        ("pic", "image/webp", previews.Kind.IMAGE),
        ("logo.svg", "image/png", previews.Kind.TEXT),
        ("logo", "image/svg+xml", previews.Kind.TEXT),
        ("notes.txt", "text/plain", previews.Kind.TEXT),
    ],
)
def test_the_kind_of_preview(path: str, content_type: str, kind: previews.Kind) -> None:
    assert previews.kind_of(path, content_type) is kind


# -- CSV and TSV ------------------------------------------------------------------------------


def test_csv_shows_its_first_50_rows_with_a_header(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    body = "id,name\n" + "".join(f"{i},name {i}\n" for i in range(120))
    upload(api, repo, "main", "people.csv", body.encode(), **{"Content-Type": "text/csv"})
    html = _preview(_page(admin, repo, "people.csv"))
    header, rows = _table(html)
    assert header == ["id", "name"]
    assert len(rows) == 50 and rows[0] == ["0", "name 0"] and rows[-1] == ["49", "name 49"]
    assert "The first 50 rows are shown." in html


def test_tsv_by_its_extension(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    upload(api, repo, "main", "t/a.tsv", b"k\tv\nx\t1\ny\t2\n")  # stored as application/octet-stream
    html = _preview(_page(admin, repo, "t/a.tsv"))
    assert _table(html) == (["k", "v"], [["x", "1"], ["y", "2"]])
    assert "preview-note" not in html  # everything is shown


def test_a_csv_cell_is_text_never_markup(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    evil = b'name,note\n"<script>alert(1)</script>","<img src=x onerror=alert(2)>"\n'
    upload(api, repo, "main", "evil.csv", evil, **{"Content-Type": "text/csv"})
    page = _page(admin, repo, "evil.csv")
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert _table(_preview(page))[1] == [["<script>alert(1)</script>", "<img src=x onerror=alert(2)>"]]


def test_a_large_csv_is_read_by_its_first_256_kib(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    wide = "x" * 4000
    body = "n,wide\n" + "".join(f"{i},{wide}\n" for i in range(200))  # ~800 KB, 65 rows in 256 KiB
    upload(api, repo, "main", "big.csv", body.encode(), **{"Content-Type": "text/csv"})
    header, rows = _table(_preview(_page(admin, repo, "big.csv")))
    assert header == ["n", "wide"] and len(rows) == 50
    assert rows[0][1] == "x" * previews.MAX_CELL + "…"  # long cells are cut


def test_a_malformed_csv_says_why(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    upload(api, repo, "main", "bad.csv", b'a,b\n"unclosed,1\n2,3\n', **{"Content-Type": "text/csv"})
    upload(api, repo, "main", "latin.csv", "a,b\nné,1\n".encode("latin-1"), **{"Content-Type": "text/csv"})
    bad = _preview(_page(admin, repo, "bad.csv"))
    assert "Cannot preview: line" in bad and "preview-rows" not in bad
    assert "Cannot preview: not UTF-8 text" in _preview(_page(admin, repo, "latin.csv"))


# -- JSON and JSON Lines ----------------------------------------------------------------------


def test_small_json_is_pretty_printed(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    doc = {"name": "<b>lake</b>", "tags": [1, 2], "nested": {"ok": True}}
    upload(api, repo, "main", "conf.json", json.dumps(doc, separators=(",", ":")).encode())
    html = _preview(_page(admin, repo, "conf.json"))
    shown = unescape(re.search(r'<pre class="preview"[^>]*>(.*?)</pre>', html, re.S).group(1))  # type: ignore[union-attr]
    assert shown == json.dumps(doc, indent=2)
    assert "<b>lake</b>" not in html


def test_large_json_is_shown_raw_and_cut(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    doc = json.dumps([{"i": i, "s": "v" * 50} for i in range(20_000)]).encode()  # > 1 MiB
    assert len(doc) > previews.JSON_BYTES
    upload(api, repo, "main", "big.json", doc, **{"Content-Type": "application/json"})
    html = _preview(_page(admin, repo, "big.json"))
    shown = unescape(re.search(r'<pre class="preview"[^>]*>(.*?)</pre>', html, re.S).group(1))  # type: ignore[union-attr]
    assert shown == doc[: previews.RAW_JSON_BYTES].decode()
    assert "the first 64 KiB as stored" in html


def test_malformed_json_says_why(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    upload(api, repo, "main", "bad.json", b'{"a": 1,,}')
    upload(api, repo, "main", "deep.json", b"[" * 100_000 + b"]" * 100_000)
    assert "Cannot preview: not valid JSON" in _preview(_page(admin, repo, "bad.json"))
    deep = _preview(_page(admin, repo, "deep.json"))
    assert "Cannot preview" in deep


def test_json_lines_show_the_first_50_lines(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    lines = [json.dumps({"n": i, "html": "<i>x</i>"}) for i in range(80)]
    upload(api, repo, "main", "events.jsonl", ("\n".join(lines) + "\n").encode())
    html = _preview(_page(admin, repo, "events.jsonl"))
    shown = unescape(re.search(r'<pre class="preview"[^>]*>(.*?)</pre>', html, re.S).group(1))  # type: ignore[union-attr]
    assert shown == "\n".join(lines[:50])
    assert "The first 50 lines are shown." in html
    upload(api, repo, "main", "bad.ndjson", b'{"ok": 1}\n{nope}\n')
    assert "Cannot preview: line 2: not valid JSON" in _preview(_page(admin, repo, "bad.ndjson"))


# -- images -----------------------------------------------------------------------------------


def test_an_image_is_shown_from_the_ui_download_route(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    png = _png()
    upload(api, repo, "main", "pics/red dot.png", png)  # application/octet-stream: by extension
    html = _preview(_page(admin, repo, "pics/red dot.png"))
    img = re.search(r'<img src="([^"]+)" alt="([^"]*)">', html)
    assert img is not None and unescape(img.group(2)) == "pics/red dot.png"
    src = unescape(img.group(1))
    assert src.startswith(f"/ui/repos/{repo}/refs/main/download?") and "inline=1" in src
    got = admin.get(src)
    assert got.status_code == 200 and got.content == png
    assert got.headers["content-type"] == "image/png"
    assert got.headers["content-disposition"].startswith("inline;")
    assert got.headers["content-security-policy"] == "sandbox"
    assert got.headers["x-content-type-options"] == "nosniff"


def test_svg_is_never_inlined(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    upload(api, repo, "main", "logo.svg", svg, **{"Content-Type": "image/svg+xml"})
    html = _preview(_page(admin, repo, "logo.svg"))
    assert "<img" not in html and "<svg" not in html and "&lt;script&gt;alert(1)" in html  # as text
    got = admin.get(f"/ui/repos/{repo}/refs/main/download", params={"path": "logo.svg", "inline": "1"})
    assert got.headers["content-disposition"].startswith("attachment;")
    assert got.headers["content-type"] == "image/svg+xml"


def test_html_named_like_an_image_is_sent_as_the_image_type(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    upload(api, repo, "main", "x.png", b"<script>alert(1)</script>", **{"Content-Type": "text/html"})
    got = admin.get(f"/ui/repos/{repo}/refs/main/download", params={"path": "x.png", "inline": "1"})
    assert got.headers["content-type"] == "image/png"  # never the stored text/html, inline
    assert got.headers["x-content-type-options"] == "nosniff"


# -- Parquet ----------------------------------------------------------------------------------


def test_parquet_shows_schema_footer_facts_and_first_rows(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    n = 1000
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "name": pa.array([None if i % 7 == 3 else f"<b>{i}</b>" for i in range(n)]),
            "score": pa.array([i / 4 for i in range(n)], pa.float64()),
        }
    )
    table = table.cast(table.schema.set(0, pa.field("id", pa.int64(), nullable=False)))
    data = _parquet(table, row_group_size=100)
    upload(api, repo, "main", "data/t.parquet", data)
    html = _preview(_page(admin, repo, "data/t.parquet"))
    facts = dict(
        (unescape(k), unescape(v))
        for k, v in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", html.split('class="facts parquet-facts"')[1])
    )
    assert facts["Rows"] == "1,000" and facts["Row groups"] == "10" and facts["Columns"] == "3"
    schema = html.split('<table class="schema">', 1)[1].split("</table>", 1)[0]
    columns = [
        tuple(unescape(c) for c in re.findall(r"<td>(?:<code>)?(.*?)(?:</code>)?</td>", row))
        for row in re.findall(r"<tr><td>.*?</tr>", schema)
    ]
    assert columns == [("id", "int64", "no"), ("name", "string", "yes"), ("score", "double", "yes")]
    header, rows = _table(html)
    assert header == ["id", "name", "score"] and len(rows) == previews.PARQUET_ROWS
    assert rows[0] == ["0", "<b>0</b>", "0.0"] and rows[3] == ["3", "null", "0.75"]
    assert '<td class="null">null</td>' in html and "<b>0</b>" not in html
    assert "The first 20 rows of the first row group are shown." in html


def test_a_corrupt_parquet_says_why(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    good = _parquet(pa.table({"a": list(range(100))}))
    broken = good[:4] + b"\x00" * (len(good) - 12) + good[-8:]  # footer length kept, metadata zeroed
    upload(api, repo, "main", "broken.parquet", broken)
    upload(api, repo, "main", "junk.parquet", b"not parquet at all")
    for path in ("broken.parquet", "junk.parquet"):
        r = admin.get(f"/ui/repos/{repo}/refs/main/object", params={"path": path})
        assert r.status_code == 200
        assert "Cannot preview: not a readable Parquet file" in _preview(r.text)


# -- presigned links --------------------------------------------------------------------------


def test_the_presigned_link_downloads_without_a_session(admin: httpx.Client, api: httpx.Client) -> None:
    repo = new_repo(api)
    data = os.urandom(3000)
    upload(api, repo, "main", "blob.bin", data)
    plain = _page(admin, repo, "blob.bin")
    assert "Presigned link" in plain and 'id="presigned-url"' not in plain  # made only when asked
    html = _page(admin, repo, "blob.bin", presign=1)
    found = re.search(r'<input id="presigned-url" class="copy" value="([^"]+)" readonly>', html)
    assert found is not None
    link = unescape(found.group(1))
    assert "/presigned/" in link
    got = httpx.get(link)  # no cookie, no credentials
    assert got.status_code == 200 and got.content == data
    upload(api, repo, "main", "blob.bin", b"changed")
    assert httpx.get(link).content == data  # the version it was made for


# -- the core's ranged file object -------------------------------------------------------------


class Counting:
    """A block adapter that counts the bytes of the blocks read (each read verifies its whole
    block, so a block touched is a block read)."""

    def __init__(self, inner: BlockAdapter) -> None:
        self.inner = inner
        self.read = 0

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        self.read += int(locator.split("+")[1])
        return self.inner.get(locator, offset, length)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _random_int64(n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(os.urandom(8 * n))])


def test_a_parquet_preview_reads_the_footer_and_first_row_group_only(tmp_path: Path) -> None:
    lake = opening.open_lake(str(tmp_path / "lake"))
    try:
        p.create_repo(lake, "big", "main", "local://big")
        n = 3_200_000  # ~51 MB incompressible, 100 row groups of ~0.5 MB
        table = pa.table({"a": _random_int64(n), "b": _random_int64(n)})
        data = _parquet(table, row_group_size=n // 100, compression="none")
        assert len(data) > 50_000_000
        # Blocks of 1 MiB (the default is 64 MiB: this file would be one block)
        written = write_object(lake.blocks, io.BytesIO(data), block_size=1024 * 1024)
        entry = writes.entry_for(written.size, written.checksum, written.locators, None, None)
        writes.stage_rows(lake, "big", "main", [("big.parquet", entry.to_row())])
        counting = Counting(lake.blocks)
        lake.blocks = counting  # type: ignore[assignment]

        found = p.open_object(lake, "big", "main", "big.parquet")
        with objectfile.open_read(lake, found) as f:
            parquet = pq.ParquetFile(f)
            batch = next(parquet.iter_batches(20, row_groups=[0]))
            assert batch.num_rows == 20 and parquet.metadata.num_row_groups == 100
            assert batch.column(0).to_pylist() == table.column(0).to_pylist()[:20]
            assert f.asked < 0.03 * len(data)  # the footer and row group 0's column chunks
            assert f.fetched < 0.05 * len(data)  # ... in the blocks they lie in, each read once
            assert counting.read == f.fetched
            # seeks and reads like a file
            assert f.seek(-4, os.SEEK_END) == len(data) - 4 and f.read() == b"PAR1"
            assert f.seek(0) == 0 and f.read(4) == b"PAR1" and f.tell() == 4

        counting.read = 0
        shown = previews.preview(lake, found)
        assert shown.kind is previews.Kind.PARQUET and len(shown.rows) == 20
        assert counting.read < 0.1 * len(data), f"the preview read {counting.read} of {len(data)} bytes"
    finally:
        lake.close()


def test_the_file_object_reads_across_segments(tmp_path: Path) -> None:
    lake = opening.open_lake(str(tmp_path / "lake"))
    try:
        data = os.urandom(10_000)
        written = write_object(lake.blocks, io.BytesIO(data), block_size=1000)
        entry = writes.entry_for(written.size, written.checksum, written.locators, None, None)
        with objectfile.ObjectFile(lake, entry, keep=1) as f:
            assert f.size == 10_000
            f.seek(950)
            assert f.read(2100) == data[950:3050]  # three segments in one read
            buffer = bytearray(100)
            f.seek(9950)
            assert f.readinto(buffer) == 50 and bytes(buffer[:50]) == data[9950:]
            assert f.read(10) == b""
            f.seek(0)
            assert f.read() == data
    finally:
        lake.close()


def test_a_parquet_preview_is_one_audited_read(tmp_path: Path) -> None:
    lake = opening.open_lake(str(tmp_path / "lake"))
    try:
        p.create_repo(lake, "audited", "main", "local://audited")
        writes.upload(lake, "audited", "main", "t.parquet", _parquet(pa.table({"a": list(range(50))})))
        journal.enable(lake, reads=True)
        shown = previews.preview(lake, p.open_object(lake, "audited", "main", "t.parquet"))
        assert shown.kind is previews.Kind.PARQUET
        entries = journal.tail(lake.kv, lake.blocks, amount=100, repo="audited")
        read = [e for e in entries if e.event_type == "read-object"]
        assert len(read) == 1 and read[0].event_payload["path"] == "t.parquet"
        assert "range" not in read[0].event_payload  # the ranges are the reader's
    finally:
        lake.close()


# -- in a browser ----------------------------------------------------------------------------


def test_parquet_and_image_previews_render_in_a_browser(live: Live, api: httpx.Client, page: Any) -> None:
    from playwright.sync_api import expect

    repo = new_repo(api)
    upload(api, repo, "main", "t.parquet", _parquet(pa.table({"city": ["Lyon", "Porto"], "n": [1, 2]})))
    upload(api, repo, "main", "dot.png", _png(8, 8), **{"Content-Type": "image/png"})
    with sign_in(live, live.key_id, live.secret) as client:
        cookies = [
            {"name": c.name, "value": c.value or "", "url": base_url(live)} for c in client.cookies.jar
        ]
    page.context.add_cookies(cookies)
    page.goto(f"{base_url(live)}/ui/repos/{repo}/refs/main/object?path=t.parquet")
    rows = page.locator("table.preview-rows tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(1)).to_contain_text("Porto")
    expect(page.locator("table.schema")).to_contain_text("int64")
    page.goto(f"{base_url(live)}/ui/repos/{repo}/refs/main/object?path=dot.png")
    image = page.get_by_role("img", name="dot.png")
    expect(image).to_be_visible()
    assert page.evaluate("document.querySelector('figure.preview-image img').naturalWidth") == 8
