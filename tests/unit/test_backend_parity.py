"""Every backend's methods have the Backend protocol's signatures, and no public method beyond them.

The CLI calls the protocol and never knows which backend it holds (ARCHITECTURE.md), so a backend
whose method takes another parameter, another default or another type than the protocol says
fails for one way of running lakectl only, and a method only one backend has tempts a caller to
tell them apart. mypy would catch part of it where the backends are checked against the protocol;
this test compares every parameter's name, kind, default and annotation, and names the difference.

Annotations are strings here (``from __future__ import annotations``): each is evaluated in its
own module's namespace, the names imported under ``if TYPE_CHECKING:`` included, so that two
spellings of one type (``Optional[int]``, ``int | None``) agree and a name that resolves nowhere
fails.
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Callable
from typing import Any

import pytest

from lakectl.client import Backend
from lakectl.client.local import LocalBackend
from lakectl.client.remote import RemoteBackend

IMPLEMENTATIONS = [LocalBackend, RemoteBackend]

BEYOND_THE_PROTOCOL: dict[type, frozenset[str]] = {
    LocalBackend: frozenset(),
    # The server's block API (signed locators in, bytes out) for lakectl.spark's executors
    # (spark/lake.py's RemoteBlocks), through this client's retries and md5 checks; the embedded
    # lake's executors read the block directory instead, so the protocol has no use for them.
    RemoteBackend: frozenset({"store_block", "get_block"}),
}


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The public functions ``cls`` has, its bases' included (properties are data, not verbs)."""
    found: dict[str, Callable[..., Any]] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object's own methods left out
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            if inspect.isfunction(value):
                found[name] = value
            else:
                found.pop(name, None)
    return found


PROTOCOL = public_methods(Backend)

_namespaces: dict[str, dict[str, Any]] = {}


def namespace(function: Callable[..., Any]) -> dict[str, Any]:
    """The globals of ``function``'s module plus the names it imports for type checkers only."""
    module = function.__module__
    if module not in _namespaces:
        names = dict(vars(sys.modules[module]))
        tree = ast.parse(inspect.getsource(sys.modules[module]))
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) in (
                "TYPE_CHECKING",
                "typing.TYPE_CHECKING",
            ):
                imports = [s for s in node.body if isinstance(s, ast.Import | ast.ImportFrom)]
                exec(compile(ast.Module(body=imports, type_ignores=[]), module, "exec"), names)
        _namespaces[module] = names
    return _namespaces[module]


def resolved(annotation: Any, function: Callable[..., Any]) -> Any:
    """The object an annotation names (a quoted one under the future import is a string twice)."""
    while isinstance(annotation, str):
        try:
            annotation = eval(annotation, namespace(function))
        except NameError as e:
            raise AssertionError(
                f"{function.__qualname__}: the annotation {annotation!r} names nothing"
            ) from e
    return annotation


def differences(protocol: Callable[..., Any], implementation: Callable[..., Any]) -> list[str]:
    """How ``implementation``'s signature differs from ``protocol``'s, one line per difference."""
    expected = inspect.signature(protocol)
    actual = inspect.signature(implementation)
    found = []
    wanted = list(expected.parameters.values())
    have = list(actual.parameters.values())
    if [p.name for p in wanted] != [p.name for p in have]:
        found.append(f"parameters {[p.name for p in have]}, the protocol's {[p.name for p in wanted]}")
    by_name = {p.name: p for p in have}
    for p in wanted:
        q = by_name.get(p.name)
        if q is None:
            continue
        if q.kind != p.kind:
            found.append(f"{p.name} is {q.kind.description}, the protocol's {p.kind.description}")
        if q.default != p.default:
            found.append(f"{p.name} defaults to {q.default!r}, the protocol's to {p.default!r}")
        if resolved(q.annotation, implementation) != resolved(p.annotation, protocol):
            found.append(f"{p.name} is annotated {q.annotation!r}, the protocol's {p.annotation!r}")
    if resolved(actual.return_annotation, implementation) != resolved(expected.return_annotation, protocol):
        found.append(f"returns {actual.return_annotation!r}, the protocol's {expected.return_annotation!r}")
    return found


def test_the_protocol_is_read_whole() -> None:
    assert len(PROTOCOL) > 70
    assert "log" in PROTOCOL and "pull_gate" in PROTOCOL


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda cls: cls.__name__)
def test_every_method_has_the_protocols_signature(implementation: type) -> None:
    methods = public_methods(implementation)
    report = []
    for name, protocol in sorted(PROTOCOL.items()):
        if name not in methods:
            report.append(f"{name}: missing")
            continue
        report.extend(f"{name}: {line}" for line in differences(protocol, methods[name]))
    assert not report, f"{implementation.__name__} differs from Backend:\n" + "\n".join(report)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda cls: cls.__name__)
def test_no_public_method_beyond_the_protocol(implementation: type) -> None:
    extra = set(public_methods(implementation)) - set(PROTOCOL) - BEYOND_THE_PROTOCOL[implementation]
    assert not extra, (
        f"{implementation.__name__} has public methods the Backend protocol lacks: {sorted(extra)} "
        "(add them to the protocol, or make them private)"
    )


def test_a_difference_is_named() -> None:
    class Drifted:
        def log(self, repo: str, ref: int, amount: int | None = 5, *, since: str = "") -> list[str]:
            raise NotImplementedError

    found = differences(PROTOCOL["log"], Drifted.log)
    assert any(line.startswith("parameters ") for line in found)
    assert "ref is annotated 'int', the protocol's 'str'" in found
    assert "amount defaults to 5, the protocol's to None" in found
    assert any(line.startswith("returns 'list[str]'") for line in found)
