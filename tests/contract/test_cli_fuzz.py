"""Every CLI command, embedded and against a live server, given hostile values in each of its text
arguments and option values: lone surrogates (what Python makes of non-UTF-8 bytes on a
command line), terminal escapes and bidi overrides, and values far past the documented limits.

Each run must end in a documented exit code with one ``error:`` line (or succeed without
storing anything), never in a traceback or exit 1 (a server's 5xx would be one), and the lake
must be byte for byte what it was: every KV row and every block file. Against a server, the
server must log no error either. The commands come from the CLI's own command table, so a new
command fails :func:`test_every_command_is_fuzzed` until it is given a valid invocation here
(or a reason in :data:`NOT_FUZZED`); each fuzz is bounded by construction (four hostile values
per text token of one invocation per command, at most :data:`MAX_RUNS`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from typer.testing import CliRunner

from lakectl.cli.app import app
from tests.cli import docgen
from tests.server.conftest import Live, live, unique

__all__ = ["live"]

HOSTILE = {
    "non-utf8": lambda v: v[: len(v) // 2 + 1] + "\udcff" + v[len(v) // 2 + 1 :],
    "escape": lambda v: v + "\x1b[2J\x1b]0;x\x07",
    "bidi": lambda v: v + "\u202e",
    "huge": lambda v: v + "x" * 70_000,
}
DOCUMENTED = {0, 2, 3, 4, 5, 6, 7, 8}
"""Exit codes a refused input may end in (1 would be an internal error)."""
MAX_RUNS = 1500

NOT_FUZZED = {
    "lakectl init": "no text arguments",
    "lakectl doctor": "no text arguments",
    "lakectl journal enable": "no text arguments",
    "lakectl journal disable": "no text arguments",
    "lakectl journal compact": "no text arguments",
    "lakectl admin rebuild": "no text arguments",
    "lakectl server setup": "writes a server's data directory, not a lake (tests/server/test_cli.py)",
    "lakectl server run": "serves until stopped (tests/server/test_cli.py)",
    "lakectl ui": "serves until stopped (tests/ui/)",
}


def valid_invocations(d: str, work: Path) -> dict[str, list[str]]:
    """One valid invocation per command on the :func:`populate` repository ``d``; each text
    token of it is made hostile in turn (the valid form itself is never run)."""
    rules = work / "rules.json"
    rules.write_text('{"default_retention_days": 7}')
    manifest = work / "m.txt"
    manifest.write_text("")
    policy = work / "policy.json"
    policy.write_text('{"statement": [{"effect": "allow", "resource": "*", "action": ["fs:Read*"]}]}')
    refs = work / "refs.json"
    refs.write_text(
        '{"commits_meta_range_id": "x", "tags_meta_range_id": "y", "branches_meta_range_id": "z"}'
    )
    imported = work / "import-src"
    imported.mkdir(exist_ok=True)
    (imported / "f.csv").write_text("5,6\n")
    action = work / "action.yaml"
    action.write_text("on: {pre-commit: }\nhooks: [{id: a, type: command, properties: {command: x}}]\n")
    return {
        "lakectl repo create": [
            "repo",
            "create",
            "lakefs://fuzz-new",
            "s3://b/p",
            "--default-branch",
            "trunk",
        ],
        "lakectl repo create-bare": ["repo", "create-bare", "lakefs://fuzz-bare", "local://b", "-d", "trunk"],
        "lakectl repo list": ["repo", "list", "--after", "a"],
        "lakectl repo show": ["repo", "show", d],
        "lakectl repo delete": ["repo", "delete", d, "--yes"],
        "lakectl branch create": ["branch", "create", f"{d}/b2", "--source", f"{d}/main"],
        "lakectl branch list": ["branch", "list", d, "--after", "feat"],
        "lakectl branch show": ["branch", "show", f"{d}/feat"],
        "lakectl branch delete": ["branch", "delete", f"{d}/feat", "--yes"],
        "lakectl branch reset": ["branch", "reset", f"{d}/main", "--prefix", "a/"],
        "lakectl branch revert": ["branch", "revert", f"{d}/main", "main"],
        "lakectl tag create": ["tag", "create", f"{d}/v1", f"{d}/main", "--force"],
        "lakectl tag list": ["tag", "list", d, "--after", "v0"],
        "lakectl tag show": ["tag", "show", f"{d}/v1"],
        "lakectl tag delete": ["tag", "delete", f"{d}/v1"],
        "lakectl fs upload": ["fs", "upload", f"{d}/main/up.csv", "-s", "-", "--content-type", "text/csv"],
        "lakectl fs download": ["fs", "download", f"{d}/main/a/x.csv", str(work / "out.csv")],
        "lakectl fs cat": ["fs", "cat", f"{d}/main/a/x.csv"],
        "lakectl fs stat": ["fs", "stat", f"{d}/main/a/x.csv"],
        "lakectl fs presign": ["fs", "presign", f"{d}/main/a/x.csv"],
        "lakectl fs ls": ["fs", "ls", f"{d}/main/a/", "--after", "a/w.csv"],
        "lakectl fs rm": ["fs", "rm", f"{d}/main/a/x.csv"],
        "lakectl commit": ["commit", f"{d}/main", "-m", "message", "--meta", "k=v", "--allow-empty"],
        "lakectl log": [
            "log",
            f"{d}/main",
            "--objects",
            "a/x.csv,b.csv",
            "--prefixes",
            "a/",
            "--after",
            "main~1",
            "--since",
            "2000-01-01T00:00:00Z",
            "--stop-at",
            "v1",
        ],
        "lakectl show commit": ["show", "commit", f"{d}/main"],
        "lakectl diff": ["diff", f"{d}/main@", f"{d}/feat$", "--prefix", "a/"],
        "lakectl status": ["status", f"{d}/feat", "--upstream", "main"],
        "lakectl merge": [
            "merge",
            f"{d}/feat",
            f"{d}/main",
            "--strategy",
            "a/**=source-wins",
            "-m",
            "m",
            "--squash",
        ],
        "lakectl cherry-pick": ["cherry-pick", f"{d}/feat", f"{d}/main"],
        "lakectl revert": ["revert", f"{d}/main", "main"],
        "lakectl reset": ["reset", f"{d}/main/a/"],
        "lakectl manifest export": ["manifest", "export", f"{d}/main/a"],
        "lakectl manifest import": ["manifest", "import", f"{d}/main/imported/", str(manifest)],
        "lakectl import": [
            *("import", "--from", str(imported), "--to", f"{d}/main/imp/", "-m", "imp", "--meta", "k=v")
        ],
        "lakectl import status": ["import", "status", f"{d}/main", "0123abcd"],
        "lakectl import cancel": ["import", "cancel", f"{d}/main", "0123abcd"],
        "lakectl import copy": ["import", "copy", f"{d}/main/a/"],
        "lakectl gc set-config": ["gc", "set-config", d, "-f", str(rules)],
        "lakectl gc get-config": ["gc", "get-config", d],
        "lakectl gc delete-config": ["gc", "delete-config", d],
        "lakectl gc run": ["gc", "run", d, "--dry-run"],
        "lakectl fsck": ["fsck", d],
        "lakectl provenance": ["provenance", f"{d}/main/a.csv", "--downstream"],
        "lakectl journal tail": ["journal", "tail", "--repo", d],
        # auth: the server's built-in group, policy and first user; refused on the embedded lake
        "lakectl auth users create": ["auth", "users", "create", "--id", "fuzz-user"],
        "lakectl auth users list": ["auth", "users", "list", "--after", "a"],
        "lakectl auth users delete": ["auth", "users", "delete", "--id", "fuzz-user"],
        "lakectl auth users credentials create": ["auth", "users", "credentials", "create", "--id", "admin"],
        "lakectl auth users credentials list": ["auth", "users", "credentials", "list", "--id", "admin"],
        "lakectl auth users credentials delete": [
            *("auth", "users", "credentials", "delete", "--id", "admin", "--access-key-id", "AKIAFUZZ"),
        ],
        "lakectl auth users groups list": ["auth", "users", "groups", "list", "--id", "admin"],
        "lakectl auth users policies list": ["auth", "users", "policies", "list", "--id", "admin"],
        "lakectl auth users policies attach": [
            *("auth", "users", "policies", "attach", "--id", "admin", "--policy", "FSReadAll"),
        ],
        "lakectl auth users policies detach": [
            *("auth", "users", "policies", "detach", "--id", "admin", "--policy", "FSReadAll"),
        ],
        "lakectl auth groups create": ["auth", "groups", "create", "--id", "fuzz-g", "--description", "d"],
        "lakectl auth groups list": ["auth", "groups", "list", "--after", "a"],
        "lakectl auth groups delete": ["auth", "groups", "delete", "--id", "fuzz-g"],
        "lakectl auth groups members add": [
            "auth",
            "groups",
            "members",
            "add",
            "--id",
            "Viewers",
            "--user",
            "admin",
        ],
        "lakectl auth groups members remove": [
            *("auth", "groups", "members", "remove", "--id", "Viewers", "--user", "admin"),
        ],
        "lakectl auth groups members list": ["auth", "groups", "members", "list", "--id", "Viewers"],
        "lakectl auth groups policies list": ["auth", "groups", "policies", "list", "--id", "Viewers"],
        "lakectl auth groups policies attach": [
            *("auth", "groups", "policies", "attach", "--id", "Viewers", "--policy", "FSReadAll"),
        ],
        "lakectl auth groups policies detach": [
            *("auth", "groups", "policies", "detach", "--id", "Viewers", "--policy", "FSReadAll"),
        ],
        "lakectl auth policies create": [
            *("auth", "policies", "create", "--id", "fuzz-p", "--statement-document", str(policy)),
        ],
        "lakectl auth policies list": ["auth", "policies", "list", "--after", "a"],
        "lakectl auth policies show": ["auth", "policies", "show", "--id", "FSReadAll"],
        "lakectl auth policies delete": ["auth", "policies", "delete", "--id", "fuzz-p"],
        # A dump stores blocks on success, so its output file (any name is a fine file name) is
        # left out; refs-restore into the non-bare d fails whatever the manifest says.
        "lakectl refs-dump": ["refs-dump", d],
        "lakectl refs-restore": ["refs-restore", d, "--manifest", str(refs)],
        # Every mutation is refused, so the configuration file of the run is never written.
        "lakectl config": [
            "config",
            "--access-key-id",
            "AKIAFUZZ",
            "--secret-access-key",
            "fuzz-secret",
            "--endpoint-url",
            "http://127.0.0.1:1",
        ],
        "lakectl completion": ["completion", "bash"],
        "lakectl annotate": ["annotate", f"{d}/main/a/", "--recursive"],
        "lakectl tables declare": ["tables", "declare", f"{d}/main/tables/orders", "--key", "id"],
        "lakectl tables undeclare": ["tables", "undeclare", f"{d}/main/tables/orders"],
        "lakectl tables list": ["tables", "list", f"{d}/main"],
        "lakectl branch-protect add": ["branch-protect", "add", d, "stable_*"],
        "lakectl branch-protect list": ["branch-protect", "list", d],
        "lakectl branch-protect delete": ["branch-protect", "delete", d, "stable_*"],
        "lakectl pr create": ["pr", "create", f"{d}/feat", f"{d}/main", "--title", "title", "-d", "text"],
        "lakectl pr list": ["pr", "list", d, "--status", "all", "--after", "1"],
        "lakectl pr show": ["pr", "show", d, "1"],
        "lakectl pr comment": ["pr", "comment", d, "1", "-m", "hello"],
        "lakectl pr approve": ["pr", "approve", d, "1", "-m", "fine"],
        "lakectl pr request-changes": ["pr", "request-changes", d, "1", "-m", "fix it"],
        "lakectl pr merge": ["pr", "merge", d, "1", "--strategy", "dest-wins", "-m", "message"],
        "lakectl pr close": ["pr", "close", d, "1"],
        "lakectl pr reopen": ["pr", "reopen", d, "1"],
        "lakectl actions runs list": ["actions", "runs", "list", d, "--branch", "main", "--commit", "main"],
        "lakectl actions runs describe": ["actions", "runs", "describe", d, "ffff0000"],
        "lakectl actions validate": ["actions", "validate", str(action)],
        "lakectl cat-hook-output": ["cat-hook-output", d, "ffff0000", "0000_0000"],
        # Working copies: the directories do not exist (refused, exit 3) except for clone and
        # init, which write only under work/, never into the lake.
        "lakectl local init": ["local", "init", f"{d}/main/a/", str(work / "wc-init"), "--no-gitignore"],
        "lakectl local clone": ["local", "clone", f"{d}/main/a/", str(work / "wc-clone"), "--no-gitignore"],
        "lakectl local list": ["local", "list", str(work / "nowhere")],
        "lakectl local status": ["local", "status", str(work / "wc")],
        "lakectl local commit": ["local", "commit", str(work / "wc"), "-m", "message", "--meta", "k=v"],
        "lakectl local pull": ["local", "pull", str(work / "wc")],
        "lakectl local checkout": ["local", "checkout", str(work / "wc"), "--ref", "main"],
        "lakectl local monitor start": ["local", "monitor", "start", str(work / "wc")],
        "lakectl local monitor status": ["local", "monitor", "status", str(work / "wc")],
        "lakectl local monitor stop": ["local", "monitor", "stop", str(work / "wc")],
    }


def test_every_command_is_fuzzed(tmp_path: Path) -> None:
    # A group that is also a command (``lakectl import --from ...``) has options of its own.
    leaves = {path for path, cmd, ctx in docgen.commands() if not hasattr(cmd, "list_commands")} | {
        path for path, cmd, ctx in docgen.commands() if path != "lakectl" and docgen.options(cmd, ctx)
    }
    assert leaves == set(valid_invocations("lakefs://r", tmp_path)) | set(NOT_FUZZED)


def mutations(command: str, argv: list[str]) -> Iterator[tuple[str, list[str]]]:
    """Each text token (positional values and option values; not the command's words, not
    flags) made hostile in turn."""
    words = len(command.split()) - 1
    for i, token in enumerate(argv):
        if i < words or (token.startswith("-") and token != "-"):
            continue
        for kind, mutate in HOSTILE.items():
            yield f"{kind} in {token!r}", [*argv[:i], mutate(token), *argv[i + 1 :]]


def snapshot(db: Path, blocks: Path) -> tuple[list[tuple[str, str, bytes]], list[tuple[str, int]]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT partition, key, value FROM kv ORDER BY partition, key").fetchall()
    files = sorted((str(p.relative_to(blocks)), p.stat().st_size) for p in blocks.rglob("*") if p.is_file())
    return rows, files


def run(env: dict[str, str], *argv: str, input: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(argv), input=input, env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"lakectl {argv!r} raised {result.exception!r}") from result.exception
    return result.exit_code, result.stdout, result.stderr


def populate(env: dict[str, str], d: str) -> None:
    """``d``: main with a/x.csv, a tag v1, a branch feat with one more commit (merges cleanly),
    and pull request 1 of feat into main."""
    steps: list[tuple[list[str], bytes | None]] = [
        (["repo", "create", d], None),
        (["fs", "upload", f"{d}/main/a/x.csv", "--source", "-"], b"1,2\n"),
        (["commit", f"{d}/main", "-m", "base"], None),
        (["tag", "create", f"{d}/v1", f"{d}/main"], None),
        (["branch", "create", f"{d}/feat", "--source", f"{d}/main"], None),
        (["fs", "upload", f"{d}/feat/b.csv", "--source", "-"], b"3,4\n"),
        (["commit", f"{d}/feat", "-m", "feat"], None),
        (["pr", "create", f"{d}/feat", f"{d}/main", "--title", "pull request"], None),
    ]
    for argv, data in steps:
        code, _, err = run(env, *argv, input=data)
        assert code == 0, (argv, err)


def fuzz(env: dict[str, str], d: str, work: Path, db: Path, blocks: Path) -> int:
    failures: list[str] = []
    count = 0
    for command, argv in valid_invocations(d, work).items():
        for what, mutated in mutations(command, argv):
            before = snapshot(db, blocks)
            code, out, err = run(env, *mutated, input=b"data\n")
            count += 1
            lines = [line for line in err.splitlines() if line.strip()]
            if "Traceback (most recent call last)" in err + out:
                failures.append(f"{command}, {what}: a traceback: {err[-300:]!r}")
            if code not in DOCUMENTED:
                failures.append(f"{command}, {what}: exit {code}: {err[:300]!r}")
            elif code and not (len(lines) == 1 and lines[0].startswith("error: ")):
                failures.append(f"{command}, {what}: not one error line: {err[:300]!r}")
            if snapshot(db, blocks) != before:
                failures.append(f"{command}, {what}: exit {code}, and the lake changed")
    assert not failures, "\n".join(failures)
    assert count <= MAX_RUNS
    return count


def test_hostile_values_embedded(tmp_path: Path) -> None:
    home = tmp_path / "lake"
    env = {
        "LAKECTL_HOME": str(home),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_COMMITTER": "tester",
    }
    populate(env, "lakefs://fuzz")
    # The journal settled: what the commands left to the next seal sealed (a `journal tail`
    # seals first), and their closed writers let go by the seal after it.
    for _ in range(2):
        assert run(env, "journal", "tail")[0] == 0
    assert fuzz(env, "lakefs://fuzz", tmp_path, home / "lake.db", home / "blocks") > 200


class _Errors(logging.Handler):
    """Records the server logs at ERROR (an internal error, uvicorn's "Exception in ASGI
    application"): the server runs in this process, on a thread."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(f"{record.name}: {record.getMessage()[:300]}")


def test_hostile_values_remote(tmp_path: Path, live: Live) -> None:
    env = live.cli_env(tmp_path)
    d = f"lakefs://{unique('fuzz')}"
    populate(env, d)
    errors = _Errors()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn")]  # uvicorn's do not propagate
    for logger in loggers:
        logger.addHandler(errors)
    try:
        assert fuzz(env, d, tmp_path, live.data_dir / "lake.db", live.data_dir / "blocks") > 200
    finally:
        for logger in loggers:
            logger.removeHandler(errors)
    assert not errors.seen, "the server logged errors:\n" + "\n".join(errors.seen[:20])
    assert json.loads(run(env, "repo", "show", d, "--json")[1])["id"] == d.removeprefix("lakefs://")
