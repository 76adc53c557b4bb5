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

import copy
import gc
import importlib
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main
from typer.core import TyperGroup

from lakectl import __version__
from lakectl.cli import options, params, render
from lakectl.cli.common import JSON_KEY, close_backend
from lakectl.errors import LakectlError

if TYPE_CHECKING:
    from typer._click import Command, Context

HELP_NAMES = ["-h", "--help"]
BROKEN_PIPE = 141
"""Exit status when stdout is closed before the output is written: 128 + SIGPIPE."""

COMMANDS: dict[str, tuple[str, str]] = {
    # name: ("module:attribute" (a typer.Typer sub-app or a command function), summary)
    "init": ("lakectl.cli.lake:init", "Create the lake and print where it is."),
    "repo": ("lakectl.cli.repo:app", "Create, list, show and delete repositories."),
    "branch": ("lakectl.cli.branch:app", "Create, list, show, delete, reset and revert branches."),
    "tag": ("lakectl.cli.tag:app", "Create, list, show and delete tags."),
    "branch-protect": ("lakectl.cli.protect:app", "Create and manage branch protection rules."),
    "pr": ("lakectl.cli.pr:app", "Open, review and merge pull requests."),
    "actions": ("lakectl.cli.actions:app", "Runs of action hooks (list, describe); validate action files."),
    "cat-hook-output": ("lakectl.cli.actions:cat_hook_output", "Print the output of one hook run."),
    "fs": ("lakectl.cli.fs:app", "Upload, download, list, inspect and remove objects."),
    "local": (
        "lakectl.cli.local:app",
        "Sync local directories with lakeFS paths: clone, status, commit, pull, checkout.",
    ),
    "commit": ("lakectl.cli.commits:commit", "Commit the staged changes of a branch, atomically."),
    "log": ("lakectl.cli.commits:log", "Show the commits reachable from a ref, newest first."),
    "show": ("lakectl.cli.commits:show_app", "Show a commit."),
    "annotate": (
        "lakectl.cli.annotate:annotate",
        "List entries under a path, each with the last commit that changed it.",
    ),
    "tables": ("lakectl.cli.tables:app", "Declare a table's key once, for diffs, pull requests and merges."),
    "diff": ("lakectl.cli.diff:diff", "Show uncommitted changes, or the changes between two refs."),
    "status": (
        "lakectl.cli.status:status",
        "Show what is uncommitted on a branch or a local working copy, and how far it is from its upstream.",
    ),
    "merge": ("lakectl.cli.merge:merge", "Merge a ref into a branch (three-way), creating a merge commit."),
    "cherry-pick": ("lakectl.cli.merge:cherry_pick", "Apply the changes a commit made onto a branch."),
    "revert": ("lakectl.cli.merge:revert", "Undo the changes of commits on a branch, as new commits."),
    "reset": ("lakectl.cli.merge:reset", "Discard uncommitted changes on a branch."),
    "provenance": (
        "lakectl.cli.provenance:provenance",
        "Show what data was made from (the inputs and code its commits record), or what was made from it.",
    ),
    "manifest": ("lakectl.cli.manifest:app", "Export and import Keep manifests."),
    "import": (
        "lakectl.cli.imports:app",
        "Import objects without copying them: an S3 prefix or a local directory onto a branch.",
    ),
    "refs-dump": (
        "lakectl.cli.refsdump:refs_dump",
        "Store a repository's refs (commits, branches, tags) in the lake and print their manifest.",
    ),
    "refs-restore": (
        "lakectl.cli.refsdump:refs_restore",
        "Restore refs (commits, branches, tags) from a manifest into a bare repository.",
    ),
    "gc": ("lakectl.cli.gc:app", "Garbage collection: retention rules, and collecting blocks nothing needs."),
    "server": ("lakectl.cli.server:app", "Set up and run the lakectl server (lakeFS-compatible REST API)."),
    "ui": ("lakectl.cli.ui:ui", "Serve the web UI over the embedded lake, with a one-time sign-in link."),
    "auth": ("lakectl.cli.auth:app", "Manage a lakectl server's users, access keys, groups and policies."),
    "admin": ("lakectl.cli.admin:app", "Operations on the lake as a whole: rebuild its metadata."),
    "journal": ("lakectl.cli.journal:app", "The lake's journal: every mutation, who made it, in order."),
    "fsck": (
        "lakectl.cli.fsck:fsck",
        "Verify the md5 of every block the lake (or one repository) references.",
    ),
    "doctor": (
        "lakectl.cli.fsck:doctor",
        "Check the configuration: the lake opens, or the server answers and accepts the credentials.",
    ),
    "config": (
        "lakectl.cli.configure:configure",
        "Create or update the configuration file: credentials and server endpoint URL.",
    ),
    "completion": (
        "lakectl.cli.completion:completion",
        "Print a shell completion script (bash, zsh or fish).",
    ),
}


def load_command(name: str, verb: str | None = None) -> Command:
    """Import and build one entry of :data:`COMMANDS`; with ``verb``, the name of one of a
    noun's commands (``fs stat``), that command alone in the noun's group: building each verb's
    parameters (signatures, annotations) costs ``fs`` ~5 ms, paid by every ``fs`` command."""
    module_name, _, attribute = COMMANDS[name][0].partition(":")
    target = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(target, typer.Typer):
        single = typer.Typer(rich_markup_mode=None, add_completion=False)
        single.command(name)(target)
        target = single
    elif verb is not None:
        target = _only(target, verb)
    command = typer.main.get_command(target)
    command.name = name
    params.install(command, HELP_NAMES)
    _complete_uris(command)
    return command


def _only(noun: typer.Typer, verb: str) -> typer.Typer:
    """``noun`` with ``verb`` as its only command, when ``verb`` names one (its sub-groups stay);
    else ``noun`` whole, so that help, usage errors and their suggestions see every command."""
    names = [info.name for info in noun.registered_commands]
    if verb not in names or None in names:
        return noun
    only = copy.copy(noun)
    only.registered_commands = [info for info in noun.registered_commands if info.name == verb]
    return only


def _complete_uris(command: Any) -> None:
    """Give every ``lakefs://`` argument or option (its help names the URI shape) the completion
    of repositories, refs and paths: new commands get it without asking."""
    for param in getattr(command, "params", ()):
        if (getattr(param, "help", None) or "").startswith("lakefs://"):
            param._custom_shell_complete = _complete_uri
    for sub in getattr(command, "commands", {}).values():
        _complete_uris(sub)


def _complete_uri(ctx: Context, param: Any, incomplete: str) -> Any:
    from lakectl.cli.completion import complete_uri

    return complete_uri(ctx, param, incomplete)


class LakectlGroup(TyperGroup):
    """The root command: finds sub-commands lazily and maps our errors to a message and exit code."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        params.install(self, HELP_NAMES)

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        # The word after the command is the verb this run executes: only it is built.
        if args and args[0] in COMMANDS and args[0] not in self.commands and len(args) > 1:
            self.add_command(load_command(args[0], args[1]), args[0])
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.add_command(load_command(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Context, formatter: Any) -> None:
        # The summaries, without loading every command (a test checks they match).
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in COMMANDS.items()])

    def _main_shell_completion(self, ctx_args: Any, prog_name: str, complete_var: str | None = None) -> None:
        # click's protocol (_LAKECTL_COMPLETE=bash_complete, COMP_WORDS, COMP_CWORD), not typer's.
        import os

        instruction = os.environ.get("_LAKECTL_COMPLETE")
        if instruction:
            import sys

            from lakectl.cli.completion import shell_complete

            sys.exit(shell_complete(self, ctx_args, instruction))

    def invoke(self, ctx: Context) -> Any:
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # a closed pipe shows here, inside the boundary, not at exit
            return result
        except LakectlError as exc:
            render.error(exc, bool(ctx.meta.get(JSON_KEY)))
            raise typer.Exit(exc.exit_code) from exc
        except BrokenPipeError:
            # The reader went away (`lakectl fs ls -r ... | head -1`): stop quietly with the
            # status of a program killed by SIGPIPE, as lakeFS's lakectl (Go) and coreutils end.
            _silence_stdout()
            raise typer.Exit(BROKEN_PIPE) from None
        finally:
            close_backend()
            options.reset()


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
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True),
    ] = False,
    config_file: Annotated[
        str | None,
        typer.Option(
            "-c",
            "--config",
            metavar="FILE",
            help="The configuration file (default: $LAKECTL_CONFIG, else ~/.lakectl.yaml); it must "
            "exist, except for `lakectl config`, which writes it.",
            show_default=False,
        ),
    ] = None,
    base_uri: Annotated[
        str,
        typer.Option(
            "--base-uri",
            metavar="URI",
            envvar="LAKECTL_BASE_URI",
            help="Put before every repository, ref or path argument that does not start with "
            "lakefs:// (e.g. --base-uri lakefs://repo makes /main/x lakefs://repo/main/x).",
            show_default=False,
        ),
    ] = "",
    no_color: Annotated[
        bool, typer.Option("--no-color", help="Plain output: no colours or bold (also $NO_COLOR).")
    ] = False,
    log_level: Annotated[
        str,
        typer.Option(
            "--log-level",
            metavar="LEVEL",
            help="Log to stderr from this level: trace, debug, info, warn, error, fatal, panic; "
            "none (the default) logs nothing.",
        ),
    ] = "none",
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format", metavar="FORMAT", help="The logs' format: text, or json (one object a line)."
        ),
    ] = "text",
    log_output: Annotated[
        list[str] | None,
        typer.Option(
            "--log-output",
            metavar="OUTPUT",
            help="Where logs go: - for stdout, else a file appended to (repeatable; default stderr).",
            show_default=False,
        ),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", help="Say what is done on stderr: the configuration read, each server request."
        ),
    ] = False,
) -> None:
    options.apply(
        options.Globals(
            config_file=config_file,
            base_uri=base_uri,
            no_color=no_color,
            log_level=log_level,
            log_format=log_format,
            log_outputs=list(log_output or []),
            verbose=verbose,
        )
    )
    if ctx.invoked_subcommand not in ("config", "doctor"):  # config writes it, doctor reports on it
        from lakectl import config

        config.require()


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush of what is still
    buffered does not fail again on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file descriptor (a test runner's buffer)
        pass


GC_YOUNG_THRESHOLD = 100_000
"""Allocations between two collections of the youngest generation (Python's default: 700).

A command builds its records in bulk (100k uploaded objects, their entries, rows and journal
payload; a listing's pages), and at the default threshold the cyclic collector walks them again
and again while they are built: ~1 s of a 100k-file upload, for cycles that hardly exist in
such data. Collections still run, every 100k allocations, and the older generations at their
usual ratios; a long ``server run`` keeps collecting too."""


def main() -> None:
    """Console-script entry point."""
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    try:
        app(prog_name="lakectl")
    except BrokenPipeError:  # raised outside a command (help text, usage errors)
        _silence_stdout()
        sys.exit(BROKEN_PIPE)
