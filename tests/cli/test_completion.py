"""``lakectl completion bash|zsh|fish``: the scripts, and the answers they get through click's
completion environment (``_LAKECTL_COMPLETE=bash_complete``, ``COMP_WORDS``, ``COMP_CWORD``):
commands, options, and the repositories, refs and paths of the configured lake, embedded and
remote; nothing at all on any error. Each script is also run in its real shell (bash, zsh, fish) on a
pseudo-terminal, Tab pressed as a user presses it, through hive partition directories (``day=01``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.both import Lakectl, both, live
from tests.cli.shells import Terminal, install, require, terminal
from tests.server.conftest import Live, unique

__all__ = ["both", "live"]

ROOT = Path(__file__).resolve().parents[2]


def complete(cli: Lakectl, line: str, env: dict[str, str] | None = None) -> list[str]:
    """What lakectl answers for the command line ``line`` (the cursor at its end)."""
    words = line.split()
    index = len(words) if line.endswith(" ") else len(words) - 1
    env = {**(env or {}), "_LAKECTL_COMPLETE": "bash_complete", "COMP_WORDS": line, "COMP_CWORD": str(index)}
    result = cli(code=None, env=env)
    assert result.exit_code == 0 and result.stderr == "", (line, result.stderr, result.exception)
    return result.stdout.splitlines()


def test_commands_and_options_complete(both: Lakectl) -> None:
    assert complete(both, "lakectl re") == ["repo", "revert", "reset", "refs-dump", "refs-restore"]
    assert complete(both, "lakectl co") == ["commit", "config", "completion"]
    assert complete(both, "lakectl branch ") == ["create", "list", "show", "delete", "reset", "revert"]
    assert complete(both, "lakectl log --a") == ["--amount", "--after"]
    assert complete(both, "lakectl completion ") == ["bash", "zsh", "fish"]
    assert set(complete(both, "lakectl --")) >= {
        "--config",
        "--base-uri",
        "--no-color",
        "--log-level",
        "--verbose",
    }


def test_uris_complete_from_the_lake(both: Lakectl) -> None:
    repo = both.repo
    assert f"lakefs://{repo}" in complete(both, "lakectl repo show ")
    assert complete(both, f"lakectl repo show lakefs://{repo}") == [f"lakefs://{repo}"]
    # An argument that takes a ref gets the repository with a slash, to go on with the ref.
    assert complete(both, f"lakectl log lakefs://{repo}") == [f"lakefs://{repo}/"]
    # Branches for a branch, branches and tags for a ref, tags for a tag.
    assert complete(both, f"lakectl branch show lakefs://{repo}/") == [
        f"lakefs://{repo}/feat",
        f"lakefs://{repo}/main",
    ]
    assert complete(both, f"lakectl log lakefs://{repo}/") == [
        f"lakefs://{repo}/feat",
        f"lakefs://{repo}/main",
        f"lakefs://{repo}/v1",
    ]
    assert complete(both, f"lakectl tag show lakefs://{repo}/") == [f"lakefs://{repo}/v1"]
    assert complete(both, f"lakectl branch show lakefs://{repo}/ma") == [f"lakefs://{repo}/main"]
    # Paths: one level at a time, as a directory listing.
    assert complete(both, f"lakectl fs cat lakefs://{repo}/m") == [f"lakefs://{repo}/main/"]
    assert complete(both, f"lakectl fs cat lakefs://{repo}/main/") == [f"lakefs://{repo}/main/a/"]
    assert complete(both, f"lakectl fs cat lakefs://{repo}/v1/a/") == [f"lakefs://{repo}/v1/a/x.csv"]
    # The second argument of a command completes too (merge's destination branch).
    assert complete(both, f"lakectl merge lakefs://{repo}/feat lakefs://{repo}/m") == [
        f"lakefs://{repo}/main"
    ]
    # Options that take a URI complete as arguments do.
    assert complete(both, f"lakectl branch create lakefs://{repo}/new --source lakefs://{repo}/v") == [
        f"lakefs://{repo}/v1"
    ]
    # Not a lakefs:// URI: nothing (the shell completes file names).
    assert complete(both, "lakectl repo show demo") == []


def test_completion_is_quiet_on_any_error(both: Lakectl, tmp_path: Path) -> None:
    repo = both.repo
    assert complete(both, "lakectl branch show lakefs://no-such-repo/") == []
    assert complete(both, f"lakectl fs cat lakefs://{repo}/no-such-ref/") == []
    unreachable = {
        "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9",
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "k",
    }
    assert complete(both, "lakectl repo show lakefs://", env=unreachable) == []
    broken = tmp_path / "broken.yaml"
    broken.write_text("server: [\n")
    no_server = {"LAKECTL_SERVER_ENDPOINT_URL": "", "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": ""}
    assert (
        complete(both, "lakectl repo show lakefs://", env={"LAKECTL_CONFIG": str(broken), **no_server}) == []
    )
    assert complete(both, f"lakectl -c {tmp_path / 'missing.yaml'} repo show lakefs://") == []
    # Hostile words on the line are just words that match nothing.
    assert complete(both, "lakectl repo show lakefs://\x1b[2J") == []
    # A TAB where no lake exists offers nothing and creates none.
    nowhere = tmp_path / "no-lake-here"
    assert (
        complete(both, "lakectl repo show lakefs://", env={"LAKECTL_HOME": str(nowhere), **no_server}) == []
    )
    assert not nowhere.exists()


def test_the_config_option_on_the_line_is_the_one_completion_asks(live: Live, tmp_path: Path) -> None:
    """``lakectl -c FILE ... <TAB>``: the file names the server; without it, the empty embedded lake."""
    cli = Lakectl("remote", live.cli_env(tmp_path), tmp_path, live=live)
    repo = unique("c")
    cli("repo", "create", f"lakefs://{repo}")
    chosen = tmp_path / "chosen.yaml"
    chosen.write_text(
        f"credentials:\n  access_key_id: {live.key_id}\n  secret_access_key: {live.secret}\n"
        f"server:\n  endpoint_url: {live.url}\n"
    )
    env = {
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "",
        "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "",
    }
    assert complete(cli, f"lakectl repo show lakefs://{repo}", env=env) == []
    assert complete(cli, f"lakectl -c {chosen} repo show lakefs://{repo}", env=env) == [f"lakefs://{repo}"]


def test_scripts_for_each_shell(both: Lakectl) -> None:
    bash = both("completion", "bash").stdout
    assert "complete -o default -F _lakectl_completion lakectl" in bash
    assert "_LAKECTL_COMPLETE=bash_complete" in bash and "COMP_CWORD" in bash
    zsh = both("completion", "zsh").stdout
    assert zsh.startswith("#compdef lakectl\n") and "_LAKECTL_COMPLETE=zsh_complete" in zsh
    fish = both("completion", "fish").stdout
    assert "complete --no-files --command lakectl" in fish and "_LAKECTL_COMPLETE=fish_complete" in fish
    assert both.js("completion", "fish") == {"shell": "fish", "script": fish}
    bad = both("completion", "pwsh", code=2)
    assert bad.stderr == "error: unsupported shell 'pwsh': expected one of bash, zsh, fish\n"
    # The scripts' own protocol (the shells themselves are driven below).
    for shell in ("zsh", "fish"):
        env = {"_LAKECTL_COMPLETE": f"{shell}_complete", "COMP_WORDS": "lakectl ta", "COMP_CWORD": "1"}
        assert both(code=None, env=env).stdout == "tag\ntables\n"  # in the help's order


# -- in the real shells, against a lake with hive partitions -------------------------------

PARTITIONED = [
    "data/events/day=00/part.csv",
    "data/events/day=01/k=v=w.csv",
    "data/events/day=01/x=a:b/y.csv",
    "data/events/day=10/part.csv",
    "data/region=eu/z.csv",
]
URI = "lakectl fs ls lakefs://lake/main/data"
LIST_KEYS = {"bash": "\t\t", "zsh": "\t"}
"""The keys that list the choices when Tab can add nothing (fish shows them at once)."""


@pytest.fixture
def shell_env(tmp_path: Path) -> dict[str, str]:
    """An embedded lake holding PARTITIONED on lake/main; the environment a shell runs lakectl in,
    the lakectl on PATH importing this checkout."""
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "lakectl").exists(), f"no lakectl executable beside {sys.executable}"
    env = {
        "LAKECTL_HOME": str(tmp_path / "lake"),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_COMMITTER": "tester",
        "LAKECTL_BASE_URI": "",
    }
    cli = Lakectl("embedded", env, tmp_path)
    cli("repo", "create", "lakefs://lake")
    for path in PARTITIONED:
        cli("fs", "upload", f"lakefs://lake/main/{path}", "-s", "-", input=b"1\n")
    cli("commit", "lakefs://lake/main", "-m", "partitions")
    return {
        **env,
        "PATH": f"{bin_dir}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm",
        "LANG": "C.UTF-8",
    }


@pytest.fixture(params=["bash", "zsh", "fish"])
def term(request: pytest.FixtureRequest, shell_env: dict[str, str], tmp_path: Path) -> Iterator[Terminal]:
    """The shell, interactive, in a directory holding one local file (``notes.txt``): a Tab that
    falls back to local file names shows it."""
    here = tmp_path / "cwd"
    here.mkdir()
    (here / "notes.txt").write_text("a local file\n")
    with terminal(request.param, tmp_path / "home", shell_env, here) as opened:
        yield opened


def test_tab_goes_step_by_step_through_partition_directories(term: Terminal) -> None:
    """``…/ev`` Tab, Tab gives ``…/events/day=``; the choices there are the partitions (not the
    local files), then the files inside. A directory gets no space after it, a whole path does."""
    assert term.line(f"{URI}/ev\t") == f"{URI}/events/"
    assert term.type("\t")[0] == f"{URI}/events/day="
    if term.shell in LIST_KEYS:  # fish shows its choices at once; see the fish test below
        line, screen = term.type(LIST_KEYS[term.shell])
        assert line == f"{URI}/events/day="
        # bash replaces, and so lists, only what follows the '='.
        shown = "" if term.shell == "bash" else "lakefs://lake/main/data/events/day="
        assert all(f"{shown}{day}/" in screen for day in ("00", "01", "10")), screen
        assert "notes.txt" not in screen
    assert term.type("1\t")[0] == f"{URI}/events/day=10/"
    assert term.type("\t")[0] == f"{URI}/events/day=10/part.csv "


def test_tab_right_after_an_equals_sign_or_a_colon(term: Terminal) -> None:
    """The word ends with '=' or ':' (where bash's own word, the part it replaces, is empty)."""
    assert term.line(f"{URI}/region=\t") == f"{URI}/region=eu/"
    assert term.line(f"{URI}/events/day=01/x=a:\t") == f"{URI}/events/day=01/x=a:b/"
    assert term.line("lakectl fs ls lakefs:\t") == "lakectl fs ls lakefs://lake/"


def test_names_holding_equals_signs_and_colons_complete_whole(term: Terminal) -> None:
    assert term.line(f"{URI}/events/day=01/k\t") == f"{URI}/events/day=01/k=v=w.csv "
    assert term.line(f"{URI}/events/day=01/x\t") == f"{URI}/events/day=01/x=a:b/"
    assert term.type("\t")[0] == f"{URI}/events/day=01/x=a:b/y.csv "
    # Commands complete as before, a space after a whole word.
    assert term.line("lakectl completion b\t") == "lakectl completion bash "


def test_fish_lists_partition_directories(shell_env: dict[str, str], tmp_path: Path) -> None:
    """fish's own completion entry point lists the choices after ``day=`` (its Tab shows them in
    a pager, which a second Tab would step into)."""
    fish = require("fish")
    _, env = install("fish", tmp_path / "home", shell_env)
    listed = subprocess.run(
        [fish, "-c", f"complete -C'{URI}/events/day='"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        f"lakefs://lake/main/data/events/day={d}/" for d in ("00", "01", "10")
    ]
