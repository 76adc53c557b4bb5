"""Keep manifest v1 text: parse it to per-file block segments, and format normalized manifests.

A manifest is zero or more lines (streams), each ``<stream name> <locator>... <pos:len:name>...``.
A stream's locators, concatenated in order, form its data; a file token names ``len`` bytes
at ``pos`` of that data. Several tokens with the same full path (in one stream or several)
concatenate. Names escape bytes as ``\\ooo`` octal (``\\040`` for a space).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lakectl.core.blocks.locator import EMPTY_LOCATOR, parse_locator
from lakectl.errors import InvalidLocator, InvalidManifest

__all__ = [
    "FileToken",
    "Manifest",
    "Segment",
    "Stream",
    "format_manifest",
    "normalize",
    "parse_manifest",
]

_NUMBER = re.compile(r"[0-9]{1,20}")
_OCTAL = re.compile(r"[0-3][0-7][0-7]")
# Raw characters a manifest line may not hold (they must be written as octal escapes).
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class Segment:
    """``length`` bytes at ``offset`` within the block ``locator``."""

    locator: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class FileToken:
    """One ``pos:len:name`` token: ``length`` bytes at ``position`` of its stream's data."""

    position: int
    length: int
    name: str  # unescaped; may contain "/" outside normalized manifests


@dataclass(frozen=True, slots=True)
class Stream:
    """One manifest line: its unescaped name (``.`` or ``./dir/sub``), blocks and file tokens."""

    name: str
    locators: tuple[str, ...]
    tokens: tuple[FileToken, ...]

    @property
    def size(self) -> int:
        """Length of the stream's data: the sum of its blocks' sizes."""
        return sum(_block_size(loc) for loc in self.locators)

    def path_of(self, token: FileToken) -> str:
        """The full path a token names: stream name without ``./`` joined with the file name."""
        prefix = self.name[2:]
        return f"{prefix}/{token.name}" if prefix else token.name

    def segments(self, token: FileToken) -> list[Segment]:
        """The per-block segments holding a token's bytes, zero-length pieces left out."""
        return _token_segments(self, _block_starts(self.locators), token)


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed manifest: its streams in text order."""

    streams: tuple[Stream, ...]

    def files(self) -> dict[str, list[Segment]]:
        """Full path -> the ordered segments of its bytes (adjacent pieces merged).

        Paths appear in order of first mention; an empty file maps to ``[]``.
        """
        out: dict[str, list[Segment]] = {}
        for stream in self.streams:
            starts = _block_starts(stream.locators)
            for token in stream.tokens:
                segs = out.setdefault(stream.path_of(token), [])
                _extend_merged(segs, _token_segments(stream, starts, token))
        return out


def _block_starts(locators: Sequence[str]) -> list[int]:
    """Where each block starts in the stream data, plus the total length at the end."""
    starts = [0]
    for loc in locators:
        starts.append(starts[-1] + _block_size(loc))
    return starts


def _token_segments(stream: Stream, starts: list[int], token: FileToken) -> list[Segment]:
    total = starts[-1]
    end = token.position + token.length
    if token.position < 0 or token.length < 0 or end > total:
        raise InvalidManifest(
            f"stream {stream.name!r}: file token {token.position}:{token.length} "
            f"is outside the stream's {total} bytes"
        )
    out: list[Segment] = []
    if token.length == 0:
        return out
    # The last block starting at or before the position (zero-size blocks are skipped below).
    i = bisect.bisect_right(starts, token.position, 0, len(stream.locators)) - 1
    pos = token.position
    while pos < end:
        block_end = starts[i + 1]
        if block_end > pos:
            take = min(block_end, end) - pos
            out.append(Segment(stream.locators[i], pos - starts[i], take))
            pos += take
        i += 1
    return out


def _block_size(locator: str) -> int:
    try:
        size = parse_locator(locator).size
    except InvalidLocator as exc:
        raise InvalidManifest(exc.message) from exc
    assert size is not None  # parse_locator requires a size by default
    return size


def _extend_merged(segs: list[Segment], new: Iterable[Segment]) -> None:
    """Append segments, dropping empty ones and joining contiguous ones of the same block."""
    for seg in new:
        if seg.length == 0:
            continue
        if segs:
            last = segs[-1]
            if last.locator == seg.locator and last.offset + last.length == seg.offset:
                segs[-1] = Segment(last.locator, last.offset, last.length + seg.length)
                continue
        segs.append(seg)


# --- names ---------------------------------------------------------------------------------


def _unescape(raw: str) -> str:
    """Decode ``\\ooo`` (a byte) and ``\\\\`` escapes; the bytes must be UTF-8. ValueError."""
    if "\\" not in raw:
        return raw
    out = bytearray()
    i = 0
    n = len(raw)
    while i < n:
        j = raw.find("\\", i)
        if j < 0:
            out += raw[i:].encode("utf-8")
            break
        out += raw[i:j].encode("utf-8")
        if raw.startswith("\\\\", j):
            out += b"\\"
            i = j + 2
        elif _OCTAL.fullmatch(raw, j + 1, j + 4) is not None:
            out.append(int(raw[j + 1 : j + 4], 8))
            i = j + 4
        else:
            raise ValueError(f"bad escape {raw[j : j + 4]!r} (expected \\ and 3 octal digits)")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError("escaped bytes are not valid UTF-8") from exc


def _escape(name: str) -> str:
    """Escape a path component: backslash, colon, whitespace and unprintable chars as octal."""
    parts: list[str] = []
    for ch in name:
        if ch in "\\:" or ch.isspace() or not ch.isprintable():
            parts.extend(f"\\{b:03o}" for b in ch.encode("utf-8"))
        else:
            parts.append(ch)
    return "".join(parts)


def _path_problem(path: str, what: str, shown: str | None = None) -> str | None:
    """Why ``path`` (components joined by "/") is not a valid name, or None."""
    shown = repr((path if shown is None else shown)[:80])
    if not path:
        return f"empty {what}"
    if "\x00" in path:
        return f"NUL character in {what} {shown}"
    for part in path.split("/"):
        if part == "":
            return f"empty path component in {what} {shown}"
        if part in (".", ".."):
            return f"{part!r} path component in {what} {shown}"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return f"{what} {shown} is not valid Unicode text"
    return None


# --- parsing -------------------------------------------------------------------------------


def _fail(lineno: int, message: str) -> InvalidManifest:
    return InvalidManifest(f"line {lineno}: {message}", line=lineno)


def _parse_stream_name(lineno: int, raw: str) -> str:
    if raw == "":
        raise _fail(lineno, "empty stream name")
    if not raw.startswith("."):
        raise _fail(lineno, f"stream name {raw[:80]!r} does not start with '.'")
    try:
        name = _unescape(raw)
    except ValueError as exc:
        raise _fail(lineno, f"stream name: {exc}") from exc
    if name != ".":
        if name == "./" or name.endswith("/"):
            raise _fail(lineno, f"stream name {name[:80]!r} ends with '/'")
        if not name.startswith("./"):
            raise _fail(lineno, f"stream name {name[:80]!r} does not start with './'")
        problem = _path_problem(name[2:], "stream name", name)
        if problem is not None:
            raise _fail(lineno, problem)
    return name


def _parse_file_token(lineno: int, raw: str, stream_size: int) -> FileToken:
    pos_text, _, rest = raw.partition(":")
    len_text, colon, name_raw = rest.partition(":")
    shown = raw if len(raw) <= 80 else raw[:80] + "..."
    if not colon or _NUMBER.fullmatch(pos_text) is None or _NUMBER.fullmatch(len_text) is None:
        raise _fail(lineno, f"bad file token {shown!r} (expected <pos>:<len>:<name>)")
    if name_raw == "":
        raise _fail(lineno, f"file token {shown!r} has an empty file name")
    try:
        name = _unescape(name_raw)
    except ValueError as exc:
        raise _fail(lineno, f"file name {name_raw[:80]!r}: {exc}") from exc
    problem = _path_problem(name, "file name")
    if problem is not None:
        raise _fail(lineno, problem)
    position, length = int(pos_text), int(len_text)
    if position + length > stream_size:
        raise _fail(
            lineno,
            f"file token {pos_text}:{len_text} goes past the end of the stream data ({stream_size} bytes)",
        )
    return FileToken(position, length, name)


def _parse_line(lineno: int, line: str) -> Stream:
    bad = _FORBIDDEN.search(line)
    if bad is not None:
        ch = bad.group(0)
        kind = {"\t": "TAB", "\r": "carriage return", "\x00": "NUL"}.get(ch, "control")
        raise _fail(lineno, f"{kind} character U+{ord(ch):04X} (escape it as \\ooo)")
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _fail(lineno, "text is not valid UTF-8 (lone surrogate)") from exc
    raw_tokens = line.split(" ")
    name = _parse_stream_name(lineno, raw_tokens[0])
    if "" in raw_tokens[1:]:
        raise _fail(lineno, "empty token (two spaces in a row, or a space at the end)")
    locators: list[str] = []
    tokens: list[FileToken] = []
    size = 0
    for raw in raw_tokens[1:]:
        if ":" in raw or tokens:
            if ":" not in raw:
                try:
                    parse_locator(raw)
                except InvalidLocator:
                    raise _fail(lineno, f"bad file token {raw[:80]!r}") from None
                raise _fail(lineno, f"locator {raw[:80]!r} after a file token")
            if not locators:
                raise _fail(lineno, "stream has no locator")
            tokens.append(_parse_file_token(lineno, raw, size))
            continue
        try:
            loc = parse_locator(raw)
        except InvalidLocator as exc:
            raise _fail(lineno, exc.message) from exc
        assert loc.size is not None
        locators.append(str(loc))
        size += loc.size
    if not locators:
        raise _fail(lineno, "stream has no locator")
    if not tokens:
        raise _fail(lineno, "stream has no file token")
    return Stream(name, tuple(locators), tuple(tokens))


def parse_manifest(text: str) -> Manifest:
    """Parse manifest v1 text; raise ``InvalidManifest`` (with the line number) if malformed."""
    if not isinstance(text, str):
        raise InvalidManifest(f"manifest must be text, not {type(text).__name__}")
    if text == "":
        return Manifest(())
    if not text.endswith("\n"):
        lineno = text.count("\n") + 1
        raise _fail(lineno, "missing trailing newline")
    streams: list[Stream] = []
    for lineno, line in enumerate(text[:-1].split("\n"), start=1):
        if line == "":
            raise _fail(lineno, "empty line")
        streams.append(_parse_line(lineno, line))
    return Manifest(tuple(streams))


# --- formatting ----------------------------------------------------------------------------


def _checked_segment(path: str, seg: Segment) -> Segment:
    try:
        loc = parse_locator(seg.locator)
    except InvalidLocator as exc:
        raise InvalidManifest(f"file {path!r}: {exc.message}") from exc
    size = loc.size
    assert size is not None
    if seg.offset < 0 or seg.length < 0 or seg.offset + seg.length > size:
        raise InvalidManifest(f"file {path!r}: segment {seg.offset}:{seg.length} is outside block {loc}")
    return Segment(str(loc), seg.offset, seg.length)


def _format_stream(name: str, files: list[tuple[str, list[Segment]]]) -> str:
    starts: dict[str, int] = {}
    total = 0
    for _, segs in files:
        for seg in segs:
            if seg.locator not in starts:
                starts[seg.locator] = total
                total += _block_size(seg.locator)
    words = [_escape_stream_name(name)]
    words.extend(starts or [EMPTY_LOCATOR])
    for file_name, segs in files:
        escaped = _escape(file_name)
        ranges: list[list[int]] = []
        for seg in segs:
            pos = starts[seg.locator] + seg.offset
            if ranges and ranges[-1][0] + ranges[-1][1] == pos:
                ranges[-1][1] += seg.length
            else:
                ranges.append([pos, seg.length])
        words.extend(f"{pos}:{length}:{escaped}" for pos, length in ranges or [[0, 0]])
    return " ".join(words) + "\n"


def _escape_stream_name(name: str) -> str:
    if name == ".":
        return name
    return "./" + "/".join(_escape(part) for part in name[2:].split("/"))


def format_manifest(files: Mapping[str, Sequence[Segment]]) -> str:
    """The normalized manifest of ``path -> segments``; raise ``InvalidManifest`` on bad input.

    One line per directory, sorted by name; files sorted within it; each block listed once
    per stream in order of first use; adjacent segments joined; an empty file is ``0:0:name``
    (with the empty block's locator when its stream has no data).
    """
    streams: dict[str, list[tuple[str, list[Segment]]]] = {}
    for path, segments in files.items():
        if not isinstance(path, str):
            raise InvalidManifest(f"file path must be text, not {type(path).__name__}")
        problem = _path_problem(path, "file path")
        if problem is not None:
            raise InvalidManifest(problem)
        directory, _, file_name = path.rpartition("/")
        stream_name = f"./{directory}" if directory else "."
        segs: list[Segment] = []
        _extend_merged(segs, (_checked_segment(path, seg) for seg in segments))
        streams.setdefault(stream_name, []).append((file_name, segs))
    return "".join(
        _format_stream(name, sorted(streams[name], key=lambda item: item[0])) for name in sorted(streams)
    )


def normalize(text: str) -> str:
    """Parse a manifest and format it back normalized; idempotent."""
    return format_manifest(parse_manifest(text).files())
