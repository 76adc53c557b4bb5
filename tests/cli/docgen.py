"""The command reference of docs/cli.md, generated from the CLI itself.

``python -m tests.cli.docgen`` prints the "Commands" reference (everything after the command
table); ``python -m tests.cli.docgen --write`` replaces it at the end of docs/cli.md after a
change of help text. The docs test uses :func:`commands` to walk every command.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
import typer.main

from lakectl.cli.app import HELP_NAMES, app


def commands() -> Iterator[tuple[str, Any, typer.Context]]:
    """``("lakectl repo create", command, context)`` for every group and command, depth first."""
    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="lakectl", help_option_names=HELP_NAMES)
    yield "lakectl", root, ctx
    yield from _walk(root, ctx, "lakectl")


def _walk(group: Any, ctx: typer.Context, path: str) -> Iterator[tuple[str, Any, typer.Context]]:
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        sub_ctx = typer.Context(sub, info_name=name, parent=ctx)
        yield f"{path} {name}", sub, sub_ctx
        if hasattr(sub, "list_commands"):
            yield from _walk(sub, sub_ctx, f"{path} {name}")


def options(command: Any, ctx: typer.Context) -> list[tuple[str, str]]:
    """The (names, help) rows of a command's arguments and options, help left out."""
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is not None and param.name != "help":
            rows.append(record)
    return rows


def usage(command: Any, ctx: typer.Context) -> str:
    return str(command.get_usage(ctx)).removeprefix("Usage: ")


def reference() -> str:
    out: list[str] = []
    for path, command, ctx in commands():
        if path == "lakectl":
            continue
        rows = options(command, ctx)
        if hasattr(command, "list_commands"):
            out.append(f"## `{path}`\n\n{command.help.strip()}\n")
            if not rows:
                continue
            # A group that is also a command (``lakectl import --from ...``): its options too.
            out.append(f"```\n{usage(command, ctx)}\n```\n")
        else:
            out.append(f"### `{path}`\n\n{command.help.strip()}\n\n```\n{usage(command, ctx)}\n```\n")
        if rows:
            out.append("| argument / option | meaning |\n|---|---|")
            for names, text in rows:
                text = re.sub(r"(lakefs://[^\s,;)]*[^\s,;).])", r"`\1`", text.replace("|", "\\|"))
                out.append(f"| `{names}` | {text} |")
            out.append("")
    return "\n".join(out)


def write(path: Path) -> None:
    """Replace the reference at the end of ``path`` (from its first ``### `lakectl `` heading)."""
    text = path.read_text()
    start = text.index("### `lakectl ")
    path.write_text(text[:start] + reference().strip() + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write(Path(__file__).resolve().parents[2] / "docs" / "cli.md")
    else:
        print(reference())
