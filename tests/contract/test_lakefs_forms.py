"""A script of lakeFS's ``lakectl`` commands in their documented forms (lakefs_forms.sh) runs
unchanged against an embedded lake and against a lakectl server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.conftest import Live, live, unique

__all__ = ["live"]

SCRIPT = Path(__file__).with_name("lakefs_forms.sh")
ROOT = Path(__file__).resolve().parents[2]


def run_script(env: dict[str, str], mode: str, tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "lakectl").exists(), "lakectl is installed next to this interpreter"
    full = {
        **os.environ,
        **env,
        "REPO": unique("forms"),
        "MODE": mode,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
        "HOME": str(tmp_path),  # no ~/.lakectl.yaml of this machine
    }
    for name in ("LAKECTL_BASE_URI", "NO_COLOR"):
        full.pop(name, None)
    out = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=full, timeout=600)
    assert out.returncode == 0, (
        f"exit {out.returncode}\nstdout:\n{out.stdout[-3000:]}\nstderr:\n{out.stderr[-3000:]}"
    )
    assert out.stdout.rstrip().endswith("all lakeFS forms ran")


def test_lakefs_forms_embedded(tmp_path: Path) -> None:
    env = {
        "LAKECTL_HOME": str(tmp_path / "lake"),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_COMMITTER": "tester",
    }
    run_script(env, "embedded", tmp_path)


@pytest.mark.slow
def test_lakefs_forms_against_a_server(tmp_path: Path, live: Live) -> None:
    run_script(live.cli_env(tmp_path), "remote", tmp_path)
