"""Property tests of the Keep codecs: round trips, idempotence, and only documented errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.core.blocks.locator import MAX_SIZE, Locator, parse_locator
from lakectl.core.blocks.manifest import Segment, format_manifest, normalize, parse_manifest
from lakectl.core.blocks.signing import MAX_EXPIRY, sign, verify
from lakectl.errors import InvalidLocator, InvalidManifest, SignatureError

EMPTY = "d41d8cd98f00b204e9800998ecf8427e"
BOUNDED = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

md5s = st.text("0123456789abcdef", min_size=32, max_size=32)
sizes = st.integers(0, MAX_SIZE) | st.integers(0, 100)
plain_hints = st.from_regex(r"[B-QS-Z][-A-Za-z0-9@_]{0,12}", fullmatch=True)
sign_hints = st.builds(
    lambda mac, expiry: f"A{mac}@{expiry:08x}",
    st.text("0123456789abcdef", min_size=40, max_size=40),
    st.integers(0, MAX_EXPIRY),
)


@st.composite
def locators(draw: st.DrawFn) -> Locator:
    hints = draw(st.lists(plain_hints, max_size=3))
    if draw(st.booleans()):
        hints.insert(draw(st.integers(0, len(hints))), draw(sign_hints))
    return Locator(draw(md5s), draw(sizes), tuple(hints))


@BOUNDED
@given(locators())
def test_locator_format_parse_round_trip(loc: Locator) -> None:
    text = str(loc)
    parsed = parse_locator(text)
    assert parsed == loc
    assert str(parsed) == text
    assert parsed.bare == f"{loc.md5}+{loc.size}"
    unsigned = parsed.without_signature()
    assert unsigned.signature is None
    assert unsigned.hints == tuple(h for h in loc.hints if not h.startswith("A"))
    assert parse_locator(str(unsigned)) == unsigned


@BOUNDED
@given(st.text())
def test_junk_locator_raises_only_invalid_locator(text: str) -> None:
    try:
        loc = parse_locator(text)
    except InvalidLocator:
        return
    assert str(loc) == text


@BOUNDED
@given(
    locators(),
    st.binary(min_size=32, max_size=32),
    st.text(max_size=40),
    st.integers(1, MAX_EXPIRY),
    st.data(),
)
def test_sign_verify_round_trip(
    loc: Locator, key: bytes, token: str, expiry: int, data: st.DataObject
) -> None:
    signed = sign(str(loc), key, token, expiry)
    now = data.draw(st.integers(0, expiry - 1))
    verified = verify(signed, key, token, now=now)
    assert verified.bare == loc.bare
    assert verified.without_signature() == loc.without_signature()
    assert verified.signature is not None
    assert verified.signature[1] == expiry

    late = data.draw(st.integers(expiry, MAX_EXPIRY + 10))
    _refused(signed, key, token, late)
    # Same-length keys: HMAC zero-pads short keys, so b"k" and b"k\0" are the same key.
    other_key = data.draw(st.binary(min_size=32, max_size=32).filter(lambda k: k != key))
    _refused(signed, other_key, token, now)
    other_token = data.draw(st.text(max_size=40).filter(lambda t: t != token))
    _refused(signed, key, other_token, now)

    # md5, size and the +A hint are covered; other hints (routing hints) are not signed.
    hint_at = signed.index("+A")
    covered = [*range(len(loc.bare)), *range(hint_at, hint_at + 51)]
    i = data.draw(st.sampled_from(covered))
    ch = data.draw(st.sampled_from("0123456789abcdef+@AZ"))
    tampered = signed[:i] + ch + signed[i + 1 :]
    if tampered != signed:
        _refused(tampered, key, token, now)


def _refused(signed: str, key: bytes, token: str, now: int) -> None:
    try:
        verify(signed, key, token, now=now)
    except SignatureError:
        return
    raise AssertionError(f"accepted {signed!r}")


@BOUNDED
@given(st.text(), st.binary(max_size=8), st.text(max_size=8))
def test_junk_signed_locator_raises_only_signature_error(text: str, key: bytes, token: str) -> None:
    try:
        verify(text, key, token, now=0)
    except SignatureError:
        return
    raise AssertionError(f"accepted {text!r}")


# --- manifests -----------------------------------------------------------------------------

components = st.sampled_from(["a", "b", "dir", "x y", "été", "年报.csv", "a:b", "c\\d"]) | st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="/\x00"),
    min_size=1,
    max_size=8,
).filter(lambda s: s not in (".", ".."))
paths = st.lists(components, min_size=1, max_size=3).map("/".join)
blocks = st.lists(
    st.builds(lambda md5, size: f"{md5}+{size}", md5s, st.integers(0, 40)),
    min_size=1,
    max_size=6,
    unique=True,
)


@st.composite
def segments_in(draw: st.DrawFn, pool: Sequence[str]) -> Segment:
    locator = draw(st.sampled_from(pool))
    size = int(locator.split("+")[1])
    offset = draw(st.integers(0, size))
    return Segment(locator, offset, draw(st.integers(0, size - offset)))


@st.composite
def file_trees(draw: st.DrawFn) -> dict[str, list[Segment]]:
    pool = draw(blocks)
    return draw(st.dictionaries(paths, st.lists(segments_in(pool), max_size=5), max_size=8))


def canonical(files: Mapping[str, Sequence[Segment]]) -> dict[str, list[Segment]]:
    """What a tree means: zero-length segments dropped, contiguous pieces of a block joined."""
    out: dict[str, list[Segment]] = {}
    for path, segs in files.items():
        merged: list[Segment] = []
        for seg in segs:
            if seg.length == 0:
                continue
            if merged:
                last = merged[-1]
                if last.locator == seg.locator and last.offset + last.length == seg.offset:
                    merged[-1] = Segment(last.locator, last.offset, last.length + seg.length)
                    continue
            merged.append(seg)
        out[path] = merged
    return out


@BOUNDED
@given(file_trees())
def test_manifest_format_parse_round_trip(files: dict[str, list[Segment]]) -> None:
    text = format_manifest(files)
    parsed = parse_manifest(text)
    assert parsed.files() == canonical(files)
    assert normalize(text) == text
    names = [s.name for s in parsed.streams]
    assert names == sorted(set(names))
    for stream in parsed.streams:
        assert len(set(stream.locators)) == len(stream.locators)
        assert all("/" not in t.name for t in stream.tokens)
        file_names = [t.name for t in stream.tokens]
        assert file_names == sorted(file_names)


def _escape_spaces(name: str) -> str:
    return name.replace("\\", "\\134").replace(" ", "\\040")


@st.composite
def raw_manifests(draw: st.DrawFn) -> str:
    """Valid but not normalized manifests: repeated streams, shared blocks, split files."""
    pool = draw(blocks)
    names = st.sampled_from(["a", "b", "x y", "d/e", "été"])
    lines = []
    for _ in range(draw(st.integers(0, 4))):
        stream = draw(st.sampled_from([".", "./d", "./x y", "./d/e"]))
        locs = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))
        total = sum(int(loc.split("+")[1]) for loc in locs)
        tokens = []
        for _ in range(draw(st.integers(1, 4))):
            pos = draw(st.integers(0, total))
            length = draw(st.integers(0, total - pos))
            tokens.append(f"{pos}:{length}:{_escape_spaces(draw(names))}")
        lines.append(" ".join([_escape_spaces(stream), *locs, *tokens]) + "\n")
    return "".join(lines)


@BOUNDED
@given(raw_manifests())
def test_normalize_is_idempotent_and_keeps_the_files(text: str) -> None:
    files = parse_manifest(text).files()
    once = normalize(text)
    assert normalize(once) == once
    assert parse_manifest(once).files() == files


interesting = st.lists(st.sampled_from([*". \n:0123456789abcdef+/\\AZ@é\t\x00", "\\040", EMPTY + "+0"])).map(
    "".join
)


@BOUNDED
@given(st.text() | interesting)
def test_junk_manifest_raises_only_invalid_manifest(text: str) -> None:
    try:
        manifest = parse_manifest(text)
    except InvalidManifest as exc:
        assert str(exc).startswith("line ")
        assert "\n" not in str(exc)
        return
    normalize(text)
    manifest.files()


@BOUNDED
@given(raw_manifests(), st.data())
def test_mutated_manifest_raises_only_invalid_manifest(text: str, data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "replace", "delete"]))
        ch = data.draw(st.sampled_from(list(" \n:0123456789+/\\.A@\t\x00é")))
        if op == "insert":
            text = text[:i] + ch + text[i:]
        elif op == "replace":
            text = text[:i] + ch + text[i + 1 :]
        else:
            text = text[:i] + text[i + 1 :]
    try:
        files = parse_manifest(text).files()
    except InvalidManifest:
        return
    once = normalize(text)
    assert normalize(once) == once
    assert parse_manifest(once).files() == files
