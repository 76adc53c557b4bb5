"""Objects at any ref: the browser (a prefix at a time, paged with ``after``), an object's page
with its preview (:mod:`server.ui.previews`) and, on request, a presigned link, its download, and
uploads to a branch."""

from __future__ import annotations

from itertools import islice
from typing import Annotated

from fastapi import File, Form, Request, Response, UploadFile
from fastapi.concurrency import run_in_threadpool

from lakectl.core import listing, writes
from lakectl.core import porcelain as p
from lakectl.errors import InvalidArgument
from server import presigned
from server.api.deps import LakeDep
from server.policies import Permission
from server.reads import object_body
from server.served import attachment, served_headers
from server.ui import previews
from server.ui.refs import branch_of, ref_names
from server.ui.render import page, redirect, url
from server.ui.session import SignedIn, can, ui_router

router = ui_router()
PAGE = 100
READ, WRITE = can(Permission.READ_REPO), can(Permission.WRITE_REPO)


@router.get("/repos/{repo}/refs/{ref}/objects", dependencies=[READ])
def browse(
    request: Request, repo: str, ref: str, lake: LakeDep, prefix: str = "", after: str = ""
) -> Response:
    """The objects and directories (common prefixes at ``/``) right under ``prefix``."""
    r = p.get_repo(lake, repo)
    branch = branch_of(lake, repo, ref)
    items = list(islice(listing.list_objects(lake, repo, ref, prefix, "/", after, PAGE + 1), PAGE + 1))
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


@router.get("/repos/{repo}/refs/{ref}/object", dependencies=[READ])
def show(
    request: Request, repo: str, ref: str, path: str, lake: LakeDep, user: SignedIn, presign: bool = False
) -> Response:
    """The object's facts and preview; with ``presign``, a presigned link to it as well (made
    only when asked: whoever holds one reads the object, without signing in, until it expires)."""
    r = p.get_repo(lake, repo)
    found = p.open_object(lake, repo, ref, path)
    link, expiry, no_link = "", 0, ""
    if presign:
        try:
            link, expiry = presigned.url_for(request, lake, user, repo, ref, found.path, None)
        except InvalidArgument as e:
            no_link = e.message
    return page(
        request,
        "object.html",
        repo=r,
        ref=ref,
        branch=branch_of(lake, repo, ref),
        info=found,
        preview=previews.preview(lake, found),
        presigned=link,
        presigned_expiry=expiry,
        no_presigned=no_link,
        area="objects",
    )


@router.get("/repos/{repo}/refs/{ref}/download", dependencies=[READ])
async def download(
    request: Request, repo: str, ref: str, path: str, lake: LakeDep, inline: bool = False
) -> Response:
    """The object's bytes as a file to save, never rendered in the UI's origin (an uploaded HTML
    page would otherwise run its scripts as the signed-in user). With ``inline``, an image of
    :data:`previews.IMAGE_TYPES` is sent to be shown (an object page's ``<img>``), with that
    image type whatever the type stored: anything else is still a file to save."""
    found = await run_in_threadpool(p.open_object, lake, repo, ref, path)
    entry = found.entry
    image = previews.image_type(found.path, entry.content_type) if inline else None
    saved = attachment(found.path)
    disposition = saved.replace("attachment", "inline", 1) if image else saved
    headers = {
        **served_headers(found.path, image or entry.content_type, disposition),
        "ETag": f'"{entry.checksum}"',
    }
    in_loop = request.app.state.inline_reads
    return await object_body(lake, found, 0, entry.size, 200, headers, inline_reads=in_loop)


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
    writes.upload(lake, repo, branch, target, content.file, content_type)
    return redirect(url("repos", repo, "refs", branch, "object", path=target))
