"""Every failure as lakeFS's ``{"message"}`` JSON, with lakectl's ``code`` and ``details``.

``LakectlError`` → its ``http_status``; request validation (malformed JSON, missing or
unknown fields, wrong types, bad query values) → 400; unknown routes and methods → 404/405.
A client that hangs up before its request arrived whole is routine: one INFO line, and the answer
goes nowhere. Anything else is a bug: 500 with a generic message, the traceback in the server log
only.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from lakectl.errors import LakectlError, Unauthenticated
from server.responses import SafeJSONResponse

log = logging.getLogger("lakectl.server")


def error_response(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> Response:
    headers = {"WWW-Authenticate": 'Basic realm="lakectl"'} if status == 401 else None
    body = {"message": message, "code": code, "details": details or {}}
    return SafeJSONResponse(body, status_code=status, headers=headers)


async def _lakectl_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LakectlError)
    if exc.http_status >= 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc.message)
    if isinstance(exc, Unauthenticated):
        log.info("%s %s: unauthenticated (%s)", request.method, request.url.path, exc.message)
    return error_response(exc.http_status, exc.code, exc.message, exc.details)


def _where(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        return ".".join(parts[1:]) or "body"
    return ".".join(parts)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    problems = []
    for e in errors:
        if e.get("type") == "json_invalid":
            reason = e.get("ctx", {}).get("error", "")
            return error_response(400, "invalid_argument", f"malformed JSON body: {reason}".rstrip(": "))
        problems.append(f"{_where(tuple(e.get('loc', ())))}: {e.get('msg', 'invalid')}")
    details = {"errors": [{"loc": [str(p) for p in e.get("loc", ())], "msg": e.get("msg")} for e in errors]}
    return error_response(400, "invalid_argument", "invalid request: " + "; ".join(problems), details)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    response = error_response(exc.status_code, code, str(exc.detail))
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _client_disconnect(request: Request, exc: Exception) -> Response:
    log.info(
        "%s %s: the client disconnected before its request arrived whole", request.method, request.url.path
    )
    return error_response(400, "invalid_argument", "the request did not arrive whole")


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("%s %s: internal error", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal", "internal server error")


def install(app: FastAPI) -> None:
    app.add_exception_handler(LakectlError, _lakectl_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(ClientDisconnect, _client_disconnect)
    app.add_exception_handler(Exception, _internal_error)
