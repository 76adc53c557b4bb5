"""The embedded lake opened for use, its actions and journal wired in.

The bare lake of :mod:`lakectl.core.lake`, opened on a floor above the verbs, the actions and the
journal (ARCHITECTURE.md, "Layers"): they hear the verbs through the lake's events, installed here
by the one who opens the lake, so that the lake itself never imports them. A server wires its own
(``server.app``).
"""

from __future__ import annotations

from collections.abc import Mapping

from lakectl.core.events import Event, EventSink
from lakectl.core.journal import journal
from lakectl.core.lake import Lake, open_bare


def open_lake(home: str | None = None, create: bool = False) -> Lake:
    """Open the embedded lake at ``home`` (:func:`lakectl.core.lake.open_bare`: ``LAKECTL_HOME``
    by default, ``create`` over stored blocks) with its lakeFS actions and its journal."""
    lake = open_bare(home, create)
    # lakeFS actions; command hooks run too (the user's own machine), and find this lake.
    lake.events = _Actions(lake, {"LAKECTL_HOME": lake.home})
    journal.install(lake)  # after the actions: its intent is written once they let the verb go
    return lake


class _Actions:
    """The embedded lake's actions, :class:`lakectl.core.workflow.actionruns.ActionHooks`, made on the
    first verb that has hooks, the only events it acts on: a command that only reads never
    imports the actions' modules (~3 ms of its start-up)."""

    def __init__(self, lake: Lake, env: Mapping[str, str]) -> None:
        self._lake = lake
        self._env = env
        self._hooks: EventSink | None = None

    def _made(self) -> EventSink:
        if self._hooks is None:
            from lakectl.core.workflow.actionruns import ActionHooks

            self._hooks = ActionHooks(self._lake, env=self._env)
        return self._hooks

    def before(self, event: Event) -> None:
        if event.verb.has_hooks:
            self._made().before(event)

    def after(self, event: Event) -> None:
        if event.verb.has_hooks:
            self._made().after(event)

    def failed(self, event: Event, error: BaseException) -> None:
        if self._hooks is not None:
            self._hooks.failed(event, error)
