"""``lakectl actions``: the runs of a repository's action hooks (list, describe), validating an
action file, and ``lakectl cat-hook-output`` (lakeFS's forms)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import After, Amount, JsonFlag, backend, more, noun, paged, read_input, repo_uri

app = noun(
    "Runs of action hooks (list, describe); validate action files.\n\nActions are lakeFS "
    "action files under _lakefs_actions/ in the repository: webhook and command hooks on pre- and "
    "post- commit, merge, create-branch, delete-branch, create-tag and delete-tag. A failing "
    "pre- hook refuses the operation (exit 6)."
)
runs = noun("List and describe the runs of action hooks.")
app.add_typer(runs, name="runs")

RepoArg = Annotated[str, typer.Argument(help="lakefs://<repository>", show_default=False)]
RunArg = Annotated[str, typer.Argument(help="A run id (from actions runs list).", show_default=False)]

RUN_COLUMNS = ["Run ID", "Event", "Branch", "Start Time", "End Time", "Commit ID", "Status"]
HOOK_COLUMNS = ["Hook Run ID", "Hook ID", "Start Time", "End Time", "Action", "Status"]


@runs.command("list")
def list_runs(
    repository: RepoArg,
    branch: Annotated[str, typer.Option("--branch", help="Only the runs of this branch.")] = "",
    commit: Annotated[str, typer.Option("--commit", help="Only the runs of this commit (a ref).")] = "",
    amount: Amount = 0,
    after: After = "",
    json_: JsonFlag = False,
) -> None:
    """List runs newest first (JSON: lakeFS's ActionRun list)."""
    repo = repo_uri(repository)
    found, next_offset = paged(
        lambda n: backend().list_action_runs(repo, branch, commit, after, n), amount, lambda r: r.run_id
    )
    render.emit([r.to_dict() for r in found], json_, _runs)
    more(amount, next_offset)


@runs.command("describe")
def describe(
    repository: RepoArg, run_id: RunArg, amount: Amount = 0, after: After = "", json_: JsonFlag = False
) -> None:
    """Describe a run and its hook runs (JSON: {"run": ActionRun, "hooks": [HookRun]})."""
    repo = repo_uri(repository)
    b = backend()
    run = b.get_action_run(repo, run_id)
    found, next_offset = paged(
        lambda n: b.list_run_hooks(repo, run_id, after, n), amount, lambda h: h.hook_run_id
    )
    render.emit({"run": run.to_dict(), "hooks": [h.to_dict() for h in found]}, json_, _describe)
    more(amount, next_offset)


@app.command("validate")
def validate(
    path: Annotated[str, typer.Argument(help="An action file (YAML); - for stdin.", show_default=False)],
    json_: JsonFlag = False,
) -> None:
    """Validate an action file locally: exit 0 when lakeFS's format holds, else exit 2 naming what."""
    from lakectl.core.workflow import actions

    action = actions.parse(read_input(path), path)
    data = {
        "path": path,
        "name": action.name,
        "description": action.description,
        "on": {event: {"branches": list(globs)} for event, globs in action.on.items()},
        "hooks": [{"id": h.id, "type": h.type, "description": h.description} for h in action.hooks],
    }
    render.emit(data, json_, lambda d: render.line(f"Action file {path} is valid: action {d['name']!r}"))


def cat_hook_output(
    repository: RepoArg,
    run_id: RunArg,
    hook_run_id: Annotated[str, typer.Argument(help="A hook run id (from actions runs describe).")],
    json_: JsonFlag = False,
) -> None:
    """Print the output of one hook run.

    A webhook's request and answer, a command's output; with --json, {"run_id", "hook_run_id",
    "output"}."""
    data = backend().get_hook_output(repo_uri(repository), run_id, hook_run_id)
    if json_:
        text = data.decode("utf-8", "replace")
        render.print_json({"run_id": run_id, "hook_run_id": hook_run_id, "output": text})
    else:
        out = typer.get_binary_stream("stdout")
        out.write(data)
        out.flush()


def _runs(data: list[dict[str, Any]]) -> None:
    keys = ("run_id", "event_type", "branch", "start_time", "end_time", "commit_id", "status")
    render.table(RUN_COLUMNS, [[d[k] for k in keys] for d in data])


def _describe(data: dict[str, Any]) -> None:
    run = data["run"]
    render.fields(
        [
            ("Run ID", run["run_id"]),
            ("Event", run["event_type"]),
            ("Branch", run["branch"]),
            ("Start Time", run["start_time"]),
            ("End Time", run["end_time"]),
            ("Commit ID", run["commit_id"]),
            ("Status", run["status"]),
        ]
    )
    render.line()
    keys = ("hook_run_id", "hook_id", "start_time", "end_time", "action", "status")
    render.table(HOOK_COLUMNS, [[h[k] for k in keys] for h in data["hooks"]])
