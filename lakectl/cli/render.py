"""Output of the CLI: records as lakeFS-shaped JSON, and human renderings of that same JSON.

The only module of lakectl that imports rich, and only inside the functions that draw a table
or a progress bar: plain-text output (log, diff, messages) and JSON never load it, so the
common commands start fast.

Human output never prints a stored value raw: object paths, messages and metadata may come from
a lake written before lakectl refused control characters, or by another tool, and an ESC or a
bidi override in them would drive the terminal. Every line goes through :func:`_safe`, which
escapes them as Python does (``\x1b``, ``\u202e``). JSON output keeps the values as they are.

Colour, as git and lakeFS's lakectl colour: diff lines green, red and yellow by their mark, commit
ids yellow, ``error:`` red. Only on a terminal (each stream asked for itself), never with
``--no-color``, a non-empty ``NO_COLOR`` or ``TERM=dumb``; the codes go around text already
escaped, so a stored value never brings its own.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakectl.core.model import Branch, Repository, Tag
    from lakectl.errors import LakectlError

Data = dict[str, Any]


def _colors() -> dict[str, Any]:
    """rich's settings for ``--no-color``: no colour system at all, so not even bold."""
    from lakectl.cli import options

    return {} if options.color() else {"color_system": None, "no_color": True}


# -- records -> JSON (the lakeFS API's field names) -----------------------------------------


def repo_dict(r: Repository) -> Data:
    return {
        "id": r.name,
        "creation_date": r.creation_date,
        "default_branch": r.default_branch,
        "storage_namespace": r.storage_namespace,
    }


def ref_dict(ref: Branch | Tag) -> Data:
    """A branch or a tag as a lakeFS ``Ref``."""
    return {"id": ref.name, "commit_id": ref.commit_id}


# -- writing --------------------------------------------------------------------------------


def emit(data: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    """Print ``data`` as JSON, or hand it to its human renderer."""
    if as_json:
        print_json(data)
    else:
        human(data)


def print_json(data: Any) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a value stored before lakectl refused non-UTF-8 text
        text = json.dumps(data, indent=2, ensure_ascii=True)
    sys.stdout.write(text + "\n")


def _safe(text: str) -> str:
    """``text`` with every character that would act on a terminal escaped; tabs and line
    breaks stay (a carriage return does not: it would let a value overwrite what precedes it)."""
    from lakectl.core.limits import printable

    return printable(text.replace("\r", "\\r"), multiline=True)


GREEN, RED, YELLOW, BOLD_RED = "32", "31", "33", "1;31"
"""SGR codes of the styles used."""


def _colours(stream: Any) -> bool:
    """Whether to colour what goes to ``stream``: a terminal, with colour allowed."""
    import os

    from lakectl.cli import options

    if not options.color() or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _paint(text: str, style: str | None, stream: Any) -> str:
    """``text`` (already escaped) in ``style`` where ``stream`` takes colour."""
    return f"\x1b[{style}m{text}\x1b[0m" if style and text and _colours(stream) else text


def line(text: str = "", style: str | None = None) -> None:
    sys.stdout.write(_paint(_safe(text), style, sys.stdout) + "\n")


def parts(*pieces: tuple[str, str | None]) -> None:
    """One line of pieces, each ``(text, style)``: part of a line in colour."""
    sys.stdout.write("".join(_paint(_safe(t), s, sys.stdout) for t, s in pieces) + "\n")


def lines(texts: Iterable[str]) -> None:
    """:func:`line` of each text, in one write and one escape pass: per line, the write and the
    escaping cost more than the text (100k uploaded files: ~0.4 s against ~0.05 s). Joining
    first escapes the same characters, since the escaping looks at one character at a time."""
    every = list(texts)
    if every:
        sys.stdout.write(_safe("\n".join(every)) + "\n")


def note(text: str) -> None:
    """A remark for the person at the terminal, on stderr so that stdout stays data."""
    sys.stderr.write(_safe(text) + "\n")


def error(exc: LakectlError, as_json: bool) -> None:
    """Report an error: one line ``error: ...`` on stderr, or its JSON on stdout."""
    if as_json:
        print_json(exc.to_dict())
        return
    message = exc.message
    conflicts = exc.details.get("conflicts")
    if conflicts:
        shown = ", ".join(conflicts[:10])
        more = f" (and {len(conflicts) - 10} more)" if len(conflicts) > 10 else ""
        message = f"{message}: {shown}{more}"
    sys.stderr.write(f"{_paint('error:', BOLD_RED, sys.stderr)} {_safe(' '.join(message.splitlines()))}\n")


# -- human renderings -----------------------------------------------------------------------


def when(ts: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(ts))


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def duration(seconds: float) -> str:
    """``3.2s``; under a second ``120ms``, where a tenth of a second would say 0.0s."""
    return f"{seconds:.1f}s" if seconds >= 1 else f"{seconds * 1000:.0f}ms"


def fields(pairs: Iterable[tuple[str, Any]]) -> None:
    """Aligned ``Name: value`` lines."""
    items = list(pairs)
    width = max((len(k) for k, _ in items), default=0) + 1
    for key, value in items:
        line(f"{key + ':':<{width}} {value}")


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A borderless table; on a pipe it is as wide as its content, never folded."""
    cells = [[_safe(str(v)) for v in row] for row in rows]
    if _plain_table(columns, cells):
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    t = Table(*columns, box=None, pad_edge=False, header_style="bold")
    for row in cells:
        t.add_row(*(Text(v) for v in row))  # Text: a value is never rich markup
    console = Console(width=None if sys.stdout.isatty() else 1 << 16, highlight=False, **_colors())
    with console.capture() as captured:
        console.print(t, soft_wrap=False)
    for text in captured.get().splitlines():
        sys.stdout.write(text.rstrip() + "\n")  # already escaped, cell by cell


def _plain_table(columns: Sequence[str], cells: list[list[str]]) -> bool:
    """Write the table as rich would, without rich (~30 ms of start-up for ``branch list``), when
    that is simple: written to a pipe that rich would not style (so no bold header), and every
    header and cell plain ASCII without tabs or line breaks, one column of the terminal per
    character. Columns are then as wide as their widest value, two spaces apart, and lines lose
    their trailing spaces. False (nothing written) otherwise; a test holds it to rich's output."""
    if sys.stdout.isatty() or (_styled_pipe() and _colors() == {}):
        return False
    if any(len(row) != len(columns) for row in cells) or any("[" in c or ":" in c for c in columns):
        return False  # rows rich would pad, or a header it would read as markup or an emoji code
    texts = [*columns, *(v for row in cells for v in row)]
    if not all(t.isascii() and t.isprintable() for t in texts):
        return False
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    for row in [list(columns), *cells]:
        sys.stdout.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return True


def _styled_pipe() -> bool:
    """Whether rich would style output that is not a terminal: its ``TTY_COMPATIBLE=1``, or a
    non-empty ``FORCE_COLOR`` (https://force-color.org), unless ``TERM`` names a dumb terminal."""
    import os

    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        forced = compatible == "1"
    else:
        forced = bool(os.environ.get("FORCE_COLOR"))
    return forced and os.environ.get("TERM", "").lower() not in ("dumb", "unknown")


def repos(data: list[Data]) -> None:
    table(
        ("REPOSITORY", "CREATION DATE", "DEFAULT BRANCH", "STORAGE NAMESPACE"),
        ((r["id"], when(r["creation_date"]), r["default_branch"], r["storage_namespace"]) for r in data),
    )


def repo(data: Data) -> None:
    fields(
        [
            ("Repository", data["id"]),
            ("Default branch", data["default_branch"]),
            ("Storage namespace", data["storage_namespace"]),
            ("Created", when(data["creation_date"])),
        ]
    )


def refs(data: list[Data]) -> None:
    table(("NAME", "COMMIT ID"), ((r["id"], r["commit_id"]) for r in data))


def ref(data: Data) -> None:
    fields([("Name", data["id"]), ("Commit ID", data["commit_id"])])


def commit(data: Data, show_meta_range_id: bool = False, margins: Iterator[str] | None = None) -> None:
    """A commit as ``lakectl log`` shows it; each line after the next of ``margins``
    (``log --graph``'s drawing)."""
    import itertools

    m = margins if margins is not None else itertools.repeat("")
    parts((next(m) + "ID:            ", None), (data["id"], YELLOW))
    texts = [f"Author:        {data['committer']}"] if data["committer"] else []
    texts.append(f"Date:          {when(data['creation_date'])}")
    if show_meta_range_id:
        texts.append(f"Meta Range ID: {data['meta_range_id']}")
    if len(data["parents"]) > 1:
        texts.append(f"Merge:         {' '.join(p[:12] for p in data['parents'])}")
    texts.append("")
    texts += [f"    {text}" for text in data["message"].splitlines() or [""]]
    if data["metadata"]:
        texts.append("")
        texts += [f"    {key} = {value}" for key, value in sorted(data["metadata"].items())]
    for text in texts:
        line((next(m) + text).rstrip())


def commit_line(data: Data, margin: str = "") -> None:
    """A commit as ``lakectl log --oneline`` shows it: short id, first line of the message;
    ``margin`` before it (``log --graph``'s drawing)."""
    first = next(iter(data["message"].splitlines()), "")
    parts((margin, None), (data["id"][:12], YELLOW), (f" {first}".rstrip(), None))


def dot(commits: Iterable[Data]) -> None:
    """The commit graph in Graphviz dot, as ``lakectl log --dot`` draws it: one note per commit
    (its short id and message; a merge in bold), an edge from each parent, oldest at the bottom."""
    import html

    line("digraph {")
    line('\trankdir="BT"')
    for c in commits:
        message = "<br/>".join(html.escape(text) for text in c["message"].splitlines())
        label = f"{c['id'][:8]}<br/> {message}"
        if len(c["parents"]) > 1:
            label = f"<b>{label}</b>"
        line("")
        line(f'\t"{c["id"]}" [shape=note label=< {label} >]')
        for parent in c["parents"]:
            line(f'\t"{parent}" -> "{c["id"]}";')
    line("}")


def commit_full(data: Data, show_meta_range_id: bool = False) -> None:
    """A commit with what it records (``show commit``; the meta range ID on request, as lakeFS)."""
    commit(data)
    line("")
    pairs: list[tuple[str, Any]] = [("Parents", ", ".join(data["parents"]) or "(none)")]
    if show_meta_range_id:
        pairs.append(("Meta Range ID", data["meta_range_id"]))
    pairs.append(("Generation", data["generation"]))
    fields(pairs)


def commits(data: list[Data]) -> None:
    for i, c in enumerate(data):
        if i:
            line("")
        commit(c)


def stat(data: Data) -> None:
    pairs: list[tuple[str, Any]] = [
        ("Path", data["path"]),
        ("Modified Time", when(data["mtime"])),
        ("Size", f"{data['size_bytes']} bytes"),
        ("Human Size", size(data["size_bytes"])),
        ("Checksum", data["checksum"]),
        ("Content-Type", data["content_type"]),
    ]
    if data.get("physical_address"):
        pairs.insert(1, ("Physical Address", data["physical_address"]))
    pairs.extend((f"Metadata {k}", v) for k, v in sorted(data["metadata"].items()))
    fields(pairs)


def objects(data: list[Data]) -> None:
    """One line per object or common prefix, as ``lakectl fs ls``."""
    for o in data:
        if o["path_type"] == "common_prefix":
            line(f"{'common_prefix':<15}{'':<27}{'':>12}  {o['path']}")
        else:
            line(f"{'object':<15}{when(o['mtime']):<27}{size(o['size_bytes']):>12}  {o['path']}")


_DIFF_MARK = {"added": "+", "removed": "-", "changed": "~", "conflict": "!"}
_DIFF_STYLE = {"added": GREEN, "removed": RED, "changed": YELLOW, "conflict": BOLD_RED}


def changes(data: list[Data]) -> None:
    if not data:
        note("no changes")
    for c in data:
        line(f"{_DIFF_MARK[c['type']]} {c['path']}", _DIFF_STYLE.get(c["type"]))


def diff_stat(data: Data) -> None:
    """``lakectl diff --stat``: each changed path with its size (as it is now; a removed one as
    it was), then the counts, as git's --stat ends."""
    rows = data["changes"]
    width = max((len(c["path"]) for c in rows), default=0)
    for c in rows:
        line(
            f" {_DIFF_MARK[c['type']]} {c['path'].ljust(width)} | {size(c['size_bytes'])}",
            _DIFF_STYLE[c["type"]],
        )
    total = len(rows)
    counts = ", ".join(f"{data[k]} {k}" for k in ("added", "removed", "changed") if data[k])
    line(f"{total} {'object' if total == 1 else 'objects'} changed" + (f": {counts}" if counts else ""))


def table_diff(data: Data) -> None:
    """``lakectl diff --table``: the summary line, schema changes, partitions, then the rows."""
    line(data["summary"])
    if data.get("key_declared"):
        from lakectl.core.tables.declared import PATH as DECLARATIONS

        note(f"key {', '.join(data['key'])}: declared for the table in {DECLARATIONS}")
    for c in data["schema"]:
        was = f" (was {c['old_name']})" if c.get("old_name") else ""
        types = " → ".join(t for t in (c.get("old_type"), c.get("new_type")) if t)
        line(f"schema: {c['type']} {c['name']}{was} {types}".rstrip())
    if data.get("delta"):
        _delta_versions(data["delta"])
    if data["partitions"] and any(p["partition"] for p in data["partitions"]):
        table(
            ["Partition", "Rows left", "Rows right", "Added", "Removed", "Changed"],
            [
                [p["partition"], p["rows_left"], p["rows_right"], p["added"], p["removed"], p["changed"]]
                for p in data["partitions"]
            ],
        )
    marks = {"added": "+", "removed": "-", "changed": "~"}
    for r in data["rows"]:
        shown = r["key"] or (r["new"] if r["new"] is not None else r["old"])
        what = f" ({', '.join(r['columns'])})" if r["columns"] else ""
        copies = f" x{r['count']}" if r.get("count", 1) != 1 else ""
        text = f"{marks[r['type']]} {json.dumps(shown, sort_keys=True, ensure_ascii=False)}{what}{copies}"
        line(text, _DIFF_STYLE[r["type"]])
    if data["next_offset"]:
        note(f"more row changes: run again with --after '{data['next_offset']}'")


def _delta_versions(delta: Data) -> None:
    """A Delta table's versions since the merge base, each side's, and its properties changed."""
    base = delta["base_version"]
    for side in ("left", "right"):
        for v in delta[side]["versions"]:
            files = f"+{v['files_added']} \u2212{v['files_removed']} files"
            line(f"{side} v{v['version']}: {v['operation']} ({files})")
        hidden = delta[side]["count"] - len(delta[side]["versions"])
        if hidden > 0:
            note(f"{side}: {hidden:,} more version(s)")
    if base is not None:
        note(f"versions since v{base}, the merge base's last")
    for p in delta["properties"]:
        old, new = (p[k] if p[k] is not None else "-" for k in ("old", "new"))
        line(f"property: {p['key']}: {old} \u2192 {new}")


def message(data: Data) -> None:
    """Commands whose result is a sentence: the ``message`` field of their JSON."""
    line(data["message"])


def deletion(kind: str, deleted: list[str], text: str) -> dict[str, Any]:
    """The one JSON shape of every delete (docs/cli.md, "JSON output"): what kind of thing,
    the names or paths deleted, and the sentence a person is shown."""
    return {"type": kind, "deleted": deleted, "message": text}


# -- progress -------------------------------------------------------------------------------


@contextmanager
def progress(total: int, label: str, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A callback advancing a progress bar of ``total`` files: ``done/total``, the rate in files
    a second and the time left; a no-op unless ``enabled`` and stdout is a terminal (pipes and
    JSON output never see a bar)."""
    if not enabled or total < 2 or not sys.stdout.isatty():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _files_per_second(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True, console=Console(**_colors())) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def _files_per_second() -> Any:
    """A progress column of the rate, ``1,234 files/s``: rich's estimate over the last seconds,
    else (before two updates, as when a whole batch lands at once) the average since the start."""
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class FilesPerSecond(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            if speed is None and task.elapsed:
                speed = task.completed / task.elapsed
            shown = "" if speed is None else f"{speed:,.0f} files/s"
            return Text(shown, style="progress.data.speed")

    return FilesPerSecond()


@contextmanager
def progress_bytes(label: str, enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """A callback ``(bytes done, bytes in all)`` drawing a progress bar with the rate; a no-op
    unless ``enabled`` and stdout is a terminal (pipes and JSON output never see a bar)."""
    if not enabled or not sys.stdout.isatty():
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    with Progress(
        *Progress.get_default_columns(),
        DownloadColumn(),
        TransferSpeedColumn(),
        transient=True,
        console=Console(**_colors()),
    ) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@contextmanager
def progress_count(label: str, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A callback ``(objects done so far)`` drawing a bar of unknown total (an import's listing);
    a no-op unless ``enabled`` and stdout is a terminal."""
    if not enabled or not sys.stdout.isatty():
        yield lambda done: None
        return
    from rich.console import Console
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), MofNCompleteColumn())
    with Progress(*columns, transient=True, console=Console(**_colors())) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done: bar.update(task, completed=done)


def import_status(data: Data) -> None:
    """An import's status (lakeFS's lakectl prints its summary the same way)."""
    commit = data.get("commit") or {}
    if data.get("error"):
        state = f"failed: {data['error'].get('message', '')}"
    elif data.get("completed"):
        state = "completed"
    else:
        state = "running"
    fields(
        [
            ("Import", data.get("id", "")),
            ("State", state),
            ("Objects", data.get("ingested_objects", 0)),
            ("Branch", data.get("branch", "")),
            ("Import branch", data.get("import_branch", "")),
            ("Import commit", data.get("import_commit_id", "")),
            ("MetaRange ID", data.get("metarange_id", "")),
            ("Commit ID", commit.get("id", "")),
            ("Message", commit.get("message", "")),
        ]
    )


def json_line(data: Any) -> None:
    """One JSON document on one line, flushed (a stream of them: JSON lines)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=True) + "\n")
    sys.stdout.flush()


def journal(entries: list[Data]) -> None:
    for entry in entries:
        journal_line(entry)


def journal_line(entry: Data) -> None:
    """``<timestamp> <time> <client> <repository> <event> <what>``, flushed (``tail --follow``)."""
    payload = entry["event_payload"]
    keys = ("ref", "path", "branch", "tag", "source_ref", "commit_id", "range", "partition", "key")
    what = [f"{k}={payload[k]}" for k in keys if payload.get(k)]
    rows = payload.get("rows")
    if rows:
        what.append(f"paths={len(rows)}")
    stamp = when(int(entry["time"]) // 1_000_000)
    line(
        f"{entry['logical_timestamp']} {stamp} {entry['client_id']} {entry['repo_id']} {entry['event_type']} "
        + " ".join(what)
    )
    sys.stdout.flush()
