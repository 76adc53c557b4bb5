"""The lakeFS REST API as the official SDK defines it, against the routes this server serves.

Every operation of the installed ``lakefs-sdk`` (its ``lakefs_sdk/api/*_api.py`` modules, read from
the SDK itself, never a hand-copied list) is matched against the server's own route table: served,
or not. ``docs/lakefs-api.md`` is this table; ``test_lakefs_api_table.py`` keeps it in sync.

    python -m tests.server.lakefs_api_table > docs/lakefs-api.md
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass

EXPERIMENTAL = ("experimental_api", "external_api")
"""The SDK's modules of operations lakeFS marks experimental (not part of its stable contract)."""

_CALL = re.compile(r"def (\w+)_with_http_info\(self.*?call_api\(\s*'([^']+)',\s*'(\w+)'", re.S)


@dataclass(frozen=True, order=True)
class Operation:
    group: str
    name: str
    method: str
    path: str

    @property
    def experimental(self) -> bool:
        return f"{self.group}_api" in EXPERIMENTAL


def sdk_operations() -> list[Operation]:
    """Every operation of the installed lakefs-sdk, from its own API modules."""
    import lakefs_sdk.api

    found = []
    for module in pkgutil.iter_modules(lakefs_sdk.api.__path__):
        source = inspect.getsource(importlib.import_module(f"lakefs_sdk.api.{module.name}"))
        for name, path, method in _CALL.findall(source):
            found.append(Operation(module.name.removesuffix("_api"), name, method, path))
    return sorted(found)


def is_routed(app: object, op: Operation) -> bool:
    """Whether a request of the operation's method to its path (every parameter ``x1``) reaches
    one of the app's routes, as the server's router decides."""
    from starlette.routing import Match

    path = "/api/v1" + re.sub(r"\{\w+\}", "x1", op.path)
    scope = {
        "type": "http",
        "path": path,
        "method": op.method,
        "root_path": "",
        "query_string": b"",
        "headers": [],
    }
    return any(route.matches(scope)[0] is Match.FULL for route in app.router.routes)  # type: ignore[attr-defined]


def table(app: object) -> str:
    """docs/lakefs-api.md: every stable operation of the SDK and whether this server routes it."""
    ops = [op for op in sdk_operations() if not op.experimental]
    routed = {op: is_routed(app, op) for op in ops}
    import lakefs_sdk

    lines = [
        "# The lakeFS REST API here",
        "",
        f"Every operation of the official lakeFS Python SDK ({lakefs_sdk.__version__}) outside its",
        "experimental groups, and whether `lakectl server` serves it under `/api/v1`. Generated from",
        "the SDK's own operation list and the server's route table; a test keeps this page in sync.",
        "",
        f"**{sum(routed.values())} of {len(ops)}** operations served.",
        "",
        "| group | operation | method | path | served |",
        "|---|---|---|---|---|",
    ]
    for op in ops:
        lines.append(
            f"| {op.group} | `{op.name}` | {op.method} | `{op.path}` | {'yes' if routed[op] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def _app() -> object:
    import tempfile

    from server.app import create_app
    from server.config import load_settings

    return create_app(load_settings(data_dir=tempfile.mkdtemp(prefix="lakectl-api-table-")))


if __name__ == "__main__":
    print(table(_app()), end="")
