"""Every module lakectl ships imports only what its install declares: the runtime dependencies of
pyproject.toml for everything, plus the ``spark`` extra for :mod:`lakectl.spark` and
:mod:`lakectl.sparkjobs`.

A package that only the test extras bring in (as ``cryptography`` once did) passes every test and
then fails a user's plain install with a traceback. This reads every import statement of the
shipped packages (function-level ones included: lazy imports are still imports) and maps each
top-level module to the distribution that provides it. ``scripts/smoke.sh`` proves the same by
running a plain install for real.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("lakectl", "server", "migrations")
OWN = set(SHIPPED)
SPARK = ("spark", "sparkjobs")
"""The packages of lakectl that may import the ``spark`` extra: the data source and the jobs."""


def declared(requirements: list[str]) -> set[str]:
    """Normalized distribution names of requirement strings (``psycopg[binary]>=3.1; ...``)."""
    names = set()
    for requirement in requirements:
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert match is not None, requirement
        names.add(normalize(match.group(0)))
    return names


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imports(path: Path) -> set[str]:
    """The top-level module names ``path`` imports, at any depth of the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def undeclared(files: list[Path], allowed: set[str]) -> dict[str, list[str]]:
    providers = importlib.metadata.packages_distributions()
    missing: dict[str, list[str]] = {}
    for path in files:
        for module in imports(path) - OWN - set(sys.stdlib_module_names):
            distributions = {normalize(d) for d in providers.get(module, [module])}
            if not distributions & allowed:
                missing.setdefault(module, []).append(path.name)
    return missing


def project() -> dict[str, object]:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"])


def shipped_files() -> list[Path]:
    return [path for package in SHIPPED for path in sorted((ROOT / package).rglob("*.py"))]


def test_every_runtime_import_is_a_declared_dependency() -> None:
    runtime = declared(list(project()["dependencies"]))  # type: ignore[arg-type]
    files = [p for p in shipped_files() if not set(SPARK) & set(p.relative_to(ROOT).parts)]
    assert len(files) > 50
    missing = undeclared(files, runtime)
    assert not missing, f"imported but not in [project] dependencies: {missing}"


def test_the_spark_modules_need_only_the_spark_extra() -> None:
    metadata = project()
    extras: dict[str, list[str]] = metadata["optional-dependencies"]  # type: ignore[assignment]
    allowed = declared([*metadata["dependencies"], *extras["spark"]])  # type: ignore[misc]
    files = sorted(path for package in SPARK for path in (ROOT / "lakectl" / package).rglob("*.py"))
    assert files
    missing = undeclared(files, allowed)
    assert not missing, (
        f"imported by lakectl.spark or lakectl.sparkjobs but not in the spark extra: {missing}"
    )


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    """The check itself can fail: a lazy import of a test-only package is reported."""
    bad = tmp_path / "uses_test_packages.py"
    bad.write_text(
        "import typer\n\n\ndef f():\n    import hypothesis.strategies\n    from pytest import raises\n"
    )
    assert undeclared([bad], declared(["typer>=0.12"])) == {
        "hypothesis": ["uses_test_packages.py"],
        "pytest": ["uses_test_packages.py"],
    }
