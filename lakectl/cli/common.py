"""What every command shares: the ``--json`` option, the backend of this run, URI parsing."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from itertools import islice
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from lakectl.cli import options
from lakectl.errors import InvalidArgument, InvalidURI, LakectlError, NotFound

if TYPE_CHECKING:
    from lakectl.client import Backend
    from lakectl.core.uri import URI

T = TypeVar("T")

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


YesFlag = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
NeverAsks = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Accepted as lakeFS's lakectl takes it; this command does not ask."),
]


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` on the terminal unless ``yes`` (exit 1 when declined). A stdin that is not
    a terminal (a script, a CI step, a pipe) is never waited on: refused at once (exit 2)."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise InvalidArgument(
            f"{question.rstrip('?')}: confirmation needed, and stdin is not a terminal to ask on: "
            "pass -y (--yes) to confirm"
        )
    typer.confirm(question, abort=True, err=True)


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

ServerConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--server-config",
        help="Work on the lake this server configuration file describes (its database and "
        "blockstore), directly rather than through a server: maintenance from a host that "
        "reaches both.",
        show_default=False,
    ),
]


def backend() -> Backend:
    """The backend of this invocation, created on first use (closed by the app on exit)."""
    global _backend
    if _backend is None:
        from lakectl.client import get_backend

        _backend = get_backend()
        endpoint = getattr(_backend, "endpoint", None)
        options.info("lake: %s", f"the lakectl server at {endpoint}" if endpoint else "embedded")
    return _backend


def backend_for(server_config: str | None) -> Backend:
    """:func:`backend`; with ``server_config``, the lake that server configuration describes,
    opened in this process by the server package (handed over by name at run time, as ``lakectl
    server`` does: the CLI never imports it otherwise)."""
    global _backend
    if server_config is None:
        return backend()
    if not server_config:
        raise InvalidArgument("--server-config needs a file name")
    if _backend is None:
        import importlib

        from lakectl.client.local import LocalBackend

        maintenance = importlib.import_module("server.main")
        _backend = LocalBackend(opener=lambda: maintenance.open_configured(server_config))
        options.info("lake: the one %s describes", server_config)
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


# -- lakeFS paging and list flags -----------------------------------------------------------

Amount = Annotated[
    int,
    typer.Option(
        "--amount",
        help="How many results to show (0, the default: all). When more follow, a note on stderr "
        "says how to ask for the next page.",
        min=0,
    ),
]
After = Annotated[
    str,
    typer.Option(
        "--after", help="Show the results after this one (pagination: the last result of the page before)."
    ),
]


def paged(
    fetch: Callable[[int | None], Iterable[T]], amount: int, key: Callable[[T], str]
) -> tuple[list[T], str]:
    """One page of a list command: ``fetch(n)`` gives at most ``n`` results (None: all); with an
    ``amount`` one more is fetched to learn whether more follow. Returns the page and the offset
    to continue after ("" when nothing follows), as lakeFS's ``next_offset``."""
    if not amount:
        return list(fetch(None)), ""
    found = list(islice(fetch(amount + 1), amount + 1))
    return found[:amount], key(found[amount - 1]) if len(found) > amount else ""


def more(amount: int, next_offset: str) -> None:
    """The note lakeFS's lakectl prints under a page that has more after it."""
    if next_offset:
        from lakectl.cli import render

        render.note(f'for more results run with --amount {amount} --after "{next_offset}"')


def split_list(values: list[str] | None, what: str) -> list[str]:
    """A lakeFS string-slice flag: repeated, comma-separated, or both (CSV, so a quoted value
    may hold a comma); an empty item is refused, as lakeFS refuses it."""
    import csv

    out: list[str] = []
    for value in values or []:
        try:
            items = next(csv.reader([value]), [""])
        except csv.Error as exc:
            raise InvalidArgument(f"invalid {what} list {value!r}: {exc}") from exc
        if not items or any(not item for item in items):
            raise InvalidArgument(f"the {what} list holds an empty item: {value!r}")
        out.extend(items)
    return out


# -- times as git reads them ------------------------------------------------------------------

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_UNITS.update({"month": 30 * 86400, "year": 365 * 86400})
_RELATIVE = re.compile(
    r"(\d+)[\s._]*(second|minute|hour|day|week|month|year)s?(?:[\s._]+ago)?", re.IGNORECASE
)


def since_time(text: str, now: float | None = None) -> str:
    """A ``--since`` time as the API takes it (RFC 3339): an RFC 3339 date-time as it is, or one
    of git's relative forms, counted back from ``now``: ``now``, ``today`` (midnight here),
    ``yesterday`` (this time yesterday), ``2.weeks``, ``3 days ago`` (a month is 30 days, a year
    365). ``""`` stays ``""``; anything else is ``InvalidArgument``."""
    import datetime as dt
    import time

    text = text.strip()
    if not text:
        return ""
    try:
        dt.datetime.fromisoformat(text)
        return text
    except ValueError:
        pass
    clock = time.time() if now is None else now
    word = text.lower()
    found = _RELATIVE.fullmatch(word)
    if word == "today":
        local = dt.datetime.fromtimestamp(clock).astimezone()
        when = local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    elif word in ("now", "yesterday") or found:
        back = 0 if word == "now" else 86400 if word == "yesterday" else 0
        if found:
            back = int(found.group(1)) * _UNITS[found.group(2).lower()]
        when = clock - back
    else:
        raise InvalidArgument(
            f"invalid time {text[:64]!r}: an RFC 3339 date-time (2024-05-01T12:00:00Z) or as git "
            "reads it (yesterday, 2.weeks, 3 days ago)"
        )
    return dt.datetime.fromtimestamp(when, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
