"""History: ``lakectl commit``, ``lakectl log`` and ``lakectl show commit``."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, more, noun, parse_metadata, ref_uri, since_time, split_list
from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    from lakectl.cli.graph import Row

show_app = noun("Show a commit.")


def commit(
    branch: Annotated[str, typer.Argument(help="lakefs://<repository>/<branch>", show_default=False)],
    message: Annotated[
        str, typer.Option("--message", "-m", help="Commit message (required unless --allow-empty-message).")
    ] = "",
    meta: Annotated[
        list[str] | None, typer.Option("--meta", help="Metadata key=value to record; repeatable.")
    ] = None,
    allow_empty: Annotated[
        bool, typer.Option("--allow-empty", help="Commit even when nothing is staged.")
    ] = False,
    allow_empty_message: Annotated[
        bool, typer.Option("--allow-empty-message", help="Allow a commit with an empty message.")
    ] = False,
    prefix: Annotated[
        list[str] | None,
        typer.Option(
            "--prefix",
            help="Commit only the staged changes under this path prefix; repeatable. The rest stays staged.",
        ),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Commit the staged changes of a branch, atomically.

    With --prefix, a partial commit: only the changes under the prefixes are committed, and
    everything else staged on the branch stays staged, untouched (writers staging elsewhere
    meanwhile lose nothing).

    The committer is $LAKECTL_COMMITTER, else `user.name` from ~/.lakectl.yaml, else the login name.
    """
    uri = ref_uri(branch)
    assert uri.ref is not None
    c = backend().commit(
        uri.repo, uri.ref, message, parse_metadata(meta), allow_empty, allow_empty_message, prefix or ()
    )
    render.emit(c.to_dict(), json_, render.commit)


# -- log's flags, named so that the command reads as its steps -------------------------------

LogRef = Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>", show_default=False)]
LogAmount = Annotated[
    int,
    typer.Option(
        "--amount",
        "-n",
        help="Show at most N commits (0, the default: all). When more follow, a note on stderr "
        "says how to ask for the next page.",
        min=0,
    ),
]
LogAfter = Annotated[
    str,
    typer.Option(
        "--after",
        help="Show the commits after this one (pagination: the id of the last commit of the page before).",
    ),
]
Limit = Annotated[
    bool,
    typer.Option("--limit", help="Show just --amount commits, without asking whether more follow (no note)."),
]
Since = Annotated[
    str,
    typer.Option(
        "--since",
        help="Only commits created at or after this time: an RFC 3339 date-time, or as git reads it "
        "(yesterday, 2.weeks, '3 days ago').",
    ),
]
StopAt = Annotated[
    str, typer.Option("--stop-at", help="A ref whose commit is the last one shown (included).")
]
SinceCommit = Annotated[
    str,
    typer.Option(
        "--since-commit",
        help="Only the commits this ref's commit does not reach (git's FROM..REF).",
        metavar="FROM",
    ),
]
FirstParent = Annotated[
    bool, typer.Option("--first-parent", help="Follow only the first parent of merge commits.")
]
NoMerges = Annotated[bool, typer.Option("--no-merges", help="Leave out merge commits.")]
Objects = Annotated[
    list[str] | None,
    typer.Option(
        "--objects",
        help="Only commits that changed one of these objects: comma-separated, or repeated.",
    ),
]
Prefixes = Annotated[
    list[str] | None,
    typer.Option(
        "--prefixes",
        help="Only commits that changed something under one of these prefixes: comma-separated, or repeated.",
    ),
]
Dot = Annotated[
    bool,
    typer.Option("--dot", help="Print the commit graph in Graphviz dot (lakectl log --dot ... | dot -Tsvg)."),
]
ShowMetaRangeIds = Annotated[
    bool, typer.Option("--show-meta-range-id", help="Also show each commit's meta range id.")
]
OneLine = Annotated[
    bool, typer.Option("--oneline", help="One line a commit: its short id and the first line of its message.")
]
GraphFlag = Annotated[
    bool,
    typer.Option(
        "--graph",
        help="Draw the commit graph beside the log, as git's --graph: merges open a line, lines that "
        "meet join (with --oneline: one line a commit).",
    ),
]


def log(
    ref: LogRef,
    amount: LogAmount = 0,
    after: LogAfter = "",
    limit: Limit = False,
    since: Since = "",
    stop_at: StopAt = "",
    since_commit: SinceCommit = "",
    first_parent: FirstParent = False,
    no_merges: NoMerges = False,
    objects: Objects = None,
    prefixes: Prefixes = None,
    dot: Dot = False,
    show_meta_range_id: ShowMetaRangeIds = False,
    oneline: OneLine = False,
    graph: GraphFlag = False,
    json_: JsonFlag = False,
) -> None:
    """Show the commits reachable from a ref, newest first."""
    uri = ref_uri(ref)
    assert uri.ref is not None
    if sum((dot, json_, oneline)) > 1:
        raise InvalidArgument("give one of --dot, --json and --oneline")
    if graph and (dot or json_):
        raise InvalidArgument("--graph draws the log for people: not with --dot or --json")
    since = since_time(since)
    objs, prefs = split_list(objects, "objects"), split_list(prefixes, "prefixes")
    ask = amount + 1 if amount and not limit else amount or None
    found = iter(
        backend().log(
            uri.repo,
            uri.ref,
            ask,
            first_parent,
            no_merges,
            objs,
            prefs,
            after=after,
            since=since,
            stop_at=stop_at,
            since_commit=since_commit,
        )
    )
    shown: list[str] = []

    def page() -> Iterator[dict[str, Any]]:
        for c in islice(found, amount or None):
            shown.append(c.id)
            yield c.to_dict()

    if graph:
        _render_graph(page(), oneline, show_meta_range_id)
    elif oneline:
        for c in page():
            render.commit_line(c)
    else:
        _render_log(page(), json_, dot, show_meta_range_id)
    if amount and not limit and shown and next(found, None) is not None:
        more(amount, shown[-1])


def _render_log(page: Iterator[dict[str, Any]], json_: bool, dot: bool, show_meta_range_id: bool) -> None:
    """One page of commits as JSON, as a Graphviz graph, or for people."""
    if json_:
        render.print_json(list(page))
    elif dot:
        render.dot(page)
    else:
        # Human output streams: the first commits show before the walk ends.
        for i, c in enumerate(page):
            if i:
                render.line("")
            render.commit(c, show_meta_range_id)


def _render_graph(page: Iterator[dict[str, Any]], oneline: bool, show_meta_range_id: bool) -> None:
    """One page of commits with the graph drawn at their left (:mod:`lakectl.cli.graph`)."""
    from lakectl.cli.graph import Graph

    drawing = Graph()
    between = ""
    for i, c in enumerate(page):
        row = drawing.add(c["id"], c["parents"])
        if i and not oneline:
            render.line(between.rstrip())
        for text in row.before:
            render.line(text)
        if oneline:
            render.commit_line(c, row.prefix)
            for text in row.after:
                render.line(text)
        else:
            render.commit(c, show_meta_range_id, _margins(row))
        between = row.continuation


def _margins(row: Row) -> Iterator[str]:
    """The graph beside each line of a commit's full form: its row, its forks, then its lines
    passing by, all as wide."""
    width = max(len(row.prefix), len(row.continuation), *(len(a) + 1 for a in row.after))
    yield row.prefix.ljust(width)
    for text in row.after:
        yield text.ljust(width)
    while True:
        yield row.continuation.ljust(width)


@show_app.command("commit")
def show_commit(
    ref: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>", show_default=False)],
    show_meta_range_id: Annotated[
        bool, typer.Option("--show-meta-range-id", help="Also print the commit's meta range ID.")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Show one commit: id, parents, committer, date, message and metadata (JSON: everything)."""
    uri = ref_uri(ref)
    assert uri.ref is not None
    data = backend().get_commit(uri.repo, uri.ref).to_dict()
    render.emit(data, json_, lambda d: render.commit_full(d, show_meta_range_id))
