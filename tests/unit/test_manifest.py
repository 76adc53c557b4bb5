"""Keep manifest v1: the documented examples, normalization, and every grammar rule enforced."""

from __future__ import annotations

import pytest

from lakectl.core.blocks.locator import EMPTY_LOCATOR
from lakectl.core.blocks.manifest import (
    FileToken,
    Manifest,
    Segment,
    Stream,
    format_manifest,
    normalize,
    parse_manifest,
)
from lakectl.errors import InvalidArgument, InvalidManifest

A33 = "930625b054ce894ac40596c3f5a0d947+33"
B64M = "c449ed86671e4a34a8b8b9430850beba+67108864"
C22M = "09fcfea01c3a141b89dd0dcfa1b7768e+22534144"
X10 = "0123456789abcdef0123456789abcdef+10"
Y5 = "fedcba9876543210fedcba9876543210+5"
SIGNED_A33 = A33 + "+A1f27a35dd9af37191d63ad8eb8985624451e7b79@5835c8bc"

# The examples of the Keep manifest format documentation.
DOC_FOUR_FILES = f". {A33} 0:0:a 0:0:b 0:33:output.txt\n./c {EMPTY_LOCATOR} 0:0:d\n"
DOC_SIGNED = (
    f". {SIGNED_A33} 0:0:a 0:0:b 0:33:output.txt\n"
    f"./c {EMPTY_LOCATOR}+A27117dcd30c013a6e85d6d74c9a50179a1446efa@5835c8bc 0:0:d\n"
)
DOC_MULTI_BLOCK = f". {B64M} {C22M} 0:89643008:Docker\\040image.tar\n"


def test_empty_manifest() -> None:
    assert parse_manifest("").files() == {}
    assert format_manifest({}) == ""
    assert normalize("") == ""


def test_documented_four_files() -> None:
    manifest = parse_manifest(DOC_FOUR_FILES)
    assert [s.name for s in manifest.streams] == [".", "./c"]
    assert manifest.streams[0].tokens[2] == FileToken(0, 33, "output.txt")
    assert manifest.files() == {
        "a": [],
        "b": [],
        "output.txt": [Segment(A33, 0, 33)],
        "c/d": [],
    }
    assert normalize(DOC_FOUR_FILES) == DOC_FOUR_FILES


def test_documented_signed_manifest_keeps_signatures() -> None:
    files = parse_manifest(DOC_SIGNED).files()
    assert files["output.txt"] == [Segment(SIGNED_A33, 0, 33)]
    # The empty file needs no block: its stream gets the unsigned empty-block locator.
    assert normalize(DOC_SIGNED) == DOC_SIGNED.split("\n")[0] + f"\n./c {EMPTY_LOCATOR} 0:0:d\n"


def test_documented_multi_block_file_with_space() -> None:
    files = parse_manifest(DOC_MULTI_BLOCK).files()
    assert files == {
        "Docker image.tar": [Segment(B64M, 0, 67108864), Segment(C22M, 0, 22534144)],
    }
    assert normalize(DOC_MULTI_BLOCK) == DOC_MULTI_BLOCK


def test_positions_are_offsets_into_the_concatenated_blocks() -> None:
    text = f"./d {X10} {Y5} 8:4:a 0:3:b 12:3:c\n"
    assert parse_manifest(text).files() == {
        "d/a": [Segment(X10, 8, 2), Segment(Y5, 0, 2)],
        "d/b": [Segment(X10, 0, 3)],
        "d/c": [Segment(Y5, 2, 3)],
    }


def test_zero_size_blocks_are_skipped() -> None:
    text = f". {X10} {EMPTY_LOCATOR} {Y5} 5:10:a\n"
    assert parse_manifest(text).files() == {"a": [Segment(X10, 5, 5), Segment(Y5, 0, 5)]}


def test_same_name_tokens_concatenate_within_and_across_streams() -> None:
    text = f". {X10} 0:2:f 5:2:f 7:3:f\n./sub {Y5} 0:5:g\n. {Y5} 1:1:f 0:1:sub/g\n"
    files = parse_manifest(text).files()
    # 5:2 and 7:3 are contiguous in one block: merged.
    assert files["f"] == [Segment(X10, 0, 2), Segment(X10, 5, 5), Segment(Y5, 1, 1)]
    assert files["sub/g"] == [Segment(Y5, 0, 5), Segment(Y5, 0, 1)]
    normalized = normalize(text)
    assert normalized == f". {X10} {Y5} 0:2:f 5:5:f 11:1:f\n./sub {Y5} 0:5:g 0:1:g\n"
    assert parse_manifest(normalized).files() == files


def test_filename_with_slashes_moves_to_its_stream() -> None:
    text = f". {X10} 0:10:dir/sub/f\n"
    assert parse_manifest(text).files() == {"dir/sub/f": [Segment(X10, 0, 10)]}
    assert normalize(text) == f"./dir/sub {X10} 0:10:f\n"


def test_octal_escapes_are_decoded_and_written_back() -> None:
    text = f"./a\\040b {X10} 0:1:tab\\011x 1:1:\\303\\251t\\303\\251 2:1:back\\\\slash 3:1:c\\072d\n"
    files = parse_manifest(text).files()
    assert set(files) == {"a b/tab\tx", "a b/été", "a b/back\\slash", "a b/c:d"}
    assert normalize(text) == (
        f"./a\\040b {X10} 2:1:back\\134slash 3:1:c\\072d 0:1:tab\\011x 1:1:\u00e9t\u00e9\n"
    )


def test_unicode_names_stay_readable_and_odd_characters_are_escaped() -> None:
    files = {
        "données/年报.csv": [Segment(X10, 0, 10)],
        "a\u00a0b": [],
        "new\nline": [],
    }
    text = format_manifest(files)
    assert text == f". {EMPTY_LOCATOR} 0:0:a\\302\\240b 0:0:new\\012line\n./données {X10} 0:10:年报.csv\n"
    assert parse_manifest(text).files() == files


def test_normalized_form() -> None:
    files = {
        "z/late": [Segment(Y5, 0, 5)],
        "b": [Segment(Y5, 1, 2), Segment(X10, 0, 10)],
        "a": [Segment(X10, 0, 4), Segment(X10, 4, 6), Segment(Y5, 0, 0)],
        "empty": [],
        "z/only-empty": [],
        "y/e": [Segment(X10, 3, 0)],
    }
    assert format_manifest(files) == (
        f". {X10} {Y5} 0:10:a 11:2:b 0:10:b 0:0:empty\n"
        f"./y {EMPTY_LOCATOR} 0:0:e\n"
        f"./z {Y5} 0:5:late 0:0:only-empty\n"
    )


def test_segments_spanning_consecutive_blocks_merge_into_one_token() -> None:
    files = {"f": [Segment(X10, 4, 6), Segment(Y5, 0, 5)]}
    assert format_manifest(files) == f". {X10} {Y5} 4:11:f\n"


def test_normalize_is_idempotent_on_examples() -> None:
    for text in [DOC_FOUR_FILES, DOC_SIGNED, DOC_MULTI_BLOCK, f". {X10} 0:2:f 5:2:f\n"]:
        once = normalize(text)
        assert normalize(once) == once


def test_file_and_directory_of_the_same_name() -> None:
    files = {"a": [Segment(X10, 0, 1)], "a/b": [Segment(X10, 1, 1)]}
    text = format_manifest(files)
    assert text == f". {X10} 0:1:a\n./a {X10} 1:1:b\n"
    assert parse_manifest(text).files() == files


def test_records_are_usable_directly() -> None:
    stream = Stream("./d", (X10, Y5), (FileToken(9, 3, "x"),))
    assert stream.size == 15
    assert stream.path_of(stream.tokens[0]) == "d/x"
    assert stream.segments(stream.tokens[0]) == [Segment(X10, 9, 1), Segment(Y5, 0, 2)]
    assert Manifest((stream,)).files() == {"d/x": [Segment(X10, 9, 1), Segment(Y5, 0, 2)]}
    with pytest.raises(InvalidManifest):
        Manifest((Stream(".", (X10,), (FileToken(9, 3, "x"),)),)).files()


L = EMPTY_LOCATOR
BAD_MANIFESTS = [
    (f". {L} 0:0:a", 1, "missing trailing newline"),
    (f". {L} 0:0:a\n. {L} 0:0:b", 2, "missing trailing newline"),
    (f". {L} 0:0:a\n\n. {L} 0:0:b\n", 2, "empty line"),
    ("\n", 1, "empty line"),
    (f" {L} 0:0:a\n", 1, "empty stream name"),
    (f"foo {L} 0:0:a\n", 1, "does not start with '.'"),
    (f"{L} 0:0:a\n", 1, "does not start with '.'"),
    (f".foo {L} 0:0:a\n", 1, "does not start with './'"),
    (f"./ {L} 0:0:a\n", 1, "ends with '/'"),
    (f"./a/ {L} 0:0:a\n", 1, "ends with '/'"),
    (f".//a {L} 0:0:a\n", 1, "empty path component"),
    (f"./a//b {L} 0:0:a\n", 1, "empty path component"),
    (f"./.. {L} 0:0:a\n", 1, "'..' path component"),
    (f"./a/. {L} 0:0:a\n", 1, "'.' path component"),
    (f"./a\\000 {L} 0:0:a\n", 1, "NUL"),
    (".\n", 1, "no locator"),
    (". 0:0:a\n", 1, "no locator"),
    (f". {L}\n", 1, "no file token"),
    (f". {L} 0:0:a {L}\n", 1, "locator 'd41d8cd98f00b204e9800998ecf8427e+0' after a file token"),
    (f". {L} 0:0:a junk\n", 1, "bad file token 'junk'"),
    (". d41d8cd98f00b204e9800998ecf8427e 0:0:a\n", 1, "missing size hint"),
    (". d41d8cd98f00b204e9800998ecf8427e+0+z 0:0:a\n", 1, "uppercase"),
    (". nonsense 0:0:a\n", 1, "digest"),
    (f". {L} 0:0\n", 1, "bad file token"),
    (f". {L} 0::a\n", 1, "bad file token"),
    (f". {L} :0:a\n", 1, "bad file token"),
    (f". {L} -1:0:a\n", 1, "bad file token"),
    (f". {L} 0:x:a\n", 1, "bad file token"),
    (f". {L} 0:0:\n", 1, "empty file name"),
    (f". {X10} 0:11:a\n", 1, "past the end of the stream data (10 bytes)"),
    (f". {X10} 11:0:a\n", 1, "past the end"),
    (f". {X10} {Y5} 14:2:a\n", 1, "(15 bytes)"),
    (f". {L} 0:0:/a\n", 1, "empty path component"),
    (f". {L} 0:0:a/\n", 1, "empty path component"),
    (f". {L} 0:0:a//b\n", 1, "empty path component"),
    (f". {L} 0:0:..\n", 1, "'..' path component"),
    (f". {L} 0:0:.\n", 1, "'.' path component"),
    (f". {L} 0:0:a/../b\n", 1, "'..' path component"),
    (f". {L} 0:0:a\\000b\n", 1, "NUL"),
    (f". {L} 0:0:a\x00b\n", 1, "NUL"),
    (f". {L} 0:0:a\tb\n", 1, "TAB"),
    (f".\t{L} 0:0:a\n", 1, "TAB"),
    (f". {L} 0:0:a\r\n", 1, "carriage return"),
    (f". {L} 0:0:a\x0bb\n", 1, "control character"),
    (f". {L} 0:0:a\x85b\n", 1, "control character"),
    (f". {L}  0:0:a\n", 1, "empty token"),
    (f". {L} 0:0:a \n", 1, "empty token"),
    (f". {L} 0:0:a\\\n", 1, "bad escape"),
    (f". {L} 0:0:a\\04\n", 1, "bad escape"),
    (f". {L} 0:0:a\\400\n", 1, "bad escape"),
    (f". {L} 0:0:a\\x41\n", 1, "bad escape"),
    (f". {L} 0:0:a\\8\n", 1, "bad escape"),
    (f". {L} 0:0:a\\377\n", 1, "not valid UTF-8"),
    (f"./b\\q {L} 0:0:a\n", 1, "bad escape"),
    (f". {L} 0:0:a\ud800\n", 1, "UTF-8"),
    (f". {L} 0:0:a\n. {L} 0:0:b\n./x {L} 0:1:c\n", 3, "past the end"),
]


@pytest.mark.parametrize(("text", "line", "why"), BAD_MANIFESTS)
def test_each_rule_is_enforced_with_its_line_number(text: str, line: int, why: str) -> None:
    with pytest.raises(InvalidManifest) as info:
        parse_manifest(text)
    message = str(info.value)
    assert message.startswith(f"line {line}: ")
    assert why in message
    assert "\n" not in message
    assert info.value.details["line"] == line
    assert isinstance(info.value, InvalidArgument)


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"": []}, "empty file path"),
        ({"/a": []}, "empty path component"),
        ({"a/": []}, "empty path component"),
        ({"a//b": []}, "empty path component"),
        ({"a/../b": []}, "'..' path component"),
        ({"./a": []}, "'.' path component"),
        ({"a\x00": []}, "NUL"),
        ({"a\ud800": []}, "not valid Unicode"),
        ({"a": [Segment("nonsense", 0, 0)]}, "digest"),
        ({"a": [Segment("d41d8cd98f00b204e9800998ecf8427e", 0, 0)]}, "missing size hint"),
        ({"a": [Segment(X10, 5, 6)]}, "outside block"),
        ({"a": [Segment(X10, -1, 1)]}, "outside block"),
        ({"a": [Segment(X10, 0, -1)]}, "outside block"),
    ],
)
def test_format_rejects_bad_trees(files: dict[str, list[Segment]], why: str) -> None:
    with pytest.raises(InvalidManifest, match=why.replace(".", r"\.")):
        format_manifest(files)
