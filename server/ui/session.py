"""Sign-in and sign-out, the session cookie and CSRF tokens, and what every UI route uses: the
route class :class:`UIRoute` (CSRF checked on every POST, errors rendered as pages), the
signed-in user (:data:`SignedIn`) and the permission checks (:func:`can`, :func:`require`).

The session cookie holds ``<login token>:<session id>``: a login token of
:class:`server.auth.tokens.LoginTokens` (the API's bearer tokens) and a random id that makes each
sign-in's cookie unique. ``HttpOnly`` and ``SameSite=Lax``, ``Secure`` when the request came over
https. A page resolves its user from the token as the API resolves a bearer token; a signed-out
cookie is remembered until it would have expired (``ui/ended`` partition: sha256 hex of the cookie
→ its expiry), so a copy of it stops working at sign-out too, and the login token inside it is
revoked (:meth:`server.auth.tokens.LoginTokens.revoke`): taken out of the cookie, it is no bearer
token either.

CSRF: the token a form carries is HMAC-SHA256 of the session cookie under a key derived from the
server's secret (``auth.encrypt.secret_key``, shared by every server process). ``SameSite=Lax``
keeps the cookie off another site's POSTs already; the token covers what it does not (sibling
sites under one domain, browsers without SameSite): a page that makes a browser send the cookie
cannot read it, so it cannot compute the HMAC. Nothing is stored, and the token changes with
every sign-in, rather than a random token in a second cookie. The sign-in form, before there is a session,
is bound the same way to a random nonce kept in a second cookie (no login CSRF).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, Form, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException

from lakectl.core.journal import journal
from lakectl.errors import Forbidden, KeyNotFound, LakectlError, Unauthenticated
from server.api import edge
from server.api.deps import forbidden
from server.auth.secret import load_secret_key
from server.auth.store import Auth
from server.auth.users import User
from server.policies import Permission
from server.ui import links, render

log = logging.getLogger("lakectl.server")

SESSION_COOKIE = "lakectl_session"
LOGIN_COOKIE = "lakectl_login"
CSRF_FIELD = "csrf"
SESSION_TTL = 12 * 3600
"""How long a UI session lasts (the API's login tokens last a week; a browser session less)."""
ENDED = "ui/ended"
LOGIN_PATH = render.PREFIX + "/login"
LOGIN_TTL = 3600
"""How long the sign-in form's nonce cookie lasts."""


class SignInRequired(Exception):
    """No valid session: the route answers with a redirect to the sign-in page."""


def install(app: FastAPI) -> None:
    """Derive the CSRF key from the server's secret, once."""
    settings = app.state.settings
    secret = load_secret_key(settings.secret_key, settings.data_dir)
    app.state.ui_csrf_key = hmac.new(secret.encode(), b"lakectl ui csrf v1", hashlib.sha256).digest()


# -- CSRF ---------------------------------------------------------------------------------------


def _mac(request: Request, purpose: bytes, value: str) -> str:
    key: bytes = request.app.state.ui_csrf_key
    return hmac.new(key, purpose + b"\0" + value.encode(), hashlib.sha256).hexdigest()


def csrf_token(request: Request) -> str:
    """The token this request's forms carry: bound to its session cookie ("" without one)."""
    session = request.cookies.get(SESSION_COOKIE)
    return _mac(request, b"session", session) if session else ""


def _check_csrf(request: Request, form: FormData) -> None:
    """The form's token matches the session cookie's, or (the sign-in form: that cookie is sent
    to the sign-in path only) the sign-in nonce's."""
    sent = form.get(CSRF_FIELD)
    bindings = (
        (b"session", request.cookies.get(SESSION_COOKIE)),
        (b"login", request.cookies.get(LOGIN_COOKIE)),
    )
    if isinstance(sent, str) and sent:
        for purpose, value in bindings:
            if value and hmac.compare_digest(sent.encode(), _mac(request, purpose, value).encode()):
                return
    raise Forbidden(
        "the form's CSRF token is missing or does not match this session: reload the page and try again"
    )


# -- the signed-in user -------------------------------------------------------------------------


def _ended_key(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


def _login_token(cookie: str) -> str:
    return cookie.rpartition(":")[0]


def _user_of(request: Request) -> User:
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        raise SignInRequired
    auth: Auth = request.app.state.auth
    try:
        user = auth.tokens.user_of(_login_token(cookie))
    except Unauthenticated:
        raise SignInRequired from None
    try:
        auth.kv.get(ENDED, _ended_key(cookie))
    except KeyNotFound:
        return user
    raise SignInRequired


async def signed_in(request: Request) -> User:
    """The user of the session cookie (redirect to sign-in without one). On the event loop, as
    the API's: three KV reads and a decryption cost less than a hop to the thread pool."""
    known: User | None = getattr(request.state, "user", None)
    if known is None:
        known = request.state.user = _user_of(request)
        request.state.csrf = csrf_token(request)
        journal.CLIENT.set(known.id)  # the journal's client_id, as the API sets it
    return known


SignedIn = Annotated[User, Depends(signed_in)]


def require(user: User, permission: Permission, repository: str | None = None) -> None:
    """Raise ``Forbidden`` (a 403 page) unless the user's policies allow ``permission``."""
    if not user.allows(permission, repository):
        raise forbidden(user, permission, repository)


def can(permission: Permission) -> Any:
    """The dependency of a route that needs ``permission`` on the repository its path names
    (``{repo}``), as the API's ``require``."""

    async def check(request: Request, user: SignedIn) -> None:
        require(user, permission, request.path_params.get("repo"))

    return Depends(check)


# -- the route class ----------------------------------------------------------------------------


class UIRoute(APIRoute):
    """A UI route: a POST must carry the session's CSRF token (checked before anything runs);
    no session is a redirect to the sign-in page; a ``LakectlError`` is an error page with its
    status and message, invalid form input a 400 page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            form: FormData | None = None
            try:
                edge.check_url(request)  # as the API's: text that is not UTF-8 is refused, not replaced
                if request.method == "POST":
                    form = await edge.read_form(request)
                    _check_csrf(request, form)
                response = await handler(request)
            except SignInRequired:
                return _to_sign_in(request)
            except LakectlError as e:
                if e.http_status >= 500:
                    log.error("%s %s failed: %s", request.method, request.url.path, e.message)
                return error_page(request, e.http_status, e.message)
            except RequestValidationError as e:
                problems = "; ".join(f"{'.'.join(map(str, x['loc'][1:]))}: {x['msg']}" for x in e.errors())
                return error_page(request, 400, f"invalid form: {problems}")
            except HTTPException as e:
                return error_page(request, e.status_code, str(e.detail))
            except Exception:  # a bug: the traceback to the log, a plain 500 page to the user
                log.exception("%s %s: internal error", request.method, request.url.path)
                return error_page(request, 500, "internal server error")
            finally:
                if form is not None:
                    await form.close()
            for name, value in render.SECURITY_HEADERS.items():
                response.headers.setdefault(name, value)
            return response

        return answer


def ui_router() -> APIRouter:
    """The router of a UI route module."""
    return APIRouter(route_class=UIRoute, include_in_schema=False)


def error_page(request: Request, status: int, message: str) -> Response:
    return render.page(request, "error.html", status, code=status, message=message)


def _safe_next(target: str) -> str:
    """Where to go after signing in: a UI path of this server only (no open redirect)."""
    local = target.startswith(render.PREFIX + "/") and "\\" not in target
    if local and not any(ord(c) < 0x20 or c == "\x7f" for c in target):
        return target
    return render.PREFIX + "/"


def _to_sign_in(request: Request) -> Response:
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    target = here if request.method == "GET" else render.PREFIX + "/"
    response = render.redirect(f"{LOGIN_PATH}?next={quote(target, safe='')}")
    if SESSION_COOKIE in request.cookies:  # expired, forged or signed out: forget it
        response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def _start_session(request: Request, user: User, target: str) -> Response:
    auth: Auth = request.app.state.auth
    cookie = f"{auth.tokens.issue(user, ttl=SESSION_TTL).token}:{secrets.token_urlsafe(16)}"
    response = render.redirect(_safe_next(target))
    secure = request.url.scheme == "https"
    response.set_cookie(
        SESSION_COOKIE, cookie, SESSION_TTL, path="/", secure=secure, httponly=True, samesite="lax"
    )
    response.delete_cookie(LOGIN_COOKIE, path=LOGIN_PATH)
    return response


# -- sign-in and sign-out pages -----------------------------------------------------------------

router = ui_router()


def _sign_in_form(request: Request, status: int = 200, error: str = "", next_: str = "") -> Response:
    """The sign-in page, its form bound to a nonce cookie (a session cookie, no longer valid, is
    dropped)."""
    nonce = request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(24)
    request.state.csrf = _mac(request, b"login", nonce)
    response = render.page(request, "login.html", status, error=error, next=_safe_next(next_))
    secure = request.url.scheme == "https"
    response.set_cookie(
        LOGIN_COOKIE, nonce, LOGIN_TTL, path=LOGIN_PATH, secure=secure, httponly=True, samesite="lax"
    )
    if SESSION_COOKIE in request.cookies:
        response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/login")
def sign_in_page(request: Request, next: str = "", token: str = "") -> Response:
    """The sign-in form; with ``token``, a one-time link of ``lakectl ui`` signs in at once."""
    auth: Auth = request.app.state.auth
    if token:
        try:
            user = links.consume(auth, token)
        except Unauthenticated as e:
            return _sign_in_form(request, 401, e.message, next)
        return _start_session(request, user, next)
    try:
        _user_of(request)
    except SignInRequired:
        return _sign_in_form(request, next_=next)
    return render.redirect(_safe_next(next))  # already signed in


@router.post("/login")
def sign_in(
    request: Request,
    access_key_id: Annotated[str, Form()] = "",
    secret_access_key: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "",
) -> Response:
    auth: Auth = request.app.state.auth
    try:
        user = auth.authenticate(access_key_id.strip(), secret_access_key)
    except Unauthenticated as e:
        return _sign_in_form(request, 401, e.message, next)
    return _start_session(request, user, next)


@router.post("/logout")
def sign_out(request: Request) -> Response:
    """End the session: the cookie is dropped, and it and the login token inside it are refused
    from now on (by the UI and as the API's bearer token)."""
    cookie = request.cookies.get(SESSION_COOKIE)
    auth: Auth = request.app.state.auth
    if cookie and _valid(auth, _login_token(cookie)):
        auth.tokens.revoke(_login_token(cookie))  # the token inside, as an API bearer token, too
        now = int(time.time())
        # Remembered for SESSION_TTL, longer than the cookie can live; older records are swept.
        auth.kv.set(ENDED, _ended_key(cookie), str(now + SESSION_TTL).encode())
        for key, raw in list(auth.kv.scan(ENDED)):
            if int(raw) <= now:
                auth.kv.delete(ENDED, key)
    response = render.redirect(LOGIN_PATH)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def _valid(auth: Auth, token: str) -> bool:
    try:
        auth.tokens.user_of(token)
    except Unauthenticated:
        return False
    return True
