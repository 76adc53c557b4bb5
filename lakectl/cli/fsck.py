"""``lakectl fsck`` (verify the lake's blocks) and ``lakectl doctor`` (the configuration works)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, ServerConfigOpt, backend, backend_for, repo_uri
from lakectl.errors import Forbidden, IntegrityError, LakectlError, Unauthenticated

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
    server_config: ServerConfigOpt = None,
    json_: JsonFlag = False,
) -> None:
    """Verify the md5 of every block the lake (or one repository) references.

    Every commit its repository's retention keeps (commits past it are counted: garbage
    collection may have removed their objects' data), every staged object and every multipart upload in
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
        report = backend_for(server_config).fsck(repo, repair, spark, progress)
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

    One line per check, each ok, failed (with the reason) or skipped: the configuration file is
    found and parsed; embedded (no server.endpoint_url), the lake at $LAKECTL_HOME opens;
    remote, the server at server.endpoint_url is reachable and accepts the access key; the
    repositories can be listed; with --verify, every block is read back and its md5 checked.
    The checks stop at the first failure, whose error gives the exit code: 2 for a malformed
    configuration file, 9 when the server cannot be reached (or the lake not opened), 10 when
    it refuses the credentials, 8 when they lack the permission to read repositories, 7 when a
    block is missing or corrupt. --json prints the result (or the error) alone.
    """
    say = _Say(not json_)
    server = say.attempt("config file", _config_file, lambda _: _config_detail())
    remote = server is not None
    lake = backend()
    location = say.attempt(
        "endpoint reachable" if remote else "lake opens",
        lake.location,
        lambda where: f"{where} answers" if remote else where,
    )
    if not remote:
        say("skipped", "credentials accepted", "the embedded lake needs none")
        repositories = say.attempt("repositories readable", lambda: len(lake.list_repos()), _count)
    else:
        try:
            repositories = len(lake.list_repos())
        except Unauthenticated as e:
            say("failed", "credentials accepted", e.message)
            raise
        except Forbidden as e:
            say("ok", "credentials accepted", f"access key {server[1]}")
            say("failed", "repositories readable", e.message)
            raise
        except LakectlError as e:
            say("failed", "repositories readable", e.message)
            raise
        say("ok", "credentials accepted", f"access key {server[1]}")
        say("ok", "repositories readable", _count(repositories))
    result: dict[str, Any] = {
        "backend": "remote" if remote else "embedded",
        "location": location,
        "access_key_id": server[1] if remote else None,
        "repositories": repositories,
        "fsck": None,
    }
    if not verify:
        say("skipped", "blocks verified", "--verify reads every block back")
    else:
        with render.progress_bytes("verifying blocks", not json_) as progress:
            report = result["fsck"] = say.attempt(
                "blocks verified",
                lambda: lake.fsck(None, False, None, progress),
                lambda r: (
                    f"{r['blocks']} blocks, {render.size(r['bytes'])}"
                    if r["ok"]
                    else f"{r['unrepaired']} missing or corrupt block copies"
                ),
                failed=lambda r: not r["ok"],
            )
        if not report["ok"] and not json_:
            _report(report)
        _fail_on_damage(report, result)
    if json_:
        render.print_json(result)


def _config_file() -> tuple[str, str, str] | None:
    """The configured server (None: the embedded lake), once the configuration file parses."""
    from lakectl import config
    from lakectl.client import server_settings

    config.require()
    config.load()
    return server_settings()


def _config_detail() -> str:
    import os

    from lakectl import config

    path = config.config_path()
    if not os.path.exists(path):
        return f"{path} not found (the defaults and the environment apply)"
    return f"{path} found and parsed"


def _count(n: int) -> str:
    return f"{n} repositor{'y' if n == 1 else 'ies'}"


class _Say:
    """doctor's human output: one line per check (nothing with --json)."""

    def __init__(self, human: bool) -> None:
        self.human = human

    def __call__(self, status: str, check: str, detail: str) -> None:
        if self.human:
            render.line(f"{status:<8}{check}: {detail}")

    def attempt(
        self,
        check: str,
        run: Callable[[], Any],
        detail: Callable[[Any], str],
        failed: Callable[[Any], bool] = lambda _: False,
    ) -> Any:
        """``run()``, reported ok or failed; an error it raises is reported, then raised."""
        try:
            value = run()
        except LakectlError as e:
            self("failed", check, e.message)
            raise
        self("failed" if failed(value) else "ok", check, detail(value))
        return value


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
    if d.get("expired_commits"):
        render.note(
            f"{d['expired_commits']} commit(s) past their retention not checked: garbage collection "
            "may have removed their objects' data (lakectl gc set-config)"
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
