"""Objects at any ref: the browser (a prefix at a time, paged with ``after``), an object's page
with a preview of small text, its download, and uploads to a branch."""

from __future__ import annotations

from itertools import islice
from typing import Annotated, BinaryIO, cast
from urllib.parse import quote

from fastapi import File, Form, Request, Response, UploadFile
from fastapi.concurrency import run_in_threadpool

from lakectl.core import porcelain as p
from lakectl.errors import InvalidArgument
from server.api.deps import LakeDep
from server.auth import Permission
from server.headers import as_header
from server.reads import object_body
from server.ui.refs import branch_of, ref_names
from server.ui.render import basename, page, redirect, url
from server.ui.session import can, ui_router

router = ui_router()
PAGE = 100
PREVIEW_BYTES = 64 * 1024
"""Objects up to this size that are UTF-8 text are shown on their page."""
READ, WRITE = can(Permission.READ_REPO), can(Permission.WRITE_REPO)


@router.get("/repos/{repo}/refs/{ref}/objects", dependencies=[READ])
def browse(
    request: Request, repo: str, ref: str, lake: LakeDep, prefix: str = "", after: str = ""
) -> Response:
    """The objects and directories (common prefixes at ``/``) right under ``prefix``."""
    r = p.get_repo(lake, repo)
    branch = branch_of(lake, repo, ref)
    items = list(islice(p.list_objects(lake, repo, ref, prefix, "/", after, PAGE + 1), PAGE + 1))
    return page(
        request,
        "objects.html",
        repo=r,
        ref=ref,
        branch=branch,
        prefix=prefix,
        after=after,
        items=items[:PAGE],
        next_after=items[PAGE - 1].path if len(items) > PAGE else "",
        ref_names=ref_names(lake, repo),
        switch_action=url("repos", repo, "goto"),
        switch_keep=[("to", "objects"), ("prefix", prefix)],
        area="objects",
    )


def _preview(lake: p.Lake, repo: str, ref: str, path: str, size: int) -> tuple[str | None, str]:
    """The object's text, or None and why it is not shown."""
    if size > PREVIEW_BYTES:
        return None, f"Not shown: larger than {PREVIEW_BYTES // 1024} KiB."
    data = b"".join(p.read(lake, repo, ref, path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "Not shown: not UTF-8 text."
    if any(ord(c) < 0x20 and c not in "\t\n\r" for c in text):
        return None, "Not shown: binary data."
    return text, ""


@router.get("/repos/{repo}/refs/{ref}/object", dependencies=[READ])
def show(request: Request, repo: str, ref: str, path: str, lake: LakeDep) -> Response:
    r = p.get_repo(lake, repo)
    info = p.stat(lake, repo, ref, path)
    assert info.entry is not None
    preview, no_preview = _preview(lake, repo, ref, path, info.entry.size)
    return page(
        request,
        "object.html",
        repo=r,
        ref=ref,
        branch=branch_of(lake, repo, ref),
        info=info,
        preview=preview,
        no_preview=no_preview,
        area="objects",
    )


@router.get("/repos/{repo}/refs/{ref}/download", dependencies=[READ])
async def download(request: Request, repo: str, ref: str, path: str, lake: LakeDep) -> Response:
    """The object's bytes as a file to save, never rendered in the UI's origin (an uploaded HTML
    page would otherwise run its scripts as the signed-in user)."""
    found = await run_in_threadpool(p.open_object, lake, repo, ref, path)
    entry = found.entry
    headers = {
        "Content-Type": as_header(entry.content_type),
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(basename(path).rstrip('/'), safe='')}",
        "Content-Security-Policy": "sandbox",
        "X-Content-Type-Options": "nosniff",
        "ETag": f'"{entry.checksum}"',
    }
    inline = request.app.state.inline_reads
    return await object_body(lake, found, 0, entry.size, 200, headers, inline_reads=inline)


@router.post("/repos/{repo}/branches/{branch}/upload", dependencies=[WRITE])
def upload(
    repo: str,
    branch: str,
    lake: LakeDep,
    content: Annotated[UploadFile, File()],
    path: Annotated[str, Form()] = "",
    prefix: Annotated[str, Form()] = "",
) -> Response:
    """Stage the file at ``path`` (default: the prefix shown and the file's name); its content
    type is the one the browser sent."""
    target = path.strip() or prefix + (content.filename or "")
    if not target or target.endswith("/"):
        raise InvalidArgument("give the object a path (or upload a file that has a name)")
    content_type = content.content_type or None
    p.upload(lake, repo, branch, target, cast(BinaryIO, content.file), content_type)
    return redirect(url("repos", repo, "refs", branch, "object", path=target))
