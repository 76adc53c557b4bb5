"""The API's exceptions: the names and HTTP status codes of lakeFS's Python wrapper, each raised
from the lakectl error it stands for (its ``__cause__``), so that a script written against
``lakefs`` catches what it caught there."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import lakectl.errors as errors


class LakeFSException(Exception):
    """Every error the API raises: ``status_code`` (the HTTP status a server answers it with)
    and ``message``."""

    status_code: int | None
    message: str

    def __init__(self, status: int | None = None, reason: str = "") -> None:
        super().__init__(reason)
        self.status_code = status
        self.message = reason


class BadRequestException(LakeFSException):
    """The request is invalid (a bad name, path, range or argument)."""


class NotFoundException(LakeFSException):
    """A repository, branch, tag, commit or object that does not exist."""


class ObjectNotFoundException(NotFoundException, FileNotFoundError):
    """An object that does not exist at the reference."""


class ObjectExistsException(LakeFSException, FileExistsError):
    """An object created with ``mode="x"`` that exists already."""


class ConflictException(LakeFSException):
    """A name taken already, a merge whose sides disagree, a change that lost a race."""


class ForbiddenException(LakeFSException):
    """The operation is not permitted (a protected branch, a policy)."""


class PermissionException(LakeFSException, PermissionError):
    """An object opened in a mode the reference does not allow (writing to a commit or tag)."""


class NotAuthorizedException(LakeFSException):
    """The credentials were refused."""


class NoAuthenticationFound(LakeFSException):
    """A server was named without credentials."""


class UnsupportedOperationException(LakeFSException):
    """The operation does not apply (an object writer in a mode it does not know)."""


class InvalidRangeException(LakeFSException, OSError):
    """A read range outside the object."""


class TransactionException(LakeFSException):
    """A transaction that could not finish: its branch is left for inspection."""


class ServerException(LakeFSException):
    """Any other failure: storage, integrity, a server error."""


# Most specific first: the first class the error is an instance of decides.
_MAPPING: tuple[tuple[type[errors.LakectlError], type[LakeFSException], int], ...] = (
    (errors.ObjectNotFound, ObjectNotFoundException, 404),
    (errors.InvalidRange, InvalidRangeException, 416),
    (errors.NotFound, NotFoundException, 404),
    (errors.InvalidArgument, BadRequestException, 400),
    (errors.AlreadyExists, ConflictException, 409),
    (errors.Conflict, ConflictException, 409),
    (errors.PreconditionFailed, ConflictException, 412),
    (errors.Forbidden, ForbiddenException, 403),
    (errors.Unauthenticated, NotAuthorizedException, 401),
)


def translated(error: errors.LakectlError) -> LakeFSException:
    """The API exception standing for a lakectl error."""
    for kind, api, status in _MAPPING:
        if isinstance(error, kind):
            return api(status, str(error))
    return ServerException(500, str(error))


@contextlib.contextmanager
def api_errors() -> Iterator[None]:
    """Raise lakectl errors as the API's exceptions, each from its lakectl error."""
    try:
        yield
    except errors.LakectlError as exc:
        raise translated(exc) from exc
