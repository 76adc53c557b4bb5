"""What clients of a live server see when stored blocks rot or go missing: an upload of the same
bytes heals a rotten block, and lost or damaged data is a 503, never a 404 or a clean short body."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from lakectl.client.remote import RemoteBackend
from lakectl.errors import CorruptBlock, IntegrityError, MissingData
from tests.rot import DAMAGE, flip_byte
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


# --- lost or damaged data is a 503 ----------------------------------------------------------


@pytest.mark.parametrize(("damage", "code"), [("lose", "missing_data"), ("flip", "corrupt_block")])
def test_rest_read_of_lost_or_damaged_data_is_503(
    live: Live, api: httpx.Client, repo: str, damage: str, code: str
) -> None:
    """Not 404: the object exists, its storage failed. A client that took a lost block for an
    absent object would treat it as deleted."""
    data = os.urandom(80_000)
    upload(api, repo, "main", "data.bin", data)
    DAMAGE[damage](blocks_of(live), data)
    r = read(api, repo, "data.bin")
    assert r.status_code == 503 and r.json()["code"] == code
    ranged = api.get(
        f"/repositories/{repo}/refs/main/objects", params={"path": "data.bin"}, headers={"Range": "bytes=0-9"}
    )
    assert ranged.status_code == 503
    # HEAD and stat answer from metadata and read no block: the object is there.
    head = api.head(f"/repositories/{repo}/refs/main/objects", params={"path": "data.bin"})
    assert head.status_code == 200 and head.headers["Content-Length"] == str(len(data))


class Counting(httpx.HTTPTransport):
    """A real transport that counts block reads."""

    def __init__(self) -> None:
        super().__init__()
        self.block_reads = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path.startswith("/blocks/"):
            self.block_reads += 1
        return super().handle_request(request)


@pytest.mark.parametrize(("damage", "error"), [("lose", MissingData), ("flip", CorruptBlock)])
def test_remote_read_of_lost_or_damaged_data_is_an_integrity_error_not_retried(
    live: Live, api: httpx.Client, repo: str, damage: str, error: type[IntegrityError]
) -> None:
    data = os.urandom(90_000)
    upload(api, repo, "main", "data.bin", data)
    DAMAGE[damage](blocks_of(live), data)
    transport = Counting()
    backend = RemoteBackend(live.url, live.key_id, live.secret, transport=transport)
    try:
        with pytest.raises(error) as info:
            b"".join(backend.read(repo, "main", "data.bin"))
    finally:
        backend.close()
    assert info.value.exit_code == 7
    assert transport.block_reads == 1, "reading damaged data again cannot help: no retries"


@pytest.mark.parametrize("damage", ["lose", "flip"])
def test_remote_cat_of_lost_or_damaged_data_exits_7(
    live: Live, api: httpx.Client, repo: str, tmp_path: Path, damage: str
) -> None:
    data = os.urandom(100_000)
    upload(api, repo, "main", "data.bin", data)
    DAMAGE[damage](blocks_of(live), data)
    result = CliRunner().invoke(
        app, ["fs", "cat", f"lakefs://{repo}/main/data.bin"], env=live.cli_env(tmp_path)
    )
    assert result.exit_code == 7, result.stderr
    assert result.stdout_bytes == b""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: block ")
