"""Bad text and oversized values in every field of every REST route, web UI route and S3 gateway
operation: never a 5xx, and a refused request stores nothing.

The REST routes come from the app's OpenAPI document and the web UI's from its routes' own
parameters, so a new route (or a new field) is fuzzed without a line here; a test checks that
every route of the app (``app.routes``, the UI's mount included) is fuzzed or listed in
:data:`NOT_FUZZED` with its reason. The gateway's operations are every one its routing table
answers for a grid of methods, addresses and queries. No request may end in a 5xx, nor log a
traceback or an error (nor print one: a server-side subprocess such as Spark included).

Each request carries one bad value (a lone surrogate, bytes that are not UTF-8, or a value over
the documented limits) in one place (a JSON field, a form field, a query or path parameter, a
header), everything else valid, from an admin: auth is never what refuses.
Every mutating request is bracketed by snapshots of every KV row and every file of the data
directory; a refusal must leave both as they were.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from fastapi import params
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount

from lakectl.core.limits import MAX_MESSAGE_BYTES, MAX_METADATA_ENTRIES
from lakectl.errors import InvalidArgument
from server.api.edge import MAX_JSON_BODY
from server.app import create_app
from server.config import load_settings
from server.s3.routes import route
from tests.server.conftest import Live, Snapshot, changes, serve, snapshot, without_journal
from tests.ui.conftest import csrf_of, sign_in

REPO = "fuzz"
SURROGATE = "\udcff"
BIG = MAX_MESSAGE_BYTES + 1
"""Characters of an oversized JSON string: over every limit of text (a commit message's is the
largest)."""
BIG_URL = 5000
"""Characters of an oversized path or query value: over the path, name and metadata limits."""
RAW = "\x00RAW\x00"
"""Stands for a byte that is not UTF-8 in a JSON body (replaced by ``\\xff`` once serialized)."""
URL_VARIANTS = {"not UTF-8": "a%FFb", "lone surrogate": "a%ED%B3%BFb", "oversized": "x" * BIG_URL}
"""A path or query value as sent (already percent-encoded): ``%ED%B3%BF`` is ``\\udcff`` in UTF-8."""
MUTATING = {"POST", "PUT", "DELETE", "PATCH"}
SKIPPED_PARAMETERS = {
    ("POST", "/api/v1/repositories/{repository}/gc/run", "spark_master"),
    ("POST", "/api/v1/fsck", "spark_master"),
    ("POST", "/api/v1/repositories/{repository}/fsck", "spark_master"),
}
"""Any text is a valid Spark master URL (a wrong one fails in Spark): fuzzing it would start Spark."""
IGNORED = {
    "POST /api/v1/repositories/{repository}/branches/{branch}/objects query storageClass",
    "POST /ui/admin/groups/{group_id}/members/{user_id}/remove back: oversized",  # where to go next
    "POST /ui/repos/{repo}/settings/protection required_checks: oversized",  # a checkbox: any value is on
}
"""Parameters accepted and ignored whatever their value, as lakeFS does (and UI form fields that are
never stored): the request succeeds (2xx, or a UI form's 303)."""


@dataclass
class Fuzz:
    live: Live
    http: httpx.Client
    head: str
    """The head commit of ``main``."""
    values: dict[str, Any]
    """A valid value for each path parameter, query parameter and JSON field, by name."""
    raw: httpx.Client
    """Without credentials (for requests signed already)."""
    sent: int = 0
    problems: list[str] = field(default_factory=list)
    state: Snapshot | None = None

    def send(
        self,
        what: str,
        method: str,
        url: str,
        signed: bool = False,
        client: httpx.Client | None = None,
        **kw: Any,
    ) -> httpx.Response:
        """One request (as the admin, unless ``signed`` already; with ``client``, through it); a
        5xx, or a mutation that changed the lake unless it is one of :data:`IGNORED`, is a
        problem."""
        mutating = method in MUTATING
        before = self.state if mutating and self.state is not None else snapshot(self.live.data_dir)
        client = client or (self.raw if signed else self.http)
        r = client.send(client.build_request(method, url, **kw), stream=True)
        try:
            # A server-sent-events stream that was accepted never ends: its status is the answer.
            streaming = r.status_code < 300 and r.headers.get("content-type", "").startswith(
                "text/event-stream"
            )
            if not streaming:
                r.read()
        finally:
            r.close()
        self.sent += 1
        text = "<event stream>" if streaming else r.text[:200]
        shown = f"{what}: {method} {url[:150]} -> {r.status_code} {text!r}"
        if r.status_code >= 500:
            self.problems.append(shown)
        if mutating:
            after = self.state = snapshot(self.live.data_dir)
            if after != before and (r.status_code >= 400 or not any(what.startswith(i) for i in IGNORED)):
                self.problems.append(f"{shown}: {changes(before, after)}")
            elif after != before:  # accepted and ignored: put main back as it was for the next ones
                self.http.put(f"/api/v1/repositories/{REPO}/branches/main", json={"type": "reset"})
                self.state = None
        return r


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with serve(load_settings(None, str(tmp_path_factory.mktemp("fuzz")), environ={})) as live:
        without_journal(live)  # a snapshot must see only what a request stored
        yield live


@pytest.fixture(scope="module")
def fuzz(server: Live) -> Iterator[Fuzz]:
    """A repository with a commit, a tag and a second branch; a second user with an access key;
    a stored block, a signed locator and a multipart upload in flight."""
    base, admin = server.url.removesuffix("/api/v1"), (server.key_id, server.secret)
    with httpx.Client(base_url=base, auth=admin, timeout=30) as http, httpx.Client(timeout=30) as raw:

        def ok(r: httpx.Response) -> httpx.Response:
            assert r.status_code < 300, r.text
            return r

        v1 = "/api/v1"
        ok(http.post(f"{v1}/repositories", json={"name": REPO, "storage_namespace": f"local://{REPO}"}))
        objects = f"{v1}/repositories/{REPO}/branches/main/objects"
        ok(http.post(objects, params={"path": "data/a.txt"}, content=b"id,value\n1,one\n"))
        head = ok(
            http.post(f"{v1}/repositories/{REPO}/branches/main/commits", json={"message": "seed"})
        ).json()
        ok(http.post(f"{v1}/repositories/{REPO}/tags", json={"id": "v1", "ref": "main"}))
        ok(http.post(f"{v1}/repositories/{REPO}/branches", json={"name": "dev", "source": "main"}))
        ok(http.post(f"{v1}/auth/users", json={"id": "fuzzer"}))
        ok(http.put(f"{v1}/auth/groups/Developers/members/fuzzer"))
        key = ok(http.post(f"{v1}/auth/users/fuzzer/credentials")).json()["access_key_id"]
        data = b"a block of the fuzz test"
        md5 = hashlib.md5(data).hexdigest()
        signed = ok(http.put(f"/blocks/{md5}", content=data)).text.strip()
        challenge = ok(http.post("/blocks/missing", json={"locators": [f"{md5}+{len(data)}"]})).json()
        ok(http.get(f"{v1}/repositories/{REPO}/refs/main/objects/signed", params={"path": "data/a.txt"}))
        stat = f"{v1}/repositories/{REPO}/refs/main/objects/stat"
        presigned = ok(http.get(stat, params={"path": "data/a.txt", "presign": True})).json()
        values: dict[str, Any] = {
            # path parameters
            "repository": REPO,
            "branch": "main",
            "ref": "main",
            "left_ref": "main",
            "right_ref": "v1",
            "other_ref": "v1",
            "source_ref": "dev",
            "destination_branch": "main",
            "tag": "v1",
            "commit_id": head["id"],
            "userId": "fuzzer",
            "groupId": "Developers",
            "accessKeyId": key,
            "policyId": "FSReadWriteAll",
            "md5": md5,
            "signed": signed,
            "meta_range": head["meta_range_id"],
            "range": head["meta_range_id"],  # the root's id: no range of that id, 404
            "object_id": head["meta_range_id"],
            "token": presigned["physical_address"].rsplit("/", 1)[1],
            # query parameters and JSON fields
            "path": "fz/new.txt",
            "dest_path": "fz/copy.txt",
            "src_path": "data/a.txt",
            "name": "fz-new",
            "storage_namespace": "local://fz-new",
            "source": "main",
            "id": "fz-new",
            "message": "m",
            "since": "v1",
            "type": "object",
            "parent_number": 0,
            "paths": ["fz/none.txt"],
            "segments": [signed],
            "locators": [f"{md5}+{len(data)}"],
            "locator": f"{md5}+{len(data)}",
            "nonce": challenge["challenges"][f"{md5}+{len(data)}"],
            "answer": "0" * 32,
            "access_key_id": server.key_id,
            "secret_access_key": server.secret,
            "username": "fz-admin",
            "task_id": "dump-" + "0" * 32,
            "run_id": "ffff0000",  # no such action run: the routes answer 404, bad ids 400
            "hook_run_id": "0000_0000",
            "pull_request": "999999",  # no such pull request: 404, bad ids 400
            "verdict": "approved",
            "body": "b",
            "principalId": "arn:aws:iam::123456789012:role/fuzz",
            "location": "data/",
        }
        yield Fuzz(server, http, head["id"], values, raw)


MAX_REQUESTS = 5000
"""Each fuzz is bounded by construction (one bad value per field of each route); this says how
far: a fuzz that grew past it would cost minutes on a small machine."""


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(f"logged: {record.name}: {record.getMessage()[:200]}")


@pytest.fixture
def quiet(capfd: pytest.CaptureFixture[str]) -> Iterator[Callable[[], list[str]]]:
    """What the server logged at ERROR (an internal error, uvicorn's "Exception in ASGI
    application") or printed as a traceback, to stdout or stderr, by itself or by a process it
    started, while the test ran."""
    handler = _Errors()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn")]  # uvicorn's do not propagate
    for logger in loggers:
        logger.addHandler(handler)

    def problems() -> list[str]:
        out, err = capfd.readouterr()
        sys.stdout.write(out)
        printed = [
            f"printed: {line[:200]}"
            for line in (out + err).splitlines()
            if "Traceback (most recent call last)" in line or line.startswith("Exception in thread")
        ]
        return handler.seen + printed

    try:
        yield problems
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


# -- the REST API ------------------------------------------------------------------------------


def _schema(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a ``$ref`` resolved and an ``anyOf: [X, null]`` reduced to X."""
    while True:
        if "$ref" in schema:
            schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in schema:
            schema = next((s for s in schema["anyOf"] if s.get("type") != "null"), {})
        else:
            return schema


def _bad_values(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Bad values for a JSON field of ``schema``, by name."""
    schema = _schema(doc, schema)
    kind = schema.get("type")
    text = {"lone surrogate": "a" + SURROGATE, "oversized": "x" * BIG, "not UTF-8": RAW}
    if kind == "string" or not kind:
        return text
    if kind == "array":
        return {
            "lone surrogate item": ["a" + SURROGATE],
            "oversized item": ["x" * BIG_URL],
            "too many items": ["x" * BIG_URL] * 1001,
        }
    if kind == "object" and "additionalProperties" in schema:
        return {
            "lone surrogate key": {"k" + SURROGATE: "v"},
            "lone surrogate value": {"k": SURROGATE},
            "not UTF-8 value": {"k": RAW},
            "oversized value": {"k": "x" * BIG_URL},
            "oversized key": {"k" * 300: "v"},
            "too many entries": {f"k{i}": "v" for i in range(MAX_METADATA_ENTRIES + 1)},
        }
    if kind == "integer":
        return {"oversized": 10**30, "lone surrogate": SURROGATE}
    return {"lone surrogate": SURROGATE}  # booleans, numbers, nested objects: the wrong type


def _valid_body(doc: dict[str, Any], schema: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The required fields of an object schema, with valid values (by name, else by type)."""
    schema = _schema(doc, schema)
    body: dict[str, Any] = {}
    for name in schema.get("required", []):
        prop = _schema(doc, schema["properties"][name])
        if name in values:
            body[name] = values[name]
        elif prop.get("type") == "object" and "properties" in prop:
            body[name] = _valid_body(doc, prop, values)
        else:
            body[name] = {"integer": 0, "boolean": False, "array": []}.get(prop.get("type", ""), "x")
    return body


def _encode(body: Any) -> bytes:
    """JSON as a client would write it, lone surrogates as ``\\udcff`` escapes."""
    return json.dumps(body).replace(json.dumps(RAW)[1:-1], "@RAW@").encode().replace(b"@RAW@", b"\xff")


def _body_variants(
    doc: dict[str, Any], schema: dict[str, Any], values: dict[str, Any]
) -> Iterator[tuple[str, Any]]:
    """(where and what, body) with one bad value in one field (nested objects too)."""
    resolved = _schema(doc, schema)
    base = _valid_body(doc, resolved, values)
    if "properties" not in resolved:  # a body of any shape: bad documents of their own
        for what, bad in {"lone surrogate": {"k": SURROGATE}, "not UTF-8": {"k": RAW}}.items():
            yield f"body: {what}", bad
        return
    for name, prop in resolved["properties"].items():
        inner = _schema(doc, prop)
        if inner.get("type") == "object" and "properties" in inner:
            for what, nested in _body_variants(doc, inner, values):
                yield f"{name}.{what}", {**base, name: nested}
            continue
        for what, bad in _bad_values(doc, prop).items():
            yield f"{name}: {what}", {**base, name: bad}


def _fill(path: str, values: dict[str, Any], bad: tuple[str, str] | None = None) -> str:
    for part in path.split("{")[1:]:
        name = part.split("}")[0]
        value = bad[1] if bad and bad[0] == name else quote(str(values[name]), safe="")
        path = path.replace("{" + name + "}", value)
    return path


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            yield method.upper(), path, operation


def _rest_requests(doc: dict[str, Any], fz: Fuzz) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(what, method, url, httpx arguments) of every bad request of every route."""
    values = fz.values
    for method, path, operation in _operations(doc):
        parameters = [p for p in operation.get("parameters", []) if p["in"] in ("path", "query")]
        parameters = [p for p in parameters if (method, path, p["name"]) not in SKIPPED_PARAMETERS]
        required = {
            p["name"]: values[p["name"]] for p in parameters if p["in"] == "query" and p.get("required")
        }
        content = operation.get("requestBody", {}).get("content", {})
        schema = content.get("application/json", {}).get("schema")
        json_base = _encode(_valid_body(doc, schema, values)) if schema is not None else None
        kw: dict[str, Any] = {"headers": {"Content-Type": "application/json"}} if schema is not None else {}
        where = f"{method} {path}"
        for p in parameters:
            for what, bad in URL_VARIANTS.items():
                if p["in"] == "path":
                    url = _fill(path, values, (p["name"], bad))
                    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in required.items())
                else:
                    url = _fill(path, values)
                    others = {k: quote(str(v), safe="") for k, v in required.items() if k != p["name"]}
                    query = "&".join([*(f"{k}={v}" for k, v in others.items()), f"{p['name']}={bad}"])
                yield (
                    f"{where} {p['in']} {p['name']}: {what}",
                    method,
                    f"{url}?{query}",
                    {**kw, "content": json_base},
                )
        query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in required.items())
        url = f"{_fill(path, values)}?{query}"
        if not parameters and schema is None:  # nothing of its own: a query it does not know
            yield f"{where} query: not UTF-8", method, f"{url}fuzz={URL_VARIANTS['not UTF-8']}", kw
        if schema is not None:
            for what, body in _body_variants(doc, schema, values):
                yield f"{where} {what}", method, url, {**kw, "content": _encode(body)}
            yield f"{where} body over the cap", method, url, {**kw, "content": b" " * (MAX_JSON_BODY + 1)}
        if path.endswith("/branches/{branch}/objects") and method == "POST":  # metadata from headers
            for what, headers in {
                "not UTF-8": {"x-lakefs-meta-k": b"caf\xe9"},
                "oversized": {"x-lakefs-meta-k": b"v" * BIG_URL},
                "too many": {f"x-lakefs-meta-k{i}": b"v" for i in range(MAX_METADATA_ENTRIES + 1)},
            }.items():
                yield f"{where} x-lakefs-meta: {what}", method, url, {"content": b"data", "headers": headers}


def test_every_rest_route_refuses_bad_input_without_a_5xx_or_a_write(
    fuzz: Fuzz, quiet: Callable[[], list[str]]
) -> None:
    doc = fuzz.http.get("/api/v1/openapi.json").json()
    started, fuzz.sent, fuzz.problems = time.monotonic(), 0, []
    covered = set()
    for what, method, url, kw in _rest_requests(doc, fuzz):
        covered.add(" ".join(what.split(" ")[:2]))
        fuzz.send(what, method, url, **kw)
    served = {f"{m} {p}" for m, p, _ in _operations(doc)}
    assert served <= covered, sorted(served - covered)
    assert fuzz.sent <= MAX_REQUESTS
    print(f"REST fuzz: {fuzz.sent} requests over {len(served)} routes in {time.monotonic() - started:.1f} s")
    problems = fuzz.problems + quiet()
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])


# -- the web UI --------------------------------------------------------------------------------

NOT_FUZZED = {
    "POST /ui/logout": "ends the fuzz's own session; it reads no field but the CSRF token",
}
"""Routes of the app no fuzz sends to, each with its reason."""


def _flat(dependant: Any, kind: str) -> list[Any]:
    """The parameters of ``kind`` of a route's dependant and of every dependency of it."""
    found = list(getattr(dependant, kind))
    for sub in dependant.dependencies:
        found += _flat(sub, kind)
    return found


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    """As the app matches it, ``{name}`` for a parameter (``{name:path}`` too)."""
    path_params: tuple[str, ...] = ()
    query: tuple[tuple[str, bool], ...] = ()
    """(name, required)."""
    form: tuple[tuple[str, bool, bool], ...] = ()
    """(name, required, is a file)."""

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


def app_routes(routes: Any, prefix: str = "") -> Iterator[Route]:
    """Every route of an app as it answers requests: routers included (FastAPI keeps them as
    included routers, whose routes ``iter_route_contexts`` lists with their prefixes) and
    mounts (the UI's app; its static files) walked."""
    for context in iter_route_contexts(routes):
        route = context.route
        if isinstance(route, Mount):
            if route.routes:
                yield from app_routes(route.routes, prefix + route.path)
            else:  # static files: any path under it
                yield Route("GET", f"{prefix}{route.path}/{{file}}", ("file",))
            continue
        path = prefix + re.sub(r"\{(\w+):\w+\}", r"{\1}", context.path)
        dependant = getattr(route, "dependant", None)
        for method in sorted(context.methods or ()):
            if dependant is None:
                yield Route(method, path)
                continue
            yield Route(
                method,
                path,
                tuple(p.alias for p in _flat(dependant, "path_params")),
                tuple((q.alias, q.field_info.is_required()) for q in _flat(dependant, "query_params")),
                tuple(
                    (b.alias, b.field_info.is_required(), isinstance(b.field_info, params.File))
                    for b in _flat(dependant, "body_params")
                ),
            )


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> list[Route]:
    """The routes of an app as the server creates it (over a lake of its own)."""
    app = create_app(load_settings(None, str(tmp_path_factory.mktemp("routes")), environ={}))
    try:
        return list(app_routes(app.routes))
    finally:
        app.state.lake.close()


UI_VALUES = {
    "repo": REPO,
    "pull_id": "999999",
    "group_id": "Developers",
    "user_id": "fuzzer",
    "policy_id": "FSReadAll",
    "rest": "nowhere",
    "file": "app.css",
    "commit": "main",
    "destination": "main",
    "source": "dev",
    "title": "t",
    "group": "Viewers",
    "policy": "FSReadAll",
    "user": "fuzzer",
    "pattern": "fz_*",
    "default_retention_days": "7",
    "left": "main",
    "right": "v1",
    "path": "data/a.txt",
    "ref": "main",
}
"""Valid values of the UI's parameters and form fields, over :attr:`Fuzz.values`."""


def _route_requests(
    route: Route, values: dict[str, Any], csrf: str
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(what, url, httpx arguments) of every bad request of one route from its parameters (the
    UI's): a bad value in each path parameter, query parameter and form field in turn, the
    others valid; a route with none gets a query parameter it does not know."""

    def enc(value: Any) -> str:
        return quote(str(value), safe="")

    def url(bad: tuple[str, str] | None = None) -> str:
        filled = _fill(route.path, values, bad if bad and bad[0] in route.path_params else None)
        query = {n: enc(values.get(n, "x")) for n, required in route.query if required}
        if bad and bad[0] in dict(route.query):
            query[bad[0]] = bad[1]
        return filled + "?" + "&".join(f"{k}={v}" for k, v in query.items())

    def body(bad: tuple[str, str] | None = None) -> dict[str, Any]:
        if route.method != "POST":
            return {}
        fields = {n: enc(values.get(n, "x")) for n, required, file in route.form if required and not file}
        if bad and bad[0] in {n for n, _, _ in route.form}:
            fields[bad[0]] = bad[1]
        if any(file for _, _, file in route.form):  # a multipart form: text fields as sent
            data = {k: unquote(v, errors="surrogateescape") for k, v in fields.items()}
            data = {k: v.encode("utf-8", "surrogateescape") for k, v in data.items()}
            return {"files": {"content": ("f.txt", b"data")}, "data": {"csrf": csrf, **data}}
        form = "&".join(f"{k}={v}" for k, v in {"csrf": enc(csrf), **fields}.items())
        return {"content": form, "headers": {"Content-Type": "application/x-www-form-urlencoded"}}

    fields = {n for n, _, file in route.form if not file}
    names = [*route.path_params, *(n for n, _ in route.query), *fields]
    for name in names:
        for what, bad in URL_VARIANTS.items():
            if name in fields and what == "oversized":  # a form field: over every limit of text
                bad = "x" * BIG
            yield f"{route.key} {name}: {what}", url((name, bad)), body((name, bad))
    if not names:
        yield f"{route.key} query: not UTF-8", url() + f"fuzz={URL_VARIANTS['not UTF-8']}", body()


def test_every_ui_route_refuses_bad_input_without_a_5xx_or_a_write(
    fuzz: Fuzz, routes: list[Route], quiet: Callable[[], list[str]]
) -> None:
    """The routes outside the OpenAPI document: the web UI's (as a signed-in user, with the
    session's CSRF token), and the document itself."""
    values = {**fuzz.values, **UI_VALUES, "commit_id": fuzz.head, "key_id": fuzz.values["accessKeyId"]}
    documented = _documented(fuzz)
    others = [r for r in routes if r.key not in documented and r.key not in NOT_FUZZED]
    started, fuzz.sent, fuzz.problems = time.monotonic(), 0, []
    base = fuzz.live.url.removesuffix("/api/v1")
    with (
        sign_in(fuzz.live, fuzz.live.key_id, fuzz.live.secret) as browser,
        httpx.Client(base_url=base, timeout=30) as stranger,
    ):
        csrf = csrf_of(browser.get(f"/ui/repos/{REPO}/branches").text)
        login_csrf = csrf_of(stranger.get("/ui/login").text)
        for route in others:
            # The sign-in form drops the session of whoever shows it: it is fuzzed by a
            # browser that has none, with its own form's token.
            at_login = route.path == "/ui/login"
            client = stranger if at_login else browser if route.path.startswith("/ui") else fuzz.http
            for what, url, kw in _route_requests(route, values, login_csrf if at_login else csrf):
                fuzz.send(what, route.method, url, client=client, **kw)
        still = browser.get("/ui/")
        assert still.status_code == 200 and 'class="user">admin<' in still.text, "the session ended"
    assert fuzz.sent <= MAX_REQUESTS
    took = time.monotonic() - started
    print(f"UI fuzz: {fuzz.sent} requests over {len(others)} routes in {took:.1f} s")
    problems = fuzz.problems + quiet()
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])


def _documented(fuzz: Fuzz) -> set[str]:
    """The routes the REST fuzz sends to (from the OpenAPI document)."""
    doc = fuzz.http.get("/api/v1/openapi.json").json()
    return {" ".join(what.split(" ")[:2]) for what, *_ in _rest_requests(doc, fuzz)}


def test_every_route_of_the_app_is_fuzzed(fuzz: Fuzz, routes: list[Route]) -> None:
    """Each route the app answers is sent bad input by one of the fuzzes here (the REST API's
    from the OpenAPI document, the others from their routes' parameters), or is listed with
    its reason."""
    every = {r.key for r in routes}
    assert not set(NOT_FUZZED) - every, f"listed but not a route: {sorted(set(NOT_FUZZED) - every)}"
    values = {**fuzz.values, **UI_VALUES, "commit_id": fuzz.head, "key_id": fuzz.values["accessKeyId"]}
    documented = _documented(fuzz)
    others = {
        " ".join(what.split(" ")[:2])
        for r in routes
        if r.key not in documented
        for what, *_ in _route_requests(r, values, "csrf")
    }
    missing = every - documented - others - set(NOT_FUZZED)
    assert not missing, f"routes no fuzz sends to (fuzz them, or list them with a reason): {sorted(missing)}"


# -- the S3 gateway ----------------------------------------------------------------------------

S3_PARAMETERS = (
    "prefix", "delimiter", "marker", "start-after", "continuation-token", "max-keys", "encoding-type",
    "fetch-owner", "uploadId", "partNumber", "part-number-marker", "max-parts", "max-uploads", "key-marker",
    "upload-id-marker", "response-content-type", "response-content-disposition", "versionId",
)  # fmt: skip
"""Every query parameter the gateway reads. Each gets every variant that is not UTF-8; the
oversized variant goes to reads, and to the parameters a write uses (``uploadId``,
``partNumber``): a write ignores the others, as S3 does."""
ROUTING_QUERIES: tuple[dict[str, str], ...] = (
    {}, {"uploadId": "U"}, {"uploadId": "U", "partNumber": "1"}, {"uploads": ""}, {"location": ""},
    {"versioning": ""}, {"list-type": "2"}, {"delete": ""},
)  # fmt: skip
WRITE_HEADERS: dict[str, dict[str, bytes]] = {
    "metadata not UTF-8": {"x-amz-meta-k": b"caf\xe9"},
    "metadata value oversized": {"x-amz-meta-k": b"v" * BIG_URL},
    "metadata over 2 KB": {"x-amz-meta-a": b"v" * 1100, "x-amz-meta-b": b"v" * 1100},
    "too many metadata": {f"x-amz-meta-k{i}": b"v" for i in range(MAX_METADATA_ENTRIES + 1)},
    "content type not UTF-8": {"content-type": b"text/\xff"},
    "content type oversized": {"content-type": b"text/" + b"x" * BIG_URL},
}
"""Headers whose values are stored, for the operations that store them."""
STORING = {"PutObject", "CopyObject", "CreateMultipartUpload"}
COPYING = {"CopyObject", "UploadPartCopy"}


@dataclass(frozen=True)
class S3Call:
    operation: str
    method: str
    bucket: str
    key: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, bytes], ...] = ()
    body: bytes = b""


def s3_operations(upload_id: str) -> dict[str, S3Call]:
    """One valid call per operation the gateway's routing table answers (discovered over a grid
    of methods, addresses, queries and the copy header, so a new operation is found here)."""
    found: dict[str, S3Call] = {}
    for method in ("GET", "HEAD", "PUT", "POST", "DELETE"):
        for bucket, key in (("", ""), (REPO, ""), (REPO, "k")):
            for query in ROUTING_QUERIES:
                for copy in (False, True):
                    headers = {"x-amz-copy-source": "x"} if copy else {}
                    try:
                        name = route(method, bucket, key, query, headers).name
                    except InvalidArgument:  # no operation there
                        continue
                    if name in found:
                        continue
                    found[name] = _valid_call(name, method, bucket, key, query, copy, upload_id)
    return found


def _valid_call(
    name: str, method: str, bucket: str, key: str, query: dict[str, str], copy: bool, upload_id: str
) -> S3Call:
    if key:
        key = (
            "main/fz/mp.txt"
            if "uploadId" in query
            else "main/fz/s3.txt"
            if method != "GET"
            else "main/data/a.txt"
        )
        key = "main/data/a.txt" if method == "HEAD" else key
    query = {k: upload_id if k == "uploadId" else v for k, v in query.items()}
    headers: dict[str, bytes] = {}
    if copy:
        headers = {
            "x-amz-copy-source": f"/{REPO}/main/data/a.txt".encode(),
            "x-amz-metadata-directive": b"REPLACE",
        }
    body = b""
    if name in ("PutObject", "UploadPart"):
        body = b"data"
    elif name == "DeleteObjects":
        body = b"<Delete><Object><Key>main/fz/none.txt</Key></Object></Delete>"
    elif name == "CompleteMultipartUpload":  # a part that was never uploaded: refused whatever else
        part = b'<Part><PartNumber>1</PartNumber><ETag>"0"</ETag></Part>'
        body = b"<CompleteMultipartUpload>" + part + b"</CompleteMultipartUpload>"
    return S3Call(name, method, bucket, key, tuple(query.items()), tuple(headers.items()), body)


def _s3_variants(call: S3Call) -> Iterator[tuple[str, S3Call]]:
    """Each valid call with one bad value: in the bucket, the key, a query parameter, a stored
    header, the copy source, or a key of the request document."""
    writes = call.method in MUTATING
    for what, bad in URL_VARIANTS.items():
        if call.bucket:
            yield f"bucket: {what}", S3Call(**{**call.__dict__, "bucket": bad})
        if call.key:
            yield f"key: {what}", S3Call(**{**call.__dict__, "key": "main/fz/" + bad})
        for name in S3_PARAMETERS:
            if what == "oversized" and writes and name not in dict(call.query):
                continue
            query = (*((k, v) for k, v in call.query if k != name), (name, bad))
            yield f"query {name}: {what}", S3Call(**{**call.__dict__, "query": query})
        if call.operation in COPYING:
            headers = (*((k, v) for k, v in call.headers if k != "x-amz-copy-source"),)
            source = f"/{REPO}/main/".encode() + bad.encode()
            yield (
                f"copy source: {what}",
                S3Call(**{**call.__dict__, "headers": (*headers, ("x-amz-copy-source", source))}),
            )
    if call.operation in STORING:
        for what, headers in WRITE_HEADERS.items():
            yield what, S3Call(**{**call.__dict__, "headers": (*call.headers, *headers.items())})
    if call.operation == "DeleteObjects":
        for what, key in {"oversized key": b"main/" + b"x" * BIG_URL, "key not UTF-8": b"main/\xff"}.items():
            body = b"<Delete><Object><Key>" + key + b"</Key></Object></Delete>"
            yield what, S3Call(**{**call.__dict__, "body": body})


def _send_s3(fz: Fuzz, what: str, call: S3Call) -> None:
    key_id, secret = fz.live.key_id, fz.live.secret
    path = "/" + call.bucket + ("/" + call.key if call.key else "")
    query = "&".join(f"{k}={v}" if v else k for k, v in call.query)
    url = fz.live.s3_endpoint + quote(path, safe="/%") + (f"?{query}" if query else "")
    as_text = {k: v.decode("latin-1") for k, v in call.headers}
    request = AWSRequest(method=call.method, url=url, data=call.body, headers=as_text)
    request.headers["x-amz-content-sha256"] = hashlib.sha256(call.body).hexdigest()
    S3SigV4Auth(Credentials(key_id, secret), "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    headers = {k: v.encode("latin-1") for k, v in prepared.headers.items()}
    fz.send(
        f"S3 {call.operation} {what}",
        call.method,
        prepared.url,
        signed=True,
        headers=headers,
        content=call.body,
    )


def test_every_s3_operation_refuses_bad_input_without_a_5xx_or_a_write(fuzz: Fuzz) -> None:
    with httpx.Client(base_url=fuzz.live.url, auth=(fuzz.live.key_id, fuzz.live.secret)) as rest:
        r = rest.post(f"/repositories/{REPO}/branches", json={"name": "s3", "source": "main"})
        assert r.status_code in (201, 409), r.text
    operations = s3_operations(_create_upload(fuzz))
    assert len(operations) >= 17, sorted(operations)
    started, fuzz.sent, fuzz.problems = time.monotonic(), 0, []
    for call in operations.values():
        for what, bad in _s3_variants(call):
            _send_s3(fuzz, what, bad)
    took = time.monotonic() - started
    print(f"S3 fuzz: {fuzz.sent} requests over {len(operations)} operations in {took:.1f} s")
    assert not fuzz.problems, f"{len(fuzz.problems)} problems:\n" + "\n".join(fuzz.problems[:30])


def _create_upload(fz: Fuzz) -> str:
    call = S3Call("CreateMultipartUpload", "POST", REPO, "main/fz/mp.txt", (("uploads", ""),))
    path = f"/{REPO}/main/fz/mp.txt?uploads"
    request = AWSRequest(method="POST", url=fz.live.s3_endpoint + path, data=b"")
    request.headers["x-amz-content-sha256"] = hashlib.sha256(b"").hexdigest()
    S3SigV4Auth(Credentials(fz.live.key_id, fz.live.secret), "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    r = httpx.post(prepared.url, headers=dict(prepared.headers.items()), timeout=30)
    assert r.status_code == 200, (call, r.text)
    fz.state = None
    return r.text.split("<UploadId>", 1)[1].split("</UploadId>", 1)[0]
