"""Start-up of the read-only commands that touch one object: what they import, never how long.

``fs stat``, ``fs cat``, ``show commit`` and ``branch list`` on the embedded lake must start
within 150 ms (benchmarks/bench_cli_latency.py measures it, with its floors). A clock in a test
fails on a busy CI machine, so this checks what keeps them fast instead: each runs in a fresh
interpreter, and the modules it imported are listed. None of the heavy libraries it has no use
for may be among them (the server's, the remote client's, rich on a pipe, PyYAML without a
configuration file), nor lakectl's modules of other verbs, nor pyarrow: reading a committed
object's row reads its tree's files with zlib. The reader of ranges of the first format
(Parquet), which avoids ``pyarrow.parquet``, is held to its ``ParquetFile`` at the end.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.cli import render
from tests.unit.firstformat import range_file

# Run the console script's entry point, then list what was imported: JSON on stderr's last line.
_PROBE = """
import json, sys
from lakectl.cli.app import main
sys.argv = ["lakectl", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

NEVER = (
    # The server, the remote client and what only they use.
    "fastapi",
    "starlette",
    "pydantic",
    "uvicorn",
    "httpx",
    "jinja2",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "boto3",
    "botocore",
    "cryptography",
    "lakectl.client.remote",
    "server",
    # Output: these commands print fields, or a plain table on a pipe.
    "rich",
    # No configuration file here: nothing to parse.
    "yaml",
    # pandas (pyarrow: NO_PYARROW below).
    "pandas",
    # lakectl's modules of other verbs: what writes, diffs, merges or runs actions.
    "lakectl.core.workflow.actionruns",
    "lakectl.core.workflow.actions",
    "lakectl.core.workflow.hooks",
    "lakectl.core.protection",
    "lakectl.core.refdiff",
    "lakectl.core.graph.merge",
    "lakectl.core.upkeep.gc",
    "lakectl.core.multipart",
    "lakectl.core.annotate",
    "lakectl.core.workflow.pulls",
    "lakectl.core.manifests",
    "lakectl.core.upkeep.refsdump",
    "lakectl.core.tablediff",
    "lakectl.core.tablemerge",
    "lakectl.core.importing.tasks",
    "lakectl.core.upkeep.fsck",
    "lakectl.spark",
    "lakectl.sparkjobs",
)
"""Modules none of the four commands may import (a name covers its submodules)."""

NO_PYARROW = ("pyarrow", "numpy")
"""Never imported either: a range, a page or a root decodes with zlib (docs/decisions/0016)."""


def _imported(env: dict[str, str], *args: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env, timeout=120
    )
    report = json.loads(out.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), f"lakectl {' '.join(args)} failed:\n{out.stderr}"
    return set(report["modules"])


def _found(modules: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == b or m.startswith(b + ".") for b in banned))


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], str]:
    """A lake with a repository, a few commits and a small object; the environment to reach it
    (the embedded lake, no configuration file) and the last commit's id."""
    tmp = tmp_path_factory.mktemp("startup")
    env = {
        **os.environ,
        "LAKECTL_HOME": str(tmp / "lake"),
        "LAKECTL_CONFIG": str(tmp / "no-config.yaml"),
        "LAKECTL_COMMITTER": "tester",
    }
    for name in ("LAKECTL_SERVER_ENDPOINT_URL", "FORCE_COLOR", "TTY_COMPATIBLE"):
        env.pop(name, None)
    lakectl = [sys.executable, "-c", "from lakectl.cli.app import main; main()"]

    def run(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run([*lakectl, *args], input=stdin, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("repo", "create", "lakefs://startup")
    for i in range(3):
        run("fs", "upload", "lakefs://startup/main/x", "-s", "-", stdin=f"hello {i}")
        run("commit", "lakefs://startup/main", "-m", f"commit {i}")
    head = json.loads(run("branch", "show", "lakefs://startup/main", "--json"))["commit_id"]
    return env, head


@pytest.mark.parametrize(
    ("command", "reads_a_range"),
    [
        (("fs", "stat", "lakefs://startup/main/x"), True),
        (("fs", "cat", "lakefs://startup/main/x"), True),
        (("show", "commit", "lakefs://startup/{head}"), False),
        (("branch", "list", "lakefs://startup"), False),
    ],
    ids=["fs stat", "fs cat", "show commit", "branch list"],
)
def test_read_only_commands_import_only_what_they_use(
    lake: tuple[dict[str, str], str], command: tuple[str, ...], reads_a_range: bool
) -> None:
    env, head = lake
    modules = _imported(env, *(arg.format(head=head) for arg in command))
    assert "lakectl.core.porcelain" in modules  # the probe ran the command on the embedded lake
    assert _found(modules, NEVER) == []
    if reads_a_range:
        assert "lakectl.core.graph.ranges" in modules  # the probe read the object's range
    assert _found(modules, NO_PYARROW) == []


def test_a_noun_builds_only_the_verb_that_runs() -> None:
    """``lakectl fs stat`` builds ``stat`` alone; anything else (help, a typo) the whole noun."""
    from lakectl.cli.app import load_command

    every = list(load_command("fs").commands)
    assert len(every) > 1
    assert list(load_command("fs", "stat").commands) == ["stat"]
    assert list(load_command("fs", "--help").commands) == every
    assert list(load_command("fs", "sta").commands) == every
    assert list(load_command("actions", "validate").commands) == ["validate", "runs"]  # groups stay


def test_a_verb_built_alone_behaves_as_before(lake: tuple[dict[str, str], str]) -> None:
    """Help and usage errors of a verb, and a typo's suggestion, as with the whole noun built."""
    env, _ = lake
    lakectl = [sys.executable, "-c", "from lakectl.cli.app import main; main()"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*lakectl, *args], capture_output=True, text=True, env=env)

    assert run("fs", "stat", "--help").stdout.startswith("Usage: lakectl fs stat [OPTIONS] {src}")
    missing = run("fs", "stat")
    assert missing.returncode == 2 and "Missing argument 'src'" in missing.stderr
    typo = run("fs", "sta", "lakefs://startup/main/x")
    assert typo.returncode == 2 and "Did you mean 'stat'?" in typo.stderr
    listed = run("fs", "--help").stdout
    assert all(verb in listed for verb in ("upload", "download", "cat", "stat", "ls", "rm"))


def test_a_configuration_file_is_parsed_once(
    lake: tuple[dict[str, str], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend and the committer each ask the file for keys: one parse serves them all."""
    from lakectl import config

    path = tmp_path / "lakectl.yaml"
    path.write_text("user:\n  name: ada\n")
    monkeypatch.setenv("LAKECTL_CONFIG", str(path))
    parses: list[str] = []
    real = config._parse
    monkeypatch.setattr(config, "_parse", lambda p, text: parses.append(p) or real(p, text))
    assert config.get("server.endpoint_url") is None
    assert config.get("user.name") == "ada"
    assert config.load() == {"user": {"name": "ada"}}
    assert parses == [str(path)]
    path.write_text("user:\n  name: bob\n")  # rewritten: read again, whatever its timestamp
    assert config.get("user.name") == "bob"
    assert len(parses) == 2


# -- the plain table: rich's output, without importing rich ---------------------------------

_CELL = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)


def _rich(columns: list[str], rows: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> str:
    """What ``render.table`` prints through rich."""
    rich = io.StringIO()
    with monkeypatch.context() as m, redirect_stdout(rich):
        m.setattr(render, "_plain_table", lambda columns, cells: False)
        render.table(columns, rows)
    return rich.getvalue()


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(
            st.lists(_CELL.filter(lambda c: "[" not in c and ":" not in c), min_size=n, max_size=n),
            st.lists(st.lists(_CELL, min_size=n, max_size=n), max_size=6),
        )
    )
)
def test_the_plain_table_is_what_rich_prints_on_a_pipe(table: tuple[list[str], list[list[str]]]) -> None:
    columns, rows = table
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):
            monkeypatch.delenv(name, raising=False)
        with redirect_stdout(io.StringIO()) as plain:
            assert render._plain_table(columns, rows)
        assert plain.getvalue() == _rich(columns, rows, monkeypatch)


@pytest.mark.parametrize(
    ("env", "plain"),
    [
        ({}, True),
        ({"FORCE_COLOR": "1"}, False),  # rich would draw a bold header on the pipe
        ({"FORCE_COLOR": ""}, True),
        ({"FORCE_COLOR": "1", "TERM": "dumb"}, True),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, True),
        ({"TTY_COMPATIBLE": "1"}, False),
        ({"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, True),
    ],
)
def test_the_plain_table_is_used_only_where_rich_would_not_style(
    env: dict[str, str], plain: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with redirect_stdout(io.StringIO()) as out:
        assert render._plain_table(["NAME", "COMMIT ID"], [["main", "abc"]]) is plain
    assert out.getvalue() == ("NAME  COMMIT ID\nmain  abc\n" if plain else "")
    if not plain:  # and rich's own output then does style it
        assert "\x1b[1m" in _rich(["NAME", "COMMIT ID"], [["main", "abc"]], monkeypatch)


@pytest.mark.parametrize(
    ("columns", "rows"),
    [
        (["NAME"], [["naïve"]]),  # not ASCII: rich measures cells
        (["NAME"], [["a\tb"]]),  # a tab rich expands
        (["NAME"], [["two\nlines"]]),
        (["[b]NAME"], [["x"]]),  # a header rich reads as markup
        (["NAME", "ID"], [["only one cell"]]),
    ],
)
def test_what_the_plain_table_leaves_to_rich(
    columns: list[str], rows: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    with redirect_stdout(io.StringIO()) as out:
        assert render._plain_table(columns, rows) is False
    assert out.getvalue() == ""


# -- ranges of the first format, read without pyarrow.parquet: as ParquetFile reads them -------


class _Blocks(dict[str, bytes]):
    def put(self, locator: str, data: bytes) -> None:
        self[locator] = data


_PATHS = st.lists(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20),
    min_size=1,
    max_size=40,
)
"""Paths as they may be stored: any text but NUL (and lone surrogates, which are not UTF-8)."""


def _first_format(paths: list[str]) -> bytes:
    rows = [(i, f"{i:032x}", f"{i:032x}+{i}", i * 7, "text/plain", "") for i, _ in enumerate(paths)]
    return range_file(list(zip(paths, rows, strict=True)))


@settings(max_examples=50, deadline=None)
@given(_PATHS.map(lambda paths: sorted(set(paths))))
def test_a_range_of_the_first_format_reads_as_parquetfile_reads_it(paths: list[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakectl.core.graph.ranges import RangeStore, _decode

    data = _first_format(paths)
    blocks = _Blocks({"r1": data})
    for columns in (None, ["path"], ["locators"], ["size", "path"]):
        expected = pq.ParquetFile(pa.BufferReader(data)).read(columns=columns)
        assert _decode(data, "r1", columns) == expected.to_pydict()
    assert RangeStore(blocks).read_range("r1").paths == paths  # type: ignore[arg-type]
    assert RangeStore(blocks).read_paths("r1") == paths  # type: ignore[arg-type]


@settings(max_examples=50, deadline=None)
@given(_PATHS.map(lambda paths: sorted(set(paths))))
def test_a_range_reads_back_what_was_written(paths: list[str]) -> None:
    from lakectl.core.graph.ranges import RangeStore, _decode

    store = RangeStore(_Blocks())  # type: ignore[arg-type]
    rows = [(i, f"{i:032x}", f"{i:032x}+{i}", i * 7, "text/plain", "{}") for i, _ in enumerate(paths)]
    info = store.write_range(paths, rows)
    data = store.blocks.get(info.id)
    table = _decode(data, info.id)
    assert list(table) == ["path", "size", "checksum", "locators", "mtime", "content_type", "metadata"]
    assert table["path"] == paths
    assert list(zip(*list(table.values())[1:], strict=True)) == rows
    assert RangeStore(store.blocks).read_range(info.id).rows == rows  # decoded, not cached
    assert RangeStore(store.blocks).read_paths(info.id) == paths
    assert RangeStore(store.blocks).read_locators(info.id) == [r[2] for r in rows]


def test_a_value_holding_a_nul_is_refused_not_written() -> None:
    from lakectl.core.graph.ranges import RangeStore

    store = RangeStore(_Blocks())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NUL"):
        store.write_range(["a\x00b"], [(1, "c", "l", 2, "t", "")])
    assert store.blocks == {}


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (b"", "not a range, page or root"),
        (b"not parquet at all", "not a range, page or root"),
        (b"PAR1" + bytes(20) + b"PAR1", "is not valid Parquet"),
        (b"LKT1" + (100).to_bytes(8, "little") + b"not zstd", "cannot be decoded"),
    ],
)
def test_a_damaged_range_is_a_corrupt_block(damage: bytes, message: str) -> None:
    from lakectl.core.graph.ranges import _decode
    from lakectl.errors import CorruptBlock

    with pytest.raises(CorruptBlock, match=message):
        _decode(damage, "r1")


@pytest.mark.parametrize("first_format", [False, True])
def test_a_missing_column_is_a_corrupt_block(first_format: bool) -> None:
    from lakectl.core.graph.ranges import RangeStore, _decode
    from lakectl.errors import CorruptBlock

    store = RangeStore(_Blocks())  # type: ignore[arg-type]
    info = store.write_range(["a"], [(1, "c", "l", 2, "t", "")])
    data = _first_format(["a"]) if first_format else store.blocks.get(info.id)
    with pytest.raises(CorruptBlock):
        _decode(data, info.id, ["no such column"])
