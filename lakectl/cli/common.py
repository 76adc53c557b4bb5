"""What every command shares: the ``--json`` option, the backend of this run, URI parsing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lakectl.cli import options
from lakectl.errors import InvalidArgument, InvalidURI, LakectlError, NotFound

if TYPE_CHECKING:
    from lakectl.client import Backend
    from lakectl.core.uri import URI

JSON_KEY = "lakectl.json"
"""``ctx.meta`` key set when ``--json`` was given, so that the exit boundary reports errors as JSON."""


def _remember_json(ctx: typer.Context, value: bool) -> bool:
    if value:
        ctx.meta[JSON_KEY] = True
    return value


JsonFlag = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print JSON with the lakeFS API field names (errors too: {code, message, details}).",
        callback=_remember_json,
    ),
]


def noun(help: str) -> typer.Typer:
    """A sub-app for one noun (``repo``, ``branch``, ...), with the root's settings. The no-op
    callback keeps it a group even with one verb (``show commit``)."""
    return typer.Typer(
        help=help,
        callback=_no_op,
        no_args_is_help=True,
        rich_markup_mode=None,
        add_completion=False,
    )


def _no_op() -> None:
    pass


_backend: Backend | None = None


def backend() -> Backend:
    """The backend of this invocation, created on first use (closed by the app on exit)."""
    global _backend
    if _backend is None:
        from lakectl.client import get_backend

        _backend = get_backend()
        endpoint = getattr(_backend, "endpoint", None)
        options.info("lake: %s", f"the lakectl server at {endpoint}" if endpoint else "embedded")
    return _backend


def close_backend() -> None:
    global _backend
    if _backend is not None:
        _backend.close()
        _backend = None


# -- lakefs:// URIs (relative ones completed by --base-uri) --------------------------------


def _parse(text: str) -> URI:
    from lakectl.core.uri import parse_uri

    return parse_uri(text)


def repo_uri(text: str) -> str:
    """``lakefs://repo`` (a trailing ``/`` is fine): the repository name."""
    text = options.absolute(text)
    uri = _parse(text[:-1] if text.endswith("/") and text.count("/") == 3 else text)
    if uri.ref is not None:
        raise InvalidURI(f"invalid URI {text!r}: expected lakefs://<repository>")
    return uri.repo


def ref_uri(text: str) -> URI:
    """``lakefs://repo/ref`` (a branch, tag, commit id or expression such as ``main~2``)."""
    text = options.absolute(text)
    uri = _parse(text)
    if uri.ref is None or uri.path:
        raise InvalidURI(f"invalid URI {text!r}: expected lakefs://<repository>/<ref>")
    return uri


def path_uri(text: str, *, required: bool = True) -> URI:
    """``lakefs://repo/ref/path``; with ``required=False`` the path (a prefix) may be empty."""
    text = options.absolute(text)
    uri = _parse(text)
    if uri.ref is None or (required and not uri.path):
        shape = "<path>" if required else "[<prefix>]"
        raise InvalidURI(f"invalid URI {text!r}: expected lakefs://<repository>/<ref>/{shape}")
    return uri


def same_repo(*uris: URI) -> str:
    """The one repository all the URIs name."""
    names = {u.repo for u in uris}
    if len(names) != 1:
        raise InvalidArgument(f"the URIs name different repositories: {', '.join(sorted(names))}")
    return uris[0].repo


def parse_metadata(pairs: list[str] | None) -> dict[str, str]:
    """``key=value`` options into a mapping."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise InvalidArgument(f"metadata {pair!r} is not key=value")
        out[key] = value
    return out


def local_error(exc: OSError, path: str, doing: str) -> LakectlError:
    """A local file problem as one of our errors (the CLI is the edge that touches local files)."""
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return NotFound(f"cannot {doing} {path!r}: {reason}", path=path)
    return InvalidArgument(f"cannot {doing} {path!r}: {reason}", path=path)


def read_input(path: str) -> bytes:
    """The bytes of a local file, or of standard input for ``-``; a local error says which."""
    try:
        if path == "-":
            return typer.get_binary_stream("stdin").read()
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise local_error(exc, path, "read") from exc
