"""``lakectl diff``: uncommitted changes of a branch, or the changes between two refs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, ref_uri, same_repo
from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    from lakectl.core.uri import URI


# -- diff's arguments and flags, named so that the command reads as its steps ---------------

Left = Annotated[
    str,
    typer.Argument(help="lakefs://<repository>/<branch> alone, or the left ref", show_default=False),
]
Right = Annotated[
    str | None, typer.Argument(help="lakefs://<repository>/<ref>: the right side", show_default=False)
]
TwoWay = Annotated[
    bool,
    typer.Option(
        "--two-way", help="Compare the two trees directly, not the right side since their merge base."
    ),
]
DiffSince = Annotated[
    str,
    typer.Option(
        "--since",
        metavar="FROM",
        help="With one ref: what it changed after FROM's commit (a ref; an error unless it is an ancestor).",
    ),
]
TablePath = Annotated[
    str | None,
    typer.Argument(help="With --table: the table (a Parquet or CSV object, or a prefix)", show_default=False),
]
Prefix = Annotated[str, typer.Option("--prefix", help="Only paths under this prefix.")]
Stat = Annotated[
    bool,
    typer.Option(
        "--stat",
        help="Each changed path with its size, then how many were added, removed and changed (git's --stat).",
    ),
]
Table = Annotated[
    bool,
    typer.Option(
        "--table",
        help="Compare the table at PATH row by row (three-dot as the diff, or --two-way): schema changes, "
        "row counts, rows added, removed and changed, per partition.",
    ),
]
Key = Annotated[
    str,
    typer.Option(
        "--key",
        help="With --table: key columns, comma-separated (default: the key the repository declares "
        "for the table with `lakectl tables declare`; none declared: a multiset diff of whole rows).",
    ),
]
NoKey = Annotated[
    bool,
    typer.Option(
        "--no-key", help="With --table: compare whole rows as multisets, even when a key is declared."
    ),
]
ROW_PAGE = 1000
"""Row changes one page of ``diff --table --amount 0`` asks for."""
RowAmount = Annotated[
    int,
    typer.Option(
        "--amount",
        min=0,
        max=1000,
        help="With --table: row changes to show (0: all of them, page after page).",
    ),
]
RowAfter = Annotated[
    str,
    typer.Option("--after", help="With --table: the row changes after this offset (next_offset)."),
]
Spark = Annotated[
    str | None,
    typer.Option(
        "--spark",
        metavar="MASTER",
        help="With --table: compute the diff in a Spark job on this master (local[2], "
        "spark://host:7077): the same answer, for tables one process cannot hold. Needs pyspark "
        "and Java, and an embedded lake with its blocks in one local block directory.",
        show_default=False,
    ),
]


def diff(
    left: Left,
    right: Right = None,
    two_way: TwoWay = False,
    path: TablePath = None,
    prefix: Prefix = "",
    table: Table = False,
    key: Key = "",
    no_key: NoKey = False,
    amount: RowAmount = 100,
    after: RowAfter = "",
    spark: Spark = None,
    since: DiffSince = "",
    stat: Stat = False,
    json_: JsonFlag = False,
) -> None:
    """Show uncommitted changes, or the changes between two refs.

    With one branch: its uncommitted (staged) changes. With two refs the diff is three-dot, as
    in git: the changes on RIGHT since its merge base with LEFT (--two-way: LEFT's tree against
    RIGHT's). A branch there is its last commit (main, or main@); main$ is its staging area,
    uncommitted changes included, as in lakeFS. Lines read "+ added", "- removed", "~ changed".

    With --table LEFT RIGHT PATH: what changed inside the table at PATH, three-dot as well (on
    RIGHT since its merge base with LEFT; --two-way: LEFT's tree to RIGHT's). Only objects whose
    data differs are read.

    With --since FROM and one ref: the changes of the ref's commits after FROM's (FROM must be
    an ancestor of the ref).
    """
    lu = ref_uri(left)
    assert lu.ref is not None
    if since:
        _since(
            lu,
            since,
            prefix,
            json_,
            right is not None or two_way or table or path is not None or spark is not None,
            stat,
        )
        return
    b = backend()
    if table or path is not None:
        if stat:
            raise InvalidArgument("--stat counts changed objects: not with --table")
        if no_key and key:
            raise InvalidArgument("--key and --no-key: give one")
        _table(lu, right, path, table, (key, no_key), amount, after, spark, json_, two_way)
        return
    if spark is not None:
        raise InvalidArgument("--spark computes a table diff: add --table")
    if right is None:
        if two_way:
            raise InvalidArgument("--two-way compares two refs: give a right ref")
        changes = b.diff_uncommitted(lu.repo, lu.ref, prefix)
    else:
        ru = ref_uri(right)
        assert ru.ref is not None
        changes = list(b.diff_refs(same_repo(lu, ru), lu.ref, ru.ref, two_way, prefix))
    _emit(changes, json_, stat)


def _emit(changes: list[Any], json_: bool, stat: bool) -> None:
    """The changes, one a line, or with ``stat`` each with its size and the counts."""
    data = [c.to_dict() for c in changes]
    if stat:
        counts = {kind: sum(1 for c in data if c["type"] == kind) for kind in ("added", "removed", "changed")}
        render.emit({"changes": data, **counts}, json_, render.diff_stat)
    else:
        render.emit(data, json_, render.changes)


def _since(lu: URI, since: str, prefix: str, json_: bool, more: bool, stat: bool) -> None:
    """``diff --since FROM REF``: the changes in REF's history after FROM's commit."""
    if more:
        raise InvalidArgument("--since FROM takes one ref, without --two-way, --table or --spark")
    assert lu.ref is not None
    changes = list(backend().diff_since(lu.repo, since, lu.ref, prefix))
    _emit(changes, json_, stat)


def _table(
    lu: URI,
    right: str | None,
    path: str | None,
    table: bool,
    keying: tuple[str, bool],
    amount: int,
    after: str,
    spark: str | None,
    json_: bool,
    two_way: bool,
) -> None:
    if not table:
        raise InvalidArgument("a third argument names a table: add --table")
    if right is None or path is None:
        raise InvalidArgument(
            "--table compares a table between two refs: give LEFT, RIGHT and the table's PATH"
        )
    ru = ref_uri(right)
    assert lu.ref is not None and ru.ref is not None
    key, no_key = keying
    columns = [c.strip() for c in key.split(",") if c.strip()]
    repo = same_repo(lu, ru)
    b = backend()
    found = b.diff_table(
        repo, lu.ref, ru.ref, path, columns, amount or ROW_PAGE, after, spark, two_way, not no_key
    )
    rows = list(found["rows"])
    while amount == 0 and found["next_offset"]:  # all of them: the pages that follow
        found = b.diff_table(
            repo, lu.ref, ru.ref, path, columns, ROW_PAGE, found["next_offset"], spark, two_way, not no_key
        )
        rows += found["rows"]
    render.emit({**found, "rows": rows}, json_, render.table_diff)
