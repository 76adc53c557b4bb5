"""``lakectl fsck`` (verify the lake's blocks) and ``lakectl doctor`` (the configuration works)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, repo_uri
from lakectl.errors import IntegrityError

SparkOption = Annotated[
    str | None,
    typer.Option(
        metavar="MASTER",
        help="Verify the blocks in a Spark job on this master (local[2], spark://host:7077): the "
        "same report, for lakes one process reads too slowly. Needs pyspark and Java, and the "
        "blocks in one local block directory.",
        show_default=False,
    ),
]


def fsck(
    repository: Annotated[
        str | None,
        typer.Argument(help="lakefs://<repository> (default: the whole lake)", show_default=False),
    ] = None,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Rewrite a damaged copy from an intact one where the lake keeps several (a volume "
            "set with replicas); report what was repaired and what could not be.",
        ),
    ] = False,
    spark: SparkOption = None,
    json_: JsonFlag = False,
) -> None:
    """Verify the md5 of every block the lake (or one repository) references.

    Every commit of every repository, every staged object and every multipart upload in
    flight: metaranges, ranges and object data are read back and checked against their
    locators. A missing or corrupt block is reported with a repository, commit and path that
    reference it. Lake-wide, orphaned blocks (stored, referenced by nothing: gc run collects
    them) and temporary files that killed writers left (gc run removes them once older than its
    grace period) are listed too; neither is damage. Exits 7 (integrity_error) when a
    referenced block is missing or corrupt (with --repair: when one could not be repaired);
    with --json the report is then the error's details.
    """
    repo = None if repository is None else repo_uri(repository)
    with render.progress_bytes("verifying blocks", not json_) as progress:
        report = backend().fsck(repo, repair, spark, progress)
    if not json_:
        _report(report)
    _fail_on_damage(report, report)
    if json_:
        render.print_json(report)


def doctor(
    verify: Annotated[
        bool, typer.Option("--verify", help="Also verify every block of the lake (lakectl fsck).")
    ] = False,
    json_: JsonFlag = False,
) -> None:
    """Check the configuration: the lake opens, or the server answers and accepts the credentials.

    Embedded (no server.endpoint_url): the lake at $LAKECTL_HOME opens. Remote: the server at
    server.endpoint_url answers, and lists repositories with the configured access key. Exits
    9 when the server cannot be reached, 10 when it refuses the credentials, 8 when they lack
    the permission to read repositories; with --verify, 7 when a block is missing or corrupt.
    """
    from lakectl.client import server_settings

    server = server_settings()
    lake = backend()
    location = lake.location()
    repositories = len(lake.list_repos())
    result: dict[str, Any] = {
        "backend": "embedded" if server is None else "remote",
        "location": location,
        "access_key_id": None if server is None else server[1],
        "repositories": repositories,
        "fsck": None,
    }
    if verify:
        with render.progress_bytes("verifying blocks", not json_) as progress:
            result["fsck"] = lake.fsck(None, False, None, progress)
    if not json_:
        _doctor(result)
    if result["fsck"] is not None:
        _fail_on_damage(result["fsck"], result)
    if json_:
        render.print_json(result)


def _fail_on_damage(report: dict[str, Any], details: dict[str, Any]) -> None:
    if report["ok"]:
        return
    left = [*report["missing"], *report["corrupt"]]
    missing = sum(not d["repaired"] for d in report["missing"])
    corrupt = sum(not d["repaired"] for d in report["corrupt"])
    raise IntegrityError(
        f"{missing} missing and {corrupt} corrupt block cop{'y' if len(left) == 1 else 'ies'} "
        f"referenced{' (not repaired)' if report['repair'] else ''}",
        **details,
    )


def _report(d: dict[str, Any]) -> None:
    scope = f"repository {d['repository']!r}" if d["repository"] else f"{d['repositories']} repositories"
    render.note(
        f"checked {scope}, {d['commits']} commits: {d['blocks']} blocks, {render.size(d['bytes'])} verified"
    )
    rows = []
    for problem in ("missing", "corrupt"):
        for damage in d[problem]:
            where = damage["repository"]
            if damage["commit"]:
                where += f"@{damage['commit'][:12]}"
            elif damage["branch"]:
                where += f" staged on {damage['branch']}"
            elif damage["upload"]:
                where += f" upload {damage['upload'][:12]}"
            state = "repaired" if damage["repaired"] else ("NOT repaired" if d["repair"] else "")
            rows.append(
                (
                    problem,
                    damage["kind"],
                    damage["locator"],
                    where,
                    damage["path"] or "",
                    damage["volume"] or "",
                    state,
                )
            )
    if rows:
        render.table(("PROBLEM", "KIND", "BLOCK", "REFERENCED BY", "PATH", "VOLUME", "REPAIR"), rows)
    else:
        render.line("no missing or corrupt blocks")
    orphaned, temporaries = d["orphaned"], d["temporaries"]
    if orphaned and orphaned["count"]:
        render.line(
            f"orphaned: {orphaned['count']} block(s), {render.size(orphaned['bytes'])} referenced by "
            "nothing (gc run collects them)"
        )
    if temporaries and temporaries["count"]:
        render.line(
            f"temporary files: {temporaries['count']}, {render.size(temporaries['bytes'])} (writes in "
            "flight, or killed; gc run removes them once older than its grace period)"
        )
        for found in temporaries["files"]:
            volume = f"{found['volume']}: " if found["volume"] else ""
            written = render.when(int(found["modified"]))
            render.line(f"  {volume}{found['name']}  {render.size(found['size'])}  {written}")


def _doctor(d: dict[str, Any]) -> None:
    if d["backend"] == "embedded":
        render.line(f"embedded lake at {d['location']}: it opens, {d['repositories']} repositories")
    else:
        render.line(
            f"lakectl server at {d['location']}: it answers, and access key {d['access_key_id']} "
            f"lists {d['repositories']} repositories"
        )
    if d["fsck"] is not None:
        _report(d["fsck"])
