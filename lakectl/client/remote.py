"""RemoteBackend: the same verbs over HTTP to ``lakectl server run`` (lakeFS API v1 + block API).

Uploads hash blocks locally, ask the server which it lacks, upload only those (in parallel), get
signed locators for the others by proving knowledge of their bytes, then link the object: data
already on the server never crosses the network again. Errors come back as ``{code, message,
details}`` and are rebuilt into the same exception classes the embedded lake raises.
"""

from __future__ import annotations

import json as _json_module
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from lakectl.client import blockio, wire
from lakectl.client.protocol import ByteProgress
from lakectl.client.remote_blocks import BlocksOverHttp, Packs, _q, turn
from lakectl.client.remote_pulls import PullsOverHttp
from lakectl.errors import (
    Conflict,
    Forbidden,
    IntegrityError,
    InvalidArgument,
    LakectlError,
    MergeConflict,
    NotFound,
    StorageError,
    Unauthenticated,
    from_code,
)

if TYPE_CHECKING:
    from lakectl.client.auth import RemoteAuth
    from lakectl.core.annotate import Annotation
    from lakectl.core.merging import MergeResult
    from lakectl.core.model import (
        Branch,
        Change,
        Commit,
        FeedChange,
        ObjectInfo,
        Repository,
        ResetKind,
        Tag,
    )
    from lakectl.core.upkeep.retention import GCRules
    from lakectl.core.workflow.actionruns import ActionRun, HookRun

PAGE = 1000
ATTEMPTS = 5


def _endpoint(text: str) -> str:
    """The server's base URL from ``server.endpoint_url`` (a trailing ``/api/v1`` dropped), or
    one error saying what is wrong with it."""
    endpoint = text.rstrip("/").removesuffix("/api/v1")
    try:
        parts = urlsplit(endpoint)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except (ValueError, UnicodeError):
        valid = False
    if not valid:
        raise InvalidArgument(
            f"server endpoint {text!r} is not an http:// or https:// URL with a host "
            "(LAKECTL_SERVER_ENDPOINT_URL, or server.endpoint_url in the configuration file)"
        )
    return endpoint


class RemoteBackend(BlocksOverHttp, PullsOverHttp):
    """A :class:`~lakectl.client.Backend` talking to a lakectl server at ``endpoint``."""

    def __init__(
        self,
        endpoint: str,
        access_key_id: str,
        secret_access_key: str,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoint = _endpoint(endpoint)
        for name, value in (("access key id", access_key_id), ("secret access key", secret_access_key)):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidArgument(f"the configured {name} is not UTF-8 text") from e
        self._http = httpx.Client(
            base_url=self.endpoint,
            auth=(access_key_id, secret_access_key),
            timeout=httpx.Timeout(60.0, connect=10.0),
            transport=transport,
            follow_redirects=False,
        )
        self._packs = Packs()

    def init(self) -> dict[str, Any]:
        self._call("GET", "/api/v1/healthcheck")
        return {"home": self.endpoint}

    def location(self) -> str:
        self._call("GET", "/api/v1/healthcheck")
        return self.endpoint

    def close(self) -> None:
        self._http.close()

    def auth(self) -> RemoteAuth:
        from lakectl.client.auth import RemoteAuth

        return RemoteAuth(self._auth_call)

    def _auth_call(
        self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None
    ) -> Any:
        response = self._call(method, path, params=params, json=json)
        return response.json() if response.content else None

    # -- transport ---------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | memoryview | None = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> httpx.Response:
        """One request, retried with jittered backoff on network errors (always, as long as
        nothing may have reached the server) and on 5xx (only for idempotent requests, and not
        for an integrity error: damaged or lost data stays so however often it is read)."""
        safe = method in ("GET", "HEAD", "PUT", "DELETE") if idempotent is None else idempotent
        whole: bytes | None = None
        sliced: bytes | memoryview | None = None
        if isinstance(content, bytes) and len(content) <= blockio.SEND_SLICE:
            whole = content
        elif content is not None:
            sliced = content  # large, or a view of a reused buffer: sent as slices, no copies
            headers = {**(headers or {}), "Content-Length": str(len(content))}
        for attempt in range(ATTEMPTS):
            try:
                body = whole if sliced is None else blockio.slices(sliced)  # a fresh iterator per attempt
                with turn():  # a transfer's requests at most its -p at once
                    response = self._http.request(
                        method,
                        path,
                        params=params,
                        json=json,
                        content=body,
                        headers=headers,
                        timeout=self._http.timeout if timeout is None else timeout,
                    )
            except UnicodeEncodeError as e:  # a lone surrogate: non-UTF-8 bytes from the command line
                bad = e.object[e.start : e.end]
                raise InvalidArgument(f"a value for the server is not UTF-8 text (it holds {bad!r})") from e
            except httpx.InvalidURL as e:  # a name or path far past the documented limits
                raise InvalidArgument(f"cannot send the request: {e}") from e
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                if attempt == ATTEMPTS - 1:
                    raise StorageError(f"cannot reach the lakectl server at {self.endpoint}: {e}") from e
            except httpx.TransportError as e:
                if not safe or attempt == ATTEMPTS - 1:
                    raise StorageError(f"request to {self.endpoint} failed: {e}") from e
            else:
                if response.status_code < 400:
                    return response
                error = _error(response)
                final = not safe or attempt == ATTEMPTS - 1 or isinstance(error, IntegrityError)
                if response.status_code < 500 or final:
                    raise error
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
        raise StorageError(f"request to {self.endpoint} failed")  # pragma: no cover

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        return self._call(method, path, **kw).json()

    def _pages(
        self, path: str, params: Mapping[str, Any] | None = None, after: str = "", amount: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """The results of every page after ``after``; with ``amount``, at most that many (each
        page asks for no more than are still wanted)."""
        left = amount
        while left is None or left > 0:
            query = {**(params or {}), "amount": PAGE if left is None else min(PAGE, left)}
            if after:
                query["after"] = after
            body = self._json("GET", path, params=query)
            results = body["results"] if left is None else body["results"][:left]
            if left is not None:
                left -= len(results)
            yield from results
            pagination = body.get("pagination", {})
            if not pagination.get("has_more"):
                return
            after = pagination["next_offset"]

    def _repo(self, repo: str) -> str:
        return f"/api/v1/repositories/{_q(repo)}"

    # -- repositories ----------------------------------------------------------------------

    def create_repo(
        self, name: str, default_branch: str = "main", storage_namespace: str = "", bare: bool = False
    ) -> Repository:
        namespace = storage_namespace or f"local://{name}"
        body = {"name": name, "default_branch": default_branch, "storage_namespace": namespace}
        params = {"bare": "true"} if bare else None
        return wire.repository(self._json("POST", "/api/v1/repositories", json=body, params=params))

    def get_repo(self, name: str) -> Repository:
        return wire.repository(self._json("GET", self._repo(name)))

    def list_repos(self, after: str = "", amount: int | None = None) -> list[Repository]:
        return [wire.repository(r) for r in self._pages("/api/v1/repositories", after=after, amount=amount)]

    def delete_repo(self, name: str) -> None:
        self._call("DELETE", self._repo(name))

    # -- branches and tags -----------------------------------------------------------------

    def create_branch(self, repo: str, name: str, source: str, hidden: bool = False) -> Branch:
        body = {"name": name, "source": source, **({"hidden": True} if hidden else {})}
        self._call("POST", f"{self._repo(repo)}/branches", json=body, idempotent=False)
        return self.get_branch(repo, name)

    def get_branch(self, repo: str, name: str) -> Branch:
        return wire.branch(self._json("GET", f"{self._repo(repo)}/branches/{_q(name)}"))

    def list_branches(
        self, repo: str, after: str = "", amount: int | None = None, show_hidden: bool = False
    ) -> list[Branch]:
        params = {"show_hidden": True} if show_hidden else None
        url = f"{self._repo(repo)}/branches"
        return [wire.branch(r) for r in self._pages(url, params, after=after, amount=amount)]

    def delete_branch(self, repo: str, name: str) -> None:
        self._call("DELETE", f"{self._repo(repo)}/branches/{_q(name)}")

    def create_tag(self, repo: str, name: str, ref: str, force: bool = False) -> Tag:
        body = {"id": name, "ref": ref, "force": force}
        return wire.tag(self._json("POST", f"{self._repo(repo)}/tags", json=body))

    def get_tag(self, repo: str, name: str) -> Tag:
        return wire.tag(self._json("GET", f"{self._repo(repo)}/tags/{_q(name)}"))

    def list_tags(self, repo: str, after: str = "", amount: int | None = None) -> list[Tag]:
        return [wire.tag(r) for r in self._pages(f"{self._repo(repo)}/tags", after=after, amount=amount)]

    def delete_tag(self, repo: str, name: str) -> None:
        self._call("DELETE", f"{self._repo(repo)}/tags/{_q(name)}")

    # -- objects ---------------------------------------------------------------------------

    def stat(self, repo: str, ref: str, path: str) -> ObjectInfo:
        body = self._json("GET", f"{self._repo(repo)}/refs/{_q(ref)}/objects/stat", params={"path": path})
        return wire.object_info(body)

    def read(
        self, repo: str, ref: str, path: str, mapped: bool = False, offset: int = 0, length: int | None = None
    ) -> Iterator[bytes]:
        """Blocks fetched in parallel by signed locator (a few in flight), yielded in order
        (``bytes`` whether ``mapped`` or not: they arrive by the network); a range streamed
        through the server (``Range: bytes=a-b``), which reads only its blocks."""
        if offset < 0 or (length is not None and length < 0):
            raise InvalidArgument(f"bad range offset={offset} length={length}")
        if offset or length is not None:
            return self._read_range(repo, ref, path, offset, length)
        body = self._json("GET", f"{self._repo(repo)}/refs/{_q(ref)}/objects/signed", params={"path": path})
        if body.get("external"):  # an imported object: no blocks, the server reads its source
            return self._stream_object(repo, ref, path)
        segments: list[str] = body.get("signed_locators") or []
        return self._fetch(segments, str(body.get("checksum") or ""))

    def read_since(self, repo: str, since: str, ref: str, path: str) -> Iterator[bytes]:
        """Streamed through the server, which reads only the blocks of the appended bytes."""
        return self._stream_object(repo, ref, path, since)

    def _read_range(self, repo: str, ref: str, path: str, offset: int, length: int | None) -> Iterator[bytes]:
        """``[offset, offset + length)`` of the object, cut at its end (nothing when it starts
        there or past it, or is empty)."""
        size = self.stat(repo, ref, path).entry.size  # type: ignore[union-attr]
        end = size if length is None else min(size, offset + length)
        if offset >= end:
            return iter(())
        return self._stream_object(repo, ref, path, byte_range=(offset, end - 1))

    def _stream_object(
        self, repo: str, ref: str, path: str, since: str = "", byte_range: tuple[int, int] | None = None
    ) -> Iterator[bytes]:
        """The object's bytes streamed through the server (lakeFS's ``GET .../objects``; with
        ``since``, lakectl's extension: those appended after it); an error before the first byte
        (a changed source, a ``since`` that is no ancestor) is the server's error."""
        url = f"{self._repo(repo)}/refs/{_q(ref)}/objects"
        timeout = httpx.Timeout(None, connect=10.0)
        params = {"path": path, **({"since": since} if since else {})}
        headers = {"Range": f"bytes={byte_range[0]}-{byte_range[1]}"} if byte_range else None
        try:
            stream = self._http.stream("GET", url, params=params, timeout=timeout, headers=headers)
            response = stream.__enter__()
        except httpx.TransportError as e:
            raise StorageError(f"request to {self.endpoint} failed: {e}") from e
        if response.status_code >= 400:
            response.read()
            stream.__exit__(None, None, None)
            raise _error(response)
        return self._drain(stream, response)

    def _drain(self, stream: Any, response: httpx.Response) -> Iterator[bytes]:
        try:
            yield from response.iter_bytes()
        except httpx.TransportError as e:
            raise StorageError(f"reading from {self.endpoint} failed: {e}") from e
        finally:
            stream.__exit__(None, None, None)

    def presign(self, repo: str, ref: str, path: str, expires_in: int) -> tuple[str, int]:
        params = {"path": path, "presign": True, "presign_expiry": expires_in}
        body = self._json("GET", f"{self._repo(repo)}/refs/{_q(ref)}/objects/stat", params=params)
        return body["physical_address"], int(body["physical_address_expiry"])

    def list_objects(
        self,
        repo: str,
        ref: str,
        prefix: str = "",
        delimiter: str = "",
        after: str = "",
        amount: int | None = None,
    ) -> Iterator[ObjectInfo]:
        params: dict[str, Any] = {"prefix": prefix, "delimiter": delimiter}
        url = f"{self._repo(repo)}/refs/{_q(ref)}/objects/ls"
        return (wire.object_info(item) for item in self._pages(url, params, after, amount))

    def copy_object(self, repo: str, branch: str, path: str, source_ref: str, source_path: str) -> ObjectInfo:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/objects/copy"
        body = {"src_path": source_path, "src_ref": source_ref}
        return wire.object_info(self._json("POST", url, params={"dest_path": path}, json=body))

    def delete_objects(self, repo: str, branch: str, paths: Sequence[str]) -> None:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/objects/delete"
        self._call("POST", url, json={"paths": list(paths)}, idempotent=True)

    def delete_prefix(self, repo: str, branch: str, prefix: str) -> list[str]:
        paths = [o.path for o in self.list_objects(repo, branch, prefix)]
        for i in range(0, len(paths), PAGE):
            self.delete_objects(repo, branch, paths[i : i + PAGE])
        return paths

    # -- commits and history ---------------------------------------------------------------

    def commit(
        self,
        repo: str,
        branch: str,
        message: str,
        metadata: Mapping[str, str] | None = None,
        allow_empty: bool = False,
        allow_empty_message: bool = False,
        prefixes: Sequence[str] = (),
    ) -> Commit:
        body: dict[str, Any] = {
            "message": message,
            "metadata": dict(metadata or {}),
            "allow_empty": allow_empty,
        }
        if prefixes:
            body["prefixes"] = list(prefixes)  # lakectl's extension: a partial commit
        url = f"{self._repo(repo)}/branches/{_q(branch)}/commits"
        params = {"allow_empty_message": "true"} if allow_empty_message else None
        return wire.commit(self._json("POST", url, json=body, params=params, idempotent=False))

    def get_commit(self, repo: str, ref: str) -> Commit:
        return wire.commit(self._json("GET", f"{self._repo(repo)}/commits/{_q(ref)}"))

    def log(
        self,
        repo: str,
        ref: str,
        amount: int | None = None,
        first_parent: bool = False,
        no_merges: bool = False,
        objects: Sequence[str] = (),
        prefixes: Sequence[str] = (),
        *,
        after: str = "",
        since: str = "",
        stop_at: str = "",
        since_commit: str = "",
    ) -> Iterator[Commit]:
        from lakectl.core.history import parse_since

        if amount is not None and amount < 0:
            raise InvalidArgument(f"the number of commits must not be negative, got {amount}")
        parse_since(since)  # refused here as the embedded lake refuses it, before any request
        params: dict[str, Any] = {"first_parent": first_parent, "no_merges": no_merges}
        if objects:
            params["objects"] = list(objects)
        if prefixes:
            params["prefixes"] = list(prefixes)
        if since:
            params["since"] = since
        if stop_at:
            params["stop_at"] = stop_at
        if since_commit:
            params["since_commit"] = since_commit
        url = f"{self._repo(repo)}/refs/{_q(ref)}/commits"
        return (wire.commit(item) for item in self._pages(url, params, after, amount))

    def annotate(
        self, repo: str, ref: str, prefix: str = "", recursive: bool = False
    ) -> Iterator[Annotation]:
        from lakectl.core.annotate import Annotation
        from lakectl.core.model import PathType

        params = {"prefix": prefix, "recursive": recursive}
        for d in self._pages(f"{self._repo(repo)}/refs/{_q(ref)}/annotate", params):
            commit = wire.commit(d["commit"]) if d.get("commit") else None
            yield Annotation(d["path"], PathType(d["path_type"]), commit)

    def diff_uncommitted(self, repo: str, branch: str, prefix: str = "") -> list[Change]:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/diff"
        return [wire.change(d) for d in self._pages(url, {"prefix": prefix})]

    def diff_refs(
        self, repo: str, left: str, right: str, two_way: bool = False, prefix: str = ""
    ) -> Iterator[Change]:
        url = f"{self._repo(repo)}/refs/{_q(left)}/diff/{_q(right)}"
        params = {"type": "two_dot" if two_way else "three_dot", "prefix": prefix}
        return (wire.change(d) for d in self._pages(url, params))

    def diff_since(self, repo: str, since: str, ref: str, prefix: str = "") -> Iterator[Change]:
        url = f"{self._repo(repo)}/refs/{_q(since)}/diff/{_q(ref)}"
        return (wire.change(d) for d in self._pages(url, {"type": "since", "prefix": prefix}))

    def provenance(self, repo: str, ref: str, path: str, depth: int = 5) -> dict[str, Any]:
        url = f"{self._repo(repo)}/refs/{_q(ref)}/provenance"
        found: dict[str, Any] = self._json("GET", url, params={"path": path, "depth": depth})
        return found

    def downstream(self, repo: str, ref: str, path: str = "") -> list[dict[str, Any]]:
        url = f"{self._repo(repo)}/refs/{_q(ref)}/downstream"
        return list(self._json("GET", url, params={"path": path})["results"])

    def change_feed(
        self,
        repo: str,
        since: str,
        ref: str,
        prefix: str = "",
        signed: bool = False,
        by_commit: bool = False,
    ) -> list[FeedChange]:
        params = {"since": since, "prefix": prefix}
        params.update({"signed": "true"} if signed else {})
        if by_commit:  # paged by position: every page of one range, however the ref moves meanwhile
            params["by_commit"] = "true"
            ref = self.get_commit(repo, ref).id
        return [
            wire.feed_change(d) for d in self._pages(f"{self._repo(repo)}/refs/{_q(ref)}/changes", params)
        ]

    def find_merge_base(self, repo: str, source: str, dest: str) -> str:
        try:
            found = self._json("GET", f"{self._repo(repo)}/refs/{_q(source)}/merge/{_q(dest)}")
        except NotFound as missing:
            if type(missing) is not NotFound:  # the repository or a ref is missing
                raise
            return ""  # the two histories never meet
        return str(found["base_commit_id"])

    def diff_table(
        self,
        repo: str,
        left: str,
        right: str,
        path: str,
        key: Sequence[str] = (),
        amount: int = 100,
        after: str = "",
        spark_master: str | None = None,
        two_way: bool = False,
        declared: bool = True,
    ) -> dict[str, Any]:
        if spark_master is not None:
            raise InvalidArgument("--spark runs against an embedded lake: diff the table without --spark")
        url = f"{self._repo(repo)}/refs/{_q(left)}/diff/{_q(right)}/table"
        params = {"path": path, "key": ",".join(key), "amount": amount, "after": after}
        params["type"] = "two_dot" if two_way else "three_dot"
        if not declared:
            params["declared"] = "false"
        return dict(self._json("GET", url, params=params))

    # -- merge, revert, cherry-pick, reset -------------------------------------------------

    def merge(
        self,
        repo: str,
        source: str,
        dest: str,
        strategies: Sequence[str] = (),
        message: str | None = None,
        squash: bool = False,
        spark_master: str | None = None,
    ) -> MergeResult:
        from lakectl.core.merging import MergeResult

        if spark_master is not None:
            raise InvalidArgument("--spark runs against an embedded lake: merge without --spark")
        body: dict[str, Any] = {"message": message or "", "strategies": list(strategies)}
        if squash:
            body["squash_merge"] = True
        url = f"{self._repo(repo)}/refs/{_q(source)}/merge/{_q(dest)}"
        answer = self._json("POST", url, json=body, idempotent=False)
        commit = self.get_commit(repo, answer["reference"])
        return MergeResult(commit, changed=bool(answer.get("changed", True)))

    def cherry_pick(self, repo: str, branch: str, ref: str, parent_number: int = 0) -> Commit:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/cherry-pick"
        body = {"ref": ref, "parent_number": parent_number}
        return wire.commit(self._json("POST", url, json=body, idempotent=False))

    def revert(self, repo: str, branch: str, ref: str, parent_number: int = 0) -> Commit:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/revert"
        self._call("POST", url, json={"ref": ref, "parent_number": parent_number}, idempotent=False)
        return self.get_commit(repo, branch)

    def reset(self, repo: str, branch: str, kind: ResetKind, path: str = "") -> int:
        url = f"{self._repo(repo)}/branches/{_q(branch)}"
        response = self._call("PUT", url, json={"type": kind.value, "path": path})
        return int(response.headers.get("X-Lakectl-Reset-Count", "0"))

    # -- manifests -------------------------------------------------------------------------

    def export_manifest(self, repo: str, ref: str, prefix: str = "", signed: bool = False) -> str:
        url = f"{self._repo(repo)}/refs/{_q(ref)}/manifest"
        params: dict[str, Any] = {"prefix": prefix}
        if signed:
            params["signed"] = "true"
        return self._call("GET", url, params=params).text

    def import_manifest(
        self, repo: str, branch: str, prefix: str, text: str, replace: bool = False
    ) -> list[str]:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/manifest"
        params: dict[str, Any] = {"prefix": prefix}
        if replace:
            params["replace"] = "true"
        answer = self._json(
            "POST",
            url,
            params=params,
            content=text.encode(),
            idempotent=True,
            headers={"Content-Type": "text/plain"},
        )
        return list(answer["paths"])

    # -- zero-copy import ------------------------------------------------------------------

    def import_start(
        self,
        repo: str,
        branch: str,
        paths: Sequence[Mapping[str, str]],
        message: str = "",
        metadata: Mapping[str, str] | None = None,
        merge: bool = True,
    ) -> dict[str, Any]:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/import"
        commit: dict[str, Any] = {"message": message}
        if metadata:
            commit["metadata"] = dict(metadata)
        # ``merge`` is lakectl's extension of lakeFS's ImportCreation (lakeFS always merges).
        body = {"paths": [dict(d) for d in paths], "commit": commit, "merge": merge}
        started = self._json("POST", url, json=body)
        return self.import_status(repo, branch, str(started["id"]))

    def import_status(self, repo: str, branch: str, import_id: str) -> dict[str, Any]:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/import"
        return dict(self._json("GET", url, params={"id": import_id}))

    def import_cancel(self, repo: str, branch: str, import_id: str) -> None:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/import"
        self._call("DELETE", url, params={"id": import_id})

    def import_copy(self, repo: str, branch: str, prefix: str = "") -> list[str]:
        url = f"{self._repo(repo)}/branches/{_q(branch)}/import/copy"
        return list(self._json("POST", url, params={"prefix": prefix}, idempotent=True)["paths"])

    # -- garbage collection ----------------------------------------------------------------

    def set_gc_rules(self, repo: str, rules: GCRules) -> None:
        self._call("PUT", f"{self._repo(repo)}/settings/gc_rules", json=rules.to_dict())

    def get_gc_rules(self, repo: str) -> GCRules:
        from lakectl.core.upkeep.retention import GCRules

        return GCRules.from_dict(self._json("GET", f"{self._repo(repo)}/settings/gc_rules"))

    def delete_gc_rules(self, repo: str) -> None:
        self._call("DELETE", f"{self._repo(repo)}/settings/gc_rules")

    def dump_refs(self, repo: str) -> dict[str, str]:
        task = self._json("POST", f"{self._repo(repo)}/dump", idempotent=False)
        status = self._await_task(f"{self._repo(repo)}/dump", task["id"])
        return {k: str(v) for k, v in status["refs"].items()}

    def restore_refs(self, repo: str, manifest: Mapping[str, Any]) -> None:
        url = f"{self._repo(repo)}/restore"
        task = self._json("POST", url, json=dict(manifest), idempotent=False)
        self._await_task(url, task["id"])

    def _await_task(self, url: str, task_id: str, timeout: float = 3600.0) -> dict[str, Any]:
        """Poll lakeFS's task status (``GET <url>?task_id=``) until it is done; its error raised."""
        deadline = time.monotonic() + timeout
        pause = 0.05
        while True:
            status: dict[str, Any] = self._json("GET", url, params={"task_id": task_id})
            if status.get("done"):
                if status.get("error"):
                    raise StorageError(f"task {task_id} failed: {status['error']}")
                return status
            if time.monotonic() > deadline:
                raise StorageError(f"task {task_id} did not finish within {timeout:.0f} s")
            time.sleep(pause)
            pause = min(2.0, pause * 2)

    def gc_run(
        self,
        repo: str,
        dry_run: bool,
        grace_seconds: float,
        spark_master: str | None = None,
        allow_preexisting_blocks: bool = False,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"dry_run": "true" if dry_run else "false", "grace_seconds": grace_seconds}
        if spark_master is not None:
            params["spark_master"] = spark_master
        if allow_preexisting_blocks:
            params["allow_preexisting_blocks"] = "true"
        return dict(self._json("POST", f"{self._repo(repo)}/gc/run", params=params, idempotent=dry_run))

    def list_branch_protection(self, repo: str) -> list[dict[str, Any]]:
        return list(self._json("GET", f"{self._repo(repo)}/settings/branch_protection"))

    def add_branch_protection(
        self, repo: str, pattern: str, required_approvals: int = 0, required_checks: bool = False
    ) -> None:
        body: dict[str, Any] = {"pattern": pattern}
        if required_approvals:
            body["required_approvals"] = required_approvals
        if required_checks:
            body["required_checks"] = True
        self._call("POST", f"{self._repo(repo)}/branch_protection", json=body, idempotent=False)

    def delete_branch_protection(self, repo: str, pattern: str) -> None:
        body = {"pattern": pattern}
        self._call("DELETE", f"{self._repo(repo)}/branch_protection", json=body, idempotent=False)

    def list_action_runs(
        self, repo: str, branch: str = "", commit: str = "", after: str = "", amount: int | None = None
    ) -> list[ActionRun]:
        from lakectl.core.workflow.actionruns import ActionRun

        params = {k: v for k, v in (("branch", branch), ("commit", commit)) if v}
        found = self._pages(f"{self._repo(repo)}/actions/runs", params, after=after, amount=amount)
        return [ActionRun.from_dict(r) for r in found]

    def get_action_run(self, repo: str, run_id: str) -> ActionRun:
        from lakectl.core.workflow.actionruns import ActionRun

        return ActionRun.from_dict(self._json("GET", f"{self._repo(repo)}/actions/runs/{_q(run_id)}"))

    def list_run_hooks(
        self, repo: str, run_id: str, after: str = "", amount: int | None = None
    ) -> list[HookRun]:
        from lakectl.core.workflow.actionruns import HookRun

        found = self._pages(f"{self._repo(repo)}/actions/runs/{_q(run_id)}/hooks", after=after, amount=amount)
        return [HookRun.from_dict(h) for h in found]

    def get_hook_output(self, repo: str, run_id: str, hook_run_id: str) -> bytes:
        path = f"{self._repo(repo)}/actions/runs/{_q(run_id)}/hooks/{_q(hook_run_id)}/output"
        return self._call("GET", path).content

    def fsck(
        self,
        repo: str | None,
        repair: bool = False,
        spark_master: str | None = None,
        progress: ByteProgress | None = None,
    ) -> dict[str, Any]:
        """``POST /api/v1/fsck`` (or ``/repositories/{r}/fsck``): the server verifies its blocks.
        Sent once, without a read timeout: a check reads every block before it answers, and
        repeating it on a timeout would only start it again."""
        path = "/api/v1/fsck" if repo is None else f"{self._repo(repo)}/fsck"
        params: dict[str, Any] = {"repair": "true" if repair else "false"}
        if spark_master is not None:
            params["spark_master"] = spark_master
        response = self._call(
            "POST", path, params=params, idempotent=False, timeout=httpx.Timeout(None, connect=10.0)
        )
        return dict(response.json())

    def journal_enable(self, reads: bool | None = None) -> dict[str, Any]:
        body = {} if reads is None else {"reads": reads}
        return dict(self._json("POST", "/api/v1/journal/enable", json=body, idempotent=True))

    def journal_disable(self) -> dict[str, Any]:
        return dict(self._json("POST", "/api/v1/journal/disable", idempotent=True))

    def journal_tail(self, repo: str = "", amount: int = 20, after: int = 0) -> list[dict[str, Any]]:
        params = {"repo": repo, "amount": amount, "after": after}
        return list(self._json("GET", "/api/v1/journal", params=params)["results"])

    def journal_follow(self, repo: str = "", after: int = 0) -> Iterator[dict[str, Any]]:
        """``GET /api/v1/journal/stream``: server-sent events, one entry each; reconnects after a
        dropped connection from the last entry seen (``Last-Event-ID``)."""
        for attempt in range(ATTEMPTS):
            try:
                params: dict[str, str | int] = {"repo": repo, "after": after}
                timeout = httpx.Timeout(None, connect=10.0)
                with self._http.stream("GET", "/api/v1/journal/stream", params=params, timeout=timeout) as r:
                    if r.status_code >= 400:
                        r.read()
                        raise _error(r)
                    for line in r.iter_lines():
                        if line.startswith("data: "):
                            entry = _json_module.loads(line[len("data: ") :])
                            after = int(entry["logical_timestamp"])
                            yield entry
            except httpx.TransportError as e:
                if attempt == ATTEMPTS - 1:
                    raise StorageError(f"the journal stream of {self.endpoint} failed: {e}") from e
                time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))

    def journal_compact(self) -> dict[str, Any]:
        return dict(self._json("POST", "/api/v1/journal/compact", idempotent=True))

    def rebuild_from_journal(self) -> dict[str, Any]:
        raise InvalidArgument(
            f"a rebuild runs where the lake is, not through the server at {self.endpoint}: run it "
            "embedded (LAKECTL_HOME) on the lake's directory"
        )


def _error(response: httpx.Response) -> LakectlError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    message = message or f"server answered {response.status_code}: {response.text[:200]}"
    code = body.get("code") if isinstance(body, dict) else None
    if code:
        return from_code(code, message, body.get("details") or {})
    status = response.status_code
    if status == 401:
        return Unauthenticated(message)
    if status == 403:
        return Forbidden(message)
    if status == 404:
        return NotFound(message)
    if status == 409:
        conflicts = body.get("conflicts") if isinstance(body, dict) else None
        return MergeConflict(message, paths=conflicts) if conflicts else Conflict(message)
    if 400 <= status < 500:
        return InvalidArgument(message)
    return StorageError(message)
