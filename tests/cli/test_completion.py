"""``lakectl completion bash|zsh|fish``: the scripts, and the answers they get through click's
completion environment (``_LAKECTL_COMPLETE=bash_complete``, ``COMP_WORDS``, ``COMP_CWORD``):
commands, options, and the repositories, refs and paths of the configured lake, embedded and
remote; nothing at all on any error. The bash script is also run in a real bash."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.both import Lakectl, both, live
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
    # The scripts' own protocol, for the zsh and fish scripts that cannot run here.
    for shell in ("zsh", "fish"):
        env = {"_LAKECTL_COMPLETE": f"{shell}_complete", "COMP_WORDS": "lakectl ta", "COMP_CWORD": "1"}
        assert both(code=None, env=env).stdout == "tag\n"


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_bash_script_in_a_real_bash(both: Lakectl, tmp_path: Path) -> None:
    """Source the script in bash and call its function as readline would, with bash's own
    splitting of lakefs://repo at the colon; COMPREPLY must hold what replaces the current word."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "lakectl"
    wrapper.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -c "from lakectl.cli.app import main; main()" "$@"\n'
    )
    wrapper.chmod(0o755)
    script = tmp_path / "lakectl.bash"
    script.write_text(both("completion", "bash").stdout)
    repo = both.repo
    probe = f"""
source {script}
probe() {{  # $1: the line up to the cursor; bash's own word splitting, COMP_WORDBREAKS included
    COMP_LINE="$1"; COMP_POINT=${{#1}}
    local split; split=$(printf '%s' "$1" | sed -e 's/:/ : /g' -e 's/  */ /g')
    read -ra COMP_WORDS <<< "$split"
    [[ $1 == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
    COMPREPLY=()
    _lakectl_completion lakectl "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
    printf '%s|' "${{COMPREPLY[@]}}"; echo
}}
probe 'lakectl bra'
probe 'lakectl branch show lakefs://{repo}/'
probe 'lakectl branch show lakefs:'
probe 'lakectl fs ls lakefs://{repo}/main/'
probe 'lakectl fs ls '
complete -p lakectl
"""
    env = {
        **os.environ,
        **both.env,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    out = subprocess.run(
        ["bash", "--norc", "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "branch|branch-protect|"
    # bash replaces only the word after the last colon: the answers start there.
    assert lines[1] == f"//{repo}/feat|//{repo}/main|"
    assert f"://{repo}/|" in lines[2]  # the current word is ":": the answer goes on from it
    assert lines[3] == f"//{repo}/main/a/|"
    assert f"lakefs://{repo}/|" in lines[4]
    assert lines[5] == "complete -o default -F _lakectl_completion lakectl"
