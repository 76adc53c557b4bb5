"""The peers the benchmarks compare lakectl with, installed on first use.

* git: from the system (``apt-get install git``; ``make bench`` installs it when it can);
* DVC (``dvc``) and Oxen (``oxenai``, driven through its Python API): pip-installed into the
  benchmarks' own environment, ``benchmarks/.peers-venv`` (git-ignored), never into the
  project's venv.

A peer that cannot be installed is reported with the reason and its rows are skipped; nothing
here fails a benchmark. ``python benchmarks/_peers.py`` installs them all and prints what it
found (``run_all.sh`` does this first, so that no benchmark pays for an installation).

Oxen runs one Python process per step, as a script would: :func:`oxen_cmd` builds
``PEERS_PYTHON -c "import sys, oxen; oxen.Repo(sys.argv[1]).add(sys.argv[2])" REPO PATH``
and the like. Its user (name, e-mail; a commit requires one) is configured in a ``HOME`` of
the benchmark's own (:func:`oxen_env`), so the user's own Oxen configuration is neither read
nor written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS_VENV = os.path.join(HERE, ".peers-venv")
PEERS_PYTHON = os.path.join(PEERS_VENV, "bin", "python")
DVC_SPEC = "dvc>=3,<4"
OXEN_SPEC = "oxenai>=0.65,<0.66"
INSTALL_TIMEOUT = 900.0

OXEN_STEPS = {
    "config": "import sys, oxen; oxen.user.config_user(sys.argv[1], sys.argv[2])",
    "init": "import sys, oxen; oxen.Repo(sys.argv[1]).init()",
    "add": "import sys, oxen; oxen.Repo(sys.argv[1]).add(sys.argv[2])",
    "commit": "import sys, oxen; oxen.Repo(sys.argv[1]).commit(sys.argv[2])",
}
"""Oxen's Python API, one call a process: ``oxen.user.config_user(name, email)`` (written to
``$HOME/.config/oxen/user_config.toml``), ``Repo(path).init()`` (``.oxen/`` in the working
directory), ``Repo(path).add(path)`` (hashes every file, xxh3, and copies the new contents
into ``.oxen/versions``, each fsynced) and ``Repo(path).commit(message)`` (writes the commit's
Merkle tree)."""


def _run(cmd: list[str], timeout: float) -> str:
    """Run ``cmd`` quietly: "" when it succeeded, else why not."""
    try:
        proc = subprocess.run(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return f"`{' '.join(cmd[:3])} ...` did not finish within {timeout:g} s"
    except OSError as e:
        return f"cannot run {cmd[0]}: {e}"
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()[-600:]
        return f"`{' '.join(cmd[:4])} ...` exited {proc.returncode}: {err}"
    return ""


def _pip_install(spec: str, timeout: float) -> str:
    """``pip install spec`` into the peers venv (created first if need be): "" or why not."""
    print(f"installing {spec} into {PEERS_VENV} (first run only) ...", flush=True)
    if not os.path.exists(PEERS_PYTHON):
        why = _run([sys.executable, "-m", "venv", PEERS_VENV], timeout)
        if why:
            return why
    pip = os.path.join(PEERS_VENV, "bin", "pip")
    return _run([pip, "install", "-q", "--disable-pip-version-check", spec], timeout)


def ensure_dvc(timeout: float = INSTALL_TIMEOUT) -> tuple[str | None, str]:
    """The dvc executable of the peers venv (installed on first use), or why not."""
    dvc = os.path.join(PEERS_VENV, "bin", "dvc")
    if os.access(dvc, os.X_OK):
        return dvc, ""
    why = _pip_install(DVC_SPEC, timeout)
    if why:
        return None, f"could not install dvc into {PEERS_VENV}: {why}"
    if not os.access(dvc, os.X_OK):
        return None, f"pip install dvc did not provide {dvc}"
    return dvc, ""


_oxen_checked: list[tuple[str | None, str]] = []


def ensure_oxen(timeout: float = INSTALL_TIMEOUT) -> tuple[str | None, str]:
    """The peers venv's Python, once it imports ``oxen`` (installed on first use), or why not."""
    if _oxen_checked:
        return _oxen_checked[0]
    importable = os.path.exists(PEERS_PYTHON) and not _run([PEERS_PYTHON, "-c", "import oxen"], timeout)
    out: tuple[str | None, str] = (PEERS_PYTHON, "")
    if not importable:
        why = _pip_install(OXEN_SPEC, timeout)
        if why:
            out = (None, f"could not install oxenai into {PEERS_VENV}: {why}")
        elif why := _run([PEERS_PYTHON, "-c", "import oxen"], timeout):
            out = (None, f"oxenai installed into {PEERS_VENV} but does not import: {why}")
    _oxen_checked.append(out)
    return out


def oxen_cmd(python: str, step: str, *args: str) -> list[str]:
    """One Oxen API call as its own process (see :data:`OXEN_STEPS`)."""
    return [python, "-c", OXEN_STEPS[step], *args]


def oxen_env(home: str) -> dict[str, str]:
    """The environment of Oxen's processes: ``HOME`` in the benchmark's temp dir, where its
    user configuration is written (the ``config`` step, not timed: a user does it once)."""
    os.makedirs(home, exist_ok=True)
    return dict(os.environ, HOME=home)


def main() -> None:
    """Install every peer (first run only) and say which ones the benchmarks will measure."""
    git = shutil.which("git")
    if git is None:
        print("peer git: missing (apt-get install git); its rows, and DVC's, will be skipped")
    else:
        version = subprocess.run([git, "--version"], capture_output=True, text=True, check=False)
        print(f"peer git: {version.stdout.strip()}")
    dvc, why = ensure_dvc()
    print(f"peer dvc: {dvc}" if dvc else f"peer dvc: skipped: {why}")
    python, why = ensure_oxen()
    if python:
        code = "import oxen; print(oxen.__version__)"
        version = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
        print(f"peer oxen: oxenai {version.stdout.strip()} ({python})")
    else:
        print(f"peer oxen: skipped: {why}")


if __name__ == "__main__":
    main()
