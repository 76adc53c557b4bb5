"""``lakectl diff``: uncommitted changes of a branch, or the changes between two refs."""

from __future__ import annotations

from typing import Annotated

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, ref_uri, same_repo


def diff(
    left: Annotated[
        str,
        typer.Argument(help="lakefs://<repository>/<branch> alone, or the left ref", show_default=False),
    ],
    right: Annotated[
        str | None, typer.Argument(help="lakefs://<repository>/<ref>: the right side", show_default=False)
    ] = None,
    two_way: Annotated[
        bool,
        typer.Option(
            "--two-way", help="Compare the two trees directly, not the right side since their merge base."
        ),
    ] = False,
    prefix: Annotated[str, typer.Option("--prefix", help="Only paths under this prefix.")] = "",
    json_: JsonFlag = False,
) -> None:
    """Show uncommitted changes, or the changes between two refs.

    With one branch: its uncommitted (staged) changes. With two refs the diff is three-dot, as
    in git: the changes on RIGHT since its merge base with LEFT (--two-way: LEFT's tree against
    RIGHT's). A branch there is its last commit (main, or main@); main$ is its staging area,
    uncommitted changes included, as in lakeFS. Lines read "+ added", "- removed", "~ changed".
    """
    lu = ref_uri(left)
    assert lu.ref is not None
    b = backend()
    if right is None:
        if two_way:
            from lakectl.errors import InvalidArgument

            raise InvalidArgument("--two-way compares two refs: give a right ref")
        changes = b.diff_uncommitted(lu.repo, lu.ref, prefix)
    else:
        ru = ref_uri(right)
        assert ru.ref is not None
        changes = list(b.diff_refs(same_repo(lu, ru), lu.ref, ru.ref, two_way, prefix))
    render.emit([c.to_dict() for c in changes], json_, render.changes)
