"""One authenticated S3 request as an operation sees it: what the gateway hands every handler.

The gateway (:mod:`server.s3.app`) builds a :class:`Call` and dispatches it through the routing
table (:mod:`server.s3.routes`) to an operation module (buckets, objects, multipart, body). It
lives in a module of its own, below all of them, so that the operations never import the app that
imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import Request

from lakectl.core.lake import Lake
from lakectl.errors import InvalidArgument
from server.auth.users import User
from server.blocks import BlockBuffers
from server.config import S3GatewaySettings
from server.s3 import sigv4


@dataclass
class Call:
    """One authenticated request, as an operation sees it."""

    request: Request
    lake: Lake
    user: User
    verified: sigv4.Verified
    bucket: str
    key: str
    query: Mapping[str, str]
    settings: S3GatewaySettings
    inline_reads: bool
    buffers: BlockBuffers
    """The server's pool of block-sized buffers for bodies (shared with the block API)."""
    headers: Mapping[str, str]
    """Lower-case header names → values."""

    def split_key(self) -> tuple[str, str]:
        """``(ref, path)`` of an object key; a key without both is no object."""
        ref, sep, path = self.key.partition("/")
        if not ref or not sep or not path:
            raise InvalidArgument(
                f"key {self.key!r} names no object: keys are <ref>/<path> (a branch, tag or commit id, "
                "then the object's path)"
            )
        return ref, path
