"""The web UI: server-rendered pages under ``/ui`` (docs/ui.md), one route module per area, each
calling the same porcelain verbs as the REST API, with the API's users and permissions.

A new area is a route module (``router = session.ui_router()``; pages rendered with
``render.page``; the user from ``session.SignedIn``; permissions with ``session.can`` or
``session.require``; every POST's CSRF token is checked by the route class), its templates
(extending ``repo_base.html``), an entry in :data:`MODULES` and one in ``render.AREAS``.
"""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from server.ui import actions, admin, diff, feed, history, objects, pulls, refs, repos, session, settings
from server.ui.render import PREFIX, STATIC

MODULES = (session, repos, refs, history, objects, diff, pulls, actions, settings, feed, admin)
"""The route modules, each with its ``router``."""

fallback = session.ui_router()


@fallback.api_route("/{rest:path}", methods=["GET", "POST"])
def not_found(request: Request, user: session.SignedIn, rest: str) -> Response:
    """Any other path under /ui: a 404 page (for a signed-in user; else the sign-in page)."""
    return session.error_page(request, 404, f"there is no page {request.url.path}")


def mount(app: FastAPI) -> None:
    """Serve the UI under ``/ui`` of ``app``, and redirect ``/`` to it.

    The UI is an application of its own, mounted: its routes answer HTML and authenticate by
    session cookie, so they stay out of the API's route table (where every route declares its
    :class:`~server.api.deps.Requirement`) and its JSON error handlers. It shares the API's
    state: the lake, the users, the settings."""
    ui = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    ui.state = app.state
    session.install(ui)
    ui.mount("/static", StaticFiles(directory=STATIC), name="static")
    for module in MODULES:
        ui.include_router(module.router)
    ui.include_router(fallback)
    app.mount(PREFIX, ui)
    app.add_middleware(RootToUI)


class RootToUI:
    """``GET /`` leads to the UI; every other request goes on, untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/" and scope["method"] in ("GET", "HEAD"):
            await RedirectResponse(PREFIX + "/")(scope, receive, send)
            return
        await self.app(scope, receive, send)
