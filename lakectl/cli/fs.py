"""``lakectl fs``: objects on a ref — upload, download, cat, stat, ls, rm."""

from __future__ import annotations

import contextlib
import fcntl
import io
import itertools
import os
import stat as stat_
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from stat import S_ISREG
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO, NoReturn

import typer

from lakectl.cli import render
from lakectl.cli.common import After, Amount, JsonFlag, backend, local_error, more, noun, paged, path_uri
from lakectl.errors import InvalidArgument, ObjectNotFound

if TYPE_CHECKING:
    from lakectl.client import Backend
    from lakectl.core.blocks.directio import SourceFile
    from lakectl.core.model import ObjectInfo

app = noun("Upload, download, list, inspect and remove objects.")

Recursive = Annotated[bool, typer.Option("--recursive", "-r", help="Every object under the path (a prefix).")]
Quiet = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="No progress bar, no summary and no line per object (errors, warnings and --json stay).",
    ),
]
NoProgress = Annotated[bool, typer.Option("--no-progress", help="No progress bar (as lakeFS's lakectl).")]
Append = Annotated[
    bool,
    typer.Option(
        "--append",
        help="Add the bytes to the end of the object (created if missing), as new blocks: its "
        "content type and metadata stay.",
    ),
]
Strict = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="With -r: refuse a directory holding FIFOs, sockets, devices or dangling symbolic "
        "links (default: skip them with a warning).",
    ),
]
Since = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Only the bytes appended to the object after this ref's commit up to the ref's (an "
        "ancestor of it; after a delete or overwrite between them: what was written since).",
        show_default=False,
    ),
]
Parallel = Annotated[
    int,
    typer.Option(
        "--parallelism",
        "--parallel",
        "-p",
        min=1,
        max=256,
        help="With -r: transfers at once, at most (as lakeFS's lakectl).",
    ),
]


class _Counted(io.RawIOBase):
    """A file read through, reporting ``(bytes read so far, size)`` to a progress callback; its
    blocks read side by side as the file's own are (``read_at``)."""

    def __init__(self, f: SourceFile, size: int, progress: Callable[[int, int], None]) -> None:
        self._f, self._size, self._progress, self._done = f, size, progress, 0
        self._lock = threading.Lock()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._count(self._f.readinto(buffer) or 0)

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size) or b""
        self._count(len(data))
        return data

    def read_at(self, buffer: Any, offset: int) -> int:
        return self._count(self._f.read_at(buffer, offset))

    def tell(self) -> int:
        return self._f.tell()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._f.seek(offset, whence)

    def _count(self, n: int) -> int:
        with self._lock:  # reads of several workers at once
            self._done += n
            self._progress(self._done, self._size)
        return n


def _as_dir(prefix: str) -> str:
    """A prefix naming a directory: ``a`` becomes ``a/`` so that ``ab`` is not under it."""
    return prefix if not prefix or prefix.endswith("/") else prefix + "/"


def _local_files(root: str, prefix: str, strict: bool = False) -> list[tuple[str, str]]:
    """``(path in the lake, local path)`` for every regular file under ``root``, in path order.

    Anything else among the names (a FIFO, a socket, a device, a dangling symlink) is skipped
    with a warning: reading a FIFO would wait for a writer forever. With ``strict`` it is an
    error instead, and nothing is uploaded. Symbolic links to directories are not followed (as
    ``os.walk``). The directory listing says which names are regular files, so only the others
    (symbolic links, odd types) cost a ``stat``: at 100k files, the walk was mostly stats."""
    out: list[tuple[str, str]] = []
    odd: list[tuple[str, str]] = []  # neither a regular file nor a directory, when listed
    pending = [(root, prefix)]
    while pending:
        directory, under = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError as exc:
            _raise(exc, directory)
        for entry in entries:
            try:
                if entry.is_file():
                    out.append((under + entry.name, entry.path))
                elif entry.is_dir():
                    if not entry.is_symlink():
                        pending.append((entry.path, under + entry.name + "/"))
                else:
                    odd.append((under + entry.name, entry.path))
            except OSError:  # a symbolic link loop, a denied stat: said by _not_regular below
                odd.append((under + entry.name, entry.path))
    for path, local in sorted(odd):
        kind = _not_regular(local)
        if kind is None:  # became a regular file since it was listed
            out.append((path, local))
        elif strict:
            raise InvalidArgument(f"{local!r} is {kind}, not a regular file; nothing uploaded")
        else:
            render.note(f"warning: skipped {local!r}: {kind}, not a regular file")
    out.sort()
    return out


def _not_regular(path: str) -> str | None:
    """What ``path`` is when it is not a regular file (following symlinks), else None."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a dangling symbolic link"
    except OSError as exc:
        raise local_error(exc, path, "read") from exc
    if stat_.S_ISREG(mode):
        return None
    if stat_.S_ISFIFO(mode):
        return "a FIFO"
    if stat_.S_ISSOCK(mode):
        return "a socket"
    if stat_.S_ISCHR(mode) or stat_.S_ISBLK(mode):
        return "a device"
    return "not a file"


def _raise(exc: OSError, path: str) -> NoReturn:
    raise local_error(exc, exc.filename or path, "read") from exc


Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Also a line per object uploaded (with one file: its stat), before the summary.",
    ),
]


@app.command("upload")
def upload(
    dest: Annotated[
        str,
        typer.Argument(help="lakefs://<repository>/<branch>/<path> (a prefix with -r)", show_default=False),
    ],
    source: Annotated[
        str,
        typer.Option(
            "--source", "-s", help="Local file, directory (with -r), or - for stdin.", show_default=False
        ),
    ],
    recursive: Recursive = False,
    content_type: Annotated[
        str | None,
        typer.Option(
            "--content-type",
            help="MIME type to record for every object uploaded (default: each one's guessed from its "
            "name: text/csv, application/vnd.apache.parquet, application/json...; "
            "application/octet-stream when the name says nothing).",
            show_default=False,
        ),
    ] = None,
    append: Append = False,
    strict: Strict = False,
    parallel: Parallel = 25,
    verbose: Verbose = False,
    quiet: Quiet = False,
    no_progress: NoProgress = False,
    json_: JsonFlag = False,
) -> None:
    """Upload a local file, a directory (-r) or stdin (--source -) to a branch, staged.

    A destination ending in / gets the file's name appended. With -r, every regular file under
    the directory is uploaded under the destination prefix, as one staged batch; FIFOs, sockets,
    devices and dangling symbolic links are skipped with a warning (refused with --strict). Each
    object's content type is guessed from its name unless --content-type says it. Prints one
    line: the objects, their bytes, how many of those bytes were new (not stored already: the
    rest deduplicated) and the time taken; -v adds a line per object. A progress bar shows on a
    terminal: files done out of all and the rate (for one large file: its bytes). With --append,
    the bytes go to the end of one object: concurrent appends to it all land, each whole, in
    some order.
    """
    if append and (recursive or content_type is not None):
        raise InvalidArgument(
            "--append adds to one object and keeps its content type: not with -r or --content-type"
        )
    bar = not (json_ or quiet or no_progress)
    uri = path_uri(dest, required=not recursive)
    assert uri.ref is not None
    b = backend()
    sending = _Sending(b, uri.repo, uri.ref, content_type, append)
    if source == "-":
        if not uri.path or uri.path.endswith("/"):
            raise InvalidArgument("uploading stdin needs a full object path, not a prefix")
        info = sending.one(uri.path, typer.get_binary_stream("stdin"))
    elif os.path.isdir(source):
        if not recursive:
            raise InvalidArgument(f"{source!r} is a directory: use --recursive to upload what is in it")
        files = _local_files(source, _as_dir(uri.path), strict)
        infos = sending.many(files, source, bar, parallel)
        if json_:
            render.print_json([i.to_dict() for i in infos])
        elif not quiet:
            if verbose:
                _uploaded(infos)
            render.line(sending.summary(infos, _as_dir(uri.path)))
        return
    else:
        path = uri.path + os.path.basename(source) if not uri.path or uri.path.endswith("/") else uri.path
        info = _upload_file(sending, path, source, bar)
    if json_ or append:  # an append says what the object now is, as before
        render.emit(info.to_dict(), json_, _quietly if quiet else render.stat)
    elif not quiet:
        if verbose:
            render.stat(info.to_dict())
        render.line(sending.summary([info], info.path))


class _Sending:
    """One ``fs upload``: the backend calls, timed, with the blocks they stored that were new."""

    def __init__(self, b: Backend, repo: str, branch: str, content_type: str | None, append: bool) -> None:
        self.b, self.repo, self.branch = b, repo, branch
        self.content_type, self.append = content_type, append
        self.started = time.monotonic()
        # Keyed by locator: a block told twice (two puts of it that raced) counts once. Told from
        # several threads: one dict item set is atomic.
        self.new_blocks: dict[str, int] = {}

    def one(self, path: str, stream: BinaryIO) -> ObjectInfo:
        """Upload the stream's bytes as the object at ``path``, or with ``append`` add them to it."""
        if self.append:
            return self.b.append(self.repo, self.branch, path, stream)
        told = self.new_blocks.__setitem__
        return self.b.upload(self.repo, self.branch, path, stream, self.content_type, new_blocks=told)

    def many(self, files: list[tuple[str, str]], source: str, bar: bool, parallel: int) -> list[ObjectInfo]:
        """Upload a directory's files ``(path in the lake, local path)`` as one staged batch,
        ``parallel`` requests at once at most (a server's)."""
        told = self.new_blocks.__setitem__
        with render.progress(len(files), "uploading", bar) as advance:
            try:
                return self.b.upload_files(
                    self.repo, self.branch, files, self.content_type, advance, told, parallel
                )
            except OSError as exc:  # a local file vanished or is unreadable (the lake raises ours)
                raise local_error(exc, exc.filename or source, "read") from exc

    def summary(self, infos: list[ObjectInfo], where: str) -> str:
        """``uploaded 2,000 objects (327.1 MiB, 12.4 MiB new) to lakefs://r/b/p/ in 3.2s``: the
        objects' bytes, and those of the blocks the lake did not hold before (the rest were
        stored already: deduplicated)."""
        n = len(infos)
        size = sum(i.entry.size for i in infos if i.entry is not None)
        new = sum(self.new_blocks.values())
        objects = f"{n:,} object" + ("" if n == 1 else "s")
        took = render.duration(time.monotonic() - self.started)
        target = f"lakefs://{self.repo}/{self.branch}/{where}"
        return f"uploaded {objects} ({render.size(size)}, {render.size(new)} new) to {target} in {took}"


def _upload_file(sending: _Sending, path: str, source: str, bar: bool) -> ObjectInfo:
    """Upload the local file ``source`` as ``path``, with a progress bar of its bytes."""
    from lakectl.core.blocks import directio

    try:
        f = directio.SourceFile(source)  # large reads around the page cache, where it allows
    except OSError as exc:
        raise local_error(exc, source, "read") from exc
    with f, render.progress_bytes(f"uploading {os.path.basename(source)}", bar) as progress:
        try:
            size = os.fstat(f.fileno()).st_size
            stream = _Counted(f, size, progress) if bar else f
            return sending.one(path, stream)  # type: ignore[arg-type]
        except OSError as exc:
            raise local_error(exc, source, "read") from exc


def _quietly(data: object) -> None:
    """The human rendering under --quiet: nothing."""


def _uploaded(infos: list[ObjectInfo]) -> None:
    """A line per object (-v), from the records themselves: at 100k objects, building each
    one's JSON dict to print two of its fields cost more than the printing."""
    sizes = [i.entry.size if i.entry is not None else 0 for i in infos]
    render.lines(f"uploaded {i.path} ({render.size(n)})" for i, n in zip(infos, sizes, strict=True))


def _write_file(
    chunks: Iterable[bytes], target: str, progress: Callable[[int, int], None] | None = None, size: int = 0
) -> None:
    """Write atomically: a temporary file next to ``target``, renamed over it when complete.

    A file of ``size`` >= ``directio.DIRECT_MIN`` bytes is written around the page cache where
    the filesystem allows it: the copy costs a fraction of the CPU, which verifying the next
    blocks needs (docs/decisions/0015). Neither way is durable, as a ``cp`` is not."""
    from lakectl.core.blocks import directio

    directory = os.path.dirname(target) or "."
    tmp = os.path.join(directory, f".{os.path.basename(target)}.lakectl-{os.getpid()}")
    try:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            writer = directio.Writer(fd, size >= directio.DIRECT_MIN and directio.enable(fd))
            try:
                done = 0
                for chunk in chunks:
                    writer.write(chunk)
                    if progress is not None:
                        done += len(chunk)
                        progress(done, size)
            except BaseException:
                writer.release()
                raise
            writer.close()
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        raise local_error(exc, target, "write") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@app.command("download")
def download(
    src: Annotated[
        str,
        typer.Argument(help="lakefs://<repository>/<ref>/<path> (a prefix with -r)", show_default=False),
    ],
    dest: Annotated[
        str | None,
        typer.Argument(
            help="Local file or directory; - for stdout. Default: the object's name (with -r: .)",
            show_default=False,
        ),
    ] = None,
    recursive: Recursive = False,
    parallel: Parallel = 4,
    since: Since = None,
    quiet: Quiet = False,
    no_progress: NoProgress = False,
    json_: JsonFlag = False,
) -> None:
    """Download an object, or (-r) every object under a prefix into a local directory.

    Each file is written under a temporary name and renamed when complete. A progress bar shows
    on a terminal, for one large file too. With --since FROM, only what the commits after FROM
    up to the ref appended to the object (as fs cat --since).
    """
    uri = path_uri(src, required=not recursive)
    assert uri.ref is not None
    b = backend()
    bar = not (json_ or quiet or no_progress)
    say = _quietly if quiet else None
    if since is not None and recursive:
        raise InvalidArgument("--since reads one object: not with -r")
    if not recursive:
        if dest == "-":
            _to_stdout(_read(b, uri.repo, uri.ref, uri.path, since))
            return
        done = [_download_one(b, uri.repo, uri.ref, uri.path, dest, since, bar)]
        render.emit(done, json_, say or _downloaded)
        return
    if dest == "-":
        raise InvalidArgument("--recursive downloads into a directory, not to stdout")
    prefix = _as_dir(uri.path)
    root = dest or "."
    ref = uri.ref  # str, as asserted above: the narrowing of an attribute does not reach fetch()
    objects = [o for o in b.list_objects(uri.repo, ref, prefix) if not o.path.endswith("/")]
    with render.progress(len(objects), "downloading", bar) as advance:

        def fetch(o: ObjectInfo) -> dict[str, object]:
            target = os.path.join(root, *o.path[len(prefix) :].split("/"))
            _write_file(
                b.read(uri.repo, ref, o.path, mapped=True), target, size=o.entry.size if o.entry else 0
            )
            advance(1)
            return {"path": o.path, "local_path": target, "size_bytes": o.entry.size if o.entry else 0}

        # Backends are safe to share between threads (the server shares one lake the same way);
        # map keeps the listing's order, and the first failure ends the command.
        with ThreadPoolExecutor(max_workers=min(parallel, max(1, len(objects)))) as pool:
            out = list(pool.map(fetch, objects))
    render.emit(out, json_, say or _downloaded)


def _download_one(
    b: Backend, repo: str, ref: str, path: str, dest: str | None, since: str | None, bar: bool
) -> dict[str, object]:
    """Download one object (with ``since``, what was appended to it) to ``dest``: a file, a
    directory to put it in under its name, or by default its name here."""
    name = path.rsplit("/", 1)[-1]
    target = dest or name
    if os.path.isdir(target):
        target = os.path.join(target, name)
    if since is not None:  # as many bytes as were appended: no size to show progress against
        _write_file(b.read_since(repo, since, ref, path), target)
        return {"path": path, "local_path": target, "size_bytes": os.path.getsize(target)}
    info = b.stat(repo, ref, path)
    size = info.entry.size if info.entry else 0
    with render.progress_bytes(f"downloading {name}", bar) as progress:
        _write_file(b.read(repo, ref, path, mapped=True), target, progress, size)
    return {"path": info.path, "local_path": target, "size_bytes": size}


def _downloaded(data: list[dict[str, object]]) -> None:
    for o in data:
        render.line(f"downloaded {o['path']} -> {o['local_path']}")
    if len(data) != 1:
        render.note(f"{len(data)} object(s) downloaded")


def _to_stdout(chunks: Iterable[bytes]) -> None:
    """Write the bytes as they come: each chunk is a block (or part of one) already verified.

    When stdout is a regular file (``> file``, ``>> file``) and the read fails midway, the file
    is cut back to where this command began writing, so that no partial object is left that
    looks like a whole one; a pipe or a terminal cannot be taken back, the exit code tells.
    """
    out = typer.get_binary_stream("stdout")
    start = _file_offset(out)
    try:
        for chunk in chunks:
            out.write(chunk)
        out.flush()
    except BaseException:
        if start is not None:
            _cut_back(out, start)
        raise


def _file_offset(out: BinaryIO) -> int | None:
    """Where writes to ``out`` land next if it is a regular file (its end when opened to
    append); None for anything else."""
    try:
        fd = out.fileno()
        info = os.fstat(fd)
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None  # not backed by a file descriptor (a test runner's buffer)
    if not S_ISREG(info.st_mode):
        return None
    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND:
        return info.st_size
    return out.tell()


def _cut_back(out: BinaryIO, start: int) -> None:
    """Drop what was written from ``start`` on: flushed first, so no buffered byte lands later."""
    with contextlib.suppress(OSError):  # e.g. a full disk: truncating still frees what was written
        out.flush()
    with contextlib.suppress(OSError):  # must not hide the read's error
        os.ftruncate(out.fileno(), start)
        out.seek(start)


@app.command("cat")
def cat(
    src: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>/<path>", show_default=False)],
    since: Since = None,
    json_: JsonFlag = False,
) -> None:
    """Write an object's bytes to stdout (with --json only errors change: they are JSON).

    With --since FROM, only what the commits after FROM up to the ref appended to it: PFS's
    read over a commit range (FROM must be an ancestor of the ref, exit 2 otherwise).
    """
    uri = path_uri(src)
    assert uri.ref is not None
    _to_stdout(_read(backend(), uri.repo, uri.ref, uri.path, since))


def _read(b: Backend, repo: str, ref: str, path: str, since: str | None) -> Iterable[bytes]:
    """The object's bytes, or with ``since`` those appended after that ref's commit."""
    return b.read(repo, ref, path) if since is None else b.read_since(repo, since, ref, path)


@app.command("stat")
def stat(
    src: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>/<path>", show_default=False)],
    json_: JsonFlag = False,
) -> None:
    """Show an object's size, checksum, content type, modification time and metadata."""
    uri = path_uri(src)
    assert uri.ref is not None
    render.emit(backend().stat(uri.repo, uri.ref, uri.path).to_dict(), json_, render.stat)


@app.command("presign")
def presign(
    src: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>/<path>", show_default=False)],
    expiry: Annotated[
        int,
        typer.Option(
            "--expiry", help="Seconds the URL stays valid (at most 7 days).", min=1, max=7 * 24 * 3600
        ),
    ] = 15 * 60,
    json_: JsonFlag = False,
) -> None:
    """Print a presigned URL: any HTTP client may GET the object through it until it expires.

    The URL serves the object as it is now, even once the branch moves on. Only a lakectl server
    signs URLs (it serves them): the embedded lake has none to hand out (exit 2). With --json:
    {path, presigned_url, presigned_url_expiry}.
    """
    uri = path_uri(src)
    assert uri.ref is not None
    url, expires = backend().presign(uri.repo, uri.ref, uri.path, expiry)
    out = {"path": uri.path, "presigned_url": url, "presigned_url_expiry": expires}
    render.emit(out, json_, lambda d: render.line(d["presigned_url"]))


@app.command("ls")
def ls(
    src: Annotated[str, typer.Argument(help="lakefs://<repository>/<ref>/[<prefix>]", show_default=False)],
    recursive: Annotated[
        bool, typer.Option("--recursive", "-r", help="List every object under the prefix, not one level.")
    ] = False,
    amount: Amount = 0,
    after: After = "",
    json_: JsonFlag = False,
) -> None:
    """List the objects and common prefixes ("directories") under a prefix.

    The prefix names a directory: lakefs://repo/main/a lists what is under a/. When an object
    is named a, it is listed first, as lakeFS lists an object's own path. --after takes a full
    path (the last one of the page before).
    """
    uri = path_uri(src, required=False)
    repo, ref = uri.repo, uri.ref
    assert ref is not None
    b = backend()
    prefix, delimiter = _as_dir(uri.path), "" if recursive else "/"
    own: list[ObjectInfo] = []
    # The object's own path sorts before everything under path/: it leads the first page.
    if uri.path and not uri.path.endswith("/") and uri.path > after:
        with contextlib.suppress(ObjectNotFound):
            own = [b.stat(repo, ref, uri.path)]
    found, next_offset = paged(
        lambda n: itertools.chain(own, b.list_objects(repo, ref, prefix, delimiter, after, n)),
        amount,
        lambda o: o.path,
    )
    render.emit([o.to_dict() for o in found], json_, render.objects)
    more(amount, next_offset)


@app.command("rm")
def rm(
    target: Annotated[
        str,
        typer.Argument(help="lakefs://<repository>/<branch>/<path> (a prefix with -r)", show_default=False),
    ],
    recursive: Recursive = False,
    json_: JsonFlag = False,
) -> None:
    """Delete an object, or (-r) every object under a prefix, from a branch (staged)."""
    uri = path_uri(target, required=not recursive)
    assert uri.ref is not None
    b = backend()
    if recursive:
        prefix = _as_dir(uri.path)
        deleted = b.delete_prefix(uri.repo, uri.ref, prefix)
        if not deleted:
            raise ObjectNotFound(f"no objects under {prefix!r} on branch {uri.ref!r}")
    else:
        b.delete_objects(uri.repo, uri.ref, [uri.path])
        deleted = [uri.path]
    text = f"Deleted {len(deleted)} object(s) from branch {uri.ref!r}"
    render.emit(render.deletion("object", deleted, text), json_, _deleted)


def _deleted(data: dict[str, Any]) -> None:
    for path in data["deleted"]:
        render.line(f"deleted {path}")
