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
from lakectl.errors import CorruptBlock, IntegrityError, MissingData, StorageError
from tests.rot import DAMAGE, cat_to_file, flip_byte, signed_manifest_of_blocks
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
    """A real transport that counts block reads and records every request's method and path."""

    def __init__(self) -> None:
        super().__init__()
        self.block_reads = 0
        self.requests: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path.startswith("/blocks/"):
            self.block_reads += 1
        self.requests.append(f"{request.method} {request.url.path}")
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
    # A lost block is found by the server before it signs the locators; a damaged one by the
    # client's md5 check of what it fetched. Either way, reading again cannot help: no retries.
    assert transport.block_reads == (0 if damage == "lose" else 1)
    assert len(transport.requests) == len(set(transport.requests)), transport.requests


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


# --- a streamed read never ends cleanly on damaged data -------------------------------------

PART = 512 * 1024


def several_blocks(live: Live, api: httpx.Client, repo: str, path: str, count: int = 4) -> list[bytes]:
    """An object of ``count`` blocks of 512 KiB (more than the 1 MiB read inline: streamed)."""
    parts = [os.urandom(PART) for _ in range(count)]
    text = signed_manifest_of_blocks(api, path, parts)
    r = api.post(
        f"/repositories/{repo}/branches/main/manifest", content=text, headers={"Content-Type": "text/plain"}
    )
    assert r.status_code == 200, r.text
    return parts


@pytest.mark.parametrize("damage", ["lose", "flip"])
def test_streamed_read_with_a_damaged_first_block_is_a_503(
    live: Live, api: httpx.Client, repo: str, damage: str
) -> None:
    parts = several_blocks(live, api, repo, "big.bin")
    DAMAGE[damage](blocks_of(live), parts[0])
    r = read(api, repo, "big.bin")
    assert r.status_code == 503 and r.json()["code"] in ("missing_data", "corrupt_block")


@pytest.mark.parametrize("damage", ["lose", "flip"])
def test_streamed_read_with_a_damaged_later_block_fails_the_client(
    live: Live, api: httpx.Client, repo: str, damage: str
) -> None:
    """The 200 is out when the third block fails: the server must end the connection short of
    its Content-Length, so that the client raises rather than keep a clean short body."""
    parts = several_blocks(live, api, repo, "big.bin")
    DAMAGE[damage](blocks_of(live), parts[2])
    received = bytearray()
    url = f"/repositories/{repo}/refs/main/objects"
    with api.stream("GET", url, params={"path": "big.bin"}) as r:
        assert r.status_code == 200
        assert r.headers["Content-Length"] == str(4 * PART)
        with pytest.raises(httpx.RemoteProtocolError):  # peer closed before the whole body
            for chunk in r.iter_raw():
                received += chunk
    assert len(received) < 4 * PART
    assert bytes(received) == b"".join(parts)[: len(received)], "what came is the object's bytes"


def test_remote_cat_into_a_file_of_an_object_whose_second_block_is_damaged_leaves_none_of_it(
    live: Live, api: httpx.Client, repo: str, tmp_path: Path
) -> None:
    parts = several_blocks(live, api, repo, "big.bin", count=3)
    flip_byte(blocks_of(live), parts[1], 5)
    target = tmp_path / "out.bin"
    done = cat_to_file(f"lakefs://{repo}/main/big.bin", target, {**os.environ, **live.cli_env(tmp_path)})
    assert done.returncode == 7, done.stderr
    assert target.read_bytes() == b""


class FlipInTransit(httpx.HTTPTransport):
    """A real transport whose block downloads arrive with one bit flipped, and that counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.block_reads: list[httpx.Headers] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method != "GET" or not request.url.path.startswith("/blocks/"):
            return response
        self.block_reads.append(request.headers)
        body = bytearray(response.read())
        body[len(body) // 2] ^= 0x01
        return httpx.Response(response.status_code, headers=response.headers, content=bytes(body))


def test_remote_read_of_part_of_a_block_checks_the_whole_block(
    live: Live, api: httpx.Client, repo: str
) -> None:
    """A packed small object is a part of a shared block: the client fetches the whole block once,
    checks its md5, then slices, so bytes damaged on the way are an error, never handed out."""
    parts = [os.urandom(1000) for _ in range(3)]
    block = b"".join(parts)
    locator = signed_manifest_of_blocks(api, "unused", [block]).split()[1]
    # One object of two segments of the same block, the middle third left out.
    text = f". {locator} 0:1000:x 2000:1000:x\n"
    r = api.post(
        f"/repositories/{repo}/branches/main/manifest", content=text, headers={"Content-Type": "text/plain"}
    )
    assert r.status_code == 200, r.text
    transport = FlipInTransit()
    backend = RemoteBackend(live.url, live.key_id, live.secret, transport=transport)
    try:
        with pytest.raises(StorageError, match="arrived corrupted"):
            b"".join(backend.read(repo, "main", "x"))
    finally:
        backend.close()
    assert "range" not in transport.block_reads[0]
    counting = Counting()
    good = RemoteBackend(live.url, live.key_id, live.secret, transport=counting)
    try:
        assert b"".join(good.read(repo, "main", "x")) == parts[0] + parts[2]
    finally:
        good.close()
    assert counting.block_reads == 1, "consecutive segments of one block: one fetch"


# --- a packed object is read alone, checked against its own md5 ---------------------------


def _packed_remotely(live: Live, repo: str, tmp_path: Path) -> tuple[RemoteBackend, dict, dict]:
    """Three small files uploaded through a server, packed into one block; each file's bytes
    and (pack md5, offset, length)."""
    data = {name: os.urandom(3000 + i) for i, name in enumerate(("a.bin", "b.bin", "c.bin"))}
    for name, content in data.items():
        (tmp_path / name).write_bytes(content)
    backend = RemoteBackend(live.url, live.key_id, live.secret)
    backend.upload_files(repo, "main", [(name, str(tmp_path / name)) for name in data])
    where = {}
    with httpx.Client(base_url=live.url, auth=(live.key_id, live.secret)) as api:
        for name in data:
            body = api.get(f"/repositories/{repo}/refs/main/objects/signed", params={"path": name}).json()
            (signed,) = body["signed_locators"]
            signed, offset, length = signed.rsplit(":", 2)
            where[name] = (signed.split("+")[0], int(offset), int(length))
    assert len({md5 for md5, _, _ in where.values()}) == 1, "the three files share one pack"
    return backend, data, where


def test_a_remote_read_of_a_packed_object_fetches_it_alone(live: Live, repo: str, tmp_path: Path) -> None:
    """The client asks for the object's range with its md5, and the server reads and checks the
    range alone: a rotten byte elsewhere in the pack does not keep the object from being read,
    one in the object itself is still a ``CorruptBlock``."""
    backend, data, where = _packed_remotely(live, repo, tmp_path)
    try:
        md5, offset, _ = where["b.bin"]
        flip_byte(blocks_of(live), md5, offset + 7)
        for name in ("a.bin", "c.bin"):
            assert b"".join(backend.read(repo, "main", name)) == data[name]
        with pytest.raises(CorruptBlock):
            b"".join(backend.read(repo, "main", "b.bin"))
    finally:
        backend.close()


def test_a_ranged_block_get_serves_only_bytes_checked_against_an_md5(
    live: Live, repo: str, tmp_path: Path
) -> None:
    """``X-Lakectl-Part-MD5`` only changes what the server checks: the range against the md5
    given when it matches, else the whole block. A wrong md5 never gets rotten bytes served, and
    gets intact ones only once their block is verified."""
    backend, data, where = _packed_remotely(live, repo, tmp_path)
    backend.close()
    api = httpx.Client(base_url=live.url, auth=(live.key_id, live.secret))
    blocks = httpx.Client(base_url=live.url.removesuffix("/api/v1"), auth=(live.key_id, live.secret))
    with api, blocks:
        body = api.get(f"/repositories/{repo}/refs/main/objects/signed", params={"path": "a.bin"}).json()
        signed, start, length = body["signed_locators"][0].rsplit(":", 2)
        start_, end = int(start), int(start) + int(length) - 1

        def get(md5: str) -> httpx.Response:
            headers = {"Range": f"bytes={start_}-{end}", "X-Lakectl-Part-MD5": md5}
            return blocks.get(f"/blocks/{signed}", headers=headers)

        right, wrong = hashlib.md5(data["a.bin"]).hexdigest(), "0" * 32
        assert get(right).status_code == 206 and get(right).content == data["a.bin"]
        assert get(wrong).status_code == 206 and get(wrong).content == data["a.bin"]  # the block verified
        pack, b_offset, _ = where["b.bin"]
        flip_byte(blocks_of(live), pack, b_offset)  # rotten outside a.bin's range
        assert get(right).content == data["a.bin"]
        assert get(wrong).status_code == 503  # not verified by the md5 given: the whole block is
        flip_byte(blocks_of(live), pack, b_offset)  # mended
        flip_byte(blocks_of(live), pack, start_ + 1)  # rotten inside a.bin's range
        assert get(right).status_code == 503
        assert get(hashlib.md5(b"x").hexdigest()).status_code == 503
