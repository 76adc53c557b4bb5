"""S3 XML: the error table (lakectl's exception classes to S3 codes) and the document builders."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from urllib.parse import quote
from xml.etree import ElementTree as ET

from starlette.responses import Response

from lakectl import errors as e

NS = "http://s3.amazonaws.com/doc/2006-03-01/"

# Most specific class first: the first class an error is an instance of gives its S3 code.
_ERRORS: tuple[tuple[type[e.LakectlError], str, int], ...] = (
    # Lost or damaged data is the storage failing, never an absent key: a client that took it
    # for NoSuchKey would treat the object as deleted.
    (e.IntegrityError, "ServiceUnavailable", 503),
    (e.RepositoryNotFound, "NoSuchBucket", 404),
    (e.UploadNotFound, "NoSuchUpload", 404),
    # Data a collection removed from under a commit past its retention: the key exists there, so
    # not NoSuchKey; 410 as the REST API and lakeFS answer (S3 has no code of its own for it).
    (e.Gone, "Gone", 410),
    (e.NotFound, "NoSuchKey", 404),
    (e.InvalidAccessKey, "InvalidAccessKeyId", 403),
    (e.SignatureMismatch, "SignatureDoesNotMatch", 403),
    (e.RequestExpired, "AccessDenied", 403),
    (e.Unauthenticated, "AccessDenied", 403),
    (e.Forbidden, "AccessDenied", 403),
    (e.BadDigest, "BadDigest", 400),
    (e.InvalidPartOrder, "InvalidPartOrder", 400),
    (e.InvalidPart, "InvalidPart", 400),
    (e.EntityTooSmall, "EntityTooSmall", 400),
    (e.InvalidRange, "InvalidRange", 416),
    (e.InvalidRef, "MethodNotAllowed", 405),
    (e.InvalidArgument, "InvalidArgument", 400),
    (e.PreconditionFailed, "PreconditionFailed", 412),
    (e.Conflict, "OperationAborted", 409),
    (e.AlreadyExists, "OperationAborted", 409),
    (e.StorageError, "ServiceUnavailable", 503),
)
"""The one mapping of the exception tree onto S3's error codes and statuses."""

_XML_DECL = b'<?xml version="1.0" encoding="UTF-8"?>\n'


_REFINED: frozenset[str] = frozenset({"MetadataTooLarge"})
"""S3 codes of refusals that lakectl's tree has no class of its own for: an ``InvalidArgument``
raised with ``s3_code=<code>`` among its details answers that code (400)."""


def s3_code(error: e.LakectlError) -> tuple[str, int]:
    refined = error.details.get("s3_code")
    if isinstance(error, e.InvalidArgument) and refined in _REFINED and error.http_status == 400:
        return str(refined), 400
    for cls, code, status in _ERRORS:
        if isinstance(error, cls):
            return code, status
    return "InternalError", 500


def error_response(error: e.LakectlError, resource: str, head: bool = False) -> Response:
    """``<Error>`` with the code, message, resource and a request id; a HEAD answer has no body."""
    code, status = s3_code(error)
    request_id = uuid.uuid4().hex[:16].upper()
    headers = {"x-amz-request-id": request_id}
    if code == "MethodNotAllowed":
        headers["Allow"] = "GET, HEAD"  # a ref that is no branch can only be read
    if head:
        return Response(status_code=status, headers=headers)
    root = ET.Element("Error")
    _text(root, "Code", code)
    _text(root, "Message", error.message)
    _text(root, "Resource", resource)
    _text(root, "RequestId", request_id)
    return Response(
        _dump(root, namespaced=False), status_code=status, media_type="application/xml", headers=headers
    )


def document(root: ET.Element, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        _dump(root), status_code=status, media_type="application/xml", headers=dict(headers or {})
    )


def element(name: str, **children: object) -> ET.Element:
    """``<name>`` with one text child per keyword (None skipped), in keyword order."""
    root = ET.Element(name)
    for key, value in children.items():
        if value is not None:
            _text(root, key, value)
    return root


def add(parent: ET.Element, name: str, **children: object) -> ET.Element:
    child = element(name, **children)
    parent.append(child)
    return child


def add_text(parent: ET.Element, name: str, value: object) -> None:
    """A text child ``<name>value</name>``."""
    ET.SubElement(parent, name).text = _str(value)


_text = add_text


def _str(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return iso(value.timestamp())
    return str(value)


def _dump(root: ET.Element, namespaced: bool = True) -> bytes:
    if namespaced:
        root.set("xmlns", NS)
    # typeshed gives tostring with a named encoding Any (only "unicode" returns str); UTF-8 is bytes
    body: bytes = ET.tostring(root, encoding="utf-8")
    return _XML_DECL + body


def iso(timestamp: float) -> str:
    """S3's timestamps in XML: ``2026-11-22T10:00:00.000Z``."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def encode_key(key: str, url: bool) -> str:
    """A key as listed: URL-encoded (``encoding-type=url``; ``/`` kept, as S3 does) or as is."""
    return quote(key, safe="/") if url else key


def parse(body: bytes, root_name: str) -> ET.Element:
    """A request document (CompleteMultipartUpload, Delete); malformed → ``InvalidArgument``.
    The namespace is optional, as clients send it or not."""
    if len(body) > 2 * 1024 * 1024:
        raise e.InvalidArgument(f"the {root_name} document is larger than 2 MiB")
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise e.InvalidArgument(f"the {root_name} document must not declare a DTD or entities")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise e.InvalidArgument(f"malformed XML in the {root_name} document: {exc}") from None
    for node in root.iter():
        node.tag = node.tag.rpartition("}")[2]
    if root.tag != root_name:
        raise e.InvalidArgument(f"expected a <{root_name}> document, got <{root.tag}>")
    return root


def children(root: ET.Element, name: str) -> Iterator[ET.Element]:
    return (child for child in root if child.tag == name)


def child_text(node: ET.Element, name: str) -> str | None:
    found = next(children(node, name), None)
    return None if found is None else (found.text or "")
