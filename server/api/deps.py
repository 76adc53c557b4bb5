"""What route functions receive: the opened lake and the authenticated user (HTTP basic)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from fastapi import Depends, Request

from lakectl.core.porcelain import Lake
from lakectl.errors import Unauthenticated
from server.auth import Auth, User


def get_lake(request: Request) -> Lake:
    lake: Lake = request.app.state.lake
    return lake


def get_auth(request: Request) -> Auth:
    auth: Auth = request.app.state.auth
    return auth


def current_user(request: Request) -> User:
    """The user whose access key id and secret came as HTTP basic credentials; 401 otherwise."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic" or not value:
        raise Unauthenticated("authentication required: HTTP basic with an access key id and secret")
    try:
        key_id, sep, secret = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthenticated("malformed HTTP basic credentials") from None
    if not sep:
        raise Unauthenticated("malformed HTTP basic credentials")
    user = get_auth(request).authenticate(key_id, secret)
    request.state.user = user
    return user


LakeDep = Annotated[Lake, Depends(get_lake)]
AuthDep = Annotated[Auth, Depends(get_auth)]
UserDep = Annotated[User, Depends(current_user)]
