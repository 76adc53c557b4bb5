"""The live feed ("Activity"): the lake's events, newest first, for every signed-in user, of the
repositories it may read (each entry is checked, as the API checks a request).

When the lake's journal is on, the feed is the journal (:func:`lakectl.core.journal.seal.tail`):
every mutation, by whom, in which repository; its cursor is the logical timestamp. When it is off,
the feed is made of the recent commits of every branch (each commit once, with the branches it is
the head of); its cursor is a commit's creation time, in seconds.

The page works without JavaScript (a "Refresh" link reloads it); ``static/ui.js`` polls
``/ui/feed/entries?after=<cursor>&mode=<journal|commits>`` every few seconds, which answers the
newer entries as table rows (``feed_rows.html``) with the new cursor in ``X-Feed-Cursor``, and
prepends those it does not show yet. A fragment whose ``X-Feed-Mode`` differs from the page's
(the journal was switched on meanwhile) makes the script reload the page.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from fastapi import Query, Request, Response

from lakectl.core import changes
from lakectl.core import porcelain as p
from lakectl.core.events import Verb
from lakectl.core.journal import journal
from lakectl.core.lake import Lake
from lakectl.core.model import Commit, Repository
from server.api.deps import LakeDep
from server.auth.users import User
from server.policies import Permission
from server.ui.render import env, first_line, page, redirect, url
from server.ui.session import SignedIn, can, require, ui_router

router = ui_router()
SIZE = 50
"""Entries a page (and a poll) shows at most."""
PER_BRANCH = 20
"""Commits read from each branch's history, without the journal."""
POLL_MS = 3000
JOURNAL, COMMITS = "journal", "commits"


def iso(seconds: float) -> str:
    """A Unix time as ISO 8601 (a ``<time>`` element's ``datetime``)."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="seconds")


env.filters["iso"] = iso


@dataclass(frozen=True, slots=True)
class Item:
    """One row of the feed."""

    key: str
    """Unique in the feed: the script skips a row it shows already."""
    cursor: int
    time: float
    """Seconds since the epoch."""
    user: str
    repo: str
    kind: str
    summary: str
    link: str = ""
    link_text: str = ""


# -- from the journal ---------------------------------------------------------------------------


def _count(value: object) -> int:
    return len(value) if isinstance(value, list) else 0


def _entry_item(e: journal.Entry) -> Item:
    """A journal entry as a row: what it did in a few words, and a link to what it made."""
    pl: Mapping[str, Any] = e.event_payload
    repo, kind = e.repo_id, e.event_type
    branch, commit, tag = str(pl.get("branch", "")), str(pl.get("commit_id", "")), str(pl.get("tag", ""))
    summary, link, text = "", "", ""
    if kind in (Verb.COMMIT.value, Verb.MERGE.value, Verb.REVERT.value, Verb.CHERRY_PICK.value):
        summary = first_line(str(pl.get("commit_message", "")))
        if kind == Verb.MERGE.value and pl.get("source_ref"):
            summary = f"{pl['source_ref']} into {branch}: {summary}"
        elif branch:
            summary = f"on {branch}: {summary}"
        if commit:
            link, text = url("repos", repo, "commits", commit), commit[:12]
    elif kind == Verb.CREATE_BRANCH.value:
        summary = f"{branch} from {pl.get('source_ref', '')}"
        link, text = url("repos", repo, "refs", branch, "objects"), branch
    elif kind == Verb.DELETE_BRANCH.value:
        summary = branch
    elif kind == Verb.CREATE_TAG.value:
        summary = f"{tag} at {pl.get('source_ref', '') or commit[:12]}"
        link, text = url("repos", repo, "refs", tag, "objects"), tag
    elif kind == Verb.DELETE_TAG.value:
        summary = tag
    elif kind == Verb.CREATE_REPOSITORY.value:
        summary = f"default branch {pl.get('default_branch', '')}"
        link, text = url("repos", repo), repo
    elif kind in (Verb.WRITE_OBJECTS.value, Verb.DELETE_OBJECTS.value, Verb.RESET.value):
        n = _count(pl.get("rows")) or _count(pl.get("paths"))
        summary = f"{n} path{'s' if n != 1 else ''} on {branch}" if n else f"on {branch}"
        link, text = url("repos", repo, "branches", branch, "changes"), "changes"
    elif kind == Verb.PULL_REQUEST.value:
        number = str(pl.get("pull_request", ""))
        summary = str(pl.get("action", ""))
        if number:
            link, text = url("repos", repo, "pulls", number), f"#{number}"
    elif kind == Verb.SETTINGS.value:
        summary = str(pl.get("key", "")).removeprefix("settings/").replace("_", " ")
        link, text = url("repos", repo, "settings"), "settings"
    return Item(
        f"j{e.logical_timestamp}",
        e.logical_timestamp,
        e.time / 1e6,
        e.client_id,
        repo,
        kind,
        summary,
        link,
        text,
    )


_NOT_ACTIVITY = frozenset({Verb.READ_OBJECT.value, Verb.AUTH.value})
"""Entries the feed leaves out: reads (no change), and the server's auth records (who may use
the lake is not a repository's activity, and their records are for those who manage users)."""


def _from_journal(lake: Lake, user: User, repo: str, after: int) -> tuple[list[Item], int]:
    found = journal.tail(lake.kv, lake.blocks, amount=SIZE * 4, after=after, repo=repo)
    cursor = max((e.logical_timestamp for e in found), default=after)
    shown = [
        _entry_item(e)
        for e in found
        if e.event_type not in _NOT_ACTIVITY and user.allows(Permission.READ_REPO, e.repo_id)
    ]
    return shown[::-1][:SIZE], cursor


# -- from the commits, without the journal -----------------------------------------------------


def _commit_item(repo: str, c: Commit, heads: Iterable[str]) -> Item:
    kind = Verb.MERGE.value if len(c.parents) > 1 else Verb.COMMIT.value
    named = sorted(heads)
    summary = first_line(c.message) + (f" (head of {', '.join(named)})" if named else "")
    return Item(
        f"c{repo}/{c.id}",
        c.creation_date,
        c.creation_date,
        c.committer,
        repo,
        kind,
        summary,
        url("repos", repo, "commits", c.id),
        c.id[:12],
    )


def _from_commits(lake: Lake, repos: list[Repository], after: int) -> tuple[list[Item], int]:
    """The newest commits of the branches of ``repos`` made at ``after`` or later (each once).
    Branches are walked newest head first, and no further once the next head is older than the
    :data:`SIZE` commits found (a commit is made after its parents)."""
    heads: list[tuple[Commit, str, str]] = []  # (head commit, repository, branch)
    for r in repos:
        for b in p.list_branches(lake, r.name):
            head = p.get_commit(lake, r.name, b.commit_id)
            if head.creation_date >= after:
                heads.append((head, r.name, b.name))
    heads.sort(key=lambda h: h[0].creation_date, reverse=True)
    names: dict[tuple[str, str], list[str]] = {}
    for head, repo, branch in heads:
        names.setdefault((repo, head.id), []).append(branch)
    found: dict[tuple[str, str], Commit] = {}
    for head, repo, _ in heads:
        if len(found) >= SIZE and head.creation_date < sorted(c.creation_date for c in found.values())[-SIZE]:
            break  # every commit of this branch and the next ones is older than SIZE found
        for c in islice(changes.log(lake, repo, head.id), PER_BRANCH):
            if c.creation_date < after:
                break
            found.setdefault((repo, c.id), c)
    # Newest first; within one second, a child before its parent (its generation is higher).
    ordered = sorted(found.items(), key=lambda f: (f[1].creation_date, f[1].generation, f[0]), reverse=True)
    items = [_commit_item(repo, c, names.get((repo, c.id), ())) for (repo, _), c in ordered]
    return items[:SIZE], max((i.cursor for i in items), default=after)


# -- the routes ---------------------------------------------------------------------------------


def _feed(lake: Lake, user: User, repo: str, after: int) -> tuple[str, list[Item], int]:
    """The mode, the entries newer than ``after`` (newest first) and the cursor after them."""
    if repo:
        require(user, Permission.READ_REPO, repo)
        p.get_repo(lake, repo)  # 404 for none
    if journal.is_enabled(lake.kv):
        return (JOURNAL, *_from_journal(lake, user, repo, after))
    if repo:
        repos = [p.get_repo(lake, repo)]
    else:
        repos = [r for r in p.list_repos(lake) if user.allows(Permission.READ_REPO, r.name)]
    return (COMMITS, *_from_commits(lake, repos, after))


@router.get("/feed")
def feed(request: Request, lake: LakeDep, user: SignedIn, repo: str = "") -> Response:
    mode, items, cursor = _feed(lake, user, repo, 0)
    # one repository's feed is a repository page (its navigation); typed Any, as page()'s context
    repo_page: dict[str, Any] = {"repo": p.get_repo(lake, repo)} if repo else {}
    return page(
        request,
        "feed.html",
        mode=mode,
        items=items,
        cursor=cursor,
        feed_repo=repo,
        refresh_url=url("feed", repo=repo),
        entries_url=url("feed", "entries", repo=repo),
        poll_ms=POLL_MS,
        area="activity",
        **repo_page,
    )


@router.get("/feed/entries")
def entries(
    request: Request,
    lake: LakeDep,
    user: SignedIn,
    repo: str = "",
    after: int = Query(0, ge=0),
    mode: str = "",
) -> Response:
    """The rows newer than ``after``, newest first. Another mode than the page's (``mode``):
    no rows, the page reloads (its cursor means something else)."""
    now, items, cursor = _feed(lake, user, repo, after)
    if mode and mode != now:
        items, cursor = [], 0
    response = page(request, "feed_rows.html", items=items, feed_repo=repo)
    response.headers["X-Feed-Mode"] = now
    response.headers["X-Feed-Cursor"] = json.dumps(cursor)
    return response


@router.get("/repos/{repo}/activity", dependencies=[can(Permission.READ_REPO)])
def repo_activity(repo: str) -> Response:
    """The repository's tab: its feed."""
    return redirect(url("feed", repo=repo))
