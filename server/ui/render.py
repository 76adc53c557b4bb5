"""The UI's Jinja2 environment (autoescaped), its filters, and the page and redirect responses."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from markupsafe import Markup

from server.auth.users import User
from server.policies import Permission

PREFIX = "/ui"
TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

SECURITY_HEADERS = {
    # Pages load only this server's own script and style: an injected <script> would not run even
    # if escaping failed somewhere.
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # The one-time sign-in link carries its token in the query: never sent on to other sites.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True, slots=True)
class Area:
    """One entry of a repository's navigation: ``path`` is under ``/ui/repos/<repo>/`` and may
    name ``{ref}`` (the ref shown, else the default branch) or ``{branch}`` (the branch shown,
    else the default branch)."""

    key: str
    label: str
    path: str


AREAS: list[Area] = [
    Area("overview", "Overview", ""),
    Area("objects", "Objects", "refs/{ref}/objects"),
    Area("branches", "Branches & tags", "branches"),
    Area("commits", "Commits", "refs/{ref}/log"),
    Area("changes", "Uncommitted changes", "branches/{branch}/changes"),
    Area("compare", "Compare", "compare"),
    Area("pulls", "Pull requests", "pulls"),
    Area("actions", "Actions", "actions"),
    Area("activity", "Activity", "activity"),
    Area("settings", "Settings", "settings"),
]
"""A repository's areas, in navigation order; a new area is one route module, its templates
and one entry here."""


def url(*segments: object, **query: object) -> str:
    """``/ui/<segment>/...?<query>``: each segment quoted whole (a ``/`` in one is escaped),
    query values of None or "" left out."""
    path = "/".join(quote(str(s), safe="") for s in segments if s != "")
    params = {k: v for k, v in query.items() if v is not None and v != ""}
    return f"{PREFIX}/{path}" + ("?" + urlencode(params) if params else "")


def size(n: int | None) -> str:
    """Bytes for a person: ``999 B``, ``1.5 KiB``, ``2.0 GiB``."""
    if n is None:
        return ""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def date(seconds: int | float | None) -> str:
    """A Unix time as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if not seconds:
        return ""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def short(commit_id: str) -> str:
    return commit_id[:12]


_COMMIT_ID = re.compile(r"([0-9a-f]{40,64})(?![0-9a-f])")


def short_ref(ref: str) -> str:
    """A ref as a heading or a title shows it: a commit id (alone, or opening an expression such
    as ``<id>~1``) cut to :func:`short`, a name as it is."""
    found = _COMMIT_ID.match(ref)
    return short(found[1]) + ref[found.end() :] if found else ref


def ref_label(ref: str) -> Markup:
    """A ref in a heading: :func:`short_ref`, with the whole ref in its ``title`` when cut."""
    shown = short_ref(ref)
    if shown == ref:
        return Markup("{}").format(ref)
    return Markup('<span class="commit-id" title="{}">{}</span>').format(ref, shown)


def first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def basename(path: str) -> str:
    """The last segment of a path (``a/b/`` → ``b/``)."""
    return re.sub(r"^.*/(?=[^/]+/?$)", "", path)


def parents(path: str) -> list[tuple[str, str]]:
    """``(name, prefix)`` of each directory above ``path`` (``a/b/c`` → ``a/``, ``a/b/``)."""
    parts = path.split("/")[:-1]
    return [(part + "/", "/".join(parts[: i + 1]) + "/") for i, part in enumerate(parts)]


@jinja2.pass_context
def csrf_field(ctx: jinja2.runtime.Context) -> Markup:
    """The hidden CSRF field every form that POSTs carries."""
    return Markup('<input type="hidden" name="csrf" value="{}">').format(ctx["csrf"])


@jinja2.pass_context
def area_url(ctx: jinja2.runtime.Context, area: Area) -> str:
    """Where a repository's area is, for the ref (or branch) the page shows."""
    quoted = {k: quote(ctx[f"nav_{k}"], safe="") for k in ("ref", "branch")}
    return url("repos", ctx["repo"].name) + ("/" + area.path.format(**quoted) if area.path else "")


env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
env.filters.update(
    size=size,
    date=date,
    short=short,
    short_ref=short_ref,
    ref_label=ref_label,
    first_line=first_line,
    basename=basename,
)
env.globals.update(url=url, parents=parents, csrf_field=csrf_field, area_url=area_url, AREAS=AREAS)


@dataclass(frozen=True, slots=True)
class May:
    """What the signed-in user may do, for a page to show only the controls it may use."""

    user: User | None
    repository: str | None = None

    def _allows(self, permission: Permission) -> bool:
        return self.user is not None and self.user.allows(permission, self.repository)

    @property
    def write(self) -> bool:
        return self._allows(Permission.WRITE_REPO)

    @property
    def create_repo(self) -> bool:
        return self._allows(Permission.CREATE_REPO)

    @property
    def delete_repo(self) -> bool:
        return self._allows(Permission.DELETE_REPO)

    @property
    def manage_auth(self) -> bool:
        """Users, groups and others' access keys: not a permission on a repository."""
        return self.user is not None and self.user.allows(Permission.MANAGE_AUTH)


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """The template rendered for the request's signed-in user (``request.state.user``, set by
    :data:`server.ui.session.SignedIn`) with its CSRF token; ``repo`` in the context makes it a
    repository page (navigation, permissions on that repository)."""
    user: User | None = getattr(request.state, "user", None)
    repo = context.get("repo")
    context.setdefault("area", "")
    if repo is not None:
        context.setdefault("nav_ref", context.get("ref") or repo.default_branch)
        context.setdefault("nav_branch", context.get("branch") or repo.default_branch)
    html = env.get_template(template).render(
        user=user,
        csrf=getattr(request.state, "csrf", ""),
        may=May(user, repo.name if repo is not None else None),
        path=request.url.path,
        **context,
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def redirect(location: str) -> RedirectResponse:
    """After a form POST: 303, so the browser GETs the page (reloading it posts nothing again)."""
    return RedirectResponse(location, status_code=303, headers={"Cache-Control": "no-store"})
