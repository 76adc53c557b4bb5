"""What a shell user meets around the commands: prompts, pipes closed early, long transfers.

The CLI runs here as users run it, in a child process, where a terminal or a pipe matters."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import Run

ROOT = Path(__file__).resolve().parents[2]


def lakectl(*args: str) -> list[str]:
    return [sys.executable, "-c", "from lakectl.cli.app import main; main()", *args]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def on_a_terminal(args: list[str], answer: bytes) -> tuple[int, str]:
    """Run ``args`` with a pseudo-terminal as stdin, answer the prompt with ``answer``; the exit
    code and what it wrote to stderr (where prompts go)."""
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            args, stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env()
        )
        deadline = time.monotonic() + 60
        prompt = b""
        assert proc.stderr is not None
        while b"[y/N]" not in prompt and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                prompt += os.read(proc.stderr.fileno(), 1024)
            assert proc.poll() is None or b"[y/N]" in prompt, prompt
        os.write(controller, answer)
        _, err = proc.communicate(timeout=60)
        return proc.returncode, (prompt + err).decode()
    finally:
        os.close(controller)
        os.close(terminal)


def test_a_prompt_is_asked_on_a_terminal_and_never_waited_on_elsewhere(run: Run, js) -> None:
    run("repo", "create", "lakefs://sales")
    run("branch", "create", "lakefs://sales/dev", "--source", "lakefs://sales/main")

    code, err = on_a_terminal(lakectl("branch", "delete", "lakefs://sales/dev"), b"n\n")
    assert code == 1 and "Delete branch 'dev'" in err and "Aborted" in err
    code, _ = on_a_terminal(lakectl("branch", "delete", "lakefs://sales/dev"), b"y\n")
    assert code == 0
    assert [b["id"] for b in js("branch", "list", "lakefs://sales")] == ["main"]

    # No terminal: refused at once (no input is read), in JSON under --json.
    proc = subprocess.run(
        lakectl("repo", "delete", "lakefs://sales", "--json"),
        stdin=subprocess.PIPE,  # open and never written to: a prompt would wait forever
        capture_output=True,
        env=child_env(),
        timeout=60,  # a prompt waiting for input fails the test here
    )
    assert proc.returncode == 2
    refusal = json.loads(proc.stdout)
    assert refusal["code"] == "invalid_argument" and "pass -y" in refusal["message"]
    assert [r["id"] for r in js("repo", "list")] == ["sales"]


def test_a_reader_that_stops_early_ends_the_command_quietly(run: Run, tmp_path: Path) -> None:
    """``lakectl fs ls -r ... | head -1``: the pipe closes under the writer. lakectl stops with
    141 (a program killed by SIGPIPE, as lakeFS's Go lakectl) and writes nothing to stderr."""
    run("repo", "create", "lakefs://sales")
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3000):
        (data / f"part-{i:05d}.csv").write_text(f"{i}\n")
    run("fs", "upload", "-r", "--source", str(data), "lakefs://sales/main/t/")
    for args in (["fs", "ls", "-r", "lakefs://sales/main/"], ["log", "lakefs://sales/main"]):
        proc = subprocess.Popen(
            lakectl(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env()
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        proc.wait(timeout=60)
        if args[0] == "fs":  # far more output than a pipe buffers: the write must fail
            assert proc.returncode == 141, err
        assert proc.returncode in (0, 141) and err == b"", err


@pytest.mark.parametrize("quiet", [False, True])
def test_upload_and_download_say_what_they_did_unless_quiet(
    run: Run, js, tmp_path: Path, quiet: bool
) -> None:
    run("repo", "create", "lakefs://sales")
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("1\n")
    (data / "b.csv").write_text("2\n")
    flag = ["--quiet"] if quiet else []
    up = run("fs", "upload", "-r", "--source", str(data), "lakefs://sales/main/t/", *flag)
    down = run("fs", "download", "-r", "lakefs://sales/main/t/", str(tmp_path / "out"), *flag)
    one = run("fs", "upload", "--source", str(data / "a.csv"), "lakefs://sales/main/one.csv", *flag)
    for result in (up, down, one):
        said = result.stdout + result.stderr
        assert (said == "") is quiet, said
    assert (tmp_path / "out" / "b.csv").read_text() == "2\n"
    # --json is machine output: --quiet does not take it away.
    listed = js("fs", "upload", "-r", "--source", str(data), "lakefs://sales/main/u/", *flag)
    assert [o["path"] for o in listed] == ["u/a.csv", "u/b.csv"]


def test_download_recursive_in_parallel_writes_every_object(run: Run, js, tmp_path: Path) -> None:
    run("repo", "create", "lakefs://sales")
    data = tmp_path / "data"
    (data / "x" / "y").mkdir(parents=True)
    expected = {}
    for i in range(40):
        rel = f"x/y/{i}.bin" if i % 3 else f"x/{i}.bin"
        (data / rel).write_bytes(os.urandom(1000 + i))
        expected[rel] = (data / rel).read_bytes()
    run("fs", "upload", "-r", "--source", str(data), "lakefs://sales/main/d/")
    for flag in ("--parallel", "--parallelism", "-p"):
        out = tmp_path / f"out{flag}"
        done = js("fs", "download", "-r", "lakefs://sales/main/d/", str(out), flag, "4")
        assert sorted(o["path"] for o in done) == sorted(f"d/{rel}" for rel in expected)
        assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*.bin")} == expected
    run("fs", "download", "-r", "lakefs://sales/main/d/", str(tmp_path / "bad"), "--parallel", "0", code=2)


def test_a_dangling_symlink_is_skipped_with_a_warning_or_refused_with_strict(
    run: Run, js, tmp_path: Path
) -> None:
    run("repo", "create", "lakefs://sales")
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("1\n")
    (data / "gone.csv").symlink_to(tmp_path / "nowhere.csv")
    refused = run("fs", "upload", "-r", "--strict", "--source", str(data), "lakefs://sales/main/t/", code=2)
    assert "dangling symbolic link" in refused.stderr
    assert js("fs", "ls", "-r", "lakefs://sales/main/") == []
    done = run("fs", "upload", "-r", "--source", str(data), "lakefs://sales/main/t/")
    assert "skipped" in done.stderr and "gone.csv" in done.stderr
    assert [o["path"] for o in js("fs", "ls", "-r", "lakefs://sales/main/")] == ["t/a.csv"]


def test_fs_ls_of_an_object_lists_it_and_upload_to_a_prefix_appends_the_name(
    run: Run, js, tmp_path: Path
) -> None:
    run("repo", "create", "lakefs://sales")
    source = tmp_path / "orders.csv"
    source.write_text("1\n")
    assert js("fs", "upload", "--source", str(source), "lakefs://sales/main/raw/")["path"] == "raw/orders.csv"
    assert [o["path"] for o in js("fs", "ls", "lakefs://sales/main/raw/orders.csv")] == ["raw/orders.csv"]


def terminal_output(args: list[str]) -> tuple[int, bytes]:
    """Run ``args`` with stdout on a pseudo-terminal (as in a shell): its exit code and what it
    drew there."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(args, stdout=terminal, stderr=terminal, stdin=subprocess.DEVNULL, env=child_env())
    os.close(terminal)
    drawn = b""
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(controller)
    return proc.wait(timeout=60), drawn


def test_one_large_file_shows_a_progress_bar_on_a_terminal_only(run: Run, tmp_path: Path) -> None:
    run("repo", "create", "lakefs://sales")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 << 20))
    code, drawn = terminal_output(
        lakectl("fs", "upload", "--source", str(big), "lakefs://sales/main/big.bin")
    )
    assert code == 0 and b"uploading big.bin" in drawn, drawn[-500:]
    target = tmp_path / "back.bin"
    code, drawn = terminal_output(lakectl("fs", "download", "lakefs://sales/main/big.bin", str(target)))
    assert code == 0 and b"downloading big.bin" in drawn, drawn[-500:]
    assert target.read_bytes() == big.read_bytes()
    code, drawn = terminal_output(
        lakectl("fs", "download", "lakefs://sales/main/big.bin", str(target), "--no-progress")
    )
    assert code == 0 and b"downloading big.bin" not in drawn
    # Not a terminal: no bar, whatever the size.
    piped = run("fs", "download", "lakefs://sales/main/big.bin", str(target))
    assert "downloading big.bin" not in piped.stdout + piped.stderr


def test_every_delete_prints_the_one_deletion_shape(run: Run, js, tmp_path: Path) -> None:
    run("repo", "create", "lakefs://sales")
    run("fs", "upload", "lakefs://sales/main/a.csv", "-s", "-", input=b"1\n")
    run("commit", "lakefs://sales/main", "-m", "a")
    run("branch", "create", "lakefs://sales/dev", "--source", "lakefs://sales/main")
    run("tag", "create", "lakefs://sales/v1", "lakefs://sales/main")
    rules = tmp_path / "rules.json"
    rules.write_text('{"default_retention_days": 7}')
    run("gc", "set-config", "lakefs://sales", "-f", str(rules))
    run("branch-protect", "add", "lakefs://sales", "prod*")
    deletes = {
        "object": ["fs", "rm", "lakefs://sales/dev/a.csv"],
        "branch": ["branch", "delete", "lakefs://sales/dev", "-y"],
        "tag": ["tag", "delete", "lakefs://sales/v1"],
        "gc_rules": ["gc", "delete-config", "lakefs://sales"],
        "branch_protection": ["branch-protect", "delete", "lakefs://sales", "prod*"],
        "repository": ["repo", "delete", "lakefs://sales", "-y"],
    }
    for kind, argv in deletes.items():
        result = js(*argv)
        assert set(result) == {"type", "deleted", "message"} and result["type"] == kind, result
        assert len(result["deleted"]) == 1
