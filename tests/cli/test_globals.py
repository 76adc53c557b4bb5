"""The root command's global options, before the sub-command as in lakeFS's lakectl: -c/--config,
--base-uri (and $LAKECTL_BASE_URI), --no-color, --log-level and --verbose; embedded and remote."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.both import Lakectl, both, live

__all__ = ["both", "live"]


def test_base_uri_prefixes_relative_uris_as_lakefs_does(both: Lakectl) -> None:
    repo = both.repo
    # lakeFS's rule: plain concatenation, unless the argument is a full lakefs:// URI.
    assert both("--base-uri", f"lakefs://{repo}", "fs", "cat", "/main/a/x.csv").stdout == "1,2\n"
    assert both("--base-uri", f"lakefs://{repo}/", "fs", "cat", "main/a/x.csv").stdout == "1,2\n"
    assert both.js("--base-uri", "lakefs://", "repo", "show", repo)["id"] == repo
    assert both.js("--base-uri", f"lakefs://{repo}/", "branch", "show", "feat")["id"] == "feat"
    assert [b["id"] for b in both.js("--base-uri", f"lakefs://{repo}", "branch", "list", "")] == [
        "feat",
        "main",
    ]
    full = both.js("--base-uri", "lakefs://elsewhere/", "tag", "show", f"lakefs://{repo}/v1")
    assert full["id"] == "v1", "a full lakefs:// URI is taken as it is"
    merged = both.js("--base-uri", f"lakefs://{repo}/", "diff", "main", "feat")
    assert merged == []

    # $LAKECTL_BASE_URI is the default; the option wins over it.
    env = {"LAKECTL_BASE_URI": f"lakefs://{repo}/main/"}
    assert both("fs", "cat", "a/x.csv", env=env).stdout == "1,2\n"
    assert both("--base-uri", f"lakefs://{repo}/feat/", "fs", "cat", "a/x.csv", env=env).stdout == "1,2\n"


def test_base_uri_errors_are_one_line(both: Lakectl) -> None:
    bad = both("--base-uri", "s3://bucket/", "repo", "show", "x", code=2)
    assert bad.stderr == "error: --base-uri 's3://bucket/' must start with lakefs://\n"
    # Without a base URI, a relative argument is an invalid URI, as before.
    assert both.js("repo", "show", both.repo, code=2)["code"] == "invalid_uri"
    # The resolved URI is what the message names.
    missing = both("--base-uri", f"lakefs://{both.repo}/", "branch", "show", "nope", code=3)
    assert missing.stderr == f"error: branch 'nope' not found in repository '{both.repo}'\n"


def test_config_option_names_the_configuration_file(both: Lakectl, tmp_path: Path) -> None:
    """-c FILE is read instead of $LAKECTL_CONFIG (a remote configuration, for the remote case;
    the committer's name, for the embedded lake); it must exist, and it holds for one run only."""
    missing = tmp_path / "missing.yaml"
    refused = both("-c", str(missing), "repo", "list", code=3)
    assert refused.stderr == (
        f"error: config file {missing} not found: run 'lakectl -c {missing} config' to create it\n"
    )
    chosen = tmp_path / "chosen.yaml"
    if both.live is not None:
        # Only the file says where the server is: the environment of this run names none.
        env = {
            "LAKECTL_SERVER_ENDPOINT_URL": "",
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "",
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "",
        }
        chosen.write_text(
            "credentials:\n"
            f"  access_key_id: {both.live.key_id}\n"
            f"  secret_access_key: {both.live.secret}\n"
            f"server:\n  endpoint_url: {both.live.url}\n"
        )
        repos = both.js("--config", str(chosen), "repo", "list", env=env)
        assert both.repo in [r["id"] for r in repos]
        # The next run, without -c, is back to $LAKECTL_CONFIG: the embedded lake of LAKECTL_HOME.
        assert both.repo not in [r["id"] for r in both.js("repo", "list", env=env)]
    else:
        chosen.write_text("user:\n  name: Ada Lovelace\n")
        env = {"LAKECTL_COMMITTER": ""}
        both("fs", "upload", f"lakefs://{both.repo}/main/b", "-s", "-", input=b"b")
        made = both.js("-c", str(chosen), "commit", f"lakefs://{both.repo}/main", "-m", "m", env=env)
        assert made["committer"] == "Ada Lovelace"
        assert (
            both.js("commit", f"lakefs://{both.repo}/main", "-m", "m", "--allow-empty", env=env)["committer"]
            != "Ada Lovelace"
        ), "-c holds for one run"
    broken = tmp_path / "broken.yaml"
    broken.write_text("server: [\n")
    bad = both("-c", str(broken), "repo", "list", code=2)
    assert bad.stderr.startswith(f"error: invalid configuration {broken}: ") and bad.stderr.count("\n") == 1


def test_no_color_drops_every_terminal_style(both: Lakectl) -> None:
    forced = {"FORCE_COLOR": "1", "NO_COLOR": ""}  # rich styles even a pipe when forced
    styled = both("repo", "list", env=forced).stdout
    assert "\x1b[" in styled
    plain = both("--no-color", "repo", "list", env=forced).stdout
    assert "\x1b[" not in plain and both.repo in plain
    assert both("repo", "list", env={**forced, "NO_COLOR": "1"}).stdout == plain, "$NO_COLOR is --no-color"
    assert plain.splitlines()[0].split() == [
        "REPOSITORY",
        "CREATION",
        "DATE",
        "DEFAULT",
        "BRANCH",
        "STORAGE",
        "NAMESPACE",
    ]


def test_log_level_and_verbose_log_to_stderr_only(both: Lakectl) -> None:
    quiet = both("repo", "list", "--json")
    assert quiet.stderr == ""
    loud = both("--log-level", "debug", "repo", "list", "--json")
    assert json.loads(loud.stdout) == json.loads(quiet.stdout), "stdout stays data"
    assert "INFO lakectl.cli: configuration file " in loud.stderr
    if both.mode == "remote":
        assert f"INFO lakectl.cli: lake: the lakectl server at {both.live.url.removesuffix('/api/v1')}" in (
            loud.stderr
        )
        assert "HTTP Request: GET " in loud.stderr and "/api/v1/repositories" in loud.stderr
    else:
        assert "INFO lakectl.cli: lake: embedded" in loud.stderr
    verbose = both("--verbose", "repo", "list", "--json")
    assert "lakectl.cli: lake: " in verbose.stderr
    assert "DEBUG" not in verbose.stderr, "--verbose is info, not debug"
    errors_only = both("--log-level", "ERROR", "repo", "list", "--json")
    assert errors_only.stderr == ""
    bad = both("--log-level", "loud", "repo", "list", code=2)
    assert bad.stderr.startswith("error: --log-level 'loud' is not one of none, trace, debug, info")
    # The next run logs nothing again: the handler went with the run that installed it.
    assert both("repo", "list", "--json").stderr == ""


def test_log_format_and_outputs_as_lakefs(both: Lakectl) -> None:
    as_json = both("--log-level", "info", "--log-format", "json", "repo", "list", "--json")
    records = [json.loads(line) for line in as_json.stderr.splitlines()]
    lake = next(r for r in records if r["msg"].startswith("lake: "))
    assert (lake["level"], lake["logger"]) == ("info", "lakectl.cli") and lake["time"]
    log = both.work / "lakectl.log"
    to_file = both("--verbose", "--log-output", str(log), "--log-output", str(log), "repo", "list", "--json")
    assert to_file.stderr == "" and json.loads(to_file.stdout) is not None
    lines = log.read_text().splitlines()
    assert sum("lakectl.cli: lake: " in line for line in lines) == 2, "each output gets every record"
    to_stdout = both("--log-level", "info", "--log-output", "-", "repo", "list")
    assert "lakectl.cli: lake: " in to_stdout.stdout and to_stdout.stderr == ""
    bad = both(
        "--log-level", "info", "--log-output", str(both.work / "no" / "such.log"), "repo", "list", code=2
    )
    assert (
        bad.stderr
        == f"error: cannot open the log output {both.work / 'no' / 'such.log'}: No such file or directory\n"
    )
    assert both("--log-format", "xml", "repo", "list", code=2).stderr == (
        "error: --log-format 'xml' is not one of text, json\n"
    )


def test_global_options_belong_before_the_command(both: Lakectl) -> None:
    """As lakeFS's persistent flags are given (lakectl --base-uri ... fs cat ...); after the
    command they are that command's unknown options, a usage error."""
    assert "No such option" in both("repo", "list", "--no-color", code=2).stderr
    help_text = both("--help").stdout
    for flag in (
        "-c, --config",
        "--base-uri",
        "--no-color",
        "--log-level",
        "--log-format",
        "--log-output",
        "--verbose",
    ):
        assert flag in help_text
    assert "LAKECTL_BASE_URI" in help_text
