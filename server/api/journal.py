"""The lake's journal (a lakectl extension, docs/decisions/0009-journal.md): ``GET /journal`` (the
last entries), ``GET /journal/stream`` (server-sent events, one per entry as it is sealed),
``POST /journal/enable``, ``POST /journal/disable`` and ``POST /journal/compact``. The journal
records every user's mutations: admins only. Its ``auth`` entries, the server's users and access
keys as stored (:mod:`lakectl.core.journal.records`), are shown only to those who may manage
users."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Header, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse

from lakectl.core.events import Verb
from lakectl.core.graph.refs import check_repo_name
from lakectl.core.journal import journal
from lakectl.core.journal.compact import compact as compact_journal  # the route below is `compact`
from server.api.bodies import Body
from server.api.deps import AuthFirstRoute, LakeDep, UserDep, require
from server.auth.users import User
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)

# DeleteRepo is the permission only admins hold among the data ones (as fsck and gc).
_ADMINS = [require(Permission.DELETE_REPO)]
KEEPALIVE_S = 15.0
"""A comment line at least this often keeps proxies from closing an idle stream."""


def _shown(user: User) -> Callable[[journal.Entry], bool]:
    """Whether ``user`` is shown an entry: an admin of the data who may not manage users is not
    shown their records (their groups, policies, encrypted secrets)."""
    if user.allows(Permission.MANAGE_AUTH):
        return lambda entry: True
    return lambda entry: entry.event_type != Verb.AUTH.value


@router.get("/journal", dependencies=_ADMINS)
def tail(
    lake: LakeDep,
    user: UserDep,
    repo: str = Query(""),
    amount: int = Query(20, ge=1, le=10_000),
    after: int = Query(0, ge=0),
) -> dict[str, Any]:
    """The last ``amount`` entries (every entry after ``after`` when given), oldest first, and the
    newest logical timestamp of the lake (where a follower starts); of those, the ones the user
    is shown (:func:`_shown`)."""
    found = journal.tail(lake.kv, lake.blocks, amount, after, repo)
    return {
        "results": [e.to_dict() for e in filter(_shown(user), found)],
        "last_logical_timestamp": journal.last_timestamp(lake.kv),
    }


class JournalSetting(Body):
    reads: bool | None = None
    """Audit object reads (true), stop (false), or leave as it is (absent)."""


@router.post("/journal/enable", dependencies=_ADMINS)
def enable(lake: LakeDep, body: JournalSetting | None = None) -> dict[str, Any]:
    """Switch the journal on for the lake, and read auditing with ``{"reads": true|false}``; this
    server follows the setting from now on (others: on restart). ``{"enabled", "since", "reads"}``."""
    return journal.enable(lake, body.reads if body is not None else None)


@router.post("/journal/disable", dependencies=_ADMINS)
def disable(lake: LakeDep) -> dict[str, Any]:
    """Switch the journal off for the lake; this server stops journalling now (others: on
    restart). ``{"enabled", "since", "reads"}``."""
    return journal.disable(lake)


@router.post("/journal/compact", dependencies=_ADMINS)
def compact(lake: LakeDep) -> dict[str, Any]:
    """Rewrite the sealed journal without its superseded entries (timestamps kept)."""
    return compact_journal(lake.kv, lake.blocks)


@router.get("/journal/stream", dependencies=_ADMINS)
async def stream(
    request: Request,
    lake: LakeDep,
    user: UserDep,
    repo: str = Query(""),
    after: int = Query(0, ge=0),
    last_event_id: str | None = Header(None),
) -> StreamingResponse:
    """Server-sent events: ``id: <logical timestamp>``, ``event: entry``, ``data: <entry JSON>``,
    for every entry above ``after`` (or the ``Last-Event-ID`` a reconnecting client sends)."""
    start = int(last_event_id) if last_event_id and last_event_id.isdigit() else after
    if repo:
        check_repo_name(repo)  # a bad name is a 400 now, not a stream that never matches
    shown = _shown(user)

    async def events() -> AsyncIterator[str]:
        seen, idle = start, 0.0
        yield ": lakectl journal\n\n"
        while not await request.is_disconnected():
            found = await run_in_threadpool(journal.poll, lake.kv, lake.blocks, seen, repo)
            for entry in found:
                seen = entry.logical_timestamp
                if not shown(entry):
                    continue
                yield f"id: {seen}\nevent: entry\ndata: {json.dumps(entry.to_dict())}\n\n"
            idle = 0.0 if found else idle + journal.FOLLOW_INTERVAL
            if idle >= KEEPALIVE_S:
                idle = 0.0
                yield ": keep-alive\n\n"
            await asyncio.sleep(journal.FOLLOW_INTERVAL)

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
