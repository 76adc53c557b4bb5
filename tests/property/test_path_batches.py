"""A batch of new object paths (a recursive upload's) is refused exactly as its paths one by one
would be: the same first bad path, the same message; a valid batch passes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakectl.core.limits import MAX_PATH_BYTES
from lakectl.core.uri import check_new_path, check_new_paths
from lakectl.errors import InvalidPath

BOUNDED = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Segments a path is made of: plain names, and every kind of bad or borderline one.
SEGMENTS = st.one_of(
    st.sampled_from(["a", "b.csv", "dir", "x y", "é", "日本", "..a", ".hidden", "a.", "", ".", ".."]),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8),
    st.sampled_from(["\x00", "\x1b[31m", "\u202e", "\ud800", "\x7f", "\n"]),
    st.just("w" * 300),
)
PATHS = st.lists(SEGMENTS, min_size=1, max_size=5).map("/".join)


def one_by_one(paths: list[str]) -> str | None:
    """The message of the first path check_new_path refuses, or None."""
    for path in paths:
        try:
            check_new_path(path)
        except InvalidPath as exc:
            return str(exc)
    return None


@BOUNDED
@given(st.lists(PATHS, max_size=6))
def test_a_batch_is_refused_as_its_paths_one_by_one(paths: list[str]) -> None:
    expected = one_by_one(paths)
    if expected is None:
        check_new_paths(paths)
    else:
        with pytest.raises(InvalidPath) as refused:
            check_new_paths(paths)
        assert str(refused.value) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "",  # empty
        "/abs",  # absolute
        "a/./b",
        "a/..",
        "./a",
        "tab\there",
        "nul\x00",
        "é" * (MAX_PATH_BYTES // 2 + 1),  # 1026 bytes in 513 characters
    ],
)
@pytest.mark.parametrize("neighbour", ["ok/b.csv", "ok//double"])
def test_one_bad_path_among_valid_ones_is_refused(bad: str, neighbour: str) -> None:
    with pytest.raises(InvalidPath) as refused:
        check_new_paths(["ok/a.csv", neighbour, bad, "z"])
    with pytest.raises(InvalidPath) as alone:
        check_new_path(bad)
    assert str(refused.value) == str(alone.value)
    check_new_paths(["ok/a.csv", neighbour, "z", "é" * (MAX_PATH_BYTES // 2)])
