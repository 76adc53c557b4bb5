"""``lakectl gc``: a repository's garbage-collection retention rules (set, show, delete)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import (
    JsonFlag,
    ServerConfigOpt,
    _remember_json,
    backend,
    backend_for,
    noun,
    read_input,
    repo_uri,
)
from lakectl.errors import InvalidArgument

app = noun("Garbage collection: retention rules, and collecting blocks nothing needs.")

RepoArg = Annotated[str, typer.Argument(help="lakefs://<repository>", show_default=False)]


@app.command("set-config")
def set_config(
    repository: RepoArg,
    filename: Annotated[
        str,
        typer.Option(
            "-f",
            "--filename",
            help='JSON rules file, or - for stdin: {"default_retention_days": 21, '
            '"branches": [{"branch_id": "main", "retention_days": 28}]}',
            show_default=False,
        ),
    ],
    json_: JsonFlag = False,
) -> None:
    """Set the retention rules: how many days commits stay, by default and per branch.

    A branch's head is always kept; its older ancestors are kept for its retention days.
    Only admins may set rules on a lakectl server.
    """
    from lakectl.core.upkeep.retention import GCRules

    raw = read_input(filename)
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"{filename!r} is not JSON: {exc}") from exc
    rules = GCRules.from_dict(data)
    repo = repo_uri(repository)
    backend().set_gc_rules(repo, rules)
    render.emit(rules.to_dict(), json_, lambda d: render.note(f"Garbage-collection rules set for {repo!r}"))


@app.command("get-config")
def get_config(
    repository: RepoArg,
    json_: Annotated[
        bool,
        typer.Option(
            "--json",
            "-p",
            help="Print JSON (-p as lakeFS's lakectl; errors too: {code, message, details}).",
            callback=_remember_json,
        ),
    ] = False,
) -> None:
    """Show the retention rules (exit 3 when none are set)."""
    rules = backend().get_gc_rules(repo_uri(repository))
    render.emit(rules.to_dict(), json_, _show)


@app.command("delete-config")
def delete_config(repository: RepoArg, json_: JsonFlag = False) -> None:
    """Delete the retention rules (nothing is collected without them)."""
    repo = repo_uri(repository)
    backend().delete_gc_rules(repo)
    render.emit(
        render.deletion("gc_rules", [repo], f"Garbage-collection rules of {repo!r} deleted"),
        json_,
        render.message,
    )


@app.command("run")
def run(
    repository: RepoArg,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would go; delete nothing.")] = False,
    grace_hours: Annotated[
        float, typer.Option(help="Spare unreferenced blocks written or touched this recently.", min=0)
    ] = 6,
    spark: Annotated[
        str | None,
        typer.Option(
            metavar="MASTER",
            help="Run the collection as a Spark job on this master (local[2], spark://host:7077): "
            "same result, for lakes whose live set outgrows one process. Needs pyspark and Java.",
            show_default=False,
        ),
    ] = None,
    allow_preexisting_blocks: Annotated[
        bool,
        typer.Option(
            "--allow-preexisting-blocks",
            help="Collect even though the lake's metadata database was created over blocks "
            "already stored (`lakectl init` over an existing block directory): refused otherwise, "
            "since nothing in the new database refers to them. Import what you want to keep "
            "first; the refusal is lifted for good.",
        ),
    ] = False,
    server_config: ServerConfigOpt = None,
    json_: JsonFlag = False,
) -> None:
    """Delete the blocks the lake no longer needs once the repository's expired commits go.

    Kept: branch heads, their ancestors within the retention rules (all commits without
    rules), tagged commits, every other repository, staged objects, uploads in flight, and any
    block younger than the grace period. The trees of expired commits stay (listings, diffs and
    merges over them work); reading their objects' data then answers gone. Multipart uploads
    started more than 7 days ago are aborted first, and their parts collected; staging that
    deleted branches left behind is dropped, and so are the temporary block files of killed
    writers, once older than the grace period. With --spark, the same collection runs as a
    Spark job, driven from where the lake is: this process, or the lakectl server.
    """
    repo = repo_uri(repository)
    report = backend_for(server_config).gc_run(
        repo, dry_run, grace_hours * 3600, spark, allow_preexisting_blocks
    )
    render.emit(report, json_, _report)


def _report(d: dict[str, Any]) -> None:
    verb = "would delete" if d["dry_run"] else "deleted"
    render.line(f"{verb} {d['deleted']} block(s), {d['bytes_freed']:,} bytes")
    render.note(
        f"{d['blocks']} blocks: {d['live']} in use, {d['young']} within the grace period; "
        f"{d['retained_commits']} commits retained, {d['expired_commits']} expired"
    )
    done = "would go" if d["dry_run"] else "removed"
    if d.get("uploads_aborted") or d.get("staging_dropped"):
        render.note(
            f"stale multipart uploads {done}: {d.get('uploads_aborted', 0)}; "
            f"staging partitions of deleted branches {done}: {d.get('staging_dropped', 0)}"
        )
    if d.get("temporaries_deleted"):
        render.note(
            f"temporary files of killed writers {done}: {d['temporaries_deleted']} "
            f"({d.get('temporaries_bytes_freed', 0):,} bytes)"
        )


def _show(d: dict[str, Any]) -> None:
    render.line(f"default retention: {d['default_retention_days']} days")
    for rule in d["branches"]:
        render.line(f"  {rule['branch_id']}: {rule['retention_days']} days")
