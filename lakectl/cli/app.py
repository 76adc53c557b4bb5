"""The ``lakectl`` command: the table of commands, loaded lazily, and the one exit boundary.

Commands raise :class:`~lakectl.errors.LakectlError`; :class:`LakectlGroup` alone turns one
into ``error: <message>`` on stderr (or its JSON on stdout with ``--json``) and the class's
exit code. Usage errors stay typer's (exit 2).

Start-up is part of the interface (``--help`` within 150 ms, ``log`` within 300 ms): a run
imports and builds only the command it executes (the lazy group of click's documentation),
the root help lists the summaries of :data:`COMMANDS` without loading any, and nothing here
imports rich, pyarrow or the core beyond :mod:`lakectl.errors`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main
from typer.core import TyperGroup

from lakectl import __version__
from lakectl.cli import params, render
from lakectl.cli.common import JSON_KEY, close_backend
from lakectl.errors import LakectlError

if TYPE_CHECKING:
    from typer._click import Command, Context

HELP_NAMES = ["-h", "--help"]

COMMANDS: dict[str, tuple[str, str]] = {
    # name: ("module:attribute" (a typer.Typer sub-app or a command function), summary)
    "init": ("lakectl.cli.lake:init", "Create the lake and print where it is."),
    "repo": ("lakectl.cli.repo:app", "Create, list, show and delete repositories."),
    "branch": ("lakectl.cli.branch:app", "Create, list, show, delete, reset and revert branches."),
    "tag": ("lakectl.cli.tag:app", "Create, list, show and delete tags."),
    "branch-protect": ("lakectl.cli.protect:app", "Create and manage branch protection rules."),
    "fs": ("lakectl.cli.fs:app", "Upload, download, list, inspect and remove objects."),
    "commit": ("lakectl.cli.commits:commit", "Commit the staged changes of a branch, atomically."),
    "log": ("lakectl.cli.commits:log", "Show the commits reachable from a ref, newest first."),
    "show": ("lakectl.cli.commits:show_app", "Show a commit."),
    "annotate": (
        "lakectl.cli.annotate:annotate",
        "List entries under a path, each with the last commit that changed it.",
    ),
    "diff": ("lakectl.cli.diff:diff", "Show uncommitted changes, or the changes between two refs."),
    "merge": ("lakectl.cli.merge:merge", "Merge a ref into a branch (three-way), creating a merge commit."),
    "cherry-pick": ("lakectl.cli.merge:cherry_pick", "Apply the changes a commit made onto a branch."),
    "revert": ("lakectl.cli.merge:revert", "Undo the changes of commits on a branch, as new commits."),
    "reset": ("lakectl.cli.merge:reset", "Discard uncommitted changes on a branch."),
    "manifest": ("lakectl.cli.manifest:app", "Export and import Keep manifests."),
    "gc": ("lakectl.cli.gc:app", "Garbage collection: retention rules, and collecting blocks nothing needs."),
    "server": ("lakectl.cli.server:app", "Set up and run the lakectl server (lakeFS-compatible REST API)."),
    "fsck": (
        "lakectl.cli.fsck:fsck",
        "Verify the md5 of every block the lake (or one repository) references.",
    ),
    "doctor": (
        "lakectl.cli.fsck:doctor",
        "Check the configuration: the lake opens, or the server answers and accepts the credentials.",
    ),
}


def load_command(name: str) -> Command:
    """Import and build one entry of :data:`COMMANDS`."""
    module_name, _, attribute = COMMANDS[name][0].partition(":")
    target = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(target, typer.Typer):
        single = typer.Typer(rich_markup_mode=None, add_completion=False)
        single.command(name)(target)
        target = single
    command = typer.main.get_command(target)
    command.name = name
    params.install(command, HELP_NAMES)
    return command


class LakectlGroup(TyperGroup):
    """The root command: finds sub-commands lazily and maps our errors to a message and exit code."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        params.install(self, HELP_NAMES)

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Context, formatter: Any) -> None:
        # The summaries, without loading every command (a test checks they match).
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in COMMANDS.items()])

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except LakectlError as exc:
            render.error(exc, bool(ctx.meta.get(JSON_KEY)))
            raise typer.Exit(exc.exit_code) from exc
        finally:
            close_backend()


app = typer.Typer(
    cls=LakectlGroup,
    name="lakectl",
    help="Version control for data lakes: branches, commits, diff and merge over objects of any size.\n\n"
    "Objects are named by URIs lakefs://<repository>/<ref>/<path>, where a ref is a branch, a "
    "tag, a commit id (or a unique prefix of one) or an expression such as main~2 or main^2. "
    "The embedded lake lives in $LAKECTL_HOME (see `lakectl init`). Every command takes --json.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": HELP_NAMES},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lakectl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True),
    ] = False,
) -> None:
    pass


def main() -> None:
    """Console-script entry point."""
    app(prog_name="lakectl")
