"""RemoteBackend against a live server: dedup over the network, proofs, retries, no half uploads."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from lakectl.client import remote
from lakectl.client.remote import RemoteBackend
from lakectl.errors import ObjectNotFound, StorageError, Unauthenticated
from tests.server.conftest import Live, unique


class Recording(httpx.HTTPTransport):
    """A real transport that counts requests and can inject failures."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.fail: dict[str, list[int]] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.startswith("/blocks/") and path not in ("/blocks/missing", "/blocks/prove"):
            path = "/blocks/*"
        key = (request.method, path)
        self.calls[key] += 1
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
    monkeypatch.setattr(remote, "BLOCK_SIZE", 1 << 20)  # several blocks without a big file
    repo = unique("net")
    backend.create_repo(repo)
    data = os.urandom(3 * (1 << 20) + 123)
    info = backend.upload(repo, "main", "big.bin", data)
    assert info.entry is not None and info.entry.size == len(data)
    assert puts(transport) == 4
    backend.upload(repo, "main", "copy.bin", data)
    assert puts(transport) == 4, "a block the server has must not be sent again"
    assert b"".join(backend.read(repo, "main", "copy.bin")) == data


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


def test_wrong_credentials_are_refused(live: Live) -> None:
    b = RemoteBackend(live.url, live.key_id, "wrong")
    with pytest.raises(Unauthenticated):
        b.list_repos()
    b.close()
