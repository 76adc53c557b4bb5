"""RemoteBackend against a live server: dedup over the network, proofs, retries, no half uploads."""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from lakectl.client import remote, remote_blocks
from lakectl.client.remote import RemoteBackend
from lakectl.errors import InvalidArgument, ObjectNotFound, StorageError, Unauthenticated
from tests.server.conftest import Live, unique


class Recording(httpx.HTTPTransport):
    """A real transport that counts requests and can inject failures."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.fail: dict[str, list[int]] = {}
        self.links: list[dict] = []
        """The objects of every ``objects/links`` request, as sent."""
        self.ranged = 0
        """Block GETs of a part of a block (a ``Range``)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.startswith("/blocks/") and path not in ("/blocks/missing", "/blocks/prove"):
            path = "/blocks/*"
        key = (request.method, path)
        self.calls[key] += 1
        if path == "/blocks/*" and "range" in request.headers:
            self.ranged += 1
        if path.endswith("/objects/links"):
            self.links += json.loads(request.read())["objects"]
        for needle, statuses in self.fail.items():
            if needle in request.url.path and statuses:
                status = statuses.pop(0)
                if status == 0:
                    raise httpx.ConnectError("injected", request=request)
                return httpx.Response(status, json={"message": "injected"}, request=request)
        return super().handle_request(request)


@pytest.fixture
def transport() -> Recording:
    return Recording()


@pytest.fixture
def backend(live: Live, transport: Recording) -> Iterator[RemoteBackend]:
    b = RemoteBackend(live.url, live.key_id, live.secret, transport=transport)
    yield b
    b.close()


def puts(t: Recording) -> int:
    return t.calls[("PUT", "/blocks/*")]


def test_reupload_transfers_no_block(backend: RemoteBackend, transport: Recording, monkeypatch) -> None:
    monkeypatch.setattr(remote_blocks, "BLOCK_SIZE", 1 << 20)  # several blocks without a big file
    repo = unique("net")
    backend.create_repo(repo)
    data = os.urandom(3 * (1 << 20) + 123)
    info = backend.upload(repo, "main", "big.bin", data)
    assert info.entry is not None and info.entry.size == len(data)
    assert puts(transport) == 4
    backend.upload(repo, "main", "copy.bin", data)
    assert puts(transport) == 4, "a block the server has must not be sent again"
    assert b"".join(backend.read(repo, "main", "copy.bin")) == data


class Trickle(io.RawIOBase):
    """A stream that returns at most ``step`` bytes per read, as a pipe or a socket may."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._pos, self._step = data, 0, step
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        self.reads += 1
        n = min(len(buffer), self._step, len(self._data) - self._pos)
        buffer[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


@pytest.mark.parametrize("blocks", [0, 1, 3, 2 * remote_blocks.BLOCKS_IN_FLIGHT + 1])
@pytest.mark.parametrize("tail", [0, 1, 40_000])
def test_streams_of_many_blocks_arrive_whole(
    backend: RemoteBackend, transport: Recording, monkeypatch, blocks: int, tail: int
) -> None:
    """Blocks go through a bounded pipeline of reused buffers, from streams that return short
    reads: every byte arrives in order, and exact multiples of the block size add no block."""
    size = 1 << 16
    monkeypatch.setattr(remote_blocks, "BLOCK_SIZE", size)
    repo = unique("stream")
    backend.create_repo(repo)
    data = os.urandom(blocks * size + tail)
    info = backend.upload(repo, "main", "s.bin", io.BufferedReader(Trickle(data, 10_000)))
    assert info.entry is not None and info.entry.size == len(data)
    # (the empty block of an empty stream may be on the shared server already: proven, not sent)
    assert puts(transport) + transport.calls[("POST", "/blocks/prove")] == max(1, blocks + (tail > 0))
    assert b"".join(backend.read(repo, "main", "s.bin")) == data


def test_a_failing_block_stops_the_upload(backend: RemoteBackend, transport: Recording, monkeypatch) -> None:
    size = 1 << 16
    monkeypatch.setattr(remote_blocks, "BLOCK_SIZE", size)
    repo = unique("stop")
    backend.create_repo(repo)
    transport.fail["/blocks/missing"] = [400]
    source = Trickle(os.urandom(200 * size), size)
    with pytest.raises(InvalidArgument):
        backend.upload(repo, "main", "never.bin", io.BufferedReader(source, size))
    assert source.reads < 100, "reading went on long after a block had failed"
    with pytest.raises(ObjectNotFound):
        backend.stat(repo, "main", "never.bin")


def test_retries_network_errors_and_5xx(backend: RemoteBackend, transport: Recording) -> None:
    repo = unique("retry")
    backend.create_repo(repo)
    transport.fail["/blocks/"] = [0, 503]
    backend.upload(repo, "main", "x", b"payload")
    transport.fail[f"/repositories/{repo}/refs/main/objects/signed"] = [502, 0]
    assert b"".join(backend.read(repo, "main", "x")) == b"payload"


def test_an_interrupted_upload_leaves_nothing_visible(backend: RemoteBackend, transport: Recording) -> None:
    repo = unique("cut")
    backend.create_repo(repo)
    transport.fail["/objects/link"] = [0] * remote.ATTEMPTS
    with pytest.raises(StorageError):
        backend.upload(repo, "main", "half", b"x" * 1000)
    with pytest.raises(ObjectNotFound):
        backend.stat(repo, "main", "half")
    assert backend.diff_uncommitted(repo, "main") == []


def test_small_files_link_in_batches_into_the_packs_the_embedded_lake_makes(
    backend: RemoteBackend, transport: Recording, monkeypatch, tmp_path
) -> None:
    """Packs are sent while files are still read; objects are linked a batch per request (not
    one request per file); the packs are the embedded lake's, byte for byte (dedup across both)."""
    from lakectl.core import opening, porcelain, writes

    monkeypatch.setattr(remote_blocks, "LINK_BATCH", 7)
    files = []
    for i in range(40):
        path = tmp_path / f"f{i:02d}"
        path.write_bytes(os.urandom(30_000) if i % 3 else b"same" * (i % 2))
        files.append((f"d/f{i:02d}", str(path)))
    big = tmp_path / "big"
    big.write_bytes(os.urandom(70_000))  # larger than a small object: a block of its own
    files.append(("d/big", str(big)))
    repo = unique("batch")
    backend.create_repo(repo)
    infos = backend.upload_files(repo, "main", list(reversed(files)))
    assert [i.path for i in infos] == sorted(p for p, _ in files)
    # 40 small files linked 7 a request, and the file of a block of its own in one more
    assert transport.calls[("POST", f"/api/v1/repositories/{repo}/branches/main/objects/links")] == 7
    assert transport.calls[("POST", f"/api/v1/repositories/{repo}/branches/main/objects/link")] == 0
    # Each small file with bytes carries its md5 and the server's receipt: linking reads no pack.
    assert len(transport.links) == 41
    for sent in transport.links:
        assert ("receipt" in sent) == (bool(sent["segments"]) and sent["path"] != "d/big"), sent
    for path, local in files:
        with open(local, "rb") as f:
            assert b"".join(backend.read(repo, "main", path)) == f.read()

    from lakectl.core import manifests

    lake = opening.open_lake(str(tmp_path / "lake"))
    porcelain.create_repo(lake, "same")
    embedded = {i.path: i for i in writes.upload_files(lake, "same", "main", files)}
    for info in infos:
        mine, theirs = info.entry, embedded[info.path].entry
        assert mine is not None and theirs is not None
        assert (mine.size, mine.checksum) == (theirs.size, theirs.checksum)
    # The same blocks and segments: the manifests (bare locators) are the same text.
    assert backend.export_manifest(repo, "main") == manifests.export_manifest(lake, "same", "main")


def test_files_of_a_block_each_are_asked_about_sent_and_linked_in_batches(
    backend: RemoteBackend, transport: Recording, monkeypatch, tmp_path
) -> None:
    """Files larger than a pack takes and at most a block: one question, one request sending
    the blocks the server lacks and one link per batch (not four requests a file), a block the
    server has proven instead of sent; a file of several blocks goes its own way; every byte
    arrives."""
    monkeypatch.setattr(remote_blocks, "BLOCK_SIZE", 1 << 18)
    monkeypatch.setattr(remote_blocks, "WHOLE_BATCH_BYTES", 500_000)
    repo = unique("whole")
    backend.create_repo(repo)
    twin = os.urandom(120_000)
    backend.upload(repo, "main", "already/there.bin", twin)  # the server holds this block
    files = []
    for i in range(12):
        path = tmp_path / f"m{i:02d}"
        path.write_bytes(twin if i == 5 else os.urandom(100_000 + 10_000 * i))
        files.append((f"m/{i:02d}.bin", str(path)))
    several = tmp_path / "several"
    several.write_bytes(os.urandom((1 << 18) * 2 + 5))
    files.append(("m/several.bin", str(several)))
    before = Counter(transport.calls)
    done: list[int] = []
    infos = backend.upload_files(repo, "main", files, progress=done.append)
    calls = transport.calls - before
    assert [i.path for i in infos] == sorted(p for p, _ in files) and sum(done) == len(files)
    # 12 files of 100-210 kB in batches of at most 500 kB: 5 batches (4, 3, 2, 2 and 1 files)
    assert calls[("POST", f"/api/v1/repositories/{repo}/branches/main/objects/links")] == 5
    assert calls[("POST", f"/api/v1/repositories/{repo}/branches/main/objects/link")] == 1  # several.bin
    assert calls[("POST", "/blocks/missing")] == 5 + 3  # a question a batch; several.bin's 3 blocks
    assert calls[("POST", "/blocks/*")] == 5  # POST /blocks/batch: each batch's 11 missing blocks
    assert calls[("PUT", "/blocks/*")] == 3 and calls[("POST", "/blocks/prove")] == 1
    for (path, local), info in zip(sorted(files), infos, strict=True):
        with open(local, "rb") as f:
            data = f.read()
        assert b"".join(backend.read(repo, "main", path)) == data
        if path != "m/several.bin":
            assert info.entry is not None and info.entry.checksum == hashlib.md5(data).hexdigest()


def test_progress_hears_of_files_as_they_are_read_and_new_blocks_of_what_was_sent(
    backend: RemoteBackend, transport: Recording, tmp_path
) -> None:
    """Small files are told in groups as they are read (not a whole link batch at once, which
    for fewer than a batch of files would leave the bar at 0 until the end), a large one once it is
    uploaded; ``new_blocks`` hears of each block the server lacked, and of none the next time."""
    files = []
    for i in range(200):
        path = tmp_path / f"f{i:03d}"
        path.write_bytes(os.urandom(100))
        files.append((f"p/f{i:03d}", str(path)))
    big = tmp_path / "big"
    big.write_bytes(os.urandom(70_000))
    files.append(("p/zz-big", str(big)))
    repo = unique("told")
    backend.create_repo(repo)
    told: list[int] = []
    new: dict[str, int] = {}
    backend.upload_files(repo, "main", files, progress=told.append, new_blocks=new.__setitem__)
    assert told == [64, 64, 64, 8, 1]
    assert sum(new.values()) == 200 * 100 + 70_000 and len(new) == 2  # one pack, one block
    again: dict[str, int] = {}
    backend.upload_files(repo, "main", files, new_blocks=again.__setitem__)
    assert again == {}


class Overlaps(Recording):
    """A real transport that records the most requests it carried at once (each held a moment
    on its way, so that requests sent together are seen together)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = self.most = 0
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(0.01)
            return super().handle_request(request)
        finally:
            with self._lock:
                self.now -= 1


@pytest.mark.parametrize("parallelism", [1, 2, None])
def test_parallelism_bounds_the_requests_in_flight(
    live: Live, tmp_path, monkeypatch, parallelism: int | None
) -> None:
    """``fs upload -r -p N``: at most N requests of the upload at once, however its pipeline
    (packs, blocks of their own, links, a file of several blocks) would overlap them; by default
    they do overlap. Every byte arrives either way."""
    monkeypatch.setattr(remote_blocks, "LINK_BATCH", 10)
    monkeypatch.setattr(remote_blocks, "BLOCK_SIZE", 1 << 18)
    monkeypatch.setattr(remote_blocks, "WHOLE_BATCH_BYTES", 300_000)
    files = []
    for i in range(60):  # small files: packs, a group of them, links of 10
        path = tmp_path / f"s{i:02d}"
        path.write_bytes(os.urandom(40_000))
        files.append((f"s/{i:02d}", str(path)))
    for i in range(8):  # a block each: asked about, sent and linked in batches
        path = tmp_path / f"m{i}"
        path.write_bytes(os.urandom(150_000))
        files.append((f"m/{i}.bin", str(path)))
    several = tmp_path / "several"
    several.write_bytes(os.urandom((1 << 18) * 3 + 1))
    files.append(("m/several.bin", str(several)))
    transport = Overlaps()
    backend = RemoteBackend(live.url, live.key_id, live.secret, transport=transport)
    try:
        repo = unique("par")
        backend.create_repo(repo)
        transport.most = 0
        if parallelism is None:
            backend.upload_files(repo, "main", files)
            assert transport.most >= 3, transport.most
        else:
            backend.upload_files(repo, "main", files, parallelism=parallelism)
            assert transport.most == parallelism, transport.most
        for path, local in files:
            with open(local, "rb") as f:
                assert b"".join(backend.read(repo, "main", path)) == f.read(), path
    finally:
        backend.close()


def test_wrong_credentials_are_refused(live: Live) -> None:
    b = RemoteBackend(live.url, live.key_id, "wrong")
    with pytest.raises(Unauthenticated):
        b.list_repos()
    b.close()


def test_packs_of_small_files_go_several_to_a_request(
    backend: RemoteBackend, transport: Recording, tmp_path
) -> None:
    """A recursive upload's packs are asked about and sent several at a time (one question and
    one ``POST /blocks/batch`` per group, made durable together), each file still linked with
    the server's receipt for its md5; a second upload sends no pack again."""
    files = []
    for i in range(3000):
        path = tmp_path / f"s{i:04d}"
        path.write_bytes(os.urandom(4096))
        files.append((f"s/{i:04d}", str(path)))
    repo = unique("packs")
    backend.create_repo(repo)
    before = Counter(transport.calls)
    backend.upload_files(repo, "main", files)
    calls = transport.calls - before
    packs = {sent["segments"][0].split("+A")[0] for sent in transport.links}
    groups = calls[("POST", "/blocks/*")]
    assert len(packs) >= 10 and 0 < groups <= len(packs) // 3, (len(packs), groups)
    assert calls[("POST", "/blocks/missing")] == groups and calls[("PUT", "/blocks/*")] == 0
    assert all("receipt" in sent for sent in transport.links)
    for path, local in files[::500]:
        with open(local, "rb") as f:
            assert b"".join(backend.read(repo, "main", path)) == f.read()
    again = Counter(transport.calls)
    backend.upload_files(repo, "main", [(f"t/{p}", lp) for p, lp in files])
    resent = transport.calls - again
    assert resent[("POST", "/blocks/*")] == 0 and resent[("PUT", "/blocks/*")] == 0  # all proven


def test_a_pack_read_object_after_object_is_fetched_once(
    live: Live, backend: RemoteBackend, transport: Recording, tmp_path
) -> None:
    """A download of a directory reads its packed files one after the other: the first alone
    (a range), the second fetches the whole pack, verified, and the rest are cut from it, no
    block request each. A client that reads one file fetches only its own bytes."""
    files = []
    for i in range(40):
        path = tmp_path / f"f{i:02d}"
        path.write_bytes(os.urandom(2000 + i))
        files.append((f"d/f{i:02d}", str(path)))
    repo = unique("packread")
    backend.create_repo(repo)
    backend.upload_files(repo, "main", files)
    before = Counter(transport.calls)
    for path, local in files:
        with open(local, "rb") as f:
            assert b"".join(backend.read(repo, "main", path)) == f.read()
    assert (transport.calls - before)[("GET", "/blocks/*")] == 2
    alone = Recording()
    single = RemoteBackend(live.url, live.key_id, live.secret, transport=alone)
    try:
        with open(files[7][1], "rb") as f:
            assert b"".join(single.read(repo, "main", files[7][0])) == f.read()
    finally:
        single.close()
    assert alone.calls[("GET", "/blocks/*")] == 1 and alone.ranged == 1
