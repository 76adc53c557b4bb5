"""Symlink manifests of a branch for Hive-style engines (lakeFS's ``refs/{branch}/symlink``, as
``lakectl metastore create-symlink`` uses it): one ``symlink.txt`` per directory, listing the
addresses of the objects directly in it, for a table declared with ``SymlinkTextInputFormat``.

lakeFS writes them to the repository's storage namespace and lists its objects' physical
addresses, which an engine reads straight from the object store. Here the object store is this
server: the addresses are S3 gateway URIs of the branch's head commit (``s3://<repository>/
<commit>/<path>``, which never change), and the manifests are objects too, committed on the
repository's branch :data:`EXPORT_BRANCH` under ``<branch>/<commit>/``, so that the same
gateway serves them. Only committed objects are listed: staged ones have no lasting address.
"""

from __future__ import annotations

import contextlib

from lakectl.core import listing, porcelain, writes
from lakectl.core.lake import Lake
from lakectl.core.uri import check_path
from lakectl.errors import AlreadyExists, BranchNotFound, NotFound, NothingToCommit

EXPORT_BRANCH = "_lakefs_exported"
"""The branch holding every exported manifest, started from the repository's empty first commit."""
MANIFEST = "symlink.txt"
PAGE = 1000


def create(lake: Lake, repo: str, branch: str, location: str = "") -> str:
    """Write the manifests of the objects under ``location`` (a path prefix) in ``branch``'s head
    commit and return the S3 URI of the directory holding them (one manifest per directory
    below it, as the objects' directories are below ``location``). Writing them again for the
    same commit changes nothing."""
    location = check_path(location, allow_empty=True)
    source = porcelain.get_branch(lake, repo, branch)
    commit_id = source.commit_id
    rid = porcelain.get_repo(lake, repo).name
    lines: dict[str, list[str]] = {}
    after = ""
    while True:
        page = list(listing.list_objects(lake, rid, commit_id, location, after=after, amount=PAGE))
        for info in page:
            directory = info.path.rpartition("/")[0]
            lines.setdefault(directory, []).append(f"s3://{rid}/{commit_id}/{info.path}")
        if len(page) < PAGE:
            break
        after = page[-1].path
    root = f"{source.name}/{commit_id}/"
    _export_branch(lake, rid, commit_id)
    for directory, addresses in lines.items():
        path = f"{root}{directory}/{MANIFEST}" if directory else f"{root}{MANIFEST}"
        data = "\n".join(addresses).encode()
        writes.upload(lake, rid, EXPORT_BRANCH, path, data, "text/plain")
    message = f"symlink manifests of {source.name} at {commit_id}"
    with contextlib.suppress(NothingToCommit):  # written before for this commit, or nothing to list
        porcelain.commit(lake, rid, EXPORT_BRANCH, message, committer="lakectl", prefixes=[root])
    return f"s3://{rid}/{EXPORT_BRANCH}/{root}"


def _export_branch(lake: Lake, repo: str, fallback: str) -> None:
    """Create :data:`EXPORT_BRANCH` from the repository's empty first commit, once (from
    ``fallback`` in a repository restored from a refs dump that does not hold that commit)."""
    try:
        porcelain.get_branch(lake, repo, EXPORT_BRANCH)
        return
    except BranchNotFound:
        pass
    first = porcelain.first_commit(lake, porcelain.get_repo(lake, repo)).id
    for source in (first, fallback):
        try:
            porcelain.create_branch(lake, repo, EXPORT_BRANCH, source)
            return
        except AlreadyExists:  # created by a concurrent export
            return
        except NotFound:
            continue
