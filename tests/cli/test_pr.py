"""``lakectl pr``, embedded and through a live server: a pull request opened, listed, shown with
its changes and gate, commented, reviewed, closed, reopened and merged; and the refusals (its
author approving it, a merge that a protection rule's approvals hold back)."""

from __future__ import annotations

import json

from tests.cli.both_json import Cli, cli, live
from tests.hookd import Hookd, hookd

__all__ = ["cli", "hookd", "live"]


def _branch_with_a_change(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    cli("branch", "create", "lakefs://R/fix", "--source", "lakefs://R/main")
    cli("fs", "upload", "lakefs://R/fix/tables/orders.csv", "--source", "-", input=b"id\n1\n")
    cli("commit", "lakefs://R/fix", "-m", "fix orders")


def test_a_pull_request_from_open_to_merged(cli: Cli) -> None:
    _branch_with_a_change(cli)
    opened = cli("pr", "create", "lakefs://R/fix", "lakefs://R/main", "--title", "Fix orders", "-d", "*why*")
    assert (opened["id"], opened["status"], opened["source_branch"]) == ("1", "open", "fix")
    assert opened["message"] == "Pull request #1 opened: fix → main"
    again = cli("pr", "create", "lakefs://R/fix", "lakefs://R/main", "--title", "again", code=4)
    assert again["code"] == "already_exists"
    assert [p["id"] for p in cli("pr", "list", "lakefs://R")] == ["1"]

    shown = cli("pr", "show", "lakefs://R", "1")
    assert shown["description"] == "*why*"
    assert [(c["type"], c["path"]) for c in shown["changes"]] == [("added", "tables/orders.csv")]
    assert shown["gate"]["mergeable"] and shown["gate"]["required_approvals"] == 0
    text = cli("pr", "show", "lakefs://R", "1", human=True)
    assert "#1 Fix orders" in text and "fix → main" in text and "tables/orders.csv" in text

    assert cli("pr", "approve", "lakefs://R", "1", code=8)["code"] == "forbidden"  # its own
    cli("pr", "comment", "lakefs://R", "1", "-m", "<script>x</script> looks fine")
    asked = cli("pr", "request-changes", "lakefs://R", "1", "-m", "one more thing")
    assert asked["verdict"] == "changes_requested"
    shown = cli("pr", "show", "lakefs://R", "1")
    assert [c["body"] for c in shown["comments"]] == ["<script>x</script> looks fine", "one more thing"]
    assert not shown["gate"]["mergeable"] and "changes requested" in shown["gate"]["reasons"][0]
    refused = cli("pr", "merge", "lakefs://R", "1", code=6)
    assert refused["code"] == "precondition_failed" and "changes requested" in refused["message"]

    # A new commit on the source makes the request stale; then the merge goes through.
    cli("fs", "upload", "lakefs://R/fix/tables/b.csv", "--source", "-", input=b"b\n")
    cli("commit", "lakefs://R/fix", "-m", "more")
    merged = cli("pr", "merge", "lakefs://R", "1")
    head = cli("branch", "show", "lakefs://R/main")["commit_id"]
    assert merged["status"] == "merged" and merged["merged_commit_id"] == head
    assert cli("fs", "stat", "lakefs://R/main/tables/b.csv")["size_bytes"] == 2
    assert cli("pr", "list", "lakefs://R") == []
    assert [p["id"] for p in cli("pr", "list", "lakefs://R", "--status", "merged")] == ["1"]
    assert cli("pr", "close", "lakefs://R", "1", code=6)["code"] == "precondition_failed"


def test_close_reopen_and_bad_input(cli: Cli) -> None:
    _branch_with_a_change(cli)
    cli("pr", "create", "lakefs://R/fix", "lakefs://R/main", "--title", "t")
    assert cli("pr", "close", "lakefs://R", "1")["status"] == "closed"
    assert cli("pr", "list", "lakefs://R") == []
    assert [p["status"] for p in cli("pr", "list", "lakefs://R", "--status", "closed")] == ["closed"]
    assert cli("pr", "merge", "lakefs://R", "1", code=6)["code"] == "precondition_failed"
    assert cli("pr", "reopen", "lakefs://R", "1")["status"] == "open"
    assert cli("pr", "show", "lakefs://R", "9", code=3)["code"] == "not_found"
    assert cli("pr", "show", "lakefs://R", "x", code=2)["code"] == "invalid_argument"
    assert cli("pr", "list", "lakefs://R", "--status", "weird", code=2)["code"] == "invalid_argument"
    assert cli("pr", "create", "lakefs://R/fix", "lakefs://R/nope", "--title", "t", code=3)["code"] == (
        "branch_not_found"
    )
    assert cli("pr", "comment", "lakefs://R", "1", "-m", " ", code=2)["code"] == "invalid_argument"


def test_required_approvals_hold_the_merge(cli: Cli) -> None:
    _branch_with_a_change(cli)
    rule = cli(
        "branch-protect", "add", "lakefs://R", "main", "--required-approvals", "1", "--required-checks"
    )
    assert rule == {"pattern": "main", "required_approvals": 1, "required_checks": True}
    assert cli("branch-protect", "list", "lakefs://R") == [rule]
    assert cli("merge", "lakefs://R/fix", "lakefs://R/main", code=8)["code"] == "protected_branch"
    cli("pr", "create", "lakefs://R/fix", "lakefs://R/main", "--title", "t")
    refused = cli("pr", "merge", "lakefs://R", "1", code=6)
    assert "0 of 1 required approval" in refused["message"] and "no pre-merge action" in refused["message"]
    assert (
        cli("branch", "show", "lakefs://R/main")["commit_id"]
        != cli("branch", "show", "lakefs://R/fix")["commit_id"]
    )


def test_show_summarizes_the_tables_a_pull_request_changes(cli: Cli) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    def parquet(ids: list[int]) -> bytes:
        out = io.BytesIO()
        pq.write_table(pa.table({"id": ids}), out)
        return out.getvalue()

    cli("repo", "create", "lakefs://R")
    cli("fs", "upload", "lakefs://R/main/t/day=1/p.parquet", "--source", "-", input=parquet([1, 2]))
    cli("commit", "lakefs://R/main", "-m", "t")
    cli("branch", "create", "lakefs://R/fix", "--source", "lakefs://R/main")
    cli("fs", "upload", "lakefs://R/fix/t/day=1/p.parquet", "--source", "-", input=parquet([1, 2, 3]))
    cli("commit", "lakefs://R/fix", "-m", "one more row")
    # main moves on with an unrelated change: the summary is from the merge base, not main's head
    cli("fs", "upload", "lakefs://R/main/t/day=2/p.parquet", "--source", "-", input=parquet([9]))
    cli("commit", "lakefs://R/main", "-m", "day 2")
    cli("pr", "create", "lakefs://R/fix", "lakefs://R/main", "--title", "t")
    shown = cli("pr", "show", "lakefs://R", "1")
    assert shown["tables"] == [{"table": "t/", "summary": "t: +1 rows, \u22120", "key": []}]
    assert "table t: +1 rows" in cli("pr", "show", "lakefs://R", "1", human=True)


def _webhook_action(name: str, url: str, **on: str) -> bytes:
    return json.dumps(
        {
            "name": name,
            "on": {event.replace("_", "-"): {"branches": [branch]} for event, branch in on.items()},
            "hooks": [{"id": name, "type": "webhook", "properties": {"url": url}}],
        }
    ).encode()


def test_a_pull_request_cannot_replace_the_gate_that_judges_it(cli: Cli, hookd: Hookd) -> None:
    """main requires checks and holds a gate (a pre-merge webhook that fails); the pull request
    deletes it and brings an action that always passes: main's own gate still judges the merge."""
    base = hookd.url.rsplit("/", 1)[0]
    hookd.statuses = {"/gate": 412, "/pass": 200}
    gate = _webhook_action("gate", f"{base}/gate", pre_merge="main")
    mine = _webhook_action("pass", f"{base}/pass", pre_merge="main", pre_commit="attack")
    cli("repo", "create", "lakefs://R")
    cli("fs", "upload", "lakefs://R/main/_lakefs_actions/gate.yaml", "--source", "-", input=gate)
    cli("commit", "lakefs://R/main", "-m", "the gate")
    cli("branch", "create", "lakefs://R/attack", "--source", "lakefs://R/main")
    cli("branch-protect", "add", "lakefs://R", "main", "--required-checks")
    cli("fs", "rm", "lakefs://R/attack/_lakefs_actions/gate.yaml")
    cli("fs", "upload", "lakefs://R/attack/_lakefs_actions/pass.yaml", "--source", "-", input=mine)
    cli("commit", "lakefs://R/attack", "-m", "drop the gate, bring my own")
    cli("pr", "create", "lakefs://R/attack", "lakefs://R/main", "--title", "t")
    head = cli("branch", "show", "lakefs://R/main")["commit_id"]
    refused = cli("pr", "merge", "lakefs://R", "1", code=6)
    assert refused["code"] == "hook_failed" and "pre-merge hook aborted" in refused["message"]
    assert [r["path"] for r in hookd.received if r["event"]["event_type"] == "pre-merge"] == ["/gate"]
    assert cli("branch", "show", "lakefs://R/main")["commit_id"] == head
    assert cli("fs", "cat", "lakefs://R/main/_lakefs_actions/gate.yaml", human=True) == gate.decode()
    shown = cli("pr", "show", "lakefs://R", "1")
    assert shown["status"] == "open" and shown["gate"]["destination_checks"] == ["gate"]
    assert "Merge checks" in cli("pr", "show", "lakefs://R", "1", human=True)
