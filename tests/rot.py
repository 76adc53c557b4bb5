"""Damage a lake's block files as storage failures do (a flipped bit, a lost file), for tests of
what users see then. Blocks are files ``<root>/<md5[:3]>/<md5>``, stored read-only."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx

from lakectl.core.blocks.data import block_locator
from lakectl.core.blocks.local import LocalAdapter


def block_file(root: Path, data_or_md5: bytes | str) -> Path:
    """The file of the block holding exactly ``data`` (or of that md5 hex)."""
    md5 = data_or_md5 if isinstance(data_or_md5, str) else hashlib.md5(data_or_md5).hexdigest()
    return root / md5[:3] / md5


def flip_byte(root: Path, data_or_md5: bytes | str, position: int = 0) -> None:
    """Flip one bit of the stored block, keeping its size: only reading its md5 can tell."""
    path = block_file(root, data_or_md5)
    stored = bytearray(path.read_bytes())
    stored[position] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(stored))
    path.chmod(0o444)


def lose_block(root: Path, data_or_md5: bytes | str) -> None:
    """Delete the stored block, as a lost disk or a wrong manual clean-up would."""
    block_file(root, data_or_md5).unlink()


def manifest_of_blocks(root: Path, name: str, parts: list[bytes]) -> str:
    """Store each part as a block of its own under ``root`` and return the Keep manifest of one
    file ``name`` made of them in order: an object of several small blocks, once imported, without
    uploading 64 MiB per block."""
    adapter = LocalAdapter(root)
    locators = [block_locator(part) for part in parts]
    for locator, part in zip(locators, parts, strict=True):
        adapter.put(locator, part)
    adapter.sync()
    return f". {' '.join(locators)} 0:{sum(map(len, parts))}:{name}\n"


def signed_manifest_of_blocks(api: httpx.Client, name: str, parts: list[bytes]) -> str:
    """The same through a server (``api`` bound to its ``/api/v1``): each part sent with
    ``PUT /blocks/<md5>``, the manifest naming them by the locators the server signed for this
    caller, as a server requires of a manifest it imports."""
    locators = []
    for part in parts:
        r = api.put(api.base_url.join(f"/blocks/{hashlib.md5(part).hexdigest()}"), content=part)
        assert r.status_code == 200, r.text
        locators.append(r.text.strip())
    return f". {' '.join(locators)} 0:{sum(map(len, parts))}:{name}\n"


def cat_to_file(
    uri: str, target: Path, env: Mapping[str, str], append: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """``lakectl fs cat <uri> > target`` (``>>`` with ``append``) in a child process of this
    tree's lakectl, as a shell runs it: stdout a regular file, not a test runner's buffer."""
    root = Path(__file__).resolve().parents[1]
    path = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-c", "from lakectl.cli.app import main; main()", "fs", "cat", uri]
    with open(target, "ab" if append else "wb") as out:
        return subprocess.run(
            command, stdout=out, stderr=subprocess.PIPE, env={**env, "PYTHONPATH": path}, timeout=120
        )


DAMAGE = {"flip": flip_byte, "lose": lose_block}
"""The damages by name, for tests parametrised over them."""
