"""The one exception tree of lakectl: every error a user can see, with its exit code and HTTP status.

    LakectlError                 internal            exit 1   HTTP 500
    ├── InvalidArgument          invalid_argument    exit 2   HTTP 400
    │   ├── InvalidName                (repository, branch, tag names)
    │   ├── InvalidURI                 (lakefs://repo/ref/path)
    │   ├── InvalidRef                 (ref expressions: main~2, abc^2, ...)
    │   ├── InvalidPath                (object paths: `..`, NUL, ...)
    │   ├── InvalidLocator             (Keep locators)
    │   ├── InvalidManifest            (Keep manifests)
    │   ├── BadDigest                  (a body does not match its Content-MD5 or checksum)
    │   ├── InvalidPart, InvalidPartOrder, EntityTooSmall   (multipart uploads)
    │   └── InvalidRange         HTTP 416
    │                                  (a byte range outside the object)
    ├── NotFound                 not_found           exit 3   HTTP 404
    │   ├── RepositoryNotFound, BranchNotFound, TagNotFound, RefNotFound,
    │   │   CommitNotFound, ObjectNotFound, BlockNotFound, UploadNotFound
    │   ├── KeyNotFound                (KV store: no such key)
    │   └── Gone                 HTTP 410
    │                                  (data of a commit past its retention, collected by gc)
    ├── AlreadyExists            already_exists      exit 4   HTTP 409
    ├── Conflict                 conflict            exit 5   HTTP 409
    │   └── MergeConflict              (carries the conflicting paths)
    ├── PreconditionFailed       precondition_failed exit 6   HTTP 412
    │   ├── PredicateFailed            (KV compare-and-swap lost)
    │   ├── DirtyBranch                (uncommitted changes where none are allowed)
    │   ├── NothingToCommit
    │   ├── TooManyRetries             (a compare-and-swap loop gave up)
    │   └── HookFailed                 (a pre-event action hook refused the verb)
    ├── IntegrityError           integrity_error     exit 7   HTTP 503
    │   ├── CorruptBlock               (a block's bytes do not match its locator)
    │   ├── MissingData                (a block an object needs is not stored: lost data,
    │   │                               never "no such object")
    │   └── SourceChanged              (an imported object's source changed or vanished)
    ├── Forbidden                forbidden           exit 8   HTTP 403
    │   ├── ProtectedBranch
    │   └── SignatureError             (bad, forged or expired signed locator)
    ├── Unauthenticated          unauthenticated     exit 10  HTTP 401
    │   ├── InvalidAccessKey           (no such access key id)
    │   ├── SignatureMismatch          (a request signature that does not verify)
    │   └── RequestExpired             (a presigned URL past its expiry, a clock too skewed)
    └── StorageError             storage_error       exit 9   HTTP 503

``BlockNotFound`` (404) is for a block the caller named (the block API, links); reading an
object whose block is gone raises ``MissingData`` (503): its storage failed, the object exists.
Unless the object is read at a commit its repository's retention rules let go: then a garbage
collection removed the data on purpose, and the read is ``Gone`` (410, as lakeFS answers).
Retrying an integrity error cannot help, so clients do not retry it, unlike a ``StorageError``.

Foreign exceptions (sqlite3, OSError, pyarrow, httpx) are translated into this tree at the
module that imports them, with ``raise ... from``. The server sends ``{code, message, details}``
and the client rebuilds the same class from ``code`` (see :func:`from_code`).
"""

from __future__ import annotations

from typing import Any, ClassVar


class LakectlError(Exception):
    """Root of every error lakectl raises on purpose."""

    code: ClassVar[str] = "internal"
    exit_code: ClassVar[int] = 1
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class InvalidArgument(LakectlError):
    code = "invalid_argument"
    exit_code = 2
    http_status = 400


class InvalidName(InvalidArgument):
    code = "invalid_name"


class InvalidURI(InvalidArgument):
    code = "invalid_uri"


class InvalidRef(InvalidArgument):
    code = "invalid_ref"


class InvalidPath(InvalidArgument):
    code = "invalid_path"


class InvalidLocator(InvalidArgument):
    code = "invalid_locator"


class InvalidManifest(InvalidArgument):
    code = "invalid_manifest"


class BadDigest(InvalidArgument):
    code = "bad_digest"


class InvalidPart(InvalidArgument):
    code = "invalid_part"


class InvalidPartOrder(InvalidArgument):
    code = "invalid_part_order"


class EntityTooSmall(InvalidArgument):
    code = "entity_too_small"


class InvalidRange(InvalidArgument):
    code = "invalid_range"
    http_status = 416


class NotFound(LakectlError):
    code = "not_found"
    exit_code = 3
    http_status = 404


class RepositoryNotFound(NotFound):
    code = "repository_not_found"


class BranchNotFound(NotFound):
    code = "branch_not_found"


class TagNotFound(NotFound):
    code = "tag_not_found"


class RefNotFound(NotFound):
    code = "ref_not_found"


class CommitNotFound(NotFound):
    code = "commit_not_found"


class ObjectNotFound(NotFound):
    code = "object_not_found"


class BlockNotFound(NotFound):
    code = "block_not_found"


class UploadNotFound(NotFound):
    """No multipart upload of that id (never created, completed or aborted)."""

    code = "upload_not_found"


class KeyNotFound(NotFound):
    code = "key_not_found"


class Gone(NotFound):
    """The data of a commit past its repository's retention: garbage collection removed it."""

    code = "gone"
    http_status = 410


class AlreadyExists(LakectlError):
    code = "already_exists"
    exit_code = 4
    http_status = 409


class Conflict(LakectlError):
    code = "conflict"
    exit_code = 5
    http_status = 409


class MergeConflict(Conflict):
    """A merge, cherry-pick or revert found paths changed differently on both sides."""

    code = "merge_conflict"

    def __init__(self, message: str, paths: list[str] | None = None, **details: Any) -> None:
        super().__init__(message, conflicts=list(paths or []), **details)
        self.paths: list[str] = list(paths or [])


class PreconditionFailed(LakectlError):
    code = "precondition_failed"
    exit_code = 6
    http_status = 412


class PredicateFailed(PreconditionFailed):
    code = "predicate_failed"


class DirtyBranch(PreconditionFailed):
    code = "dirty_branch"


class NothingToCommit(PreconditionFailed):
    code = "nothing_to_commit"


class TooManyRetries(PreconditionFailed):
    code = "too_many_retries"


class HookFailed(PreconditionFailed):
    """A pre-event hook of an action (``_lakefs_actions/``) failed: the verb did nothing. Details
    name the run, the action, the hook and its output (lakeFS answers 412 too)."""

    code = "hook_failed"


class IntegrityError(LakectlError):
    """Stored data is damaged or lost: the storage failed (503), and a retry cannot help."""

    code = "integrity_error"
    exit_code = 7
    http_status = 503


class CorruptBlock(IntegrityError):
    code = "corrupt_block"


class MissingData(IntegrityError):
    """A block that an object (or a part of one being read) refers to is not stored."""

    code = "missing_data"


class SourceChanged(IntegrityError):
    """An imported object's bytes are no longer the version imported (size, ETag or mtime
    differ) or are gone: the read is refused, never served with other bytes."""

    code = "source_changed"


class Forbidden(LakectlError):
    code = "forbidden"
    exit_code = 8
    http_status = 403


class ProtectedBranch(Forbidden):
    code = "protected_branch"


class SignatureError(Forbidden):
    code = "signature_error"


class Unauthenticated(LakectlError):
    """No credentials, or wrong ones (a server answered 401)."""

    code = "unauthenticated"
    exit_code = 10
    http_status = 401


class InvalidAccessKey(Unauthenticated):
    code = "invalid_access_key"


class SignatureMismatch(Unauthenticated):
    code = "signature_mismatch"


class RequestExpired(Unauthenticated):
    code = "request_expired"


class StorageError(LakectlError):
    code = "storage_error"
    exit_code = 9
    http_status = 503


def _all_classes() -> list[type[LakectlError]]:
    seen: list[type[LakectlError]] = [LakectlError]
    i = 0
    while i < len(seen):
        seen.extend(seen[i].__subclasses__())
        i += 1
    return seen


def from_code(code: str, message: str, details: dict[str, Any] | None = None) -> LakectlError:
    """Rebuild the exception a server reported as ``{code, message, details}``."""
    details = dict(details or {})
    for cls in _all_classes():
        if cls.code == code:
            if cls is MergeConflict:
                return MergeConflict(message, paths=details.pop("conflicts", []), **details)
            return cls(message, **details)
    return LakectlError(message, **details)
