"""What clients of a live server see when stored blocks rot or go missing: an upload of the same
bytes heals a rotten block, and lost or damaged data is a 503, never a 404 or a clean short body."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx

from lakectl.client.remote import RemoteBackend
from tests.rot import flip_byte
from tests.server.conftest import Live, upload


def blocks_of(live: Live) -> Path:
    return live.data_dir / "blocks"


def read(api: httpx.Client, repo: str, path: str) -> httpx.Response:
    return api.get(f"/repositories/{repo}/refs/main/objects", params={"path": path})


# --- an upload heals a rotten block ---------------------------------------------------------


def test_rest_upload_over_a_rotten_block_heals_it(live: Live, api: httpx.Client, repo: str) -> None:
    data = os.urandom(200_000)
    upload(api, repo, "main", "first", data)
    flip_byte(blocks_of(live), data, 1234)
    assert read(api, repo, "first").status_code >= 500
    upload(api, repo, "main", "again", data)
    for path in ("first", "again"):
        r = read(api, repo, path)
        assert r.status_code == 200 and r.content == data


def test_put_block_over_a_rotten_block_heals_it(live: Live, api: httpx.Client) -> None:
    data = os.urandom(70_000)
    md5 = hashlib.md5(data).hexdigest()
    blocks = httpx.Client(base_url=live.url.removesuffix("/api/v1"), auth=(live.key_id, live.secret))
    with blocks:
        signed = blocks.put(f"/blocks/{md5}", content=data).text.strip()
        flip_byte(blocks_of(live), md5, 0)
        assert blocks.get(f"/blocks/{signed}").status_code >= 500
        assert blocks.put(f"/blocks/{md5}", content=data).status_code == 200
        r = blocks.get(f"/blocks/{signed}")
        assert r.status_code == 200 and r.content == data


def test_remote_upload_over_a_rotten_block_heals_it(live: Live, api: httpx.Client, repo: str) -> None:
    """The server says it has the block (by size) and asks for a proof; checking the proof
    reads the rotten block, so the client sends the bytes instead, which heals it."""
    data = os.urandom(300_000)
    backend = RemoteBackend(live.url, live.key_id, live.secret)
    try:
        backend.upload(repo, "main", "first", data)
        flip_byte(blocks_of(live), data, len(data) - 1)
        backend.upload(repo, "main", "again", data)
        assert b"".join(backend.read(repo, "main", "first")) == data
        assert b"".join(backend.read(repo, "main", "again")) == data
    finally:
        backend.close()
