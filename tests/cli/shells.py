"""bash, zsh and fish run interactively on a pseudo-terminal, for the completion tests: keys are
typed in as a user types them, and the command line is read back as the shell holds it (Ctrl-T is
bound to print it between markers), with what the terminal showed on the way.

Each shell loads ``lakectl completion <shell>`` the way docs/cli.md says to, from a temporary home;
``lakectl`` is the executable on ``PATH``. zsh and fish come from ``scripts/ensure-shells.sh``
(run here when one is missing, and by ``make test``); a shell it could not install makes its tests
skip, loudly, except under CI (``CI`` set), where they fail. Every read is bounded in time.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READ_TIMEOUT = 60.0
"""Seconds to wait for the shell's answer to one line of keys (each Tab starts lakectl)."""

_ANSI = re.compile(rb"\x1b(\[[0-9;?>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>])")
_LINE = re.compile(rb"LINE<(.*?)>END")
_READY = b"SHELL-READY"

# Each shell's start-up file, with {script} (the completion script, saved where the docs say) and
# {state} (a directory for the shell's own files). Ctrl-T prints the command line between markers.
_RC = {
    "bash": r"""
PS1='$ '
source {script}
bind -x '"\C-t": printf "\nLINE<%s>END\n" "$READLINE_LINE"'
printf 'SHELL-%s\n' READY
""",
    "zsh": r"""
PS1='$ '
bindkey -e
fpath=({state}/functions $fpath)
autoload -Uz compinit && compinit -u -d {state}/zcompdump
show-line() {{ print -r -- $'\n'"LINE<$BUFFER>END" }}
zle -N show-line
bindkey '^T' show-line
printf 'SHELL-%s\n' READY
""",
    "fish": r"""
if status is-interactive
    set -g fish_greeting ''
    function fish_prompt; printf '$ '; end
    bind \ct 'printf "\nLINE<%s>END\n" (commandline); commandline -f repaint'
    printf 'SHELL-%s\n' READY
end
""",
}


def require(shell: str) -> str:
    """The shell's executable; installed by scripts/ensure-shells.sh when missing."""
    if shutil.which(shell) is None:
        subprocess.run(["bash", str(ROOT / "scripts" / "ensure-shells.sh")], check=False, timeout=900)
    found = shutil.which(shell)
    if found is None:
        message = f"NO {shell.upper()} COMPLETION TESTS: {shell} is missing and could not be installed"
        message += " (run scripts/ensure-shells.sh as root)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def install(shell: str, home: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """Save ``lakectl completion <shell>`` where docs/cli.md says and write the start-up file;
    the shell's command line and environment."""
    state = home / f".{shell}-state"
    (state / "functions").mkdir(parents=True)
    script = {
        "bash": state / "lakectl.bash",
        "zsh": state / "functions" / "_lakectl",
        "fish": home / ".config" / "fish" / "completions" / "lakectl.fish",
    }[shell]
    script.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(
        ["lakectl", "completion", shell], capture_output=True, text=True, env=env, timeout=120
    )
    assert made.returncode == 0, made.stderr
    script.write_text(made.stdout)
    rc = _RC[shell].format(script=script, state=state)
    env = {**env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    if shell == "bash":
        (state / "bashrc").write_text(rc)
        return ["bash", "--noprofile", "--rcfile", str(state / "bashrc"), "-i"], env
    if shell == "zsh":
        (state / ".zshrc").write_text(rc)
        return ["zsh", "--no-globalrcs", "-i"], {**env, "ZDOTDIR": str(state)}
    (home / ".config" / "fish" / "config.fish").write_text(rc)
    return ["fish", "-i"], env


@dataclass
class Terminal:
    """One interactive shell on a pseudo-terminal."""

    shell: str
    proc: subprocess.Popen[bytes]
    fd: int

    def read_until(self, pattern: re.Pattern[bytes]) -> bytes:
        """The output up to and including ``pattern``; fails after READ_TIMEOUT seconds."""
        out = b""
        deadline = time.monotonic() + READ_TIMEOUT
        while not pattern.search(out):
            left = deadline - time.monotonic()
            assert left > 0, f"the shell did not answer in {READ_TIMEOUT:.0f}s; it showed {out[-2000:]!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the shell is gone
                    chunk = b""
                assert chunk, f"the shell exited; it showed {out[-2000:]!r}"
                out += chunk
        return out

    def type(self, keys: str) -> tuple[str, str]:
        """Type ``keys``; the command line the shell then holds, and what the terminal showed
        meanwhile (escape codes taken out)."""
        os.write(self.fd, keys.encode() + b"\x14")  # then Ctrl-T: print the line
        out = self.read_until(_LINE)
        found = _LINE.findall(out)
        screen = _ANSI.sub(b"", out).replace(b"\r", b"").replace(b"\x07", b"")
        return found[-1].decode(), screen.decode(errors="replace")

    def line(self, keys: str) -> str:
        """Type ``keys`` after clearing the line (Ctrl-U); the command line then."""
        return self.type("\x15" + keys)[0]


@contextmanager
def terminal(shell: str, home: Path, env: dict[str, str], cwd: Path) -> Iterator[Terminal]:
    """An interactive ``shell`` with lakectl's completion loaded, ready for keys."""
    require(shell)
    argv, env = install(shell, home, env)
    controller, child = os.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
    proc = subprocess.Popen(
        argv,
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),  # fish needs its terminal
    )
    os.close(child)
    try:
        term = Terminal(shell, proc, controller)
        term.read_until(re.compile(re.escape(_READY)))
        yield term
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        os.close(controller)
