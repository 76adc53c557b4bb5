"""lakeFS URIs (``lakefs://repo/ref/path``) and object path rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakectl.core.limits import MAX_PATH_BYTES, address_problem, name_problem, show
from lakectl.errors import InvalidPath, InvalidURI

SCHEME = "lakefs://"


@dataclass(frozen=True, slots=True)
class URI:
    repo: str
    ref: str | None = None
    path: str = ""

    def __str__(self) -> str:
        out = SCHEME + self.repo
        if self.ref is not None:
            out += "/" + self.ref
            if self.path:
                out += "/" + self.path
        return out


def parse_uri(text: str) -> URI:
    """Split ``lakefs://repo[/ref[/path]]``; names are validated where they are used."""
    if not text.startswith(SCHEME):
        raise InvalidURI(f"invalid URI {show(text)}: expected lakefs://<repository>/<ref>/<path>")
    problem = address_problem(text)
    if problem is not None:
        raise InvalidURI(f"invalid URI {show(text)}: {problem}")
    rest = text[len(SCHEME) :]
    repo, sep, rest = rest.partition("/")
    if not repo:
        raise InvalidURI(f"invalid URI {text!r}: missing repository")
    if not sep:
        return URI(repo)
    ref, _, path = rest.partition("/")
    if not ref:
        raise InvalidURI(f"invalid URI {text!r}: missing ref after the repository")
    return URI(repo, ref, path)


def check_path(path: str, *, allow_empty: bool = False) -> str:
    """A path or prefix that may name stored objects: valid UTF-8 of at most 1024 bytes, no NUL,
    no ``.``/``..`` segments, no leading ``/``. Where a path is created, use
    :func:`check_new_path`, which also refuses what would drive a terminal."""
    if not path:
        if allow_empty:
            return path
        raise InvalidPath("an object path is required")
    if not isinstance(path, str):
        raise InvalidPath(f"an object path must be text, not {type(path).__name__}")
    problem = address_problem(path)
    if problem is not None:
        raise InvalidPath(f"invalid path {show(path)}: {problem}")
    if path.startswith("/"):
        raise InvalidPath(f"invalid path {show(path)}: must not start with '/'")
    padded = f"/{path}/"  # a "." or ".." segment is one between two slashes (a batch checks 100k)
    if "/./" in padded or "/../" in padded:
        raise InvalidPath(f"invalid path {show(path)}: '.' and '..' segments are not allowed")
    if len(path.encode()) > MAX_PATH_BYTES:
        raise InvalidPath(f"invalid path {show(path, 40)}: longer than {MAX_PATH_BYTES} bytes")
    return path


def check_new_paths(paths: Sequence[str]) -> None:
    """:func:`check_new_path` of every path of a batch, which it refuses as that would (the
    first bad path in order, with the same message). The usual batch, all valid, is checked at
    once over the paths joined by ``/``, where a bad path shows: an empty or absolute one as
    ``//``, a ``.`` or ``..`` segment as ``/./`` or ``/../``, a character a name may not hold
    anywhere; ``//`` inside a valid path, or a long one, sends the batch to the path-by-path
    check (an upload of 100k files: 15 ms instead of 200)."""
    try:
        joined = "/" + "/".join(paths) + "/"
    except TypeError:  # a path that is no text: the path-by-path check says which
        joined = "//"
    if (
        "//" in joined
        or "/./" in joined
        or "/../" in joined
        or name_problem(joined) is not None
        or max(map(len, paths), default=0) * 4 > MAX_PATH_BYTES  # no char takes over 4 UTF-8 bytes
    ):
        for path in paths:
            check_new_path(path)


def check_new_path(path: str) -> str:
    """A path an object is about to be stored at: :func:`check_path`'s rules, and no control,
    line-separator or bidi characters (lakectl.core.limits), which would drive the terminals
    that list it."""
    check_path(path)
    problem = name_problem(path)
    if problem is not None:
        raise InvalidPath(f"invalid path {show(path)}: {problem}")
    return path
