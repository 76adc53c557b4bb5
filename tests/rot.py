"""Damage a lake's block files as storage failures do (a flipped bit, a lost file), for tests of
what users see then. Blocks are files ``<root>/<md5[:3]>/<md5>``, stored read-only."""

from __future__ import annotations

import hashlib
from pathlib import Path


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


DAMAGE = {"flip": flip_byte, "lose": lose_block}
"""The damages by name, for tests parametrised over them."""
