"""What route functions receive (the opened lake, the authenticated user) and what each route
requires: every route declares one :class:`Requirement` in its ``dependencies``.

    @router.get("/repositories", dependencies=[require(Permission.READ_REPO)])

Credentials come as HTTP basic (access key id and secret) or as ``Authorization: Bearer
<login token>``. Missing or wrong ones are 401 (``Unauthenticated``); a known user whose policies
do not allow the permission is 403 (``Forbidden``). Both are raised before the route runs, so neither
changes anything.
"""

# No ``from __future__ import annotations`` here: FastAPI resolves the annotations of a callable
# instance's ``__call__`` (Requirement) without a module namespace, so they must be real types.

import base64
import binascii
import enum
import functools
import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request, Response
from fastapi.routing import APIRoute

from lakectl.core.journal import journal
from lakectl.core.lake import Lake
from lakectl.errors import Forbidden, Unauthenticated
from server.api import edge
from server.auth.store import Auth
from server.auth.users import User
from server.policies import PERMISSION_ACTIONS, Permission
from server.responses import SafeJSONResponse


# Async, though they do not wait: FastAPI runs a sync dependency in the thread pool, a hop
# that costs more than these lookups.
async def get_lake(request: Request) -> Lake:
    lake: Lake = request.app.state.lake
    return lake


async def get_auth(request: Request) -> Auth:
    return _auth(request)


def _auth(request: Request) -> Auth:
    auth: Auth = request.app.state.auth
    return auth


async def current_user(request: Request) -> User:
    """The user of the request's HTTP basic credentials or bearer token; 401 otherwise.
    Authenticated once per request (kept in ``request.state.user``), on the event loop: two KV
    reads and a decryption (~60 us) cost less than a hop to the thread pool."""
    known: User | None = getattr(request.state, "user", None)
    if known is None:
        known = request.state.user = _authenticate(request)
        # The journal's client_id: set in the request's context, which its route runs in.
        journal.CLIENT.set(known.id)
    return known


def _authenticate(request: Request) -> User:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer" and value:
        return _auth(request).tokens.user_of(value)
    if scheme.lower() == "basic" and value:
        try:
            key_id, sep, secret = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise Unauthenticated("malformed HTTP basic credentials") from None
        if not sep:
            raise Unauthenticated("malformed HTTP basic credentials")
        return _auth(request).authenticate(key_id, secret)
    raise Unauthenticated(
        "authentication required: HTTP basic with an access key id and secret, or a bearer "
        "token from POST /api/v1/auth/login"
    )


class Access(enum.Enum):
    PUBLIC = "public"
    """No credentials needed (health, set-up, login, the OpenAPI document)."""
    AUTHENTICATED = "authenticated"
    """Any user with valid credentials, whatever its role (the current user's own record)."""
    PERMISSION = "permission"
    """A user whose policies grant the permission (on the repository the path names)."""
    OWN_OR_PERMISSION = "own_or_permission"
    """Any user on its own account (path parameter ``userId``), else the permission."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One route's access rule, as the dependency FastAPI calls before the route."""

    access: Access
    permission: Permission | None = None

    async def __call__(self, request: Request) -> None:
        if self.access is Access.PUBLIC:
            return
        user = await current_user(request)
        if self.access is Access.AUTHENTICATED:
            return
        if self.access is Access.OWN_OR_PERMISSION and request.path_params.get("userId") == user.id:
            return
        assert self.permission is not None
        repository = request.path_params.get("repository")
        if not user.allows(self.permission, repository):
            raise forbidden(user, self.permission, repository)


class AuthFirstRoute(APIRoute):
    """A route that checks its :class:`Requirement` before FastAPI reads and parses the body, as
    lakeFS's middleware does: unauthenticated callers get 401 even with a malformed or huge body,
    and never make the server buffer one. (The requirement stays among the dependencies too: a
    router built without this class still enforces it, after the body.)

    Then, still before the route runs, the raw input is checked (:mod:`server.api.edge`): a path
    or query that is not UTF-8, a JSON body larger than :data:`~server.api.edge.MAX_JSON_BODY`
    or holding a lone surrogate, is 400. A route's answer renders as :class:`SafeJSONResponse`,
    so a stored record that holds text UTF-8 cannot encode still renders."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, _answering_json(endpoint, kwargs.get("status_code")), **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        checks = [d.call for d in self.dependant.dependencies if isinstance(d.call, Requirement)]
        takes_body = self.body_field is not None

        async def checked(request: Request) -> Response:
            for check in checks:
                await check(request)
            edge.check_url(request)
            if takes_body:
                await edge.read_json_body(request)
            return await handler(request)

        return checked


def _answering_json(endpoint: Callable[..., Any], status_code: int | None) -> Callable[..., Any]:
    """``endpoint``, whose answer (unless already a Response) becomes a :class:`SafeJSONResponse`.
    FastAPI's own serializer encodes to UTF-8 and fails on a lone surrogate; it is bypassed for a
    Response. The wrapper keeps the endpoint's signature (``__wrapped__``), so FastAPI reads the
    same parameters, dependencies and documented answer from it."""
    status = status_code or 200

    def answer(result: Any) -> Any:
        return result if isinstance(result, Response) else SafeJSONResponse(result, status_code=status)

    if inspect.iscoroutinefunction(endpoint):

        @functools.wraps(endpoint)
        async def call_async(*args: Any, **kwargs: Any) -> Any:
            return answer(await endpoint(*args, **kwargs))

        return call_async

    @functools.wraps(endpoint)
    def call(*args: Any, **kwargs: Any) -> Any:  # run in the thread pool, rendering included
        return answer(endpoint(*args, **kwargs))

    return call


def forbidden(user: User, permission: Permission, repository: str | None) -> Forbidden:
    """The refusal of a user whose policies do not allow ``permission``."""
    actions = ", ".join(PERMISSION_ACTIONS[permission])
    where = f" on repository {repository!r}" if repository else ""
    return Forbidden(
        f"user {user.id!r} is not allowed {actions}{where} (permission {permission.value}): "
        "its policies and its groups' do not allow it",
        permission=permission.value,
    )


def require(permission: Permission) -> Any:
    """The dependency of a route that needs ``permission``."""
    return Depends(Requirement(Access.PERMISSION, permission))


def require_own_or(permission: Permission) -> Any:
    """The dependency of a route on a user's account (``{userId}``): its owner may, else
    ``permission`` is needed."""
    return Depends(Requirement(Access.OWN_OR_PERMISSION, permission))


PUBLIC: Any = Depends(Requirement(Access.PUBLIC))
AUTHENTICATED: Any = Depends(Requirement(Access.AUTHENTICATED))

LakeDep = Annotated[Lake, Depends(get_lake)]
AuthDep = Annotated[Auth, Depends(get_auth)]
UserDep = Annotated[User, Depends(current_user)]
