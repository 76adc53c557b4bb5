"""The file-system monitor of a working copy: a daemon that tells ``status`` which paths changed.

Without it, a status stats every file (about 2 µs of kernel time each here, and Python's work
around it: 0.3-0.45 s at 100k files). With ``lakectl local monitor start``, a daemon keeps an
inotify watch on every directory of the working copy and numbers each change it sees; the index
stores the number it was scanned at (its *token*), and a scan stats only the paths changed since
(docs/decisions/0012-local-monitor.md). This is git's ``core.fsmonitor``, built into lakectl.

The answer to a query is complete: before answering, the daemon creates a *cookie* file under
``.lakectl/`` and waits until the cookie's own event comes out of the inotify queue; the kernel
queues events in order, so every change made before the query was sent is counted by then. When
the daemon cannot vouch for a token (another daemon's, a queue overflow, a watch it could not
add), it answers ``full`` and the scan walks everything, as without a daemon.

Linux only (inotify). Not seen: writes through a hard link from outside the tree, and changes
made by other machines to a network file system.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from lakectl.client.workcopy.index import META_DIR
from lakectl.errors import PreconditionFailed

__all__ = ["Changes", "info", "query", "start", "stop"]

SOCKET = "monitor.sock"
LOG = "monitor.log"
WANTED = "monitor.wanted"
_COOKIE = "monitor-cookie-"
QUERY_TIMEOUT = 2.0
"""Seconds a scan waits for the daemon's answer before walking the tree itself."""
MAX_CHANGED = 1_000_000
"""Paths remembered; beyond, the daemon forgets them and the next scan walks everything."""

# inotify(7)
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_DONT_FOLLOW = 0x2000000
IN_EXCL_UNLINK = 0x4000000
IN_ISDIR = 0x40000000
_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
_EVENT = struct.Struct("iIII")


@dataclass(slots=True)
class Changes:
    """A daemon's answer: the token to store with the index, and what changed since the token
    asked about: ``full`` (walk everything), or the files and directories (walk each) touched."""

    token: str
    full: bool
    files: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)


# -- the client side ------------------------------------------------------------------------


def _connect(root: str, timeout: float) -> socket.socket | None:
    """A connection to the daemon of ``root``; None when none runs. The socket is reached
    through a descriptor of its directory: a socket's path is limited to 107 bytes."""
    try:
        fd = os.open(os.path.join(root, META_DIR), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(f"/proc/self/fd/{fd}/{SOCKET}")
    except OSError:
        s.close()
        return None
    finally:
        os.close(fd)
    return s


def _ask(root: str, request: dict[str, Any], timeout: float = QUERY_TIMEOUT) -> dict[str, Any] | None:
    s = _connect(root, timeout)
    if s is None:
        return None
    try:
        with s:
            s.sendall(json.dumps(request).encode() + b"\n")
            chunks = []
            while chunk := s.recv(1 << 20):
                chunks.append(chunk)
        answer: dict[str, Any] = json.loads(b"".join(chunks))
        return answer
    except (OSError, ValueError):
        return None


def query(root: str, since: str) -> Changes | None:
    """What changed under ``root`` since the token ``since`` ("" for none: ``full``); None when
    no daemon answers in :data:`QUERY_TIMEOUT` (the scan then walks everything)."""
    if not os.path.exists(os.path.join(root, META_DIR, SOCKET)):
        return None
    answer = _ask(root, {"op": "query", "since": since})
    if answer is None or "token" not in answer:
        return None
    return Changes(answer["token"], answer["full"], answer.get("files", []), answer.get("dirs", []))


def info(root: str) -> dict[str, Any] | None:
    """The running daemon's pid, token, watched directories and health; None when none runs."""
    return _ask(root, {"op": "info"})


def wanted(root: str) -> bool:
    """Whether ``local monitor start`` was run here and not stopped since: a scan that finds
    no daemon then starts one (after a reboot, or a crash), as git does with
    ``core.fsmonitor``."""
    return os.path.exists(os.path.join(root, META_DIR, WANTED))


def spawn(root: str) -> Any:
    """Start a daemon for ``root``, detached in its own session, without waiting for it (its
    ``subprocess.Popen``). A second daemon finding the first one answering exits."""
    import subprocess

    meta = os.path.join(root, META_DIR)
    os.makedirs(meta, exist_ok=True)
    with open(os.path.join(meta, LOG), "ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from lakectl.client.workcopy.monitor import run; run(sys.argv[1])",
                root,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )


def start(root: str, wait: float = 30.0) -> dict[str, Any]:
    """Start the daemon of ``root`` and keep it wanted (:func:`wanted`); its info once it
    answers. A daemon already running is left as it is."""
    if not sys.platform.startswith("linux"):
        raise PreconditionFailed("the monitor needs Linux (inotify)")
    meta = os.path.join(root, META_DIR)
    os.makedirs(meta, exist_ok=True)
    with open(os.path.join(meta, WANTED), "w") as f:
        f.write("local monitor start: a scan that finds no monitor starts one\n")
    running = info(root)
    if running is not None:
        return {**running, "started": False}
    proc = spawn(root)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        running = info(root)
        if running is not None:
            return {**running, "started": True}
        if proc.poll() is not None:
            raise PreconditionFailed(
                f"the monitor exited at start (exit {proc.returncode}): see {os.path.join(meta, LOG)}"
            )
        time.sleep(0.02)
    proc.kill()
    raise PreconditionFailed(f"the monitor did not answer within {wait:.0f} s: see {os.path.join(meta, LOG)}")


def stop(root: str) -> bool:
    """Stop the daemon of ``root`` (no longer wanted); False when none ran."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(root, META_DIR, WANTED))
    answer = _ask(root, {"op": "stop"})
    if answer is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(root, META_DIR, SOCKET))
        return False
    pid = answer.get("pid", 0)
    deadline = time.monotonic() + 10
    while pid and time.monotonic() < deadline:  # gone once its pid is (it may be our child)
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
        except ChildProcessError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
        time.sleep(0.01)
    return True


# -- the daemon -----------------------------------------------------------------------------


class _Daemon:
    """The watches and the numbered changes. One thread reads events; one thread a client
    answers each query, after its cookie came out of the queue."""

    def __init__(self, root: str) -> None:
        import ctypes  # the daemon's alone: a status imports this module too
        import secrets

        self.get_errno = ctypes.get_errno
        self.root = os.path.realpath(root)
        self.id = secrets.token_hex(8)
        self.seq = 0
        self.lost = 0
        """Tokens below this ask about changes the daemon lost (overflow, a missing watch)."""
        self.changed: dict[str, int] = {}
        """Path (a directory's with a trailing ``/``) -> number of its last change."""
        self.dirs: dict[int, str] = {}
        """Watch descriptor -> its directory, relative, ``""`` or ending with ``/``."""
        self.degraded = ""
        self.cookies: set[int] = set()
        self.next_cookie = 0
        self.cond = threading.Condition()
        self.stopping = False
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(self.get_errno(), "inotify_init1: " + os.strerror(self.get_errno()))
        self.root_wd = -1
        self.socket_ino = -1

    # watches

    def _add(self, rel: str) -> int:
        wd: int = self.libc.inotify_add_watch(self.fd, os.fsencode(os.path.join(self.root, rel)), _MASK)
        if wd < 0:
            err = self.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR):
                return -1  # gone meanwhile: its parent's event says so
            self.degraded = f"cannot watch {rel or '.'}: {os.strerror(err)}"
            self.lost = self.seq + 1  # every token asks about more than the daemon knows
            return -1
        self.dirs[wd] = rel
        return wd

    def watch_tree(self, rel: str) -> None:
        """Watch ``rel`` and every directory below (the meta directory itself, not below)."""
        stack = [rel]
        while stack:
            here = stack.pop()
            if self._add(here) < 0:
                continue
            if here == META_DIR + "/":
                continue
            try:
                with os.scandir(os.path.join(self.root, here)) as it:
                    for entry in it:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(here + entry.name + "/")
            except OSError:
                continue

    def unwatch_tree(self, rel: str) -> None:
        """Stop watching ``rel`` and below (moved away: its watches would report the old names)."""
        for wd, here in list(self.dirs.items()):
            if here.startswith(rel):
                del self.dirs[wd]
                self.libc.inotify_rm_watch(self.fd, wd)

    # events

    def note(self, path: str) -> None:
        self.seq += 1
        self.changed[path] = self.seq
        if len(self.changed) > MAX_CHANGED:
            self.changed.clear()
            self.lost = self.seq + 1

    def handle(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.seq += 1
            self.lost = self.seq + 1
            return
        base = self.dirs.get(wd)
        if mask & IN_IGNORED:
            self.dirs.pop(wd, None)
            if wd == self.root_wd:
                self.stopping = True
            return
        if base is None:
            return
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
            if wd == self.root_wd:
                self.stopping = True  # the working copy is gone: nothing left to watch
            return
        if base == META_DIR + "/":
            if name.startswith(_COOKIE) and mask & IN_CREATE:
                with contextlib.suppress(ValueError):
                    self.cookies.add(int(name[len(_COOKIE) :]))
            return
        rel = base + name
        if mask & IN_ISDIR:
            if not (mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)):
                return
            if mask & IN_MOVED_FROM:
                self.unwatch_tree(rel + "/")
            if mask & (IN_CREATE | IN_MOVED_TO) and not (base == "" and name == META_DIR):
                self.watch_tree(rel + "/")
            self.note(rel + "/")
        else:
            self.note(rel)

    def read_events(self) -> None:
        try:
            self._read_events()
        finally:  # a reader that failed must not leave questions waiting for cookies: go
            self.shutdown()

    def _read_events(self) -> None:
        while not self.stopping:
            try:
                data = os.read(self.fd, 1 << 16)
            except InterruptedError:
                continue
            with self.cond:
                offset = 0
                while offset + _EVENT.size <= len(data):
                    wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                    raw = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                    offset += _EVENT.size + length
                    self.handle(wd, mask, os.fsdecode(raw))
                self.cond.notify_all()

    # queries

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "stop":  # the caller exits once the answer is sent, not before
            return {"pid": os.getpid()}
        if op == "info":
            with self.cond:
                return {
                    "pid": os.getpid(),
                    "root": self.root,
                    "token": f"{self.id}:{self.seq}",
                    "watched_directories": len(self.dirs),
                    "changed_paths": len(self.changed),
                    "degraded": self.degraded,
                }
        if op != "query":
            return {"error": f"unknown operation {op!r}"}
        with self.cond:
            n = self.next_cookie
            self.next_cookie += 1
        cookie = os.path.join(self.root, META_DIR, f"{_COOKIE}{n}")
        fd = os.open(cookie, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        os.close(fd)
        try:
            with self.cond:
                if not self.cond.wait_for(lambda: n in self.cookies or self.stopping, QUERY_TIMEOUT):
                    return {"error": "the event queue did not reach the query's cookie"}
                self.cookies.discard(n)
                return self.changes_since(str(request.get("since", "")))
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(cookie)

    def changes_since(self, since: str) -> dict[str, Any]:
        token = f"{self.id}:{self.seq}"
        mine, _, number = since.partition(":")
        if mine != self.id or not number.isdigit() or int(number) < self.lost or self.degraded:
            return {"token": token, "full": True}
        after = int(number)
        files: list[str] = []
        dirs: list[str] = []
        for path, seq in self.changed.items():
            if seq > after:
                (dirs if path.endswith("/") else files).append(path)
        return {"token": token, "full": False, "files": files, "dirs": dirs}

    def serve(self, server: socket.socket) -> None:
        server.settimeout(1.0)
        while not self.stopping:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                if not self.owns_socket():
                    self.stopping = True  # removed (or taken over): nobody can ask any more
                continue
            threading.Thread(target=self.client, args=(conn,), daemon=True).start()

    def client(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(QUERY_TIMEOUT)
            try:
                line = b""
                while not line.endswith(b"\n"):
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        return
                    line += chunk
                request = json.loads(line)
                if not isinstance(request, dict):
                    return
                out = self.answer(request)
                conn.sendall(json.dumps(out).encode())
            except (OSError, ValueError):
                return
        if request.get("op") == "stop":
            self.shutdown()

    def owns_socket(self) -> bool:
        try:
            return os.stat(os.path.join(self.root, META_DIR, SOCKET)).st_ino == self.socket_ino
        except OSError:
            return False

    def shutdown(self) -> None:
        if self.owns_socket():
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.root, META_DIR, SOCKET))
        os._exit(0)


def run(root: str) -> None:
    """The daemon's life: watch the tree, listen, answer until stopped or the tree is gone."""
    daemon = _Daemon(root)
    daemon.watch_tree("")
    daemon.root_wd = next((wd for wd, rel in daemon.dirs.items() if rel == ""), -1)
    if daemon.root_wd < 0:
        raise PreconditionFailed(f"cannot watch {daemon.root}: {daemon.degraded}")
    meta_fd = os.open(os.path.join(daemon.root, META_DIR), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    address = f"/proc/self/fd/{meta_fd}/{SOCKET}"
    os.umask(0o077)  # the socket answers with paths: its owner's alone
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(address)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        if _ask(daemon.root, {"op": "info"}) is not None:
            os._exit(0)  # another daemon answers for this directory
        os.unlink(address)  # a dead daemon's
        server.bind(address)
    daemon.socket_ino = os.stat(address).st_ino
    server.listen(64)
    threading.Thread(target=daemon.read_events, daemon=True).start()
    daemon.serve(server)
    daemon.shutdown()
