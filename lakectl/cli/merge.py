"""Commands that change a branch from other commits or discard its changes: merge,
cherry-pick, revert, reset (``branch revert`` and ``branch reset`` are the same commands)."""

from __future__ import annotations

from typing import Annotated

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, NeverAsks, backend, path_uri, ref_uri, same_repo
from lakectl.errors import InvalidArgument

ParentNumber = Annotated[
    int,
    typer.Option(
        "--parent-number",
        "-m",
        "-p",
        help="For a merge commit (required there): the parent, from 1, the change is taken "
        "relative to; 1 is the branch merged into.",
        min=0,
    ),
]


def merge(
    source: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref> to merge", show_default=False)],
    destination: Annotated[
        str, typer.Argument(help="lakefs://<repository>/<branch> to merge into", show_default=False)
    ],
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            help="How to resolve conflicts: dest-wins or source-wins for every path, or "
            "GLOB=STRATEGY for the paths a glob matches (`**` spans directories). Repeatable; "
            "the first matching glob wins. GLOB=rows:key=COL[,COL][;winner=source|dest] merges "
            "the Parquet tables both sides changed row by row by key, a partition directory at a time; "
            "GLOB=rows takes each table's declared key (lakectl tables declare), and rows alone merges "
            "every declared table so.",
        ),
    ] = None,
    message: Annotated[str | None, typer.Option("--message", "-m", help="Merge commit message.")] = None,
    squash: Annotated[
        bool,
        typer.Option(
            "--squash",
            help="Squash all changes from the source into one commit on the destination, whose one "
            "parent is the destination's last commit (no merge commit).",
        ),
    ] = False,
    spark: Annotated[
        str | None,
        typer.Option(
            "--spark",
            metavar="MASTER",
            help="With a GLOB=rows strategy: merge the tables by rows in a Spark job on this "
            "master (local[2], spark://host:7077), a partition per task: the same result, for tables "
            "one process cannot hold. Needs pyspark and Java, and an embedded lake with its blocks "
            "in one local block directory.",
            show_default=False,
        ),
    ] = None,
    json_: JsonFlag = False,
) -> None:
    """Merge a ref into a branch (three-way), creating a merge commit.

    Paths changed differently on both sides are conflicts: the merge fails (exit 5) and lists
    them, unless a --strategy resolves them. The destination must have no uncommitted changes.
    """
    src, dst = ref_uri(source), ref_uri(destination)
    repo = same_repo(src, dst)
    assert src.ref is not None and dst.ref is not None
    if spark is not None and not any(s == "rows" or "=rows" in s for s in strategy or []):
        raise InvalidArgument("--spark merges tables by rows: add a --strategy 'GLOB=rows:key=COL' (or rows)")
    result = backend().merge(
        repo, src.ref, dst.ref, strategy or [], message, squash=squash, spark_master=spark
    )
    c = result.commit
    if result.changed:
        how = "Squash-merged" if squash else "Merged"
        text = f"{how} {src.ref!r} into {dst.ref!r}: commit {c.id}"
    else:
        text = f"Nothing to merge: {dst.ref!r} already contains {src.ref!r} (commit {c.id})"
    render.emit(
        {"reference": c.id, "changed": result.changed, "commit": c.to_dict(), "message": text},
        json_,
        render.message,
    )


def cherry_pick(
    commit: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref> to apply", show_default=False)],
    branch: Annotated[str, typer.Argument(help="lakefs://<repository>/<branch>", show_default=False)],
    parent_number: ParentNumber = 0,
    json_: JsonFlag = False,
) -> None:
    """Apply the changes a commit made onto a branch.

    The result is a new commit on the branch with the commit's message and metadata. lakeFS's
    argument order: the commit, then the branch. For a merge commit, -m/--parent-number says
    which parent the changes are taken against.
    """
    src, dst = ref_uri(commit), ref_uri(branch)
    repo = same_repo(src, dst)
    assert src.ref is not None and dst.ref is not None
    c = backend().cherry_pick(repo, dst.ref, src.ref, parent_number)
    render.emit(c.to_dict(), json_, render.commit)


def revert(
    branch: Annotated[str, typer.Argument(help="lakefs://<repository>/<branch>", show_default=False)],
    commits: Annotated[
        list[str],
        typer.Argument(
            help="Commits to undo: ids or ref expressions (main~1); in order.", show_default=False
        ),
    ],
    parent_number: ParentNumber = 0,
    yes: NeverAsks = False,
    json_: JsonFlag = False,
) -> None:
    """Undo the changes of commits on a branch, as new commits.

    Each commit given (an id, a prefix of one, or a ref expression such as main~1) is undone
    by one new commit, in the order given. For a merge commit, give -m/--parent-number.
    """
    uri = ref_uri(branch)
    assert uri.ref is not None
    b = backend()
    # Resolve every ref first, as git does: each revert moves the branch that main~1 is relative to.
    ids = [b.get_commit(uri.repo, ref).id for ref in commits]
    done = [b.revert(uri.repo, uri.ref, cid, parent_number).to_dict() for cid in ids]
    render.emit(done, json_, render.commits)


def _reset(repo: str, branch: str, path: str, as_prefix: bool, json_: bool) -> None:
    from lakectl.core.model import ResetKind

    if not path:
        kind = ResetKind.ALL
    else:
        kind = ResetKind.PREFIX if as_prefix else ResetKind.OBJECT
    n = backend().reset(repo, branch, kind, path)
    where = f" under {path!r}" if kind is ResetKind.PREFIX else f" of {path!r}" if path else ""
    render.emit(
        {
            "type": kind.value,
            "path": path,
            "discarded": n,
            "message": f"Discarded {n} uncommitted change(s){where} on {branch!r}",
        },
        json_,
        render.message,
    )


def reset(
    target: Annotated[
        str, typer.Argument(help="lakefs://<repository>/<branch>[/<path>]", show_default=False)
    ],
    prefix: Annotated[
        bool, typer.Option("--prefix", help="Treat the path as a prefix: reset every path under it.")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Discard uncommitted changes on a branch.

    With no path in the URI: every change. With a path: that object's change, or with
    --prefix every change under that prefix. As git reset: committed data is untouched.
    """
    uri = path_uri(target, required=False)
    if prefix and not uri.path:
        raise InvalidArgument("--prefix needs a path in the URI: lakefs://<repository>/<branch>/<prefix>")
    assert uri.ref is not None
    _reset(uri.repo, uri.ref, uri.path, prefix, json_)


def branch_reset(
    branch: Annotated[str, typer.Argument(help="lakefs://<repository>/<branch>", show_default=False)],
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Reset only the paths under this prefix.")
    ] = None,
    object_: Annotated[str | None, typer.Option("--object", help="Reset only this object.")] = None,
    yes: NeverAsks = False,
    json_: JsonFlag = False,
) -> None:
    """Discard uncommitted changes on a branch.

    Every change, or only those under --prefix, or only the one of --object.
    """
    uri = ref_uri(branch)
    assert uri.ref is not None
    if prefix is not None and object_ is not None:
        raise InvalidArgument("give --prefix or --object, not both")
    if prefix is not None and not prefix:
        raise InvalidArgument("--prefix must not be empty (omit it to reset everything)")
    if object_ is not None and not object_:
        raise InvalidArgument("--object must not be empty")
    _reset(uri.repo, uri.ref, prefix or object_ or "", prefix is not None, json_)
