"""``lakectl config``: write the credentials and server endpoint to the configuration file, as lakeFS's."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag
from lakectl.errors import InvalidArgument

# (key in the file, prompt): lakeFS's keys, prompts and their order.
FIELDS = (
    ("credentials.access_key_id", "Access key ID"),
    ("credentials.secret_access_key", "Secret access key"),
    ("server.endpoint_url", "Server endpoint URL"),
)
SECRET = "credentials.secret_access_key"
MAX_VALUE_BYTES = 2048


def configure(
    access_key_id: Annotated[
        str | None, typer.Option("--access-key-id", help="The access key ID.", show_default=False)
    ] = None,
    secret_access_key: Annotated[
        str | None,
        typer.Option(
            "--secret-access-key",
            help="The secret access key (other users of the machine may see a command line: "
            "prefer --stdin in scripts).",
            show_default=False,
        ),
    ] = None,
    endpoint_url: Annotated[
        str | None,
        typer.Option(
            "--endpoint-url", help="The server's URL, e.g. http://localhost:8000.", show_default=False
        ),
    ] = None,
    stdin: Annotated[
        bool,
        typer.Option(
            "--stdin",
            help="Read the values not given as options from standard input, one per line, in the "
            "order of the prompts (access key ID, secret access key, endpoint URL).",
        ),
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Create or update the configuration file: credentials and server endpoint URL.

    On a terminal, prompts for the access key ID, the secret access key and the server endpoint
    URL, as lakeFS's lakectl config does (Enter keeps the current value), for the values not
    given as options. Elsewhere it never waits for input: it takes the options and, with
    --stdin, lines of standard input; values given neither way keep what the file holds, and
    with no value given at all it refuses (exit 2). Writes ~/.lakectl.yaml (or $LAKECTL_CONFIG,
    or the file of lakectl -c) in lakeFS's layout (credentials.access_key_id,
    credentials.secret_access_key, server.endpoint_url), keeping its other keys, readable by
    its owner only.
    """
    from lakectl import config

    path = config.config_path()
    current = _current(config)
    given = {
        key: value
        for (key, _), value in zip(FIELDS, (access_key_id, secret_access_key, endpoint_url), strict=True)
        if value is not None
    }
    for key, value in given.items():
        _check(key, value)
    if stdin:
        given.update(_read_stdin([key for key, _ in FIELDS if key not in given]))
    missing = [field for field in FIELDS if field[0] not in given]
    if missing and _interactive():
        typer.echo(f"Config file {path} will be used", err=True)
        for key, label in missing:
            given[key] = _prompt(key, label, current.get(key))
    elif missing and not given:
        raise InvalidArgument(
            "standard input is not a terminal: give --access-key-id, --secret-access-key and "
            "--endpoint-url, or --stdin with those values one per line"
        )
    written = config.write(given)
    values = {**current, **given}
    result = {
        "config_file": written,
        "access_key_id": values.get("credentials.access_key_id"),
        "endpoint_url": values.get("server.endpoint_url"),
    }
    render.emit(result, json_, _human)


def _current(config: Any) -> dict[str, str]:
    """The values the file holds now (an unreadable file is refused before anything is asked)."""
    out: dict[str, str] = {}
    for key, _ in FIELDS:
        value = config.get(key)
        if value is not None:
            out[key] = str(value)
    return out


def _interactive() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # closed or replaced standard input
        return False


def _check(key: str, value: str) -> str:
    from lakectl.core.limits import check_name

    what = _what(key)
    if not value.strip():
        raise InvalidArgument(f"the {what} must not be empty")
    check_name(value, what, MAX_VALUE_BYTES)
    if key == "server.endpoint_url":
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(value)
        except ValueError as e:
            raise InvalidArgument(f"invalid server endpoint URL {value!r}: {e}") from e
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidArgument(
                f"invalid server endpoint URL {value!r}: expected http(s)://host[:port][/api/v1]"
            )
    return value


def _what(key: str) -> str:
    """The value's name in a message: the prompt's, with only its first letter lowered."""
    label = next(label for k, label in FIELDS if k == key)
    return label[0].lower() + label[1:]


def _read_stdin(keys: list[str]) -> dict[str, str]:
    stream = typer.get_text_stream("stdin")
    out: dict[str, str] = {}
    for key in keys:
        line = stream.readline()
        if not line:
            what = _what(key)
            raise InvalidArgument(f"standard input ended before the {what} (--stdin reads one value a line)")
        out[key] = _check(key, line.rstrip("\r\n"))
    return out


def _prompt(key: str, label: str, default: str | None) -> str:
    secret = key == SECRET
    if secret and default:
        label, default, keep = f"{label} [{'*' * 8}]", "", default  # never show the secret itself
    else:
        keep = None
    while True:
        value = str(typer.prompt(label, default=default, hide_input=secret, err=True, type=str))
        if keep is not None and not value:
            return keep
        try:
            return _check(key, value)
        except InvalidArgument as e:  # ask again, as lakeFS's prompt validates
            typer.echo(f"error: {e.message}", err=True)


def _human(data: dict[str, Any]) -> None:
    render.line(f"Config file {data['config_file']} written")
