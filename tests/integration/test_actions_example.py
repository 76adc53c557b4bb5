"""examples/actions_ci.sh, run as written: a pre-merge command hook validates the orders table
with pyarrow; the good batch merges, the bad one is refused and main keeps its commit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "actions_ci.sh"


def test_the_ci_example_blocks_the_bad_batch(tmp_path: Path) -> None:
    bin_dir = str(Path(sys.executable).parent)
    root = str(EXAMPLE.parents[1])
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": root,
        "TMPDIR": str(tmp_path),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_BASE_URI": "",
    }
    done = subprocess.run(["bash", str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout + done.stderr
    assert "merge exit status: 6" in out
    assert "failed on action 'Orders quality gate' hook 'orders_schema_and_rows'" in out
    assert "'amount': 'string'" in out  # the hook's own words, from cat-hook-output too
    assert list(tmp_path.iterdir()) == []  # the example cleaned up after itself
