"""``lakectl journal``: switch the lake's journal on or off, and read it (``tail``, ``tail --follow``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, noun, repo_uri

app = noun("The lake's journal: every mutation, who made it, in order.")


@app.command("enable")
def enable(
    reads: Annotated[
        bool | None,
        typer.Option(
            "--reads/--no-reads",
            help="Also record every object read (who read which object at which ref), or stop. "
            "Default: as it is (off for a new journal).",
            show_default=False,
        ),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Switch the journal on for the lake: from now on every mutation is recorded.

    Repositories, branches and tags created or deleted, objects written or deleted, commits,
    merges, resets, reverts and cherry-picks, each with the client that made it. Idempotent. A
    new lake has its journal on already (`lakectl journal disable` switches it off). A server
    already running elsewhere over the same lake journals from its next start.

    With --reads, every object read is recorded too (journal.reads): fs cat, fs download, the
    REST and S3 reads and presigned URLs, one `read-object` entry each, with the reader, the ref
    as asked, the commit it resolved to and any byte range. --no-reads stops it.
    """
    setting = backend().journal_enable(reads)
    render.emit(setting, json_, _enabled)


def _enabled(d: dict[str, Any]) -> None:
    reads = ", reads audited" if d.get("reads") else ""
    render.line(f"journal enabled since {render.when(d['since'])}{reads}")


@app.command("disable")
def disable(json_: JsonFlag = False) -> None:
    """Switch the journal off for the lake: from now on mutations are not recorded.

    A new lake has its journal on. Off, what was recorded stays readable, but the lake's
    metadata can no longer be rebuilt from the blocks (`lakectl admin rebuild --from-journal`)
    once lost. Idempotent. A server already running elsewhere over the same lake stops
    journalling at its next start; `lakectl journal enable` switches it on again.
    """
    setting = backend().journal_disable()
    render.emit(setting, json_, lambda d: render.line("journal disabled"))


@app.command("compact")
def compact(json_: JsonFlag = False) -> None:
    """Rewrite the sealed journal without the entries a rebuild no longer needs.

    Dropped: every entry of a repository up to its deletion; staged writes, deletes and resets
    of a branch up to its deletion; each setting but the last of its key; each of a server's
    auth records (users, groups, policies, access keys) but the last of its key, and that one
    too when it deletes the record. Commits, branches and tags stay, and every entry keeps its
    logical timestamp (the journal then has gaps). The audit trail of what was dropped is gone:
    compaction runs only when asked.
    """
    done = backend().journal_compact()
    render.emit(
        done,
        json_,
        lambda d: render.line(
            f"kept {d['entries']} entries in {d['batches']} batches, dropped {d['dropped']}"
        ),
    )


@app.command("tail")
def tail(
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing entries as they are recorded (Ctrl-C stops)."),
    ] = False,
    repo: Annotated[
        str | None,
        typer.Option(
            "--repo",
            metavar="lakefs://<repository>",
            help="Only this repository's entries.",
            show_default=False,
        ),
    ] = None,
    amount: Annotated[
        int, typer.Option("--amount", "-n", help="How many of the last entries to show.", min=1)
    ] = 20,
    json_: JsonFlag = False,
) -> None:
    """Show the last entries of the lake's journal, oldest first.

    Each entry: its logical timestamp (strictly increasing in the lake), the time, the client
    (user) that made the change, the repository, the event type and its payload. --json prints
    a list of entries; with --follow, one entry per line (JSON lines) as they are recorded.
    """
    name = repo_uri(repo) if repo is not None else ""
    found = backend().journal_tail(name, amount)
    if not follow:
        render.emit(found, json_, render.journal)
        if not found and not json_:
            render.note(
                "no journal entries (the journal records mutations once `lakectl journal enable` ran)"
            )
        return
    for entry in found:
        _one(entry, json_)
    after = int(found[-1]["logical_timestamp"]) if found else 0
    for entry in backend().journal_follow(name, after):
        _one(entry, json_)


def _one(entry: dict[str, Any], as_json: bool) -> None:
    if as_json:
        render.json_line(entry)
    else:
        render.journal_line(entry)
