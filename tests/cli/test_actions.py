"""lakeFS actions: action files under _lakefs_actions/ gate commits, merges, branches and tags
with webhook and command hooks; runs and hook outputs are listed by ``lakectl actions``.

Every test runs embedded and against a live server (whose command hooks this module's server
enables: ``actions.command.enabled``); webhooks go to a real HTTP server on 127.0.0.1, command
hooks run a real Python program."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from server.config import load_settings
from tests.cli.both import Lakectl, both
from tests.hookd import Hookd, hookd
from tests.server.conftest import LOOPBACK_HOOKS, Live, serve

__all__ = ["both", "hookd"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """This module's server: command hooks enabled, as an operator would enable them, and
    webhooks to 127.0.0.1 allowed (where the tests' receivers listen)."""
    env = {"LAKECTL_SERVER_ACTIONS_COMMAND_ENABLED": "true", **LOOPBACK_HOOKS}
    with serve(load_settings(None, str(tmp_path_factory.mktemp("server-actions")), environ=env)) as server:
        yield server


def put_action(cli: Lakectl, branch: str, name: str, action: dict[str, Any], commit: bool = True) -> None:
    """Store an action file (JSON is YAML) on ``branch``, committed unless asked not to."""
    uri = f"lakefs://{cli.repo}/{branch}/_lakefs_actions/{name}.yaml"
    cli("fs", "upload", uri, "-s", "-", input=json.dumps(action).encode())
    if commit:
        cli("commit", f"lakefs://{cli.repo}/{branch}", "-m", f"action {name}")


def webhook(hook_id: str, url: str, **props: Any) -> dict[str, Any]:
    return {"id": hook_id, "type": "webhook", "properties": {"url": url, **props}}


def command(hook_id: str, code: str) -> dict[str, Any]:
    return {"id": hook_id, "type": "command", "properties": {"command": [sys.executable, "-c", code]}}


def head(cli: Lakectl, branch: str) -> str:
    return str(cli.js("branch", "show", f"lakefs://{cli.repo}/{branch}")["commit_id"])


def runs(cli: Lakectl, *args: str) -> list[dict[str, Any]]:
    return list(cli.js("actions", "runs", "list", f"lakefs://{cli.repo}", *args))


def test_failing_pre_commit_webhook_refuses_the_commit_with_the_hooks_output(
    both: Lakectl, hookd: Hookd
) -> None:
    cli = both
    on = {"pre-commit": {"branches": ["feat"]}}
    hook = webhook("check_schema", hookd.url, query_params={"table": "orders", "cols": ["a", "b"]})
    put_action(cli, "feat", "gate", {"name": "Gate", "on": on, "hooks": [hook]})
    before = head(cli, "feat")
    hookd.status, hookd.body = 400, b"column 'amount' is missing"
    cli("fs", "upload", f"lakefs://{cli.repo}/feat/t/part-0.csv", "-s", "-", input=b"id\n1\n")

    refused = cli("commit", f"lakefs://{cli.repo}/feat", "-m", "bad data", "--meta", "k=v", code=6)

    assert refused.stderr.startswith("error: pre-commit hook aborted, run id '")
    assert "check_schema" in refused.stderr and "column 'amount' is missing" in refused.stderr
    assert refused.stdout == ""
    assert head(cli, "feat") == before  # nothing committed, the change still staged
    assert [c["path"] for c in cli.js("diff", f"lakefs://{cli.repo}/feat")] == ["t/part-0.csv"]
    sent = hookd.received[-1]
    event = sent["event"]
    assert event["event_type"] == "pre-commit" and event["action_name"] == "Gate"
    assert (event["repository_id"], event["branch_id"], event["source_ref"]) == (cli.repo, "feat", "feat")
    assert (event["hook_id"], event["commit_message"], event["commit_metadata"]) == (
        "check_schema",
        "bad data",
        {"k": "v"},
    )
    assert sent["query"] == {"table": ["orders"], "cols": ["a", "b"]}
    err = json.loads(cli("commit", f"lakefs://{cli.repo}/feat", "-m", "again", "--json", code=6).stdout)
    assert err["code"] == "hook_failed" and err["details"]["hook_id"] == "check_schema"


def test_a_run_is_recorded_with_its_commit_hooks_and_output(both: Lakectl, hookd: Hookd) -> None:
    cli = both
    on = {"pre-commit": None, "post-commit": None}
    put_action(cli, "feat", "notify", {"on": on, "hooks": [webhook("tell", hookd.url)]}, commit=False)
    done = cli.js("commit", f"lakefs://{cli.repo}/feat", "-m", "with actions")

    found = runs(cli, "--branch", "feat")
    assert [r["event_type"] for r in found] == ["post-commit", "pre-commit"]  # newest first
    assert {r["commit_id"] for r in found} == {done["id"]}  # the pre-commit run learns its commit
    assert {r["status"] for r in found} == {"completed"}
    assert [r["run_id"] for r in runs(cli, "--commit", done["id"])] == [r["run_id"] for r in found]
    assert runs(cli, "--branch", "main") == []
    pre = found[1]
    described = cli.js("actions", "runs", "describe", f"lakefs://{cli.repo}", pre["run_id"])
    assert described["run"] == pre
    assert [(h["hook_run_id"], h["hook_id"], h["action"], h["status"]) for h in described["hooks"]] == [
        ("0000_0000", "tell", "notify.yaml", "completed")
    ]
    out = cli("cat-hook-output", f"lakefs://{cli.repo}", pre["run_id"], "0000_0000").stdout
    assert f"POST {hookd.url}" in out and "200 OK" in out
    shown = cli("actions", "runs", "list", f"lakefs://{cli.repo}").stdout
    columns = "Run ID Event Branch Start Time End Time Commit ID Status"
    assert shown.splitlines()[0].split() == columns.split()
    page = cli("actions", "runs", "list", f"lakefs://{cli.repo}", "--amount", "1")
    assert f'--after "{found[0]["run_id"]}"' in page.stderr
    rest = runs(cli, "--after", found[0]["run_id"])
    assert rest == found[1:]


def test_a_failing_pre_merge_command_leaves_the_destination_byte_for_byte(both: Lakectl) -> None:
    cli = both
    code = (
        "import json, os, sys; e = json.load(sys.stdin); "
        "print('refusing', e['event_type'], e['source_ref'], '->', e['branch_id'], "
        "os.environ['LAKEFS_HOOK_ID']); "
        "sys.exit(1)"
    )
    on = {"pre-merge": {"branches": ["main"]}}
    put_action(cli, "feat", "quality", {"on": on, "hooks": [command("row_count", code)]})
    cli("fs", "upload", f"lakefs://{cli.repo}/feat/a/x.csv", "-s", "-", input=b"broken\n")
    cli("commit", f"lakefs://{cli.repo}/feat", "-m", "bad rows")
    before_head = head(cli, "main")
    before = cli.js("fs", "ls", f"lakefs://{cli.repo}/main/", "--recursive")
    before_bytes = cli("fs", "cat", f"lakefs://{cli.repo}/main/a/x.csv").stdout_bytes

    refused = cli("merge", f"lakefs://{cli.repo}/feat", f"lakefs://{cli.repo}/main", code=6)

    assert "row_count" in refused.stderr and "refusing pre-merge feat -> main row_count" in refused.stderr
    assert head(cli, "main") == before_head
    assert cli.js("fs", "ls", f"lakefs://{cli.repo}/main/", "--recursive") == before
    assert cli("fs", "cat", f"lakefs://{cli.repo}/main/a/x.csv").stdout_bytes == before_bytes
    (run,) = runs(cli, "--branch", "main")
    assert (run["event_type"], run["status"], run["commit_id"]) == ("pre-merge", "failed", "")


def test_a_failing_post_hook_is_recorded_and_changes_nothing_done(both: Lakectl, hookd: Hookd) -> None:
    cli = both
    hookd.status = 503
    put_action(cli, "main", "after", {"on": {"post-commit": None}, "hooks": [webhook("export", hookd.url)]})
    assert hookd.received[-1]["event"]["event_type"] == "post-commit"
    (run,) = runs(cli)
    assert run["status"] == "failed" and run["commit_id"] == head(cli, "main")


def test_branch_globs_choose_the_actions(both: Lakectl, hookd: Hookd) -> None:
    cli = both
    action = {"on": {"pre-commit": {"branches": ["release-*"]}}, "hooks": [webhook("w", hookd.url)]}
    put_action(cli, "main", "releases", action)
    assert runs(cli) == [] and hookd.received == []
    cli("branch", "create", f"lakefs://{cli.repo}/release-1", "--source", f"lakefs://{cli.repo}/main")
    cli("fs", "upload", f"lakefs://{cli.repo}/release-1/n.txt", "-s", "-", input=b"n")
    cli("commit", f"lakefs://{cli.repo}/release-1", "-m", "on a release branch")
    assert [r["branch"] for r in runs(cli)] == ["release-1"]


def test_an_actions_hooks_run_in_order_and_stop_at_the_first_failure(both: Lakectl, hookd: Hookd) -> None:
    cli = both
    hooks = [command("first", "import sys; sys.exit(2)"), webhook("second", hookd.url)]
    other = {"on": {"pre-create-branch": None}, "hooks": [webhook("elsewhere", hookd.url)]}
    put_action(cli, "main", "a", {"on": {"pre-create-branch": None}, "hooks": hooks})
    put_action(cli, "main", "b", other)

    cli("branch", "create", f"lakefs://{cli.repo}/nope", "--source", f"lakefs://{cli.repo}/main", code=6)

    assert "nope" not in [b["id"] for b in cli.js("branch", "list", f"lakefs://{cli.repo}")]
    (run,) = runs(cli)
    hooks_run = cli.js("actions", "runs", "describe", f"lakefs://{cli.repo}", run["run_id"])["hooks"]
    assert [(h["hook_run_id"], h["hook_id"], h["status"]) for h in hooks_run] == [
        ("0000_0000", "first", "failed"),
        ("0001_0000", "elsewhere", "completed"),  # the other action ran all the same
    ]
    assert [r["event"]["hook_id"] for r in hookd.received] == ["elsewhere"]


def test_tag_hooks_gate_tags_whatever_the_branches(both: Lakectl, hookd: Hookd) -> None:
    cli = both
    hookd.status = 403
    action = {"on": {"pre-delete-tag": {"branches": ["no-such"]}}, "hooks": [webhook("keep_tags", hookd.url)]}
    put_action(cli, "main", "tags", action)
    cli("tag", "create", f"lakefs://{cli.repo}/v2", f"lakefs://{cli.repo}/main")

    cli("tag", "delete", f"lakefs://{cli.repo}/v2", code=6)

    assert "v2" in [t["id"] for t in cli.js("tag", "list", f"lakefs://{cli.repo}")]
    event = hookd.received[-1]["event"]
    assert (event["event_type"], event["tag_id"]) == ("pre-delete-tag", "v2") and "branch_id" not in event


def test_an_invalid_action_file_fails_the_run_naming_it(both: Lakectl) -> None:
    cli = both
    cli("fs", "upload", f"lakefs://{cli.repo}/feat/_lakefs_actions/bad.yaml", "-s", "-", input=b"on: [oops\n")
    refused = cli("commit", f"lakefs://{cli.repo}/feat", "-m", "x", code=6)
    assert "_lakefs_actions/bad.yaml" in refused.stderr


def test_run_lookups_of_what_does_not_exist(both: Lakectl) -> None:
    cli = both
    repo = f"lakefs://{cli.repo}"
    assert cli("actions", "runs", "describe", repo, "ffff", code=3).stderr.startswith("error: ")
    assert cli("cat-hook-output", repo, "ffff", "0000_0000", code=3).stderr.startswith("error: ")
    assert cli("actions", "runs", "describe", repo, "bad id!", code=2).stderr.startswith("error: ")
    assert cli("actions", "runs", "list", "lakefs://no-such-repo", code=3).stderr.startswith("error: ")


VALID = """\
name: Good files check
description: checks before main changes
on:
  pre-commit:
  pre-merge:
    branches:
      - main
hooks:
  - id: no_temp
    type: webhook
    description: no temporary files
    properties:
      url: "http://127.0.0.1:9/webhook"
      timeout: 1m30s
      query_params:
        disallow: ["user_", "private_"]
  - id: validate
    type: command
    properties:
      command: python validate.py
"""


@pytest.mark.parametrize(
    "text,needle",
    [
        ("on: {pre-commit: }\nhooks: []\n", "'hooks' must be a non-empty list"),
        (
            "on: {pre-push: }\nhooks: [{id: a, type: webhook, properties: {url: 'http://x'}}]\n",
            "unknown event",
        ),
        ("on: {pre-commit: }\nhooks: [{id: a, type: webhook, properties: {}}]\n", "url must be an http"),
        (
            "on: {pre-commit: }\nhooks: [{id: a, type: lua, properties: {}}]\n",
            "hook type 'lua' is not supported",
        ),
        (
            "on: {pre-commit: }\nhooks: [{id: a, type: command, properties: {command: x}},"
            " {id: a, type: command, properties: {command: y}}]\n",
            "hook id 'a' is used twice",
        ),
        (
            "on: {pre-commit: }\nhooks: [{id: a, type: command, properties: {command: x, timeout: soon}}]\n",
            "timeout 'soon'",
        ),
        ("name: [\n", "invalid YAML"),
    ],
)
def test_validate_refuses_a_bad_action_file_in_one_line(tmp_path: Path, text: str, needle: str) -> None:
    from tests.cli.both import Lakectl as Cli

    cli = Cli(
        "embedded", {"LAKECTL_HOME": str(tmp_path / "lake"), "LAKECTL_CONFIG": str(tmp_path / "no")}, tmp_path
    )
    path = tmp_path / "action.yaml"
    path.write_text(text)
    result = cli("actions", "validate", str(path), code=2)
    assert result.stderr.startswith(f"error: {path}: ") and needle in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


def test_validate_accepts_lakefs_s_example_format(tmp_path: Path) -> None:
    cli = Lakectl(
        "embedded", {"LAKECTL_HOME": str(tmp_path / "lake"), "LAKECTL_CONFIG": str(tmp_path / "n")}, tmp_path
    )
    path = tmp_path / "good.yaml"
    path.write_text(VALID)
    data = cli.js("actions", "validate", str(path))
    assert data["name"] == "Good files check"
    assert data["on"] == {"pre-commit": {"branches": []}, "pre-merge": {"branches": ["main"]}}
    assert [(h["id"], h["type"]) for h in data["hooks"]] == [("no_temp", "webhook"), ("validate", "command")]
    assert cli("actions", "validate", str(path)).stdout.startswith(f"Action file {path} is valid")


def test_actions_run_in_parallel(both: Lakectl) -> None:
    """Two actions' webhooks must be in flight together: each waits for the other at a barrier,
    and answers 500 if it never comes (actions run one after the other)."""
    cli = both
    barrier = threading.Barrier(2, timeout=10)

    class Meet(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            try:
                barrier.wait()
                status = 200
            except threading.BrokenBarrierError:
                status = 500
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Meet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        for name in ("left", "right"):
            put_action(
                cli, "feat", name, {"on": {"pre-commit": None}, "hooks": [webhook(name, url)]}, commit=False
            )
        cli("commit", f"lakefs://{cli.repo}/feat", "-m", "two actions at once")
    finally:
        server.shutdown()
        server.server_close()
    (run,) = runs(cli, "--branch", "feat")
    assert run["status"] == "completed"


def test_a_command_hook_reads_the_event_on_stdin_and_its_environment(both: Lakectl) -> None:
    cli = both
    code = (
        "import json, os, sys; e = json.load(sys.stdin); "
        "print(json.dumps({'stdin': e, 'env': {k: v for k, v in os.environ.items() if k.startswith("
        "('LAKEFS_', 'STAGE'))}}))"
    )
    hook = command("show", code)
    hook["properties"]["env"] = {"STAGE": "ci"}
    put_action(cli, "main", "show", {"on": {"post-create-tag": None}, "hooks": [hook]})
    cli("tag", "create", f"lakefs://{cli.repo}/v9", f"lakefs://{cli.repo}/main")
    (run,) = runs(cli)
    out = json.loads(cli("cat-hook-output", f"lakefs://{cli.repo}", run["run_id"], "0000_0000").stdout)
    event, env = out["stdin"], out["env"]
    assert (event["event_type"], event["tag_id"], event["commit_id"]) == (
        "post-create-tag",
        "v9",
        head(cli, "main"),
    )
    assert env["LAKEFS_EVENT_TYPE"] == "post-create-tag" and env["LAKEFS_TAG_ID"] == "v9"
    assert env["LAKEFS_REPOSITORY_ID"] == cli.repo and env["LAKEFS_RUN_ID"] == run["run_id"]
    assert env["STAGE"] == "ci"
    assert run["commit_id"] == head(cli, "main")


def test_webhook_secrets_come_from_lakefsactions_variables(
    both: Lakectl, hookd: Hookd, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = both
    monkeypatch.setenv("LAKEFSACTIONS_TOKEN", "s3cr3t")
    monkeypatch.setenv("OTHER_SECRET", "never")
    secret = webhook("auth", hookd.url, headers={"Authorization": "Bearer {{ ENV.LAKEFSACTIONS_TOKEN }}"})
    leak = webhook("leak", hookd.url, query_params={"x": "{{ ENV.OTHER_SECRET }}"})
    put_action(cli, "main", "secret", {"on": {"post-merge": None}, "hooks": [secret]})
    put_action(cli, "main", "leak", {"on": {"post-merge": None}, "hooks": [leak]})
    cli("fs", "upload", f"lakefs://{cli.repo}/feat/m.txt", "-s", "-", input=b"m")
    cli("commit", f"lakefs://{cli.repo}/feat", "-m", "to merge")
    cli("merge", f"lakefs://{cli.repo}/feat", f"lakefs://{cli.repo}/main")

    (sent,) = hookd.received  # the leaking hook failed before it sent anything
    assert sent["headers"]["Authorization"] == "Bearer s3cr3t"
    event = sent["event"]
    assert (event["event_type"], event["branch_id"], event["merge_source"]) == ("post-merge", "main", "feat")
    assert event["commit_id"] == head(cli, "main")
    (run,) = runs(cli, "--branch", "main")
    assert run["status"] == "failed"
    out = cli("cat-hook-output", f"lakefs://{cli.repo}", run["run_id"], "0000_0000").stdout
    assert "OTHER_SECRET is not allowed" in out and "never" not in out
