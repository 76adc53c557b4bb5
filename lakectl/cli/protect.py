"""``lakectl branch-protect``: rules that keep branches from direct writes (add, list, delete)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, noun, repo_uri

app = noun(
    "Create and manage branch protection rules.\n\nA branch whose name matches a rule refuses "
    "uploads, deletes, commits, resets and its own deletion (exit 8): it changes only by merges, "
    "reverts and cherry-picks, judged by its own pre-merge actions (under a rule with required "
    "approvals or checks, only through pull requests)."
)

RepoArg = Annotated[str, typer.Argument(help="lakefs://<repository>", show_default=False)]
PatternArg = Annotated[
    str, typer.Argument(help="Branch name glob: * and ? wildcards, e.g. 'stable_*'.", show_default=False)
]


@app.command("add")
def add(
    repository: RepoArg,
    pattern: PatternArg,
    required_approvals: Annotated[
        int,
        typer.Option(
            "--required-approvals",
            min=0,
            help="Approvals a pull request into these branches needs (by others than its author, "
            "on the source's current head). Not 0: merges come only through pull requests.",
        ),
    ] = 0,
    required_checks: Annotated[
        bool,
        typer.Option(
            "--required-checks",
            help="A pull request into these branches merges only when the branch's own pre-merge "
            "actions, committed at its head, pass the merge (at least one). Merges come only "
            "through pull requests.",
        ),
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Add a rule protecting every branch whose name matches the pattern (admins only on a server)."""
    repo = repo_uri(repository)
    backend().add_branch_protection(repo, pattern, required_approvals, required_checks)
    rule: dict[str, Any] = {"pattern": pattern}
    if required_approvals:
        rule["required_approvals"] = required_approvals
    if required_checks:
        rule["required_checks"] = True
    render.emit(rule, json_, lambda d: render.note(f"Branches {pattern!r} of {repo!r} protected"))


@app.command("list")
def list_(repository: RepoArg, json_: JsonFlag = False) -> None:
    """List the rules as lakeFS's BranchProtectionRule list: [{"pattern": ...}] (with
    required_approvals and required_checks where set)."""
    rules = backend().list_branch_protection(repo_uri(repository))
    render.emit(rules, json_, _rules)


@app.command("delete")
def delete(repository: RepoArg, pattern: PatternArg, json_: JsonFlag = False) -> None:
    """Delete the rule of a pattern (exit 3 when it has none)."""
    repo = repo_uri(repository)
    backend().delete_branch_protection(repo, pattern)
    text = f"Branch protection rule {pattern!r} of {repo!r} deleted"
    render.emit(render.deletion("branch_protection", [pattern], text), json_, render.message)


def _rules(data: list[dict[str, Any]]) -> None:
    rows = [
        [d["pattern"], d.get("required_approvals", 0), "yes" if d.get("required_checks") else "no"]
        for d in data
    ]
    render.table(["Branch Name Pattern", "Required Approvals", "Required Checks"], rows)
