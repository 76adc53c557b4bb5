"""``lakectl fs presign`` and the ``physical_address`` of ``lakectl fs stat``, embedded and through
a live server: a URL a plain HTTP client reads the object through (remote), a clear refusal
(embedded), and the address of the object's data."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.cli.both_json import Cli, cli, live

__all__ = ["cli", "live"]


def test_presign(cli: Cli, tmp_path: Path) -> None:
    cli("repo", "create", "lakefs://R")
    cli("fs", "upload", "lakefs://R/main/p.txt", "--source", "-", input=b"presigned bytes")
    cli("fs", "presign", "lakefs://R/main/nope.txt", code=3)
    if cli.mode == "embedded":  # type: ignore[attr-defined]
        refused = cli("fs", "presign", "lakefs://R/main/p.txt", code=2)
        assert refused["code"] == "invalid_argument" and "need a lakectl server" in refused["message"]
        return
    out = cli("fs", "presign", "lakefs://R/main/p.txt", "--expiry", "120")
    assert out["path"] == "p.txt"
    assert 100 < out["presigned_url_expiry"] - time.time() <= 120
    assert httpx.get(out["presigned_url"]).content == b"presigned bytes"
    human = cli("fs", "presign", "lakefs://R/main/p.txt", human=True)
    assert human.strip().startswith("http://") and httpx.get(human.strip()).content == b"presigned bytes"
    cli("fs", "presign", "lakefs://R/main/p.txt", "--expiry", "0", code=2)

    # Small files uploaded together are packed into one block: a URL serves just its own bytes.
    folder = tmp_path / "dir"
    folder.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (folder / name).write_bytes(name.encode() * 10)
    cli("fs", "upload", "-r", "lakefs://R/main/dir/", "--source", str(folder))
    packed = cli("fs", "presign", "lakefs://R/main/dir/b.txt")["presigned_url"]
    assert httpx.get(packed).content == b"b.txt" * 10


def test_stat_shows_the_physical_address(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    data = b"x" * 100
    cli("fs", "upload", "lakefs://R/main/big.bin", "--source", "-", input=data)
    stat = cli("fs", "stat", "lakefs://R/main/big.bin")
    assert set(stat) >= {"path", "path_type", "physical_address", "checksum", "size_bytes", "mtime"}
    assert stat["physical_address"].startswith("local://")
    assert stat["size_bytes"] == 100 and stat["checksum"]
    human = cli("fs", "stat", "lakefs://R/main/big.bin", human=True)
    assert f"Physical Address: {stat['physical_address']}" in human
