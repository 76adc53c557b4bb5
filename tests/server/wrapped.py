"""The lakeFS high-level SDK (PyPI ``lakefs``) and lakefs-spec, imported from where they live.

The ``lakefs`` wheel also installs a top-level ``lakectl`` package (its own CLI shim, which
downloads lakeFS's Go binary) that would shadow this project's, so both are kept out of
site-packages: either installed already, or in ``<venv>/lakefs-wrapper`` (``make install-test``:
``pip install --no-deps --target .venv/lakefs-wrapper lakefs lakefs-spec`` with its ``lakectl``
directory removed), which is added to the end of ``sys.path`` here.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest


def wrapped(name: str) -> ModuleType:
    """``lakefs`` or ``lakefs_spec``; fails on CI when missing, skips loudly elsewhere."""
    try:
        return importlib.import_module(name)
    except ImportError:
        wrapper = Path(sys.prefix) / "lakefs-wrapper"
        if not (wrapper / name).is_dir():
            if os.environ.get("CI"):
                pytest.fail(f"{name} is missing from the lakeFS SDK wrapper: `make install-test` installs it")
            pytest.skip(f"LOUD SKIP: {name} is not installed (the lakeFS SDK wrapper); run make test")
        if str(wrapper) not in sys.path:
            sys.path.append(str(wrapper))
        return importlib.import_module(name)
