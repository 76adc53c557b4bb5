"""``lakectl local``: a local directory linked to a lakeFS path, in lakeFS's forms (docs/local.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, YesFlag, backend, confirm, noun, parse_metadata
from lakectl.errors import InvalidArgument

app = noun("Sync local directories with lakeFS paths: clone, status, commit, pull, checkout.")
monitor_app = noun(
    "A daemon watching a local directory (inotify), so that status and commit stat only what changed."
)
app.add_typer(monitor_app, name="monitor")

Directory = Annotated[
    str, typer.Argument(help="The local directory (default: the current one).", show_default=False)
]
Force = Annotated[bool, typer.Option("--force", help="See the command's description.")]
GitIgnore = Annotated[
    bool,
    typer.Option(
        "--gitignore/--no-gitignore",
        help="Update .gitignore file when working in a git repository context.",
    ),
]
Parallelism = Annotated[
    int, typer.Option("--parallelism", "-p", min=1, help="Max concurrent operations to perform.")
]
Presign = Annotated[
    bool,
    typer.Option(
        "--pre-sign/--no-pre-sign",
        help="Accepted as lakeFS's lakectl takes it: data moves by signed block locators either way.",
    ),
]
NoProgress = Annotated[bool, typer.Option("--no-progress", help="No progress bar.")]


def _uri(text: str) -> str:
    from lakectl.cli import options

    return options.absolute(text)


@contextmanager
def _bar(enabled: bool, label: str) -> Iterator[Callable[[int], Callable[[int], None]]]:
    """A factory ``(total) -> advance``: the bar is drawn once the number of files is known."""
    stack: list[Any] = []

    def start(total: int) -> Callable[[int], None]:
        cm = render.progress(total, label, enabled)
        stack.append(cm)
        return cm.__enter__()

    try:
        yield start
    finally:
        for cm in stack:
            cm.__exit__(None, None, None)


def _summary(data: dict[str, Any]) -> None:
    op = data["operation"]
    if data.get("gitignore"):
        render.note(f"Location added to {data['gitignore']}")
    if op == "init":
        render.line(f"Successfully linked local directory '{data['directory']}' with remote '{data['src']}'")
        return
    if op == "commit" and data["commit"] is None:
        render.line("No changes")
        return
    if op == "clone":
        render.line(f"Successfully cloned {data['src']} to {data['directory']}.")
    if data["commit"] is not None:
        render.commit(data["commit"])
    render.line(f"{op.capitalize()} Summary:")
    if not (data["downloaded"] or data["uploaded"] or data["removed"]):
        render.line("No changes")
        return
    render.fields(
        [("Downloaded", data["downloaded"]), ("Uploaded", data["uploaded"]), ("Removed", data["removed"])]
    )


def _summaries(data: list[dict[str, Any]]) -> None:
    for one in data:
        render.line(f"{one['directory']}:")
        _summary(one)


@app.command("init")
def init(
    uri: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>/[<path>]", show_default=False)],
    directory: Directory = ".",
    force: Annotated[
        bool, typer.Option("--force", help="Overwrites if directory already linked to a lakeFS path.")
    ] = False,
    gitignore: GitIgnore = True,
    json_: JsonFlag = False,
) -> None:
    """Set a local directory to sync with a lakeFS path (nothing is downloaded)."""
    from lakectl.client import workcopy

    out = workcopy.init(backend(), _uri(uri), directory, force=force, ignore=gitignore)
    render.emit(out.to_dict(), json_, _summary)


@app.command("clone")
def clone(
    uri: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>/[<path>]", show_default=False)],
    directory: Directory = ".",
    gitignore: GitIgnore = True,
    parallelism: Parallelism = 25,
    presign: Presign = True,
    no_progress: NoProgress = False,
    json_: JsonFlag = False,
) -> None:
    """Clone a path from a lakeFS repository into a new directory (missing or empty)."""
    from lakectl.client import workcopy

    with _bar(not (json_ or no_progress), "cloning") as bar:
        out = workcopy.clone(
            backend(), _uri(uri), directory, ignore=gitignore, parallelism=parallelism, progress=bar
        )
    render.emit(out.to_dict(), json_, _summary)


@app.command("list")
def list_(directory: Directory = "", json_: JsonFlag = False) -> None:
    """Find and list directories that are synced with lakeFS (under the git repository's root when
    no directory is given and the current one is in git)."""
    from lakectl.client import workcopy
    from lakectl.client.workcopy import gitignore

    if not directory:
        directory = gitignore.git_root(".") or "."
    rows = workcopy.list_linked(directory)
    render.emit(
        rows,
        json_,
        lambda data: render.table(
            ["Directory", "Remote URI", "Last synced HEAD"],
            [(r["directory"], r["src"], r["at_head"]) for r in data],
        ),
    )


def _status_human(data: dict[str, Any]) -> None:
    changes = data["changes"]
    if not changes:
        render.line("No diff found.")
        return
    kinds = {"changed": "modified"}
    render.table(
        ["source", "change", "path"],
        [(c["source"], kinds.get(c["type"], c["type"]), c["path"]) for c in changes],
    )


@app.command("status")
def status(
    directory: Directory = ".",
    remote: Annotated[
        bool,
        typer.Option(
            "--remote", help="Also show what the ref gained since the directory's commit (asks the lake)."
        ),
    ] = False,
    local_only: Annotated[
        bool,
        typer.Option(
            "--local", "-l", help="Don't compare against remote changes (the default; lakeFS's flag)."
        ),
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Show modifications (local, and with --remote remote) to the directory and the path it tracks.

    Local changes are computed from the directory and its index alone: only files whose size,
    modification time or inode changed are read again.
    """
    from lakectl.client import workcopy

    if remote and local_only:
        raise InvalidArgument("--remote and --local exclude each other")
    out = workcopy.status(backend, directory, remote=remote)
    render.emit(out.to_dict(), json_, _status_human)


@app.command("commit")
def commit(
    directory: Directory = ".",
    message: Annotated[str, typer.Option("--message", "-m", help="Commit message.")] = "",
    meta: Annotated[
        list[str] | None, typer.Option("--meta", help="Metadata key=value to record; repeatable.")
    ] = None,
    allow_empty_message: Annotated[
        bool, typer.Option("--allow-empty-message", help="Allow a commit with an empty message.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Commit changes even if remote branch includes uncommitted changes external to the "
            "synced path (or the last operation was interrupted).",
        ),
    ] = False,
    parallelism: Parallelism = 25,
    presign: Presign = True,
    no_progress: NoProgress = False,
    json_: JsonFlag = False,
) -> None:
    """Commit changes from local directory to the lakeFS branch it tracks.

    Uploads added and modified files, deletes the objects of removed ones and commits the branch
    (with whatever else is staged under the path). Refused when a changed file was also changed
    on the branch since the directory's commit (pull first), and when the branch holds
    uncommitted changes outside the path (unless --force).
    """
    from lakectl.client import workcopy
    from lakectl.core.limits import MAX_MESSAGE_BYTES, check_metadata, check_text

    metadata = check_metadata(parse_metadata(meta), "commit metadata")
    check_text(message, "commit message", MAX_MESSAGE_BYTES)  # before any file is uploaded
    out = workcopy.commit(
        backend(), directory, message, metadata, allow_empty_message, force=force, parallelism=parallelism
    )
    render.emit(out.to_dict(), json_, _summary)


@app.command("pull")
def pull(
    directory: Directory = ".",
    force: Annotated[bool, typer.Option("--force", help="Reset any uncommitted local change.")] = False,
    parallelism: Parallelism = 25,
    presign: Presign = True,
    no_progress: NoProgress = False,
    json_: JsonFlag = False,
) -> None:
    """Fetch latest changes from lakeFS (refused over uncommitted local changes unless --force)."""
    from lakectl.client import workcopy

    out = workcopy.pull(backend(), directory, force=force, parallelism=parallelism)
    render.emit(out.to_dict(), json_, _summary)


@app.command("checkout")
def checkout(
    directory: Directory = ".",
    ref: Annotated[
        str, typer.Option("--ref", "-r", help="Checkout the given source branch or reference.")
    ] = "",
    all_: Annotated[
        bool,
        typer.Option("--all", help="Checkout given source branch or reference for all linked directories."),
    ] = False,
    yes: YesFlag = False,
    parallelism: Parallelism = 25,
    presign: Presign = True,
    no_progress: NoProgress = False,
    json_: JsonFlag = False,
) -> None:
    """Sync local directory with the remote state: the commit --ref resolves to (default: the one
    it is at), touching only files that differ. Uncommitted local changes are reverted (asks)."""
    from lakectl.client import workcopy
    from lakectl.client.workcopy import gitignore

    if ref and all_:
        raise InvalidArgument("--ref and --all exclude each other")
    if all_:
        top = directory if directory != "." else (gitignore.git_root(".") or ".")
        confirm("the operation will revert all changes in all directories that are linked with lakeFS", yes)
        dirs = [os.path.join(top, r["directory"]) for r in workcopy.list_linked(top)]
        outs = [workcopy.checkout(backend(), d, "", parallelism).to_dict() for d in dirs]
        render.emit(outs, json_, _summaries)
        return
    if workcopy.local_changes(backend(), directory):
        confirm("Uncommitted changes exist, the operation will revert all changes on local directory", yes)
    out = workcopy.checkout(backend(), directory, ref, parallelism)
    render.emit(out.to_dict(), json_, _summary)


def _monitor_human(data: dict[str, Any]) -> None:
    if not data.get("running"):
        again = " (the next command here starts it again)" if data.get("wanted") else ""
        render.line(f"No monitor runs for {data['directory']}{again}")
        return
    state = "started" if data.get("started") else "running"
    watched = data["watched_directories"]
    render.line(f"Monitor {state} for {data['directory']} (pid {data['pid']}, {watched} directories)")
    if data.get("degraded"):
        render.note(f"degraded, every scan walks the whole directory: {data['degraded']}")


def _monitored(directory: str) -> str:
    from lakectl.client import workcopy

    return workcopy.find_root(directory)


@monitor_app.command("start")
def monitor_start(directory: Directory = ".", json_: JsonFlag = False) -> None:
    """Start watching the working copy: status, commit, pull and checkout then stat only the
    paths changed since their last scan, instead of every file.

    The daemon runs until `local monitor stop` or until the directory is removed; a command that
    finds it gone (after a reboot) starts it again. Without it, every command works as before,
    walking the whole directory. Linux only (inotify).
    """
    from lakectl.client.workcopy import monitor

    root = _monitored(directory)
    out = {"directory": root, "running": True, **monitor.start(root)}
    render.emit(out, json_, _monitor_human)


@monitor_app.command("status")
def monitor_status(directory: Directory = ".", json_: JsonFlag = False) -> None:
    """Show whether a monitor watches the working copy (and how many directories), and whether
    it is wanted: started and not stopped since."""
    from lakectl.client.workcopy import monitor

    root = _monitored(directory)
    running = monitor.info(root)
    out = {
        "directory": root,
        "running": running is not None,
        "wanted": monitor.wanted(root),
        **(running or {}),
    }
    render.emit(out, json_, _monitor_human)


@monitor_app.command("stop")
def monitor_stop(directory: Directory = ".", json_: JsonFlag = False) -> None:
    """Stop the working copy's monitor; commands no longer start it (a no-op when none runs)."""
    from lakectl.client.workcopy import monitor

    root = _monitored(directory)
    stopped = monitor.stop(root)
    out = {"directory": root, "running": False, "stopped": stopped}
    render.emit(
        out,
        json_,
        lambda d: render.line(("Monitor stopped for " if stopped else "No monitor ran for ") + root),
    )
