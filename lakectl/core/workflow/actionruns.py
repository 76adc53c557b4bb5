"""Action runs: the event sink that runs a repository's matching actions on each hooked verb
(a failing pre-event hook refuses the verb), and the runs and hook outputs it records in the KV
store (lakeFS's ActionRun and HookRun), newest first."""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice, takewhile
from typing import TYPE_CHECKING, Any

from lakectl.core import keys
from lakectl.core.events import Event, Verb
from lakectl.core.kv.helpers import scan_prefix, set_many
from lakectl.core.model import RepositoryId
from lakectl.errors import HookFailed, InvalidArgument, KeyNotFound, NotFound

if TYPE_CHECKING:
    from lakectl.core.lake import Lake
    from lakectl.core.workflow import actions
    from lakectl.core.workflow.webhooks import HostPolicy

# actions (the action files' parser) and hooks (their runner) are imported when a hooked verb
# runs: every command of the embedded lake installs this sink, and a read never calls it.

log = logging.getLogger(__name__)

FAILED, COMPLETED = "failed", "completed"
PRE_RUN = "actions.pre_run"
"""The key of :attr:`Event.notes` holding the pre-event run id."""
SHOWN_OUTPUT = 2000
"""Characters of a failed hook's output a refusal's message quotes."""
_RUN_ID_MAX = (1 << 64) - 1


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def new_run_id() -> str:
    """Run ids sort newest first: the time counted down, then randomness."""
    return f"{_RUN_ID_MAX - time.time_ns():016x}{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class ActionRun:
    """lakeFS's ActionRun: one event's actions, run."""

    run_id: str
    branch: str
    start_time: str
    end_time: str
    event_type: str
    status: str
    commit_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "branch": self.branch,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "event_type": self.event_type,
            "status": self.status,
            "commit_id": self.commit_id,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ActionRun:
        return cls(
            str(d["run_id"]),
            str(d.get("branch") or ""),
            str(d["start_time"]),
            str(d.get("end_time") or ""),
            str(d["event_type"]),
            str(d["status"]),
            str(d.get("commit_id") or ""),
        )


@dataclass(frozen=True, slots=True)
class HookRun:
    """lakeFS's HookRun: one hook of one action in a run."""

    hook_run_id: str
    action: str
    hook_id: str
    start_time: str
    end_time: str
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "hook_run_id": self.hook_run_id,
            "action": self.action,
            "hook_id": self.hook_id,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "status": self.status,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HookRun:
        return cls(
            str(d["hook_run_id"]),
            str(d["action"]),
            str(d["hook_id"]),
            str(d["start_time"]),
            str(d.get("end_time") or ""),
            str(d["status"]),
        )


@dataclass(frozen=True, slots=True)
class _Done:
    hook: HookRun
    output: bytes


# -- reading runs -------------------------------------------------------------------------------


def _partition(lake: Lake, repo: str) -> str:
    from lakectl.core import porcelain

    return keys.repo_partition(porcelain.get_repo(lake, repo).name)


def list_runs(
    lake: Lake,
    repo: str,
    branch: str = "",
    commit: str = "",
    after: str = "",
    amount: int | None = None,
) -> list[ActionRun]:
    """Runs newest first, after the run id ``after``; only a branch's, or a commit's."""
    part = _partition(lake, repo)
    if commit:
        from lakectl.core import porcelain

        cid = porcelain.resolve(lake, repo, commit).commit.id
        ids = (k.rsplit("/", 1)[-1] for k, _ in scan_prefix(lake.kv, part, keys.commit_runs_prefix(cid)))
        runs: Iterator[ActionRun] = (r for r in (_get(lake, part, i) for i in ids) if r is not None)
    else:
        # Run ids sort newest first: a page after ``after`` starts its scan there.
        start = keys.action_run_key(after) if after else keys.ACTION_RUN_PREFIX
        rows = takewhile(lambda kv: kv[0].startswith(keys.ACTION_RUN_PREFIX), lake.kv.scan(part, start))
        runs = (ActionRun.from_dict(json.loads(v)) for _, v in rows)
    found = (r for r in runs if r.run_id > after and (not branch or r.branch == branch))
    return list(islice(found, amount))


def _get(lake: Lake, part: str, run_id: str) -> ActionRun | None:
    try:
        return ActionRun.from_dict(json.loads(lake.kv.get(part, keys.action_run_key(run_id))))
    except KeyNotFound:
        return None


def get_run(lake: Lake, repo: str, run_id: str) -> ActionRun:
    run = _get(lake, _partition(lake, repo), _check_id(run_id, "run id"))
    if run is None:
        raise NotFound(f"no action run {run_id!r} in {repo!r}", run_id=run_id)
    return run


def list_hooks(
    lake: Lake, repo: str, run_id: str, after: str = "", amount: int | None = None
) -> list[HookRun]:
    """The hook runs of a run, by hook run id (``<action #>_<hook #>``)."""
    get_run(lake, repo, run_id)
    part = _partition(lake, repo)
    found = (
        HookRun.from_dict(json.loads(v)) for _, v in scan_prefix(lake.kv, part, keys.hook_run_prefix(run_id))
    )
    return list(islice((h for h in found if h.hook_run_id > after), amount))


def hook_output(lake: Lake, repo: str, run_id: str, hook_run_id: str) -> bytes:
    get_run(lake, repo, run_id)
    key = keys.hook_output_key(run_id, _check_id(hook_run_id, "hook run id"))
    try:
        return lake.kv.get(_partition(lake, repo), key)
    except KeyNotFound:
        raise NotFound(f"no hook run {hook_run_id!r} in run {run_id!r}", run_id=run_id) from None


def _check_id(text: str, what: str) -> str:
    if not text or not all(c.isalnum() or c == "_" for c in text):
        raise InvalidArgument(f"{what} {text!r} holds characters other than letters, digits and '_'")
    return text


# -- running ----------------------------------------------------------------------------------


def event_type(when: str, event: Event) -> str:
    return f"{when}-{event.verb.value}"


def _ref_of(lake: Lake, when: str, event: Event) -> str:
    """Where the action files are read: the ref the event is about (lakeFS's source ref), but
    a merge into a protected branch is judged by the destination's own actions, committed at
    its head: a change cannot edit or remove the gates that judge it."""
    if when == "post" and event.commit_id:
        return event.commit_id
    if event.verb is Verb.MERGE and event.payload.get("source_commit_id"):
        if event.payload.get("destination_commit_id") and _protected(lake, event):
            return str(event.payload["destination_commit_id"])
        return str(event.payload["source_commit_id"])  # the very commit being merged
    if event.verb in (Verb.COMMIT, Verb.DELETE_BRANCH):
        return event.branch
    return event.source_ref or event.commit_id


def _protected(lake: Lake, event: Event) -> bool:
    from lakectl.core import protection

    rid = RepositoryId(event.repository)
    return protection.rule_for(lake.kv, rid, event.branch or "") is not None


def event_json(event: Event, etype: str, run_id: str, action: str, hook_id: str) -> dict[str, Any]:
    """lakeFS's event JSON (what a webhook receives, a command reads on stdin)."""
    data: dict[str, Any] = {
        "event_type": etype,
        "event_time": now_text(),
        "action_name": action,
        "hook_id": hook_id,
        "repository_id": event.repository,
        "branch_id": event.branch,
        "source_ref": event.source_ref,
        "run_id": run_id,
    }
    if event.verb in (Verb.COMMIT, Verb.MERGE):
        data.update(
            commit_message=event.commit_message,
            committer=event.committer,
            commit_metadata=dict(event.metadata),
            commit_id=event.commit_id,
        )
    else:
        data["commit_id"] = event.commit_id
    if event.verb is Verb.MERGE:
        data["merge_source"] = event.source_ref
    if event.tag:
        data["tag_id"] = event.tag
        data.pop("branch_id")
    return data


class ActionHooks:
    """The event sink of actions: on each hooked verb, runs the actions its event triggers at the
    ref the event is about. A failing ``pre-`` hook raises :class:`HookFailed` (nothing changed);
    a failing ``post-`` hook is only recorded. Actions run in parallel, an action's hooks in
    order (a failed hook stops its action)."""

    def __init__(
        self,
        lake: Lake,
        commands: bool = True,
        env: Mapping[str, str] | None = None,
        webhook_hosts: HostPolicy | None = None,
    ) -> None:
        self.lake = lake
        self.commands = commands
        """Whether command hooks may run (a server runs them only when configured to)."""
        self.env = dict(env or {})
        """Variables command hooks get besides the caller's (the embedded lake's LAKECTL_HOME)."""
        self.webhook_hosts = webhook_hosts
        """Where webhooks may go: a server's policy (public addresses and the hosts its operator
        allows); None, the embedded lake's: anywhere its user can reach."""

    def before(self, event: Event) -> None:
        if not event.verb.has_hooks:
            return
        run = self._run("pre", event)
        if run is None:
            return
        event.notes[PRE_RUN] = run[0].run_id
        if run[0].status == FAILED:
            raise _refusal(event, run)

    def failed(self, event: Event, error: BaseException) -> None:
        """Nothing to run: post-hooks run for changes that were made."""

    def after(self, event: Event) -> None:
        if not event.verb.has_hooks:
            return
        try:
            pre = event.notes.get(PRE_RUN)
            if pre and event.commit_id and event.verb in (Verb.COMMIT, Verb.MERGE):
                self._set_commit(event.repository, pre, event.commit_id)
            self._run("post", event)
        except Exception:  # the verb is done: a post hook's trouble is only recorded and logged
            log.exception("post-%s actions of %s failed", event.verb.value, event.repository)

    def _set_commit(self, repo: str, run_id: str, commit_id: str) -> None:
        part = keys.repo_partition(RepositoryId(repo))
        run = _get(self.lake, part, run_id)
        if run is None:
            return
        done = ActionRun(
            run.run_id, run.branch, run.start_time, run.end_time, run.event_type, run.status, commit_id
        )
        set_many(
            self.lake.kv,
            part,
            [
                (keys.action_run_key(run_id), json.dumps(done.to_dict()).encode()),
                (keys.commit_runs_prefix(commit_id) + run_id, b""),
            ],
        )

    def _run(self, when: str, event: Event) -> tuple[ActionRun, list[_Done], list[tuple[str, str]]] | None:
        from lakectl.core.workflow import actions

        etype = event_type(when, event)
        loaded = actions.load(self.lake, event.repository, _ref_of(self.lake, when, event))
        chosen = actions.matching(loaded.actions, etype, event.branch)
        if not chosen and not loaded.errors:
            return None
        run_id, start = new_run_id(), now_text()
        env = self.env
        if len(chosen) > 1:
            with ThreadPoolExecutor(len(chosen)) as pool:
                futures = [
                    pool.submit(self._action, event, etype, run_id, i, a, env) for i, a in enumerate(chosen)
                ]
                results = [f.result() for f in futures]
        else:
            results = [self._action(event, etype, run_id, i, a, env) for i, a in enumerate(chosen)]
        done = [d for r in results for d in r]
        failed = bool(loaded.errors) or any(d.hook.status == FAILED for d in done)
        run = ActionRun(
            run_id,
            event.branch,
            start,
            now_text(),
            etype,
            FAILED if failed else COMPLETED,
            event.commit_id if when == "post" else "",
        )
        items = [(keys.action_run_key(run_id), json.dumps(run.to_dict()).encode())]
        if run.commit_id:
            items.append((keys.commit_runs_prefix(run.commit_id) + run_id, b""))
        for d in done:
            items.append(
                (keys.hook_run_prefix(run_id) + d.hook.hook_run_id, json.dumps(d.hook.to_dict()).encode())
            )
            items.append((keys.hook_output_key(run_id, d.hook.hook_run_id), d.output))
        set_many(self.lake.kv, keys.repo_partition(RepositoryId(event.repository)), items)
        return run, done, list(loaded.errors)

    def _action(
        self,
        event: Event,
        etype: str,
        run_id: str,
        index: int,
        action: actions.Action,
        env: Mapping[str, str],
    ) -> list[_Done]:
        from lakectl.core.workflow import hooks

        done = []
        for number, hook in enumerate(action.hooks):
            start = now_text()
            payload = event_json(event, etype, run_id, action.name, hook.id)
            outcome = hooks.run(hook, payload, self.commands, env, self.webhook_hosts)
            status = COMPLETED if outcome.passed else FAILED
            record = HookRun(f"{index:04d}_{number:04d}", action.name, hook.id, start, now_text(), status)
            done.append(_Done(record, outcome.output))
            if not outcome.passed:
                break
        return done


def _refusal(event: Event, run: tuple[ActionRun, list[_Done], list[tuple[str, str]]]) -> HookFailed:
    """lakeFS's words: ``pre-commit hook aborted, run id '…'``, then what failed."""
    summary, done, errors = run
    lines = [f"{summary.event_type} hook aborted, run id '{summary.run_id}'"]
    details: dict[str, Any] = {"run_id": summary.run_id, "event_type": summary.event_type}
    for path, error in errors:
        lines.append(f"action file {path} is invalid: {error}")
        details.setdefault("action_file", path)
    for d in done:
        if d.hook.status == FAILED:
            text = d.output.decode("utf-8", "replace").strip()
            shown = text if len(text) <= SHOWN_OUTPUT else text[:SHOWN_OUTPUT] + " …"
            lines.append(
                f"hook run id '{d.hook.hook_run_id}' failed on action '{d.hook.action}' "
                f"hook '{d.hook.hook_id}':\n{shown}"
            )
            details.setdefault("hook_run_id", d.hook.hook_run_id)
            details.setdefault("hook_id", d.hook.hook_id)
            details.setdefault("action", d.hook.action)
            details.setdefault("output", text[:SHOWN_OUTPUT])
    return HookFailed("\n".join(lines), **details)
