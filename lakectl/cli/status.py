"""``lakectl status``: git's status for a branch or a local working copy: what is uncommitted, and
how many commits it is ahead of and behind its upstream."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, ref_uri
from lakectl.errors import InvalidArgument

Target = Annotated[
    str | None,
    typer.Argument(
        help="lakefs://<repository>/<branch>; none: the local working copy in this directory",
        show_default=False,
    ),
]
Upstream = Annotated[
    str,
    typer.Option(
        "--upstream",
        help="With a branch: the ref to count commits ahead and behind against (default: the "
        "repository's default branch).",
    ),
]


def status(target: Target = None, upstream: Upstream = "", json_: JsonFlag = False) -> None:
    """Show what is uncommitted on a branch or a local working copy, and how far it is from its upstream.

    A branch's upstream is the repository's default branch (--upstream: another ref): the commits
    it has that the upstream lacks (ahead) and the other way (behind). A working copy's upstream is
    the ref it tracks: the commits made there since the directory's (behind)."""
    if target is None:
        if upstream:
            raise InvalidArgument(
                "--upstream is for a branch: a working copy's upstream is the ref it tracks"
            )
        data = _working_copy()
    else:
        data = _branch(target, upstream)
    render.emit(data, json_, _human)


def _commits(repo: str, ref: str, since: str) -> int:
    """How many commits ``ref`` reaches that ``since`` does not (git's ``since..ref``)."""
    return sum(1 for _ in backend().log(repo, ref, since_commit=since))


def _branch(target: str, upstream: str) -> dict[str, Any]:
    uri = ref_uri(target)
    assert uri.ref is not None
    b = backend()
    branch = b.get_branch(uri.repo, uri.ref)  # NotFound for a tag or a commit: no staging area
    upstream = upstream or b.get_repo(uri.repo).default_branch
    even = upstream == branch.name
    return {
        "kind": "branch",
        "repository": uri.repo,
        "branch": branch.name,
        "commit_id": branch.commit_id,
        "upstream": upstream,
        "ahead": None if even else _commits(uri.repo, branch.name, upstream),
        "behind": None if even else _commits(uri.repo, upstream, branch.name),
        "changes": [c.to_dict() for c in b.diff_uncommitted(uri.repo, branch.name)],
    }


def _working_copy() -> dict[str, Any]:
    from lakectl.client import workcopy
    from lakectl.core.uri import parse_uri

    found = workcopy.status(backend, ".")
    src = parse_uri(found.src)
    assert src.ref is not None
    return {
        "kind": "local",
        "directory": found.directory,
        "repository": src.repo,
        "src": found.src,
        "commit_id": found.at_head,
        "upstream": src.ref,
        "ahead": 0,
        "behind": _commits(src.repo, src.ref, found.at_head) if found.at_head else 0,
        "changes": [{k: v for k, v in c.items() if k != "source"} for c in found.changes()],
    }


def _human(data: dict[str, Any]) -> None:
    short = (data["commit_id"] or "")[:12]
    if data["kind"] == "branch":
        render.line(f"On branch {data['branch']} of lakefs://{data['repository']} (at {short})")
    else:
        render.line(f"Working copy {data['directory']} of {data['src']} (at {short})")
    ahead, behind, upstream = data["ahead"], data["behind"], data["upstream"]
    if ahead is not None and behind is not None:
        if ahead or behind:
            parts = [f"{ahead} {_commit_noun(ahead)} ahead of {upstream}"] if ahead else []
            parts += [f"{behind} {_commit_noun(behind)} behind {upstream}"] if behind else []
            render.line(", ".join(parts))
        else:
            render.line(f"Up to date with {upstream}")
    if data["changes"]:
        render.line("Uncommitted changes:")
        render.changes(data["changes"])
    else:
        render.line("Nothing uncommitted.")


def _commit_noun(n: int) -> str:
    return "commit" if n == 1 else "commits"
