"""Bad input, command by command: a one-line error, the documented exit code, and a lake that is
byte for byte what it was (every KV row and every block)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import Run

NOT_FOUND, INVALID, EXISTS, CONFLICT, PRECONDITION, FORBIDDEN = 3, 2, 4, 5, 6, 8
D = "lakefs://demo"


def snapshot(home: Path) -> tuple[list[tuple[str, str, bytes]], list[str]]:
    with sqlite3.connect(home / "lake.db") as db:
        rows = db.execute("SELECT partition, key, value FROM kv ORDER BY partition, key").fetchall()
    blocks = sorted(p.name for p in (home / "blocks").rglob("*") if p.is_file())
    return rows, blocks


CASES = [
    # (case, argv, exit code)
    ("repo name too short", ["repo", "create", "lakefs://ab"], INVALID),
    ("repo name upper case", ["repo", "create", "lakefs://Demo2"], INVALID),
    ("repo exists", ["repo", "create", D, "--default-branch", "other"], EXISTS),
    ("not a lakefs uri", ["repo", "create", "s3://demo"], INVALID),
    ("unknown repo", ["branch", "list", "lakefs://nope"], NOT_FOUND),
    (
        "branch name with a dot",
        ["branch", "create", f"{D}/a.b", "--source", f"{D}/main"],
        INVALID,
    ),
    ("branch exists", ["branch", "create", f"{D}/main", "--source", f"{D}/main"], EXISTS),
    (
        "unknown source ref",
        ["branch", "create", f"{D}/x1", "--source", f"{D}/nope"],
        NOT_FOUND,
    ),
    (
        "bad ref modifier",
        ["branch", "create", f"{D}/x2", "--source", f"{D}/main~x"],
        INVALID,
    ),
    (
        "ref past the root",
        ["branch", "create", f"{D}/x3", "--source", f"{D}/main~9"],
        NOT_FOUND,
    ),
    ("default branch protected", ["branch", "delete", f"{D}/main", "--yes"], FORBIDDEN),
    ("tag exists", ["tag", "create", f"{D}/v1", f"{D}/main~1"], EXISTS),
    ("tag name with ..", ["tag", "create", f"{D}/v..1", f"{D}/main"], INVALID),
    ("upload path with ..", ["fs", "upload", f"{D}/main/a/../x", "--source", "-"], INVALID),
    ("upload path with NUL", ["fs", "upload", f"{D}/main/a\x00b", "--source", "-"], INVALID),
    ("upload to a tag", ["fs", "upload", f"{D}/v1/x", "--source", "-"], INVALID),
    (
        "upload of a missing file",
        ["fs", "upload", f"{D}/main/x", "--source", "/no/such/file"],
        NOT_FOUND,
    ),
    ("rm of a missing object", ["fs", "rm", f"{D}/main/nope.csv"], NOT_FOUND),
    ("stat of a missing object", ["fs", "stat", f"{D}/main/nope.csv"], NOT_FOUND),
    ("commit with nothing staged", ["commit", f"{D}/main", "-m", "x"], PRECONDITION),
    ("commit on a tag", ["commit", f"{D}/v1", "-m", "x"], INVALID),
    (
        "unknown merge strategy",
        ["merge", f"{D}/dev", f"{D}/main", "--strategy", "mine"],
        INVALID,
    ),
    ("merge conflict", ["merge", f"{D}/dev", f"{D}/main"], CONFLICT),
    ("revert a merge-less root", ["revert", f"{D}/main", "nope"], NOT_FOUND),
    # Names that would drive a terminal, text that is not UTF-8 (what Python makes of non-UTF-8
    # bytes on the command line: lone surrogates), and values past the documented limits.
    ("upload path with ESC", ["fs", "upload", f"{D}/main/a\x1b[2Jx", "--source", "-"], INVALID),
    ("upload path with a bidi override", ["fs", "upload", f"{D}/main/a\u202ex", "--source", "-"], INVALID),
    ("upload path with a C1 control", ["fs", "upload", f"{D}/main/a\x9bx", "--source", "-"], INVALID),
    ("upload path not UTF-8", ["fs", "upload", f"{D}/main/a\udcffx", "--source", "-"], INVALID),
    ("upload path over 1024 bytes", ["fs", "upload", f"{D}/main/{'é' * 513}", "--source", "-"], INVALID),
    ("repository URI not UTF-8", ["repo", "create", "lakefs://de\udcffmo"], INVALID),
    ("ref URI not UTF-8", ["log", f"{D}/ma\udcffin"], INVALID),
    (
        "content type with a newline",
        ["fs", "upload", f"{D}/main/ct", "--source", "-", "--content-type", "text/plain\nX: y"],
        INVALID,
    ),
    ("commit message not UTF-8", ["commit", f"{D}/main", "-m", "bad \udcff", "--allow-empty"], INVALID),
    ("commit message with ESC", ["commit", f"{D}/main", "-m", "\x1b]0;pwned\x07", "--allow-empty"], INVALID),
    ("commit message over 64 KiB", ["commit", f"{D}/main", "-m", "m" * 65537, "--allow-empty"], INVALID),
    (
        "commit metadata key with ESC",
        ["commit", f"{D}/main", "-m", "x", "--allow-empty", "--meta", "a\x1bb=1"],
        INVALID,
    ),
    (
        "commit metadata value over 4 KiB",
        ["commit", f"{D}/main", "-m", "x", "--allow-empty", "--meta", "k=" + "v" * 4097],
        INVALID,
    ),
    (
        "commit metadata with 101 entries",
        ["commit", f"{D}/main", "-m", "x", "--allow-empty", *(f"--meta=k{i}=v" for i in range(101))],
        INVALID,
    ),
    ("log of an object path with ..", ["log", f"{D}/main", "--objects", "../x"], INVALID),
    ("log of an absolute prefix", ["log", f"{D}/main", "--prefixes", "/abs"], INVALID),
    ("tag shadowing a branch", ["tag", "create", f"{D}/dev", f"{D}/main"], EXISTS),
    ("branch shadowing a tag", ["branch", "create", f"{D}/v1", "--source", f"{D}/main"], EXISTS),
]


@pytest.fixture
def lake(run: Run, home: Path) -> Path:
    """``demo``: main with a tag v1, and a branch dev that conflicts with main on a/x.csv."""
    run("repo", "create", "lakefs://demo")
    run("fs", "upload", "lakefs://demo/main/a/x.csv", "--source", "-", input=b"base\n")
    run("commit", "lakefs://demo/main", "-m", "base")
    run("tag", "create", "lakefs://demo/v1", "lakefs://demo/main")
    run("branch", "create", "lakefs://demo/dev", "--source", "lakefs://demo/main")
    run("fs", "upload", "lakefs://demo/dev/a/x.csv", "--source", "-", input=b"dev\n")
    run("commit", "lakefs://demo/dev", "-m", "dev")
    run("fs", "upload", "lakefs://demo/main/a/x.csv", "--source", "-", input=b"main\n")
    run("commit", "lakefs://demo/main", "-m", "main")
    return home


@pytest.mark.parametrize(("argv", "code"), [pytest.param(a, c, id=n) for n, a, c in CASES])
def test_bad_input_is_one_line_exit_code_and_no_change(
    run: Run, lake: Path, argv: list[str], code: int
) -> None:
    before = snapshot(lake)
    result = run(*argv, input=b"data\n", code=code)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert snapshot(lake) == before


@pytest.mark.parametrize(("argv", "code"), [pytest.param(a, c, id=n) for n, a, c in CASES[:6]])
def test_bad_input_with_json_is_a_json_error(js, lake: Path, argv: list[str], code: int) -> None:
    out = js(*argv, input=b"data\n", code=code)
    assert set(out) == {"code", "message", "details"} and out["message"]
