"""``lakectl pr``: pull requests — open, list, show, comment, review, merge, close, reopen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import (
    After,
    Amount,
    JsonFlag,
    backend,
    more,
    noun,
    paged,
    ref_uri,
    repo_uri,
    same_repo,
)

if TYPE_CHECKING:
    from lakectl.core.workflow.pulls import PullRequest

app = noun(
    "Open, review and merge pull requests.\n\nA pull request proposes merging one branch into "
    "another. When the destination's branch protection rule asks for approvals or checks, "
    "`pr merge` refuses (exit 6) until they are there, and plain `lakectl merge`, `revert` and "
    "`cherry-pick` onto that branch are refused (exit 8)."
)

RepoArg = Annotated[str, typer.Argument(help="lakefs://<repository>", show_default=False)]
IdArg = Annotated[str, typer.Argument(help="The pull request's id (a number).", show_default=False)]
Message = Annotated[str, typer.Option("--message", "-m", help="The text (markdown).")]


def _human(data: dict[str, Any]) -> None:
    render.fields(
        [
            ("Pull request", f"#{data['id']} {data['title']}"),
            ("Status", data["status"]),
            ("Merge", f"{data['source_branch']} → {data['destination_branch']}"),
            ("Author", data["author"]),
            ("Created", data["creation_date"]),
        ]
        + ([("Merged commit", data["merged_commit_id"])] if data.get("merged_commit_id") else [])
    )


def _one(pull: PullRequest, text: str) -> dict[str, Any]:
    return {**pull.to_dict(), "message": text}


@app.command("create")
def create(
    source: Annotated[
        str, typer.Argument(help="lakefs://<repository>/<branch> to merge", show_default=False)
    ],
    destination: Annotated[
        str, typer.Argument(help="lakefs://<repository>/<branch> to merge into", show_default=False)
    ],
    title: Annotated[str, typer.Option("--title", "-t", help="One line saying what the change is.")],
    description: Annotated[str, typer.Option("--description", "-d", help="Markdown text.")] = "",
    json_: JsonFlag = False,
) -> None:
    """Open a pull request from one branch into another (exit 4 when one is already open)."""
    src, dst = ref_uri(source), ref_uri(destination)
    repo = same_repo(src, dst)
    assert src.ref is not None and dst.ref is not None
    pull = backend().create_pull(repo, title, src.ref, dst.ref, description)
    text = f"Pull request #{pull.id} opened: {pull.source_branch} → {pull.destination_branch}"
    render.emit(_one(pull, text), json_, render.message)


@app.command("list")
def list_(
    repository: RepoArg,
    status: Annotated[
        str, typer.Option("--status", help="open, closed (closed or merged), merged or all.")
    ] = "open",
    amount: Amount = 0,
    after: After = "",
    json_: JsonFlag = False,
) -> None:
    """List a repository's pull requests by number."""
    from lakectl.core.workflow.pulls import StatusFilter
    from lakectl.errors import InvalidArgument

    repo = repo_uri(repository)
    try:
        wanted = StatusFilter(status)
    except ValueError:
        raise InvalidArgument(f"--status is open, closed, merged or all, not {status!r}") from None
    found, next_offset = paged(lambda n: backend().list_pulls(repo, wanted, after, n), amount, lambda x: x.id)
    rows = [x.to_dict() for x in found]
    render.emit(
        rows,
        json_,
        lambda d: render.table(
            ["ID", "Status", "Title", "Source", "Destination", "Author"],
            [
                [x["id"], x["status"], x["title"], x["source_branch"], x["destination_branch"], x["author"]]
                for x in d
            ],
        ),
    )
    more(amount, next_offset)


@app.command("show")
def show(repository: RepoArg, pull_id: IdArg, json_: JsonFlag = False) -> None:
    """Show a pull request: description, what merging needs (approvals, checks), reviews,
    comments and the changes it brings."""
    repo = repo_uri(repository)
    b = backend()
    pull = b.get_pull(repo, pull_id)
    data: dict[str, Any] = pull.to_dict()
    data["gate"] = b.pull_gate(repo, pull_id).to_dict()
    data["reviews"] = [r.to_dict() for r in b.list_pull_reviews(repo, pull_id)]
    data["comments"] = [c.to_dict() for c in b.list_pull_comments(repo, pull_id)]
    if pull.status.value == "open":
        changes = [c.to_dict() for c in b.diff_refs(repo, pull.destination_branch, pull.source_branch)]
        data["changes"] = changes
        data["tables"] = _tables(repo, pull.destination_branch, pull.source_branch, changes)
    render.emit(data, json_, _show)


MAX_TABLES = 5


def _tables(repo: str, dest: str, source: str, changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The row summary of each table the pull request changes, at most :data:`MAX_TABLES`:
    from the merge base to the source, as the diff above; by the table's declared key (none:
    whole rows). A table whose rows cannot be compared says why."""
    from lakectl.cli.tables import read_declared
    from lakectl.core.tables.declared import table_for
    from lakectl.core.tables.naming import table_of
    from lakectl.errors import LakectlError

    try:
        known = read_declared(repo, source)
    except LakectlError:  # a declaration file that does not parse: each table's diff says so
        known = {}
    named = (table_for(known, c["path"]) or table_of(c["path"]) for c in changes)
    tables = list(dict.fromkeys(t for t in named if t))[:MAX_TABLES]
    if not tables:
        return []
    b = backend()
    base = b.find_merge_base(repo, source, dest) or dest
    out = []
    for table in tables:
        try:
            found = b.diff_table(repo, base, source, table, (), 0)
        except LakectlError as e:
            out.append(
                {"table": table, "summary": f"{table}: cannot compare its rows: {e.message}", "key": []}
            )
            continue
        out.append({"table": table, "summary": found["summary"], "key": found["key"]})
    return out


def _show(data: dict[str, Any]) -> None:
    _human(data)
    if data["description"]:
        render.line()
        render.line(data["description"])
    gate = data["gate"]
    if data["status"] == "open":
        render.line()
        approvals = f"{len(gate['approvals'])} of {gate['required_approvals']} required"
        render.fields(
            [
                ("Approvals", f"{approvals}: {', '.join(gate['approvals']) or 'none'}"),
                ("Checks", ", ".join(f"{c['run_id']} {c['status']}" for c in gate["checks"]) or "none"),
                ("Merge checks", ", ".join(gate.get("destination_checks", ())) or "none"),
                ("Mergeable", "yes" if gate["mergeable"] else "no: " + "; ".join(gate["reasons"])),
            ]
        )
    for r in data["reviews"]:
        stale = " (stale: the source moved since)" if r["stale"] else ""
        render.line(f"review: {r['reviewer']} {r['verdict']} at {r['commit_id'][:12]}{stale}")
    for c in data["comments"]:
        render.line()
        render.line(f"{c['author']} commented at {c['creation_date']}:")
        render.line(c["body"])
    if data.get("tables"):
        render.line()
        for t in data["tables"]:
            keyed = f" (by key {', '.join(t['key'])})" if t.get("key") else ""
            render.line(f"table {t['summary']}{keyed}")
    if "changes" in data:
        render.line()
        render.changes(data["changes"])


@app.command("comment")
def comment(repository: RepoArg, pull_id: IdArg, message: Message, json_: JsonFlag = False) -> None:
    """Comment on a pull request."""
    repo = repo_uri(repository)
    made = backend().comment_pull(repo, pull_id, message)
    render.emit({**made.to_dict(), "message": f"Commented on #{pull_id}"}, json_, render.message)


def _review(repository: str, pull_id: str, approve: bool, message: str, json_: bool) -> None:
    from lakectl.core.workflow.pulls import Verdict

    repo = repo_uri(repository)
    verdict = Verdict.APPROVED if approve else Verdict.CHANGES_REQUESTED
    made = backend().review_pull(repo, pull_id, verdict, message)
    what = "Approved" if approve else "Requested changes on"
    text = f"{what} #{pull_id} at {made.commit_id[:12]}"
    render.emit({**made.to_dict(), "message": text}, json_, render.message)


@app.command("approve")
def approve(repository: RepoArg, pull_id: IdArg, message: Message = "", json_: JsonFlag = False) -> None:
    """Approve the source branch's current head (a later commit makes the approval stale)."""
    _review(repository, pull_id, True, message, json_)


@app.command("request-changes")
def request_changes(
    repository: RepoArg, pull_id: IdArg, message: Message = "", json_: JsonFlag = False
) -> None:
    """Ask for changes: the pull request cannot merge until the source moves or you approve."""
    _review(repository, pull_id, False, message, json_)


@app.command("merge")
def merge(
    repository: RepoArg,
    pull_id: IdArg,
    strategy: Annotated[
        list[str] | None,
        typer.Option("--strategy", help="As `lakectl merge --strategy` (repeatable)."),
    ] = None,
    message: Annotated[str | None, typer.Option("--message", "-m", help="Merge commit message.")] = None,
    json_: JsonFlag = False,
) -> None:
    """Merge the pull request (exit 6 listing what is missing: approvals, checks)."""
    repo = repo_uri(repository)
    pull = backend().merge_pull(repo, pull_id, strategy or [], message)
    text = f"Merged #{pull.id} into {pull.destination_branch!r}: commit {pull.merged_commit_id}"
    render.emit(_one(pull, text), json_, render.message)


def _status(repository: str, pull_id: str, status: str, json_: bool) -> None:
    from lakectl.core.workflow.pulls import PullStatus

    repo = repo_uri(repository)
    pull = backend().update_pull(repo, pull_id, status=PullStatus(status))
    render.emit(_one(pull, f"Pull request #{pull.id} is {pull.status.value}"), json_, render.message)


@app.command("close")
def close(repository: RepoArg, pull_id: IdArg, json_: JsonFlag = False) -> None:
    """Close a pull request without merging it."""
    _status(repository, pull_id, "closed", json_)


@app.command("reopen")
def reopen(repository: RepoArg, pull_id: IdArg, json_: JsonFlag = False) -> None:
    """Reopen a closed pull request."""
    _status(repository, pull_id, "open", json_)
